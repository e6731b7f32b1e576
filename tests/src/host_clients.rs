//! The MCP clients and the load balancer the host is tested with (`fixtures/host-clients`,
//! Debian's nginx): where they are, or `None` after [`skip`](crate::skip) says how to install
//! them; and running the Python client on a spec.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/host-clients")
}

/// The peer at `path`, or `None` (after saying why) when it is not installed.
fn installed(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    crate::skip(&format!(
        "{what} is not installed at {} (scripts/test installs it)",
        path.display()
    ));
    None
}

/// The Python of the venv the Python MCP client (`client.py`) runs in.
pub fn python() -> Option<PathBuf> {
    installed(
        clients_dir().join(".venv/bin/python"),
        "the Python mcp client",
    )
}

/// The MCP Inspector's command line client.
pub fn inspector() -> Option<PathBuf> {
    installed(
        clients_dir().join("node_modules/.bin/mcp-inspector"),
        "the MCP Inspector CLI",
    )
}

/// nginx, from `/usr/sbin` or the `PATH`.
pub fn nginx() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("/usr/sbin/nginx")];
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("nginx")));
    }
    let found = candidates.into_iter().find(|p| p.exists());
    if found.is_none() {
        crate::skip(
            "nginx is not installed (Debian package nginx; scripts/test names what is missing)",
        );
    }
    found
}

/// Runs `client.py` with `python` on `spec` (transport, url or command, programs); its output,
/// the last line it prints. Panics with both streams when the client fails.
pub fn run(python: &Path, spec: &Value) -> Value {
    let out = Command::new(python)
        .arg(clients_dir().join("client.py"))
        .arg(spec.to_string())
        .output()
        .expect("the Python client starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed on {spec}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("its last line is JSON")
}
