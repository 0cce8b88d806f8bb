//! Fuzz target `scenario`: the property lives in `harness::fuzzing::scenario`, which a stable `cargo test`
//! also runs over every file of `fuzz/corpus/scenario`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::scenario(data));
