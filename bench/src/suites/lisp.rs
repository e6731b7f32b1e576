//! PTC-Lisp on trace data (P1–P6) and interpreter micro-benchmarks (P7), each beside
//! `serde_json`, hand-written Rust, jaq or rhai measured in the same run.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ptc_lisp::{Interpreter, Limits, Value};
use serde_json::Value as Json;

use super::baselines as base;
#[cfg(feature = "baselines")]
use super::baselines::Jaq;
use crate::measure::{Budget, Samples, once, pair, timed};
use crate::report::Row;
use crate::tracegen;
use crate::worker::{ProcessRun, Worker, run_process};

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
    let want = want(i, data);
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

/// Programs and helper binaries found once per run.
pub struct Externals {
    /// `bench/serde-plain`, built: serde_json without `preserve_order`, and sonic-rs.
    serde_plain: Result<PathBuf, String>,
    /// The released `ptc` binary (`cargo build --release -p ptc-cli`).
    ptc: Result<PathBuf, String>,
    /// The released `jaq` binary (`cargo install jaq --locked --root target/jaq-bin`).
    jaq: Result<PathBuf, String>,
}

impl Externals {
    fn find() -> Self {
        let target = crate::data::dir().with_file_name("");
        let exists = |p: PathBuf, how: &str| {
            if p.is_file() {
                Ok(p)
            } else {
                Err(format!("{} is missing ({how})", p.display()))
            }
        };
        Self {
            serde_plain: crate::worker::serde_plain_binary(),
            ptc: exists(
                target.join("release/ptc"),
                "build it with `cargo build --release -p ptc-cli`",
            ),
            jaq: exists(
                target.join("jaq-bin/bin/jaq"),
                "install it with `cargo install jaq --locked --root target/jaq-bin`",
            ),
        }
    }
}

/// The bench's own worker mode (`ptc-bench --worker FILE`): PTC-Lisp timed in a process whose
/// allocator `PTC_BENCH_ALLOC` chose. Commands: `decode`, `p1` (decode + P1), `check-p1`, `alloc`.
pub fn worker(file: &str) -> std::process::ExitCode {
    use std::io::{BufRead, Write};
    let Ok(bytes) = std::fs::read(file) else {
        eprintln!("ptc-bench --worker: cannot read {file}");
        return std::process::ExitCode::from(2);
    };
    let limits = Limits::default();
    let mut decode = || Value::from_json_bytes(&bytes, &limits).expect("decodes");
    let mut p1 = || {
        let ctx = context(Value::from_json_bytes(&bytes, &limits).expect("decodes"));
        let answer = run(&limits, &ctx, PROGRAMS[0].1);
        (ctx, answer)
    };
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match line.trim() {
            "decode" => once(&mut decode).0.as_nanos().to_string(),
            "p1" => once(&mut p1).0.as_nanos().to_string(),
            "check-p1" => p1().1.to_string(),
            "alloc" => crate::alloc::name().to_string(),
            other => format!("error: unknown command {other:?}"),
        };
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The answer jq gives for program `i`, as JSON.
fn want(i: usize, data: &Json) -> Json {
    match i {
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
    }
}

/// Checks a baseline tool's answer (jq text) against the hand-written Rust one.
fn check_text(who: &str, i: usize, text: &str, data: &Json) {
    let got: Json = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{who} answered {text:?} to {}: {e}", PROGRAMS[i].0));
    let want = want(i, data);
    assert!(
        close(&got, &want),
        "{who} disagrees with Rust on {}:\n{who}: {got}\nrust: {want}",
        PROGRAMS[i].0
    );
}

/// Trace-data rows for one input size.
fn data_rows(megabytes: f64, budget: Budget, ext: &Externals, whole_process: bool) -> Vec<Row> {
    let bytes = tracegen::traces_json((megabytes * 1e6) as usize, 42);
    let size = format!("{megabytes} MB");
    let note = |extra: &str| format!("{size}{extra}");
    let limits = Limits::default();
    let unlimited = Limits::unlimited();
    let mi = crate::alloc::name();
    let mut rows = Vec::new();
    let file = crate::data::dir().join(format!("traces-{megabytes}MB.json"));
    let written = std::fs::create_dir_all(crate::data::dir())
        .and_then(|()| std::fs::write(&file, &bytes))
        .map_err(|e| format!("cannot write {}: {e}", file.display()));

    let mut decode = || Value::from_json_bytes(&bytes, &limits).expect("decodes");
    let (decoded, peak) = crate::alloc::peak_during(decode);
    let mut serde_decode = || serde_json::from_slice::<Json>(&bytes).expect("json");
    let (ours, theirs) = pair(budget, timed(decode), timed(serde_decode));
    rows.push(
        Row::paired(
            "lisp",
            "decode JSON into values",
            &ours,
            "serde_json::Value parse (preserve_order, as in the workspace)",
            &theirs,
            Some(1.2),
            note(""),
        )
        .with_alloc(mi, mi),
    );
    let (ours_free, theirs_free) =
        pair(budget, || once(&mut decode).1, || once(&mut serde_decode).1);
    rows.push(
        Row::paired(
            "lisp",
            "free the decoded values",
            &ours_free,
            "free a serde_json::Value (preserve_order)",
            &theirs_free,
            None,
            note(" (not in any other row's clock)"),
        )
        .with_alloc(mi, mi),
    );
    let traces = match &decoded {
        Value::Vector(v) => v.len(),
        _ => 0,
    };
    match (&ext.serde_plain, &written) {
        (Ok(bin), Ok(())) => {
            let mut cmd = Command::new(bin);
            cmd.arg(&file);
            let mut plain = Worker::spawn(cmd).unwrap_or_else(|e| panic!("{e}"));
            for parser in ["serde", "sonic"] {
                let n = plain
                    .ask(&format!("check-{parser}"))
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    n,
                    traces.to_string(),
                    "{parser} read a different trace count"
                );
            }
            for (cmd, label, target) in [
                (
                    "serde",
                    "serde_json::Value parse, no preserve_order (own process)",
                    Some(0.5),
                ),
                (
                    "sonic",
                    "sonic_rs::Value parse: the decode floor (own process, target-cpu=native)",
                    None,
                ),
            ] {
                let (ours, theirs) = pair(budget, timed(decode), || plain.time(cmd));
                rows.push(
                    Row::paired(
                        "lisp",
                        "decode JSON into values",
                        &ours,
                        label,
                        &theirs,
                        target,
                        note(""),
                    )
                    .with_alloc(mi, "mimalloc"),
                );
            }
        }
        (Err(e), _) | (_, Err(e)) => eprintln!("lisp: serde-plain rows skipped: {e}"),
    }
    if let Ok(()) = &written {
        let spawn = |alloc: &str| {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            let mut cmd = Command::new(exe);
            cmd.arg("--worker").arg(&file).env("PTC_BENCH_ALLOC", alloc);
            Worker::spawn(cmd)
        };
        match (spawn("mimalloc"), spawn("system")) {
            (Ok(mut fast), Ok(mut sys)) => {
                let a = fast.ask("alloc").unwrap_or_default();
                let b = sys.ask("alloc").unwrap_or_default();
                for (cmd, name) in [
                    ("decode", "decode JSON into values"),
                    ("p1", "P1 count errors: decode + query"),
                ] {
                    let (ours, theirs) = pair(budget, || fast.time(cmd), || sys.time(cmd));
                    rows.push(
                        Row::paired(
                            "alloc",
                            &format!("{name} ({a})"),
                            &ours,
                            &format!("the same on {b}"),
                            &theirs,
                            None,
                            note(""),
                        )
                        .with_alloc(&a, &b),
                    );
                }
            }
            (Err(e), _) | (_, Err(e)) => eprintln!("alloc rows skipped: {e}"),
        }
    }
    rows.push(Row::bytes(
        "lisp",
        "peak heap while decoding",
        peak as u64,
        "input size",
        bytes.len() as u64,
        Some(8.0),
        note(" (counting allocator)"),
    ));

    let json: Json = serde_json::from_slice(&bytes).expect("json");
    let ctx = context(decoded);
    for (i, (name, program, jq)) in PROGRAMS.iter().enumerate() {
        #[cfg(not(feature = "baselines"))]
        let _ = jq;
        check(i, &run(&limits, &ctx, program), &json);
        let query = if i == 5 {
            pair(
                budget,
                timed(|| run(&limits, &ctx, program).to_json_string().expect("json")),
                timed(|| rust_query(i, &json)),
            )
        } else {
            pair(
                budget,
                timed(|| run(&limits, &ctx, program)),
                timed(|| rust_query(i, &json)),
            )
        };
        rows.push(
            Row::paired(
                "lisp",
                &format!("{name}: query after decode"),
                &query.0,
                "hand-written Rust over serde_json::Value",
                &query.1,
                Some(3.0),
                note(""),
            )
            .with_alloc(mi, mi),
        );
        if i < 5 {
            let (on, off) = pair(
                budget,
                timed(|| run(&limits, &ctx, program)),
                timed(|| run(&unlimited, &ctx, program)),
            );
            rows.push(Row::paired(
                "lisp",
                &format!("{name}: all limits on"),
                &on,
                "limits off",
                &off,
                Some(1.1),
                note(""),
            ));
        }
        #[cfg(feature = "baselines")]
        if let Some(jq) = jq {
            let jaq = Jaq::compile(jq);
            check_text("jaq", i, &jaq.run(&bytes).1, &json);
            let (ours, theirs) = pair(
                budget,
                timed(|| {
                    let ctx = context(Value::from_json_bytes(&bytes, &limits).expect("decodes"));
                    let answer = run(&limits, &ctx, program);
                    (ctx, answer)
                }),
                timed(|| jaq.run(&bytes)),
            );
            rows.push(
                Row::paired(
                    "lisp",
                    &format!("{name}: decode + query"),
                    &ours,
                    "jaq (parse + filter, in-process)",
                    &theirs,
                    Some(0.75),
                    note(" (answer checked)"),
                )
                .with_alloc(mi, mi),
            );
        }
    }
    if whole_process {
        rows.extend(process_rows(&bytes, budget, ext, &json, &size));
    }
    rows
}

/// `ptc eval --context FILE` against the released `jaq` binary on the same file: wall time and
/// peak RSS of the whole process, P1 and P2.
fn process_rows(
    bytes: &[u8],
    budget: Budget,
    ext: &Externals,
    json: &Json,
    size: &str,
) -> Vec<Row> {
    let (ptc, jaq) = match (&ext.ptc, &ext.jaq) {
        (Ok(p), Ok(j)) => (p, j),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("process rows skipped: {e}");
            return Vec::new();
        }
    };
    // `ptc eval --context` takes an object; its keys become `data/...`.
    let file = crate::data::dir().join(format!("traces-{size}-object.json").replace(' ', ""));
    let mut doc = b"{\"traces\":".to_vec();
    doc.extend_from_slice(bytes);
    doc.push(b'}');
    if let Err(e) = std::fs::write(&file, &doc) {
        eprintln!("process rows skipped: cannot write {}: {e}", file.display());
        return Vec::new();
    }
    let mut rows = Vec::new();
    for (i, jq) in [(0, base::JQ_P1), (1, base::JQ_P2)] {
        let (name, program, _) = PROGRAMS[i];
        let ptc_cmd = || {
            let mut c = Command::new(ptc);
            c.args(["eval", "--json", "--context"])
                .arg(&file)
                .args(["-e", program]);
            c
        };
        let jaq_cmd = || {
            let mut c = Command::new(jaq);
            c.args(["-c", &format!(".traces | {jq}")]).arg(&file);
            c
        };
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let go = |cmd: Command, who: &str, runs: &mut Vec<ProcessRun>| {
            let (run, out) = run_process(cmd).unwrap_or_else(|e| panic!("{e}"));
            check_text(who, i, &out, json);
            runs.push(run);
        };
        // One warm-up each (page cache), then alternate.
        go(ptc_cmd(), "ptc", &mut Vec::new());
        go(jaq_cmd(), "jaq", &mut Vec::new());
        for _ in 0..budget.min_samples {
            go(ptc_cmd(), "ptc", &mut ours);
            go(jaq_cmd(), "jaq", &mut theirs);
        }
        let wall = |r: &[ProcessRun]| Samples::new(r.iter().map(|r| r.wall).collect());
        let rss = |r: &[ProcessRun]| r.iter().map(|r| r.max_rss).max().unwrap_or(0);
        rows.push(
            Row::paired(
                "process",
                &format!("{name}: `ptc eval --context` wall time"),
                &wall(&ours),
                "released `jaq` binary, same file",
                &wall(&theirs),
                Some(0.75),
                format!("{size} (answers checked)"),
            )
            .with_alloc("ptc binary's", "mimalloc"),
        );
        if rss(&ours) == 0 {
            eprintln!("process: peak RSS rows skipped: GNU time (/usr/bin/time) is missing");
            continue;
        }
        rows.push(Row::bytes(
            "process",
            &format!("{name}: `ptc eval` peak RSS"),
            rss(&ours),
            "released `jaq` binary's peak RSS",
            rss(&theirs),
            Some(1.0),
            size.to_string(),
        ));
        rows.push(Row::bytes(
            "process",
            &format!("{name}: `ptc eval` peak RSS"),
            rss(&ours),
            "input size",
            bytes.len() as u64,
            Some(4.0),
            size.to_string(),
        ));
    }
    rows
}

#[cfg(feature = "baselines")]
const FIB: &str = "(defn fib [n] (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2))))) (fib 25)";
#[cfg(feature = "baselines")]
const LOOP: &str = "(loop [i 0 acc 0] (if (< i 1000000) (recur (inc i) (+ acc i)) acc))";
#[cfg(feature = "baselines")]
const REDUCE: &str = "(reduce + (range 1000000))";
#[cfg(feature = "baselines")]
const RHAI_LOOP: &str = "let acc = 0; let i = 0; while i < 1000000 { acc += i; i += 1; } acc";
#[cfg(feature = "baselines")]
const RHAI_REDUCE: &str = "let s = 0; for i in 0..1000000 { s += i; } s";

#[cfg(feature = "baselines")]
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
    let (plus, rhai_plus) = pair(
        budget,
        timed(lisp("(+ 1 2)")),
        timed(|| rhai::Engine::new().eval::<i64>("1 + 2").expect("rhai")),
    );
    // One interpreter for every sample: what a host that keeps its interpreter pays per eval
    // (the evaluation thread is reused, not started).
    let mut warm = Interpreter::new(limits.clone());
    let (warm_plus, rhai_warm) = pair(
        budget,
        timed(|| warm.eval_str("(+ 1 2)").expect("runs")),
        timed(|| engine.eval::<i64>("1 + 2").expect("rhai")),
    );
    let row = |name: &str, ours: &Samples, base: &str, theirs: &Samples, target| {
        Row::paired("micro", name, ours, base, theirs, target, String::new())
    };
    let (fib, rhai_fib) = pair(budget, timed(lisp(FIB)), timed(rhai_run(base::RHAI_FIB)));
    let (lp, rhai_while) = pair(budget, timed(lisp(LOOP)), timed(rhai_run(RHAI_LOOP)));
    let (lp2, rhai_for) = pair(budget, timed(lisp(LOOP)), timed(rhai_run(RHAI_REDUCE)));
    let (red, rhai_for2) = pair(budget, timed(lisp(REDUCE)), timed(rhai_run(RHAI_REDUCE)));
    vec![
        row(
            "(+ 1 2), fresh interpreter",
            &plus,
            "rhai: new engine + eval",
            &rhai_plus,
            None,
        ),
        row(
            "(+ 1 2), warm interpreter",
            &warm_plus,
            "rhai: same engine, eval",
            &rhai_warm,
            None,
        ),
        Row::time(
            "micro",
            "(+ 1 2), warm interpreter",
            warm_plus.median(),
            "the 10 µs budget",
            Duration::from_micros(10),
            Some(1.0),
            String::new(),
        ),
        row("fib 25", &fib, "rhai fib 25", &rhai_fib, Some(1.0 / 3.0)),
        row(
            "1 M loop/recur summing i",
            &lp,
            "rhai while loop, same sum (like for like)",
            &rhai_while,
            None,
        ),
        row(
            "1 M loop/recur summing i",
            &lp2,
            "rhai for loop over 0..1e6, same sum (like for like)",
            &rhai_for,
            None,
        ),
        row(
            "reduce + over (range 1e6)",
            &red,
            "rhai for loop (not like for like: reduce is a native fold)",
            &rhai_for2,
            None,
        ),
    ]
}

/// Runs the suite: data programs at 0.5, 5 and 50 MB, then the micro-benchmarks.
pub fn run_suite(budget: Budget, sizes: &[f64]) -> Vec<Row> {
    let ext = Externals::find();
    let largest = sizes.iter().copied().fold(0.0, f64::max);
    let mut rows = Vec::new();
    for &mb in sizes {
        // Big inputs take long per sample: a fixed count of alternating samples (7 in a full run).
        let b = if mb >= 10.0 {
            Budget {
                min_time: Duration::ZERO,
                min_samples: budget.min_samples.min(7),
            }
        } else {
            budget
        };
        rows.extend(data_rows(mb, b, &ext, mb == largest));
    }
    #[cfg(feature = "baselines")]
    rows.extend(micro_rows(budget));
    rows
}
