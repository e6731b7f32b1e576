//! Sessions that keep state: a program's definitions available to the later programs of its
//! session, per caller, bounded by size and idle time; in memory, and in a real Redis shared by
//! two evaluators (two replicas), through a Redis restart.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ptc_core::credentials::identity::Caller;
use ptc_core::server::session_run::SessionOptions;
use ptc_core::server::state::{self, StateKey};
use ptc_core::server::{EvalLimits, EvalOutcome, EvalRequest, Evaluator, HttpOptions};
use serde_json::{Value, json};
use support::Session;

async fn evaluator(options: Option<SessionOptions>) -> Arc<Evaluator> {
    let ev = Evaluator::new(
        support::no_upstreams().await,
        tokio::runtime::Handle::current(),
        EvalLimits::default(),
    )
    .unwrap();
    if let Some(o) = options {
        ev.set_sessions(o);
    }
    ev
}

fn memory() -> SessionOptions {
    SessionOptions::new(state::open("memory").unwrap())
}

fn caller(subject: &str) -> Arc<Caller> {
    let mut c = Caller::local();
    c.subject = subject.into();
    Arc::new(c)
}

async fn eval(ev: &Evaluator, who: &str, session: Option<&str>, program: &str) -> EvalOutcome {
    ev.eval(
        EvalRequest {
            program: program.into(),
            caller: caller(who),
            session: session.map(str::to_string),
            ..EvalRequest::default()
        },
        Default::default(),
    )
    .await
}

/// The program's value as JSON, or its error as `reason: message`.
fn value(o: &EvalOutcome) -> Result<Value, String> {
    match &o.result {
        Ok(v) => Ok(v.json.clone().unwrap_or(Value::Null)),
        Err(e) => Err(format!("{}: {}", e.reason, e.message)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_are_kept_for_the_later_programs_of_a_session() {
    let ev = evaluator(Some(memory())).await;
    let first = eval(
        &ev,
        "alice",
        Some("s1"),
        "(def x 41) (defn twice [a] (* 2 a)) :ok",
    )
    .await;
    assert_eq!(value(&first), Ok(json!("ok")));
    let report = first.session.unwrap();
    assert_eq!((report.name.as_str(), report.saved), ("s1", true));
    assert_eq!(report.kept, ["x", "twice"]);
    assert!(report.error.is_none());
    let second = eval(&ev, "alice", Some("s1"), "(twice (inc x))").await;
    assert_eq!(value(&second), Ok(json!(84)));
    let vars = eval(&ev, "alice", Some("s1"), "(session/vars)").await;
    let vars = value(&vars).unwrap();
    assert_eq!(vars["x"]["type"], "integer", "{vars}");
    assert_eq!(vars["twice"]["kept"], true, "{vars}");
    // Another session of the same caller starts from nothing.
    let other = eval(&ev, "alice", Some("s2"), "x").await;
    assert!(
        value(&other).unwrap_err().contains("x"),
        "{:?}",
        value(&other)
    );
    // Forgetting removes a definition for the later programs.
    let forgot = eval(&ev, "alice", Some("s1"), "(session/forget 'x)").await;
    assert!(value(&forgot).is_ok());
    assert_eq!(forgot.session.unwrap().kept, ["twice"]);
    assert!(value(&eval(&ev, "alice", Some("s1"), "x").await).is_err());
    assert_eq!(
        value(&eval(&ev, "alice", Some("s1"), "(twice 4)").await),
        Ok(json!(8))
    );
    // A definition made before an error is kept, as at a REPL.
    let failed = eval(&ev, "alice", Some("s1"), "(def y 7) (fail \"stop\")").await;
    assert!(value(&failed).is_err());
    assert!(failed.session.unwrap().saved);
    assert_eq!(
        value(&eval(&ev, "alice", Some("s1"), "y").await),
        Ok(json!(7))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_callers_with_the_same_session_name_are_isolated() {
    let ev = evaluator(Some(memory())).await;
    eval(&ev, "alice", Some("shared"), "(def secret-plan 1)").await;
    let bob = eval(&ev, "bob", Some("shared"), "secret-plan").await;
    assert!(value(&bob).is_err(), "{:?}", value(&bob));
    eval(&ev, "bob", Some("shared"), "(def secret-plan 2)").await;
    assert_eq!(
        value(&eval(&ev, "alice", Some("shared"), "secret-plan").await),
        Ok(json!(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_past_its_size_limit_keeps_what_it_had() {
    let mut options = memory();
    // Room for `small` and not for 1000 numbers: measured from what `small` takes.
    let ev = evaluator(Some(options.clone())).await;
    let bytes = eval(&ev, "a", Some("probe"), "(def small [1 2 3])")
        .await
        .session
        .unwrap()
        .bytes;
    options.max_bytes = bytes;
    let ev = evaluator(Some(options)).await;
    let at = eval(&ev, "a", Some("s"), "(def small [1 2 3])").await;
    assert!(at.session.unwrap().saved, "exactly at the limit");
    let past = eval(
        &ev,
        "a",
        Some("s"),
        "(def big (vec (range 1000))) (count big)",
    )
    .await;
    assert_eq!(value(&past), Ok(json!(1000)), "the answer still comes back");
    let report = past.session.unwrap();
    assert!(!report.saved);
    assert!(
        report
            .error
            .unwrap()
            .contains(&format!("more than the session's limit of {bytes}")),
    );
    assert_eq!(
        value(&eval(&ev, "a", Some("s"), "small").await),
        Ok(json!([1, 2, 3]))
    );
    assert!(value(&eval(&ev, "a", Some("s"), "big").await).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_session_expires_after_its_ttl() {
    let mut options = memory();
    options.ttl = Duration::from_millis(300);
    let ev = evaluator(Some(options)).await;
    eval(&ev, "a", Some("s"), "(def x 1)").await;
    // Used again within the TTL: still there (and its TTL starts again).
    assert_eq!(value(&eval(&ev, "a", Some("s"), "x").await), Ok(json!(1)));
    // Time must pass for a TTL to run out (the store's own tests take its boundary on a
    // paused clock): well past it, the session is gone.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(value(&eval(&ev, "a", Some("s"), "x").await).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sessions_a_session_name_is_refused_and_nothing_is_kept() {
    let ev = evaluator(None).await;
    let named = eval(&ev, "a", Some("s"), "(+ 1 2)").await;
    assert_eq!(
        value(&named).unwrap_err(),
        "invalid_request: this deployment keeps no sessions (its host runs without --sessions): \
         leave out `session`"
    );
    eval(&ev, "a", None, "(def x 1)").await;
    assert!(value(&eval(&ev, "a", None, "x").await).is_err());
    let off = eval(&ev, "a", None, "(session/vars)").await;
    assert!(
        value(&off).unwrap_err().contains("sessions are off"),
        "{:?}",
        value(&off)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_this_host_cannot_read_is_a_clear_error_and_nothing_runs() {
    let options = memory();
    let store = options.store.clone();
    let ev = evaluator(Some(options)).await;
    store
        .save(
            &StateKey::new("a", "s"),
            br#"{"ptc_session": 2, "vars": []}"#.to_vec(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let o = eval(&ev, "a", Some("s"), "(def x 1)").await;
    let e = value(&o).unwrap_err();
    assert!(
        e.starts_with("session_unreadable: the state of session `s` cannot be read by this host: session state format 2"),
        "{e}"
    );
    assert!(e.ends_with("the program did not run"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_stateful_connection_is_its_own_session() {
    let ev = evaluator(Some(memory())).await;
    let host = support::serve(ev, HttpOptions::default()).await;
    let url = host.url.clone();
    let a = Session::open(&url, None).await;
    let b = Session::open(&url, None).await;
    let reply = a.call(1, "(def x 41)").await;
    let session = &reply["result"]["structuredContent"]["session"];
    assert_eq!(session["saved"], true, "{reply}");
    assert!(
        session["name"].as_str().unwrap().starts_with("mcp-"),
        "{reply}"
    );
    assert_eq!(
        a.call(2, "(inc x)").await["result"]["structuredContent"]["result"],
        42
    );
    let other = b.call(1, "x").await;
    assert_eq!(other["result"]["isError"], true, "{other}");
    // A name given explicitly is reachable from any connection of the same caller.
    let named = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "lisp_eval", "arguments": {"program": "(def y 5)", "session": "shared"}}});
    a.send(&named).await.text().await.unwrap();
    let read = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "lisp_eval", "arguments": {"program": "y", "session": "shared"}}});
    let body = b.send(&read).await.text().await.unwrap();
    let reply = support::message_with_id(&body, 4).unwrap();
    assert_eq!(reply["result"]["structuredContent"]["result"], 5, "{reply}");
    let bad = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "lisp_eval", "arguments": {"program": "1", "session": "a b"}}});
    let body = b.send(&bad).await.text().await.unwrap();
    let reply = support::message_with_id(&body, 5).unwrap();
    assert_eq!(
        reply["result"]["structuredContent"]["message"],
        "`session` may hold letters, digits, `.`, `_` and `-`, not ' '"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_a_session_through_redis_and_survive_its_restart() {
    let Some(mut redis) = ptc_tests::redis::start() else {
        return;
    };
    let replica =
        || async { evaluator(Some(SessionOptions::new(state::open(&redis.url).unwrap()))).await };
    let (a, b) = (replica().await, replica().await);
    assert!(
        value(&eval(&a, "alice", Some("inv"), "(def x 41) (defn f [v] (inc v))").await).is_ok()
    );
    assert_eq!(
        value(&eval(&b, "alice", Some("inv"), "(f x)").await),
        Ok(json!(42))
    );
    redis.stop();
    let down = eval(&b, "alice", Some("inv"), "(f x)").await;
    let e = value(&down).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "session_unavailable: the session store {}",
            redis.url
        )),
        "{e}"
    );
    assert!(e.ends_with("the program did not run"), "{e}");
    redis.restart();
    assert_eq!(
        value(&eval(&a, "alice", Some("inv"), "(f x)").await),
        Ok(json!(42))
    );
    assert_eq!(
        value(&eval(&b, "alice", Some("inv"), "(f (f x))").await),
        Ok(json!(43))
    );
}
