//! Approval through the MCP client: an `elicitation/create` request to the person behind it,
//! on the session the program was sent on (protocol eras up to 2025-11-25, where a server may
//! send requests to its client while it works on one), or the same form in request rounds on
//! later eras ([`crate::server::rounds`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, ProtocolVersion};
use rmcp::service::{ElicitationMode, RequestContext, ServiceError};
use rmcp::{Peer, RoleServer};

use crate::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};

/// The form's one field: the person's yes or no.
const APPROVE: &str = "approve";

/// How the person behind a request's client is asked.
pub(crate) enum Channel {
    /// Through this approver (an `elicitation/create` request, or nobody).
    Approver(Arc<dyn Approver>),
    /// In request rounds (`input_required`, MCP 2026-07-28 and later): see
    /// [`crate::server::rounds`].
    Rounds,
}

/// How the calls of a program sent in `context`'s request are approved: through the client
/// when it said it can ask its user (form elicitation), in the way its protocol era allows;
/// nobody otherwise.
pub(crate) fn channel(context: &RequestContext<RoleServer>) -> Channel {
    let elicits = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some();
    if !elicits {
        return Channel::Approver(Arc::new(Unavailable(
            "the MCP client did not declare elicitation support, so nobody can be asked",
        )));
    }
    let modern = context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    if modern {
        Channel::Rounds
    } else {
        Channel::Approver(Arc::new(Elicitation {
            peer: context.peer.clone(),
        }))
    }
}

/// Nobody can be asked, for the reason it holds.
struct Unavailable(&'static str);

impl Approver for Unavailable {
    fn approve(&self, _: ApprovalRequest, _: Duration) -> DecisionFuture {
        Box::pin(std::future::ready(Decision::Unavailable(
            self.0.to_string(),
        )))
    }
}

/// Asks the person through the client's form elicitation.
struct Elicitation {
    peer: Peer<RoleServer>,
}

impl Approver for Elicitation {
    fn open_url(&self, message: String, url: String, wait: Duration) -> DecisionFuture {
        self.show(message, url, wait)
    }

    fn approve(&self, request: ApprovalRequest, wait: Duration) -> DecisionFuture {
        let peer = self.peer.clone();
        Box::pin(async move {
            if !peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
            {
                return Decision::Unavailable(
                    "the MCP client cannot show a form (it declared URL elicitation only)".into(),
                );
            }
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: request.message(),
                requested_schema: form(),
            };
            match peer
                .create_elicitation_with_timeout(params, Some(wait))
                .await
            {
                Ok(answer) => decide(answer.action, answer.content.as_ref()),
                Err(ServiceError::Timeout { .. }) => Decision::Declined(format!(
                    "nobody answered the approval request within {} s",
                    wait.as_secs()
                )),
                Err(e) => Decision::Unavailable(format!("the MCP client could not be asked ({e})")),
            }
        })
    }
}

impl Elicitation {
    /// Shows `url` through the client's URL elicitation.
    fn show(&self, message: String, url: String, wait: Duration) -> DecisionFuture {
        let peer = self.peer.clone();
        Box::pin(async move {
            if !peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Url)
            {
                return Decision::Unavailable(
                    "the MCP client cannot show a URL (it declared form elicitation only)".into(),
                );
            }
            let params = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message,
                url,
                elicitation_id: crate::call::writes::random_id()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
            };
            match peer
                .create_elicitation_with_timeout(params, Some(wait))
                .await
            {
                Ok(answer) => opened(answer.action),
                Err(ServiceError::Timeout { .. }) => {
                    Decision::Declined(format!("nobody answered within {} s", wait.as_secs()))
                }
                Err(e) => Decision::Unavailable(format!("the MCP client could not be asked ({e})")),
            }
        })
    }
}

/// Whether the person went to a URL shown them: only `accept` says so.
pub(crate) fn opened(action: ElicitationAction) -> Decision {
    match action {
        ElicitationAction::Accept => Decision::Approved,
        ElicitationAction::Decline => Decision::Declined("the person declined to open it".into()),
        _ => Decision::Declined("the person dismissed the request".into()),
    }
}

/// `{"approve": boolean}`, required.
pub(crate) fn form() -> ElicitationSchema {
    ElicitationSchema::builder()
        .required_bool_with(APPROVE, |b| {
            b.title("Approve")
                .description("Run this call now (the program continues with its result)")
        })
        .build()
        // The schema is fixed and has its one required property.
        .unwrap_or_else(|_| ElicitationSchema::new(Default::default()))
}

/// The person's answer: only an accepted form that says `approve: true` is a yes.
pub(crate) fn decide(action: ElicitationAction, content: Option<&serde_json::Value>) -> Decision {
    match action {
        ElicitationAction::Accept => {
            match content
                .and_then(|c| c.get(APPROVE))
                .and_then(|v| v.as_bool())
            {
                Some(true) => Decision::Approved,
                Some(false) => Decision::Declined("the person answered no".into()),
                None => Decision::Declined(
                    "the answer did not say approve: true, so it is taken as a no".into(),
                ),
            }
        }
        ElicitationAction::Decline => Decision::Declined("the person declined".into()),
        ElicitationAction::Cancel => Decision::Declined("the person dismissed the request".into()),
        // An answer ptc does not know is not a yes.
        _ => Decision::Declined("the client answered in a way ptc does not know".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_accepted_yes_approves() {
        let yes = json!({"approve": true});
        let no = json!({"approve": false});
        assert_eq!(
            decide(ElicitationAction::Accept, Some(&yes)),
            Decision::Approved
        );
        assert_eq!(
            decide(ElicitationAction::Accept, Some(&no)),
            Decision::Declined("the person answered no".into())
        );
        for content in [None, Some(json!({})), Some(json!({"approve": "true"}))] {
            assert!(
                matches!(
                    decide(ElicitationAction::Accept, content.as_ref()),
                    Decision::Declined(_)
                ),
                "{content:?}"
            );
        }
        assert_eq!(
            decide(ElicitationAction::Decline, Some(&yes)),
            Decision::Declined("the person declined".into())
        );
        assert_eq!(
            decide(ElicitationAction::Cancel, Some(&yes)),
            Decision::Declined("the person dismissed the request".into())
        );
    }

    #[test]
    fn the_form_asks_one_required_boolean() {
        let schema = serde_json::to_value(form()).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["approve"]));
        assert_eq!(schema["properties"]["approve"]["type"], "boolean");
    }
}
