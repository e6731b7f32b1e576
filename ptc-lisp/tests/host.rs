//! The host interface: namespaced functions, first-class `tool/call`, parallel host calls,
//! JSON results decoded by the runtime, typed host errors and discovery.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ptc_lisp::{
    CallContext, Discovery, Host, HostError, HostValue, Interpreter, Limits, Reason, Value,
};

/// A fake upstream: records calls, and optionally waits until `rendezvous` calls are in flight
/// at once (proving that `pmap` overlaps them).
struct Fake {
    calls: Mutex<Vec<String>>,
    rendezvous: usize,
    arrived: Arc<AtomicUsize>,
}

impl Fake {
    fn new(rendezvous: usize) -> Arc<Self> {
        Arc::new(Fake {
            calls: Mutex::new(Vec::new()),
            rendezvous,
            arrived: Arc::default(),
        })
    }

    /// Arrives, then waits through the runtime; whether all `rendezvous` calls had arrived by
    /// the time the wait was first polled. Overlapping branches all arrive before any of their
    /// waits is polled; branches run one after another would find only themselves.
    fn meet(&self, cx: &mut CallContext<'_>) -> bool {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let (arrived, want) = (self.arrived.clone(), self.rendezvous);
        cx.wait(std::future::poll_fn(move |_| {
            std::task::Poll::Ready(arrived.load(Ordering::SeqCst) >= want)
        }))
        .unwrap_or(false)
    }
}

impl Host for Fake {
    fn namespaces(&self) -> Vec<String> {
        vec!["tool".into()]
    }

    fn call(
        &self,
        cx: &mut CallContext<'_>,
        ns: &str,
        name: &str,
        args: &[Value],
    ) -> Result<HostValue, HostError> {
        assert!(cx.remaining().is_some());
        let rendered: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        self.calls
            .lock()
            .unwrap()
            .push(format!("{ns}/{name} {}", rendered.join(" ")));
        match name {
            "call" => {
                if self.rendezvous > 1 && !self.meet(cx) {
                    return Err(HostError::new(
                        Reason::RuntimeError,
                        "calls did not overlap",
                    ));
                }
                match args.first() {
                    Some(Value::Symbol(s)) if &**s == "o/fail" => {
                        Err(HostError::new(Reason::RuntimeError, "no upstream 'o' configured"))
                    }
                    Some(Value::Symbol(s)) if &**s == "o/page" => Ok(HostValue::Json(page())),
                    Some(Value::Symbol(s)) if &**s == "o/json" => Ok(HostValue::Json(
                        br#"{"ok":true,"value":{"traces":[{"id":"t1","cost":1.5},{"id":"t2","cost":2}]}}"#.to_vec(),
                    )),
                    _ => Ok(HostValue::Value(Value::map_from(vec![
                        (Value::keyword("ok"), Value::Bool(true)),
                        (Value::keyword("value"), args.get(1).cloned().unwrap_or(Value::Nil)),
                    ]))),
                }
            }
            "servers" => Ok(HostValue::Value(Value::vector(vec![Value::str("o")]))),
            other => Err(HostError::new(
                Reason::UnboundVar,
                format!("no tool/{other}"),
            )),
        }
    }

    fn discover(
        &self,
        cx: &mut CallContext<'_>,
        op: Discovery,
        args: &[Value],
    ) -> Result<Option<HostValue>, HostError> {
        match (op, args.first()) {
            (Discovery::Doc, Some(Value::Symbol(s))) if s.starts_with("o/") => {
                cx.print(&format!("{s}\n  An upstream tool.\n"));
                Ok(Some(HostValue::Value(Value::Nil)))
            }
            (Discovery::Dir, Some(Value::Symbol(s))) if &**s == "o" => Ok(Some(HostValue::Value(
                Value::vector(vec![Value::symbol("o/list-traces")]),
            ))),
            (Discovery::Apropos, _) => Ok(Some(HostValue::Value(Value::vector(vec![Value::str(
                "o/list-traces - List traces",
            )])))),
            _ => Ok(None),
        }
    }
}

/// A page of 500 records of numbers, as an upstream answers it.
fn page() -> Vec<u8> {
    let records: Vec<String> = (0..500)
        .map(|i| format!(r#"{{"n":{i},"x":{i}}}"#))
        .collect();
    format!(r#"{{"ok":true,"value":[{}]}}"#, records.join(",")).into_bytes()
}

fn interp(host: Arc<Fake>) -> Interpreter {
    Interpreter::with_host(Limits::default(), host)
}

#[test]
fn quoted_symbol_and_map_forms_reach_the_host_unchanged() {
    let fake = Fake::new(1);
    let mut i = interp(fake.clone());
    let v = i
        .eval_str("(tool/call 'observatory/list-traces {:org-id \"acme\"})")
        .unwrap();
    assert_eq!(v.to_string(), "{:ok true :value {:org-id \"acme\"}}");
    i.eval_str("(tool/call {:server \"observatory\" :tool \"list-traces\" :args {:limit 1}})")
        .unwrap();
    let calls = fake.calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            "tool/call observatory/list-traces {:org-id \"acme\"}".to_string(),
            "tool/call {:args {:limit 1} :server \"observatory\" :tool \"list-traces\"}"
                .to_string(),
        ]
    );
}

#[test]
fn tool_call_is_a_first_class_value() {
    let fake = Fake::new(1);
    let mut i = interp(fake.clone());
    let v = i.eval_str("(map #(tool/call 'o/t {:n %}) [1 2])").unwrap();
    assert_eq!(
        v.to_string(),
        "[{:ok true :value {:n 1}} {:ok true :value {:n 2}}]"
    );
    let v = i.eval_str("(let [f tool/call] (:ok (f 'o/t)))").unwrap();
    assert_eq!(v.to_string(), "true");
}

#[test]
fn pmap_overlaps_host_calls() {
    let fake = Fake::new(4);
    let mut i = interp(fake.clone());
    let v = i
        .eval_str("(mapv :ok (pmap tool/call [{:server \"o\" :tool \"a\"} {:server \"o\" :tool \"b\"} {:server \"o\" :tool \"c\"} {:server \"o\" :tool \"d\"}]))")
        .unwrap();
    assert_eq!(v.to_string(), "[true true true true]");
    assert_eq!(fake.calls.lock().unwrap().len(), 4);
}

#[test]
fn json_results_are_decoded_by_the_runtime() {
    let mut i = interp(Fake::new(1));
    let v = i
        .eval_str("(->> (tool/call 'o/json) :value :traces (map :cost) (reduce +))")
        .unwrap();
    assert_eq!(v.to_string(), "3.5");
}

/// A decoded result is charged as it is decoded and given back when the program drops it: a
/// program reading page after page holds one page at a time (and its two key strings per page,
/// which stay charged), whether the pages are read one after another or in parallel.
#[test]
fn decoded_results_are_given_back_when_the_program_drops_them() {
    let peak = |prog: &str| {
        let mut i = interp(Fake::new(1));
        assert_eq!(i.eval_str(prog).unwrap().to_string(), "5000");
        i.last_memory_bytes()
    };
    let one_page = peak("(* 10 (count (:value (tool/call 'o/page))))");
    assert!(one_page > 500 * 48, "a page is charged: {one_page}");
    // One page at a time one after another; at most the branches running together in `pmap`
    // (up to 4).
    for (prog, pages) in [
        (
            "(reduce + (map (fn [_] (count (:value (tool/call 'o/page)))) (range 10)))",
            2,
        ),
        (
            "(reduce + (pmap (fn [_] (count (:value (tool/call 'o/page)))) (range 10)))",
            5,
        ),
    ] {
        let ten = peak(prog);
        assert!(
            ten < pages * one_page,
            "{prog}: {ten} bytes, less than {pages} pages of {one_page}"
        );
    }
}

#[test]
fn host_errors_are_typed_program_errors() {
    let mut i = interp(Fake::new(1));
    let e = i.eval_str("(tool/call 'o/fail {})").unwrap_err();
    assert_eq!(e.reason(), "runtime_error");
    assert!(e.message().contains("no upstream"));
    assert!(e.pos().is_some());
}

#[test]
fn unknown_namespace_lists_the_known_ones() {
    let mut i = interp(Fake::new(1));
    let e = i.eval_str("(foo/bar 1)").unwrap_err();
    assert_eq!(e.reason(), "unbound_var");
    assert!(e.message().contains("tool"), "{}", e.message());
    assert!(e.message().contains("clojure.string"), "{}", e.message());
    let mut no_host = Interpreter::new(Limits::default());
    assert_eq!(
        no_host.eval_str("(tool/call 'a/b)").unwrap_err().reason(),
        "unbound_var"
    );
}

#[test]
fn discovery_goes_local_first_then_to_the_host() {
    let mut i = interp(Fake::new(1));
    assert_eq!(
        i.eval_str("(doc 'o/list-traces)").unwrap().to_string(),
        "nil"
    );
    assert!(i.take_output().contains("An upstream tool."));
    assert_eq!(i.eval_str("(doc filter)").unwrap().to_string(), "nil");
    assert!(i.take_output().contains("(filter pred coll)"));
    assert_eq!(
        i.eval_str("(dir o)").unwrap().to_string(),
        "[o/list-traces]"
    );
    let v = i.eval_str("(first (apropos \"list-traces\"))").unwrap();
    assert_eq!(v.to_string(), "\"o/list-traces - List traces\"");
    assert_eq!(i.eval_str("(tool/servers)").unwrap().to_string(), "[\"o\"]");
    assert_eq!(
        i.eval_str("(doc 'nope/nothing)").unwrap_err().reason(),
        "unbound_var"
    );
}

/// A host whose `ctl/cancel` sets the interpreter's cancel flag, as an MCP server would when
/// the client cancels a request.
struct Canceller {
    handle: std::sync::OnceLock<Arc<std::sync::atomic::AtomicBool>>,
}

impl Host for Canceller {
    fn namespaces(&self) -> Vec<String> {
        vec!["ctl".into()]
    }

    fn call(
        &self,
        _cx: &mut CallContext<'_>,
        _ns: &str,
        _name: &str,
        _args: &[Value],
    ) -> Result<HostValue, HostError> {
        if let Some(h) = self.handle.get() {
            h.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(HostValue::Value(Value::Nil))
    }
}

#[test]
fn a_cancelled_evaluation_stops_with_reason_cancelled() {
    let host = Arc::new(Canceller {
        handle: std::sync::OnceLock::new(),
    });
    let limits = Limits {
        max_loop_iterations: u64::MAX,
        timeout: None,
        ..Limits::default()
    };
    let mut i = Interpreter::with_host(limits, host.clone());
    let _ = host.handle.set(i.cancel_handle());
    let e = i
        .eval_str("(ctl/cancel) (loop [n 0] (recur (inc n)))")
        .unwrap_err();
    assert_eq!(e.reason(), "cancelled");
    // The next evaluation starts with the flag cleared.
    assert_eq!(i.eval_str("(+ 1 2)").unwrap().to_string(), "3");
}
