//! The checked-in harness/protocol.schema.json is the schema generated from the protocol's Rust
//! types, so the two can never drift apart. After changing a wire type, regenerate it with
//! `UPDATE_SCHEMA=1 cargo test -p harness --test protocol_schema` and commit the result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::Path;

#[test]
fn checked_in_schema_matches_the_generated_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol.schema.json");
    let generated = harness::run::adapter::protocol_schema();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let checked_in: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is missing or stale; regenerate it with `UPDATE_SCHEMA=1 cargo test -p harness --test protocol_schema`",
        path.display()
    );
}
