//! Stdio servers run isolated by default: a hostile server (fixtures/mcp/hostile_server.py),
//! configured as a new user would (no `sandbox` field), tries each escape and is denied or
//! bounded, while its harmless tool keeps answering.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ptc_core::credentials::redact::Redactor;
use ptc_core::wire::mcp::McpClient;
use ptc_core::{Reason, ToolOutput};
use ptc_plan::{McpStdioPlan, Transport};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    ptc_plan::paths::normalize(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp"))
}

/// A scratch folder: the config beside a credential file of another upstream.
struct Scratch(PathBuf);

impl Scratch {
    /// A fresh folder, or `None` after saying that the Python venv its configs run is missing.
    fn new(name: &str) -> Option<Scratch> {
        ptc_tests::mcp_python()?;
        Some(Scratch(ptc_tests::fresh_dir(&format!("sandbox-{name}"))))
    }

    /// The `hostile` upstream of the config [`Scratch::load`] writes, started and connected.
    async fn start(&self, hostile: Value) -> McpClient {
        connect(&stdio(&self.load(hostile), "hostile")).await
    }

    /// Writes the config with `hostile`'s entry, a second stdio upstream working in `other/`
    /// and an HTTP upstream whose bearer token is read from `secret.token`; loads it.
    fn load(&self, hostile: Value) -> ptc_plan::Plan {
        let python = ptc_tests::mcp_python().expect("checked by `Scratch::new`");
        std::fs::write(self.0.join("secret.token"), "the-other-upstreams-secret\n").unwrap();
        std::fs::create_dir_all(self.0.join("other")).unwrap();
        std::fs::write(self.0.join("other/notes.txt"), "the other server's notes\n").unwrap();
        std::fs::write(self.0.join("readme.txt"), "shared readme\n").unwrap();
        let mut entry = json!({
            "transport": "mcp_stdio",
            "command": python,
            "args": [fixtures().join("hostile_server.py")],
        });
        entry
            .as_object_mut()
            .unwrap()
            .extend(hostile.as_object().unwrap().clone());
        let config = json!({
            "credentials": {"other-token": {"source": "file", "path": "secret.token"}},
            "upstreams": {
                "hostile": entry,
                "other": {"transport": "mcp_stdio", "command": "true", "cwd": "other"},
                "remote": {"transport": "mcp_http", "url": "https://mcp.example.com/mcp",
                           "auth": [{"scheme": "bearer", "binding": "other-token"}]},
            },
        });
        let path = self.0.join("upstreams.json");
        std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        ptc_plan::load(&path).unwrap_or_else(|d| panic!("{d}")).plan
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn stdio(plan: &ptc_plan::Plan, name: &str) -> McpStdioPlan {
    match &plan.upstream(name).unwrap().transport {
        Transport::McpStdio(p) => p.clone(),
        other => panic!("{other:?}"),
    }
}

async fn connect(plan: &McpStdioPlan) -> McpClient {
    McpClient::connect_stdio("hostile", plan, vec![], Redactor::new())
        .await
        .expect("the hostile server starts sandboxed")
}

async fn text(c: &McpClient, tool: &str, args: Value) -> String {
    let Value::Object(args) = args else { panic!() };
    match c.call_tool(tool, args, None).await {
        Ok(ToolOutput::Text(t)) => t,
        // server-filesystem answers structured content too.
        Ok(ToolOutput::Json(j)) => String::from_utf8(j).unwrap(),
        other => panic!("{tool}: {other:?}"),
    }
}

/// The harmless tool still answers.
async fn still_serves(c: &McpClient) {
    assert_eq!(text(c, "hello", json!({})).await, "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_escape_is_denied_or_bounded_and_the_harmless_tool_answers() {
    let Some(scratch) = Scratch::new("escapes") else {
        return;
    };
    let plan = scratch.load(json!({}));
    let hostile = stdio(&plan, "hostile");
    assert!(
        hostile.sandbox.is_some(),
        "isolated when the config says nothing"
    );
    let c = connect(&hostile).await;
    still_serves(&c).await;

    // A file in the host user's home folder.
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    let home_file = home.join(format!(".ptc-sandbox-canary-{}", std::process::id()));
    std::fs::write(&home_file, "home secret\n").unwrap();
    let read = text(&c, "read-file", json!({"path": home_file})).await;
    std::fs::remove_file(&home_file).unwrap();
    assert!(read.starts_with("denied: "), "{read}");
    let listed = text(&c, "list-dir", json!({"path": home})).await;
    assert!(!listed.contains(".ptc-sandbox"), "{listed}");

    // The file the config reads another upstream's credential from, and the config itself.
    for file in ["secret.token", "upstreams.json"] {
        let read = text(&c, "read-file", json!({"path": scratch.0.join(file)})).await;
        assert!(read.starts_with("denied: "), "{file}: {read}");
    }

    // Writes outside its temp folder; its temp folder is writable.
    let outside = scratch.0.join("planted.txt");
    let wrote = text(&c, "write-file", json!({"path": outside})).await;
    assert!(wrote.starts_with("denied: "), "{wrote}");
    assert!(!outside.exists());
    let wrote = text(&c, "write-file", json!({"path": "/usr/planted.txt"})).await;
    assert_eq!(wrote, "denied: Read-only file system");
    assert_eq!(
        text(&c, "write-file", json!({"path": "/tmp/scratch.txt"})).await,
        "written"
    );

    // A service on the host's loopback.
    let service = TcpListener::bind("127.0.0.1:0").unwrap();
    service.set_nonblocking(true).unwrap();
    let port = service.local_addr().unwrap().port();
    let connected = text(&c, "connect", json!({"port": port})).await;
    assert!(connected.starts_with("denied: "), "{connected}");
    assert!(service.accept().is_err(), "nothing reached the service");

    // A fork bomb stops at the process limit (128 by default, the runtime's threads included).
    let spawned = text(&c, "spawn", json!({"n": 400})).await;
    let started = counted(&spawned, "started");
    assert!(
        started < 128 && spawned.contains("Resource temporarily unavailable"),
        "{spawned}"
    );
    still_serves(&c).await;

    // A memory bomb stops at the memory limit (1 GiB by default).
    let allocated = text(&c, "allocate", json!({"mb": 3072})).await;
    assert_eq!(allocated, "denied: out of memory");
    assert_eq!(
        text(&c, "allocate", json!({"mb": 64})).await,
        "allocated 64 MiB"
    );
    still_serves(&c).await;
}

/// The count before the first `;` of an answer like `started 12; then: ...`.
fn counted(answer: &str, verb: &str) -> usize {
    answer
        .strip_prefix(verb)
        .and_then(|rest| rest.trim_start().split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"))
}

/// The limits a config names are the ones held, each just below and past its value (the server's
/// own processes, threads and files count: it stops a few short of the value).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_limits_hold_at_their_values() {
    let Some(scratch) = Scratch::new("limits") else {
        return;
    };
    let c = scratch
        .start(json!({"sandbox": {"processes": 16, "memory_mb": 512, "open_files": 64}}))
        .await;
    let spawned = text(&c, "spawn", json!({"n": 40})).await;
    let started = counted(&spawned, "started");
    assert!(
        (8..16).contains(&started) && spawned.contains("Resource temporarily unavailable"),
        "{spawned}"
    );
    let opened = text(&c, "open-files", json!({"n": 100})).await;
    let n = counted(&opened, "opened");
    assert!(
        (48..64).contains(&n) && opened.contains("Too many open files"),
        "{opened}"
    );
    assert_eq!(
        text(&c, "allocate", json!({"mb": 400})).await,
        "allocated 400 MiB"
    );
    assert_eq!(
        text(&c, "allocate", json!({"mb": 520})).await,
        "denied: out of memory"
    );
    still_serves(&c).await;
}

/// A folder the config grants is in the view, minus what is hidden inside it: the config, the
/// credential files, the other server's working folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_folder_is_seen_without_the_secrets_in_it() {
    let Some(scratch) = Scratch::new("granted") else {
        return;
    };
    let c = scratch
        .start(json!({"sandbox": {"read_paths": ["."]}}))
        .await;
    let readme = text(
        &c,
        "read-file",
        json!({"path": scratch.0.join("readme.txt")}),
    )
    .await;
    assert_eq!(readme, "read: shared readme\n");
    for file in ["secret.token", "upstreams.json"] {
        let read = text(&c, "read-file", json!({"path": scratch.0.join(file)})).await;
        assert_eq!(read, "denied: Permission denied", "{file} is masked");
    }
    let other = text(&c, "list-dir", json!({"path": scratch.0.join("other")})).await;
    assert_eq!(
        other, "listed: ",
        "the other server's folder is masked empty"
    );
    // Granted for reading only.
    let wrote = text(&c, "write-file", json!({"path": scratch.0.join("x.txt")})).await;
    assert_eq!(wrote, "denied: Read-only file system");
}

/// `write_paths` are writable; `network: true` gives the host's network back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_the_network_are_granted_where_the_config_says() {
    use std::os::unix::fs::PermissionsExt;
    let Some(scratch) = Scratch::new("grants") else {
        return;
    };
    let out = scratch.0.join("out");
    std::fs::create_dir_all(&out).unwrap();
    // A root host runs the server as nobody: the folder is theirs to write.
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let c = scratch
        .start(json!({"sandbox": {"write_paths": ["out"], "network": true}}))
        .await;
    let wrote = text(&c, "write-file", json!({"path": out.join("result.txt")})).await;
    assert_eq!(wrote, "written");
    assert!(out.join("result.txt").exists());
    let service = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = service.local_addr().unwrap().port();
    assert_eq!(
        text(&c, "connect", json!({"port": port})).await,
        "connected"
    );
}

/// A server past its CPU time is killed: the call fails naming the limit, the server is started
/// again, and the next call is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_past_its_cpu_time_is_killed_and_started_again() {
    let Some(scratch) = Scratch::new("cpu") else {
        return;
    };
    // Two seconds, not one: a server's own start (an interpreter loading its packages) took
    // more than one second of CPU on a slow shared VM, and was killed before its handshake.
    let c = scratch.start(json!({"sandbox": {"cpu_seconds": 2}})).await;
    let Value::Object(args) = json!({"seconds": 5}) else {
        panic!()
    };
    let e = c
        .call_tool("burn", args, None)
        .await
        .expect_err("killed at its limit");
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    assert!(
        e.message
            .starts_with("upstream `hostile` tool `burn`: the connection closed")
            && e.message.ends_with(
                "; the server was killed at its CPU time limit (sandbox.cpu_seconds = 2)"
            ),
        "{e}"
    );
    still_serves(&c).await;
    // A server that crashes on its own is not said to have hit a limit.
    let e = c
        .call_tool("crash-now", serde_json::Map::new(), None)
        .await
        .expect_err("it exits");
    assert!(!e.message.contains("limit"), "{e}");
    still_serves(&c).await;
}

/// Dropping the client ends every process in the sandbox, and its temp folder goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_ends_whole_with_its_client() {
    let Some(scratch) = Scratch::new("ends") else {
        return;
    };
    let c = scratch.start(json!({})).await;
    let temps = || -> Vec<PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    n.to_string_lossy()
                        .starts_with(&format!("ptc-sandbox-hostile-{}-", std::process::id()))
                })
            })
            .collect()
    };
    let before = temps();
    assert!(!before.is_empty(), "a private temp folder while it runs");
    let hostile = processes_running("hostile_server.py");
    assert!(!hostile.is_empty());
    drop(c);
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while hostile
        .iter()
        .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
        || before.iter().any(|t| t.exists())
    {
        assert!(
            std::time::Instant::now() < until,
            "the sandbox outlived its client"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The host pids of processes whose command line mentions `needle` and that are this process's
/// descendants.
fn processes_running(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .filter(|pid| {
            let mut at = *pid;
            for _ in 0..32 {
                match parent_of(at) {
                    Some(p) if p == me => return true,
                    Some(p) if p > 1 => at = p,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// server-filesystem on a folder, given only that folder to write: it lists, writes and reads
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_filesystem_works_sandboxed_on_its_folder() {
    use std::os::unix::fs::PermissionsExt;
    let entry =
        fixtures().join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !entry.exists() {
        ptc_tests::skip(
            "server-filesystem is missing from fixtures/mcp (scripts/test installs it)",
        );
        return;
    }
    let Some(scratch) = Scratch::new("filesystem") else {
        return;
    };
    let folder = scratch.0.join("shared");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(folder.join("hello.txt"), "hello from the host\n").unwrap();
    let c = scratch
        .start(json!({
            "command": "node",
            "args": [entry, folder],
            "sandbox": {"write_paths": ["shared"]},
        }))
        .await;
    let listed = text(&c, "list_directory", json!({"path": folder})).await;
    assert!(listed.contains("hello.txt"), "{listed}");
    let note = folder.join("note.txt");
    let wrote = text(
        &c,
        "write_file",
        json!({"path": note, "content": "written inside"}),
    )
    .await;
    assert!(wrote.contains("Successfully wrote"), "{wrote}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "written inside");
    let read = text(
        &c,
        "read_text_file",
        json!({"path": folder.join("hello.txt")}),
    )
    .await;
    assert!(read.contains("hello from the host"), "{read}");
}

/// mcp-server-git on a repository, given only that repository to read: it reads its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_git_works_sandboxed_on_a_repository() {
    let server = fixtures().join("../mcp-git/.venv/bin/mcp-server-git");
    let server = ptc_plan::paths::normalize(&server);
    if !server.exists() {
        ptc_tests::skip(
            "mcp-server-git is missing from fixtures/mcp-git (scripts/test installs it)",
        );
        return;
    }
    let Some(scratch) = Scratch::new("git") else {
        return;
    };
    let repo = scratch.0.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("README.md"), "a repository\n").unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=ptc", "-c", "user.email=ptc@example.test"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git runs");
        assert!(ok.status.success(), "git {args:?}: {ok:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "README.md"]);
    git(&["commit", "-q", "-m", "the first commit"]);
    let c = scratch
        .start(json!({
            "command": server,
            "args": ["--repository", repo],
            "sandbox": {"read_paths": ["repo"]},
        }))
        .await;
    let log = text(&c, "git_log", json!({"repo_path": repo})).await;
    assert!(log.contains("the first commit"), "{log}");
    let status = text(&c, "git_status", json!({"repo_path": repo})).await;
    assert!(status.contains("nothing to commit"), "{status}");
}
