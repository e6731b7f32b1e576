//! Session state: a program's definitions snapshotted, serialised, read back and restored into
//! a new interpreter, where a later program uses them; and `session/vars`, `session/forget`.

use std::sync::{Arc, Mutex};

use ptc_lisp::{
    CallContext, Host, HostError, HostValue, Interpreter, Kept, Limits, Reason, SessionError,
    SessionState, Value,
};

fn eval(i: &mut Interpreter, src: &str) -> Value {
    i.eval_str(src).unwrap_or_else(|e| panic!("{src}: {e}"))
}

/// Snapshot, encode, decode and restore into a new interpreter (sessions on).
fn carry(from: &Interpreter) -> Interpreter {
    let bytes = from.session_state().encode();
    let state = SessionState::decode(&bytes).unwrap_or_else(|e| panic!("decode: {e}"));
    let mut to = Interpreter::new(Limits::default());
    to.enable_session(true);
    to.restore_session(&state)
        .unwrap_or_else(|e| panic!("restore: {e}"));
    to
}

fn kept<'s>(state: &'s SessionState, name: &str) -> &'s Kept {
    state
        .vars()
        .iter()
        .find(|v| v.name() == name)
        .unwrap_or_else(|| panic!("{name} not in the state"))
        .kept()
}

fn why(state: &SessionState, name: &str) -> String {
    match kept(state, name) {
        Kept::NotKept(why) => why.clone(),
        other => panic!("{name} is kept: {other:?}"),
    }
}

/// Exactly the same value: an integer is not a float, floats compare by bits (NaN by being
/// NaN), and maps and sets keep their order.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        (Value::Str(x), Value::Str(y))
        | (Value::Keyword(x), Value::Keyword(y))
        | (Value::Symbol(x), Value::Symbol(y))
        | (Value::Var(x), Value::Var(y)) => x == y,
        (Value::Regex(x), Value::Regex(y)) => x.as_str() == y.as_str(),
        (Value::Vector(x), Value::Vector(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Value::Set(x), Value::Set(y)) => {
            x.0.len() == y.0.len() && x.0.iter().zip(y.0.iter()).all(|(p, q)| same(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((k, v), (l, w))| same(k, l) && same(v, w))
        }
        _ => false,
    }
}

#[test]
fn every_data_value_kind_round_trips_exactly() {
    let mut a = Interpreter::new(Limits::default());
    eval(
        &mut a,
        r#"
        (def n nil) (def yes true) (def no false)
        (def i 42) (def neg -7) (def imin Long/MIN_VALUE) (def imax Long/MAX_VALUE)
        (def fl 1.5) (def whole 2.0) (def nzero -0.0) (def big 1e300) (def tiny 5e-324)
        (def third (/ 1 3)) (def nan ##NaN) (def inf ##Inf) (def ninf ##-Inf)
        (def s "héllo \"q\" \\ \n\t\r\u0001\u001f 😀 𝄞 \u2028 end")
        (def empty-s "")
        (def kw :a) (def nskw :ns.x/b) (def sym 'foo/bar) (def odd-sym (symbol "a b"))
        (def odd-kw (keyword "x y"))
        (def v [1 [2.0 [3 "x"]]])
        (def m {:a 1, 1 "int key", [1 2] :vector-key, "s" "string key", 1.5 nil, nil :nil-key})
        (def st #{1 :a "x" [1] 2.5})
        (def large (zipmap (range 30) (map str (range 30))))
        (def nested {:rows [{:id 1 :tags #{:x :y}} {:id 2 :tags #{}}] :meta {"k" [nil true]}})
        (def re #"\d+[a-z]*\s\"q\"")
        (def vr #'neg)
        (def empties [[] {} #{} ""])
        (def deep (reduce (fn [acc _] [acc]) [] (range 511)))
        "#,
    );
    let state = a.session_state();
    assert!(
        state.not_kept().next().is_none(),
        "{:?}",
        state.not_kept().collect::<Vec<_>>()
    );
    let bytes = state.encode();
    assert_eq!(bytes.len(), state.encoded_len());
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        text.starts_with(r#"{"ptc_session":1,"vars":[{"name":"n","value":null}"#),
        "{text}"
    );
    for piece in [
        r#"{"name":"imin","value":{"int":"-9223372036854775808"}}"#,
        r#"{"name":"whole","value":2.0}"#,
        r#"{"name":"nzero","value":-0.0}"#,
        r#"{"name":"nan","value":{"float":"NaN"}}"#,
        r#"{"name":"nskw","value":{"kw":"ns.x/b"}}"#,
        r#"{"name":"vr","value":{"var":"neg"}}"#,
    ] {
        assert!(text.contains(piece), "{piece} in {text}");
    }
    let mut b = carry(&a);
    let names: Vec<&str> = state.names().collect();
    assert_eq!(names.len(), 32);
    for name in names {
        let (x, y) = (eval(&mut a, name), eval(&mut b, name));
        assert!(same(&x, &y), "{name}: {x} became {y}");
    }
    // The restored values behave as values: the regex matches, the big map is a map.
    assert_eq!(
        eval(&mut b, r#"(re-find re "12ab \"q\"")"#).to_string(),
        "\"12ab \\\"q\\\"\""
    );
    assert_eq!(eval(&mut b, "(get large 29)").to_string(), "\"29\"");
    // Restored again from the restored interpreter: the same bytes.
    assert_eq!(b.session_state().encode(), bytes);
}

#[test]
fn values_nested_too_deep_or_holding_functions_without_a_form_are_not_kept() {
    let mut a = Interpreter::new(Limits::default());
    // Built inside a `let`, so there is no top-level form to keep instead.
    eval(
        &mut a,
        "(let [d (reduce (fn [acc _] [acc]) [] (range 512))] (def deep d))",
    );
    // A megabyte string shared 300 times: small in memory, 300 MiB written out.
    eval(
        &mut a,
        r#"(let [k (apply str (repeat 1024 "a")) m (apply str (repeat 1024 k))]
             (def wide (vec (repeat 300 m))))"#,
    );
    let handlers = eval(&mut a, "{:inc inc}");
    a.define("handlers", handlers);
    let state = a.session_state();
    assert_eq!(why(&state, "deep"), "nested deeper than 512 levels");
    assert_eq!(why(&state, "wide"), "larger than 256 MiB written out");
    assert!(why(&state, "handlers").contains("holds functions"));
    assert_eq!(state.len(), 0);
    assert_eq!(state.encode(), br#"{"ptc_session":1,"vars":[]}"#);
    // A top-level form that builds it is kept instead, and run again.
    eval(
        &mut a,
        "(def deep (reduce (fn [acc _] [acc]) [] (range 512)))",
    );
    assert!(matches!(kept(&a.session_state(), "deep"), Kept::Source(_)));
    let mut b = carry(&a);
    assert_eq!(eval(&mut b, "(count (flatten deep))"), Value::Int(0));
}

#[test]
fn functions_are_kept_as_their_form_and_restored_with_what_they_use() {
    let mut a = Interpreter::new(Limits::default());
    eval(
        &mut a,
        r#"
        (def rate 3)
        (defn scale "times the rate" [x] (* x rate))
        (defn total [xs] (reduce + (map scale xs)))
        (defn fact [n] (if (<= n 1) 1 (* n (fact (dec n)))))
        (declare odd2?)
        (defn even2? [n] (if (zero? n) true (odd2? (dec n))))
        (defn odd2? [n] (if (zero? n) false (even2? (dec n))))
        (def add2 #(+ % 2))
        (def add-rate (partial + rate))
        (defn- secret [] :s)
        (def handlers {:double (fn [x] (* 2 x))})
        (def counter (let [start 10] (fn [] start)))
        (defonce once-f (fn [] :once))
        "#,
    );
    let state = a.session_state();
    assert!(matches!(kept(&state, "rate"), Kept::Data(Value::Int(3))));
    match kept(&state, "scale") {
        Kept::Source(src) => assert_eq!(src, r#"(defn scale "times the rate" [x] (* x rate))"#),
        other => panic!("{other:?}"),
    }
    assert!(state.not_kept().next().is_none(), "{state:?}");
    let mut b = carry(&a);
    for (src, want) in [
        ("(total [1 2 3])", "18"),
        ("(fact 10)", "3628800"),
        ("[(even2? 10) (odd2? 7)]", "[true true]"),
        ("(add2 1)", "3"),
        ("(add-rate 1)", "4"),
        ("(secret)", ":s"),
        ("((:double handlers) 4)", "8"),
        ("(counter)", "10"),
        ("(once-f)", ":once"),
        // Functions that are called later see the globals of the session they are in.
        ("(do (def rate 10) (scale 2))", "20"),
    ] {
        assert_eq!(eval(&mut b, src).to_string(), want, "{src}");
    }
    // Nothing of the restoring shows: no output, no REPL history.
    assert_eq!(b.output(), "");
    let mut c = carry(&b);
    assert_eq!(eval(&mut c, "*2"), Value::Nil);
    assert_eq!(eval(&mut c, "(scale 2)").to_string(), "20");
}

#[test]
fn the_latest_definition_wins_and_sets_the_order() {
    let mut a = Interpreter::new(Limits::default());
    eval(&mut a, "(def x 1) (defn f [] :old) (def g 5) (defn h [] 1)");
    eval(
        &mut a,
        "(def x 2) (defn f [] :new) (defn g [] :g-fn) (def h {:data true})",
    );
    let state = a.session_state();
    assert_eq!(state.names().collect::<Vec<_>>(), ["x", "f", "g", "h"]);
    eval(&mut a, "(def x 3)");
    let state = a.session_state();
    assert_eq!(state.names().collect::<Vec<_>>(), ["f", "g", "h", "x"]);
    let mut b = carry(&a);
    assert_eq!(
        eval(&mut b, "[x (f) (g) h]").to_string(),
        "[3 :new :g-fn {:data true}]"
    );
}

#[test]
fn a_form_reading_a_value_defined_again_after_it_is_not_kept() {
    let mut a = Interpreter::new(Limits::default());
    eval(
        &mut a,
        "(def n 1) (def f (let [m n] (fn [] m))) (def lazy (fn [] n)) (def n 2)
         (def g (partial + n))
         (defn h [] 1) (def h (let [old h] (fn [] (inc (old)))))
         (def hist (let [v *1] (fn [] v)))",
    );
    let state = a.session_state();
    assert_eq!(
        why(&state, "f"),
        "uses the value of n, which was defined again after it"
    );
    assert_eq!(why(&state, "h"), "uses its own earlier value");
    assert_eq!(why(&state, "hist"), "uses *1 when defined");
    let mut b = carry(&a);
    assert_eq!(eval(&mut b, "[(lazy) (g 1)]").to_string(), "[2 3]");
    assert_eq!(b.eval_str("(f)").unwrap_err().reason(), Reason::UnboundVar);
}

#[test]
fn functions_defined_inside_other_forms_are_not_kept_but_their_data_is() {
    let mut a = Interpreter::new(Limits::default());
    eval(
        &mut a,
        "(let [x 1] (defn f [] x))
         (when true (defn k [] 1))
         (let [y 5] (def d y))
         (defn uses-f [] (f))",
    );
    let state = a.session_state();
    assert!(why(&state, "f").starts_with("a function defined inside another form"));
    assert!(why(&state, "k").starts_with("a function defined inside another form"));
    assert_eq!(why(&state, "uses-f"), "uses f, which is not kept");
    assert!(matches!(kept(&state, "d"), Kept::Data(Value::Int(5))));
    let mut b = carry(&a);
    assert_eq!(eval(&mut b, "d"), Value::Int(5));
    let e = b.eval_str("(f)").unwrap_err();
    assert_eq!(e.reason(), Reason::UnboundVar);
    assert!(e.message().contains("unknown symbol f"), "{e}");
}

/// A host serving `tool/call`, counting its calls.
#[derive(Default)]
struct Tools {
    calls: Mutex<usize>,
}

impl Host for Tools {
    fn namespaces(&self) -> Vec<String> {
        vec!["tool".into()]
    }
    fn upstreams(&self) -> Vec<String> {
        vec!["o".into()]
    }
    fn call(
        &self,
        _: &mut CallContext<'_>,
        _: &str,
        _: &str,
        _: &[Value],
    ) -> Result<HostValue, HostError> {
        *self.calls.lock().unwrap() += 1;
        Ok(HostValue::Value(Value::vector(vec![Value::Int(7)])))
    }
}

#[test]
fn definitions_that_call_the_host_are_not_kept_and_restoring_calls_nothing() {
    let tools = Arc::new(Tools::default());
    let mut a = Interpreter::with_host(Limits::default(), tools.clone());
    eval(
        &mut a,
        "(defn fetch [] (tool/call 'o/x {}))
         (defn sugar [] (o/x {}))
         (def wrapped (fn [] (fetch)))
         (def r (tool/call 'o/x {}))
         (defn pure [] (count r))",
    );
    assert_eq!(*tools.calls.lock().unwrap(), 1);
    let state = a.session_state();
    assert!(why(&state, "fetch").starts_with("calls the host function tool/call"));
    assert!(why(&state, "sugar").starts_with("calls the host function tool/call"));
    assert_eq!(why(&state, "wrapped"), "uses fetch, which is not kept");
    assert!(matches!(kept(&state, "r"), Kept::Data(_)));
    let decoded = SessionState::decode(&state.encode()).unwrap();
    let mut b = Interpreter::with_host(Limits::default(), tools.clone());
    b.restore_session(&decoded).unwrap();
    assert_eq!(eval(&mut b, "(pure)"), Value::Int(1));
    assert_eq!(*tools.calls.lock().unwrap(), 1, "restoring called the host");
    // A state that says otherwise (written by hand, or damaged) is refused, not run.
    let forged = br#"{"ptc_session":1,"vars":[{"name":"f","source":"(def f (let [x (tool/call 'o/x {})] (fn [] x)))"}]}"#;
    let forged = SessionState::decode(forged).unwrap();
    let e = b.restore_session(&forged).unwrap_err();
    assert_eq!(e.reason(), Reason::InvalidForm);
    assert!(e.message().contains("definition of f"), "{e}");
    assert_eq!(*tools.calls.lock().unwrap(), 1);
}

#[test]
fn restoring_a_source_that_is_not_its_definition_fails_clearly() {
    for (source, reason) in [
        ("(defn g [] 1)", Reason::InvalidForm),
        ("(def f 1) (println \"more\")", Reason::InvalidForm),
        ("(+ 1 2)", Reason::InvalidForm),
        ("(def f data/x)", Reason::InvalidForm),
        ("(defn f [] (", Reason::ParseError),
        ("(defn f [] (unknown-fn))", Reason::UnboundVar),
    ] {
        let json = format!(
            r#"{{"ptc_session":1,"vars":[{{"name":"f","source":{}}}]}}"#,
            Value::str(source).to_json_string().unwrap()
        );
        let state = SessionState::decode(json.as_bytes()).unwrap();
        let mut i = Interpreter::new(Limits::default());
        let e = i.restore_session(&state).unwrap_err();
        assert_eq!(e.reason(), reason, "{source}: {e}");
        assert!(
            e.message()
                .starts_with("could not restore the session's definition of f: "),
            "{source}: {e}"
        );
    }
}

#[test]
fn history_hidden_and_declared_names_are_not_part_of_the_state() {
    let mut a = Interpreter::new(Limits::default());
    for src in [
        "1",
        "2",
        "(letfn [(a [] 1) (b [] (a))] (b))",
        "(declare later)",
        "3",
    ] {
        eval(&mut a, src);
    }
    let state = a.session_state();
    assert!(state.vars().is_empty(), "{state:?}");
    assert!(state.is_empty());
}

#[test]
fn session_builtins_are_off_by_default() {
    let mut i = Interpreter::new(Limits::default());
    for src in ["(session/vars)", "(session/forget 'x)", "(session/forget)"] {
        let e = i.eval_str(src).unwrap_err();
        assert_eq!(e.reason(), Reason::UnboundVar, "{src}");
        assert!(
            e.message()
                .contains("sessions are off in this deployment; definitions last one evaluation"),
            "{src}: {e}"
        );
    }
    // They are documented like every namespaced builtin.
    assert_eq!(eval(&mut i, "(dir session)").to_string(), "[forget vars]");
    eval(&mut i, "(doc session/vars)");
    assert!(i.take_output().contains("session/vars"));
    assert!(
        ptc_lisp::builtins::all()
            .iter()
            .any(|b| b.name == "session/forget")
    );
}

#[test]
fn session_vars_describes_each_definition() {
    let mut i = Interpreter::new(Limits::default());
    i.enable_session(true);
    eval(
        &mut i,
        r#"(def rows [1 2 3]) (defn f [x] x) (let [y 1] (defn g [] y)) (def m {:a 1})
           (def s "héllo") (def n 1.5)"#,
    );
    assert_eq!(
        eval(&mut i, "(session/vars)").to_string(),
        "{f {:kept true :type \"function\"} \
          g {:kept false :type \"function\" :why \"a function defined inside another form; only a top-level def or defn is kept\"} \
          m {:count 1 :kept true :type \"map\"} \
          n {:kept true :type \"float\"} \
          rows {:count 3 :kept true :type \"vector\"} \
          s {:count 5 :kept true :type \"string\"}}"
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    );
    let e = i
        .eval_str("(pmap (fn [_] (session/vars)) [1])")
        .unwrap_err();
    assert!(e.message().contains("inside pmap"), "{e}");
}

#[test]
fn session_forget_removes_definitions() {
    let mut i = Interpreter::new(Limits::default());
    i.enable_session(true);
    eval(
        &mut i,
        "(def rows [1 2]) (def kept-x 1) (defn uses-rows [] rows) (declare later)",
    );
    assert_eq!(
        eval(&mut i, "(session/forget 'rows \"nope\" '*1)").to_string(),
        "[rows]"
    );
    let e = i.eval_str("rows").unwrap_err();
    assert_eq!(e.reason(), Reason::UnboundVar);
    assert!(e.message().contains("unknown symbol rows"), "{e}");
    assert_eq!(
        i.eval_str("(uses-rows)").unwrap_err().reason(),
        Reason::UnboundVar
    );
    assert_eq!(
        why(&i.session_state(), "uses-rows"),
        "uses rows, which has no value"
    );
    // Within one program, forms after the forget do not know the name.
    let e = i
        .eval_str("(def tmp 1) (session/forget 'tmp) tmp")
        .unwrap_err();
    assert!(e.message().contains("unknown symbol tmp"), "{e}");
    // Defined again, it is a new definition.
    assert_eq!(eval(&mut i, "(def rows 5) rows"), Value::Int(5));
    assert_eq!(
        eval(&mut i, "(session/forget)").to_string(),
        "[kept-x uses-rows rows]"
    );
    assert!(i.session_state().vars().is_empty());
    for name in ["kept-x", "later"] {
        assert_eq!(i.eval_str(name).unwrap_err().reason(), Reason::UnboundVar);
    }
    // The REPL history stays.
    assert_eq!(eval(&mut i, "*1").to_string(), "[kept-x uses-rows rows]");
    let e = i.eval_str("(session/forget 1)").unwrap_err();
    assert_eq!(e.reason(), Reason::TypeError);
}

#[test]
fn the_host_can_forget_from_a_state() {
    let mut a = Interpreter::new(Limits::default());
    eval(
        &mut a,
        "(def n 2) (def add-n (partial + n)) (defn lazy [] n) (def other 1)",
    );
    let mut state = a.session_state();
    assert_eq!(state.forget(&["n", "missing"]), ["n"]);
    // What needs the forgotten definition cannot be restored without it.
    assert_eq!(why(&state, "add-n"), "uses n, which is not kept");
    assert_eq!(why(&state, "lazy"), "uses n, which is not kept");
    let state = SessionState::decode(&state.encode()).unwrap();
    assert_eq!(state.names().collect::<Vec<_>>(), ["other"]);
    let mut state = state;
    state.clear();
    assert!(state.is_empty());
}

#[test]
fn decode_says_what_is_wrong() {
    let e = SessionState::decode(br#"{"ptc_session":2,"vars":[]}"#).unwrap_err();
    assert_eq!(e, SessionError::Version(2));
    assert!(
        e.to_string()
            .starts_with("session state format 2; this host reads format 1: "),
        "{e}"
    );
    for garbage in [
        &b"hello"[..],
        b"",
        b"[1,2]",
        b"{}",
        b"{\"vars\":[]}",
        b"{\"ptc_session\":\"1\"}",
        &[0xff, 0xfe, 0x00],
    ] {
        let e = SessionState::decode(garbage).unwrap_err();
        assert!(
            e.to_string().starts_with("not session state: "),
            "{garbage:?}: {e}"
        );
    }
    for damaged in [
        &br#"{"ptc_session":1,"vars":[{"name":"x","value":[1,2"#[..],
        br#"{"ptc_session":1}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x"}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"a b","value":1}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"*1","value":1}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x","value":1},{"name":"x","value":2}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x","value":{"kw":"a","sym":"b"}}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x","value":{"big":"1"}}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x","value":{"map":[1]}}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x","value":{"re":"("}}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x","value":{"int":"1.5"}}]}"#,
        br#"{"ptc_session":1,"vars":[{"name":"x","value":{"float":"nan"}}]}"#,
    ] {
        let e = SessionState::decode(damaged).unwrap_err();
        assert!(
            matches!(e, SessionError::Invalid(_)),
            "{}: {e}",
            String::from_utf8_lossy(damaged)
        );
        assert!(e.to_string().starts_with("damaged session state: "), "{e}");
    }
    let e: Box<dyn std::error::Error> = Box::new(SessionError::Version(3));
    assert!(e.to_string().contains("format 3"));
}

#[test]
fn decode_never_panics_on_cut_or_mutated_state() {
    let mut a = Interpreter::new(Limits::default());
    eval(
        &mut a,
        r#"(def m {:a [1 2.5 "x"] 3 #{:k 'sym} [1] nil}) (def re #"a+") (defn f [x] (inc x))
           (def s "ü\n😀") (def nan ##NaN)"#,
    );
    let bytes = a.session_state().encode();
    let limits = Limits {
        timeout: Some(std::time::Duration::from_secs(2)),
        ..Limits::default()
    };
    let try_bytes = |b: &[u8]| {
        if let Ok(state) = SessionState::decode(b) {
            let mut i = Interpreter::new(limits.clone());
            let _ = i.restore_session(&state);
        }
    };
    for n in 0..bytes.len() {
        assert!(SessionState::decode(&bytes[..n]).is_err(), "cut at {n}");
    }
    // A deterministic xorshift stream of mutations: replace, insert or delete a byte.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet = b"{}[]\",:0-.e\\ufnxtl1\xff\x00";
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 3 {
            let at = (next() as usize) % b.len();
            let byte = alphabet[(next() as usize) % alphabet.len()];
            match next() % 3 {
                0 => b[at] = byte,
                1 => b.insert(at, byte),
                _ => {
                    b.remove(at);
                }
            }
        }
        try_bytes(&b);
    }
}
