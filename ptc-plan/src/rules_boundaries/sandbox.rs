//! `sandbox` of an `mcp_stdio` upstream, rule by rule: isolated unless the config says `false`,
//! each field at its edge, and what the loader hides from each sandbox.

use std::path::Path;

use super::temp_dir;
use crate::config::UpstreamKind;
use crate::plan::{SandboxLimits, SandboxPlan, Transport};

/// `fs`'s sandbox with these extra fields, read with the config in `/srv/ptc`.
fn sandbox(extra: &str) -> Result<Option<SandboxPlan>, Vec<(String, String)>> {
    let text = format!(
        r#"{{"upstreams": {{"fs": {{"transport": "mcp_stdio", "command": "server"{extra}}}}}}}"#
    );
    let mut d = crate::Diagnostics::default();
    let parsed = crate::config::parse(
        &text,
        Path::new("/srv/ptc/upstreams.json"),
        Path::new("/srv/ptc"),
        &mut d,
    );
    match parsed {
        Some((c, _)) if d.is_empty() => match &c.upstreams[0].kind {
            UpstreamKind::McpStdio(p) => Ok(p.sandbox.clone()),
            other => panic!("{other:?}"),
        },
        _ => Err(d
            .0
            .iter()
            .map(|d| (d.pointer.clone(), d.message.clone()))
            .collect()),
    }
}

fn one_problem(extra: &str) -> (String, String) {
    let found = sandbox(extra).expect_err(extra);
    assert_eq!(found.len(), 1, "{extra}: {found:?}");
    found[0].clone()
}

#[test]
fn a_server_is_isolated_unless_the_config_says_false() {
    let default = Some(SandboxPlan::default());
    assert_eq!(sandbox("").unwrap(), default, "said nothing");
    assert_eq!(sandbox(r#", "sandbox": true"#).unwrap(), default);
    assert_eq!(sandbox(r#", "sandbox": {}"#).unwrap(), default);
    assert_eq!(sandbox(r#", "sandbox": false"#).unwrap(), None);
    let d = SandboxPlan::default();
    assert!(!d.network && d.read_paths.is_empty() && d.write_paths.is_empty());
    assert_eq!(
        d.limits,
        SandboxLimits {
            memory_mb: 1024,
            processes: 128,
            open_files: 1024,
            cpu_seconds: 3600
        }
    );
    assert_eq!(
        one_problem(r#", "sandbox": "off""#),
        (
            "/upstreams/fs/sandbox".into(),
            "`sandbox` must be an object, true or false, got a string".into()
        )
    );
}

#[test]
fn paths_resolve_against_the_config_folder_and_never_name_the_whole_host() {
    let s = sandbox(
        r#", "sandbox": {"network": true, "read_paths": ["data", "/opt/tool", "data/../data"],
            "write_paths": ["./out"]}"#,
    )
    .unwrap()
    .unwrap();
    assert!(s.network);
    assert_eq!(
        s.read_paths,
        ["/opt/tool", "/srv/ptc/data"],
        "sorted, once each"
    );
    assert_eq!(s.write_paths, ["/srv/ptc/out"]);
    for (path, what) in [("/", "`/`"), ("/srv/..", "`/`"), ("../..", "`/`")] {
        let (at, message) = one_problem(&format!(r#", "sandbox": {{"write_paths": ["{path}"]}}"#));
        assert_eq!(at, "/upstreams/fs/sandbox/write_paths/0", "{path}");
        assert_eq!(
            message,
            format!("`write_paths` must not name {what}: that is the whole host"),
            "{path}"
        );
    }
    // One level below the root is a folder like any other.
    let s = sandbox(r#", "sandbox": {"read_paths": ["/data"]}"#)
        .unwrap()
        .unwrap();
    assert_eq!(s.read_paths, ["/data"]);
    assert_eq!(
        one_problem(r#", "sandbox": {"read_paths": ["ok", " "]}"#),
        (
            "/upstreams/fs/sandbox/read_paths/1".into(),
            "`read_paths` items must not be empty".into()
        )
    );
}

#[test]
fn limits_are_positive_integers() {
    let s = sandbox(
        r#", "sandbox": {"memory_mb": 1, "processes": 1, "open_files": 1, "cpu_seconds": 1}"#,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        s.limits,
        SandboxLimits {
            memory_mb: 1,
            processes: 1,
            open_files: 1,
            cpu_seconds: 1
        }
    );
    for field in ["memory_mb", "processes", "open_files", "cpu_seconds"] {
        assert_eq!(
            one_problem(&format!(r#", "sandbox": {{"{field}": 0}}"#)),
            (
                format!("/upstreams/fs/sandbox/{field}"),
                format!("`{field}` must be a positive integer, got 0")
            )
        );
    }
}

#[test]
fn an_unknown_field_is_named_with_the_one_meant() {
    let (at, message) = one_problem(r#", "sandbox": {"write_path": ["out"]}"#);
    assert_eq!(at, "/upstreams/fs/sandbox/write_path");
    assert!(
        message.contains("write_path") && message.contains("write_paths"),
        "{message}"
    );
}

/// The loader hides the config, every credential file, and the other stdio servers' working and
/// writable folders; not this server's own, nor a folder the config gives it too.
#[test]
fn each_sandbox_hides_the_secrets_and_the_other_servers_folders() {
    let dir = temp_dir();
    let config = serde_json::json!({
        "credentials": {
            "key": {"source": "file", "path": "key.txt"},
            "mine": {"source": "per_caller", "files": {"ada": "/run/ada.token", "*": "all.token"}},
            "env": {"source": "env", "var": "TOKEN"},
        },
        "upstreams": {
            "a": {"transport": "mcp_stdio", "command": "a", "cwd": "a-home",
                  "sandbox": {"write_paths": ["a-out", "shared"]}},
            "b": {"transport": "mcp_stdio", "command": "b", "cwd": "b-home",
                  "sandbox": {"read_paths": ["shared"], "write_paths": ["b-out"]}},
            "c": {"transport": "mcp_stdio", "command": "c", "cwd": "a-home", "sandbox": false},
        },
    });
    let path = dir.join("upstreams.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let plan = crate::load(&path).unwrap().plan;
    std::fs::remove_dir_all(&dir).ok();
    let d = |p: &str| dir.join(p).to_string_lossy().into_owned();
    let hidden = |name: &str| match &plan.upstream(name).unwrap().transport {
        Transport::McpStdio(p) => p.sandbox.as_ref().map(|s| s.hidden.clone()),
        other => panic!("{other:?}"),
    };
    let secrets = [
        d("all.token"),
        d("key.txt"),
        "/run/ada.token".into(),
        d("upstreams.json"),
    ];
    let mut a = secrets.to_vec();
    a.extend([d("b-home"), d("b-out")]);
    a.sort();
    assert_eq!(
        hidden("a").unwrap(),
        a,
        "c works in a's own folder: not hidden"
    );
    let mut b = secrets.to_vec();
    b.extend([d("a-home"), d("a-out")]);
    b.sort();
    assert_eq!(
        hidden("b").unwrap(),
        b,
        "`shared` is given to b too: not hidden"
    );
    assert_eq!(hidden("c"), None, "not sandboxed: nothing to hide from");
}
