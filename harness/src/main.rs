//! The `conformance` CLI.
fn main() {}
