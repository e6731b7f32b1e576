//! A tool call an upstream answers with `input_required` (multi-round-trip requests, SEP-2322,
//! protocol 2026-07-28): what the server asks is answered and the call is sent again, as a new
//! request, with the answers and the server's `requestState` echoed unchanged, at most
//! [`MAX_INPUT_ROUNDS`] times.
//!
//! ptc offers its upstreams no client capabilities (no elicitation, sampling or roots), so
//! nobody is asked: an elicitation is answered `cancel` (the person was never shown it), a
//! roots request with no roots, and a sampling request cannot be answered, which fails the call
//! with the reason.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, InputRequest};
use rmcp::{Peer, RoleClient, ServiceError};
use serde_json::{Value, json};

/// How many `input_required` answers one call may get before it fails.
pub(crate) const MAX_INPUT_ROUNDS: usize = 8;

/// The first wait before sending again a call whose server asked nothing but to be asked
/// again (state only); see [`state_only_wait`].
const STATE_ONLY_WAIT: Duration = Duration::from_millis(50);

/// How a call ended.
pub(crate) enum Rounds {
    /// The server's final result.
    Done(CallToolResult),
    /// A request failed.
    Failed(ServiceError),
    /// The server asked something ptc cannot answer, or never stopped asking.
    Unanswered(String),
}

/// Calls the tool, answering the server's `input_required` rounds.
pub(crate) async fn call(peer: &Peer<RoleClient>, mut params: CallToolRequestParams) -> Rounds {
    for round in 0..=MAX_INPUT_ROUNDS as u32 {
        let asked = match peer.call_tool_once(params.clone()).await {
            Err(e) => return Rounds::Failed(e),
            Ok(CallToolResponse::Complete(result)) => return Rounds::Done(result),
            Ok(CallToolResponse::InputRequired(asked)) => asked,
            Ok(_) => {
                return Rounds::Unanswered(
                    "the server answered with a task, which ptc does not poll".into(),
                );
            }
        };
        let requests = asked.input_requests.unwrap_or_default();
        if requests.is_empty() && asked.request_state.is_none() {
            return Rounds::Unanswered(
                "the server asked for input but named nothing to answer".into(),
            );
        }
        if requests.is_empty() {
            tokio::time::sleep(state_only_wait(round)).await;
        }
        let mut answers = BTreeMap::new();
        for (key, request) in requests {
            match answer(&request) {
                Ok(value) => answers.insert(key, value),
                Err(why) => return Rounds::Unanswered(why),
            };
        }
        params.input_responses = (!answers.is_empty()).then_some(answers);
        params.request_state = asked.request_state;
    }
    Rounds::Unanswered(format!(
        "the server still asked for input after {MAX_INPUT_ROUNDS} answers"
    ))
}

/// The wait before the call is sent again when its `round`-th answer (counted from 0) asked for
/// nothing but to be asked again: [`STATE_ONLY_WAIT`], doubling each round up to 64 times it
/// (3.2 s), so a server that keeps asking is neither hammered nor left waiting long.
fn state_only_wait(round: u32) -> Duration {
    STATE_ONLY_WAIT * 2u32.pow(round.min(6))
}

/// ptc's answer to one request, with nobody to ask.
fn answer(request: &InputRequest) -> Result<Value, String> {
    match request {
        InputRequest::Elicitation(_) => Ok(json!({ "action": "cancel" })),
        InputRequest::ListRoots(_) => Ok(json!({ "roots": [] })),
        InputRequest::CreateMessage(_) => Err(
            "the server asked ptc to sample a model (`sampling/createMessage`), which ptc does \
             not offer its upstreams"
                .into(),
        ),
        _ => Err("the server asked for input of a kind ptc does not know".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(wire: serde_json::Value) -> InputRequest {
        serde_json::from_value(wire).expect("an input request")
    }

    #[test]
    fn a_state_only_round_waits_twice_as_long_as_the_last_up_to_64_times_the_first() {
        let waits: Vec<u128> = (0..9).map(|n| state_only_wait(n).as_millis()).collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1600, 3200, 3200, 3200]);
    }

    /// Nobody is asked: an elicitation is dismissed (`cancel`: the person never saw it, so they
    /// neither accepted nor declined), roots are none, a sampling request cannot be answered.
    #[test]
    fn what_ptc_answers_with_nobody_to_ask() {
        let elicit = request(json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": "Confirm?",
            "requestedSchema": {"type": "object", "properties": {}}}}));
        assert_eq!(answer(&elicit), Ok(json!({"action": "cancel"})));
        let roots = request(json!({"method": "roots/list"}));
        assert_eq!(answer(&roots), Ok(json!({"roots": []})));
        let sampling = request(json!({"method": "sampling/createMessage", "params": {
            "messages": [], "maxTokens": 10}}));
        let refused = answer(&sampling).unwrap_err();
        assert!(refused.contains("sampling/createMessage"), "{refused}");
    }
}
