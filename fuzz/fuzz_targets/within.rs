//! Fuzz target `within`: the property lives in `harness::fuzzing::within`, which a stable `cargo test`
//! also runs over every file of `fuzz/corpus/within`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::within(data));
