//! The same queries written by hand in Rust over `serde_json::Value`, and in jq (jaq in-process):
//! what PTC-Lisp is measured against.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

/// P1: number of traces whose status is "error".
pub fn p1_count_errors(data: &Value) -> usize {
    traces(data).filter(|t| t["status"] == "error").count()
}

/// P2: total cost per model.
pub fn p2_cost_by_model(data: &Value) -> BTreeMap<String, f64> {
    let mut sums: HashMap<&str, f64> = HashMap::new();
    for t in traces(data) {
        *sums
            .entry(t["model"].as_str().unwrap_or_default())
            .or_default() += t["cost"].as_f64().unwrap_or(0.0);
    }
    sums.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// P3: the ten most expensive traces, projected to id and cost. Each cost is read once (into
/// `(cost, trace)` pairs), then sorted stably, most expensive first, as `sort-by` and jq do.
pub fn p3_top10(data: &Value) -> Vec<(String, f64)> {
    let mut all: Vec<(f64, &Value)> = traces(data)
        .map(|t| (t["cost"].as_f64().unwrap_or(0.0), t))
        .collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0));
    all.iter()
        .take(10)
        .map(|(cost, t)| (t["id"].as_str().unwrap_or_default().to_string(), *cost))
        .collect()
}

/// P4: how often each tool appears in failed steps.
pub fn p4_failed_tool_frequencies(data: &Value) -> BTreeMap<String, u64> {
    let mut freq: HashMap<&str, u64> = HashMap::new();
    for t in traces(data) {
        for s in t["steps"].as_array().into_iter().flatten() {
            if s["ok"] != Value::Bool(true) {
                *freq
                    .entry(s["tool"].as_str().unwrap_or_default())
                    .or_default() += 1;
            }
        }
    }
    freq.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// P5: number of distinct orgs.
pub fn p5_distinct_orgs(data: &Value) -> usize {
    traces(data)
        .filter_map(|t| t["org_id"].as_str())
        .collect::<HashSet<_>>()
        .len()
}

/// P6: the first 1 000 traces projected to id, status and cost, encoded as JSON.
pub fn p6_project_to_json(data: &Value) -> String {
    let projected: Vec<Value> = traces(data)
        .take(1000)
        .map(|t| serde_json::json!({"id": t["id"], "status": t["status"], "cost": t["cost"]}))
        .collect();
    serde_json::to_string(&projected).unwrap_or_default()
}

fn traces(data: &Value) -> impl Iterator<Item = &Value> {
    data.as_array().into_iter().flatten()
}

/// jq programs for P1, P2 and P4.
pub const JQ_P1: &str = r#"[.[] | select(.status == "error")] | length"#;
/// P2 in jq.
pub const JQ_P2: &str = "reduce .[] as $t ({}; .[$t.model] += $t.cost)";
/// P4 in jq.
pub const JQ_P4: &str =
    "reduce (.[] | .steps[] | select(.ok | not) | .tool) as $t ({}; .[$t] += 1)";

/// A compiled jq filter, run in-process by jaq.
#[cfg(feature = "baselines")]
pub struct Jaq {
    filter: jaq_core::Filter<jaq_core::data::JustLut<jaq_json::Val>>,
}

#[cfg(feature = "baselines")]
impl Jaq {
    /// Compiles `code` with jaq's standard library.
    pub fn compile(code: &str) -> Self {
        use jaq_core::load::{Arena, File, Loader};
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let modules = loader
            .load(&arena, File { code, path: () })
            .expect("jq parses");
        let filter = jaq_core::Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .expect("jq compiles");
        Self { filter }
    }

    /// Parses `json` with jaq's own reader and runs the filter: jaq end to end. The parsed input
    /// is returned beside the answer, so a caller's clock can stop before it is freed.
    pub fn run(&self, json: &[u8]) -> (jaq_json::Val, String) {
        let input = jaq_json::read::parse_single(json).expect("jaq parses the input");
        let keep = input.clone();
        let ctx = jaq_core::Ctx::<jaq_core::data::JustLut<jaq_json::Val>>::new(
            &self.filter.lut,
            jaq_core::Vars::new([]),
        );
        let mut out = self.filter.id.run((ctx, input)).map(jaq_core::unwrap_valr);
        match out.next() {
            Some(Ok(v)) => (keep, v.to_string()),
            other => panic!("jaq failed: {other:?}"),
        }
    }
}

/// `fib 25` in rhai, the embeddable-interpreter baseline for P7.
#[cfg(feature = "baselines")]
pub const RHAI_FIB: &str = "fn fib(n) { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } } fib(25)";
