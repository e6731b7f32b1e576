//! Turns each insta snapshot of an expansion (`ptc-codegen/tests/snapshots/*.snap`) into a Rust
//! file in `OUT_DIR` (the snapshot body without its header) and one module per snapshot.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() -> Result<(), String> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let dir = manifest.join("../../ptc-codegen/tests/snapshots");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    snaps.sort();
    let mut modules = String::new();
    for snap in &snaps {
        println!("cargo:rerun-if-changed={}", snap.display());
        let stem = snap
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or("snapshot name")?
            .replace("expand__", "");
        let body = body(snap)?;
        let file = out.join(format!("{stem}.rs"));
        std::fs::write(&file, body).map_err(|e| e.to_string())?;
        let _ = writeln!(
            modules,
            "pub mod {stem}_snapshot {{ include!(concat!(env!(\"OUT_DIR\"), \"/{stem}.rs\")); }}"
        );
    }
    std::fs::write(out.join("snapshots.rs"), modules).map_err(|e| e.to_string())
}

/// The snapshot without insta's `---`-delimited header.
fn body(snap: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(snap).map_err(|e| e.to_string())?;
    let mut parts = text.splitn(3, "---\n");
    let (_, _, body) = (parts.next(), parts.next(), parts.next());
    body.map(str::to_string)
        .ok_or_else(|| format!("{} has no insta header", snap.display()))
}
