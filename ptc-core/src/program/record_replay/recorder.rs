//! The [`Recorder`]: what a recording run writes on its tape, in the order the calls were made.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Map, Value as Json};

use super::{Answer, FORMAT, Outcome, RecordedCall, RunFile, Settings, redact, redact_map};
use crate::call::upstreams::Upstreams;
use crate::program::limits::Budgets;
use crate::program::run_report::ApprovalOutcome;

/// Records a run's calls as they are made (a shared handle: the host writes, the caller reads).
#[derive(Clone)]
pub struct Recorder(Arc<Mutex<Recording>>);

pub(super) struct Recording {
    pub(super) settings: Settings,
    pub(super) calls: Vec<Slot>,
}

/// A call being recorded.
pub(super) struct Slot {
    pub(super) server: String,
    pub(super) tool: String,
    pub(super) args: Map<String, Json>,
    pub(super) approval: Option<ApprovalOutcome>,
    pub(super) outcome: Option<Outcome>,
    pub(super) started: Instant,
    pub(super) duration_ms: u64,
}

impl Slot {
    pub(super) fn finish(&mut self, outcome: Outcome) {
        self.outcome = Some(outcome);
        self.duration_ms = self.started.elapsed().as_millis() as u64;
    }
}

impl Recorder {
    /// A recorder for a run under `settings`.
    pub fn new(settings: Settings) -> Self {
        Recorder(Arc::new(Mutex::new(Recording {
            settings,
            calls: Vec::new(),
        })))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Recording> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The run's budgets, as its host has them (a policy may lower the calls per program).
    pub fn note_budgets(&self, budgets: &Budgets) {
        let mut r = self.lock();
        r.settings.max_calls = budgets.max_calls;
        r.settings.max_discovery = budgets.max_discovery;
        r.settings.max_upstream_bytes = budgets.max_bytes;
    }

    pub(super) fn begin(&self, server: &str, tool: &str, args: &Map<String, Json>) -> usize {
        let mut r = self.lock();
        r.calls.push(Slot {
            server: server.to_string(),
            tool: tool.to_string(),
            args: args.clone(),
            approval: None,
            outcome: None,
            started: Instant::now(),
            duration_ms: 0,
        });
        r.calls.len() - 1
    }

    pub(super) fn update(&self, i: usize, f: impl FnOnce(&mut Slot)) {
        if let Some(slot) = self.lock().calls.get_mut(i) {
            f(slot);
        }
    }

    /// The calls so far, in the order they were made.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.lock()
            .calls
            .iter()
            .map(|s| RecordedCall {
                server: s.server.clone(),
                tool: s.tool.clone(),
                args: s.args.clone(),
                approval: s.approval,
                outcome: s.outcome.clone().unwrap_or(Outcome::Unfinished),
                duration_ms: if s.outcome.is_some() {
                    s.duration_ms
                } else {
                    s.started.elapsed().as_millis() as u64
                },
            })
            .collect()
    }

    /// The run file of the finished run. Every text in it passes `upstreams`' redactor, after
    /// the values of the env and file credentials are read (so a secret no call used is masked
    /// too; a command's output is known once a call used it).
    pub fn run_file(
        &self,
        upstreams: &Upstreams,
        program: &str,
        context: Option<&str>,
        prints: &str,
        answer: Answer,
    ) -> RunFile {
        let r = upstreams.redactor();
        register_credentials(upstreams);
        let calls = self
            .calls()
            .into_iter()
            .map(|c| RecordedCall {
                args: redact_map(r, c.args),
                outcome: match c.outcome {
                    Outcome::Json { json, bytes } => Outcome::Json {
                        json: redact(r, &json),
                        bytes,
                    },
                    Outcome::Text { text, bytes } => Outcome::Text {
                        text: redact(r, &text),
                        bytes,
                    },
                    Outcome::Error { reason, message } => Outcome::Error {
                        reason,
                        message: redact(r, &message),
                    },
                    Outcome::NotSent { reason, message } => Outcome::NotSent {
                        reason,
                        message: redact(r, &message),
                    },
                    Outcome::Truncated { bytes, start } => Outcome::Truncated {
                        bytes,
                        start: redact(r, &start),
                    },
                    other @ (Outcome::Empty { .. } | Outcome::Unfinished) => other,
                },
                ..c
            })
            .collect();
        RunFile {
            format: FORMAT,
            ptc_version: env!("CARGO_PKG_VERSION").to_string(),
            program: redact(r, program),
            tool: None,
            context: context.map(|c| redact(r, c)),
            settings: self.lock().settings.clone(),
            calls,
            prints: redact(r, prints),
            answer: answer.redacted(r),
        }
    }
}

/// Registers the current values of the plan's env and file credentials with its redactor.
pub(super) fn register_credentials(upstreams: &Upstreams) {
    for c in &upstreams.plan().credentials {
        if matches!(
            c.source,
            ptc_plan::CredentialSource::Env { .. } | ptc_plan::CredentialSource::File { .. }
        ) && let Ok(secret) =
            crate::credentials::binding::resolve(c, &ptc_plan::Secrets::default())
        {
            crate::credentials::binding::register(upstreams.redactor(), &secret);
        }
    }
}
