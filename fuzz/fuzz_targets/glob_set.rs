//! Fuzz target `glob_set`: the property lives in `harness::fuzzing::glob_set` (the set matcher,
//! the one-by-one matcher and `exact_match` agree on every glob, path and platform), which a
//! stable `cargo test` also runs over every file of `fuzz/corpus/glob_set` and on generated inputs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::glob_set(data));
