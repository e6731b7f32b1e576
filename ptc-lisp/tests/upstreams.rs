//! Upstream names served by a host join the namespace table (discovery, errors, hints);
//! hosts decode tool results with the program's limits and raise typed reasons.

use std::sync::Arc;
use std::time::Instant;

use ptc_lisp::{
    CallContext, Discovery, Host, HostError, HostValue, Interpreter, Limits, Reason, Value,
};

/// A host with two upstreams, `observatory` and `billing`, reached through `tool/call`.
struct Upstreams;

const TRACES: &[u8] = br#"[{"id":"t1","cost":1.5},{"id":"t2","cost":2}]"#;

impl Host for Upstreams {
    fn namespaces(&self) -> Vec<String> {
        vec!["tool".into()]
    }

    fn upstreams(&self) -> Vec<String> {
        vec!["observatory".into(), "billing".into()]
    }

    fn call(
        &self,
        cx: &mut CallContext<'_>,
        _ns: &str,
        name: &str,
        args: &[Value],
    ) -> Result<HostValue, HostError> {
        let target = match (name, args.first()) {
            ("call", Some(Value::Symbol(s))) => s.to_string(),
            _ => return Err(HostError::new(Reason::RuntimeError, "bad call")),
        };
        let bytes: Vec<u8> = match target.as_str() {
            "observatory/list-traces" => TRACES.to_vec(),
            "observatory/deep" => {
                let n = match args.get(1) {
                    Some(Value::Int(n)) => *n as usize,
                    _ => 1,
                };
                format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes()
            }
            "observatory/broken" => b"{\"a\":".to_vec(),
            other => {
                return Err(HostError::new(
                    Reason::UnknownTool,
                    format!("no tool {other}"),
                ));
            }
        };
        let value = cx.decode_json(&bytes)?;
        Ok(HostValue::Value(Value::map_from(vec![
            (Value::keyword("ok"), Value::Bool(true)),
            (Value::keyword("value"), value),
        ])))
    }

    fn discover(
        &self,
        cx: &mut CallContext<'_>,
        op: Discovery,
        args: &[Value],
    ) -> Result<Option<HostValue>, HostError> {
        let name = match args.first() {
            Some(Value::Symbol(s)) | Some(Value::Str(s)) => s.to_string(),
            _ => return Ok(None),
        };
        let tools = |server: &str| match server {
            "observatory" => vec!["observatory/list-traces"],
            "billing" => vec!["billing/invoices"],
            _ => vec![],
        };
        Ok(match op {
            Discovery::Dir if self.upstreams().contains(&name) => Some(HostValue::Value(
                Value::vector(tools(&name).into_iter().map(Value::symbol).collect()),
            )),
            Discovery::Doc if name == "observatory/list-traces" => {
                cx.print("observatory/list-traces\n  List traces of an org.\n");
                Some(HostValue::Value(Value::Nil))
            }
            Discovery::Meta if name == "observatory/list-traces" => Some(HostValue::Json(
                br#"{"name":"observatory/list-traces"}"#.to_vec(),
            )),
            Discovery::Apropos => Some(HostValue::Value(Value::vector(
                ["observatory/list-traces", "billing/invoices"]
                    .into_iter()
                    .filter(|t| t.contains(&name))
                    .map(Value::symbol)
                    .collect(),
            ))),
            _ => None,
        })
    }
}

fn interp() -> Interpreter {
    Interpreter::with_host(Limits::default(), Arc::new(Upstreams))
}

fn show(i: &mut Interpreter, src: &str) -> String {
    match i.eval_str(src) {
        Ok(v) => v.to_string(),
        Err(e) => panic!("{src}: {e}"),
    }
}

#[test]
fn upstream_names_work_in_every_discovery_form() {
    let mut i = interp();
    assert_eq!(
        show(&mut i, "(dir observatory)"),
        "[observatory/list-traces]"
    );
    assert_eq!(show(&mut i, "(dir 'billing)"), "[billing/invoices]");
    assert_eq!(
        show(&mut i, "(tool/dir observatory)"),
        "[observatory/list-traces]"
    );
    assert_eq!(show(&mut i, "(doc observatory/list-traces)"), "nil");
    assert!(i.take_output().contains("List traces of an org."));
    assert_eq!(show(&mut i, "(tool/doc observatory/list-traces)"), "nil");
    assert!(i.take_output().contains("List traces of an org."));
    assert_eq!(
        show(&mut i, "(meta 'observatory/list-traces)"),
        "{\"name\" \"observatory/list-traces\"}"
    );
    assert_eq!(
        show(&mut i, "(tool/meta 'observatory/list-traces)"),
        "{\"name\" \"observatory/list-traces\"}"
    );
    assert_eq!(
        show(&mut i, "(tool/apropos \"invoices\")"),
        "[billing/invoices]"
    );
    let all = show(&mut i, "(all-ns)");
    assert!(
        all.contains("observatory") && all.contains("billing"),
        "{all}"
    );
    assert_eq!(all.matches(" tool").count(), 1, "tool listed once: {all}");
}

#[test]
fn upstream_names_feed_errors_and_hints() {
    let mut i = interp();
    let e = i.eval_str("(dir observatry)").unwrap_err();
    assert_eq!(e.reason(), Reason::UnboundVar);
    assert_eq!(e.hint(), Some("did you mean observatory?"));

    let e = i.eval_str("(observatry/list-traces {})").unwrap_err();
    assert_eq!(e.reason(), Reason::UnboundVar);
    assert!(e.message().contains("observatory, billing"), "{e}");
    assert_eq!(e.hint(), Some("did you mean observatory/list-traces?"));

    // Called by its name, an upstream tool is `tool/call` of it, through the thread macros
    // and `#(...)` too; as a value it is not a function, and the error says how to call it.
    assert_eq!(
        show(
            &mut i,
            "(= (observatory/list-traces {}) (tool/call 'observatory/list-traces {}))"
        ),
        "true"
    );
    assert_eq!(show(&mut i, "(-> {} observatory/list-traces :ok)"), "true");
    assert_eq!(
        show(&mut i, "(:ok (#(observatory/list-traces %) {}))"),
        "true"
    );
    let e = i
        .eval_str("(map observatory/list-traces [{}])")
        .unwrap_err();
    assert_eq!(e.reason(), Reason::UnboundVar);
    assert!(
        e.hint()
            .is_some_and(|h| h.contains("call it as (observatory/list-traces {...})")),
        "{e}"
    );
    // A local named like an upstream does not make its tools anything else.
    assert_eq!(
        show(
            &mut i,
            "(let [observatory 1] (:ok (observatory/list-traces {})))"
        ),
        "true"
    );
}

#[test]
fn hosts_decode_results_with_the_program_limits() {
    let mut i = interp();
    assert_eq!(
        show(
            &mut i,
            "(->> (tool/call 'observatory/list-traces) :value (map :cost) (reduce +))"
        ),
        "3.5"
    );
    let e = i.eval_str("(tool/call 'observatory/broken)").unwrap_err();
    assert_eq!(e.reason(), Reason::ParseError);

    // The JSON depth limit holds at its boundary.
    let limits = Limits {
        max_json_depth: 20,
        ..Limits::default()
    };
    let mut i = Interpreter::with_host(limits, Arc::new(Upstreams));
    assert_eq!(
        show(&mut i, "(:ok (tool/call 'observatory/deep 20))"),
        "true"
    );
    let e = i.eval_str("(tool/call 'observatory/deep 21)").unwrap_err();
    assert_eq!(e.reason(), Reason::DepthExceeded);
}

#[test]
fn decoded_results_are_charged_to_the_program_budget() {
    let program = "(count (mapv (fn [_] (tool/call 'observatory/list-traces)) (range data/n)))";
    let used = |n: i64| {
        let mut i = interp();
        i.set_context(Value::map_from(vec![(Value::keyword("n"), Value::Int(n))]));
        assert_eq!(show(&mut i, program), n.to_string());
        i.last_memory_bytes()
    };
    let (one, two) = (used(1), used(2));
    assert!(two > one, "{one} {two}");
    // A budget between the two: one decoded result fits, the second does not.
    let limits = Limits {
        max_memory_bytes: (one + two) / 2,
        ..Limits::default()
    };
    let run = |n: i64| {
        let mut i = Interpreter::with_host(limits.clone(), Arc::new(Upstreams));
        i.set_context(Value::map_from(vec![(Value::keyword("n"), Value::Int(n))]));
        i.eval_str(program)
    };
    assert_eq!(run(1).unwrap().to_string(), "1");
    assert_eq!(run(2).unwrap_err().reason(), Reason::MemoryExceeded);
}

#[test]
fn host_reasons_reach_the_program_typed() {
    let mut i = interp();
    let e = i.eval_str("(tool/call 'observatory/nope)").unwrap_err();
    assert_eq!(e.reason(), Reason::UnknownTool);
    assert_eq!(e.reason().as_str(), "unknown_tool");
    assert!(
        e.to_string()
            .starts_with("unknown_tool: no tool observatory/nope")
    );
}

#[test]
fn decode_json_outside_an_evaluation_uses_the_limits_it_is_given() {
    let mut out = String::new();
    let mut cx = CallContext::new(&Limits::default(), None, &mut out);
    let depth = Limits::default().max_json_depth;
    let ok = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(cx.decode_json(ok.as_bytes()).is_ok());
    let deep = format!("{}{}", "[".repeat(depth + 1), "]".repeat(depth + 1));
    let e = cx.decode_json(deep.as_bytes()).unwrap_err();
    assert_eq!(e.reason, Reason::DepthExceeded);
    assert_eq!(
        cx.decode_json(b"{\"a\": 1}").unwrap().to_string(),
        "{\"a\" 1}"
    );
}

#[test]
fn decode_json_charges_its_own_budget_up_to_exactly_the_limit() {
    // A string longer than the interned ones is charged its length plus 24 bytes (its count,
    // charge and length).
    let string = |len: usize| format!("\"{}\"", "x".repeat(len));
    let limits = Limits {
        max_memory_bytes: 100,
        ..Limits::default()
    };
    let mut out = String::new();
    let mut cx = CallContext::new(&limits, None, &mut out);
    assert_eq!(
        cx.decode_json(string(76).as_bytes()).unwrap().to_string(),
        string(76)
    );
    // The budget is spent: the next decode, however small, is refused.
    let e = cx.decode_json(string(40).as_bytes()).unwrap_err();
    assert_eq!(e.reason, Reason::MemoryExceeded);
    let mut out = String::new();
    let mut cx = CallContext::new(&limits, None, &mut out);
    let e = cx.decode_json(string(77).as_bytes()).unwrap_err();
    assert_eq!(e.reason, Reason::MemoryExceeded);
}

#[test]
fn decode_json_reads_the_clock_once_every_65536_values() {
    // Reading the clock per value would cost more than decoding it; the deadline is checked at
    // the 65 536th value, so with one already past a smaller document still decodes.
    let array = |zeros: usize| format!("[{}]", vec!["0"; zeros].join(","));
    let mut out = String::new();
    let mut cx = CallContext::new(&Limits::default(), Some(Instant::now()), &mut out);
    // The array and 65 534 numbers in it: 65 535 values.
    let v = cx.decode_json(array(65_534).as_bytes()).unwrap();
    assert_eq!(v.to_string().len(), 2 * 65_534 + 1);
    let mut out = String::new();
    let mut cx = CallContext::new(&Limits::default(), Some(Instant::now()), &mut out);
    let e = cx.decode_json(array(65_535).as_bytes()).unwrap_err();
    assert_eq!(e.reason, Reason::Timeout);
    assert_eq!(e.message, "deadline reached while decoding JSON");
}

#[test]
fn every_namespace_is_listed_once_in_the_unknown_namespace_error() {
    let mut i = interp();
    let e = i.eval_str("(nosuch/f)").unwrap_err();
    let list = e.message().split("known namespaces: ").nth(1).unwrap();
    let names: Vec<&str> = list.split(", ").collect();
    for n in ["clojure.string", "data", "tool", "observatory", "billing"] {
        assert_eq!(
            names.iter().filter(|x| **x == n).count(),
            1,
            "{n} in {list}"
        );
    }
    let mut no_host = Interpreter::new(Limits::default());
    let e = no_host.eval_str("(tool/call 'o/t {})").unwrap_err();
    assert_eq!(e.reason(), Reason::UnboundVar);
    assert!(e.message().contains("no host provides tool/call"), "{e}");
}
