//! A person's approval of one call: what they are asked ([`ApprovalRequest`], secrets already
//! redacted), and the [`Approver`] a host asks through (an MCP client's elicitation, a webhook).
//!
//! To the program, waiting for the answer is one more suspension: the host waits on the
//! approver's future the way it waits on an upstream, holding no thread.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ptc_plan::Effect;
use serde_json::Value;

/// What a person is asked to approve. Built by the host, redacted before any approver sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalRequest {
    /// `server/tool`.
    pub tool: String,
    /// What the tool does (`write` or `safe_query`).
    pub effect: Effect,
    /// The tool's one-line summary.
    pub summary: String,
    /// The request it will make: `POST https://host/api/traces/tr_1/annotations`, or the MCP
    /// tool and upstream.
    pub preview: String,
    /// The arguments as the upstream will get them (secrets redacted).
    pub arguments: Value,
}

impl ApprovalRequest {
    /// The text shown to the person.
    pub fn message(&self) -> String {
        let args = serde_json::to_string_pretty(&self.arguments)
            .unwrap_or_else(|_| self.arguments.to_string());
        let mut text = format!(
            "A program wants to call {} ({}).\n",
            self.tool,
            self.effect.as_str()
        );
        if !self.summary.is_empty() {
            text.push_str(&format!("{}\n", self.summary));
        }
        text.push_str(&format!(
            "Request: {}\nArguments:\n{args}\nApprove this call?",
            self.preview
        ));
        text
    }
}

/// The person's answer, or why there was none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Yes: the call runs.
    Approved,
    /// No, or no answer in time: the call does not run (`approval_declined`). Says which.
    Declined(String),
    /// Nobody could be asked (`approval_unavailable`): never taken as a yes. Says why.
    Unavailable(String),
}

/// The future an approver answers with.
pub type DecisionFuture = Pin<Box<dyn Future<Output = Decision> + Send + 'static>>;

/// Asks a person. `wait` is how long the person has; an approver that gets no answer by then
/// answers [`Decision::Declined`] saying so.
pub trait Approver: Send + Sync {
    /// Asks about `request`.
    fn approve(&self, request: ApprovalRequest, wait: Duration) -> DecisionFuture;

    /// Shows the person `url` to open, with `message` saying why (an upstream's OAuth consent):
    /// [`Decision::Approved`] when they went to it, [`Decision::Declined`] when they would not,
    /// [`Decision::Unavailable`] when no URL can be shown this way (the default).
    fn open_url(&self, message: String, url: String, wait: Duration) -> DecisionFuture {
        let _ = (message, url, wait);
        Box::pin(std::future::ready(Decision::Unavailable(
            "this way of asking cannot show a URL".into(),
        )))
    }
}

/// The approver of a host that has no way to ask anyone.
pub(crate) struct Nobody;

impl Approver for Nobody {
    fn approve(&self, _: ApprovalRequest, _: Duration) -> DecisionFuture {
        Box::pin(std::future::ready(Decision::Unavailable(
            "nobody can be asked here: run the program through an MCP client that supports \
             elicitation, or configure an approval webhook"
                .into(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_message_names_the_tool_the_request_and_the_arguments() {
        let r = ApprovalRequest {
            tool: "observatory/annotate-trace".into(),
            effect: Effect::Write,
            summary: "Annotate a trace".into(),
            preview: "POST http://127.0.0.1:8787/api/traces/tr_1/annotations".into(),
            arguments: json!({"id": "tr_1", "body": {"label": "flaky"}}),
        };
        let m = r.message();
        assert!(
            m.starts_with(
                "A program wants to call observatory/annotate-trace (write).\nAnnotate a trace\n\
                 Request: POST http://127.0.0.1:8787/api/traces/tr_1/annotations\nArguments:\n{"
            ),
            "{m}"
        );
        assert!(m.contains("\"label\": \"flaky\""), "{m}");
        assert!(m.ends_with("}\nApprove this call?"), "{m}");
        let bare = ApprovalRequest {
            summary: String::new(),
            ..r
        };
        assert!(
            bare.message().starts_with(
                "A program wants to call observatory/annotate-trace (write).\nRequest: "
            )
        );
    }
}
