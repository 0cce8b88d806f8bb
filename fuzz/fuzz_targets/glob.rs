//! Fuzz target `glob`: the property lives in `harness::fuzzing::glob`, which a stable `cargo test`
//! also runs over every file of `fuzz/corpus/glob`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::glob(data));
