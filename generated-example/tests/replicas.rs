//! Scaling out: two `generated-example serve --http` replicas behind nginx (Debian package),
//! configured with the nginx block of docs/operations.md, and an MCP client's evaluations (the
//! Python `mcp` SDK, both protocol eras) succeeding through it.
//!
//! `scripts/test` installs the client and checks for nginx; elsewhere, without them, the test
//! prints why it was skipped (with CI=true it fails instead).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ptc_tests::host_clients;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_generated-example");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn replica(id: &str) -> (Killed, String) {
    replica_with(&["--replica-id", id])
}

/// A replica started with `args` after `serve --http 127.0.0.1:0`.
fn replica_with(args: &[&str]) -> (Killed, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the replica says where it listens")
            .unwrap();
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.trim_end_matches("/mcp").to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (Killed(child), addr)
}

/// The `n`th (from 0) ```nginx block of docs/operations.md.
fn documented_nginx(n: usize) -> String {
    let doc = std::fs::read_to_string(root().join("docs/operations.md")).unwrap();
    let start = doc
        .match_indices("```nginx\n")
        .nth(n)
        .unwrap_or_else(|| panic!("operations.md has nginx block {n}"))
        .0
        + 9;
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end].to_string()
}

/// nginx running `block` (its replica and front addresses replaced by these), until dropped.
struct Nginx {
    _process: Killed,
    dir: PathBuf,
    front: String,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn nginx(binary: &Path, block: &str, addr_a: &str, addr_b: &str, name: &str) -> Nginx {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let front = format!("127.0.0.1:{port}");
    let block = block
        .replace("127.0.0.1:7401", addr_a)
        .replace("127.0.0.1:7402", addr_b)
        .replace("127.0.0.1:7332", &front);
    assert!(block.contains(addr_a) && block.contains(addr_b) && block.contains(&front));
    let dir = std::env::temp_dir().join(format!("ptc-nginx-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log;\nevents {{}}\nhttp {{\n  access_log off;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         {block}\n}}\n"
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let process = Killed(
        Command::new(binary)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Wait (bounded) for nginx to accept connections.
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&front).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not start: {}",
            std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Nginx {
        _process: process,
        dir,
        front,
    }
}

/// The `result` of each call in a client's output.
fn results(out: &Value) -> Vec<Value> {
    out["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["structured"]["result"].clone())
        .collect()
}

#[test]
fn two_replicas_behind_nginx_serve_an_mcp_clients_evals() {
    let (Some(nginx_bin), Some(python)) = (host_clients::nginx(), host_clients::python()) else {
        return;
    };
    let (_a, addr_a) = replica("r1");
    let (_b, addr_b) = replica("r2");
    let front = nginx(&nginx_bin, &documented_nginx(0), &addr_a, &addr_b, "routed");
    let programs = json!([
        {"program": "(+ 1 2)"},
        {"program": "(count (dir 'observatory))"},
        {"program": "(reduce + (map inc data/xs))", "context": {"xs": [1, 2, 3]}}
    ]);
    // Round-robin sends the `initialize` of successive legacy clients to alternate replicas, so
    // three of them open sessions on both; each session's later requests must reach its own.
    for mode in ["legacy", "legacy", "legacy", "auto"] {
        let spec = json!({"transport": "http", "url": format!("http://{}/mcp", front.front),
                          "mode": mode, "programs": programs});
        let v = host_clients::run(&python, &spec);
        assert_eq!(
            results(&v),
            [json!(3), json!(8), json!(9)],
            "mode {mode}: {v}"
        );
    }
}

#[test]
fn replicas_with_sessions_share_them_through_redis_behind_round_robin() {
    let (Some(nginx_bin), Some(python)) = (host_clients::nginx(), host_clients::python()) else {
        return;
    };
    let Some(redis) = ptc_tests::redis::start() else {
        return;
    };
    let args = ["--stateless", "--sessions", "--session-store", &redis.url];
    let (_a, addr_a) = replica_with(&args);
    let (_b, addr_b) = replica_with(&args);
    let call = |url: &str, programs: Value| {
        let spec = json!({"transport": "http", "url": url, "mode": "auto", "programs": programs});
        results(&host_clients::run(&python, &spec))
    };
    // Defined through one replica, used through the other: the state is in Redis.
    let defined = call(
        &format!("http://{addr_a}/mcp"),
        json!([{"program": "(def x 41) (defn twice [v] (* 2 v)) :ok", "session": "inv"}]),
    );
    assert_eq!(defined, [json!("ok")]);
    let used = call(
        &format!("http://{addr_b}/mcp"),
        json!([{"program": "(twice (inc x))", "session": "inv"}]),
    );
    assert_eq!(used, [json!(84)]);
    // Behind the documented round-robin block, a session's programs go to either replica.
    let front = nginx(
        &nginx_bin,
        &documented_nginx(1),
        &addr_a,
        &addr_b,
        "sessions",
    );
    let programs: Vec<Value> = (0..6)
        .map(|_| json!({"program": "(def x (inc x)) x", "session": "inv"}))
        .collect();
    let counted = call(&format!("http://{}/mcp", front.front), json!(programs));
    assert_eq!(counted, (42..48).map(|n| json!(n)).collect::<Vec<_>>());
}
