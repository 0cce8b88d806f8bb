//! Fuzz target `frontmatter`: the property lives in `harness::fuzzing::frontmatter`, which a stable `cargo test`
//! also runs over every file of `fuzz/corpus/frontmatter`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::frontmatter(data));
