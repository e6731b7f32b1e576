//! Asking a person to approve a call: through the deployment's approval webhook when it names
//! one, else the approver the host was given (an MCP client's elicitation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::RunState;
use crate::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};
use crate::call::contract::{Reason, ToolError};
use crate::call::upstreams::Upstreams;
use crate::program::run_report::ApprovalOutcome;

/// Asks the deployment's approval webhook, through the upstreams that hold it.
pub(super) struct ByWebhook(pub(super) Arc<Upstreams>);

impl Approver for ByWebhook {
    fn approve(&self, request: ApprovalRequest, wait: Duration) -> DecisionFuture {
        let upstreams = self.0.clone();
        Box::pin(async move { upstreams.ask_approval_webhook(&request, wait).await })
    }
}

impl RunState {
    /// Asks a person to approve `call`, waiting (suspended) at most the approval wait and the
    /// program's time left.
    pub(super) async fn approve(
        &self,
        call: &crate::call::upstreams::Prepared<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), (ToolError, ApprovalOutcome)> {
        let name = call.tool.qualified();
        let request = self.upstreams.approval_request(call);
        let mut wait = self.budgets.approval_wait;
        if let Some(d) = deadline {
            wait = wait.min(d.saturating_duration_since(Instant::now()));
        }
        let span = crate::telemetry::approval_span();
        let asked = self.approver.approve(request, wait);
        let decision = crate::telemetry::traced(asked, &span).await;
        let answer = match &decision {
            Decision::Approved => ApprovalOutcome::Approved,
            Decision::Declined(_) => ApprovalOutcome::Declined,
            Decision::Unavailable(_) => ApprovalOutcome::Unavailable,
        };
        crate::telemetry::approval_ended(&span, answer.as_str());
        match decision {
            Decision::Approved => Ok(()),
            Decision::Declined(why) => Err((
                ToolError {
                    reason: Reason::ApprovalDeclined,
                    message: self
                        .upstreams
                        .redactor()
                        .redact(&format!("{name}: not called: {why}"))
                        .into_owned(),
                },
                ApprovalOutcome::Declined,
            )),
            Decision::Unavailable(why) => Err((
                ToolError {
                    reason: Reason::ApprovalUnavailable,
                    message: self
                        .upstreams
                        .redactor()
                        .redact(&format!(
                            "{name}: not called: it needs a person's approval and {why}"
                        ))
                        .into_owned(),
                },
                ApprovalOutcome::Unavailable,
            )),
        }
    }
}
