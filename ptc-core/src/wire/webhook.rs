//! The approval webhook a deployment may name (`approval_webhook`) instead of asking through the
//! MCP client: each approval is one POST, held open until a person answers or the wait runs out.
//!
//! The request body is the [`ApprovalRequest`] as JSON (secrets already redacted) with
//! `message` (the text a person reads) and `wait_ms`; the answer is `{"approved": true}` or
//! `{"approved": false, "reason": "..."}`. Anything else is no yes: a wait that runs out
//! declines, an error status or an unreadable answer is `approval_unavailable`.

use std::time::Duration;

use ptc_plan::ApprovalWebhook;
use serde_json::{Value, json};

use crate::call::approval::{ApprovalRequest, Decision};
use crate::credentials::binding::auth_headers;
use crate::credentials::per_caller::CallEnv;

/// A deployment's approval webhook, with its client.
pub(crate) struct Webhook {
    plan: ApprovalWebhook,
    client: reqwest::Client,
}

impl Webhook {
    pub(crate) fn new(plan: &ApprovalWebhook) -> Result<Self, String> {
        let client = crate::wire::http_client::builder()
            .connect_timeout(Duration::from_millis(plan.http.connect_timeout_ms.max(1)))
            .redirect(reqwest::redirect::Policy::none())
            .https_only(!plan.http.allow_insecure_http)
            .build()
            .map_err(|e| format!("cannot build the approval webhook's HTTP client: {e}"))?;
        Ok(Webhook {
            plan: plan.clone(),
            client,
        })
    }

    /// Asks the webhook about `request`, waiting at most `wait` for the person's answer.
    pub(crate) async fn ask(
        &self,
        env: &CallEnv<'_>,
        request: &ApprovalRequest,
        wait: Duration,
    ) -> Decision {
        let unavailable =
            |why: String| Decision::Unavailable(format!("the approval webhook {why}"));
        let body = json!({
            "tool": request.tool,
            "effect": request.effect.as_str(),
            "summary": request.summary,
            "request": request.preview,
            "arguments": request.arguments,
            "message": request.message(),
            "wait_ms": wait.as_millis() as u64,
        });
        let mut rb = self
            .client
            .post(&self.plan.url)
            .timeout(wait)
            .header("accept", "application/json")
            .json(&body);
        for (name, value) in &self.plan.http.static_headers {
            rb = rb.header(name, value);
        }
        let auth = match auth_headers(
            &self.plan.http.auth,
            env.credentials,
            env.secrets,
            env.redactor,
        ) {
            Ok(a) => a,
            Err(e) => return unavailable(format!("cannot be called: {e}")),
        };
        for (name, value) in &auth {
            rb = rb.header(name, value.expose());
        }
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Decision::Declined(format!(
                    "nobody answered the approval request within {} s",
                    wait.as_secs()
                ));
            }
            Err(e) => {
                return unavailable(format!(
                    "cannot be reached: {}",
                    crate::wire::http_client::describe(&e)
                ));
            }
        };
        let status = resp.status();
        if !status.is_success() {
            return unavailable(format!("answered HTTP {}", status.as_u16()));
        }
        let bytes =
            match crate::wire::http_client::read_capped(resp, self.plan.http.max_response_bytes)
                .await
            {
                Ok(b) => b,
                Err(_) => return unavailable("sent an answer that could not be read".into()),
            };
        decide(&bytes).unwrap_or_else(unavailable)
    }
}

/// The decision in a webhook's 2xx answer.
fn decide(body: &[u8]) -> Result<Decision, String> {
    let answer: Value = serde_json::from_slice(body)
        .map_err(|_| "answered with something other than JSON".to_string())?;
    match answer.get("approved") {
        Some(Value::Bool(true)) => Ok(Decision::Approved),
        Some(Value::Bool(false)) => {
            let why = answer
                .get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.trim().is_empty())
                .map_or("the person said no".to_string(), |r| {
                    format!(
                        "the person said no: {}",
                        r.chars().take(500).collect::<String>()
                    )
                });
            Ok(Decision::Declined(why))
        }
        _ => Err("answered without `approved: true|false`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_approved_true_is_a_yes() {
        assert_eq!(decide(br#"{"approved": true}"#), Ok(Decision::Approved));
        assert_eq!(
            decide(br#"{"approved": false}"#),
            Ok(Decision::Declined("the person said no".into()))
        );
        assert_eq!(
            decide(br#"{"approved": false, "reason": "not today"}"#),
            Ok(Decision::Declined("the person said no: not today".into()))
        );
        assert_eq!(
            decide(br#"{"approved": false, "reason": "  "}"#),
            Ok(Decision::Declined("the person said no".into()))
        );
        for other in [
            &br#"{"approved": "true"}"#[..],
            br#"{"ok": true}"#,
            br#"[true]"#,
        ] {
            assert_eq!(
                decide(other),
                Err("answered without `approved: true|false`".into())
            );
        }
        assert_eq!(
            decide(b"yes"),
            Err("answered with something other than JSON".into())
        );
    }
}
