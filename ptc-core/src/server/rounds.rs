//! Approval on MCP 2026-07-28 and later, where a server may not send its client a request while
//! it works on one. Instead the `tools/call` answers `input_required` with the elicitation, and
//! the program stays suspended (parked here, holding no thread) until the client retries the
//! call with the person's answer and the `requestState` it was given; then it continues from
//! where it waited, and nothing it already did runs again.
//!
//! The evaluation runs as a task that reports to a [`Conversation`]: each request round takes
//! the conversation's next event, the program's outcome or the next approval it waits for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, InputRequest, InputRequests,
    InputRequiredResult, InputResponses,
};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

use crate::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture};
use crate::server::outcome::{EvalOutcome, HostReason};

/// The key of the one input request a round asks for.
const APPROVAL_KEY: &str = "approval";

/// What an evaluation tells the request rounds.
pub(crate) enum Event {
    /// A call waits for a person: ask, and send the answer.
    Ask(Question, oneshot::Sender<Decision>),
    /// The program ended.
    Done(Box<EvalOutcome>),
}

/// What a person is asked in a round.
pub(crate) enum Question {
    /// To approve a call (a form with one yes/no field).
    Approval(ApprovalRequest),
    /// To open a URL (an upstream's OAuth consent), saying why.
    OpenUrl { message: String, url: String },
}

/// One evaluation's events, and the answer it waits for, between request rounds.
pub(crate) struct Conversation {
    /// Which caller runs which `lisp_eval` arguments: a retry must be the same caller sending
    /// the same.
    fingerprint: [u8; 32],
    events: mpsc::UnboundedReceiver<Event>,
    /// Who waits for the person's answer, and whether they were shown a URL (else a form).
    answer: Option<(oneshot::Sender<Decision>, bool)>,
}

/// The approver of an evaluation driven in rounds: it hands each approval to the rounds and
/// waits (suspended) for their answer.
struct Rounds {
    events: mpsc::UnboundedSender<Event>,
}

impl Approver for Rounds {
    fn approve(&self, request: ApprovalRequest, wait: Duration) -> DecisionFuture {
        self.ask(Question::Approval(request), "the approval request", wait)
    }

    fn open_url(&self, message: String, url: String, wait: Duration) -> DecisionFuture {
        self.ask(
            Question::OpenUrl { message, url },
            "the request to open a link",
            wait,
        )
    }
}

impl Rounds {
    /// Hands `question` (`what`, in a message) to the rounds and waits for the answer.
    fn ask(&self, question: Question, what: &'static str, wait: Duration) -> DecisionFuture {
        let (answer, answered) = oneshot::channel();
        let asked = self.events.send(Event::Ask(question, answer)).is_ok();
        Box::pin(async move {
            if !asked {
                return Decision::Unavailable("the client's request is gone".into());
            }
            match tokio::time::timeout(wait, answered).await {
                Ok(Ok(decision)) => decision,
                Ok(Err(_)) => Decision::Declined(
                    "the client did not come back with the person's answer".into(),
                ),
                Err(_) => Decision::Declined(format!(
                    "nobody answered {what} within {} s",
                    wait.as_secs()
                )),
            }
        })
    }
}

/// A new conversation for the `lisp_eval` call with `arguments`: the approver its evaluation
/// asks through, the sender it reports its outcome on, and the conversation the rounds read.
pub(crate) fn start(
    caller: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> (
    Arc<dyn Approver>,
    mpsc::UnboundedSender<Event>,
    Conversation,
) {
    let (tx, events) = mpsc::unbounded_channel();
    let conversation = Conversation {
        fingerprint: fingerprint(caller, arguments),
        events,
        answer: None,
    };
    (Arc::new(Rounds { events: tx.clone() }), tx, conversation)
}

fn fingerprint(caller: &str, arguments: &serde_json::Map<String, serde_json::Value>) -> [u8; 32] {
    let text = serde_json::Value::Object(arguments.clone()).to_string();
    let mut digest = Sha256::new();
    // The length first, so no caller name can run into the arguments.
    digest.update((caller.len() as u64).to_le_bytes());
    digest.update(caller.as_bytes());
    digest.update(text.as_bytes());
    digest.finalize().into()
}

/// What a round answers.
pub(crate) enum Round {
    /// The program's outcome.
    Done(Box<EvalOutcome>),
    /// Ask the person, and come back with `requestState`.
    InputRequired(InputRequiredResult),
}

impl Conversation {
    /// Hands the person's answer in a retry's `inputResponses` to the waiting call.
    fn answer(&mut self, responses: Option<&InputResponses>) {
        if let Some((waiting, url)) = self.answer.take() {
            // The call may have stopped waiting (its time ran out): then the answer is too late.
            let _ = waiting.send(decision(responses, url));
        }
    }
}

/// Conversations waiting for the client's next round, by `requestState`. Each is dropped when
/// its keep runs out, so a retry that never comes leaves nothing behind; the ones whose program
/// still runs are bounded by the admission slots their programs hold.
#[derive(Default)]
pub(crate) struct Parked {
    waiting: Arc<Mutex<HashMap<String, Conversation>>>,
}

/// Why a retry cannot continue a conversation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stale {
    /// No conversation has that `requestState` (it ended, expired, or lives on another replica).
    Unknown,
    /// The retry's arguments (or its caller) are not the ones the conversation runs.
    OtherArguments,
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stale::Unknown => {
                "this requestState belongs to no program waiting here (it finished, waited too \
                 long, or runs on another replica); send the program again"
            }
            Stale::OtherArguments => {
                "the retry's arguments differ from the program's that waits; a retry sends the \
                 same program, context and output_schema, as the same caller"
            }
        })
    }
}

impl Parked {
    /// The next round of `conversation`: its outcome, or an approval to ask for (the
    /// conversation is parked until the retry). `keep` is how long a parked conversation waits
    /// for its retry before it is dropped.
    pub(crate) async fn next(&self, mut conversation: Conversation, keep: Duration) -> Round {
        match conversation.events.recv().await {
            Some(Event::Done(outcome)) => Round::Done(outcome),
            Some(Event::Ask(question, answer)) => {
                let params = match question {
                    Question::Approval(request) => ElicitRequestParams::FormElicitationParams {
                        meta: None,
                        message: request.message(),
                        requested_schema: crate::server::elicit::form(),
                    },
                    Question::OpenUrl { message, url } => {
                        ElicitRequestParams::UrlElicitationParams {
                            meta: None,
                            message,
                            url,
                            elicitation_id: handle(),
                        }
                    }
                };
                let url = matches!(params, ElicitRequestParams::UrlElicitationParams { .. });
                conversation.answer = Some((answer, url));
                let state = handle();
                self.waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(state.clone(), conversation);
                self.drop_after(state.clone(), keep);
                let mut requests = InputRequests::new();
                requests.insert(
                    APPROVAL_KEY.to_string(),
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                );
                Round::InputRequired(InputRequiredResult::new(Some(requests), Some(state)))
            }
            // The evaluation task ended without a word: it was dropped (the process stops).
            None => Round::Done(Box::new(EvalOutcome::refused(
                crate::server::outcome::EvalError::host(
                    HostReason::InternalError,
                    "the evaluation stopped unexpectedly",
                ),
            ))),
        }
    }

    /// Drops the conversation parked as `state` once `keep` has passed, unless a retry took it.
    /// A state is never reused, so this cannot drop a later round's conversation.
    fn drop_after(&self, state: String, keep: Duration) {
        let waiting = Arc::downgrade(&self.waiting);
        // From now, not from when the task first runs.
        let until = tokio::time::Instant::now() + keep;
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            if let Some(waiting) = waiting.upgrade() {
                let gone = waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&state);
                // Dropped outside the lock: it may hold a large outcome.
                drop(gone);
            }
        });
    }

    /// The conversation a retry continues, with the person's answer handed to it.
    pub(crate) fn resume(
        &self,
        state: &str,
        caller: &str,
        arguments: &serde_json::Map<String, serde_json::Value>,
        responses: Option<&InputResponses>,
    ) -> Result<Conversation, Stale> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let Some(conversation) = waiting.get(state) else {
            return Err(Stale::Unknown);
        };
        if conversation.fingerprint != fingerprint(caller, arguments) {
            return Err(Stale::OtherArguments);
        }
        let mut conversation = waiting.remove(state).ok_or(Stale::Unknown)?;
        drop(waiting);
        conversation.answer(responses);
        Ok(conversation)
    }

    /// Conversations parked now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.lock().unwrap().len()
    }
}

/// The person's answer in a retry's `inputResponses`: only an accepted form that says
/// `approve: true` is a yes; a URL shown (`url`) was opened only when accepted.
fn decision(responses: Option<&InputResponses>, url: bool) -> Decision {
    let Some(answer) = responses.and_then(|r| r.get(APPROVAL_KEY)) else {
        return Decision::Declined("the client sent no answer to the request".into());
    };
    let action = answer
        .get("action")
        .cloned()
        .and_then(|a| serde_json::from_value::<ElicitationAction>(a).ok());
    match (action, url) {
        (Some(action), true) => crate::server::elicit::opened(action),
        (Some(action), false) => crate::server::elicit::decide(action, answer.get("content")),
        (None, _) => Decision::Declined("the client's answer was not an elicitation result".into()),
    }
}

/// A fresh, unguessable `requestState`.
fn handle() -> String {
    crate::call::writes::random_id()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(program: &str) -> serde_json::Map<String, serde_json::Value> {
        json!({"program": program}).as_object().unwrap().clone()
    }

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            tool: "obs/annotate".into(),
            effect: ptc_plan::Effect::Write,
            summary: String::new(),
            preview: "POST /x".into(),
            arguments: json!({}),
        }
    }

    fn responses(answer: serde_json::Value) -> InputResponses {
        InputResponses::from([(APPROVAL_KEY.to_string(), answer)])
    }

    /// A link to open (an upstream's OAuth consent) is asked in a round as a URL elicitation,
    /// and the retry's `accept` says the person went to it.
    #[tokio::test]
    async fn a_link_to_open_is_a_url_elicitation_answered_in_the_retry() {
        let parked = Parked::default();
        let (approver, _done, conversation) = start("alice", &args("(w)"));
        let url = "https://auth.example.com/authorize?state=s1";
        let waiting = tokio::spawn(approver.open_url(
            "consent to linear".into(),
            url.into(),
            Duration::from_secs(30),
        ));
        let Round::InputRequired(asked) = parked.next(conversation, Duration::from_secs(60)).await
        else {
            panic!("a round asking to open the link")
        };
        let wire = serde_json::to_value(&asked).unwrap();
        let params = &wire["inputRequests"][APPROVAL_KEY]["params"];
        assert_eq!(params["mode"], "url", "{wire}");
        assert_eq!(params["url"], url);
        assert_eq!(params["message"], "consent to linear");
        assert!(!params["elicitationId"].as_str().unwrap().is_empty());
        let state = asked.request_state.unwrap();
        let opened = responses(json!({"action": "accept"}));
        parked
            .resume(&state, "alice", &args("(w)"), Some(&opened))
            .unwrap();
        assert_eq!(waiting.await.unwrap(), Decision::Approved);
    }

    #[tokio::test]
    async fn an_approval_parks_the_conversation_until_the_retry_answers_it() {
        let parked = Parked::default();
        let (approver, done, conversation) = start("alice", &args("(w)"));
        let waiting = tokio::spawn(approver.approve(request(), Duration::from_secs(30)));
        let Round::InputRequired(asked) = parked.next(conversation, Duration::from_secs(60)).await
        else {
            panic!("an approval round")
        };
        let state = asked.request_state.clone().unwrap();
        assert_eq!(state.len(), 32);
        let wire = serde_json::to_value(&asked).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert_eq!(
            wire["inputRequests"][APPROVAL_KEY]["method"],
            "elicitation/create"
        );
        assert!(
            wire["inputRequests"][APPROVAL_KEY]["params"]["message"]
                .as_str()
                .unwrap()
                .contains("obs/annotate")
        );
        assert_eq!(parked.len(), 1);
        // Another program's retry, or an unknown state, cannot take it.
        let yes = responses(json!({"action": "accept", "content": {"approve": true}}));
        assert_eq!(
            parked
                .resume(&state, "alice", &args("(other)"), Some(&yes))
                .err(),
            Some(Stale::OtherArguments)
        );
        assert_eq!(
            parked
                .resume("nope", "alice", &args("(w)"), Some(&yes))
                .err(),
            Some(Stale::Unknown)
        );
        // Nor another caller with the same program.
        assert_eq!(
            parked
                .resume(&state, "mallory", &args("(w)"), Some(&yes))
                .err(),
            Some(Stale::OtherArguments)
        );
        let conversation = parked
            .resume(&state, "alice", &args("(w)"), Some(&yes))
            .unwrap();
        assert_eq!(parked.len(), 0);
        assert_eq!(waiting.await.unwrap(), Decision::Approved);
        done.send(Event::Done(Box::new(EvalOutcome::refused(
            crate::server::outcome::EvalError::host(
                crate::server::outcome::HostReason::InternalError,
                "finished",
            ),
        ))))
        .ok()
        .unwrap();
        assert!(matches!(
            parked.next(conversation, Duration::from_secs(60)).await,
            Round::Done(_)
        ));
        // A state is taken once.
        assert_eq!(
            parked
                .resume(&state, "alice", &args("(w)"), Some(&yes))
                .err(),
            Some(Stale::Unknown)
        );
    }

    /// Lets the tasks the clock woke run.
    async fn settle() {
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_that_never_comes_declines_and_the_conversation_is_dropped_at_its_keep() {
        let parked = Parked::default();
        let keep = Duration::from_secs(60);
        let (approver, _done, conversation) = start("alice", &args("(w)"));
        let waiting = tokio::spawn(approver.approve(request(), Duration::from_secs(1)));
        let Round::InputRequired(asked) = parked.next(conversation, keep).await else {
            panic!("an approval round")
        };
        // The paused clock runs on to the call's deadline: the call stops waiting.
        assert_eq!(
            waiting.await.unwrap(),
            Decision::Declined("nobody answered the approval request within 1 s".into())
        );
        // Another program parked meanwhile is kept for its own keep.
        let (approver, _done2, conversation) = start("alice", &args("(v)"));
        let _asking = tokio::spawn(approver.approve(request(), Duration::from_secs(90)));
        let Round::InputRequired(_) = parked.next(conversation, keep).await else {
            panic!("an approval round")
        };
        tokio::time::advance(keep - Duration::from_secs(1) - Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(parked.len(), 2, "both within their keep");
        tokio::time::advance(Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(parked.len(), 1, "the first is dropped at its keep");
        let yes = responses(json!({"action": "accept", "content": {"approve": true}}));
        assert_eq!(
            parked
                .resume(
                    asked.request_state.as_ref().unwrap(),
                    "alice",
                    &args("(w)"),
                    Some(&yes)
                )
                .err(),
            Some(Stale::Unknown)
        );
        // The second parked 1 s later, when the paused clock reached the first call's deadline.
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(parked.len(), 0, "and the second at its own");
    }

    #[test]
    fn a_stale_retry_says_what_to_do() {
        assert!(
            Stale::Unknown
                .to_string()
                .ends_with("send the program again")
        );
        assert!(
            Stale::OtherArguments
                .to_string()
                .starts_with("the retry's arguments differ")
        );
    }

    #[test]
    fn the_answer_in_the_retry() {
        let d = |v| decision(Some(&responses(v)), false);
        assert_eq!(
            d(json!({"action": "accept", "content": {"approve": true}})),
            Decision::Approved
        );
        assert_eq!(
            d(json!({"action": "accept", "content": {"approve": false}})),
            Decision::Declined("the person answered no".into())
        );
        assert_eq!(
            d(json!({"action": "decline"})),
            Decision::Declined("the person declined".into())
        );
        assert_eq!(
            d(json!({"action": "shrug"})),
            Decision::Declined("the client's answer was not an elicitation result".into())
        );
        for url in [false, true] {
            assert_eq!(
                decision(None, url),
                Decision::Declined("the client sent no answer to the request".into())
            );
            assert_eq!(
                decision(Some(&InputResponses::new()), url),
                Decision::Declined("the client sent no answer to the request".into())
            );
        }
    }

    /// A URL shown is opened only when the answer accepts it; no form content is looked for.
    #[test]
    fn the_answer_to_a_url_shown() {
        let d = |v| decision(Some(&responses(v)), true);
        assert_eq!(d(json!({"action": "accept"})), Decision::Approved);
        assert_eq!(
            d(json!({"action": "decline"})),
            Decision::Declined("the person declined to open it".into())
        );
        assert_eq!(
            d(json!({"action": "cancel"})),
            Decision::Declined("the person dismissed the request".into())
        );
    }
}
