//! Running one program to its end outside the MCP host (`ptc eval`, tests, benches): the
//! static pre-check, then the evaluation with a fresh [`ProgramHost`].

use super::host::ProgramHost;
use super::limits::Budgets;
use std::sync::Arc;

use ptc_lisp::{Interpreter, Limits, Value};

use crate::call::upstreams::Upstreams;
use crate::program::record_replay::Tape;
use crate::program::run_report::RunRecords;

/// The outcome of [`run_program`].
pub struct ProgramRun {
    /// The program's value, or why it failed.
    pub result: Result<Value, ptc_lisp::LispError>,
    /// Printed output (redacted).
    pub output: String,
    /// The run's upstream calls and metrics.
    pub records: RunRecords,
}

/// Runs `src` against `upstreams`: the static pre-check of its literal `tool/call` forms first
/// (nothing is called when it fails), then the evaluation with a fresh [`ProgramHost`].
/// Must not be called from inside a tokio runtime worker (it blocks on `runtime`).
pub fn run_program(
    upstreams: Arc<Upstreams>,
    runtime: tokio::runtime::Handle,
    src: &str,
    limits: Limits,
    budgets: Budgets,
    context: Option<Value>,
) -> ProgramRun {
    run_program_taped(upstreams, runtime, src, limits, budgets, context, Tape::Off)
}

/// [`run_program`] whose upstream calls go on `tape`: recorded, or answered from a recording.
pub fn run_program_taped(
    upstreams: Arc<Upstreams>,
    runtime: tokio::runtime::Handle,
    src: &str,
    limits: Limits,
    budgets: Budgets,
    context: Option<Value>,
    tape: Tape,
) -> ProgramRun {
    let host = Arc::new(ProgramHost::new(upstreams.clone(), runtime, budgets));
    host.set_tape(tape);
    if let Err(problems) = crate::program::precheck::precheck(&upstreams, src) {
        return ProgramRun {
            result: Err(crate::program::precheck::to_error(&problems)),
            output: String::new(),
            records: host.records(None),
        };
    }
    let mut interp = Interpreter::with_host(limits, host.clone());
    if let Some(c) = context {
        interp.set_context(c);
    }
    let result = interp.eval_str(src);
    let output = upstreams
        .redactor()
        .redact(&interp.take_output())
        .into_owned();
    let records = host.records(result.as_ref().ok());
    ProgramRun {
        result,
        output,
        records,
    }
}
