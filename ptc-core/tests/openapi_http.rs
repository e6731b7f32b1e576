//! The OpenAPI transport against a loopback fixture: request shape, every status, caps,
//! timeouts, redirects, retries, credential rotation and redaction.

mod support;

use std::time::{Duration, Instant};

use ptc_core::{CallOptions, Reason, StartOptions, ToolError, ToolOutput, Upstreams};
use serde_json::{Map, Value, json};

async fn upstreams(d: &support::Deployment) -> Upstreams {
    let loaded = d.load();
    Upstreams::start(loaded.plan, loaded.secrets, StartOptions::default())
        .await
        .unwrap()
}

fn args(v: Value) -> Map<String, Value> {
    let Value::Object(m) = v else { panic!() };
    m
}

async fn call(u: &Upstreams, tool: &str, a: Value) -> Result<ToolOutput, ToolError> {
    u.call("fx", tool, args(a), CallOptions::default()).await
}

fn json_of(out: ToolOutput) -> Value {
    match out {
        ToolOutput::Json(b) => serde_json::from_slice(&b).unwrap(),
        other => panic!("expected JSON, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn request_carries_encoded_path_query_and_headers_in_order() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    let v = json_of(
        call(
            &u,
            "echo",
            json!({"id": "a/b?c#d", "q": "x y&z", "tags": ["t1", "t2"], "n": 3, "mode": "a"}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(v["path"], "/echo/a%2Fb%3Fc%23d");
    let seen = fx.last();
    assert_eq!(
        seen.target,
        "/echo/a%2Fb%3Fc%23d?q=x+y%26z&tags=t1&tags=t2&n=3&mode=a"
    );
    assert_eq!(seen.header("accept"), Some("application/json"));
    assert_eq!(seen.header("x-client"), Some("ptc-test"));
    assert_eq!(seen.header("authorization"), Some("Bearer tok-1"));
    // Nothing the program passes becomes a header.
    assert!(seen.headers.iter().all(|(n, _)| !n.starts_with("x-ptc")));
    // Kebab keys and the map form reach the same wire names.
    call(&u, "echo", json!({"id": "1", "org-id": "acme"}))
        .await
        .unwrap();
    assert_eq!(fx.last().target, "/echo/1?org_id=acme");
    for (value, path) in [
        ("..a", "/echo/..a"),
        ("%2e", "/echo/%252e"),
        (" ", "/echo/%20"),
    ] {
        call(&u, "echo", json!({"id": value})).await.unwrap();
        assert_eq!(fx.last().target, path);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn route_changing_path_values_and_bad_args_never_reach_the_upstream() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    for bad in ["..", ".", ""] {
        let e = call(&u, "echo", json!({"id": bad})).await.unwrap_err();
        assert_eq!(e.reason, Reason::InvalidArgs, "{bad:?}");
        assert!(e.message.contains("is part of the path"), "{}", e.message);
    }
    let e = call(
        &u,
        "echo",
        json!({"id": "1", "n": 11, "mode": "c", "tag": 1}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.reason, Reason::InvalidArgs);
    assert!(
        e.message.starts_with(
            "fx/echo: invalid arguments: :n must be at most 10, got 11; :mode must be one of \"a\" \"b\", got \"c\"; unknown argument :tag (did you mean :tags?)"
        ),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("(tool/call 'fx/echo {:id \"...\"})"),
        "{}",
        e.message
    );
    let e = call(&u, "ecko", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UnknownTool);
    assert!(
        e.message
            .starts_with("no tool `ecko` in upstream `fx` (did you mean `fx/echo`?)"),
        "{}",
        e.message
    );
    let e = u
        .call("fz", "echo", Map::new(), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::UnknownServer);
    assert!(
        e.message
            .starts_with("no upstream `fz` (did you mean `fx`?)"),
        "{}",
        e.message
    );
    assert!(fx.seen().is_empty(), "{:?}", fx.seen());
}

#[tokio::test(flavor = "multi_thread")]
async fn statuses_map_onto_the_result_contract() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    let cases = [
        (400, Reason::ToolError, 1),
        (401, Reason::AuthFailed, 2),
        (403, Reason::Forbidden, 1),
        (404, Reason::NotFound, 1),
        (422, Reason::ToolError, 1),
        (429, Reason::RateLimited, 1),
        (418, Reason::UpstreamError, 1),
        (500, Reason::UpstreamUnavailable, 1),
        (502, Reason::UpstreamUnavailable, 3),
        (503, Reason::UpstreamUnavailable, 3),
        (504, Reason::UpstreamUnavailable, 3),
    ];
    assert!(!cases.is_empty());
    for (code, reason, requests) in cases {
        let before = fx.seen().len();
        let e = call(&u, "status", json!({"code": code})).await.unwrap_err();
        assert_eq!(e.reason, reason, "{code}: {}", e.message);
        assert!(
            e.message.starts_with(&format!("fx/status: HTTP {code}")),
            "{}",
            e.message
        );
        assert!(
            e.message.contains(&format!("detail for {code}")),
            "{}",
            e.message
        );
        assert_eq!(fx.seen().len() - before, requests, "requests for {code}");
    }
    let e = call(&u, "status", json!({"code": 429})).await.unwrap_err();
    assert!(e.message.contains("Retry-After: 7"), "{}", e.message);
    let e = call(&u, "status", json!({"code": 503})).await.unwrap_err();
    assert!(e.message.ends_with("(after 2 retries)"), "{}", e.message);
    assert_eq!(
        call(&u, "empty", json!({})).await.unwrap(),
        ToolOutput::Empty
    );
    assert_eq!(
        call(&u, "empty200", json!({})).await.unwrap(),
        ToolOutput::Empty
    );
    let e = call(&u, "text", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamError);
    assert_eq!(
        e.message,
        "fx/text: HTTP 200 answered with text/html where JSON was expected"
    );
    // Malformed JSON: the typed path says so as upstream_error.
    let e = u
        .call_typed::<_, Value>("fx", "malformed", &json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamError);
}

/// An error answer's body is read for its problem detail up to 8 KiB: at exactly 8 192 bytes
/// the detail is in the message, one byte more and the message keeps only its status line.
#[tokio::test(flavor = "multi_thread")]
async fn error_bodies_are_read_for_their_detail_up_to_8_kib() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    let e = call(&u, "status", json!({"code": 400, "size": 8192}))
        .await
        .unwrap_err();
    assert_eq!(e.message, "fx/status: HTTP 400 Bad Request: detail for 400");
    let e = call(&u, "status", json!({"code": 400, "size": 8193}))
        .await
        .unwrap_err();
    assert_eq!(e.message, "fx/status: HTTP 400 Bad Request");
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_are_cut_at_the_cap_with_and_without_content_length() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    for cl in [true, false] {
        let out = call(&u, "big", json!({"n": 1000, "cl": cl})).await.unwrap();
        let ToolOutput::Json(b) = out else { panic!() };
        assert_eq!(b.len(), 1000);
        let e = call(&u, "big", json!({"n": 1001, "cl": cl}))
            .await
            .unwrap_err();
        assert_eq!(e.reason, Reason::ResponseTooLarge, "cl={cl}");
        assert!(e.message.contains("1000-byte cap"), "{}", e.message);
        let e = call(&u, "big", json!({"n": 5_000_000, "cl": cl}))
            .await
            .unwrap_err();
        assert_eq!(e.reason, Reason::ResponseTooLarge, "cl={cl}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_answers_and_slow_bodies_time_out() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    for tool in ["slow", "slow_body"] {
        let t0 = Instant::now();
        let opts = CallOptions {
            deadline: Some(Instant::now() + Duration::from_millis(300)),
            ..CallOptions::default()
        };
        let e = u.call("fx", tool, Map::new(), opts).await.unwrap_err();
        assert_eq!(e.reason, Reason::Timeout, "{tool}: {}", e.message);
        assert!(t0.elapsed() < Duration::from_millis(1200), "{tool}");
        // Without a program deadline, the upstream's request timeout (1500 ms) applies.
        let e = call(&u, tool, json!({})).await.unwrap_err();
        assert_eq!(e.reason, Reason::Timeout);
        assert_eq!(
            e.message,
            format!(
                "fx/{}: no complete answer within 1500 ms",
                tool.replace('_', "-")
            )
        );
    }
    let past = CallOptions {
        deadline: Some(Instant::now()),
        ..CallOptions::default()
    };
    let before = fx.seen().len();
    let e = u.call("fx", "empty", Map::new(), past).await.unwrap_err();
    assert_eq!(e.reason, Reason::Timeout);
    assert_eq!(fx.seen().len(), before, "no request once the time is up");
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_stay_on_the_origin() {
    let fx = support::start().await;
    let other = support::start().await;
    *fx.state.other_origin.lock().unwrap() = other.base();
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    let v = json_of(call(&u, "redirect_same", json!({})).await.unwrap());
    assert_eq!(v["path"], "/echo/after-redirect");
    assert_eq!(fx.last().header("authorization"), Some("Bearer tok-1"));
    let e = call(&u, "redirect_cross", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamError);
    assert!(
        e.message.contains(&format!(
            "refused to follow a redirect to another origin ({})",
            other.base()
        )),
        "{}",
        e.message
    );
    assert!(other.seen().is_empty(), "the other origin was contacted");
    // A same-origin loop is followed a few times, then reported as such.
    let e = call(&u, "redirect_loop", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamError);
    assert_eq!(
        e.message,
        "fx/redirect-loop: HTTP 302 Found: too many redirects"
    );
}

/// A body that breaks off midway is an unavailable upstream, not a timeout, and says so. The
/// upstream is a raw socket that promises 100 bytes, sends 5 and hangs up.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_breaks_off_is_upstream_unavailable() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client hung up first");
            request.extend_from_slice(&buf[..n]);
        }
        sock.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n[1, 2",
        )
        .await
        .unwrap();
    });
    let d = support::deployment(&format!("http://{addr}"), "tok-1", json!({}));
    let u = upstreams(&d).await;
    let e = call(&u, "truncated", json!({})).await.unwrap_err();
    server.await.unwrap();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{}", e.message);
    // What failed, then the innermost cause, in a few words.
    let cause = e
        .message
        .strip_prefix("fx/truncated: reading the response failed: the response body failed: ")
        .unwrap_or_else(|| panic!("{}", e.message));
    assert!(
        !cause.is_empty() && !cause.contains("127.0.0.1"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_failures_and_flaky_upstreams_retry_with_backoff() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    fx.state
        .flaky_left
        .store(2, std::sync::atomic::Ordering::SeqCst);
    let v = json_of(call(&u, "flaky", json!({})).await.unwrap());
    assert_eq!(v, json!({"ok": true}));
    assert_eq!(fx.seen().len(), 3);
    fx.state
        .flaky_left
        .store(3, std::sync::atomic::Ordering::SeqCst);
    let e = call(&u, "flaky", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamUnavailable);
    assert_eq!(fx.seen().len(), 6);
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let d2 = support::deployment(&format!("http://127.0.0.1:{port}"), "tok-1", json!({}));
    let u2 = upstreams(&d2).await;
    let e = call(&u2, "empty", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::UpstreamUnavailable);
    assert!(
        e.message.starts_with("fx/empty: cannot connect"),
        "{}",
        e.message
    );
    assert!(e.message.ends_with("(after 2 retries)"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_token_file_is_used_on_the_next_call_and_401_rereads_once() {
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), "tok-1", json!({}));
    let u = upstreams(&d).await;
    *fx.state.expected_token.lock().unwrap() = "tok-1".into();
    assert_eq!(
        json_of(call(&u, "secure", json!({})).await.unwrap()),
        json!({"ok": true})
    );
    d.set_token("tok-2");
    *fx.state.expected_token.lock().unwrap() = "tok-2".into();
    assert_eq!(
        json_of(call(&u, "secure", json!({})).await.unwrap()),
        json!({"ok": true})
    );
    assert_eq!(fx.last().header("authorization"), Some("Bearer tok-2"));
    // The upstream moved on; the file did not: one fresh read and retry, then auth_failed.
    *fx.state.expected_token.lock().unwrap() = "tok-3".into();
    let before = fx.seen().len();
    let e = call(&u, "secure", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::AuthFailed);
    assert_eq!(fx.seen().len() - before, 2);
    // Rotated while the request was in flight: the 401 retry reads the new token and succeeds.
    *fx.state.rotate_on_401.lock().unwrap() = Some((d.token_path.clone(), "tok-4".into()));
    let before = fx.seen().len();
    assert_eq!(
        json_of(call(&u, "secure", json!({})).await.unwrap()),
        json!({"ok": true})
    );
    let seen = fx.seen();
    assert_eq!(seen.len() - before, 2);
    assert_eq!(seen[before].header("authorization"), Some("Bearer tok-2"));
    assert_eq!(
        seen[before + 1].header("authorization"),
        Some("Bearer tok-4")
    );
    std::fs::remove_file(&d.token_path).unwrap();
    let before = fx.seen().len();
    let e = call(&u, "secure", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::AuthFailed);
    assert!(
        e.message
            .starts_with("fx/secure: credential `tok`: cannot read"),
        "{}",
        e.message
    );
    assert_eq!(fx.seen().len(), before, "no request without a credential");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_canary_secret_echoed_by_the_upstream_never_comes_out() {
    const CANARY: &str = "canary-5ecret-7781";
    let fx = support::start().await;
    let d = support::deployment(&fx.base(), CANARY, json!({}));
    let u = upstreams(&d).await;
    let out = call(&u, "whoami", json!({})).await.unwrap();
    let ToolOutput::Json(body) = out else {
        panic!()
    };
    let text = String::from_utf8(body).unwrap();
    assert!(!text.contains(CANARY), "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["authorization"],
        "[REDACTED]"
    );
    let e = call(&u, "echo_error", json!({})).await.unwrap_err();
    assert_eq!(e.reason, Reason::ToolError);
    assert!(!e.message.contains(CANARY), "{}", e.message);
    assert!(e.message.contains("[REDACTED]"), "{}", e.message);
    *fx.state.expected_token.lock().unwrap() = "other".into();
    let e = call(&u, "secure", json!({})).await.unwrap_err();
    assert!(
        !e.message.contains(CANARY) && e.message.contains("[REDACTED]"),
        "{}",
        e.message
    );
    let e = call(&u, "echo", json!({"id": "1", "q": 5}))
        .await
        .unwrap_err();
    assert!(!format!("{e:?}").contains(CANARY));
}

/// A TLS server on loopback with a fresh self-signed certificate (openssl and Python's `ssl`),
/// answering `{}` to every GET. Its port, and the process to kill.
fn tls_server(dir: &std::path::Path) -> Option<(u16, std::process::Child)> {
    use std::io::BufRead;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        ptc_tests::skip(
            "openssl is missing (Debian package openssl; scripts/test names what is missing)",
        );
        return None;
    }
    let script = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&cert)
        .arg(&key)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    Some((line.trim().parse().ok()?, child))
}

/// HTTPS runs through the real TLS stack (rustls with the ring provider): a handshake with a
/// server whose certificate no trusted authority signed is refused, naming the certificate.
#[tokio::test(flavor = "multi_thread")]
async fn https_checks_the_servers_certificate() {
    let dir = std::env::temp_dir().join(format!("ptc-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some((port, mut server)) = tls_server(&dir) else {
        return;
    };
    let d = support::deployment(&format!("https://127.0.0.1:{port}"), "tok-1", json!({}));
    let u = upstreams(&d).await;
    let e = call(&u, "echo", json!({"id": "1"})).await.unwrap_err();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(e.reason, Reason::UpstreamUnavailable, "{e}");
    // The handshake got as far as checking the chain: the signature suites ring provides were
    // agreed, and the chain leads to no trusted root.
    assert!(
        e.message
            .contains("cannot connect: invalid peer certificate: UnknownIssuer"),
        "{e}"
    );
}
