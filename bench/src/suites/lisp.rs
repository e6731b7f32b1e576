//! PTC-Lisp on trace data (P1–P6) and interpreter micro-benchmarks (P7), each beside
//! `serde_json`, hand-written Rust, jaq or rhai measured in the same run.

use std::time::Duration;

use ptc_lisp::{Interpreter, Limits, Value};
use serde_json::Value as Json;

use super::baselines::{self as base, Jaq};
use crate::measure::{Budget, median};
use crate::report::Row;
use crate::tracegen;

/// The data programs, reading the decoded response from `data/traces`.
const PROGRAMS: [(&str, &str, Option<&str>); 6] = [
    (
        "P1 count errors",
        r#"(count (filter #(= "error" (:status %)) data/traces))"#,
        Some(base::JQ_P1),
    ),
    (
        "P2 group-by model, sum cost",
        "(reduce (fn [m t] (update m (:model t) (fnil + 0) (:cost t))) {} data/traces)",
        Some(base::JQ_P2),
    ),
    (
        "P3 top-10 by cost, projected",
        "(->> data/traces (sort-by :cost >) (take 10) (mapv #(select-keys % [:id :cost])))",
        Some(JQ_P3),
    ),
    (
        "P4 failed-step tool frequencies",
        "(->> data/traces (mapcat :steps) (remove :ok) (map :tool) frequencies)",
        Some(base::JQ_P4),
    ),
    (
        "P5 distinct orgs",
        "(count (distinct (map :org_id data/traces)))",
        Some(JQ_P5),
    ),
    (
        "P6 project 1 000 maps to JSON",
        "(->> data/traces (take 1000) (mapv #(select-keys % [:id :status :cost])))",
        None,
    ),
];
const JQ_P3: &str = "sort_by(-.cost) | .[0:10] | map({id, cost})";
const JQ_P5: &str = "map(.org_id) | unique | length";

fn context(traces: Value) -> Value {
    Value::map_from(vec![(Value::keyword("traces"), traces)])
}

fn run(limits: &Limits, ctx: &Value, program: &str) -> Value {
    let mut interp = Interpreter::new(limits.clone());
    interp.set_context(ctx.clone());
    interp
        .eval_str(program)
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn as_json(v: &Value) -> Json {
    serde_json::from_str(&v.to_json_string().expect("JSON-encodable")).expect("valid JSON")
}

/// Checks every PTC-Lisp answer against the hand-written one, so a fast wrong answer fails.
fn check(i: usize, ours: &Value, data: &Json) {
    let got = as_json(ours);
    let want = match i {
        0 => serde_json::json!(base::p1_count_errors(data)),
        1 => serde_json::to_value(base::p2_cost_by_model(data)).unwrap(),
        2 => Json::Array(
            base::p3_top10(data)
                .into_iter()
                .map(|(id, cost)| serde_json::json!({"id": id, "cost": cost}))
                .collect(),
        ),
        3 => serde_json::to_value(base::p4_failed_tool_frequencies(data)).unwrap(),
        4 => serde_json::json!(base::p5_distinct_orgs(data)),
        _ => serde_json::from_str(&base::p6_project_to_json(data)).unwrap(),
    };
    assert!(
        close(&got, &want),
        "{} disagrees with Rust:\nptc:  {got}\nrust: {want}",
        PROGRAMS[i].0
    );
}

/// JSON equality with float sums compared to 1e-9 relative.
fn close(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| close(a, b))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| close(v, w)))
        }
        _ => a == b,
    }
}

fn rust_query(i: usize, data: &Json) -> usize {
    match i {
        0 => base::p1_count_errors(data),
        1 => base::p2_cost_by_model(data).len(),
        2 => base::p3_top10(data).len(),
        3 => base::p4_failed_tool_frequencies(data).len(),
        4 => base::p5_distinct_orgs(data),
        _ => base::p6_project_to_json(data).len(),
    }
}

/// Trace-data rows for one input size.
fn data_rows(megabytes: f64, budget: Budget) -> Vec<Row> {
    let bytes = tracegen::traces_json((megabytes * 1e6) as usize, 42);
    let size = format!("{megabytes} MB");
    let note = |extra: &str| format!("{size}{extra}");
    let limits = Limits::default();
    let unlimited = Limits::unlimited();
    let mut rows = Vec::new();

    let decode = || Value::from_json_bytes(&bytes, &limits).expect("decodes");
    let (decoded, peak) = crate::alloc::peak_during(decode);
    let serde_decode = median(budget, || {
        serde_json::from_slice::<Json>(&bytes).expect("json")
    });
    rows.push(Row::time(
        "lisp",
        "decode JSON into values",
        median(budget, decode),
        "serde_json::Value parse",
        serde_decode,
        Some(1.2),
        note(""),
    ));
    rows.push(Row::bytes(
        "lisp",
        "peak heap while decoding",
        peak as u64,
        "input size",
        bytes.len() as u64,
        Some(8.0),
        note(""),
    ));

    let json: Json = serde_json::from_slice(&bytes).expect("json");
    let ctx = context(decoded);
    for (i, (name, program, jq)) in PROGRAMS.iter().enumerate() {
        check(i, &run(&limits, &ctx, program), &json);
        let query = if i == 5 {
            median(budget, || {
                run(&limits, &ctx, program).to_json_string().expect("json")
            })
        } else {
            median(budget, || run(&limits, &ctx, program))
        };
        let rust = median(budget, || rust_query(i, &json));
        rows.push(Row::time(
            "lisp",
            &format!("{name}: query after decode"),
            query,
            "hand-written Rust over serde_json::Value",
            rust,
            Some(3.0),
            note(""),
        ));
        if i < 5 {
            let raw = median(budget, || run(&unlimited, &ctx, program));
            rows.push(Row::time(
                "lisp",
                &format!("{name}: all limits on"),
                query,
                "limits off",
                raw,
                Some(1.1),
                note(""),
            ));
        }
        if let Some(jq) = jq {
            let jaq = Jaq::compile(jq);
            let end_to_end = median(budget, || {
                let ctx = context(Value::from_json_bytes(&bytes, &limits).expect("decodes"));
                run(&limits, &ctx, program)
            });
            let jaq_time = median(budget, || jaq.run(&bytes));
            rows.push(Row::time(
                "lisp",
                &format!("{name}: decode + query"),
                end_to_end,
                "jaq (parse + filter, in-process)",
                jaq_time,
                Some(0.75),
                note(""),
            ));
        }
    }
    rows
}

const FIB: &str = "(defn fib [n] (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2))))) (fib 25)";
const LOOP: &str = "(loop [i 0 acc 0] (if (< i 1000000) (recur (inc i) (+ acc i)) acc))";
const REDUCE: &str = "(reduce + (range 1000000))";
const RHAI_LOOP: &str = "let acc = 0; let i = 0; while i < 1000000 { acc += i; i += 1; } acc";
const RHAI_REDUCE: &str = "let s = 0; for i in 0..1000000 { s += i; } s";

fn micro_rows(budget: Budget) -> Vec<Row> {
    let limits = Limits {
        max_loop_iterations: 10_000_000,
        ..Limits::default()
    };
    let engine = rhai::Engine::new();
    let lisp = |src: &'static str| {
        let limits = limits.clone();
        move || {
            Interpreter::new(limits.clone())
                .eval_str(src)
                .expect("runs")
        }
    };
    let rhai_run = |src: &'static str| {
        let ast = engine.compile(src).expect("rhai compiles");
        let e = &engine;
        move || e.eval_ast::<i64>(&ast).expect("rhai runs")
    };
    assert_eq!(
        lisp(FIB)().to_string(),
        rhai_run(base::RHAI_FIB)().to_string()
    );
    assert_eq!(lisp(LOOP)().to_string(), rhai_run(RHAI_LOOP)().to_string());
    assert_eq!(
        lisp(REDUCE)().to_string(),
        rhai_run(RHAI_REDUCE)().to_string()
    );
    let plus = median(budget, lisp("(+ 1 2)"));
    let rhai_plus = median(budget, || {
        rhai::Engine::new().eval::<i64>("1 + 2").expect("rhai")
    });
    vec![
        Row::time(
            "micro",
            "(+ 1 2), fresh interpreter",
            plus,
            "rhai: new engine + eval",
            rhai_plus,
            None,
            String::new(),
        ),
        Row::time(
            "micro",
            "fib 25",
            median(budget, lisp(FIB)),
            "rhai fib 25",
            median(budget, rhai_run(base::RHAI_FIB)),
            Some(1.0 / 3.0),
            String::new(),
        ),
        Row::time(
            "micro",
            "1 M loop/recur",
            median(budget, lisp(LOOP)),
            "rhai while loop",
            median(budget, rhai_run(RHAI_LOOP)),
            None,
            String::new(),
        ),
        Row::time(
            "micro",
            "reduce + over (range 1e6)",
            median(budget, lisp(REDUCE)),
            "rhai for loop",
            median(budget, rhai_run(RHAI_REDUCE)),
            None,
            String::new(),
        ),
    ]
}

/// Runs the suite: data programs at 0.5, 5 and 50 MB, then the micro-benchmarks.
pub fn run_suite(budget: Budget, sizes: &[f64]) -> Vec<Row> {
    let mut rows = Vec::new();
    for &mb in sizes {
        // Big inputs take long per sample; a few samples are enough for them.
        let b = if mb >= 10.0 {
            Budget {
                min_time: Duration::ZERO,
                min_samples: budget.min_samples.min(3),
            }
        } else {
            budget
        };
        rows.extend(data_rows(mb, b));
    }
    rows.extend(micro_rows(budget));
    rows
}
