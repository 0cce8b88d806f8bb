//! Fuzz target `session`: the property lives in `harness::fuzzing::session`, which a stable `cargo test`
//! also runs over every file of `fuzz/corpus/session`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::session(data));
