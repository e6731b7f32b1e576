//! `ptc_upstreams!` cost: expansion time (what the macro does: load, compile, generate) for the
//! Observatory fixture and for 50 operations of GitHub's REST description, beside `serde_json`
//! parsing the same document, and the size of the generated code per operation.
//!
//! Not measured here (see docs/codegen.md): incremental `cargo check` of a crate using the macro
//! against progenitor's output for the same operations.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::plan_compile::{Memory, config, pick_operations};
use crate::measure::{Budget, median};
use crate::report::Row;

/// The expansion budget for 50 operations (issue 10).
const EXPANSION_BUDGET: Duration = Duration::from_millis(300);
/// The generated-size budget, lines per operation after prettyplease (issue 10).
const LINES_PER_OP_BUDGET: f64 = 60.0;

/// Runs the suite.
pub fn run(budget: Budget) -> Vec<Row> {
    let mut rows = observatory(budget);
    match crate::data::github_spec() {
        Ok(spec) => rows.extend(github(budget, &spec)),
        Err(e) => eprintln!("codegen: GitHub rows skipped ({e})"),
    }
    rows
}

fn observatory(budget: Budget) -> Vec<Row> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/observatory");
    let config = dir.join("upstreams.json");
    let doc = std::fs::read(dir.join("observatory.openapi.json")).expect("the fixture document");
    let parse = median(budget, || {
        serde_json::from_slice::<Value>(&doc).expect("json")
    });
    let expand = median(budget, || {
        ptc_codegen::expansion::expand(&config).expect("the fixture expands")
    });
    let code = ptc_codegen::pretty(
        ptc_codegen::expansion::expand(&config)
            .expect("the fixture expands")
            .tokens,
    )
    .expect("parses");
    vec![Row::time(
        "codegen",
        "macro expansion, Observatory (7 ops)",
        expand,
        "serde_json::Value parse of its document",
        parse,
        None,
        format!(
            "{} KB document, {} generated lines",
            doc.len() / 1000,
            code.lines().count()
        ),
    )]
}

fn github(budget: Budget, spec: &Path) -> Vec<Row> {
    let bytes = std::fs::read(spec).expect("read spec");
    let ops = pick_operations(spec, &bytes, 50);
    let cfg = config(spec, &ops);
    let source = Memory(&bytes);
    let expand = || {
        let loaded = ptc_plan::load_str(&cfg, Path::new("bench.json"), &source).expect("compiles");
        ptc_codegen::generate(&loaded.plan, Path::new("bench.json")).expect("generates")
    };
    let parse = median(budget, || {
        serde_json::from_slice::<Value>(&bytes).expect("json")
    });
    let expansion = median(budget, expand);
    let code = ptc_codegen::pretty(expand()).expect("parses");
    let lines = code.lines().count();
    let per_op = lines as f64 / ops.len() as f64;
    let note = format!(
        "{:.1} MB, {} ops, {lines} generated lines",
        bytes.len() as f64 / 1e6,
        ops.len()
    );
    vec![
        Row::time(
            "codegen",
            "macro expansion, 50 ops (GitHub REST spec)",
            expansion,
            "serde_json::Value parse of the same document",
            parse,
            None,
            note.clone(),
        ),
        Row::time(
            "codegen",
            "macro expansion, 50 ops (GitHub REST spec)",
            expansion,
            "the 0.3 s budget",
            EXPANSION_BUDGET,
            Some(1.0),
            note.clone(),
        ),
        Row {
            suite: "codegen".into(),
            name: "generated lines per operation (prettyplease), 50 GitHub ops".into(),
            unit: "lines",
            ours: per_op,
            baseline: "the 60-line budget".into(),
            base: LINES_PER_OP_BUDGET,
            ratio: per_op / LINES_PER_OP_BUDGET,
            target: Some(1.0),
            note,
            alloc: String::new(),
            spread: None,
        },
    ]
}
