//! The MCP client against real servers: `@modelcontextprotocol/server-everything` (npm; the
//! 2025 protocol era) over stdio and Streamable HTTP, and `fixtures/mcp/py_server.py` (Python `mcp`
//! SDK 2.x; the 2026 era) over both. `scripts/test` installs them into `fixtures/mcp`; without
//! them a test fails under `CI=true` and otherwise prints why it was skipped.

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ptc_core::credentials::redact::Redactor;
use ptc_core::wire::mcp::McpClient;
use ptc_core::{Reason, ToolError, ToolOutput};
use ptc_plan::{
    AuthEmitter, Backoff, CredentialBinding, CredentialSource, HttpSettings, McpHttpPlan,
    McpStdioPlan, SandboxPlan, Secrets,
};
use serde_json::{Map, Value, json};
use sha2::Digest;

const CANARY: &str = "canary-7f3a9c1e5b";

// ---------------------------------------------------------------- peers and plans

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp")
}

/// `Some(())` when the peer can run; otherwise fails under CI and prints why elsewhere.
fn require(what: &str, ok: bool, fix: &str) -> Option<()> {
    if ok {
        return Some(());
    }
    ptc_tests::skip(&format!("{what} is missing ({fix})"));
    None
}

fn node_everything() -> Option<(String, PathBuf)> {
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    require("node", node, "install Node.js 20 or later")?;
    let entry =
        fixtures().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    require(
        "server-everything",
        entry.exists(),
        "scripts/test installs it",
    )?;
    Some(("node".into(), entry))
}

fn python_peer() -> Option<(String, PathBuf)> {
    let python = fixtures().join(".venv/bin/python");
    require(
        "the fixtures/mcp Python venv",
        python.exists(),
        "scripts/test installs it",
    )?;
    Some((
        python.to_string_lossy().into_owned(),
        fixtures().join("py_server.py"),
    ))
}

fn stdio_plan(command: &str, args: &[&str]) -> McpStdioPlan {
    McpStdioPlan {
        command: command.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: vec![],
        cwd: Some(fixtures().to_string_lossy().into_owned()),
        handshake_timeout_ms: 30_000,
        request_timeout_ms: 30_000,
        max_response_bytes: 1 << 20,
        tools: Default::default(),
        // Isolated, as a config that says nothing has it: its folder (the peers and their
        // runtimes) is its working folder, so it is in its view.
        sandbox: Some(SandboxPlan {
            write_paths: vec![markers().to_string_lossy().into_owned()],
            ..SandboxPlan::default()
        }),
    }
}

fn http_plan(url: &str) -> McpHttpPlan {
    McpHttpPlan {
        url: url.into(),
        handshake_timeout_ms: 30_000,
        http: HttpSettings {
            auth: vec![],
            static_headers: vec![],
            allow_insecure_http: true,
            allow_insecure_auth: true,
            request_timeout_ms: 30_000,
            connect_timeout_ms: 5_000,
            max_response_bytes: 1 << 20,
            pool_size: 4,
            backoff: Backoff {
                max_retries: 0,
                initial_ms: 100,
                max_ms: 1_000,
            },
        },
        tools: Default::default(),
        oauth: None,
    }
}

/// A server on a free loopback port, killed when dropped. Its stderr goes to a file that a
/// failing test prints, so a peer that died or refused says why.
struct HttpPeer {
    _child: tokio::process::Child,
    port: u16,
    stderr: PathBuf,
}

impl HttpPeer {
    /// Starts `command` (which must listen on `port`) and waits until the port accepts.
    async fn start(port: u16, command: &str, args: &[String], env: &[(&str, String)]) -> HttpPeer {
        let stderr = std::env::temp_dir().join(format!(
            "ptc-http-peer-{}-{port}.stderr",
            std::process::id()
        ));
        let log = std::fs::File::create(&stderr)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", stderr.display()));
        let mut child = tokio::process::Command::new(command)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command}: {e}"));
        let peer_said = || std::fs::read_to_string(&stderr).unwrap_or_default();
        let until = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "{command} exited before listening on {port}: {status}; it said:\n{}",
                    peer_said()
                );
            }
            assert!(
                Instant::now() < until,
                "{command} never listened on {port}; it said:\n{}",
                peer_said()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        HttpPeer {
            _child: child,
            port,
            stderr,
        }
    }

    /// Kills the server and waits until it is gone, so its port is free again.
    async fn stop(mut self) {
        self._child.kill().await.unwrap();
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let said = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let _ = std::fs::remove_file(&self.stderr);
        if std::thread::panicking() {
            eprintln!("the HTTP peer on port {} said:\n{said}", self.port);
        }
    }
}

async fn everything_http(port: u16) -> Option<HttpPeer> {
    let (node, entry) = node_everything()?;
    Some(
        HttpPeer::start(
            port,
            &node,
            &[
                entry.to_string_lossy().into_owned(),
                "streamableHttp".into(),
            ],
            &[("PORT", port.to_string())],
        )
        .await,
    )
}

async fn python_http(extra_env: &[(&str, String)]) -> Option<HttpPeer> {
    let (python, script) = python_peer()?;
    let port = ptc_tests::free_port();
    Some(
        HttpPeer::start(
            port,
            &python,
            &[
                script.to_string_lossy().into_owned(),
                "http".into(),
                port.to_string(),
            ],
            extra_env,
        )
        .await,
    )
}

async fn python_stdio(
    env: Vec<(String, String)>,
    redactor: Redactor,
    edit: impl FnOnce(&mut McpStdioPlan),
) -> Option<McpClient> {
    let (python, script) = python_peer()?;
    let mut plan = stdio_plan(&python, &[&script.to_string_lossy(), "stdio"]);
    edit(&mut plan);
    Some(
        McpClient::connect_stdio("py", &plan, env, redactor)
            .await
            .expect("connects to the Python server over stdio"),
    )
}

// ---------------------------------------------------------------- helpers

/// Runs the server with the host's own rights (`"sandbox": false`).
fn unsandboxed(plan: &mut McpStdioPlan) {
    plan.sandbox = None;
}

/// Why the stdio server `plan` starts could not be connected to, under the name `name`.
async fn failed_start(name: &str, plan: &McpStdioPlan) -> ToolError {
    match McpClient::connect_stdio(name, plan, vec![], Redactor::new()).await {
        Ok(_) => panic!("`{name}` connected"),
        Err(e) => e,
    }
}

/// A temp-dir path for a file a server or a test writes, cleared of what an earlier run left.
fn fresh_marker(name: &str) -> PathBuf {
    let path = markers().join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// The folder of this process's markers: the one folder outside its own temp a sandboxed
/// server of these tests may write.
fn markers() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ptc-mcp-markers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Writable to the server's user too: a root host runs sandboxed servers as nobody.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// The environment telling the Python server where to write the marker `var` names.
fn marker_env(var: &str, marker: &Path) -> Vec<(String, String)> {
    vec![(var.to_string(), marker.to_string_lossy().into_owned())]
}

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn json_of(out: ToolOutput) -> Value {
    match out {
        ToolOutput::Json(bytes) => serde_json::from_slice(&bytes).unwrap(),
        other => panic!("expected JSON, got {other:?}"),
    }
}

async fn call(c: &McpClient, tool: &str, a: Value) -> Result<ToolOutput, ToolError> {
    c.call_tool(tool, args(a), None).await
}

/// Log lines written by the process, for the redaction checks.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(format!(
                "trace,{}",
                ptc_core::wire::mcp::LOG_DIRECTIVE
            )))
            .with_ansi(false)
            .with_writer(move || LogWriter(writer.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        buf
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs_text() -> String {
    String::from_utf8_lossy(&captured_logs().lock().unwrap()).into_owned()
}

/// Polls until `f` holds (bounded), for events outside our control such as log lines arriving.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------- server-everything (2025 era)

async fn check_everything(c: &McpClient) {
    assert_eq!(c.protocol_version().as_deref(), Some("2025-11-25"));
    let tools = c.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for want in ["echo", "get-sum", "get-env", "get-structured-content"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let structured = tools
        .iter()
        .find(|t| t.name == "get-structured-content")
        .unwrap();
    assert!(structured.output_schema.is_some());
    assert_eq!(
        structured.annotations.get("readOnlyHint"),
        Some(&json!(true))
    );
    // Every annotation is kept as the server gave it (the pins hash them all).
    let toggle = tools
        .iter()
        .find(|t| t.name == "toggle-simulated-logging")
        .unwrap();
    assert_eq!(toggle.annotations.get("readOnlyHint"), Some(&json!(false)));
    assert_eq!(
        Value::Object(toggle.annotations.clone()),
        json!({"destructiveHint": false, "idempotentHint": false, "openWorldHint": false, "readOnlyHint": false})
    );
    assert_eq!(
        structured.input_schema["properties"]["location"]["type"],
        "string"
    );

    assert_eq!(
        call(c, "echo", json!({"message": "hello"})).await.unwrap(),
        ToolOutput::Text("Echo: hello".into())
    );
    assert_eq!(
        call(c, "get-sum", json!({"a": 2, "b": 3})).await.unwrap(),
        ToolOutput::Text("The sum of 2 and 3 is 5.".into())
    );
    assert_eq!(
        json_of(
            call(c, "get-structured-content", json!({"location": "Chicago"}))
                .await
                .unwrap()
        ),
        json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
    );
    // Bad arguments: the server reports the validation failure as a tool error.
    let e = call(c, "get-sum", json!({"a": "two"})).await.unwrap_err();
    assert_eq!(e.reason, Reason::ToolError, "{e}");
    assert!(
        e.message
            .starts_with("upstream `everything` tool `get-sum`: "),
        "{e}"
    );
}

#[tokio::test]
async fn everything_over_stdio() {
    let Some((node, entry)) = node_everything() else {
        return;
    };
    let plan = stdio_plan(&node, &[&entry.to_string_lossy(), "stdio"]);
    let c = McpClient::connect_stdio("everything", &plan, vec![], Redactor::new())
        .await
        .unwrap();
    check_everything(&c).await;
    let e = call(&c, "no-such-tool", json!({})).await.unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::ToolError,
            "upstream `everything` tool `no-such-tool`: MCP error -32602: Tool no-such-tool not found"
        )
    );
    c.shutdown().await;
}

#[tokio::test]
async fn everything_over_streamable_http_with_a_session_renewed_after_a_server_restart() {
    let port = ptc_tests::free_port();
    let Some(peer) = everything_http(port).await else {
        return;
    };
    let c = McpClient::connect_http(
        "everything",
        &http_plan(&peer.url()),
        &[],
        &Secrets::default(),
        Redactor::new(),
    )
    .await
    .unwrap();
    check_everything(&c).await;

    // A restarted server no longer knows the session: the client opens a new one by itself.
    peer.stop().await;
    let Some(_peer) = everything_http(port).await else {
        return;
    };
    assert_eq!(
        call(&c, "echo", json!({"message": "again"})).await.unwrap(),
        ToolOutput::Text("Echo: again".into())
    );
}

// ---------------------------------------------------------------- Python mcp 2.x (2026 era)

async fn check_python(c: &McpClient) {
    assert_eq!(c.protocol_version().as_deref(), Some("2026-07-28"));
    // 32 tools in pages of 5: seven pages, all followed.
    let tools = c.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools.len(), 32, "{names:?}");
    assert_eq!(names.first(), Some(&"echo"));
    assert_eq!(names.last(), Some(&"filler-11"));
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 32);
    // The Python peer annotates its reads (and its writes) as the server gave them.
    assert_eq!(tools[0].annotations.get("readOnlyHint"), Some(&json!(true)));
    let write = tools.iter().find(|t| t.name == "add-note").unwrap();
    assert_eq!(write.annotations.get("readOnlyHint"), Some(&json!(false)));

    assert_eq!(
        call(c, "echo", json!({"message": "hi"})).await.unwrap(),
        ToolOutput::Text("Echo: hi".into())
    );
    assert_eq!(
        json_of(call(c, "get-sum", json!({"a": 2, "b": 3})).await.unwrap()),
        json!({"result": 5.0})
    );
    assert_eq!(
        json_of(
            call(c, "get-structured-content", json!({"location": "Paris"}))
                .await
                .unwrap()
        ),
        json!({"location": "Paris", "temperature": 22.5, "conditions": "Sunny"})
    );
    assert_eq!(
        json_of(call(c, "json-text", json!({})).await.unwrap()),
        json!({"kind": "json-in-text", "items": [1, 2, 3]})
    );
    assert_eq!(
        call(c, "nothing", json!({})).await.unwrap(),
        ToolOutput::Empty
    );
    let e = call(c, "fail", json!({"message": "the disk is full"}))
        .await
        .unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::ToolError,
            "upstream `py` tool `fail`: Error executing tool fail: the disk is full"
        )
    );
    let e = call(c, "protocol-error", json!({"message": "no such record"}))
        .await
        .unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::UpstreamError,
            "upstream `py` tool `protocol-error`: the server answered with error -32001: no such \
             record"
        )
    );
}

#[tokio::test]
async fn python_server_over_stdio() {
    let Some(c) = python_stdio(vec![], Redactor::new(), |_| {}).await else {
        return;
    };
    check_python(&c).await;
}

#[tokio::test]
async fn python_server_over_streamable_http() {
    let Some(peer) = python_http(&[]).await else {
        return;
    };
    let c = McpClient::connect_http(
        "py",
        &http_plan(&peer.url()),
        &[],
        &Secrets::default(),
        Redactor::new(),
    )
    .await
    .unwrap();
    check_python(&c).await;
}

// ---------------------------------------------------------------- lifecycle

#[tokio::test]
async fn a_crashed_server_fails_the_call_in_flight_and_is_restarted() {
    let marker = fresh_marker("crash");
    let env = marker_env("PTC_CRASH_MARKER", &marker);
    // Not sandboxed: a sandbox's server has a pid of its own namespace, the same at each start.
    let Some(c) = python_stdio(env, Redactor::new(), unsandboxed).await else {
        return;
    };
    let first = call(&c, "pid", json!({})).await.unwrap();
    let e = call(&c, "crash", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    assert!(
        e.message
            .starts_with("upstream `py` tool `crash`: the connection closed"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "crashed\n");
    let second = call(&c, "pid", json!({})).await.unwrap();
    assert_ne!(first, second, "a new server process answers");
    assert_eq!(
        call(&c, "echo", json!({"message": "back"})).await.unwrap(),
        ToolOutput::Text("Echo: back".into())
    );
    // An answered call clears the failure count: the next crash is the first again.
    call(&c, "crash", json!({})).await.unwrap_err();
    let soon = Some(Instant::now() + Duration::from_millis(1));
    let e = c.call_tool("pid", args(json!({})), soon).await.unwrap_err();
    assert!(
        e.message
            .starts_with("upstream `py` tool `pid`: reconnecting after 1 failure(s);"),
        "{e}"
    );
    std::fs::remove_file(&marker).unwrap();
}

#[tokio::test]
async fn a_reconnection_gives_up_at_the_calls_deadline() {
    captured_logs();
    let Some((python, script)) = python_peer() else {
        return;
    };
    let marker = fresh_marker("mute");
    // The first start is the Python server; once `crash` has left its marker, the restarted
    // command never answers the handshake.
    let plan = stdio_plan(
        "sh",
        &[
            "-c",
            "[ -e \"$PTC_CRASH_MARKER\" ] && exec sleep 30; exec \"$0\" \"$1\" stdio",
            &python,
            &script.to_string_lossy(),
        ],
    );
    let env = vec![(
        "PTC_CRASH_MARKER".to_string(),
        marker.to_string_lossy().into_owned(),
    )];
    let c = McpClient::connect_stdio("py-mute", &plan, env, Redactor::new())
        .await
        .unwrap();
    call(&c, "crash", json!({})).await.unwrap_err();
    // The failed call itself notes the closed connection (and starts the backoff).
    assert!(
        logs_text()
            .lines()
            .any(|l| l.contains("the server's connection closed") && l.contains("py-mute")),
        "{}",
        logs_text()
    );
    let within = |ms| Some(Instant::now() + Duration::from_millis(ms));
    // The first reconnection waits 200 ms: a call due sooner is refused without waiting (the
    // check runs before the call's own timer, so even a 1 ms deadline sees it).
    let e = c
        .call_tool("pid", args(json!({})), within(1))
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    assert!(
        e.message.starts_with(
            "upstream `py-mute` tool `pid`: reconnecting after 1 failure(s); next attempt in "
        ),
        "{e}"
    );
    assert!(
        e.message.ends_with(" ms, after this call's deadline"),
        "{e}"
    );
    // A deadline before the handshake timeout (30 s) ends the handshake, and says so.
    let e = c
        .call_tool("pid", args(json!({})), within(1_500))
        .await
        .unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::Timeout,
            "upstream `py-mute` tool `pid`: the deadline passed while reconnecting to the server"
        )
    );
    c.shutdown().await;
    std::fs::remove_file(&marker).unwrap();
}

#[tokio::test]
async fn dropping_the_client_kills_the_servers_whole_process_group() {
    let Some((python, script)) = python_peer() else {
        return;
    };
    let pid_file = fresh_marker("group");
    // The server leaves a helper running in its process group, as a wrapper script might.
    // Not sandboxed: the pids watched are the host's.
    let mut plan = stdio_plan(
        "sh",
        &[
            "-c",
            "sleep 30 & echo $! > \"$0\"; exec \"$1\" \"$2\" stdio",
            &pid_file.to_string_lossy(),
            &python,
            &script.to_string_lossy(),
        ],
    );
    unsandboxed(&mut plan);
    let c = McpClient::connect_stdio("py", &plan, vec![], Redactor::new())
        .await
        .unwrap();
    let server = server_pid(&c).await;
    let helper: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!process_gone(helper));
    drop(c);
    eventually("the server to be killed", || process_gone(server)).await;
    eventually("its helper to be killed", || process_gone(helper)).await;

    // A server that never finishes the handshake: its transport is dropped unclosed.
    let _ = std::fs::remove_file(&pid_file);
    let mut plan = stdio_plan(
        "sh",
        &[
            "-c",
            "sleep 30 & echo $! > \"$0\"; exec sleep 30",
            &pid_file.to_string_lossy(),
        ],
    );
    plan.handshake_timeout_ms = 2_000;
    unsandboxed(&mut plan);
    let e = failed_start("mute", &plan).await;
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    let helper: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually("the mute server's helper to be killed", || {
        process_gone(helper)
    })
    .await;
    std::fs::remove_file(&pid_file).unwrap();
}

fn process_gone(pid: u32) -> bool {
    // Gone, or a zombie waiting to be reaped: either way it no longer runs.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn server_pid(c: &McpClient) -> u32 {
    match call(c, "pid", json!({})).await.unwrap() {
        // The pid is a number, so it arrives as JSON text.
        ToolOutput::Json(b) => String::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_server_is_killed_on_shutdown_and_when_the_client_is_dropped() {
    let exit_marker = fresh_marker("exit");
    let env = marker_env("PTC_EXIT_MARKER", &exit_marker);
    // Not sandboxed: the pids watched are the host's (a sandboxed server's are tested in
    // `a_sandbox_ends_whole_with_its_client`).
    let Some(c) = python_stdio(env, Redactor::new(), unsandboxed).await else {
        return;
    };
    let pid = server_pid(&c).await;
    assert!(!process_gone(pid));
    c.shutdown().await;
    assert!(process_gone(pid), "shutdown waits for the server to end");
    // It ended on its own once its input was closed (the stdio shutdown sequence), not by a kill.
    assert_eq!(
        std::fs::read_to_string(&exit_marker).unwrap(),
        "input closed\n"
    );
    std::fs::remove_file(&exit_marker).unwrap();
    let e = call(&c, "echo", json!({"message": "x"})).await.unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::UpstreamUnavailable,
            "upstream `py` tool `echo`: the client was shut down"
        )
    );

    let Some(c) = python_stdio(vec![], Redactor::new(), unsandboxed).await else {
        return;
    };
    let pid = server_pid(&c).await;
    drop(c);
    eventually("the dropped client's server to die", || process_gone(pid)).await;
}

#[tokio::test]
async fn a_call_past_its_deadline_is_a_timeout_and_the_connection_stays_usable() {
    let Some(c) = python_stdio(vec![], Redactor::new(), |_| {}).await else {
        return;
    };
    let started = Instant::now();
    let e = c
        .call_tool(
            "sleep",
            args(json!({"ms": 20_000})),
            Some(Instant::now() + Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::Timeout, "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The plan's request timeout applies when the caller gives no deadline.
    let Some(short) = python_stdio(vec![], Redactor::new(), |p| p.request_timeout_ms = 300).await
    else {
        return;
    };
    let e = call(&short, "sleep", json!({"ms": 20_000}))
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::Timeout, "{e}");
    assert_eq!(
        call(&c, "echo", json!({"message": "still here"}))
            .await
            .unwrap(),
        ToolOutput::Text("Echo: still here".into())
    );
}

#[tokio::test]
async fn a_server_that_never_answers_fails_the_handshake_in_time() {
    let mut plan = stdio_plan("sleep", &["30"]);
    plan.handshake_timeout_ms = 300;
    let started = Instant::now();
    let e = failed_start("mute", &plan).await;
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::UpstreamUnavailable,
            "upstream `mute`: the handshake did not complete within 300 ms"
        )
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    let plan = stdio_plan("/nonexistent/mcp-server", &[]);
    let e = failed_start("gone", &plan).await;
    assert_eq!(e.reason, Reason::UpstreamUnavailable);
    assert!(
        e.message
            .starts_with("upstream `gone`: cannot start `/nonexistent/mcp-server`: "),
        "{e}"
    );
}

/// A server that answers every request with an empty result: `server/discover`'s `{}` sends ptc
/// to the older `initialize` handshake (as some servers answer a method they do not know), and
/// an `initialize` answered the same way fails at once, saying so, rather than going round
/// again until the handshake's time is up.
#[tokio::test]
async fn a_server_answering_every_handshake_with_an_empty_result_is_refused_at_once() {
    let answer_all = "import json, sys\n\
        for line in sys.stdin:\n    \
            m = json.loads(line)\n    \
            if 'id' in m:\n        \
                print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {}}), flush=True)\n";
    let Some((python, _)) = python_peer() else {
        return;
    };
    let mut plan = stdio_plan(&python, &["-c", answer_all]);
    plan.handshake_timeout_ms = 20_000;
    let started = Instant::now();
    let e = failed_start("empty", &plan).await;
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::UpstreamUnavailable,
            "upstream `empty`: the handshake failed: the server answered `initialize` with \
             something that is not an initialize result"
        )
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

/// A server that exits during the handshake fails it with what it said on stderr; that is not
/// taken for an answer of the wrong kind (no second try in the older era).
#[tokio::test]
async fn a_server_exiting_during_the_handshake_fails_it_with_its_stderr() {
    let exits = "import sys\nsys.stderr.write('missing API_KEY\\n')\nsys.exit(3)\n";
    let Some((python, _)) = python_peer() else {
        return;
    };
    let plan = stdio_plan(&python, &["-c", exits]);
    let e = failed_start("exits", &plan).await;
    assert_eq!(e.reason, Reason::UpstreamUnavailable);
    assert!(
        e.message
            .starts_with("upstream `exits`: the handshake failed: "),
        "{e}"
    );
    assert!(e.message.contains("missing API_KEY"), "{e}");
}

// ---------------------------------------------------------------- caps

#[tokio::test]
async fn an_oversized_response_is_response_too_large_over_stdio_and_http() {
    let Some(c) = python_stdio(vec![], Redactor::new(), |p| p.max_response_bytes = 4096).await
    else {
        return;
    };
    assert_eq!(
        call(&c, "big", json!({"n": 3000})).await.unwrap(),
        ToolOutput::Text("x".repeat(3000))
    );
    let e = call(&c, "big", json!({"n": 5000})).await.unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::ResponseTooLarge,
            "upstream `py` tool `big`: the response is larger than the 4096-byte cap (max_response_bytes); ask for less (filters, a smaller limit, a summary mode)"
        )
    );
    // Only that call failed: the connection goes on.
    assert_eq!(
        call(&c, "echo", json!({"message": "after"})).await.unwrap(),
        ToolOutput::Text("Echo: after".into())
    );

    let Some(peer) = python_http(&[]).await else {
        return;
    };
    let mut plan = http_plan(&peer.url());
    plan.http.max_response_bytes = 4096;
    let c = McpClient::connect_http("py", &plan, &[], &Secrets::default(), Redactor::new())
        .await
        .unwrap();
    assert_eq!(
        call(&c, "big", json!({"n": 3000})).await.unwrap(),
        ToolOutput::Text("x".repeat(3000))
    );
    let e = call(&c, "big", json!({"n": 5000})).await.unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::ResponseTooLarge,
            "upstream `py` tool `big`: the response is larger than the 4096-byte cap (max_response_bytes); ask for less (filters, a smaller limit, a summary mode)"
        )
    );
    assert_eq!(
        call(&c, "echo", json!({"message": "after"})).await.unwrap(),
        ToolOutput::Text("Echo: after".into())
    );
}

// ---------------------------------------------------------------- credentials and redaction

#[tokio::test]
async fn a_canary_secret_reaches_no_result_error_tool_list_or_log() {
    captured_logs();
    let redactor = Redactor::new();
    redactor.register(CANARY);
    let env = vec![("PTC_CANARY".to_string(), CANARY.to_string())];

    let Some(c) = python_stdio(env.clone(), redactor.clone(), |_| {}).await else {
        return;
    };
    let mut seen = Vec::new();
    let got = call(&c, "get-env", json!({"name": "PTC_CANARY"}))
        .await
        .unwrap();
    assert_eq!(got, ToolOutput::Text("[REDACTED]".into()));
    seen.push(format!("{got:?}"));
    let e = call(&c, "fail-env", json!({"name": "PTC_CANARY"}))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "upstream `py` tool `fail-env`: Error executing tool fail-env: cannot use [REDACTED]"
    );
    seen.push(e.message);
    let tools = c.list_tools().await.unwrap();
    let described = tools.iter().find(|t| t.name == "describe-env").unwrap();
    assert_eq!(described.description, "Configured with [REDACTED]");
    seen.push(format!("{tools:?}"));
    // The server printed the canary to stderr at start; the log has the line, masked.
    eventually("the child's stderr line in the log", || {
        logs_text().contains("starting with PTC_CANARY=[REDACTED]")
    })
    .await;

    // server-everything's get-env dumps its whole environment as JSON.
    if let Some((node, entry)) = node_everything() {
        let plan = stdio_plan(&node, &[&entry.to_string_lossy(), "stdio"]);
        let c = McpClient::connect_stdio("everything", &plan, env, redactor.clone())
            .await
            .unwrap();
        let dumped = json_of(call(&c, "get-env", json!({})).await.unwrap());
        assert_eq!(dumped["PTC_CANARY"], "[REDACTED]");
        // Only the safe variables and the plan's reach the child.
        let names: Vec<&String> = dumped.as_object().unwrap().keys().collect();
        assert!(
            names.iter().all(|k| k.as_str() == "PTC_CANARY"
                // The working folder, which the sandbox names.
                || k.as_str() == "PWD"
                || ptc_core::wire::mcp::INHERITED_ENV.contains(&k.as_str())),
            "{names:?}"
        );
        seen.push(dumped.to_string());
    }

    assert!(!seen.is_empty());
    for text in &seen {
        assert!(!text.contains(CANARY), "canary leaked: {text}");
    }
    assert!(!logs_text().contains(CANARY), "canary leaked into the log");
}

#[tokio::test]
async fn http_auth_headers_are_read_per_request_so_rotation_needs_no_restart() {
    captured_logs();
    let Some(peer) = python_http(&[]).await else {
        return;
    };
    let token_file = std::env::temp_dir().join(format!("ptc-mcp-token-{}", std::process::id()));
    std::fs::write(&token_file, "tok-first-1234\n").unwrap();
    let credentials = [CredentialBinding {
        name: "py-token".into(),
        source: CredentialSource::File {
            path: token_file.to_string_lossy().into_owned(),
        },
        scheme_hint: None,
    }];
    let mut plan = http_plan(&peer.url());
    plan.http.auth = vec![AuthEmitter::Bearer {
        binding: "py-token".into(),
    }];
    plan.http.static_headers = vec![("x-team".into(), "blue".into())];
    let redactor = Redactor::new();
    let c = McpClient::connect_http(
        "py",
        &plan,
        &credentials,
        &Secrets::default(),
        redactor.clone(),
    )
    .await
    .unwrap();
    assert_eq!(
        call(&c, "header", json!({"name": "X-Team"})).await.unwrap(),
        ToolOutput::Text("blue".into())
    );
    let digest = |v: &str| format!("{:x}", sha2::Sha256::digest(v.as_bytes()));
    let seen = call(&c, "auth-digest", json!({})).await.unwrap();
    assert_eq!(seen, ToolOutput::Text(digest("Bearer tok-first-1234")));
    std::fs::write(&token_file, "tok-second-5678\n").unwrap();
    let seen = call(&c, "auth-digest", json!({})).await.unwrap();
    assert_eq!(seen, ToolOutput::Text(digest("Bearer tok-second-5678")));
    // Both values were registered before they were sent.
    assert_eq!(
        redactor.redact("tok-first-1234 tok-second-5678"),
        "[REDACTED] [REDACTED]"
    );
    // A credential that cannot be read fails the call as auth_failed, naming the binding.
    std::fs::remove_file(&token_file).unwrap();
    let e = call(&c, "echo", json!({"message": "x"})).await.unwrap_err();
    assert_eq!(e.reason, Reason::AuthFailed, "{e}");
    assert!(
        e.message.contains("credential `py-token`: cannot read"),
        "{e}"
    );
    let logs = logs_text();
    let connection = format!("127.0.0.1:{}", peer.port);
    assert!(
        logs.contains(&connection),
        "the HTTP client's log is captured"
    );
    assert!(!logs.contains("tok-first") && !logs.contains("tok-second"));
}

/// A loopback TCP proxy in front of `port` that keeps a copy of every byte clients send.
async fn recording_proxy(port: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let local = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            let record = record.clone();
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                    record.lock().unwrap().extend_from_slice(&buf[..n]);
                    if to_server.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
            });
        }
    });
    (local, seen)
}

#[tokio::test]
async fn http_shutdown_ends_the_session_with_a_delete_carrying_the_headers() {
    let port = ptc_tests::free_port();
    let Some(_peer) = everything_http(port).await else {
        return;
    };
    let (proxy, seen) = recording_proxy(port).await;
    let mut plan = http_plan(&format!("http://127.0.0.1:{proxy}/mcp"));
    plan.http.static_headers = vec![("x-team".into(), "blue".into())];
    let c = McpClient::connect_http(
        "everything",
        &plan,
        &[],
        &Secrets::default(),
        Redactor::new(),
    )
    .await
    .unwrap();
    call(&c, "echo", json!({"message": "x"})).await.unwrap();
    let text = || String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    assert!(!text().contains("DELETE "), "{}", text());
    c.shutdown().await;
    let all = text();
    let delete = all
        .split("DELETE /mcp HTTP/1.1\r\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{all}"));
    let head = delete
        .split("\r\n\r\n")
        .next()
        .unwrap()
        .to_ascii_lowercase();
    assert!(head.contains("mcp-session-id: "), "{head}");
    assert!(head.contains("x-team: blue"), "{head}");
}

#[tokio::test]
async fn http_refusals_map_to_their_reasons_and_name_no_secret() {
    let dir = std::env::temp_dir().join(format!("ptc-mcp-status-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let status_file = dir.join("status");
    let token_file = dir.join("token");
    let refuse_once = dir.join("refuse-once");
    let Some(peer) = python_http(&[
        ("PTC_REQUIRED_TOKEN", "right-token-1234".into()),
        (
            "PTC_REFUSE_ONCE_FILE",
            refuse_once.to_string_lossy().into_owned(),
        ),
        (
            "PTC_STATUS_FILE",
            status_file.to_string_lossy().into_owned(),
        ),
    ])
    .await
    else {
        return;
    };
    let credentials = [CredentialBinding {
        name: "py-token".into(),
        source: CredentialSource::File {
            path: token_file.to_string_lossy().into_owned(),
        },
        scheme_hint: None,
    }];
    let mut plan = http_plan(&peer.url());
    plan.http.auth = vec![AuthEmitter::Bearer {
        binding: "py-token".into(),
    }];
    let secrets = Secrets::default();
    let connect = || McpClient::connect_http("py", &plan, &credentials, &secrets, Redactor::new());

    std::fs::write(&token_file, "wrong-token-9999").unwrap();
    let e = connect().await.err().unwrap();
    assert_eq!(e.reason, Reason::AuthFailed, "{e}");
    assert!(e.message.contains("HTTP 401"), "{e}");

    std::fs::write(&token_file, "right-token-1234").unwrap();
    let c = connect().await.unwrap();
    let echo = || call(&c, "echo", json!({"message": "ok"}));
    assert_eq!(echo().await.unwrap(), ToolOutput::Text("Echo: ok".into()));

    let mut messages = Vec::new();
    std::fs::write(&token_file, "wrong-token-9999").unwrap();
    let e = echo().await.unwrap_err();
    assert_eq!(
        (e.reason, e.message.as_str()),
        (
            Reason::AuthFailed,
            "upstream `py` tool `echo`: the server refused the credentials (HTTP 401)"
        )
    );
    messages.push(e.message);
    std::fs::write(&token_file, "right-token-1234").unwrap();

    // A single 401 is tried once more (credentials are read afresh): the call succeeds.
    std::fs::write(&refuse_once, "").unwrap();
    assert_eq!(echo().await.unwrap(), ToolOutput::Text("Echo: ok".into()));
    assert!(!refuse_once.exists(), "the server refused the first try");

    for (status, reason, text) in [
        (
            "429",
            Reason::RateLimited,
            "upstream `py` tool `echo`: rate limited (HTTP 429, Retry-After: 7)",
        ),
        (
            "503",
            Reason::UpstreamUnavailable,
            "upstream `py` tool `echo`: the server answered HTTP 503",
        ),
        (
            "403",
            Reason::Forbidden,
            "upstream `py` tool `echo`: the server refused access (HTTP 403)",
        ),
    ] {
        std::fs::write(&status_file, status).unwrap();
        let e = echo().await.unwrap_err();
        assert_eq!((e.reason, e.message.as_str()), (reason, text));
        messages.push(e.message);
    }
    std::fs::remove_file(&status_file).unwrap();
    assert_eq!(echo().await.unwrap(), ToolOutput::Text("Echo: ok".into()));
    for m in &messages {
        assert!(!m.contains("token-"), "{m}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An exec credential is cached; a 401 from the MCP server runs its command again for the one
/// retry (the OpenAPI side is tested in tests/tests/upstreams_observatory.rs).
#[cfg(unix)]
#[tokio::test]
async fn a_401_runs_an_exec_credentials_command_again() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ptc-mcp-exec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let refuse_once = dir.join("refuse-once");
    let runs = dir.join("runs");
    let script = dir.join("token.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> {}\necho right-token-1234\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let Some(peer) = python_http(&[
        ("PTC_REQUIRED_TOKEN", "right-token-1234".into()),
        (
            "PTC_REFUSE_ONCE_FILE",
            refuse_once.to_string_lossy().into_owned(),
        ),
    ])
    .await
    else {
        return;
    };
    let credentials = [CredentialBinding {
        name: "py-exec".into(),
        source: CredentialSource::Exec(ptc_plan::ExecSource {
            command: script.to_string_lossy().into_owned(),
            args: vec![],
            env: vec![],
            timeout_ms: 5_000,
            cache_ttl_ms: 3_600_000,
        }),
        scheme_hint: None,
    }];
    let mut plan = http_plan(&peer.url());
    plan.http.auth = vec![AuthEmitter::Bearer {
        binding: "py-exec".into(),
    }];
    let c = McpClient::connect_http(
        "py",
        &plan,
        &credentials,
        &Secrets::default(),
        Redactor::new(),
    )
    .await
    .unwrap();
    let echo = || call(&c, "echo", json!({"message": "ok"}));
    let ran = || std::fs::read_to_string(&runs).unwrap().lines().count();
    assert_eq!(echo().await.unwrap(), ToolOutput::Text("Echo: ok".into()));
    assert_eq!(ran(), 1, "cached across the session's requests");
    std::fs::write(&refuse_once, "").unwrap();
    assert_eq!(echo().await.unwrap(), ToolOutput::Text("Echo: ok".into()));
    assert!(!refuse_once.exists(), "the server refused the first try");
    assert_eq!(ran(), 2, "the 401 ran the command again, once");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_flood_on_stderr_is_drained_and_logged_in_bounded_lines() {
    captured_logs();
    let Some(c) = python_stdio(vec![], Redactor::new(), |_| {}).await else {
        return;
    };
    // A line of exactly 2048 bytes with its line break is whole: the next line is not skipped.
    for (n, text) in [(2047, "T"), (1, "after-2047")] {
        call(&c, "shout", json!({"n": n, "text": text}))
            .await
            .unwrap();
    }
    eventually("the line after the 2048-byte one", || {
        logs_text().contains("after-2047")
    })
    .await;
    assert!(logs_text().contains(&"T".repeat(2047)));
    // 1 MB on one line: far past a pipe's buffer, so an undrained stderr would block the server.
    assert_eq!(
        call(&c, "shout", json!({"n": 1_000_000})).await.unwrap(),
        ToolOutput::Text("done".into())
    );
    // A line after the flood: once it is logged, so is everything before it.
    call(&c, "shout", json!({"n": 1, "text": "end-of-flood"}))
        .await
        .unwrap();
    eventually("the line after the flood", || {
        logs_text().contains("end-of-flood")
    })
    .await;
    let kept = "S".repeat(2048);
    let logs = logs_text();
    assert!(
        !logs.contains(&format!("{kept}S")),
        "the line is cut at 2048 bytes"
    );
    assert_eq!(
        logs.matches(&kept).count(),
        1,
        "the rest of the line is dropped, not logged as more lines"
    );
    assert_eq!(
        call(&c, "echo", json!({"message": "after"})).await.unwrap(),
        ToolOutput::Text("Echo: after".into())
    );
}

#[tokio::test]
async fn calls_in_flight_when_the_server_crashes_fail_at_once() {
    let marker = fresh_marker("sleep");
    let env = marker_env("PTC_SLEEP_MARKER", &marker);
    let Some(c) = python_stdio(env, Redactor::new(), |_| {}).await else {
        return;
    };
    let started = Instant::now();
    let sleeper = {
        let c = c.clone();
        tokio::spawn(async move { call(&c, "sleep", json!({"ms": 60_000})).await })
    };
    eventually("the sleep call to reach the server", || marker.exists()).await;
    let e = call(&c, "crash", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    let e = sleeper.await.unwrap().unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    assert!(
        e.message
            .starts_with("upstream `py` tool `sleep`: the connection closed"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "not at its deadline"
    );
    std::fs::remove_file(&marker).unwrap();
}

#[tokio::test]
async fn concurrent_calls_share_one_connection() {
    let Some(c) = python_stdio(vec![], Redactor::new(), |_| {}).await else {
        return;
    };
    let pid = server_pid(&c).await;
    let calls = (0..16).map(|i| {
        let c = c.clone();
        async move { call(&c, "echo", json!({"message": format!("m{i}")})).await }
    });
    let results = futures_util::future::join_all(calls).await;
    assert_eq!(results.len(), 16);
    for (i, r) in results.into_iter().enumerate() {
        assert_eq!(r.unwrap(), ToolOutput::Text(format!("Echo: m{i}")));
    }
    assert_eq!(server_pid(&c).await, pid, "one server answered them all");
}

/// `max_retries` of an mcp_http upstream: a call whose request never reached the server (its
/// connection refused, then each reconnection refused) is tried exactly `max_retries` more
/// times, waiting the configured backoff between tries; with 0 it is tried once.
#[tokio::test]
async fn a_call_that_never_reached_the_server_is_retried_max_retries_times() {
    for max_retries in [0, 2] {
        let Some(peer) = python_http(&[]).await else {
            return;
        };
        let mut plan = http_plan(&peer.url());
        plan.http.backoff = Backoff {
            max_retries,
            initial_ms: 1,
            max_ms: 4,
        };
        let c = McpClient::connect_http("py", &plan, &[], &Secrets::default(), Redactor::new())
            .await
            .unwrap();
        assert_eq!(
            call(&c, "echo", json!({"message": "up"})).await.unwrap(),
            ToolOutput::Text("Echo: up".into())
        );
        peer.stop().await;
        let e = call(&c, "echo", json!({"message": "down"}))
            .await
            .unwrap_err();
        assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
        assert!(e.message.starts_with("upstream `py` tool `echo`: "), "{e}");
        match max_retries {
            0 => assert!(!e.message.contains("retr"), "{e}"),
            n => assert!(e.message.ends_with(&format!(" (after {n} retries)")), "{e}"),
        }
        c.shutdown().await;
    }
}

/// A retry is made only if the reconnection may start before the call's deadline: with a backoff
/// longer than the time left, a call whose request never reached the server fails at once,
/// untried again (the session was dropped and its reconnection put off by the backoff).
#[tokio::test]
async fn no_retry_is_made_that_the_backoff_would_put_past_the_deadline() {
    let Some(peer) = python_http(&[]).await else {
        return;
    };
    let mut plan = http_plan(&peer.url());
    plan.http.backoff = Backoff {
        max_retries: 2,
        initial_ms: 60_000,
        max_ms: 60_000,
    };
    let c = McpClient::connect_http("py", &plan, &[], &Secrets::default(), Redactor::new())
        .await
        .unwrap();
    assert!(call(&c, "echo", json!({"message": "up"})).await.is_ok());
    peer.stop().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let e = c
        .call_tool("echo", args(json!({"message": "down"})), Some(deadline))
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    assert!(!e.message.contains("retr"), "no retry was made: {e}");
    c.shutdown().await;
}

/// Each try of a call that never reached the server counts, the one whose request was refused and
/// each reconnection after it: with one retry, two failures, as the next call's refusal says.
#[tokio::test]
async fn each_try_of_a_call_that_never_reached_the_server_counts_once() {
    let Some(peer) = python_http(&[]).await else {
        return;
    };
    let mut plan = http_plan(&peer.url());
    plan.http.backoff = Backoff {
        max_retries: 1,
        initial_ms: 200,
        max_ms: 200,
    };
    let c = McpClient::connect_http("py", &plan, &[], &Secrets::default(), Redactor::new())
        .await
        .unwrap();
    assert!(call(&c, "echo", json!({"message": "up"})).await.is_ok());
    peer.stop().await;
    let e = call(&c, "echo", json!({"message": "down"}))
        .await
        .unwrap_err();
    assert!(e.message.ends_with(" (after 1 retry)"), "{e}");
    // The next reconnection is put off by the backoff, past this call's deadline: its refusal
    // counts the failures so far.
    let soon = std::time::Instant::now() + std::time::Duration::from_millis(50);
    let e = c
        .call_tool("echo", args(json!({"message": "later"})), Some(soon))
        .await
        .unwrap_err();
    assert!(e.message.contains("reconnecting after 2 failure(s)"), "{e}");
    c.shutdown().await;
}

#[tokio::test]
async fn http_connection_failures_are_upstream_unavailable() {
    // Nothing listens on a port just released.
    let url = format!("http://127.0.0.1:{}/mcp", ptc_tests::free_port());
    let e = McpClient::connect_http(
        "nobody",
        &http_plan(&url),
        &[],
        &Secrets::default(),
        Redactor::new(),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    assert!(
        e.message
            .starts_with("upstream `nobody`: the handshake failed: "),
        "{e}"
    );
    // Plain http is refused unless the plan allows it.
    let mut plan = http_plan(&url);
    plan.http.allow_insecure_http = false;
    let e = McpClient::connect_http("plain", &plan, &[], &Secrets::default(), Redactor::new())
        .await
        .err()
        .unwrap();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    assert!(e.message.contains("URL scheme is not allowed"), "{e}");
}

/// What `ptc vendor` does for an `mcp_http` upstream: it connects with the configured
/// credentials and lists every tool; a wrong credential is `auth_failed`, naming no secret.
#[tokio::test]
async fn vendoring_over_http_lists_every_tool_with_the_configured_credentials() {
    let Some(peer) = python_http(&[("PTC_REQUIRED_TOKEN", "right-token-1234".into())]).await else {
        return;
    };
    let config = |token: &str| {
        json!({
            "credentials": {"py-token": {"source": "literal", "value": token, "scheme_hint": "bearer"}},
            "upstreams": {"py": {
                "transport": "mcp_http",
                "url": peer.url(),
                "allow_insecure_http": true,
                "allow_insecure_auth": true,
                "auth": [{"scheme": "bearer", "binding": "py-token"}],
            }}
        })
        .to_string()
    };
    let list = |token: &str| {
        let loaded = ptc_plan::load_str(
            &config(token),
            Path::new("/vendor-test/upstreams.json"),
            &ptc_plan::FileSource,
        )
        .unwrap_or_else(|d| panic!("{d}"));
        async move {
            let redactor = Redactor::default();
            ptc_core::list_live_tools(&loaded.plan, &loaded.secrets, "py", &redactor, None).await
        }
    };
    let tools = list("right-token-1234").await.expect("listed");
    assert_eq!(tools.len(), 32);
    // The same server over HTTP pins each tool exactly as the committed stdio list does.
    let committed: ptc_plan::pins::ToolList = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("../configs/peers/vendored/py.tools.json"))
            .expect("the committed list"),
    )
    .expect("a tool list");
    for name in ["echo", "get-sum", "get-structured-content"] {
        let live = tools.iter().find(|t| t.name == name).expect("listed").pin();
        assert_eq!(Some(&live), committed.tool(name), "{name}");
    }
    let refused = list("wrong-token-5678").await.unwrap_err();
    assert_eq!(refused.reason, Reason::AuthFailed, "{refused}");
    assert!(!refused.message.contains("wrong-token-5678"), "{refused}");
    peer.stop().await;
}
