//! The generated rule trees that the benches and `conformance bench` measure on: [`tree`] lays
//! out `n` rule modules of about 1 KiB, 4 to 7 folders deep under `.elowen/rules` (counting
//! `.elowen` and `rules`), half of them conditional with 1 to 3 globs, plus nested AGENTS.md
//! files in source folders and a root AGENTS.md. The same seed gives the same tree. It only
//! computes the files; the caller writes them where it wants.

/// A small deterministic generator (xorshift64*): enough for shaping a tree, no crate needed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// The source areas: each has `src/AREA/AGENTS.md` and `src/AREA/handlers/AGENTS.md`.
pub const AREAS: &[&str] = &[
    "api", "auth", "billing", "cli", "core", "db", "docs", "events", "files", "gateway", "http", "i18n", "jobs", "kv",
    "logs", "mail", "metrics", "net", "orders", "pay", "queue", "rpc", "search", "sql", "storage", "sync", "tasks",
    "ui", "users", "web",
];
const SUBS: &[&str] = &["handlers", "models", "routes", "util", "v1", "v2", "internal", "public"];
const EXTS: &[&str] = &["ts", "rs", "go", "py"];

/// A generated tree's files and what to do with them.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Every file, root-relative and /-form, with its text, in the order they were made.
    pub files: Vec<(String, String)>,
    /// How many rule modules.
    pub modules: usize,
    /// The modules' total size in bytes.
    pub bytes: u64,
    /// The conditional modules' globs, one list per conditional module.
    pub patterns: Vec<Vec<String>>,
    /// Source paths to touch, /-form and root-relative, many of them matching.
    pub touched: Vec<String>,
}

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from.get(rng.below(from.len())).copied().unwrap_or("x")
}

/// The tree of `n` modules with `seed`.
pub fn tree(n: usize, seed: u64) -> Tree {
    let mut rng = Rng::new(seed);
    let mut files = Vec::with_capacity(n + 2 * AREAS.len() + 1);
    let mut bytes = 0u64;
    let mut patterns = Vec::new();
    let filler = "Keep changes small, name things for what they hold, and test what you change. ".repeat(13);
    for i in 0..n {
        // `.elowen/rules` plus 2 to 5 folders: 4 to 7 deep.
        let depth = 2 + rng.below(4);
        let mut rel = String::from(".elowen/rules");
        for _ in 0..depth {
            rel.push_str(&format!("/{}-{}", pick(&mut rng, AREAS), rng.below(4)));
        }
        rel.push_str(&format!("/module-{i}.md"));
        let mut text = String::new();
        if i % 2 == 0 {
            let k = 1 + rng.below(3);
            let globs: Vec<String> = (0..k)
                .map(|_| match rng.below(3) {
                    0 => format!("src/{}/**/*.{}", pick(&mut rng, AREAS), pick(&mut rng, EXTS)),
                    1 => format!("src/{}/{}/*.{}", pick(&mut rng, AREAS), pick(&mut rng, SUBS), pick(&mut rng, EXTS)),
                    _ => format!("tests/{}/**", pick(&mut rng, AREAS)),
                })
                .collect();
            text.push_str("---\npaths:\n");
            for g in &globs {
                text.push_str(&format!("  - \"{g}\"\n"));
            }
            text.push_str("---\n");
            patterns.push(globs);
        }
        text.push_str(&format!("# Rule {i}\n\n{filler}\n"));
        bytes += text.len() as u64;
        files.push((rel, text));
    }
    for area in AREAS {
        files.push((format!("src/{area}/AGENTS.md"), format!("# {area}\nConventions of {area}.\n")));
        let sub = SUBS.first().copied().unwrap_or("sub");
        files.push((format!("src/{area}/{sub}/AGENTS.md"), format!("# {area} handlers\n")));
    }
    files.push(("AGENTS.md".into(), "# Project\n".into()));
    let touched = (0..10_000)
        .map(|_| {
            let (a, s, e) = (pick(&mut rng, AREAS), pick(&mut rng, SUBS), pick(&mut rng, EXTS));
            format!("src/{a}/{s}/file-{}.{e}", rng.below(100))
        })
        .collect();
    Tree { files, modules: n, bytes, patterns, touched }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_tree_and_half_the_modules_are_conditional() {
        let (a, b) = (tree(40, 7), tree(40, 7));
        assert_eq!(a.files, b.files);
        assert_eq!(a.patterns.len(), 20);
        let rules: Vec<&(String, String)> = a.files.iter().filter(|(p, _)| p.starts_with(".elowen/rules/")).collect();
        assert_eq!(rules.len(), 40);
        assert_eq!(a.bytes, rules.iter().map(|(_, t)| t.len() as u64).sum::<u64>());
        assert!(rules.iter().all(|(p, _)| (4..=7).contains(&(p.matches('/').count()))));
        assert_ne!(tree(40, 8).files, a.files);
    }
}
