//! The `Cargo.toml` profile a crate invoking `ptc_upstreams!` should carry.
//!
//! The macro runs on every build of its crate: it reads the documents, compiles the plan and
//! writes the code, and its derives then run over every type it wrote. In the `dev` profile all
//! of these are compiled without optimisations and run several times slower; compiled with
//! them, a 611-operation crate's incremental `cargo check` drops by a fifth (docs/codegen.md,
//! "Build cost").

/// The packages that run at build time for the macro: the macro and its derives, what they
/// call, the JSON parser it reads documents with, the token and syntax crates every proc-macro
/// uses, and serde's derive.
pub const MACRO_PACKAGES: [&str; 8] = [
    "ptc-macros",
    "ptc-codegen",
    "ptc-plan",
    "serde_json",
    "syn",
    "proc-macro2",
    "quote",
    "serde_derive",
];

/// The `[profile.dev.package.*]` sections compiling [`MACRO_PACKAGES`] with optimisations, with
/// a comment saying why, for a deployment crate's `Cargo.toml` (`ptc new` writes them).
pub fn macro_profile() -> String {
    let mut out = String::from(
        "# ptc_upstreams! reads the OpenAPI documents and writes the typed code on every build of\n\
         # this crate: compiled with optimisations, it and serde's derive run several times faster.\n",
    );
    for package in MACRO_PACKAGES {
        out.push_str(&format!("[profile.dev.package.{package}]\nopt-level = 3\n"));
    }
    out
}
