//! Benchmark inputs that are too large to keep in the repository, fetched once into
//! `target/bench-data/` from the npm registry.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Folder for downloaded inputs (inside the workspace's target dir, so `cargo clean` drops it).
pub fn dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest.parent().unwrap_or(manifest).join("target")
        });
    target.join("bench-data")
}

/// GitHub's REST API description (OpenAPI 3.0, ~13 MB, ~1 100 operations) from the npm package
/// `@octokit/openapi`, pinned so every run measures the same document.
pub fn github_spec() -> Result<PathBuf, String> {
    const PACKAGE: &str = "@octokit/openapi@23.0.2";
    let dir = dir();
    let spec = dir.join("api.github.com.json");
    if spec.is_file() {
        return Ok(spec);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    eprintln!("fetching {PACKAGE} (once) into {}", dir.display());
    let out = Command::new("npm")
        .args(["pack", PACKAGE, "--silent", "--pack-destination"])
        .arg(&dir)
        .output()
        .map_err(|e| format!("cannot run npm: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "npm pack {PACKAGE} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let tarball = dir.join(String::from_utf8_lossy(&out.stdout).trim());
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&dir)
        .args([
            "--strip-components=2",
            "package/generated/api.github.com.json",
        ])
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    std::fs::remove_file(&tarball).ok();
    if !status.success() || !spec.is_file() {
        return Err(format!(
            "could not extract api.github.com.json from {}",
            tarball.display()
        ));
    }
    Ok(spec)
}
