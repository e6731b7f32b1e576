//! `ptc-bench`: every benchmark beside its baseline, measured in the same run.
//!
//! `cargo run --release -p ptc-bench --features baselines [-- --quick] [-- <suite>...]` prints one Markdown table
//! and writes it as JSON to `target/bench-results.json`.

mod alloc;
mod data;
mod load_client;
mod loopback;
mod mcp_session;
mod measure;
mod report;
mod suites;
mod tracegen;
mod worker;

use std::process::ExitCode;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

fn main() -> ExitCode {
    if !cfg!(feature = "baselines") {
        eprintln!(
            "ptc-bench measures each row beside its baseline, and the jaq and rhai baselines are \
             not built in: run `cargo run --release -p ptc-bench --features baselines`"
        );
        return ExitCode::from(2);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, file] = args.as_slice()
        && flag == "--worker"
    {
        return suites::lisp::worker(file);
    }
    if args.first().map(String::as_str) == Some("--load-client") {
        return load_client::main(&args[1..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let wanted: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    let budget = if quick {
        measure::Budget::quick()
    } else {
        measure::Budget::full()
    };
    if args.first().map(String::as_str) == Some("--traces-process") {
        return suites::traces::process_main(budget);
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: ptc-bench is a debug build; run it with --release for real numbers");
    }
    let enabled = |suite: &str| wanted.is_empty() || wanted.contains(&suite);
    let mut rows = Vec::new();
    if enabled("plan") {
        rows.extend(suites::plan_compile::run(budget));
    }
    if enabled("codegen") {
        rows.extend(suites::codegen::run(budget));
    }
    if enabled("lisp") {
        let sizes: &[f64] = if quick {
            &[0.5, 5.0]
        } else {
            &[0.5, 5.0, 50.0]
        };
        rows.extend(suites::lisp::run_suite(budget, sizes));
    }
    if enabled("tool_call") {
        rows.extend(suites::tool_call::run(budget));
    }
    if enabled("host") {
        rows.extend(suites::host::run(budget));
    }
    if enabled("programs") {
        rows.extend(suites::programs::run(budget));
    }
    if enabled("load") {
        rows.extend(suites::load::run(budget));
    }
    if enabled("pins") {
        rows.extend(suites::pins::run(budget));
    }
    if enabled("sandbox") {
        rows.extend(suites::sandbox::run(budget));
    }
    if enabled("identity") {
        rows.extend(suites::identity::run(budget));
    }
    if enabled("upstream_oauth") {
        rows.extend(suites::upstream_oauth::run(budget));
    }
    // In processes of its own, each starting its own trace exporter.
    if enabled("traces") {
        rows.extend(suites::traces::run(quick));
    }
    println!("{}", report::markdown(&rows));
    let json_path = data::dir().with_file_name("bench-results.json");
    match serde_json::to_string_pretty(&rows) {
        Ok(json) => match std::fs::write(&json_path, json) {
            Ok(()) => eprintln!("wrote {}", json_path.display()),
            Err(e) => eprintln!("cannot write {}: {e}", json_path.display()),
        },
        Err(e) => eprintln!("cannot render JSON: {e}"),
    }
    if rows.iter().all(report::Row::meets_target) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}
