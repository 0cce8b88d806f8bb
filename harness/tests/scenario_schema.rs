//! The checked-in JSON Schema of the scenario format (spec-cases/scenario.schema.json) is the one
//! generated from the Rust types. Regenerate with
//! `UPDATE_SCHEMA=1 cargo test -p harness --test scenario_schema`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::path::Path;

#[test]
fn checked_in_scenario_schema_matches_the_rust_types() {
    let schema = schemars::schema_for!(harness::case::scenario::Scenario);
    let generated = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec-cases/scenario.schema.json");
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "spec-cases/scenario.schema.json is stale: run UPDATE_SCHEMA=1 cargo test -p harness --test scenario_schema"
    );
}
