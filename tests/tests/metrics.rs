//! The host's `/metrics` over real HTTP on loopback, after known programs against the
//! Observatory test bed: the values they leave, `promtool check metrics` on the body, nothing
//! of a program's arguments, result or session in it, what a scrape reads while programs run
//! and wait, and `/metrics` on a listener of its own.

use std::sync::Arc;
use std::time::Duration;

use observatory_server::TokenSpec;
use ptc_core::server::metrics::{self, Now, PinEvents};
use ptc_core::server::session_run::SessionOptions;
use ptc_core::server::{EvalLimits, Evaluator, HttpOptions};
use ptc_core::{StartOptions, Upstreams};
use serde_json::{Value, json};

mod support;
use support::{Bed, Host, Session, client, message_with_id};

const OBS_TOKEN: &str = "obs_metrics_3f9a7c21";

/// The Observatory test bed answering after `latency_ms`, and the upstreams against it.
async fn bed(name: &str, latency_ms: u64) -> Bed {
    let token = TokenSpec::full_access("tok_metrics", OBS_TOKEN);
    let faults = format!("latency_ms={latency_ms}");
    Bed::start(
        &format!("metrics-{name}"),
        token,
        &faults,
        StartOptions::default(),
    )
    .await
}

/// A host over `up` with `limits` and `options`, keeping sessions in memory.
async fn host(up: Arc<Upstreams>, limits: EvalLimits, options: HttpOptions) -> Host {
    let ev = Evaluator::new(up, tokio::runtime::Handle::current(), limits).unwrap();
    ev.set_sessions(SessionOptions::new(
        ptc_core::server::state::open("memory").unwrap(),
    ));
    support::serve(ev, options).await
}

/// `GET base/metrics`: the status, the Content-Type and the body.
async fn scrape(base: &str) -> (u16, String, String) {
    let r = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let kind = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, kind, r.text().await.unwrap())
}

/// The value of the sample `series` (name and labels as rendered) in `body`.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `promtool check metrics` over `body` (on stdin): `None` after [`ptc_tests::skip`] when
/// promtool is not installed, else what it found (nothing when the body is clean).
fn promtool_check(body: &str) -> Option<String> {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            ptc_tests::skip(
                "promtool is not installed (Debian package prometheus, or promtool on PATH; \
                 scripts/test names what is missing)",
            );
            return None;
        }
        Err(e) => panic!("cannot start promtool: {e}"),
    };
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(body.as_bytes())
        .expect("promtool reads the body");
    let out = child.wait_with_output().expect("promtool ends");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(if out.status.success() {
        said
    } else {
        format!("promtool exited with {}: {said}", out.status)
    })
}

/// Calls `lisp_eval` with `program` in the host session `session`; the structured content of
/// the reply with `id`.
async fn eval_in(s: &Session, id: i64, program: &str, session: &str) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "lisp_eval", "arguments": {"program": program, "session": session}}});
    let r = s.send(&msg).await;
    assert_eq!(r.status(), 200);
    let body = r.text().await.unwrap();
    let reply = message_with_id(&body, id).unwrap_or_else(|| panic!("no reply {id} in {body}"));
    reply["result"]["structuredContent"].clone()
}

/// Two calls, both answered.
const TWO_CALLS: &str = "(let [a (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 2}) \
     b (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1})] [(:ok a) (:ok b)])";
/// A tool the catalog does not have, named at run time (the pre-check sees literal names):
/// the program fails with `unknown_tool`.
const UNKNOWN_TOOL: &str = "(tool/call (symbol \"observatory\" \"no-such-tool\") {})";
/// One call past the budget of 3: the fourth is refused with `cap_exhausted`.
const PAST_BUDGET: &str = "(mapv (fn [i] (:ok (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1}))) (range 4))";
/// Text that must never reach a label: an argument, the result, the session name.
const CANARY: &str = "canary7d1e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_programs_leave_known_values_and_the_body_passes_promtool() {
    let bed = bed("known", 0).await;
    let limits = EvalLimits {
        max_calls: 3,
        ..EvalLimits::default()
    };
    let h = host(bed.up.clone(), limits, HttpOptions::default()).await;
    let s = Session::open(&h.url, None).await;

    let two = eval_in(&s, 1, TWO_CALLS, "plain").await;
    assert_eq!(two["result"], json!([true, true]), "{two}");
    let unknown = eval_in(&s, 2, UNKNOWN_TOOL, "plain").await;
    assert_eq!(unknown["reason"], "unknown_tool", "{unknown}");
    let budget = eval_in(&s, 3, PAST_BUDGET, "plain").await;
    assert_eq!(
        budget["result"],
        json!([true, true, true, false]),
        "{budget}"
    );
    let canary = format!(
        "(do (tool/call 'observatory/get-trace {{:org-id \"org_acme\" :id \"trace_{CANARY}\"}}) \
         \"{CANARY}-result\")"
    );
    let marked = eval_in(&s, 4, &canary, &format!("{CANARY}-session")).await;
    assert_eq!(marked["result"], format!("{CANARY}-result"), "{marked}");
    let marked_call = &marked["upstream_calls"][0];
    assert_eq!(marked_call["status"], "error", "{marked}");
    // Refused before the evaluator: no program.
    let msg = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "lisp_eval", "arguments": {"session": "plain"}}});
    let body = s.send(&msg).await.text().await.unwrap();
    let malformed = message_with_id(&body, 5).unwrap()["result"]["structuredContent"].clone();
    assert_eq!(malformed["reason"], "invalid_request", "{malformed}");

    let (status, kind, body) = scrape(&h.base).await;
    assert_eq!(status, 200);
    assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
    let answered: f64 = [&two, &budget, &marked]
        .iter()
        .map(|r| r["ptc_metrics"]["final_result_bytes"].as_f64().unwrap())
        .sum();
    let read: f64 = [&two, &budget, &marked]
        .iter()
        .map(|r| r["ptc_metrics"]["upstream_result_bytes"].as_f64().unwrap())
        .sum();
    let marked_reason = format!(
        r#"ptc_upstream_calls_total{{upstream="observatory",tool="get-trace",outcome="error",reason="{}"}}"#,
        marked_call["reason"].as_str().unwrap()
    );
    for (series, value) in [
        (r#"ptc_evaluations_total{outcome="ok",reason="none"}"#, 3.0),
        (
            r#"ptc_evaluations_total{outcome="error",reason="unknown_tool"}"#,
            1.0,
        ),
        (
            r#"ptc_evaluations_total{outcome="error",reason="invalid_request"}"#,
            1.0,
        ),
        (
            r#"ptc_evaluation_duration_seconds_count{outcome="ok"}"#,
            3.0,
        ),
        // The refused request has no duration: it never reached the evaluator.
        (
            r#"ptc_evaluation_duration_seconds_count{outcome="error"}"#,
            1.0,
        ),
        // Every program that got past the request's checks waited (or not) for its turn.
        ("ptc_queue_wait_seconds_count", 4.0),
        (
            r#"ptc_upstream_calls_total{upstream="observatory",tool="list-traces",outcome="ok",reason="none"}"#,
            5.0,
        ),
        (
            r#"ptc_upstream_calls_total{upstream="observatory",tool="list-traces",outcome="error",reason="cap_exhausted"}"#,
            1.0,
        ),
        (&marked_reason, 1.0),
        (
            r#"ptc_upstream_call_duration_seconds_count{upstream="observatory",tool="list-traces",outcome="ok"}"#,
            5.0,
        ),
        (
            r#"ptc_upstream_response_bytes_total{upstream="observatory",tool="list-traces"}"#,
            read,
        ),
        ("ptc_answer_bytes_total", answered),
        (r#"ptc_limit_hits_total{limit="upstream_budget"}"#, 1.0),
        (r#"ptc_limit_hits_total{limit="program_timeout"}"#, 0.0),
        ("ptc_programs_in_flight", 0.0),
        ("ptc_queue_depth", 0.0),
    ] {
        assert_eq!(sample(&body, series), Some(value), "{series} in\n{body}");
    }
    assert!(read > answered && answered > 0.0, "{read} {answered}");
    // The catalog's names only; never what a program sent, answered or ran in.
    for absent in [CANARY, "org_acme", "no-such-tool", "local"] {
        assert!(!body.contains(absent), "`{absent}` in\n{body}");
    }

    // The pin events family too, which this bed (no pinned MCP upstream) does not show.
    let now = Now {
        pins: vec![PinEvents {
            upstream: "files".into(),
            changed: 1,
            removed: 2,
            unpinned: 3,
        }],
        ..h.evaluator.metrics_now()
    };
    let with_pins = h.evaluator.metrics().render(now).unwrap();
    assert_eq!(
        sample(
            &with_pins,
            r#"ptc_pin_events_total{upstream="files",event="removed"}"#
        ),
        Some(2.0)
    );
    if let Some(found) = promtool_check(&body) {
        assert_eq!(found, "", "promtool check metrics on\n{body}");
        let found = promtool_check(&with_pins);
        assert_eq!(found.as_deref(), Some(""), "promtool on\n{with_pins}");
    }
    bed.stop().await;
}

/// Polls `/metrics` until `series` reads `value` (bounded; yields between scrapes).
async fn until_scraped(base: &str, series: &str, value: f64) -> String {
    let mut last = String::new();
    for _ in 0..5_000 {
        let (_, _, body) = scrape(base).await;
        if sample(&body, series) == Some(value) {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("never saw {series} {value}; last scrape:\n{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_in_flight_and_requests_waiting_are_read_when_scraped() {
    let bed = bed("in-flight", 600_000).await;
    let limits = EvalLimits {
        max_concurrent: 1,
        program_timeout: Duration::from_secs(600),
        queue_wait: Duration::from_secs(600),
        ..EvalLimits::default()
    };
    let h = host(bed.up.clone(), limits, HttpOptions::default()).await;
    let a = Arc::new(Session::open(&h.url, None).await);
    let b = Session::open(&h.url, None).await;
    let slow = "(:ok (tool/call 'observatory/list-traces {:org-id \"org_acme\" :limit 1}))";
    let a2 = a.clone();
    let waiting_on_upstream = tokio::spawn(async move { a2.call(1, slow).await });
    until_scraped(&h.base, "ptc_programs_in_flight", 1.0).await;
    let queued = tokio::spawn(async move { b.call(1, "(+ 1 2)").await });
    let body = until_scraped(&h.base, "ptc_queue_depth", 1.0).await;
    assert_eq!(sample(&body, "ptc_programs_in_flight"), Some(1.0), "{body}");

    // Not a synchronisation: the queued request is seen waiting, so this makes its wait at
    // least this long, a bound the histogram must show.
    let queued_at_least = Duration::from_millis(50);
    tokio::time::sleep(queued_at_least).await;
    // The first ends (cancelled mid-call); the queued one gets its turn and answers.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}});
    assert!(a.send(&cancel).await.status().is_success());
    let answer = queued.await.unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["result"],
        json!(3),
        "{answer}"
    );
    let body = until_scraped(&h.base, "ptc_programs_in_flight", 0.0).await;
    waiting_on_upstream.abort();
    for (series, value) in [
        ("ptc_queue_depth", 0.0),
        (r#"ptc_evaluations_total{outcome="ok",reason="none"}"#, 1.0),
        (
            r#"ptc_evaluations_total{outcome="error",reason="cancelled"}"#,
            1.0,
        ),
        ("ptc_queue_wait_seconds_count", 2.0),
    ] {
        assert_eq!(sample(&body, series), Some(value), "{series} in\n{body}");
    }
    let waited = sample(&body, "ptc_queue_wait_seconds_sum").unwrap();
    assert!(waited >= queued_at_least.as_secs_f64(), "{body}");
    let quick = sample(&body, r#"ptc_queue_wait_seconds_bucket{le="0.01"}"#).unwrap();
    assert!(
        quick <= 1.0,
        "the queued request is not among the quick: {body}"
    );
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_cut_at_the_output_limit_is_a_limit_hit_and_one_that_fits_is_not() {
    let limits = EvalLimits {
        max_output_bytes: 100,
        ..EvalLimits::default()
    };
    let h = host(
        support::no_upstreams().await,
        limits,
        HttpOptions::default(),
    )
    .await;
    let s = Session::open(&h.url, None).await;
    let cut = r#"ptc_limit_hits_total{limit="output_size"}"#;
    // A string of n characters prints, and is JSON, as n + 2 bytes (its quotes).
    let fits = eval_in(&s, 1, "(apply str (repeat 98 \"x\"))", "plain").await;
    assert_eq!(fits["result"].as_str().map(str::len), Some(98), "{fits}");
    assert_eq!(sample(&scrape(&h.base).await.2, cut), Some(0.0));
    let over = eval_in(&s, 2, "(apply str (repeat 99 \"x\"))", "plain").await;
    assert_eq!(over["result_truncated"], json!(true), "{over}");
    assert_eq!(sample(&scrape(&h.base).await.2, cut), Some(1.0));
    // An error's text is cut too.
    let error = eval_in(&s, 3, "(fail (apply str (repeat 200 \"y\")))", "plain").await;
    assert_eq!(error["reason"], "fail", "{error}");
    assert_eq!(sample(&scrape(&h.base).await.2, cut), Some(2.0));
    // The text alone over (what was printed), or the JSON alone: `[:a :a ...]` is 91 bytes as
    // text, `["a","a",...]` 121 as JSON, so the result is left out while the text fits.
    let printed = eval_in(
        &s,
        4,
        "(do (println (apply str (repeat 120 \"p\"))) 1)",
        "plain",
    )
    .await;
    assert_eq!(printed["result"], json!(1), "{printed}");
    assert_eq!(sample(&scrape(&h.base).await.2, cut), Some(3.0));
    let json_only = eval_in(&s, 5, "(vec (repeat 30 :a))", "plain").await;
    assert_eq!(json_only["result_truncated"], json!(true), "{json_only}");
    assert_eq!(sample(&scrape(&h.base).await.2, cut), Some(4.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_listener_of_its_own_serves_metrics_and_the_main_port_does_not() {
    let up = support::no_upstreams().await;
    let options = HttpOptions {
        metrics: false,
        ..HttpOptions::default()
    };
    let h = host(up, EvalLimits::default(), options).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let own = ptc_core::server::http::serve_metrics(
        h.evaluator.clone(),
        "127.0.0.1:0".parse().unwrap(),
        async {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let own_base = format!("http://{}", own.addr);

    let (status, _, _) = scrape(&h.base).await;
    assert_eq!(status, 404, "the main port has no /metrics");
    let s = Session::open(&h.url, None).await;
    let reply = s.call(1, "(+ 1 2)").await;
    assert_eq!(reply["result"]["structuredContent"]["result"], json!(3));
    let (status, kind, body) = scrape(&own_base).await;
    assert_eq!(status, 200);
    assert_eq!(kind, metrics::CONTENT_TYPE);
    assert_eq!(
        sample(
            &body,
            r#"ptc_evaluations_total{outcome="ok",reason="none"}"#
        ),
        Some(1.0),
        "the evaluations of the main port: {body}"
    );
    // Nothing else is served there.
    for path in ["/mcp", "/health", "/ready"] {
        let r = client()
            .get(format!("{own_base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path} on the metrics port");
    }
    // A second listener on the same address is refused, naming it.
    let e = ptc_core::server::http::serve_metrics(h.evaluator.clone(), own.addr, async {})
        .await
        .err()
        .expect("the address is taken");
    assert!(
        e.starts_with(&format!("cannot listen on {} for /metrics: ", own.addr)),
        "{e}"
    );
    stop.send(()).unwrap();
    own.done.await.unwrap().unwrap();
}
