//! What one evaluation was asked and what it answered: the types the evaluator produces and the
//! envelope, the audit line and the host commands read.

use std::sync::Arc;
use std::time::Duration;

use ptc_lisp::Pos;
use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::credentials::identity::Caller;
use crate::program::run_report::RunRecords;

/// What a client sent to `lisp_eval`.
#[derive(Clone, Debug, Default)]
pub struct EvalRequest {
    /// The PTC-Lisp program.
    pub program: String,
    /// A JSON object whose keys the program reads as `data/<key>`.
    pub context: Option<Map<String, Json>>,
    /// A JSON Schema the result must satisfy.
    pub output_schema: Option<Json>,
    /// Who sent it (the transport's authentication says; `local` by default).
    pub caller: Arc<Caller>,
    /// The session whose definitions the program gets and leaves, when the deployment keeps
    /// sessions.
    pub session: Option<String>,
    /// The caller's trace context (`_meta` or the HTTP headers), which the evaluation's span
    /// continues when traces are on.
    pub trace: Option<crate::telemetry::TraceParent>,
    /// The declared program this runs, when the request called one as its tool (the audit
    /// line, the span and the metrics name it).
    pub tool: Option<String>,
    /// Whose computing time the program counts to in the evaluation threads' fair order: the
    /// client's MCP session where it has one (agents may share one identity); the caller's
    /// subject when unset.
    pub party: Option<String>,
}

/// A successful program's value.
#[derive(Clone, Debug)]
pub struct EvalValue {
    /// The value in Clojure syntax (unbounded; the envelope bounds it).
    pub text: String,
    /// The value as JSON (`None` when it has no JSON form, e.g. a function).
    pub json: Option<Json>,
}

/// Why an evaluation produced no value.
#[derive(Clone, Debug)]
pub struct EvalError {
    /// The typed reason: a PTC-Lisp reason (`type_error`, `timeout`, `fail`, ...) or a host one
    /// (`busy`, `invalid_request`, `output_mismatch`, `cancelled`).
    pub reason: EvalReason,
    /// What went wrong and, where there is one, the fix (redacted).
    pub message: String,
    /// Where in the program.
    pub position: Option<Pos>,
    /// The value a `(fail v)` carried, as JSON.
    pub value: Option<Box<Json>>,
}

/// Why an evaluation produced no value: the program's own reason, or the host's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalReason {
    /// The program failed.
    Program(ptc_lisp::Reason),
    /// The host refused or ended it.
    Host(HostReason),
}

impl EvalReason {
    /// The reason as replies, audit lines, traces and metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EvalReason::Program(r) => r.as_str(),
            EvalReason::Host(r) => r.as_str(),
        }
    }
}

impl std::fmt::Display for EvalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the host, not the program, refused or ended an evaluation: the `reason` of those
/// replies, beside the PTC-Lisp ones ([`ptc_lisp::Reason`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostReason {
    /// No turn within the queue's wait, the queue full, or the host shutting down.
    Busy,
    /// The client cancelled the request.
    Cancelled,
    /// The caller's policy lets it run nothing.
    Forbidden,
    /// A fault of the host's own.
    InternalError,
    /// The request itself is wrong (no program, too large, a bad context or session name).
    InvalidRequest,
    /// The answer does not fit the declared output.
    OutputMismatch,
    /// The caller is past its programs per minute.
    RateLimited,
    /// The session store cannot be reached.
    SessionUnavailable,
    /// The session's state is in a form this host cannot read.
    SessionUnreadable,
}

impl HostReason {
    /// Every host reason.
    pub const ALL: [HostReason; 9] = [
        HostReason::Busy,
        HostReason::Cancelled,
        HostReason::Forbidden,
        HostReason::InternalError,
        HostReason::InvalidRequest,
        HostReason::OutputMismatch,
        HostReason::RateLimited,
        HostReason::SessionUnavailable,
        HostReason::SessionUnreadable,
    ];

    /// The reason as replies, audit lines and metrics spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            HostReason::Busy => "busy",
            HostReason::Cancelled => "cancelled",
            HostReason::Forbidden => "forbidden",
            HostReason::InternalError => "internal_error",
            HostReason::InvalidRequest => "invalid_request",
            HostReason::OutputMismatch => "output_mismatch",
            HostReason::RateLimited => "rate_limited",
            HostReason::SessionUnavailable => "session_unavailable",
            HostReason::SessionUnreadable => "session_unreadable",
        }
    }
}

impl EvalError {
    /// An error of the host's own (no position, no fail value).
    pub(crate) fn host(reason: HostReason, message: impl Into<String>) -> Self {
        EvalError {
            reason: EvalReason::Host(reason),
            message: message.into(),
            position: None,
            value: None,
        }
    }
}

/// Everything one evaluation produced.
#[derive(Clone, Debug)]
pub struct EvalOutcome {
    /// The value or the error.
    pub result: Result<EvalValue, EvalError>,
    /// What the program printed (redacted).
    pub prints: String,
    /// Upstream calls and payload metrics.
    pub records: RunRecords,
    /// Wall-clock time from admission to the answer.
    pub duration: Duration,
    /// The caller's subject (empty for a request refused before its caller was known).
    pub caller: String,
    /// What the session kept, when the program ran in one.
    pub session: Option<SessionReport>,
    /// The declared program that ran, when the request called one as its tool.
    pub tool: Option<String>,
}

impl EvalOutcome {
    /// An evaluation refused before it ran.
    pub(crate) fn refused(error: EvalError) -> Self {
        EvalOutcome {
            result: Err(error),
            prints: String::new(),
            records: RunRecords::new(Vec::new(), 0),
            duration: Duration::ZERO,
            caller: String::new(),
            session: None,
            tool: None,
        }
    }
}

/// What the reply says of the session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionReport {
    /// The session's name.
    pub name: String,
    /// Definitions kept for the next program.
    pub kept: Vec<String>,
    /// Definitions that cannot be kept, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_kept: Vec<NotKept>,
    /// Bytes of the saved state.
    pub bytes: usize,
    /// Whether the state was saved; when not, why (the session keeps what it had).
    pub saved: bool,
    /// Why it was not saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A definition the session could not keep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotKept {
    /// Its name.
    pub name: String,
    /// Why.
    pub why: String,
}
