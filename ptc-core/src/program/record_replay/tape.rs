//! The [`Tape`]: the one hook a run's host has for record and replay, and the [`TapeCall`] each
//! validated call is on.

use std::time::Instant;

use serde_json::{Map, Value as Json};

use super::{MAX_RECORDED_RESULT_BYTES, Outcome, Recorder, Replayed, Replayer, redact_map};
use crate::call::contract::{Reason, ToolError, ToolOutput};
use crate::call::upstreams::{Executed, Upstreams};
use crate::credentials::redact::Redactor;
use crate::program::run_report::ApprovalOutcome;

/// What a run does with its upstream calls besides making them.
#[derive(Clone, Default)]
pub enum Tape {
    /// Nothing.
    #[default]
    Off,
    /// Records each call.
    Record(Recorder),
    /// Answers each call from a recording.
    Replay(Replayer),
}

impl Tape {
    /// The tape's entry for a call that passed validation: a new record, or the recorded call
    /// it matches (a divergence, which stops the program, when none does).
    pub(crate) fn begin(
        &self,
        server: &str,
        tool: &str,
        args: &Map<String, Json>,
        redactor: &Redactor,
    ) -> Result<TapeCall, ToolError> {
        match self {
            Tape::Off => Ok(TapeCall::Off),
            Tape::Record(r) => Ok(TapeCall::Record(r.clone(), r.begin(server, tool, args))),
            Tape::Replay(r) => {
                let args = redact_map(redactor, args.clone());
                r.take(server, tool, &args).map(TapeCall::Replay)
            }
        }
    }
}

impl Tape {
    /// Replaying: a call whose validation failed because an MCP upstream's tools could not be
    /// listed, as the replay's error. A replay sends no call, but it checks each against the
    /// catalog, and an MCP server's tools are listed by asking it.
    pub(crate) fn unlisted(
        &self,
        upstreams: &Upstreams,
        server: &str,
        e: &ToolError,
    ) -> Option<ToolError> {
        let Tape::Replay(r) = self else {
            return None;
        };
        let entry = upstreams.catalog().server(server).ok()?;
        let validation = e.reason.is_programmer_fault()
            || matches!(e.reason, Reason::WriteDisabled | Reason::ToolChanged);
        if entry.transport == ptc_plan::TransportKind::Openapi || validation {
            return None;
        }
        Some(r.diverge(format!(
            "the program called a tool of MCP upstream `{server}`, whose tools could not be \
             listed: {} (a replay sends no call, but checks each against its upstream's tool \
             list, which it asks an MCP server for: start the server where the config says)",
            e.message
        )))
    }
}

/// One call's entry on the tape.
pub(crate) enum TapeCall {
    Off,
    Record(Recorder, usize),
    Replay(Replayed),
}

impl TapeCall {
    /// Replaying: the policy's refusal the recording has for this call.
    pub(crate) fn policy_refusal(&self) -> Option<ToolError> {
        let TapeCall::Replay(r) = self else {
            return None;
        };
        match &r.call.outcome {
            Outcome::NotSent {
                reason: Reason::Forbidden,
                message,
            } => Some(ToolError {
                reason: Reason::Forbidden,
                message: message.clone(),
            }),
            _ => None,
        }
    }

    /// Replaying: the decision the recording has for a call that needs approval (a divergence
    /// when it has none). `None` when not replaying: a person is asked.
    pub(crate) fn recorded_approval(&self) -> Option<Result<(), (ToolError, ApprovalOutcome)>> {
        let TapeCall::Replay(r) = self else {
            return None;
        };
        let call = &r.call;
        let refusal = |outcome| match &call.outcome {
            Outcome::NotSent { reason, message } => (
                ToolError {
                    reason: *reason,
                    message: message.clone(),
                },
                outcome,
            ),
            _ => (
                r.diverged("was refused approval, but has a result"),
                outcome,
            ),
        };
        Some(match call.approval {
            Some(ApprovalOutcome::Approved) => Ok(()),
            Some(o @ (ApprovalOutcome::Declined | ApprovalOutcome::Unavailable)) => Err(refusal(o)),
            None => Err((
                r.diverged("needs a person's approval, and the recording has no decision for it"),
                ApprovalOutcome::Unavailable,
            )),
        })
    }

    /// Recording: how the call's approval ended.
    pub(crate) fn approved(&self, outcome: ApprovalOutcome) {
        if let TapeCall::Record(r, i) = self {
            r.update(*i, |s| s.approval = Some(outcome));
        }
    }

    /// Replaying: the recorded answer, in place of sending the call.
    pub(crate) fn replayed(&self) -> Option<&Replayed> {
        match self {
            TapeCall::Replay(r) => Some(r),
            _ => None,
        }
    }

    /// Recording: what the upstream answered by `deadline` (the program's).
    pub(crate) fn executed(
        &self,
        result: &Result<Executed, ToolError>,
        deadline: Option<Instant>,
        redactor: &Redactor,
    ) {
        if let TapeCall::Record(r, i) = self {
            let outcome = match result {
                Ok(done) => recorded_output(&done.output, done.bytes, redactor),
                // The program's time ran out during the call: its replay waits for the
                // replay's deadline, so it stops the same way.
                Err(e)
                    if e.reason == Reason::Timeout
                        && deadline.is_some_and(|d| Instant::now() >= d) =>
                {
                    Outcome::Unfinished
                }
                Err(e) => Outcome::Error {
                    reason: e.reason,
                    message: e.message.clone(),
                },
            };
            r.update(*i, |s| s.finish(outcome));
        }
    }

    /// Recording: the call ended; a call refused before it was sent is recorded with its
    /// refusal.
    pub(crate) fn end<T>(&self, result: &Result<T, ToolError>) {
        if let (TapeCall::Record(r, i), Err(e)) = (self, result) {
            r.update(*i, |s| {
                if s.outcome.is_none() {
                    s.finish(Outcome::NotSent {
                        reason: e.reason,
                        message: e.message.clone(),
                    });
                }
            });
        }
    }
}

/// A result as the run file keeps it: capped, redacted.
pub(super) fn recorded_output(output: &ToolOutput, bytes: u64, redactor: &Redactor) -> Outcome {
    let (text, is_json) = match output {
        ToolOutput::Empty => return Outcome::Empty { bytes },
        ToolOutput::Text(t) => (std::borrow::Cow::Borrowed(t.as_str()), false),
        ToolOutput::Json(b) => (String::from_utf8_lossy(b), true),
    };
    // Redacted before it is cut, so no secret is kept in part.
    let text = redactor.redact(&text);
    let whole = match output {
        ToolOutput::Json(b) => std::str::from_utf8(b).is_ok(),
        _ => true,
    };
    if text.len() > MAX_RECORDED_RESULT_BYTES || !whole {
        let mut end = text.len().min(MAX_RECORDED_RESULT_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        return Outcome::Truncated {
            bytes: match output {
                ToolOutput::Json(b) => b.len() as u64,
                _ => text.len() as u64,
            },
            start: text[..end].to_string(),
        };
    }
    if is_json {
        Outcome::Json {
            json: text.into_owned(),
            bytes,
        }
    } else {
        Outcome::Text {
            text: text.into_owned(),
            bytes,
        }
    }
}
