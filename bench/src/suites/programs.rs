//! Declared programs: a program called as its tool beside the same program sent to `lisp_eval`
//! (its text and the same arguments as `context`), through one evaluator, interleaved in the same
//! run. The program calls a loopback upstream once. Target: the tool costs no more (it was parsed
//! and checked when the plan was compiled, so it skips the pre-check `lisp_eval` makes).
//!
//! The build rows (50 programs over GitHub's operations) are in the codegen suite.

use std::sync::Arc;
use std::time::Instant;

use ptc_core::server::{EvalLimits, EvalRequest, Evaluator};
use ptc_core::{StartOptions, Upstreams};
use serde_json::json;

use crate::measure::{Budget, Samples};
use crate::report::Row;

/// The program: one upstream call, its answer counted.
const PROGRAM: &str =
    "(let [r (tool/call 'b/body {:size data/size})]\n  (if (:ok r) (count (:value r)) (fail r)))";

/// Runs the suite.
pub fn run(budget: Budget) -> Vec<Row> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let size = 5_000usize;
    let bodies = Arc::new(vec![(size, super::tool_call::body(size))]);
    let addr = rt.block_on(super::tool_call::serve(bodies));
    let dir = std::env::temp_dir().join(format!("ptc-bench-programs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    std::fs::write(dir.join("count.clj"), PROGRAM).expect("the program file");
    let config = json!({
        "upstreams": {"b": {
            "transport": "openapi",
            "base_url": format!("http://{addr}"),
            "allow_insecure_http": true,
            "schema_file": "openapi.json",
            "include_operations": ["body"]
        }},
        "programs": {"count-items": {
            "file": "count.clj",
            "description": "How many items the upstream answers for a size",
            "parameters": {"type": "object", "properties": {"size": {"type": "integer"}},
                           "required": ["size"]},
            "result": {"type": "integer"}
        }}
    })
    .to_string();
    let document = super::tool_call::document();
    let loaded = ptc_plan::load_str(
        &config,
        &dir.join("upstreams.json"),
        &super::plan_compile::Memory(&document),
    )
    .unwrap_or_else(|d| panic!("bench config: {d}"));
    let _ = std::fs::remove_dir_all(&dir);
    rt.block_on(async {
        let up = Upstreams::start(loaded.plan, loaded.secrets, StartOptions::default())
            .await
            .expect("upstreams start");
        let ev = Evaluator::new(
            Arc::new(up),
            tokio::runtime::Handle::current(),
            EvalLimits::default(),
        )
        .expect("limits");
        let args = json!({"size": size});
        let caller = ptc_core::credentials::identity::Caller::default();
        let as_tool = || {
            ptc_core::server::programs::request_for(
                &ev,
                &caller,
                "count-items",
                args.as_object().cloned(),
            )
            .expect("the program tool")
        };
        let as_eval = || EvalRequest {
            program: PROGRAM.into(),
            context: args.as_object().cloned(),
            ..EvalRequest::default()
        };
        let once = |req: EvalRequest| {
            let ev = &ev;
            async move {
                let t = Instant::now();
                let o = ev.eval(req, Default::default()).await;
                assert!(o.result.is_ok(), "{:?}", o.result.err());
                t.elapsed()
            }
        };
        // Warm both paths, then interleave them so drift hits both alike.
        once(as_tool()).await;
        once(as_eval()).await;
        let (mut tool, mut eval) = (Vec::new(), Vec::new());
        let start = Instant::now();
        while tool.len() < budget.min_samples.max(200) || start.elapsed() < budget.min_time {
            tool.push(once(as_tool()).await);
            eval.push(once(as_eval()).await);
        }
        let (tool, eval) = (Samples::new(tool), Samples::new(eval));
        vec![Row::paired(
            "programs",
            "a declared program called as its tool (one 5 KB upstream call)",
            &tool,
            "the same program and arguments sent to lisp_eval",
            &eval,
            Some(1.0),
            "in-process through one Evaluator, interleaved; the tool's arguments are checked \
             against its parameters, and it skips the pre-check (checked at load)"
                .into(),
        )]
    })
}
