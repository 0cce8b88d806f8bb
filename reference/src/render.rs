//! The instruction envelope (seed 000, "Ordering and composition"): each module is sent whole,
//! with its source path, as `<instruction_module path="...">CONTENT</instruction_module>`.
//!
//! Decisions (D-RENDER-*): the source path is the root's display form joined with the /-form
//! relative path; `&`, `<`, `>` and `"` in it are escaped as XML entities; the content is
//! verbatim on the lines between the tags, with a newline added before the closing tag only when
//! the content does not already end with one; a superseding version carries
//! `supersedes="earlier version"`; modules are separated by one newline.

/// One module to render.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    /// The source path for the `path` attribute.
    pub source_path: &'a str,
    /// The sent content.
    pub content: &'a str,
    /// Whether this version supersedes an earlier one in the active context.
    pub supersedes: bool,
}

fn escape_attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Renders the parts of one activation, in order.
pub fn render(parts: &[Part<'_>]) -> String {
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("<instruction_module path=\"");
        out.push_str(&escape_attr(part.source_path));
        out.push('"');
        if part.supersedes {
            out.push_str(" supersedes=\"earlier version\"");
        }
        out.push_str(">\n");
        out.push_str(part.content);
        if !part.content.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("</instruction_module>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_in_order_with_supersedes_and_escaping() {
        let got = render(&[
            Part { source_path: "/p/src/AGENTS.md", content: "a\n", supersedes: false },
            Part { source_path: "/p/\"q\".md", content: "b", supersedes: true },
        ]);
        assert_eq!(
            got,
            "<instruction_module path=\"/p/src/AGENTS.md\">\na\n</instruction_module>\n\
             <instruction_module path=\"/p/&quot;q&quot;.md\" supersedes=\"earlier version\">\nb\n</instruction_module>"
        );
    }
}
