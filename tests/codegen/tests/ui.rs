//! trybuild UI tests: every drift and config problem reaches the user as a compile error with
//! ptc-plan's wording, and drift that keeps the config valid breaks the user's own code.
//!
//! One trybuild run compiles every case (the cases share one scratch crate and its dependencies).

use std::path::Path;

#[test]
fn ui() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // The cases build in a scratch crate under target/, so the macro resolves paths against the
    // workspace root instead (its test-only override). This test binary runs this one test, so
    // no other thread reads the environment while it is set.
    #[allow(unsafe_code)]
    // SAFETY: single-threaded at this point (the only test of this binary, before any spawn).
    unsafe {
        std::env::set_var(
            "PTC_MANIFEST_DIR",
            workspace.canonicalize().expect("workspace"),
        );
        // The scratch crate's dependency tree is built without debuginfo, like the workspace's
        // (Cargo.toml's [profile.dev], which trybuild does not carry over), which is less to
        // compile and link. `ptc-cli/tests/new.rs` builds the same tree with the same setting.
        std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false");
    }
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/v1_compiles_and_builds.rs");
    cases.compile_fail("tests/ui/[a-uw-z]*.rs");
}
