//! The shared host commands as an operator and a developer use them: the REPL (multi-line forms,
//! `*1`, discovery), the audit line of `serve --log-format json`, and the start-up overrides with
//! the config's own URL rules.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_generated-example");

fn run_with_stdin(args: &[&str], input: &str) -> (bool, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("HOME", std::env::temp_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn repl_keeps_definitions_and_results_reads_multi_line_forms_and_discovers() {
    let history = std::env::temp_dir().join(format!("ptc-repl-{}.history", std::process::id()));
    let input = "(def x 41)\n(inc x)\n(+ *1 1)\n(let [a 1]\n  (+ a\n     1))\n(count (dir 'observatory))\n(undefined-fn 1)\n:quit\n";
    let (ok, out, err) = run_with_stdin(&["repl", "--history", history.to_str().unwrap()], input);
    assert!(ok, "{out}\n{err}");
    let answers: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("generated-example repl"))
        .collect();
    assert!(answers.contains(&"42"), "{out}");
    assert!(answers.contains(&"43"), "*1 is the last result: {out}");
    assert!(answers.contains(&"2"), "a multi-line form: {out}");
    assert!(answers.contains(&"8"), "discovery: {out}");
    assert!(
        answers
            .iter()
            .any(|l| l.starts_with("error: ") && l.contains("undefined-fn")),
        "{out}"
    );
    let saved = std::fs::read_to_string(&history).unwrap_or_default();
    assert!(saved.contains("(inc x)"), "history is saved: {saved}");
    let _ = std::fs::remove_file(&history);
}

#[test]
fn serve_writes_one_json_audit_line_per_eval_without_the_program() {
    let mut child = Command::new(BIN)
        .args(["serve", "--log-format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let program = "(str \"secret-looking-marker\" (+ 1 2))";
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "lisp_eval", "arguments": {"program": program}}})
        .to_string(),
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "lisp_eval", "arguments": {"program": "(fail 1)"}}})
        .to_string(),
    ];
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = 0;
    while seen < 3 {
        let l = replies.next().unwrap().unwrap();
        if l.contains("\"id\":") {
            seen += 1;
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let audits: Vec<serde_json::Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "ptc::audit")
        .collect();
    assert_eq!(audits.len(), 2, "{err}");
    // The two calls run concurrently, so their audit lines come in the order they finish.
    let by_hash = |p: &str| {
        let hash = ptc::core::program::program_hash(p);
        audits
            .iter()
            .find(|a| a["program_sha256"] == hash.as_str())
            .unwrap_or_else(|| panic!("no audit line for {p}: {err}"))
    };
    let ok = by_hash(program);
    assert_eq!(ok["outcome"], "ok", "{err}");
    assert_eq!(ok["program_bytes"], program.len());
    let failed = by_hash("(fail 1)");
    assert_eq!(failed["outcome"], "error", "{err}");
    assert_eq!(failed["reason"], "fail");
    assert!(!err.contains("secret-looking-marker"), "{err}");
}

#[test]
fn overrides_obey_the_configs_url_rules() {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory/upstreams.json");
    let text = std::fs::read_to_string(&config).unwrap();
    // The fixture opts in to http; a copy without the opt-in must refuse an http override.
    let strict = text
        .replace("\"allow_insecure_http\": true,", "")
        .replace("\"allow_insecure_auth\": true,", "")
        .replace("http://127.0.0.1:8787", "https://observatory.example.com");
    let dir = std::env::temp_dir().join(format!("ptc-overrides-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        config.with_file_name("observatory.openapi.json"),
        dir.join("observatory.openapi.json"),
    )
    .unwrap();
    // And the programs it declares.
    std::fs::create_dir_all(dir.join("programs")).unwrap();
    for program in std::fs::read_dir(config.with_file_name("programs")).unwrap() {
        let program = program.unwrap();
        std::fs::copy(
            program.path(),
            dir.join("programs").join(program.file_name()),
        )
        .unwrap();
    }
    let strict_path = dir.join("upstreams.json");
    std::fs::write(&strict_path, strict).unwrap();
    let ptc = Path::new(BIN).with_file_name("ptc");
    if !ptc.exists() {
        ptc_tests::skip(&format!(
            "{} is not built (cargo build -p ptc-cli)",
            ptc.display()
        ));
        return;
    }
    let catalog = |args: &[&str]| {
        let out = Command::new(&ptc)
            .args(["catalog", "--config", strict_path.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(catalog(&[]).0, Some(0));
    assert_eq!(
        catalog(&["--upstream-url", "observatory=https://staging.example.com"]).0,
        Some(0)
    );
    let (code, err) = catalog(&["--upstream-url", "observatory=http://staging.example.com"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("http://") && err.contains("allow_insecure_http"),
        "{err}"
    );
    let (code, err) = catalog(&["--upstream-url", "nosuch=https://x.example.com"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no upstream `nosuch`"), "{err}");
    let (code, err) = catalog(&["--upstream-url", "observatory"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("expected NAME=VALUE"), "{err}");
    let (code, err) = catalog(&["--credential-file", "nosuch=/tmp/x"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no credential `nosuch`"), "{err}");
    // The compiled-plan path (generated-example) applies the same rules through ptc-plan.
    let out = Command::new(BIN)
        .args([
            "catalog",
            "--upstream-url",
            "observatory=ftp://x.example.com",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A compiled deployment's catalog is its build: SIGHUP (a catalog refresh) is refused, with
/// the way to change it, and the host goes on serving.
#[cfg(unix)]
#[test]
fn a_compiled_deployment_refuses_a_catalog_refresh() {
    let mut host = ptc_tests::HostProcess::serve(BIN, &[]);
    host.hangup();
    let line = host.line_with("catalog not refreshed: ");
    assert!(
        line.ends_with(
            "catalog not refreshed: this deployment's catalog is compiled into its binary \
             (ptc_upstreams!): change the config and rebuild to change it"
        ),
        "{line}"
    );
    assert!(host.child.try_wait().unwrap().is_none(), "the host goes on");
}

/// POSTs a JSON-RPC `msg` to `url` with `token` and the legacy session `id`; the status, the
/// session id it answers with, and the body.
async fn post(
    url: &str,
    token: &str,
    id: Option<&str>,
    msg: serde_json::Value,
) -> (u16, Option<String>, String) {
    let mut req = ptc_tests::issuer::http_client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .bearer_auth(token)
        .body(msg.to_string());
    if let Some(id) = id {
        req = req.header("mcp-session-id", id);
    }
    let r = req.send().await.unwrap();
    let session = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status().as_u16(), session, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_host_logs_its_callers_and_never_their_tokens() {
    let Some(issuer) = ptc_tests::issuer::start(&[]) else {
        return;
    };
    let aud = "http://127.0.0.1/canary/mcp";
    let mut host = ptc_tests::HostProcess::serve(
        BIN,
        &[
            "--log-format",
            "json",
            "--oauth-issuer",
            &issuer.url,
            "--oauth-audience",
            aud,
        ],
    );
    let url = format!("http://{}/mcp", host.addr);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let good = issuer
        .mint(serde_json::json!({"claims": {"sub": "canary-caller", "aud": aud}}))
        .await;
    let expired = issuer
        .mint(serde_json::json!({"claims": {"sub": "x", "aud": aud, "exp": now - 3600}}))
        .await;
    let wrong_audience = issuer
        .mint(serde_json::json!({"claims": {"sub": "x", "aud": "https://elsewhere"}}))
        .await;
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "canary", "version": "1"}}});
    for bad in [&expired, &wrong_audience] {
        let (status, _, body) = post(&url, bad, None, init.clone()).await;
        assert_eq!(status, 401, "{body}");
    }
    let (status, id, _) = post(&url, &good, None, init).await;
    assert_eq!(status, 200);
    let id = id.unwrap();
    let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(&url, &good, Some(&id), note).await;
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "lisp_eval", "arguments": {"program": "(+ 1 2)"}}});
    let (status, _, body) = post(&url, &good, Some(&id), call).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"caller\":\"canary-caller\""), "{body}");
    assert!(!body.contains(&good));
    // Everything the host logged (the audit line was written before the reply), to its end.
    let logged = host.kill();
    let audit = logged
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["target"] == "ptc::audit")
        .expect("an audit line");
    assert_eq!(audit["caller"], "canary-caller", "{audit}");
    let logged = logged.join("\n");
    assert!(logged.contains("token refused"), "{logged}");
    for token in [&good, &expired, &wrong_audience] {
        assert!(
            !logged.contains(token.as_str()),
            "a token in the log:\n{logged}"
        );
        // Not even its signature, the part that makes it usable.
        let signature = token.rsplit('.').next().unwrap();
        assert!(
            !logged.contains(signature),
            "a signature in the log:\n{logged}"
        );
    }
}
