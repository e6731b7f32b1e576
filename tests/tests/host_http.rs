//! The host's Streamable HTTP transport, over real HTTP on loopback: each security behaviour
//! (bearer token, non-loopback rule, Origin and Host checks, body limit, concurrency limits and
//! their queues, request timeout, health/ready, graceful shutdown) and both protocol eras; and
//! programs that wait on a slow upstream (the Observatory test bed with injected latency): many
//! in flight at once on few threads, cancelled or timed out mid-call, shut down while waiting.

use std::sync::Arc;
use std::time::Duration;

use ptc_core::server::{EvalLimits, Evaluator, HttpOptions, serve_http};
use ptc_core::{StartOptions, Upstreams};
use serde_json::{Value, json};

mod support;
use support::{Bed, Host, Session, client, message_with_id};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// A program that runs for seconds (nested loops) unless cancelled or timed out.
const LONG: &str = "(loop [i 0] (if (< i 900000) (do (loop [j 0] (if (< j 900000) (recur (inc j)) j)) (recur (inc i))) i))";
/// A program that runs a while and then answers on its own.
const FINITE: &str = "(loop [i 0] (if (< i 300) (do (loop [j 0] (if (< j 3000) (recur (inc j)) j)) (recur (inc i))) i))";

async fn host(options: HttpOptions, limits: EvalLimits) -> Host {
    host_over(support::no_upstreams().await, options, limits).await
}

async fn host_over(up: Arc<Upstreams>, options: HttpOptions, limits: EvalLimits) -> Host {
    let evaluator = Evaluator::new(up, tokio::runtime::Handle::current(), limits).unwrap();
    support::serve(evaluator, options).await
}

/// A host with `options` at `options.addr` (not only on 127.0.0.1).
async fn host_at(options: HttpOptions) -> Host {
    let up = support::no_upstreams().await;
    let evaluator =
        Evaluator::new(up, tokio::runtime::Handle::current(), EvalLimits::default()).unwrap();
    support::serve_at(evaluator, options).await
}

/// The status of an `initialize` POSTed to `url` with `headers` added (Origin, Host).
async fn initialize_status(url: &str, headers: &[(&str, &str)]) -> reqwest::StatusCode {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let mut r = client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(init.to_string());
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.send().await.unwrap().status()
}

/// Waits (yielding, bounded) until `count(ev)` is `n`; `what` names the count in the failure.
async fn until(ev: &Evaluator, what: &str, count: fn(&Evaluator) -> usize, n: usize) {
    for _ in 0..20_000 {
        if count(ev) == n {
            return;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("never saw {n} {what} (now {})", count(ev));
}

/// Waits until `n` evaluations are running.
async fn until_running(ev: &Evaluator, n: usize) {
    until(ev, "running evaluations", Evaluator::running, n).await;
}

fn reason(reply: &Value) -> &str {
    reply["result"]["structuredContent"]["reason"]
        .as_str()
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_is_required_and_compared_exactly_while_health_and_ready_are_open() {
    let h = host(
        HttpOptions {
            token: Some(TOKEN.into()),
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    for (path, body) in [
        ("/health", "ok\n"),
        ("/ready", "ready\nrunning 0\nwaiting 0\n"),
    ] {
        let r = client()
            .get(format!("{}{path}", h.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path} without a token");
        assert_eq!(r.text().await.unwrap(), body, "{path}");
    }
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |auth: Option<String>| {
        let mut r = client()
            .post(&h.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(init.to_string());
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        r.send()
    };
    let missing = post(None).await.unwrap();
    assert_eq!(missing.status(), 401);
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    assert!(
        missing
            .text()
            .await
            .unwrap()
            .contains("missing bearer token")
    );
    // Same length, last character different; and a prefix of the token.
    let mut wrong = TOKEN.to_string();
    wrong.replace_range(31.., "0");
    for bad in [wrong, TOKEN[..31].to_string(), format!("{TOKEN}x")] {
        let r = post(Some(format!("Bearer {bad}"))).await.unwrap();
        assert_eq!(r.status(), 401, "token {bad}");
        assert!(r.text().await.unwrap().contains("wrong bearer token"));
    }
    let ok = post(Some(format!("Bearer {TOKEN}"))).await.unwrap();
    assert_eq!(ok.status(), 200);
    let s = Session::open(&h.url, Some(TOKEN)).await;
    let reply = s.call(1, "(+ 1 2)").await;
    assert_eq!(reply["result"]["structuredContent"]["result"], json!(3));
}

/// `/ready` warns of each stdio upstream the config runs unisolated (`"sandbox": false`), and
/// only of those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_warns_of_an_unisolated_stdio_upstream() {
    let config = json!({"upstreams": {
        "open": {"transport": "mcp_stdio", "command": "server-open", "sandbox": false},
        "boxed": {"transport": "mcp_stdio", "command": "server-boxed"},
    }});
    let plan = ptc_plan::load_str(
        &config.to_string(),
        std::path::Path::new("/ready-test/upstreams.json"),
        &ptc_plan::FileSource,
    )
    .unwrap_or_else(|d| panic!("{d}"))
    .plan;
    let options = ptc_core::StartOptions {
        catalog: ptc_core::CatalogLoad::OnFirstUse,
        ..Default::default()
    };
    let up = Upstreams::start(plan, Default::default(), options)
        .await
        .unwrap();
    let h = host_over(Arc::new(up), HttpOptions::default(), EvalLimits::default()).await;
    let body = client()
        .get(format!("{}/ready", h.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        body,
        "ready\nrunning 0\nwaiting 0\nwarning: open is not isolated (\"sandbox\": false)\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_off_loopback_needs_a_long_enough_token() {
    let public = HttpOptions {
        addr: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    };
    let e = public.validate().unwrap_err();
    assert!(
        e.contains("needs callers to authenticate")
            && e.contains("PTC_HTTP_TOKEN")
            && e.contains("--oauth-issuer"),
        "{e}"
    );
    let short = HttpOptions {
        token: Some(TOKEN[..31].into()),
        ..public.clone()
    };
    let e = short.validate().unwrap_err();
    assert!(
        e.contains("31 characters") && e.contains("at least 32"),
        "{e}"
    );
    let at_min = HttpOptions {
        token: Some(TOKEN.into()),
        ..public.clone()
    };
    assert_eq!(at_min.validate(), Ok(()));
    // Long enough, but a space or a control character would not survive the header.
    for bad in [
        format!("{TOKEN} x"),
        format!("{TOKEN}\tx"),
        format!("{TOKEN}\u{7f}"),
    ] {
        let odd = HttpOptions {
            token: Some(bad),
            ..public.clone()
        };
        assert_eq!(
            odd.validate().unwrap_err(),
            "the bearer token must not contain spaces or control characters"
        );
    }
    // The replica id travels in every session id: checked with the other options.
    let replica = |id: &str| HttpOptions {
        replica_id: Some(id.into()),
        ..Default::default()
    };
    assert_eq!(replica(&"r".repeat(32)).validate(), Ok(()));
    assert_eq!(
        replica(&"r".repeat(33)).validate().unwrap_err(),
        format!(
            "the replica id `{}` must have 1 to 32 characters",
            "r".repeat(33)
        )
    );
    assert_eq!(
        replica("r-1").validate().unwrap_err(),
        "the replica id `r-1` contains '-'; use ASCII letters, digits and `_` only"
    );
    // Loopback needs no token.
    assert_eq!(HttpOptions::default().validate(), Ok(()));
    // serve refuses before binding.
    let up = Upstreams::start(
        ptc_plan::Plan::default(),
        Default::default(),
        StartOptions::default(),
    )
    .await
    .unwrap();
    let ev = Evaluator::new(
        Arc::new(up),
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    let e = serve_http(ev, public, async {}).await.err().unwrap();
    assert!(e.contains("needs callers to authenticate"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_is_checked_against_the_allow_list_and_host_against_loopback_names() {
    let h = host(
        HttpOptions {
            allowed_origins: vec!["https://app.example.com:443".into()],
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    let post = |headers| initialize_status(&h.url, headers);
    assert_eq!(post(&[("origin", "http://evil.example")]).await, 403);
    assert_eq!(
        post(&[("origin", "https://app.example.com:8443")]).await,
        403
    );
    assert_eq!(post(&[("origin", "https://app.example.com")]).await, 200);
    assert_eq!(post(&[]).await, 200, "no Origin: not a browser");
    // A listener on loopback also takes pages served on this machine, on a loopback name...
    for page in [
        "http://localhost:3000",
        "http://127.0.0.1:5173",
        "http://[::1]:8080",
    ] {
        assert_eq!(
            initialize_status(&h.url, &[("origin", page)]).await,
            200,
            "{page}"
        );
    }
    // ...and no page that only looks like one.
    for page in [
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "null",
        "localhost:3000",
    ] {
        assert_eq!(
            initialize_status(&h.url, &[("origin", page)]).await,
            403,
            "{page}"
        );
    }
    // DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example.
    assert_eq!(post(&[("host", "evil.example")]).await, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_only_the_allow_list_passes_an_origin() {
    let h = host_at(HttpOptions {
        addr: "0.0.0.0:0".parse().unwrap(),
        token: Some(TOKEN.into()),
        allowed_origins: vec!["https://app.example.com:443".into()],
        ..Default::default()
    })
    .await;
    let auth = format!("Bearer {TOKEN}");
    for (origin, status) in [
        ("https://app.example.com", 200),
        ("http://localhost:3000", 403),
        ("http://127.0.0.1:5173", 403),
    ] {
        let headers = [("authorization", auth.as_str()), ("origin", origin)];
        assert_eq!(
            initialize_status(&h.url, &headers).await,
            status,
            "{origin}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_on_another_loopback_address_answers_to_it() {
    // Linux routes all of 127.0.0.0/8 to the loopback interface.
    let h = host_at(HttpOptions {
        addr: "127.0.0.2:0".parse().unwrap(),
        ..Default::default()
    })
    .await;
    assert!(h.url.starts_with("http://127.0.0.2:"), "{}", h.url);
    // The client sends `Host: 127.0.0.2:<port>`, the listener's own address.
    assert_eq!(initialize_status(&h.url, &[]).await, 200);
    assert_eq!(
        initialize_status(&h.url, &[("origin", "http://127.0.0.2:3000")]).await,
        200
    );
    assert_eq!(
        initialize_status(&h.url, &[("origin", "http://127.0.0.3:3000")]).await,
        403
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_add_names_to_the_loopback_ones() {
    let h = host(
        HttpOptions {
            allowed_hosts: vec!["ptc.internal".into()],
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    assert_eq!(
        initialize_status(&h.url, &[("host", "ptc.internal")]).await,
        200
    );
    assert_eq!(
        initialize_status(&h.url, &[("host", "localhost")]).await,
        200,
        "loopback names stay allowed"
    );
    assert_eq!(
        initialize_status(&h.url, &[("host", "127.0.0.1")]).await,
        200
    );
    assert_eq!(
        initialize_status(&h.url, &[("host", "evil.example")]).await,
        403
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_body_limit_holds_at_its_boundary() {
    const LIMIT: usize = 2048;
    let h = host(
        HttpOptions {
            max_body_bytes: LIMIT,
            ..Default::default()
        },
        EvalLimits::default(),
    )
    .await;
    let body = |len: usize| {
        let base = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        .to_string();
        assert!(base.len() < len);
        format!("{base}{}", " ".repeat(len - base.len()))
    };
    let post = |b: String| {
        client()
            .post(&h.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(b)
            .send()
    };
    assert_eq!(
        post(body(LIMIT)).await.unwrap().status(),
        200,
        "at the limit"
    );
    assert_eq!(
        post(body(LIMIT + 1)).await.unwrap().status(),
        413,
        "one past"
    );
}

/// Waits until `n` requests wait for their turn.
async fn until_waiting(ev: &Evaluator, n: usize) {
    until(ev, "waiting requests", Evaluator::waiting, n).await;
}

fn message(reply: &Value) -> &str {
    reply["result"]["structuredContent"]["message"]
        .as_str()
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_global_limit_a_request_waits_its_turn_and_past_the_queue_it_is_busy() {
    let limits = EvalLimits {
        max_concurrent: 1,
        max_queue: 1,
        program_timeout: Duration::from_secs(120),
        queue_wait: Duration::from_secs(120),
        ..EvalLimits::default()
    };
    let h = host(HttpOptions::default(), limits).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let b = Arc::new(Session::open(&h.url, None).await);
    let c = Session::open(&h.url, None).await;
    let a2 = a.clone();
    let long = tokio::spawn(async move { a2.call(1, LONG).await });
    until_running(&h.evaluator, 1).await;
    let b2 = b.clone();
    let queued = tokio::spawn(async move { b2.call(2, "(+ 1 2)").await });
    until_waiting(&h.evaluator, 1).await;
    let ready = client()
        .get(format!("{}/ready", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.text().await.unwrap(), "ready\nrunning 1\nwaiting 1\n");
    // The queue holds one: the next request is refused at once, naming both limits.
    let refused = c.call(3, "(+ 1 2)").await;
    assert_eq!(reason(&refused), "busy", "{refused}");
    assert_eq!(
        message(&refused),
        "the server is busy (1 programs are in flight, the limit, and 1 requests wait already, \
         the queue's limit); retry shortly, or run fewer evaluations at once"
    );
    // The client gives up on the long call: notifications/cancelled stops the program, and the
    // waiting request gets its turn.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "test"}});
    assert!(a.send(&cancel).await.status().is_success());
    let ok = queued.await.unwrap();
    assert_eq!(
        ok["result"]["structuredContent"]["result"],
        json!(3),
        "{ok}"
    );
    until_running(&h.evaluator, 0).await;
    long.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_session_limit_a_request_waits_until_its_time_is_up_then_busy() {
    let limits = EvalLimits {
        max_per_session: 1,
        program_timeout: Duration::from_secs(120),
        queue_wait: Duration::from_millis(300),
        ..EvalLimits::default()
    };
    let h = host(HttpOptions::default(), limits).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let a2 = a.clone();
    let long = tokio::spawn(async move { a2.call(1, LONG).await });
    until_running(&h.evaluator, 1).await;
    let started = std::time::Instant::now();
    let refused = a.call(2, "(+ 1 2)").await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "it waited its time"
    );
    assert_eq!(reason(&refused), "busy", "{refused}");
    assert_eq!(
        message(&refused),
        "the server is busy (this session already runs 1 evaluations, its limit, and no turn \
         came within 300 ms); retry shortly, or run fewer evaluations at once"
    );
    // Counted, though it never reached the evaluator.
    let metrics = h
        .evaluator
        .metrics()
        .render(h.evaluator.metrics_now())
        .unwrap();
    for series in [
        r#"ptc_evaluations_total{outcome="error",reason="busy"} 1"#,
        r#"ptc_limit_hits_total{limit="queue"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == series),
            "{series} in\n{metrics}"
        );
    }
    // Another session is not limited by this one.
    let b = Session::open(&h.url, None).await;
    let ok = b.call(3, "(+ 40 2)").await;
    assert_eq!(
        ok["result"]["structuredContent"]["result"],
        json!(42),
        "{ok}"
    );
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}});
    a.send(&cancel).await;
    until_running(&h.evaluator, 0).await;
    long.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_memory_budget_a_request_waits_for_memory_and_with_no_queue_is_busy() {
    // Two slots, but memory for one eval only: a program in flight holds a chunk of the budget
    // from its admission on (and reserves more as it grows).
    let limits = |max_queue| EvalLimits {
        max_concurrent: 2,
        max_queue,
        memory_bytes: 1 << 20,
        memory_budget_bytes: 2 * ptc_lisp::RESERVE_CHUNK - 1,
        program_timeout: Duration::from_secs(120),
        queue_wait: Duration::from_secs(120),
        ..EvalLimits::default()
    };
    for max_queue in [0, 1] {
        let h = host(HttpOptions::default(), limits(max_queue)).await;
        let a = Arc::new(Session::open(&h.url, None).await);
        let b = Arc::new(Session::open(&h.url, None).await);
        let a2 = a.clone();
        let long = tokio::spawn(async move { a2.call(1, LONG).await });
        until_running(&h.evaluator, 1).await;
        let b2 = b.clone();
        let mut second = Some(tokio::spawn(async move { b2.call(2, "(+ 1 2)").await }));
        if max_queue == 0 {
            let refused = second.take().unwrap().await.unwrap();
            assert_eq!(reason(&refused), "busy", "{refused}");
            assert!(
                message(&refused).contains(
                    "the global memory budget of 2097151 bytes is in use by programs in flight"
                ),
                "{refused}"
            );
        } else {
            until_waiting(&h.evaluator, 1).await;
        }
        a.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1}}),
        )
        .await;
        if let Some(second) = second {
            let ok = second.await.unwrap();
            assert_eq!(
                ok["result"]["structuredContent"]["result"],
                json!(3),
                "{ok}"
            );
        }
        until_running(&h.evaluator, 0).await;
        long.abort();
        let ok = b.call(3, "(+ 1 2)").await;
        assert_eq!(ok["result"]["structuredContent"]["result"], json!(3));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_answers_503_when_no_response_starts_in_time() {
    let h = host(
        HttpOptions {
            stateless: true,
            request_timeout: Duration::from_millis(300),
            ..Default::default()
        },
        EvalLimits {
            program_timeout: Duration::from_secs(120),
            ..EvalLimits::default()
        },
    )
    .await;
    let s = Session::open(&h.url, None).await;
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "lisp_eval", "arguments": {"program": LONG}}});
    let r = s.send(&msg).await;
    assert_eq!(r.status(), 503);
    assert!(r.text().await.unwrap().contains("longer than 300 ms"));
    // Dropping the request cancels the program.
    until_running(&h.evaluator, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_the_running_eval_and_refuses_new_ones() {
    let mut h = host(HttpOptions::default(), EvalLimits::default()).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let b = Session::open(&h.url, None).await;
    let a2 = a.clone();
    let running = tokio::spawn(async move { a2.call(1, FINITE).await });
    until_running(&h.evaluator, 1).await;
    h.stop.take().unwrap().send(()).unwrap();
    // Draining: not ready, new evals refused.
    for _ in 0..20_000 {
        if !h.evaluator.is_accepting() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let refused = b.call(2, "(+ 1 2)").await;
    assert_eq!(reason(&refused), "busy");
    assert!(
        refused["result"]["structuredContent"]["message"]
            .as_str()
            .unwrap()
            .contains("shutting down")
    );
    let ready = client()
        .get(format!("{}/ready", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let reply = running.await.unwrap();
    assert_eq!(
        reply["result"]["structuredContent"]["result"],
        json!(300),
        "{reply}"
    );
    h.done.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_protocol_eras_are_served() {
    let h = host(HttpOptions::default(), EvalLimits::default()).await;
    // Legacy era: initialize handshake and a session.
    let s = Session::open(&h.url, None).await;
    assert!(s.id.is_some(), "legacy sessions carry Mcp-Session-Id");
    let tools = s
        .send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
        .await
        .text()
        .await
        .unwrap();
    let tools = message_with_id(&tools, 5).unwrap();
    let tool = &tools["result"]["tools"][0];
    assert_eq!(tool["name"], "lisp_eval");
    assert_eq!(tool["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(tool["annotations"]["openWorldHint"], json!(false));
    // Modern era (2026-07-28): no handshake; server/discover, then a call carrying its metadata.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    });
    let post = |msg: Value, method: &'static str, name: Option<&'static str>| {
        let mut r = client()
            .post(&h.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .body(msg.to_string());
        if let Some(n) = name {
            r = r.header("mcp-name", n);
        }
        r.send()
    };
    let discover = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        "server/discover",
        None,
    )
    .await
    .unwrap();
    assert_eq!(discover.status(), 200);
    let d = message_with_id(&discover.text().await.unwrap(), 1).unwrap();
    let versions = d["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")), "{d}");
    assert!(versions.contains(&json!("2025-11-25")), "{d}");
    // What the server says of itself: its name, that it serves tools, how to start.
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "ptc",
        "{d}"
    );
    assert!(d["result"]["capabilities"]["tools"].is_object(), "{d}");
    let instructions = d["result"]["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("lisp_eval") && instructions.contains("(tool/servers)"),
        "{d}"
    );
    let call = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "_meta": meta, "name": "lisp_eval", "arguments": {"program": "(* 6 7)"}}}),
        "tools/call",
        Some("lisp_eval"),
    )
    .await
    .unwrap();
    assert_eq!(call.status(), 200);
    let c = message_with_id(&call.text().await.unwrap(), 2).unwrap();
    assert_eq!(c["result"]["structuredContent"]["result"], json!(42), "{c}");
}

/// The Observatory test bed answering every request after `latency_ms`, and the upstreams of the
/// fixture config pointed at it.
/// The Observatory test bed answering after `latency_ms`, and the upstreams against it.
async fn slow_bed(name: &str, latency_ms: u64) -> Bed {
    let token = observatory_server::TokenSpec::full_access("tok", "obs_waiting_6b1d2e9f");
    let faults = format!("latency_ms={latency_ms}");
    Bed::start(
        &format!("waiting-{name}"),
        token,
        &faults,
        StartOptions::default(),
    )
    .await
}

/// One upstream call, answering `true` when it succeeded.
const ONE_CALL: &str = "(:ok (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1}))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_sessions_waiting_on_a_slow_upstream_are_in_flight_at_once_and_all_answered() {
    // Long enough that every call starts before the first answer comes.
    let bed = slow_bed("sixty-four", 3_000).await;
    let limits = EvalLimits {
        eval_threads: 2,
        ..EvalLimits::default()
    };
    let h = host_over(bed.up.clone(), HttpOptions::default(), limits).await;
    let mut sessions = Vec::new();
    for _ in 0..64 {
        sessions.push(Session::open(&h.url, None).await);
    }
    let mut calls = Vec::new();
    for (i, s) in sessions.into_iter().enumerate() {
        calls.push(tokio::spawn(
            async move { s.call(i as i64, ONE_CALL).await },
        ));
    }
    // Sixty-four programs wait on the upstream at once, on two evaluation threads.
    until_running(&h.evaluator, 64).await;
    for c in calls {
        let reply = c.await.unwrap();
        assert_eq!(
            reply["result"]["structuredContent"]["result"],
            json!(true),
            "{reply}"
        );
    }
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_sending_sixteen_calls_at_once_gets_sixteen_answers() {
    let bed = slow_bed("sixteen", 100).await;
    let h = host_over(
        bed.up.clone(),
        HttpOptions::default(),
        EvalLimits::default(),
    )
    .await;
    let session = Arc::new(Session::open(&h.url, None).await);
    let mut calls = Vec::new();
    for i in 0..16 {
        let s = session.clone();
        calls.push(tokio::spawn(async move { s.call(i, ONE_CALL).await }));
    }
    // Four run (the session's limit) and the rest wait their turn: none is refused.
    for c in calls {
        let reply = c.await.unwrap();
        assert_eq!(
            reply["result"]["structuredContent"]["result"],
            json!(true),
            "{reply}"
        );
    }
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_waiting_on_an_upstream_is_cancelled_mid_call_and_releases_its_slot() {
    let bed = slow_bed("cancelled", 600_000).await;
    let limits = EvalLimits {
        max_concurrent: 1,
        max_queue: 0,
        program_timeout: Duration::from_secs(600),
        ..EvalLimits::default()
    };
    let h = host_over(bed.up.clone(), HttpOptions::default(), limits).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let a2 = a.clone();
    let waiting = tokio::spawn(async move { a2.call(1, ONE_CALL).await });
    until_running(&h.evaluator, 1).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}});
    assert!(a.send(&cancel).await.status().is_success());
    until_running(&h.evaluator, 0).await;
    waiting.abort();
    // The slot is free again.
    let ok = a.call(2, "(+ 1 2)").await;
    assert_eq!(
        ok["result"]["structuredContent"]["result"],
        json!(3),
        "{ok}"
    );
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_whose_upstream_never_answers_ends_at_its_deadline() {
    let bed = slow_bed("never", 600_000).await;
    let limits = EvalLimits {
        program_timeout: Duration::from_millis(700),
        ..EvalLimits::default()
    };
    let h = host_over(bed.up.clone(), HttpOptions::default(), limits).await;
    let s = Session::open(&h.url, None).await;
    let started = std::time::Instant::now();
    let reply = s.call(1, ONE_CALL).await;
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(reason(&reply), "timeout", "{reply}");
    assert_eq!(
        message(&reply),
        "program exceeded its 700 ms deadline",
        "{reply}"
    );
    until_running(&h.evaluator, 0).await;
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_a_thousand_programs_waiting_answers_each_or_says_why() {
    let bed = slow_bed("shutdown", 5_000).await;
    let limits = EvalLimits {
        eval_threads: 2,
        max_concurrent: 256,
        // Small enough that memory never limits the 256 in flight.
        memory_bytes: 1 << 20,
        ..EvalLimits::default()
    };
    let ev = Evaluator::new(bed.up.clone(), tokio::runtime::Handle::current(), limits).unwrap();
    let mut evals = Vec::new();
    for _ in 0..1000 {
        let ev = ev.clone();
        evals.push(tokio::spawn(async move {
            let req = ptc_core::server::EvalRequest {
                program: ONE_CALL.into(),
                ..Default::default()
            };
            ev.eval(req, Default::default()).await
        }));
    }
    // The first 256 (the limit) wait on the upstream, the rest in the queue.
    until_running(&ev, 256).await;
    until_waiting(&ev, 744).await;
    ev.stop_accepting();
    ev.drain().await;
    let (mut answered, mut told) = (0, 0);
    for e in evals {
        match e.await.unwrap().result {
            Ok(v) => {
                assert_eq!(v.text, "true");
                answered += 1;
            }
            Err(e) => {
                assert_eq!(
                    (e.reason.as_str(), e.message.as_str()),
                    (
                        "busy",
                        "the server is shutting down; retry on another replica"
                    )
                );
                told += 1;
            }
        }
    }
    assert_eq!(
        (answered, told),
        (256, 744),
        "in flight answered, queued told why"
    );
    bed.stop().await;
}
