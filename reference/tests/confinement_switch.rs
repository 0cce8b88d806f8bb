//! The test-only switch between the two resolvers: `REFERENCE_CONFINEMENT=fallback` in the
//! environment, and `force_confinement_fallback`, which overrides it for sources opened after the
//! call. One test in its own process, because the switch is process-wide.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use reference::{force_confinement_fallback, Confinement, HostSource};

#[test]
fn the_environment_and_the_switch_choose_the_resolver_of_sources_opened_afterwards() {
    let dir = tempfile::tempdir().unwrap();
    let from_env = if std::env::var_os("REFERENCE_CONFINEMENT").is_some_and(|v| v == "fallback") {
        Confinement::Fallback
    } else {
        // The CI kernel has openat2 (a kernel without it, or a seccomp filter refusing it, would
        // answer Fallback here: then this line is the one to read).
        Confinement::Kernel
    };
    assert_eq!(HostSource::new(dir.path()).unwrap().confinement(), from_env);
    let opened_before = HostSource::new(dir.path()).unwrap();
    force_confinement_fallback(true);
    assert_eq!(HostSource::new(dir.path()).unwrap().confinement(), Confinement::Fallback);
    assert_eq!(opened_before.confinement(), from_env, "a source keeps the resolver it was opened with");
    force_confinement_fallback(false);
    assert_eq!(HostSource::new(dir.path()).unwrap().confinement(), Confinement::Kernel);
}
