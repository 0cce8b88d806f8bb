//! Placeholder until the adapter protocol lands.
fn main() {}
