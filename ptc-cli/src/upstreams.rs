//! Running a program against configured upstreams (`ptc eval --config`): load and compile the
//! config (fetching `schema_url` documents), start the upstreams, run the program.

use std::path::Path;
use std::sync::Arc;

use ptc_core::{Budgets, ProgramRun, StartOptions, Upstreams, run_program};
use ptc_lisp::{Limits, Value};

/// Runs `src` against the upstreams of `config`. An error is a config or start-up problem
/// (exit 2); program failures are in the returned run.
pub fn run(
    config: &Path,
    src: &str,
    limits: Limits,
    context: Option<Value>,
) -> Result<ProgramRun, String> {
    let loaded = ptc_plan::load_with(config, &ptc_core::documents::NetworkSource)
        .map_err(|d| format!("{}: invalid config\n{d}", config.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let upstreams = runtime
        .block_on(Upstreams::start(
            loaded.plan,
            loaded.secrets,
            StartOptions::default(),
        ))
        .map_err(|e| e.to_string())?;
    let upstreams = Arc::new(upstreams);
    let run = run_program(
        upstreams.clone(),
        runtime.handle().clone(),
        src,
        limits,
        Budgets::default(),
        context,
    );
    runtime.block_on(upstreams.shutdown());
    Ok(run)
}
