//! The run file: one recorded program run as JSON (`ptc_run: 1`): the program, its context,
//! the settings it ran with, every upstream call with its capped, redacted result, and the
//! answer; and how two answers differ.

use std::path::Path;

use ptc_lisp::{Limits, LispError, Value};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::call::contract::Reason;
use crate::call::response_check::ResponseCheck;
use crate::call::upstreams::{CatalogLoad, StartOptions, StartSettings};
use crate::call::writes::WriteGate;
use crate::credentials::redact::Redactor;
use crate::program::limits::Budgets;
use crate::program::run_report::ApprovalOutcome;

use super::{bounded, redact, redact_json};

/// The run file format this build writes and reads.
pub const FORMAT: u32 = 1;

/// The most bytes of one call's result a run file keeps (1 MiB). A longer result keeps its first
/// bytes and is marked `truncated`; replaying the call is then an error naming it.
pub const MAX_RECORDED_RESULT_BYTES: usize = 1 << 20;

/// One recorded program run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    /// [`FORMAT`]; a file of another format is refused.
    pub format: u32,
    /// The version of ptc that recorded it.
    pub ptc_version: String,
    /// The program text.
    pub program: String,
    /// The declared program this run was, when it was called as its tool (`serve
    /// --record-dir`); a run of `lisp_eval` or `eval` has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The program's context (`data/<key>`) as JSON text, or `None`.
    pub context: Option<String>,
    /// The limits and start-up settings the program ran under; a replay runs under the same.
    pub settings: Settings,
    /// Every upstream call that passed validation, in the order the program made them.
    pub calls: Vec<RecordedCall>,
    /// What the program printed (redacted).
    pub prints: String,
    /// The program's answer.
    pub answer: Answer,
}

/// What a run's outcome depends on besides its program, context and calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Wall-clock limit of the program, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Memory the program may allocate, in bytes.
    pub memory_bytes: u64,
    /// Upstream calls per program.
    pub max_calls: u64,
    /// Discovery operations per program.
    pub max_discovery: u64,
    /// Upstream bytes per program.
    pub max_upstream_bytes: u64,
    /// Whether allow-listed writes could run (the process's write gate).
    pub allow_writes: bool,
    /// How answers were checked against their output schemas (`off`, `sampled`, `full`).
    pub response_check: ResponseCheck,
    /// Whether a drifted answer failed its call.
    pub strict_responses: bool,
}

impl Settings {
    /// The settings of a run under `limits` in a process started with `start` (the budgets are
    /// the host's to note, see [`Recorder::note_budgets`](super::Recorder::note_budgets)).
    pub fn new(limits: &Limits, start: StartSettings) -> Self {
        Settings {
            timeout_ms: limits.timeout.map(|t| t.as_millis() as u64),
            memory_bytes: limits.max_memory_bytes,
            max_calls: 0,
            max_discovery: 0,
            max_upstream_bytes: 0,
            allow_writes: start.writes == WriteGate::Open,
            response_check: start.response_check,
            strict_responses: start.strict_responses,
        }
    }

    /// The budgets to replay under: the recorded run's (its approval wait does not matter: a
    /// replay asks nobody).
    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_calls: self.max_calls,
            max_discovery: self.max_discovery,
            max_bytes: self.max_upstream_bytes,
            ..Budgets::default()
        }
    }

    /// The interpreter limits to replay under.
    pub fn limits(&self) -> Limits {
        Limits {
            timeout: self.timeout_ms.map(std::time::Duration::from_millis),
            max_memory_bytes: self.memory_bytes,
            ..Limits::default()
        }
    }

    /// Start options for a replay: the recording's write gate and response checking, and no
    /// upstream contacted at start.
    pub fn start_options(&self) -> StartOptions {
        let start = StartSettings {
            writes: if self.allow_writes {
                WriteGate::Open
            } else {
                WriteGate::Closed
            },
            response_check: self.response_check,
            strict_responses: self.strict_responses,
            // A replay contacts no upstream.
            consent: Default::default(),
        };
        StartOptions {
            catalog: CatalogLoad::OnFirstUse,
            ..start.options()
        }
    }
}

/// One upstream call of a recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// The upstream.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The validated arguments (defaults applied, redacted).
    pub args: Map<String, Json>,
    /// The person's decision, for a call that needed one: `approved`, `declined` or
    /// `unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalOutcome>,
    /// What came of it.
    pub outcome: Outcome,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
}

/// What came of one recorded call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// A JSON answer, as the text the program decoded.
    Json {
        /// The JSON text.
        json: String,
        /// The bytes the call counted against the program's budget.
        bytes: u64,
    },
    /// A text answer.
    Text {
        /// The text.
        text: String,
        /// The bytes counted.
        bytes: u64,
    },
    /// An empty answer.
    Empty {
        /// The bytes counted.
        bytes: u64,
    },
    /// The call was sent and failed.
    Error {
        /// The reason (`not_found`, `timeout`, ...).
        reason: Reason,
        /// The message the program got.
        message: String,
    },
    /// The call was refused before anything was sent (the policy, a budget, an approval).
    NotSent {
        /// The reason.
        reason: Reason,
        /// The message the program got.
        message: String,
    },
    /// An answer longer than [`MAX_RECORDED_RESULT_BYTES`]: its first bytes only.
    Truncated {
        /// The answer's whole size, in bytes.
        bytes: u64,
        /// Its first bytes (cut at a character boundary).
        start: String,
    },
    /// The program's time ran out (or it was cancelled) while the call was in flight.
    Unfinished,
}

/// A program's answer: its value, or its error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// The program's value.
    Value {
        /// As `eval` prints it (Clojure syntax): what "same answer" compares.
        text: String,
        /// As JSON, when it has a JSON form (for reading; not compared).
        json: Option<Json>,
    },
    /// The program failed.
    Error {
        /// The reason (`timeout`, `fail`, ...).
        #[serde(with = "lisp_reason")]
        reason: ptc_lisp::Reason,
        /// The error as `eval` prints it.
        message: String,
    },
}

impl Answer {
    /// The answer of a run, redacted.
    pub fn of(result: &Result<Value, LispError>, redactor: &Redactor) -> Answer {
        match result {
            Ok(v) => Answer::Value {
                text: redactor.redact(&v.to_string()).into_owned(),
                json: v
                    .to_json_string()
                    .ok()
                    .and_then(|s| serde_json::from_str(&redactor.redact(&s)).ok()),
            },
            Err(e) => Answer::Error {
                reason: e.reason(),
                message: redactor.redact(&e.to_string()).into_owned(),
            },
        }
    }

    pub(super) fn redacted(self, r: &Redactor) -> Answer {
        match self {
            Answer::Value { text, json } => Answer::Value {
                text: redact(r, &text),
                json: json.map(|j| redact_json(r, j)),
            },
            Answer::Error { reason, message } => Answer::Error {
                reason,
                message: redact(r, &message),
            },
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Answer::Value { text, .. } => format!("the value {}", bounded(text, 400)),
            Answer::Error { message, .. } => format!("the error {}", bounded(message, 400)),
        }
    }
}

/// What a replay found that differs from its recording, if anything: the answer first, then
/// what the program printed.
pub fn answer_difference(
    file: &RunFile,
    replayed: &Answer,
    replayed_prints: &str,
) -> Option<String> {
    if &file.answer != replayed {
        let same_kind = matches!(
            (&file.answer, replayed),
            (Answer::Value { text: a, .. }, Answer::Value { text: b, .. }) if a == b
        );
        // The JSON form is for reading: equal texts are the same answer.
        if !same_kind {
            return Some(format!(
                "the answer differs: the recording has {}, the replay gave {}",
                file.answer.describe(),
                replayed.describe()
            ));
        }
    }
    if file.prints != replayed_prints {
        return Some(format!(
            "the answer is the same, but the printed output differs: the recording printed {:?}, \
             the replay {:?}",
            bounded(&file.prints, 300),
            bounded(replayed_prints, 300)
        ));
    }
    None
}

impl RunFile {
    /// Reads and checks a run file: a file that cannot be read, is not JSON, is of another
    /// format or is malformed is an error naming the file and what is wrong.
    pub fn read(path: &Path) -> Result<RunFile, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// [`RunFile::read`] of `bytes`; `origin` names them in errors.
    pub fn parse(bytes: &[u8], origin: &str) -> Result<RunFile, String> {
        let json: Json = serde_json::from_slice(bytes)
            .map_err(|e| format!("{origin} is not a run file: it is not JSON ({e})"))?;
        match json.get("format") {
            Some(Json::Number(n)) if n.as_u64() == Some(u64::from(FORMAT)) => {}
            Some(other) => {
                let recorded_by = json
                    .get("ptc_version")
                    .and_then(Json::as_str)
                    .map_or(String::new(), |v| format!(" (recorded by ptc {v})"));
                return Err(format!(
                    "{origin} is a run file of format {other}{recorded_by}; this ptc ({}) reads \
                     format {FORMAT} only: replay it with the ptc that recorded it, or record it \
                     again",
                    env!("CARGO_PKG_VERSION")
                ));
            }
            None => {
                return Err(format!(
                    "{origin} is not a run file: it has no \"format\" field"
                ));
            }
        }
        // The path names the field a bad value is in (`calls[2].approval: unknown approval`).
        serde_path_to_error::deserialize(json)
            .map_err(|e| format!("{origin} is not a valid run file of format {FORMAT}: {e}"))
    }

    /// The file as pretty JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, String> {
        let mut out = serde_json::to_vec_pretty(self)
            .map_err(|e| format!("cannot encode the run file: {e}"))?;
        out.push(b'\n');
        Ok(out)
    }

    /// The context as program values, decoded as the recording decoded it.
    pub fn context_value(&self, limits: &Limits) -> Result<Option<Value>, String> {
        self.context
            .as_deref()
            .map(|text| {
                Value::from_json_bytes(text.as_bytes(), limits)
                    .map_err(|e| format!("the recorded context cannot be decoded: {e}"))
            })
            .transpose()
    }
}

/// A program's reason as its documented name (`timeout`, `fail`, ...), in a run file's answer.
mod lisp_reason {
    use ptc_lisp::Reason;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(reason: &Reason, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(reason.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        let name = String::deserialize(d)?;
        Reason::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!("unknown reason `{name}` of a program's error"))
        })
    }
}
