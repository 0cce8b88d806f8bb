//! Fuzz target `protocol`: the property lives in `harness::fuzzing::protocol`, which a stable `cargo test`
//! also runs over every file of `fuzz/corpus/protocol`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::protocol(data));
