//! The [`Replayer`]: a recording's calls answering a run's calls, in order, and what diverged.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Map, Value as Json};

use super::{
    MAX_RECORDED_RESULT_BYTES, Outcome, RecordedCall, call_text, differing_keys, same_args,
};
use crate::call::contract::{Reason, ToolError, ToolOutput};
use crate::call::upstreams::Executed;

/// Answers a run's calls from a recording (a shared handle: the host asks, the caller reads
/// what diverged).
#[derive(Clone)]
pub struct Replayer(Arc<Mutex<Replay>>);

pub(super) struct Replay {
    recorded: Vec<Arc<RecordedCall>>,
    used: Vec<bool>,
    /// Calls the program made so far.
    made: usize,
    /// The first divergence met.
    divergence: Option<String>,
}

/// A program's call matched to its recorded call.
pub(crate) struct Replayed {
    /// The program's call number (1-based, in the order the replay made them).
    pub(super) number: usize,
    /// The recorded call's number (1-based).
    pub(super) recorded: usize,
    pub(super) call: Arc<RecordedCall>,
    pub(super) replayer: Replayer,
}

impl Replayed {
    /// A divergence about this call (`what` it did): noted as the replay's, and the error that
    /// stops the program.
    pub(super) fn diverged(&self, what: &str) -> ToolError {
        self.replayer.diverge(format!(
            "call {} ({}, recorded as call {}) {what}",
            self.number,
            call_text(&self.call.server, &self.call.tool, &self.call.args),
            self.recorded
        ))
    }

    /// The recorded answer. A call that was in flight when the recorded program's time ran out
    /// waits until the replay's deadline and times out there, as the call did, so the replay
    /// stops as the recording did.
    pub(crate) async fn answer(&self, deadline: Option<Instant>) -> Result<Executed, ToolError> {
        let ok = |output, bytes| Ok(Executed { output, bytes });
        match &self.call.outcome {
            Outcome::Json { json, bytes } => ok(ToolOutput::Json(json.as_bytes().to_vec()), *bytes),
            Outcome::Text { text, bytes } => ok(ToolOutput::Text(text.clone()), *bytes),
            Outcome::Empty { bytes } => ok(ToolOutput::Empty, *bytes),
            Outcome::Error { reason, message } => Err(ToolError {
                reason: *reason,
                message: message.clone(),
            }),
            Outcome::NotSent { reason, message } => Err(self.diverged(&format!(
                "is sent by the replay, but the recording did not send it ({reason}: {message})"
            ))),
            Outcome::Truncated { bytes, .. } => Err(self.diverged(&format!(
                "cannot be replayed: its result was {bytes} bytes, more than the \
                 {MAX_RECORDED_RESULT_BYTES} a run file keeps, so the recording has only its \
                 start"
            ))),
            Outcome::Unfinished if let Some(d) = deadline => {
                tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await;
                Err(ToolError {
                    reason: Reason::Timeout,
                    message: format!(
                        "{}/{}: the program's time ran out during the call",
                        self.call.server, self.call.tool
                    ),
                })
            }
            Outcome::Unfinished => Err(self.diverged(
                "was still in flight when the recorded program stopped, and this replay has no \
                 time limit to stop at",
            )),
        }
    }
}

impl Replayer {
    /// A replayer of `calls`.
    pub fn new(calls: &[RecordedCall]) -> Self {
        Replayer(Arc::new(Mutex::new(Replay {
            recorded: calls.iter().cloned().map(Arc::new).collect(),
            used: vec![false; calls.len()],
            made: 0,
            divergence: None,
        })))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Replay> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes `message` (when it is the first divergence) and returns the error that stops the
    /// program.
    pub(super) fn diverge(&self, message: String) -> ToolError {
        let mut r = self.lock();
        if r.divergence.is_none() {
            r.divergence = Some(message.clone());
        }
        // A programmer fault's reason: the host raises it, which ends the program.
        ToolError {
            reason: Reason::InvalidArgs,
            message: format!("replay diverged: {message}"),
        }
    }

    /// Matches the program's next call to the first recorded call not yet used with the same
    /// upstream, tool and arguments (`pmap` may make calls in another order than recorded).
    pub(crate) fn take(
        &self,
        server: &str,
        tool: &str,
        args: &Map<String, Json>,
    ) -> Result<Replayed, ToolError> {
        let mut r = self.lock();
        r.made += 1;
        let number = r.made;
        let found = (0..r.recorded.len()).find(|&i| {
            let c = &r.recorded[i];
            !r.used[i] && c.server == server && c.tool == tool && same_args(&c.args, args)
        });
        if let Some(i) = found {
            r.used[i] = true;
            return Ok(Replayed {
                number,
                recorded: i + 1,
                call: r.recorded[i].clone(),
                replayer: self.clone(),
            });
        }
        let unused = |same_tool: bool| {
            (0..r.recorded.len()).find(|&i| {
                let c = &r.recorded[i];
                !r.used[i] && (!same_tool || (c.server == server && c.tool == tool))
            })
        };
        let program_call = call_text(server, tool, args);
        let message = match unused(true).or_else(|| unused(false)) {
            None => format!(
                "call {number}: the program called {program_call}, one more than the {} calls \
                 recorded",
                r.recorded.len()
            ),
            Some(i) => {
                let c = &r.recorded[i];
                let differs = if c.server == server && c.tool == tool {
                    format!(
                        " (the arguments differ at {})",
                        differing_keys(&c.args, args)
                    )
                } else {
                    String::new()
                };
                format!(
                    "call {number}: the program called {program_call}, which the recording does \
                     not have; the nearest recorded call not yet used is call {}: {}{differs}",
                    i + 1,
                    call_text(&c.server, &c.tool, &c.args)
                )
            }
        };
        drop(r);
        Err(self.diverge(message))
    }

    /// The first divergence the run met: a call the recording does not have, or one it cannot
    /// answer.
    pub fn divergence(&self) -> Option<String> {
        self.lock().divergence.clone()
    }

    /// The recorded calls the program did not make, as a divergence.
    pub fn unused(&self) -> Option<String> {
        let r = self.lock();
        let left: Vec<String> = (0..r.recorded.len())
            .filter(|&i| !r.used[i])
            .map(|i| {
                let c = &r.recorded[i];
                format!("call {}: {}", i + 1, call_text(&c.server, &c.tool, &c.args))
            })
            .collect();
        match left.len() {
            0 => None,
            1 => Some(format!(
                "the recording has 1 call the program did not make: {}",
                left[0]
            )),
            n => Some(format!(
                "the recording has {n} calls the program did not make: {}",
                left.join("; ")
            )),
        }
    }

    /// Calls the program made so far.
    pub fn calls_made(&self) -> usize {
        self.lock().made
    }
}
