//! Loading and compiling 50 operations of a multi-megabyte OpenAPI document, against parsing the
//! same bytes with `serde_json` alone.

use std::path::Path;

use ptc_plan::{DocumentRequest, DocumentSource};
use serde_json::Value;

use crate::measure::{Budget, median};
use crate::report::Row;

/// Serves the document from memory so both sides start from the same bytes.
pub(crate) struct Memory<'a>(pub(crate) &'a [u8]);

impl DocumentSource for Memory<'_> {
    fn fetch(&self, _: &DocumentRequest) -> Result<Vec<u8>, String> {
        Ok(self.0.to_vec())
    }
}

pub(crate) fn config(spec: &Path, ops: &[String]) -> String {
    serde_json::json!({"upstreams": {"github": {
        "transport": "openapi",
        "base_url": "https://api.github.com",
        "schema_file": spec,
        "schema_max_bytes": 200_000_000u64,
        "include_operations": ops,
    }}})
    .to_string()
}

/// The first `n` GET operations (in document order) that v1 accepts.
pub(crate) fn pick_operations(spec: &Path, bytes: &[u8], n: usize) -> Vec<String> {
    let doc: Value = serde_json::from_slice(bytes).expect("the spec is JSON");
    let mut ops: Vec<String> = doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|paths| paths.values())
        .filter_map(|item| {
            item.get("get")?
                .get("operationId")?
                .as_str()
                .map(str::to_string)
        })
        .collect();
    // Drop what the compiler rejects until the rest compiles; the diagnostics name the operations.
    loop {
        let take: Vec<String> = ops.iter().take(n).cloned().collect();
        match ptc_plan::load_str(
            &config(spec, &take),
            Path::new("bench.json"),
            &Memory(bytes),
        ) {
            Ok(_) => return take,
            Err(diags) => {
                let bad: Vec<String> = diags.iter().filter_map(|d| d.operation.clone()).collect();
                assert!(!bad.is_empty(), "unexpected failure:\n{diags}");
                ops.retain(|o| !bad.contains(o));
            }
        }
    }
}

/// Runs the suite.
pub fn run(budget: Budget) -> Vec<Row> {
    let spec = match crate::data::github_spec() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("plan: skipped ({e})");
            return Vec::new();
        }
    };
    let bytes = std::fs::read(&spec).expect("read spec");
    let ops = pick_operations(&spec, &bytes, 50);
    let cfg = config(&spec, &ops);
    let parse = median(budget, || {
        serde_json::from_slice::<Value>(&bytes).expect("json")
    });
    let compile = median(budget, || {
        ptc_plan::load_str(&cfg, Path::new("bench.json"), &Memory(&bytes)).expect("compiles")
    });
    vec![Row::time(
        "plan",
        "load + compile 50 ops (GitHub REST spec)",
        compile,
        "serde_json::Value parse",
        parse,
        Some(2.0),
        format!("{:.1} MB, {} ops", bytes.len() as f64 / 1e6, ops.len()),
    )]
}
