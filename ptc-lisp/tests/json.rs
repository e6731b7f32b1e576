//! JSON in and out, and the Clojure rendering of values.

use ptc_lisp::{Interpreter, Limits, Value, read_value};

fn decode(s: &str) -> Value {
    Value::from_json_bytes(s.as_bytes(), &Limits::default()).unwrap()
}

#[test]
fn decodes_every_json_shape() {
    let v =
        decode(r#"{"a":[1,-2,2.5,1e3,-0.5E-2,true,false,null],"b":{"c":"x\u00e9\n\"q\""},"":{}}"#);
    assert_eq!(
        v.to_string(),
        r#"{"" {} "a" [1 -2 2.5 1000.0 -0.005 true false nil] "b" {"c" "xé\n\"q\""}}"#
    );
    assert_eq!(decode(r#""\ud83d\ude00""#).to_string(), "\"😀\"");
    assert_eq!(decode("  [ ]  ").to_string(), "[]");
    assert_eq!(
        decode("12345678901234567890").to_string(),
        "1.2345678901234567E19"
    );
    assert_eq!(decode(r#"{"k":1,"k":2}"#).to_string(), r#"{"k" 2}"#);
}

#[test]
fn rejects_malformed_json_with_a_parse_error() {
    for bad in [
        "",
        "[1,]",
        "{\"a\"}",
        "{\"a\":1,}",
        "[1 2]",
        "tru",
        "\"abc",
        "01x",
        "[1]]",
        "{1:2}",
        "\"\\x\"",
    ] {
        let e = Value::from_json_bytes(bad.as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(e.reason(), "parse_error", "{bad:?}");
    }
}

#[test]
fn depth_and_memory_limits_apply_while_decoding() {
    let limits = Limits {
        max_json_depth: 10,
        ..Limits::default()
    };
    let deep = format!("{}{}", "[".repeat(11), "]".repeat(11));
    assert_eq!(
        Value::from_json_bytes(deep.as_bytes(), &limits)
            .unwrap_err()
            .reason(),
        "depth_exceeded"
    );
    let ok = format!("{}{}", "[".repeat(10), "]".repeat(10));
    assert_eq!(
        Value::from_json_bytes(ok.as_bytes(), &limits)
            .unwrap()
            .to_string(),
        "[[[[[[[[[[]]]]]]]]]]"
    );
    let limits = Limits {
        max_memory_bytes: 10_000,
        ..Limits::default()
    };
    let big = format!(
        "[{}]",
        vec!["\"some text that is long enough to count\""; 1000].join(",")
    );
    assert_eq!(
        Value::from_json_bytes(big.as_bytes(), &limits)
            .unwrap_err()
            .reason(),
        "memory_exceeded"
    );
}

#[test]
fn encodes_values_as_json() {
    let v = read_value(r#"{:b [1 2.0 nil true] "a" #{:x} :c {1 "one"} :d ##Inf}"#).unwrap();
    assert_eq!(
        v.to_json_string().unwrap(),
        r#"{"a":["x"],"b":[1,2.0,null,true],"c":{"1":"one"},"d":null}"#
    );
    let mut i = Interpreter::new(Limits::default());
    let f = i.eval_str("inc").unwrap();
    assert_eq!(f.to_json_string().unwrap_err().reason(), "type_error");
}

#[test]
fn json_round_trips_through_the_language() {
    let mut i = Interpreter::new(Limits::default());
    let v = i
        .eval_str(r#"(json/parse-string (json/generate-string {:a [1 "two" 3.5] :b {:c nil}}))"#)
        .unwrap();
    assert_eq!(v.to_string(), r#"{"a" [1 "two" 3.5] "b" {"c" nil}}"#);
    let v = i
        .eval_str(r#"(json/parse-string "{\"a\":1}" true)"#)
        .unwrap();
    assert_eq!(v.to_string(), "{:a 1}");
}

#[test]
fn prints_like_clojure() {
    let cases = [
        ("1.0", "1.0"),
        ("100.0", "100.0"),
        ("1e7", "1.0E7"),
        ("1.5e-5", "1.5E-5"),
        ("0.001", "0.001"),
        ("-2.5", "-2.5"),
        ("##Inf", "##Inf"),
        ("##-Inf", "##-Inf"),
        ("##NaN", "##NaN"),
        ("\"a\\\"b\\\\c\\n\"", "\"a\\\"b\\\\c\\n\""),
        (":a/b", ":a/b"),
        ("{:b 1 :a 2 \"c\" 3}", "{\"c\" 3 :a 2 :b 1}"),
        ("#{:b :a}", "#{:a :b}"),
        ("(1 (2))", "[1 [2]]"),
        ("#'x", "#'x"),
        ("\\a", "\"a\""),
        ("\\newline", "\"\\n\""),
    ];
    for (src, want) in cases {
        assert_eq!(read_value(src).unwrap().to_string(), want, "{src}");
    }
    let mut i = Interpreter::new(Limits::default());
    assert_eq!(i.eval_str("#\"a+b\"").unwrap().to_string(), "#\"a+b\"");
    assert_eq!(i.eval_str("inc").unwrap().to_string(), "#function[inc]");
}

#[test]
fn interpreters_and_values_cross_threads() {
    fn assert_send<T: Send>() {}
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send::<Interpreter>();
    assert_send_sync::<Value>();
    assert_send_sync::<ptc_lisp::LispError>();
}

#[test]
fn repeated_record_keys_decode_exactly() {
    // Records repeat keys in the same places; the decoder reuses them, which must never change
    // what a key is or accept malformed input.
    let v =
        decode(r#"[{"id":1,"a\"b":2,"n":{"x":1}},{"id":2,"a\"b":3,"n":{"y":2}},{"idx":3,"id":4}]"#);
    assert_eq!(
        v.to_string(),
        r#"[{"a\"b" 2 "id" 1 "n" {"x" 1}} {"a\"b" 3 "id" 2 "n" {"y" 2}} {"id" 4 "idx" 3}]"#
    );
    for bad in [
        r#"[{"a\"b":1},{"a"b":1}]"#,
        r#"[{"k\n":1},{"k
":1}]"#,
        r#"[{"ab":1},{"ab:1}]"#,
    ] {
        let e = Value::from_json_bytes(bad.as_bytes(), &Limits::default()).unwrap_err();
        assert_eq!(e.reason(), "parse_error", "{bad}");
    }
}

/// Objects that repeat the previous object's keys at their depth share one key list
/// (`MapData::Record`); every map operation treats them as the maps they are.
#[test]
fn records_share_their_keys_and_behave_as_maps() {
    use ptc_lisp::MapData;
    let context = decode(
        r#"{"xs":[{"a":1,"b":{"c":1}},{"a":3,"b":{"c":2}},{"a":5,"b":{"c":3}},{"b":6,"a":7},{"a":8,"a":9}]}"#,
    );
    let v = match &context {
        Value::Map(m) => m.get(&Value::Str("xs".into())).expect("xs").clone(),
        other => panic!("a map: {other}"),
    };
    let Value::Vector(items) = &v else {
        panic!("a vector: {v}")
    };
    let shape = |i: usize| match &items[i] {
        Value::Map(m) => match &***m {
            MapData::Record(r) => Some(r.shape().clone()),
            _ => None,
        },
        other => panic!("a map: {other}"),
    };
    // The first object of a shape is a plain map; the next ones at that depth share its keys.
    assert!(shape(0).is_none());
    let (one, two) = (shape(1).expect("a record"), shape(2).expect("a record"));
    assert!(std::sync::Arc::ptr_eq(&one, &two));
    assert_eq!(one.keys().len(), 2);
    // Other key order, duplicate keys: plain maps (the last duplicate wins).
    assert!(shape(3).is_none() && shape(4).is_none());
    assert_eq!(
        v.to_string(),
        r#"[{"a" 1 "b" {"c" 1}} {"a" 3 "b" {"c" 2}} {"a" 5 "b" {"c" 3}} {"a" 7 "b" 6} {"a" 9}]"#
    );
    let mut i = Interpreter::new(Limits::default());
    i.set_context(context.clone());
    let cases = [
        (r#"(get (second data/xs) "a")"#, "3"),
        (r#"(get-in (second data/xs) ["b" "c"])"#, "2"),
        (r#"(:a (second data/xs))"#, "3"),
        (r#"(= (second data/xs) {"a" 3 "b" {"c" 2}})"#, "true"),
        (r#"(= {"b" {"c" 2} "a" 3} (second data/xs))"#, "true"),
        (r#"(= (second data/xs) (nth data/xs 2))"#, "false"),
        (
            r#"(assoc (second data/xs) "a" 0)"#,
            r#"{"a" 0 "b" {"c" 2}}"#,
        ),
        (
            r#"(assoc (second data/xs) "z" 0)"#,
            r#"{"a" 3 "b" {"c" 2} "z" 0}"#,
        ),
        (r#"(dissoc (second data/xs) "a")"#, r#"{"b" {"c" 2}}"#),
        (
            r#"(dissoc (second data/xs) "zz")"#,
            r#"{"a" 3 "b" {"c" 2}}"#,
        ),
        (
            r#"(update (second data/xs) "a" inc)"#,
            r#"{"a" 4 "b" {"c" 2}}"#,
        ),
        (
            r#"(update-in (nth data/xs 2) ["b" "c"] inc)"#,
            r#"{"a" 5 "b" {"c" 4}}"#,
        ),
        (r#"(keys (second data/xs))"#, r#"["a" "b"]"#),
        (r#"(vals (nth data/xs 2))"#, r#"[5 {"c" 3}]"#),
        (r#"(count (second data/xs))"#, "2"),
        (
            r#"(merge (second data/xs) {"a" 0 "q" 1})"#,
            r#"{"a" 0 "b" {"c" 2} "q" 1}"#,
        ),
        (
            r#"(contains? #{{"a" 3 "b" {"c" 2}}} (second data/xs))"#,
            "true",
        ),
        (
            r#"(get {(second data/xs) :found} {"a" 3 "b" {"c" 2}})"#,
            ":found",
        ),
        (r#"(mapv #(get % "a") data/xs)"#, "[1 3 5 7 9]"),
        (
            r#"(json/generate-string (second data/xs))"#,
            r#""{\"a\":3,\"b\":{\"c\":2}}""#,
        ),
        (
            r#"(reduce + (map #(get-in % ["b" "c"]) (take 3 data/xs)))"#,
            "6",
        ),
        // The shared keys are untouched by an update of one record.
        (
            r#"(do (assoc (second data/xs) "a" 0) (get (nth data/xs 2) "a"))"#,
            "5",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(
            i.eval_str(src).map(|v| v.to_string()).unwrap(),
            want,
            "{src}"
        );
    }
}

/// Depths past the 16 remembered ones share the last slot for key hints and record shapes:
/// objects there, alternating their keys, still decode to exactly what they say.
#[test]
fn records_past_the_remembered_depths_decode_exactly() {
    for depth in [14, 15, 16, 17, 20] {
        let open = "[".repeat(depth);
        let close = "]".repeat(depth);
        let text = format!(
            r#"{open}{{"a":1,"b":2}},{{"a":3,"b":4}},{{"b":5,"c":6}},{{"a":7,"b":8}}{close}"#
        );
        let want = format!(
            r#"{open}{{"a" 1 "b" 2}} {{"a" 3 "b" 4}} {{"b" 5 "c" 6}} {{"a" 7 "b" 8}}{close}"#
        );
        assert_eq!(decode(&text).to_string(), want, "depth {depth}");
    }
}
