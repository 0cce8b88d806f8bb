//! Fuzz target `modes`: the property lives in `harness::fuzzing::modes` (the default, fallback,
//! cached and aged modes observe alike on an edited tree), which a stable `cargo test` also runs
//! over every file of `fuzz/corpus/modes` and on generated edit sequences.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::modes(data));
