//! The Observatory deployment, typed: `ptc::upstreams!` compiles
//! `fixtures/observatory/upstreams.json` and its OpenAPI document into the `observatory` module
//! (argument structs, each an `Operation` that `Upstreams::run` calls, response types) and
//! `plan()`.

use ptc::plan::Transport;
use ptc::{Plan, ToolError, Upstreams};

ptc::upstreams!("../fixtures/observatory/upstreams.json");

/// A failed trace and its steps, as the generated types hold them.
pub struct FailedTrace {
    /// The trace summary from `list_traces`.
    pub trace: observatory::GetTraceResponse,
    /// Its steps from `get_trace_steps` (summary mode, the operator's default).
    pub steps: observatory::GetTraceStepsResponse,
}

/// Lists the newest failed traces of `org` and fetches the first one's steps, through the
/// generated structs: `None` when the org has no failed trace.
pub async fn first_failed_trace(
    upstreams: &Upstreams,
    org: &str,
) -> Result<Option<FailedTrace>, ToolError> {
    let args = observatory::ListTracesArgs {
        status: Some(observatory::TraceStatus::Error),
        limit: Some(5),
        ..observatory::ListTracesArgs::new(org.to_string())
    };
    // `list_traces` returns the page's traces: its result path (`$.traces`) selects them.
    let traces = upstreams.run(args).await?;
    let Some(trace) = traces.into_iter().next() else {
        return Ok(None);
    };
    let steps_args = observatory::GetTraceStepsArgs::new(trace.id.clone(), org.to_string());
    let steps = upstreams.run(steps_args).await?;
    Ok(Some(FailedTrace { trace, steps }))
}

/// The compiled plan with the Observatory upstream pointed at `base_url` (the test bed listens on
/// a port chosen when it starts; a deployment would point it at its own service).
pub fn plan_at(base_url: &str) -> Result<Plan, ptc::serde_json::Error> {
    let mut plan = plan()?;
    for up in &mut plan.upstreams {
        if let Transport::Openapi(api) = &mut up.transport
            && up.name == observatory::UPSTREAM
        {
            api.base_url = base_url.to_string();
        }
    }
    Ok(plan)
}
