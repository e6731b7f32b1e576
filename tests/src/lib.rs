//! Cross-crate tests for ptc (the tests live in `tests/`), and what test crates share: how a test
//! whose real peer (an MCP server or client, a built binary) is missing says so, and how a test
//! runs cargo.

pub mod bed;
pub mod host_clients;
mod host_process;
pub mod issuer;
pub mod oauth_mcp;
pub mod otlp;
pub mod python_server;
pub mod redis;

pub use host_process::HostProcess;

use std::io::Write;
use std::path::PathBuf;

/// A port free on 127.0.0.1 for a server a test starts there (or a redirect URI it names) to
/// take, never handed out twice.
///
/// The port is bound later by someone else, so it is picked below the kernel's ephemeral range:
/// there no port-0 bind and no outgoing connection of a parallel test can take it meanwhile. A
/// lock file held for the rest of the process keeps parallel processes apart (the conformance
/// peer, fixtures/conformance/client/peer.sh, takes the same locks).
pub fn free_port() -> u16 {
    use std::hash::BuildHasher;
    static HELD: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());
    let below = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let locks = std::env::temp_dir().join("ptc-loopback-ports");
    std::fs::create_dir_all(&locks)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", locks.display()));
    let random = std::collections::hash_map::RandomState::new();
    for attempt in 0..1000u32 {
        let port = 10000
            + (random.hash_one(attempt) % u64::from(below.saturating_sub(10000).max(1))) as u16;
        let Ok(lock) = std::fs::File::create(locks.join(port.to_string())) else {
            continue;
        };
        if lock.try_lock().is_ok()
            && std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok()
        {
            HELD.lock().unwrap_or_else(|e| e.into_inner()).push(lock);
            return port;
        }
    }
    panic!(
        "no free port on 127.0.0.1 between 10000 and {below} (the kernel's ephemeral range starts there)"
    )
}

/// What a test does when a peer it needs is missing. Under `CI=true` (where `.ci/run` installs
/// every peer, through `scripts/test`) it panics with `why`, so CI never passes a test that did not
/// run. Elsewhere it writes `SKIPPED <test>: <why>` straight to the process's stderr and the test
/// returns early: the harness captures `println!`/`eprintln!` of passing tests, so a line written
/// with them is never seen and the test counts as passed in silence.
pub fn skip(why: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI=true but {why}");
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // Not the print macros: those are what the harness captures.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
}

/// A new, empty directory for test `name` in the system's temp directory, apart from other test
/// processes' (its name holds this process's id).
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ptc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory in the temp directory");
    dir
}

/// The Python of `fixtures/mcp` (the venv the Python MCP peer runs in), or `None` after
/// [`skip`] says how to install it.
pub fn mcp_python() -> Option<PathBuf> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp/.venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    skip("the fixtures/mcp Python venv is missing (scripts/test installs it)");
    None
}

/// Whether the MCP peers of `fixtures/mcp` are installed (the npm server and the Python venv,
/// as `scripts/test` installs them), after [`skip`] says how to install them when they are not.
pub fn mcp_peers() -> bool {
    let mcp = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp");
    let ok = mcp.join(".venv/bin/python").exists()
        && mcp
            .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .exists();
    if !ok {
        skip("the MCP peers in fixtures/mcp are missing (scripts/test installs them)");
    }
    ok
}

/// `fixtures/configs/peers/upstreams.json` (both MCP peers) with its relative paths made
/// absolute, so it works from a scratch folder, and `edit` applied to each upstream.
pub fn peers_config(edit: impl Fn(&str, &mut serde_json::Value)) -> serde_json::Value {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/configs/peers")
        .canonicalize()
        .expect("the peers config's folder");
    let text = std::fs::read_to_string(dir.join("upstreams.json")).expect("the peers config");
    let mut config: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    for (name, up) in config["upstreams"]
        .as_object_mut()
        .expect("upstreams")
        .iter_mut()
    {
        for key in ["command", "cwd"] {
            if let Some(p) = up[key].as_str().filter(|p| p.contains('/')) {
                up[key] = dir.join(p).display().to_string().into();
            }
        }
        edit(name, up);
    }
    config
}

/// `cargo` (the one running the tests) for a test that builds a crate, without the variables
/// cargo sets for a test process (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `OUT_DIR`, ...). Build
/// scripts watch some of them (ring's reruns when `CARGO_PKG_NAME` changes), so a build run with
/// them set finds the test run's dependencies stale and compiles them again.
pub fn cargo() -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()));
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let set_for_tests = key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_BIN_EXE_")
            || matches!(
                key,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_TARGET_TMPDIR"
                    | "CARGO_RUSTC_CURRENT_DIR"
                    | "OUT_DIR"
            );
        if set_for_tests {
            cmd.env_remove(key);
        }
    }
    cmd
}
