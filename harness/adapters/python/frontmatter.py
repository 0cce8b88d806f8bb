"""Rule-module frontmatter (seed 000, "Format and discovery") and `paths:` globs, for adapter.py.

A deliberately tiny parser for the one shape the seed shows (`paths:` with a block or flow list of
strings) and a few neighbours. Whatever it does not understand is refused with a diagnostic, never
loaded as an unconditional module: "so a misspelled path: cannot quietly turn a scoped rule set
into a global one". Line numbers follow D-FM-11 (the opening `---` is line 1).
"""
import json, re


class Refusal(Exception):
    """A file is refused: `code` (and the 1-based `line`, for frontmatter) say why."""
    def __init__(self, code, line=None):
        super().__init__(code)
        self.code, self.line = code, line


FENCE = re.compile(r"---[ \t]*")
KEY = re.compile(r"""("[^"]*"|'[^']*'|[^\s#'"\-\[\]{}][^:]*?|-[^\s:][^:]*?)[ \t]*:(?:[ \t]+(.*))?""")
PLAIN_NOT_STRING = re.compile(r"~|null|Null|NULL|true|True|TRUE|false|False|FALSE|"
                              r"[-+]?(\d[\d_]*(\.\d*)?([eE][-+]?\d+)?|\.\d+|\.inf|\.nan|0x[0-9a-fA-F]+)")


def strip_comment(s):
    """Cuts a ` # comment` that stands outside quotes."""
    quote = None
    for i, c in enumerate(s):
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i].rstrip()
    return s.strip()


def scalar(s, line):
    """One list item -> the string, or a Refusal (D-FM-9)."""
    s = s.strip()
    if s.startswith('"'):
        try:
            return json.loads(s)
        except ValueError:
            raise Refusal("frontmatter.invalid_yaml", line)
    if s.startswith("'"):
        if len(s) < 2 or not s.endswith("'"):
            raise Refusal("frontmatter.invalid_yaml", line)
        return s[1:-1].replace("''", "'")
    if s.startswith("!!str "):
        return s[6:].strip()
    if s[:1] in ("&", "*", "|", ">"):
        raise Refusal("frontmatter.invalid_yaml", line)  # anchors, aliases, block scalars: not parsed
    if s == "" or PLAIN_NOT_STRING.fullmatch(s) or s[:1] in "[{!-" or ": " in s or s.endswith(":"):
        raise Refusal("frontmatter.path_not_a_string", line)
    return s


def flow_items(s, line):
    """`[a, "b", 'c']` -> the raw items; anything unbalanced is invalid YAML."""
    if not s.endswith("]"):
        raise Refusal("frontmatter.invalid_yaml", line)
    items, cur, quote, depth, deepest = [], "", None, 0, 0
    for c in s[1:-1]:
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        cur += c
    if quote or depth or deepest > 128:  # unbalanced, or nested too deep to parse (D-FM-10)
        raise Refusal("frontmatter.invalid_yaml", line)
    items.append(cur)
    if items[-1].strip() == "" and len(items) > 1:
        items.pop()  # a trailing comma
    if any(i.strip() == "" for i in items):
        raise Refusal("frontmatter.paths_empty" if items == [""] else "frontmatter.invalid_yaml", line)
    return items


def parse_block(block):
    """The lines between the fences (line numbers from 2) -> compiled globs, or None (unconditional)."""
    lines = [(n, l) for n, l in enumerate(block, 2) if l.strip() and not l.lstrip().startswith("#")]
    if lines and lines[-1][1].rstrip() == "...":
        lines.pop()  # the document end marker
    if len(lines) == 1 and strip_comment(lines[0][1]).startswith("{"):  # a one-line flow mapping
        n, flow = lines[0][0], strip_comment(lines[0][1])
        lines = [] if flow == "{}" else [(n, i.strip()) for i in flow_items("[" + flow[1:-1] + "]", n)]
    if not lines:
        return None  # an empty block (D-FM-2)
    keys = []  # [line, key, inline value, child lines]
    for n, l in lines:
        m = KEY.fullmatch(l.rstrip()) if l[0] not in " \t" else None
        if m:
            key = m.group(1)
            keys.append([n, key[1:-1] if key[0] in "\"'" else key, strip_comment(m.group(2) or ""), []])
        elif keys:
            keys[-1][3].append((n, l))  # an indented line, or a `- item` below `paths:`
        else:
            code = "frontmatter.not_a_mapping" if l.lstrip()[:1] in ("-", "[") or ":" not in l \
                else "frontmatter.invalid_yaml"
            raise Refusal(code, 2)
    names = [k[1] for k in keys]
    if len(set(names)) != len(names):
        raise Refusal("frontmatter.invalid_yaml", keys[-1][0])  # duplicate keys (D-FM-5)
    for n, name, _, _ in keys:
        if name != "paths":
            raise Refusal("frontmatter.unknown_key", n)  # reported before any paths fault (D-FM-13)
    n, _, value, children = keys[0]
    if value.startswith("["):
        value = strip_comment(" ".join([value] + [strip_comment(l) for _, l in children]))
        raw = flow_items(value, n)
    elif value in ("", "~", "null", "Null", "NULL") and not children:
        raise Refusal("frontmatter.paths_empty", n)
    elif value == "" and all(l.lstrip().startswith("-") for _, l in children):
        raw = [strip_comment(l.lstrip()[1:]) for _, l in children]
    elif value[:1] in ("&", "*") or (value == "" and children and not KEY.fullmatch(children[0][1].strip())):
        raise Refusal("frontmatter.invalid_yaml", n)
    else:
        raise Refusal("frontmatter.paths_not_a_list", n)  # a scalar, a mapping, a tag
    if not raw:
        raise Refusal("frontmatter.paths_empty", n)
    globs = []
    for item in raw:  # the first failing item in list order is the one reported
        g = scalar(item, n)
        if g.strip() == "":
            raise Refusal("frontmatter.path_empty", n)
        globs.append(compile_glob(g, n))
    return globs


def compile_glob(g, line):
    """Checks one `paths` item (D-GLOB-3, D-GLOB-6) and returns its matcher."""
    segs = g.split("/")
    for code, bad in (("glob.absolute", g.startswith("/")), ("glob.backslash", "\\" in g),
                      ("glob.parent_segment", ".." in segs),
                      ("glob.invalid", any("**" in s and s != "**" for s in segs))):
        if bad:
            raise Refusal(code, line)
    return Glob(segs)


class Glob:
    """`*` and `?` stay inside a segment; `**` is zero or more folders, and at the end one or more
    segments (`src/**` is everything below src, not src). Everything else is literal (D-GLOB-1..8).
    Matched segment by segment with a table, never by backtracking: many `**` stay linear."""

    def __init__(self, segs):
        self.segs = [s if s == "**" else re.compile("".join(
            "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in s), re.S) for s in segs]

    def fullmatch(self, path):
        parts = path.split("/")
        n = len(parts)
        ok = [j == n for j in range(n + 1)]  # ok[j]: the globs after this one match parts[j:]
        for i in reversed(range(len(self.segs))):
            s = self.segs[i]
            if s == "**" and i == len(self.segs) - 1:
                ok = [j < n for j in range(n + 1)]
            elif s == "**":
                ok = [any(ok[j:]) for j in range(n + 1)]
            else:
                ok = [j < n and ok[j + 1] and s.fullmatch(parts[j]) is not None for j in range(n + 1)]
        return ok[0]


def parse_module(text):
    """A rule module's text -> (globs or None, body). The body is sent verbatim (D-FM-3)."""
    parts = text.split("\n")
    eol = lambda l: l[:-1] if l.endswith("\r") else l
    if FENCE.fullmatch(eol(parts[0])) and len(parts) > 1:
        for i in range(1, len(parts)):
            if FENCE.fullmatch(eol(parts[i])):
                return parse_block([eol(p) for p in parts[1:i]]), "\n".join(parts[i + 1:])
        raise Refusal("frontmatter.unterminated", 1)
    for n, l in enumerate(parts, 1):  # looks like frontmatter but is no opening (D-FM-14)
        if l.strip():
            if l.lstrip().startswith("---"):
                raise Refusal("frontmatter.malformed_opening", n)
            break
    return None, text
