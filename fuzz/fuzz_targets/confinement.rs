//! Fuzz target `confinement`: the property lives in `harness::fuzzing::confinement` (openat2 and
//! the reference's own walk observe the same, and nothing from outside the root), which a stable
//! `cargo test` also runs over every file of `fuzz/corpus/confinement`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzzing::confinement(data));
