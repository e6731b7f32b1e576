//! The PTC-Lisp host: `tool/call`, `tool/servers` and upstream discovery over [`Upstreams`],
//! with per-program budgets and records.
//!
//! A [`ProgramHost`] serves one program run: its counters are the run's budgets and its records
//! are the run's `upstream_calls`. Upstream I/O runs as a task on the tokio runtime it was given,
//! and the program waits for it through [`CallContext::wait`]: driven by `eval_async`, a program
//! waiting on an upstream is suspended and holds no thread. `pmap` branches suspend together,
//! so their calls overlap.
//!
//! Split by concern: `calls` (one upstream call: budgets, the tape, the answer and its
//! records), `pages` (`tool/pages`), `discovery` (`tool/servers`, `dir`, `doc`, `meta`,
//! `apropos`, `tool/search`) and `approvals` (asking a person).

mod approvals;
mod calls;
mod discovery;
mod functions;
mod pages;

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use ptc_lisp::{CallContext, Discovery, Host, HostError, HostValue, Value};

use crate::call::approval::{Approver, Nobody};
use crate::call::contract::{Reason, ToolError};
use crate::call::form::FormError;
use crate::call::upstreams::Upstreams;
use crate::call::writes::{IdempotencyKey, MutationState, RunId};
use crate::catalog::ServerEntry;
use crate::catalog::policy::Grant;
use crate::credentials::identity::Caller;
use crate::program::limits::Budgets;
use crate::program::record_replay::Tape;
use crate::program::run_report::{RunRecords, UpstreamCall, WriteRecord};
use approvals::ByWebhook;

/// Every raised (programmer-fault) error is built here, so the reason type has one home.
fn fault(message: impl Into<String>) -> HostError {
    HostError::new(ptc_lisp::Reason::RuntimeError, message)
}

/// A programmer fault the executor found, raised with the matching program-error reason.
fn raised(e: &ToolError) -> HostError {
    let reason = match e.reason {
        Reason::UnknownServer => ptc_lisp::Reason::UnknownServer,
        Reason::UnknownTool => ptc_lisp::Reason::UnknownTool,
        Reason::InvalidArgs => ptc_lisp::Reason::InvalidArgs,
        _ => ptc_lisp::Reason::RuntimeError,
    };
    HostError::new(reason, format!("tool/call: {}", e.message))
}

fn kw(s: &str) -> Value {
    Value::keyword(s)
}

/// What an answer was, as a call's `:value_kind` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ValueKind {
    /// JSON, decoded (the only kind a result path selects from and a response check reads).
    Json,
    /// Text that is not JSON.
    Text,
    /// No content.
    None,
}

impl ValueKind {
    /// The keyword's name: `json`, `text`, `none`.
    fn as_str(self) -> &'static str {
        match self {
            ValueKind::Json => "json",
            ValueKind::Text => "text",
            ValueKind::None => "none",
        }
    }
}

/// `{:ok true :value v :value_kind kind}`, with `:mutation_state` for a write.
fn ok_map(value: Value, kind: ValueKind, mutation: Option<MutationState>) -> Value {
    let mut entries = vec![
        (kw("ok"), Value::Bool(true)),
        (kw("value"), value),
        (kw("value_kind"), kw(kind.as_str())),
    ];
    if let Some(m) = mutation {
        entries.push((kw("mutation_state"), kw(m.as_str())));
    }
    Value::map_from(entries)
}

/// `{:ok false :reason reason :message message}`, with `:mutation_state` for a write.
fn err_map(reason: Reason, message: &str, mutation: Option<MutationState>) -> Value {
    let mut entries = vec![
        (kw("ok"), Value::Bool(false)),
        (kw("reason"), kw(reason.as_str())),
        (kw("message"), Value::str(message)),
    ];
    if let Some(m) = mutation {
        entries.push((kw("mutation_state"), kw(m.as_str())));
    }
    Value::map_from(entries)
}

/// The host of one program run.
pub struct ProgramHost {
    runtime: tokio::runtime::Handle,
    run: Arc<RunState>,
    /// The span the run's calls are children of: the one current when the host was made (the
    /// evaluation's), when traces are on.
    trace: Option<crate::telemetry::Parent>,
}

/// What the run's upstream tasks share with it: its budgets and what it spent.
struct RunState {
    upstreams: Arc<Upstreams>,
    budgets: Budgets,
    calls: AtomicU64,
    discovery: AtomicU64,
    bytes: AtomicU64,
    records: Mutex<Vec<UpstreamCall>>,
    /// Who approves calls that need a person.
    approver: Arc<dyn Approver>,
    /// This run's identity in its writes' idempotency keys.
    run_id: RunId,
    /// Writes of this run whose outcome is unknown: not sent again.
    indeterminate: Mutex<HashSet<IdempotencyKey>>,
    /// Who the run is for: per-caller credentials read its secret.
    caller: Arc<Caller>,
    /// What the run's caller may reach: discovery shows only that, and calls of anything else
    /// are refused before a request.
    grant: Grant,
    /// Records the run's calls, or answers them from a recording (off when unset).
    tape: std::sync::OnceLock<Tape>,
    /// Who is asked when an upstream needs the caller's OAuth consent (unset: the process's).
    consent: std::sync::OnceLock<Arc<dyn crate::credentials::upstream_oauth::Consent>>,
}

impl RunState {
    /// Call options for this run's caller: their credentials, and who is asked for their
    /// consent.
    fn on_behalf(&self) -> crate::call::upstreams::CallOptions {
        crate::call::upstreams::CallOptions {
            caller: Some(self.caller.clone()),
            consent: self.consent.get().cloned(),
            ..Default::default()
        }
    }
}

/// A task on the I/O runtime that a program waits on; aborted when the program stops waiting
/// (cancelled, out of time), so nothing it started outlives it. What a program's evaluation
/// thread polls needs no runtime of its own: this handle is how it waits on the main one.
pub(crate) struct Spawned<T>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Future for Spawned<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for Spawned<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ProgramHost {
    fn upstreams(&self) -> &Arc<Upstreams> {
        &self.run.upstreams
    }

    /// A host for one program run that can ask nobody for approval: a call that needs it
    /// answers `approval_unavailable`.
    pub fn new(
        upstreams: Arc<Upstreams>,
        runtime: tokio::runtime::Handle,
        budgets: Budgets,
    ) -> Self {
        Self::with_approver(upstreams, runtime, budgets, Arc::new(Nobody))
    }

    /// A host for one program run whose approvals go to `approver`, or to the deployment's
    /// approval webhook when it names one (the deployment's choice wins over the client's).
    pub fn with_approver(
        upstreams: Arc<Upstreams>,
        runtime: tokio::runtime::Handle,
        budgets: Budgets,
        approver: Arc<dyn Approver>,
    ) -> Self {
        Self::for_caller(
            upstreams,
            runtime,
            budgets,
            approver,
            Arc::default(),
            Grant::everything(),
        )
    }

    /// A host for one program run of `caller`, who may reach what `grant` allows (its calls
    /// per program at most the grant's), whose approvals go to `approver` or to the
    /// deployment's approval webhook.
    pub fn for_caller(
        upstreams: Arc<Upstreams>,
        runtime: tokio::runtime::Handle,
        mut budgets: Budgets,
        approver: Arc<dyn Approver>,
        caller: Arc<Caller>,
        grant: Grant,
    ) -> Self {
        budgets.max_calls = grant.calls_per_program(budgets.max_calls);
        let approver: Arc<dyn Approver> = if upstreams.has_approval_webhook() {
            Arc::new(ByWebhook(upstreams.clone()))
        } else {
            approver
        };
        ProgramHost {
            runtime,
            trace: crate::telemetry::Parent::current(),
            run: Arc::new(RunState {
                upstreams,
                budgets,
                calls: AtomicU64::new(0),
                discovery: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
                records: Mutex::new(Vec::new()),
                approver,
                run_id: RunId::new(),
                indeterminate: Mutex::new(HashSet::new()),
                caller,
                grant,
                tape: std::sync::OnceLock::new(),
                consent: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Asks `consent` when an upstream needs the caller's OAuth consent during this run (once,
    /// before the program runs; later calls are ignored). Unset, the process's consent is asked
    /// (the terminal's, for `eval`).
    pub fn set_consent(&self, consent: Arc<dyn crate::credentials::upstream_oauth::Consent>) {
        let _ = self.run.consent.set(consent);
    }

    /// Records this run's upstream calls, or answers them from a recording (once, before the
    /// program runs; later calls are ignored).
    pub fn set_tape(&self, tape: Tape) {
        if let Tape::Record(r) = &tape {
            r.note_budgets(&self.run.budgets);
        }
        let _ = self.run.tape.set(tape);
    }

    /// Waits, through the program's context, for `fut` run as a task on the I/O runtime.
    fn wait_io<T: Send + 'static>(
        &self,
        cx: &mut CallContext<'_>,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, HostError> {
        match cx.wait(Spawned(self.runtime.spawn(fut)))? {
            Ok(out) => Ok(out),
            Err(e) => Err(HostError::new(
                ptc_lisp::Reason::InternalError,
                format!("an upstream task stopped unexpectedly: {e}"),
            )),
        }
    }

    /// The run's records so far; `final_result` is the program's value (for the metrics).
    pub fn records(&self, final_result: Option<&Value>) -> RunRecords {
        let calls = self
            .run
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let final_bytes = final_result
            .and_then(|v| v.to_json_string().ok())
            .map_or(0, |s| s.len() as u64);
        RunRecords::new(calls, final_bytes)
    }

    fn record(
        &self,
        server: &str,
        tool: &str,
        started: Instant,
        outcome: Result<u64, Reason>,
        write: Option<WriteRecord>,
        drift: Vec<String>,
    ) {
        let (reason, result_bytes) = match outcome {
            Ok(bytes) => (None, bytes),
            Err(r) => (Some(r), 0),
        };
        self.run
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(UpstreamCall {
                server: server.to_string(),
                tool: tool.to_string(),
                reason,
                duration_ms: started.elapsed().as_millis() as u64,
                result_bytes,
                write,
                drift,
            });
    }

    fn redact(&self, text: &str) -> String {
        self.upstreams().redactor().redact(text).into_owned()
    }

    /// Upstream `name` with its tools; `Ok(None)` when there is no such upstream.
    fn upstream(
        &self,
        cx: &mut CallContext<'_>,
        name: &str,
    ) -> Result<Option<Result<&ServerEntry, ToolError>>, HostError> {
        let Ok(i) = self.upstreams().catalog().index_of(name) else {
            return Ok(None);
        };
        // Loading an MCP upstream's tools is I/O, the first time: the program waits for it.
        let up = self.upstreams().clone();
        let who = self.run.on_behalf();
        let loaded = self.wait_io(cx, async move { up.load_for(i, &who).await.map(|_| ()) })?;
        Ok(Some(
            loaded.map(|()| &self.upstreams().catalog().servers()[i]),
        ))
    }
}

fn message_of(v: &Value) -> Option<String> {
    match v {
        Value::Map(m) => match m.get(&kw("message")) {
            Some(Value::Str(s)) => Some(s.to_string()),
            _ => None,
        },
        _ => None,
    }
}

/// A malformed `tool/call` form; a run-time value is never "computed later".
fn form_fault(e: FormError) -> HostError {
    match e {
        FormError::Wrong(message) => fault(message),
        FormError::Computed => fault("tool/call: the call could not be read"),
    }
}

fn ref_of(args: &[Value]) -> Option<String> {
    match args.first() {
        Some(Value::Symbol(s) | Value::Str(s) | Value::Keyword(s) | Value::Var(s)) => {
            Some(s.to_string())
        }
        _ => None,
    }
}

impl Host for ProgramHost {
    fn namespaces(&self) -> Vec<String> {
        vec!["tool".to_string()]
    }

    fn upstreams(&self) -> Vec<String> {
        self.upstreams()
            .catalog()
            .servers()
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    fn call(
        &self,
        cx: &mut CallContext<'_>,
        ns: &str,
        name: &str,
        args: &[Value],
    ) -> Result<HostValue, HostError> {
        let unknown = || {
            fault(format!(
                "no function {ns}/{name}; tool/ has {} (and the discovery forms dir, doc, meta, \
                 apropos)",
                functions::names()
            ))
        };
        if ns != "tool" {
            return Err(unknown());
        }
        // `tool/dir`, `tool/doc`, `tool/meta` and `tool/apropos` are the runtime's discovery
        // forms (they reach `discover`); the host serves the rest of `tool/`.
        let v = match name {
            "call" => self.tool_call(cx, args)?,
            "pages" => self.tool_pages(cx, args)?,
            "search" => self.tool_search(args)?,
            "servers" => self.servers()?,
            _ => return Err(unknown()),
        };
        Ok(HostValue::Value(v))
    }

    fn discover(
        &self,
        cx: &mut CallContext<'_>,
        op: Discovery,
        args: &[Value],
    ) -> Result<Option<HostValue>, HostError> {
        let found = match op {
            Discovery::Apropos => self.apropos(args)?,
            _ => {
                let Some(r) = ref_of(args) else {
                    return Ok(None);
                };
                match op {
                    Discovery::Dir => self.dir(cx, &r)?,
                    Discovery::Doc => self.doc(cx, &r)?,
                    Discovery::Meta => self.meta(cx, &r)?,
                    Discovery::Apropos => None,
                }
            }
        };
        Ok(found.map(HostValue::Value))
    }
}
