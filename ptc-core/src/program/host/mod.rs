//! The PTC-Lisp host: `tool/call`, `tool/servers` and upstream discovery over [`Upstreams`],
//! with per-program budgets and records.
//!
//! A [`ProgramHost`] serves one program run: its counters are the run's budgets and its records
//! are the run's `upstream_calls`. Upstream I/O runs as a task on the tokio runtime it was given,
//! and the program waits for it through [`CallContext::wait`]: driven by `eval_async`, a program
//! waiting on an upstream is suspended and holds no thread. `pmap` branches suspend together,
//! so their calls overlap.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ptc_lisp::{CallContext, Discovery, Host, HostError, HostValue, Interpreter, Limits, Value};

use crate::call::approval::{ApprovalRequest, Approver, Decision, DecisionFuture, Nobody};
use crate::call::contract::{Reason, ToolError, ToolOutput};
use crate::call::form::{self, FormError};
use crate::call::projection::{Pager, Step, lisp_at};
use crate::call::upstreams::{CallOptions, Upstreams};
use crate::call::writes::{IdempotencyKey, MutationState, RunId};
use crate::catalog::discovery::{
    apropos, dir_lines, doc_text, listing, server_doc_text, server_meta, visible,
};
use crate::catalog::policy::Grant;
use crate::catalog::{ServerEntry, ToolEntry};
use crate::credentials::identity::Caller;
use crate::program::record_replay::{Tape, TapeCall};
use crate::program::run_report::{ApprovalOutcome, RunRecords, UpstreamCall, WriteRecord};
use ptc_plan::{Effect, Pagination};
use std::collections::HashSet;

/// Per-program budgets.
#[derive(Clone, Copy, Debug)]
pub struct Budgets {
    /// Upstream calls (`tool/call`) per program.
    pub max_calls: u64,
    /// Discovery operations (`tool/servers`, `dir`, `doc`, `meta`, `apropos` on upstreams).
    pub max_discovery: u64,
    /// Bytes fetched from upstreams per program.
    pub max_bytes: u64,
    /// How long a person has to approve one call (within the program's own time).
    pub approval_wait: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_calls: 50,
            max_discovery: 25,
            max_bytes: 64 << 20,
            approval_wait: Duration::from_secs(120),
        }
    }
}

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

/// `{:ok true :value v :value_kind kind}`, with `:mutation_state` for a write.
fn ok_map(value: Value, kind: &str, mutation: Option<MutationState>) -> Value {
    let mut entries = vec![
        (kw("ok"), Value::Bool(true)),
        (kw("value"), value),
        (kw("value_kind"), kw(kind)),
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

/// Asks the deployment's approval webhook, through the upstreams that hold it.
struct ByWebhook(Arc<Upstreams>);

impl Approver for ByWebhook {
    fn approve(&self, request: ApprovalRequest, wait: Duration) -> DecisionFuture {
        let upstreams = self.0.clone();
        Box::pin(async move { upstreams.ask_approval_webhook(&request, wait).await })
    }
}

/// The outcome of one upstream call, with the names it resolved to (when it got that far) and,
/// for a tool that is not a read, what the records say of it.
struct CallOutcome {
    result: Result<crate::call::upstreams::Executed, ToolError>,
    names: Option<(String, String)>,
    write: Option<WriteRecord>,
    /// Where the tool is in the catalog (upstream, tool), once it resolved.
    at: Option<(usize, usize)>,
}

impl CallOutcome {
    fn failed(e: ToolError, names: Option<(String, String)>, write: Option<WriteRecord>) -> Self {
        CallOutcome {
            result: Err(e),
            names,
            write,
            at: None,
        }
    }
}

/// A call the upstream answered, as the records need it once the program has read the answer.
struct Done {
    names: (String, String),
    started: Instant,
    bytes: u64,
    write: Option<WriteRecord>,
    /// Where the tool is in the catalog: its result path and output schema are read there.
    at: Option<(usize, usize)>,
    /// The call's span (traces), ended with the call's record.
    span: crate::telemetry::TraceSpan,
}

impl Done {
    fn mutation(&self) -> Option<MutationState> {
        self.write.and_then(|w| w.mutation_state)
    }

    fn qualified(&self) -> String {
        format!("{}/{}", self.names.0, self.names.1)
    }
}

/// What [`ProgramHost::fetch`] gives the program: an answer (decoded, with its kind), or the
/// `{:ok false ...}` value of a refused or failed call (already recorded).
enum Fetched {
    Answer(Value, &'static str, Box<Done>),
    Refused(Value),
}

/// A paged tool's pagination, default arguments and argument properties.
type PagedTool = (
    Pagination,
    serde_json::Map<String, serde_json::Value>,
    serde_json::Map<String, serde_json::Value>,
);

/// How to write a `tool/pages` call, for every message about a malformed one.
const PAGES_USAGE: &str = "use (tool/pages 'server/tool {:arg value} {:max-pages n :max-items n \
                           :as :items}) (:as :pages keeps each page whole)";

/// The options map of a `tool/pages` call.
struct PageOptions {
    max_pages: u64,
    max_items: Option<u64>,
    as_pages: bool,
}

impl PageOptions {
    /// Pages fetched when the call does not say.
    const DEFAULT_MAX_PAGES: u64 = 10;

    /// Reads the options; `:max-pages` may not exceed the program's call budget.
    fn read(v: Option<&Value>, max_calls: u64) -> Result<Self, HostError> {
        let mut out = PageOptions {
            max_pages: Self::DEFAULT_MAX_PAGES.min(max_calls),
            max_items: None,
            as_pages: false,
        };
        let m = match v {
            None | Some(Value::Nil) => return Ok(out),
            Some(Value::Map(m)) => m,
            Some(other) => {
                return Err(fault(format!(
                    "tool/pages: the options must be a map, got {}; {PAGES_USAGE}",
                    other.type_name()
                )));
            }
        };
        for (k, v) in m.iter() {
            let key = match k {
                Value::Keyword(s) => s.to_string(),
                other => {
                    return Err(fault(format!(
                        "tool/pages: option keys are keywords, got {other}; {PAGES_USAGE}"
                    )));
                }
            };
            let count = |max: u64| match v {
                Value::Int(n) if *n >= 1 && (*n as u64) <= max => Ok(*n as u64),
                other => Err(fault(format!(
                    "tool/pages: :{key} must be an integer 1..{max}, got {other}"
                ))),
            };
            match key.as_str() {
                "max-pages" => out.max_pages = count(max_calls)?,
                "max-items" => out.max_items = Some(count(1_000_000)?),
                "as" => {
                    out.as_pages = match v {
                        Value::Keyword(s) if &**s == "pages" => true,
                        Value::Keyword(s) if &**s == "items" => false,
                        other => {
                            return Err(fault(format!(
                                "tool/pages: :as must be :items or :pages, got {other}"
                            )));
                        }
                    }
                }
                other => {
                    return Err(fault(format!(
                        "tool/pages: unknown option :{other}; {PAGES_USAGE}"
                    )));
                }
            }
        }
        Ok(out)
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
            }),
        }
    }

    /// Records this run's upstream calls, or answers them from a recording (once, before the
    /// program runs; later calls are ignored).
    pub fn set_tape(&self, tape: Tape) {
        if let Tape::Record(r) = &tape {
            let b = &self.run.budgets;
            r.note_budgets(b.max_calls, b.max_discovery, b.max_bytes);
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

    fn tool_call(&self, cx: &mut CallContext<'_>, args: &[Value]) -> Result<Value, HostError> {
        let form = form::read(args).map_err(form_fault)?;
        let req_args = form.json_args().map_err(form_fault)?;
        let (value, kind, done) = match self.fetch(cx, &form.server, &form.tool, req_args, None)? {
            Fetched::Refused(v) => return Ok(v),
            Fetched::Answer(value, kind, done) => (value, kind, done),
        };
        let mutation = done.mutation();
        let v = match self.select(&done, kind, value) {
            Ok(v) => v,
            Err(why) => return Ok(self.bad_answer(&done, &why)),
        };
        let drift = if kind == "json" {
            match self.check_answer(&done, &v) {
                Ok(drift) => drift,
                Err(refused) => return Ok(refused),
            }
        } else {
            Vec::new()
        };
        self.finish(&done, Ok(()), drift);
        Ok(ok_map(v, kind, mutation))
    }

    /// `(tool/pages 'server/tool {args} {:max-pages n :max-items n :as :items|:pages})`: the
    /// tool's pages in order, each one upstream call within the run's budgets, until the last
    /// page, `:max-pages` or `:max-items`.
    fn tool_pages(&self, cx: &mut CallContext<'_>, args: &[Value]) -> Result<Value, HostError> {
        if args.is_empty() || args.len() > 3 {
            return Err(fault(format!("tool/pages: {PAGES_USAGE}")));
        }
        let form = form::read(&args[..args.len().min(2)]).map_err(form_fault)?;
        let options = PageOptions::read(args.get(2), self.run.budgets.max_calls)?;
        let written = form.json_args().map_err(form_fault)?;
        let (style, defaults, props) = match self.paged_tool(cx, &form.server, &form.tool)? {
            Ok(found) => found,
            Err(refused) => return Ok(refused),
        };
        // Keyed by wire names, so the pager finds (and sets) its arguments however the program
        // spelled them; unknown names stay as written for validation to report.
        let req_args: serde_json::Map<String, serde_json::Value> = written
            .into_iter()
            .map(|(k, v)| {
                let wire = crate::call::validate::resolve_name(&props, &k).map(str::to_string);
                (wire.unwrap_or(k), v)
            })
            .collect();
        let mut with_defaults = defaults;
        with_defaults.extend(req_args.clone());
        let mut pager = Pager::new(&style, &with_defaults);
        let mut collected: Vec<Value> = Vec::new();
        let mut pages = 0u64;
        let mut next = None;
        let partial = |collected: Vec<Value>, pages: u64, failed: Value| {
            let Value::Map(m) = failed else { return failed };
            let mut m = (*m).clone();
            m.insert(kw("value"), Value::vector(collected));
            m.insert(kw("pages"), Value::Int(pages as i64));
            Value::Map(std::sync::Arc::new(m))
        };
        let complete = loop {
            if pages == options.max_pages {
                break false;
            }
            let page_args = pager.args(&req_args);
            let page = Some(pages + 1);
            let fetched = self.fetch(cx, &form.server, &form.tool, page_args, page)?;
            let (answer, kind, done) = match fetched {
                Fetched::Refused(v) => return Ok(partial(collected, pages, v)),
                Fetched::Answer(value, kind, done) => (value, kind, done),
            };
            let cursor = match &style {
                Pagination::Cursor {
                    next_cursor_path, ..
                } => lisp_at(&answer, next_cursor_path).and_then(|c| form::to_json(c, 4).ok()),
                _ => None,
            };
            let page = match self.select(&done, kind, answer) {
                Ok(v) => v,
                Err(why) => return Ok(partial(collected, pages, self.bad_answer(&done, &why))),
            };
            let items = match &page {
                Value::Vector(v) => Some(v.len()),
                _ => None,
            };
            if style.counts_items() && items.is_none() {
                let why = format!(
                    "page {} is {}, not a list: {} pagination counts each page's items",
                    pages + 1,
                    page.type_name(),
                    style.style()
                );
                return Ok(partial(collected, pages, self.bad_answer(&done, &why)));
            }
            let drift = match self.check_answer(&done, &page) {
                Ok(drift) => drift,
                Err(refused) => return Ok(partial(collected, pages, refused)),
            };
            self.finish(&done, Ok(()), drift);
            pages += 1;
            match (&page, options.as_pages) {
                (Value::Vector(v), false) => collected.extend(v.iter().cloned()),
                _ => collected.push(page),
            }
            let step = pager.after(items, cursor);
            if let Some(max) = options.max_items
                && collected.len() as u64 >= max
            {
                collected.truncate(max as usize);
                if let Step::Next(p) = step {
                    next = Some(p);
                }
                break false;
            }
            match step {
                Step::Next(p) => next = Some(p),
                Step::Done => {
                    next = None;
                    break true;
                }
                Step::Loop(why) => {
                    let message = self.redact(&format!(
                        "{}: stopped after page {pages}: {why}; the upstream's paging loops",
                        done.qualified()
                    ));
                    let failed = err_map(Reason::UpstreamError, &message, None);
                    return Ok(partial(collected, pages, failed));
                }
            }
        };
        let next = match next {
            Some(p) if !complete => cx.decode_json(p.to_string().as_bytes())?,
            _ => Value::Nil,
        };
        Ok(Value::map_from(vec![
            (kw("ok"), Value::Bool(true)),
            (kw("value"), Value::vector(collected)),
            (kw("value_kind"), kw("json")),
            (kw("pages"), Value::Int(pages as i64)),
            (kw("complete"), Value::Bool(complete)),
            (kw("next"), next),
        ]))
    }

    /// The pagination, default arguments and argument properties of `server/tool`, or the
    /// refusal the program gets.
    fn paged_tool(
        &self,
        cx: &mut CallContext<'_>,
        server: &str,
        tool: &str,
    ) -> Result<Result<PagedTool, Value>, HostError> {
        let entry = match self.upstream(cx, server)? {
            None => {
                let e = self.upstreams().catalog().server(server).err();
                return Err(e.map_or_else(|| fault("tool/pages: no such upstream"), |e| raised(&e)));
            }
            Some(Err(e)) => return Ok(Err(err_map(e.reason, &e.message, None))),
            Some(Ok(entry)) => entry,
        };
        let tool = entry.tool(tool).map_err(|e| raised(&e))?;
        let (props, _) = entry.schema(tool).properties();
        let Some(style) = tool.projection.pagination.clone() else {
            return Err(fault(format!(
                "tool/pages: {} has no pagination (its document names no x-ptc-pagination); \
                 call it with tool/call",
                tool.qualified()
            )));
        };
        Ok(Ok((
            style,
            tool.default_args(),
            props.cloned().unwrap_or_default(),
        )))
    }

    /// One upstream call for the program (`page` of a `tool/pages`): waits (suspended) for it,
    /// records a refusal, decodes an answer. The caller selects from the answer and records the
    /// call with [`Self::finish`].
    fn fetch(
        &self,
        cx: &mut CallContext<'_>,
        server: &str,
        tool: &str,
        req_args: serde_json::Map<String, serde_json::Value>,
        page: Option<u64>,
    ) -> Result<Fetched, HostError> {
        let deadline = cx.remaining().map(|r| Instant::now() + r);
        let started = Instant::now();
        let run = self.run.clone();
        let (s, t) = (server.to_string(), tool.to_string());
        let transport = || {
            let catalog = self.upstreams().catalog();
            catalog.server(server).map_or("unknown", |s| s.transport)
        };
        let span = crate::telemetry::call_span(self.trace.as_ref(), server, tool, transport, page);
        let call = async move { run.call(&s, &t, req_args, deadline).await };
        let outcome = match self.wait_io(cx, crate::telemetry::traced(call, &span)) {
            Ok(outcome) => outcome,
            Err(stopped) => {
                crate::telemetry::call_ended(&span, Some(stopped.reason.as_str()), 0, started);
                // The program stopped waiting and the call ends with it. A deadline is the call's
                // timeout too; a cancelled call has no outcome of the contract's to record.
                if stopped.reason == ptc_lisp::Reason::Timeout {
                    self.record(
                        server,
                        tool,
                        started,
                        Err(Reason::Timeout),
                        None,
                        Vec::new(),
                    );
                }
                return Err(stopped);
            }
        };
        let write = outcome.write;
        let mutation = write.and_then(|w| w.mutation_state);
        let names = outcome
            .names
            .unwrap_or_else(|| (server.to_string(), tool.to_string()));
        let executed = match outcome.result {
            Ok(done) => done,
            Err(e) => {
                crate::telemetry::call_ended(&span, Some(e.reason.as_str()), 0, started);
                if e.reason.is_programmer_fault() {
                    return Err(raised(&e));
                }
                self.record(
                    &names.0,
                    &names.1,
                    started,
                    Err(e.reason),
                    write,
                    Vec::new(),
                );
                return Ok(Fetched::Refused(err_map(e.reason, &e.message, mutation)));
            }
        };
        self.run.bytes.fetch_add(executed.bytes, Ordering::Relaxed);
        let done = Done {
            names,
            started,
            bytes: executed.bytes,
            write,
            at: outcome.at,
            span,
        };
        let (value, kind) = match executed.output {
            // The same decoder, depth limit and memory budget as `data/` context.
            ToolOutput::Json(bytes) => match cx.decode_json(&bytes) {
                Ok(v) => (v, "json"),
                // The program's own limits (memory, time) end the program.
                Err(e)
                    if matches!(
                        e.reason,
                        ptc_lisp::Reason::MemoryExceeded | ptc_lisp::Reason::Timeout
                    ) =>
                {
                    self.finish(&done, Err(Reason::UpstreamError), Vec::new());
                    return Err(e);
                }
                // Malformed or absurdly deep JSON is the upstream's fault: data.
                Err(e) => {
                    let why = format!("the response is not usable JSON: {}", e.message);
                    return Ok(Fetched::Refused(self.bad_answer(&done, &why)));
                }
            },
            // Only JSON answers are selected from.
            ToolOutput::Text(t) => (Value::str(&t), "text"),
            ToolOutput::Empty => (Value::Nil, "none"),
        };
        Ok(Fetched::Answer(value, kind, Box::new(done)))
    }

    /// The upstream and tool of an answered call.
    fn entry(&self, done: &Done) -> Option<(&ServerEntry, &ToolEntry)> {
        let (s, t) = done.at?;
        let server = self.upstreams().catalog().servers().get(s)?;
        Some((server, server.tools()?.get(t)?))
    }

    /// What a call returns: for a JSON answer, what its tool's result path selects.
    fn select(&self, done: &Done, kind: &str, answer: Value) -> Result<Value, String> {
        match self.entry(done) {
            Some((_, tool)) if kind == "json" => tool.projection.select(answer),
            _ => Ok(answer),
        }
    }

    /// Records a call that was answered, with the fields of its answer that drifted.
    fn finish(&self, done: &Done, outcome: Result<(), Reason>, drift: Vec<String>) {
        let (server, tool) = &done.names;
        let reason = outcome.err().map(Reason::as_str);
        crate::telemetry::call_ended(&done.span, reason, done.bytes, done.started);
        let bytes = outcome.map(|()| done.bytes);
        self.record(server, tool, done.started, bytes, done.write, drift);
    }

    /// Checks what a call returns against the tool's output schema: the fields that drifted,
    /// or (checking strictly) the `response_drift` value the program gets instead, recorded.
    fn check_answer(&self, done: &Done, value: &Value) -> Result<Vec<String>, Value> {
        let up = self.upstreams();
        let Some((server, schema)) = self
            .entry(done)
            .and_then(|(s, t)| Some((s, t.output_schema.as_ref()?)))
        else {
            return Ok(Vec::new());
        };
        let schema = crate::call::validate::Schema {
            root: schema,
            definitions: Some(&server.definitions),
        };
        let found = up.drift().check(&done.qualified(), value, schema);
        if found.is_empty() || !up.drift().strict() {
            return Ok(found);
        }
        let message = self.redact(&format!(
            "{}: the response does not match its schema: {}",
            done.qualified(),
            found.join("; ")
        ));
        self.finish(done, Err(Reason::ResponseDrift), found);
        Err(err_map(Reason::ResponseDrift, &message, done.mutation()))
    }

    /// Records an answer the program cannot use (`why`) as the upstream's error, and the value
    /// the program gets for it.
    fn bad_answer(&self, done: &Done, why: &str) -> Value {
        self.finish(done, Err(Reason::UpstreamError), Vec::new());
        let message = self.redact(&format!("{}: {why}", done.qualified()));
        err_map(Reason::UpstreamError, &message, done.mutation())
    }

    /// Takes one discovery operation from the budget; the refusal value when it is spent.
    fn take_discovery(&self) -> Option<Value> {
        let run = &self.run;
        if run.discovery.fetch_add(1, Ordering::Relaxed) >= run.budgets.max_discovery {
            Some(err_map(
                Reason::CapExhausted,
                &format!(
                    "the program's budget of {} discovery operations is spent",
                    run.budgets.max_discovery
                ),
                None,
            ))
        } else {
            None
        }
    }

    fn redact(&self, text: &str) -> String {
        self.upstreams().redactor().redact(text).into_owned()
    }

    fn servers(&self) -> Result<Value, HostError> {
        if let Some(v) = self.take_discovery() {
            return Ok(v);
        }
        let grant = &self.run.grant;
        let list = self
            .upstreams()
            .catalog()
            .servers()
            .iter()
            .filter(|s| crate::catalog::discovery::shown(s, grant))
            .map(|s| {
                Value::map_from(vec![
                    (kw("name"), Value::str(&s.name)),
                    (kw("description"), Value::str(&self.redact(s.description()))),
                    (
                        kw("tool_count"),
                        s.tools()
                            .map_or(Value::Nil, |_| Value::Int(visible(s, grant).len() as i64)),
                    ),
                    (kw("loaded"), Value::Bool(s.tools().is_some())),
                ])
            })
            .collect();
        Ok(Value::vector(list))
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
        let loaded = self.wait_io(cx, async move { up.load(i).await.map(|_| ()) })?;
        Ok(Some(
            loaded.map(|()| &self.upstreams().catalog().servers()[i]),
        ))
    }

    fn dir(&self, cx: &mut CallContext<'_>, name: &str) -> Result<Option<Value>, HostError> {
        // Unknown names are the runtime's to report (its hint knows every namespace).
        let Some(server) = self.upstream(cx, name)? else {
            return Ok(None);
        };
        if let Some(v) = self.take_discovery() {
            return Ok(Some(v));
        }
        let server = match server {
            Ok(s) => s,
            Err(e) => return Ok(Some(err_map(e.reason, &e.message, None))),
        };
        let lines = dir_lines(server, &self.run.grant)
            .iter()
            .map(|l| Value::str(&self.redact(l)))
            .collect();
        Ok(Some(Value::vector(lines)))
    }

    /// Resolves `server/tool` for doc and meta: `Ok(None)` when `server` is not an upstream.
    fn resolve_ref(
        &self,
        cx: &mut CallContext<'_>,
        reference: &str,
    ) -> Result<Option<Resolved<'_>>, HostError> {
        // `dir` lines read "server/tool - summary"; accept them back.
        let reference = reference.split(" - ").next().unwrap_or(reference).trim();
        let (server, tool) = match reference.split_once('/') {
            Some((s, t)) => (s, Some(t)),
            None => (reference, None),
        };
        let Some(entry) = self.upstream(cx, server)? else {
            return Ok(None);
        };
        if let Some(v) = self.take_discovery() {
            return Ok(Some(Resolved::Refused(v)));
        }
        let entry = match entry {
            Ok(e) => e,
            Err(e) => return Ok(Some(Resolved::Refused(err_map(e.reason, &e.message, None)))),
        };
        match tool {
            None => Ok(Some(Resolved::Server(entry))),
            Some(t) => match entry.tool(t) {
                Ok(tool) => match self.run.grant.check(tool) {
                    Ok(()) => Ok(Some(Resolved::Tool(entry, tool))),
                    Err(m) => Ok(Some(Resolved::Refused(err_map(
                        Reason::Forbidden,
                        &m,
                        None,
                    )))),
                },
                Err(e) => Err(fault(e.message)),
            },
        }
    }

    fn doc(&self, cx: &mut CallContext<'_>, reference: &str) -> Result<Option<Value>, HostError> {
        let text = match self.resolve_ref(cx, reference)? {
            None => return Ok(None),
            Some(Resolved::Refused(v)) => {
                if let Some(m) = message_of(&v) {
                    cx.print(&format!("{m}\n"));
                }
                return Ok(Some(Value::Nil));
            }
            Some(Resolved::Server(s)) => server_doc_text(s, &self.run.grant),
            Some(Resolved::Tool(s, t)) => doc_text(s, t),
        };
        cx.print(&self.redact(&text));
        Ok(Some(Value::Nil))
    }

    fn meta(&self, cx: &mut CallContext<'_>, reference: &str) -> Result<Option<Value>, HostError> {
        let json = match self.resolve_ref(cx, reference)? {
            None => return Ok(None),
            Some(Resolved::Refused(v)) => return Ok(Some(v)),
            Some(Resolved::Server(s)) => server_meta(s, &self.run.grant),
            Some(Resolved::Tool(_, t)) => t.to_json(),
        };
        let text = self.redact(&json.to_string());
        cx.decode_json(text.as_bytes()).map(Some)
    }

    fn apropos(&self, args: &[Value]) -> Result<Option<Value>, HostError> {
        let query = match args.first() {
            Some(Value::Str(s) | Value::Symbol(s) | Value::Keyword(s)) => s.to_string(),
            _ => return Ok(None),
        };
        let page = SearchPage::read("apropos", &query, args.get(1), 20)?;
        if let Some(v) = self.take_discovery() {
            return Ok(Some(v));
        }
        let lines = apropos(
            self.upstreams().catalog(),
            &self.run.grant,
            &query,
            page.offset,
            page.limit,
        )
        .into_iter()
        .map(|t| Value::str(&self.redact(&listing(t))))
        .collect();
        Ok(Some(Value::vector(lines)))
    }

    /// `(tool/search "text" {:limit n :offset n})`: the best matching tools as data, best first:
    /// `[{:name "server/tool" :summary "..." :score 12.5} ...]`.
    fn tool_search(&self, args: &[Value]) -> Result<Value, HostError> {
        let query = match args.first() {
            Some(Value::Str(s)) if args.len() <= 2 => s.to_string(),
            _ => {
                return Err(fault(
                    "tool/search: use (tool/search \"text\") or (tool/search \"text\" {:limit n \
                     :offset n})",
                ));
            }
        };
        let page = SearchPage::read("tool/search", &query, args.get(1), 10)?;
        if let Some(v) = self.take_discovery() {
            return Ok(v);
        }
        let hits = crate::catalog::search::search(self.upstreams().catalog(), &query)
            .into_iter()
            .filter(|h| self.run.grant.sees(h.tool))
            .skip(page.offset)
            .take(page.limit)
            .map(|h| {
                let summary = h.tool.description.split("\n\n").next().unwrap_or_default();
                Value::map_from(vec![
                    (kw("name"), Value::str(&h.tool.qualified())),
                    (kw("summary"), Value::str(&self.redact(summary.trim()))),
                    (kw("score"), Value::Float((h.score * 100.0).round() / 100.0)),
                ])
            })
            .collect();
        Ok(Value::vector(hits))
    }
}

/// Which results of a search to show: `:limit` (1..200) from `:offset`.
struct SearchPage {
    limit: usize,
    offset: usize,
}

impl SearchPage {
    fn read(
        form: &str,
        query: &str,
        options: Option<&Value>,
        default_limit: usize,
    ) -> Result<Self, HostError> {
        if query.trim().is_empty() {
            return Err(fault(format!("{form}: give a non-empty search text")));
        }
        let mut page = SearchPage {
            limit: default_limit,
            offset: 0,
        };
        let Some(Value::Map(m)) = options else {
            return Ok(page);
        };
        match m.get(&kw("limit")) {
            Some(Value::Int(n)) if (1..=200).contains(n) => page.limit = *n as usize,
            Some(other) => {
                return Err(fault(format!(
                    "{form}: :limit must be an integer 1..200, got {other}"
                )));
            }
            None => {}
        }
        match m.get(&kw("offset")) {
            Some(Value::Int(n)) if *n >= 0 => page.offset = *n as usize,
            Some(other) => {
                return Err(fault(format!(
                    "{form}: :offset must be an integer 0 or more, got {other}"
                )));
            }
            None => {}
        }
        Ok(page)
    }
}

impl RunState {
    /// The run's tape (off unless set).
    fn tape(&self) -> &Tape {
        static OFF: Tape = Tape::Off;
        self.tape.get().unwrap_or(&OFF)
    }

    /// One upstream call within the run's budgets: resolve and validate, then [`Self::send`].
    /// Every call that passes validation is one entry of the run's tape: recorded, or matched
    /// to the recorded call that answers it.
    async fn call(
        &self,
        server: &str,
        tool: &str,
        req_args: serde_json::Map<String, serde_json::Value>,
        deadline: Option<Instant>,
    ) -> CallOutcome {
        let up = &self.upstreams;
        let prepared = match up.prepare(server, tool, req_args).await {
            Ok(p) => p,
            Err(e) => {
                if let Some(unlisted) = self.tape().unlisted(up, server, &e) {
                    return CallOutcome::failed(unlisted, None, None);
                }
                // A disabled write is recorded as one: the records show every write attempt.
                let disabled = (e.reason == Reason::WriteDisabled)
                    .then(|| up.catalog().server(server).and_then(|s| s.tool(tool)).ok())
                    .flatten();
                let names = disabled.map(|t| (t.server.clone(), t.name.clone()));
                let write = disabled.map(|t| write_record(t.classified.effect, None, None));
                return CallOutcome::failed(e, names, write);
            }
        };
        let names = (prepared.tool.server.clone(), prepared.tool.name.clone());
        let taped = match self
            .tape()
            .begin(&names.0, &names.1, &prepared.args, up.redactor())
        {
            Ok(t) => t,
            Err(diverged) => return CallOutcome::failed(diverged, Some(names), None),
        };
        let outcome = self.send(prepared, names, deadline, &taped).await;
        taped.end(&outcome.result);
        outcome
    }

    /// A validated call: the grant, a call from the budget, a person's approval where the tool
    /// needs it, the request within the bytes left. Replaying, the recording answers in place of
    /// the request, and gives the policy's refusals and the approvals.
    async fn send(
        &self,
        prepared: crate::call::upstreams::Prepared<'_>,
        names: (String, String),
        deadline: Option<Instant>,
        taped: &TapeCall,
    ) -> CallOutcome {
        let up = &self.upstreams;
        if let Err(message) = self.grant.check(prepared.tool) {
            let e = ToolError {
                reason: Reason::Forbidden,
                message: format!("{message}; nothing was sent"),
            };
            return CallOutcome::failed(e, Some(names), None);
        }
        if let Some(e) = taped.policy_refusal() {
            return CallOutcome::failed(e, Some(names), None);
        }
        let at = up.catalog().servers()[prepared.server]
            .tools()
            .and_then(|tools| tools.iter().position(|t| std::ptr::eq(t, prepared.tool)))
            .map(|i| (prepared.server, i));
        let classified = prepared.tool.classified;
        if self.calls.fetch_add(1, Ordering::Relaxed) >= self.budgets.max_calls {
            let e = ToolError {
                reason: Reason::CapExhausted,
                message: format!(
                    "{}/{}: the program's budget of {} upstream calls is spent; do more \
                     with fewer calls (filters, larger pages)",
                    names.0, names.1, self.budgets.max_calls
                ),
            };
            return CallOutcome::failed(e, Some(names), None);
        }
        let used = self.bytes.load(Ordering::Relaxed);
        let left = self.budgets.max_bytes.saturating_sub(used);
        if left == 0 {
            let e = byte_budget_spent(&names, self.budgets.max_bytes);
            return CallOutcome::failed(e, Some(names), None);
        }
        let mut options = CallOptions {
            caller: Some(self.caller.clone()),
            deadline,
            idempotency_key: None,
        };
        let mut write = None;
        if !classified.effect.is_read() {
            let key = IdempotencyKey::of(self.run_id, &names.0, &names.1, &prepared.args);
            let repeat = self
                .indeterminate
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&key);
            if repeat {
                let e = ToolError {
                    reason: Reason::WriteIndeterminate,
                    message: format!(
                        "{}/{}: not sent again: the same write earlier in this program has an \
                         unknown outcome (it may have happened); read the upstream's state \
                         before writing again",
                        names.0, names.1
                    ),
                };
                let record = write_record(classified.effect, None, Some(MutationState::NotApplied));
                return CallOutcome::failed(e, Some(names), Some(record));
            }
            let approval = if crate::call::writes::needs_approval(classified) {
                let decided = match taped.recorded_approval() {
                    Some(recorded) => recorded,
                    None => self.approve(&prepared, deadline).await,
                };
                match decided {
                    Ok(()) => {
                        taped.approved(ApprovalOutcome::Approved);
                        Some(ApprovalOutcome::Approved)
                    }
                    Err((e, outcome)) => {
                        taped.approved(outcome);
                        let record = write_record(classified.effect, Some(outcome), None);
                        return CallOutcome::failed(e, Some(names), Some(record));
                    }
                }
            } else {
                None
            };
            if classified.effect == Effect::Write {
                options.idempotency_key = Some(key);
            }
            write = Some((key, approval));
        }
        // A too-large answer is the program's budget's fault only when the budget, not the
        // tool's own cap, was the smaller limit.
        let budget_binds = left < prepared.tool.max_response_bytes;
        let result = match taped.replayed() {
            Some(recorded) => recorded.answer(deadline).await,
            None => up.execute(prepared, options, Some(left)).await,
        };
        taped.executed(&result, deadline, up.redactor());
        let result = match result {
            Err(e) if e.reason == Reason::ResponseTooLarge && budget_binds => {
                Err(byte_budget_spent(&names, self.budgets.max_bytes))
            }
            other => other,
        };
        let write = write.map(|(key, approval)| {
            let mutation = (classified.effect == Effect::Write)
                .then(|| MutationState::of(result.as_ref().map(|_| ()).map_err(|e| e.reason)));
            if mutation == Some(MutationState::Indeterminate) {
                self.indeterminate
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key);
            }
            write_record(classified.effect, approval, mutation)
        });
        CallOutcome {
            result,
            names: Some(names),
            write,
            at,
        }
    }

    /// Asks a person to approve `call`, waiting (suspended) at most the approval wait and the
    /// program's time left.
    async fn approve(
        &self,
        call: &crate::call::upstreams::Prepared<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), (ToolError, ApprovalOutcome)> {
        let name = call.tool.qualified();
        let request = self.upstreams.approval_request(call);
        let mut wait = self.budgets.approval_wait;
        if let Some(d) = deadline {
            wait = wait.min(d.saturating_duration_since(Instant::now()));
        }
        let span = crate::telemetry::approval_span();
        let asked = self.approver.approve(request, wait);
        let decision = crate::telemetry::traced(asked, &span).await;
        let answer = match &decision {
            Decision::Approved => ApprovalOutcome::Approved,
            Decision::Declined(_) => ApprovalOutcome::Declined,
            Decision::Unavailable(_) => ApprovalOutcome::Unavailable,
        };
        crate::telemetry::approval_ended(&span, answer.as_str());
        match decision {
            Decision::Approved => Ok(()),
            Decision::Declined(why) => Err((
                ToolError {
                    reason: Reason::ApprovalDeclined,
                    message: self
                        .upstreams
                        .redactor()
                        .redact(&format!("{name}: not called: {why}"))
                        .into_owned(),
                },
                ApprovalOutcome::Declined,
            )),
            Decision::Unavailable(why) => Err((
                ToolError {
                    reason: Reason::ApprovalUnavailable,
                    message: self
                        .upstreams
                        .redactor()
                        .redact(&format!(
                            "{name}: not called: it needs a person's approval and {why}"
                        ))
                        .into_owned(),
                },
                ApprovalOutcome::Unavailable,
            )),
        }
    }
}

fn write_record(
    effect: Effect,
    approval: Option<ApprovalOutcome>,
    mutation_state: Option<MutationState>,
) -> WriteRecord {
    WriteRecord {
        effect,
        approval,
        mutation_state,
    }
}

enum Resolved<'a> {
    Refused(Value),
    Server(&'a ServerEntry),
    Tool(&'a ServerEntry, &'a ToolEntry),
}

fn byte_budget_spent(names: &(String, String), max: u64) -> ToolError {
    ToolError {
        reason: Reason::CapExhausted,
        message: format!(
            "{}/{}: the program's budget of {max} upstream bytes is spent; ask for less \
             (filters, summary modes, smaller pages)",
            names.0, names.1
        ),
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
                "no function {ns}/{name}; tool/ has call, pages, search and servers (and the \
                 discovery forms dir, doc, meta, apropos)"
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

/// The outcome of [`run_program`].
pub struct ProgramRun {
    /// The program's value, or why it failed.
    pub result: Result<Value, ptc_lisp::LispError>,
    /// Printed output (redacted).
    pub output: String,
    /// The run's upstream calls and metrics.
    pub records: RunRecords,
}

/// Runs `src` against `upstreams`: the static pre-check of its literal `tool/call` forms first
/// (nothing is called when it fails), then the evaluation with a fresh [`ProgramHost`].
/// Must not be called from inside a tokio runtime worker (it blocks on `runtime`).
pub fn run_program(
    upstreams: Arc<Upstreams>,
    runtime: tokio::runtime::Handle,
    src: &str,
    limits: Limits,
    budgets: Budgets,
    context: Option<Value>,
) -> ProgramRun {
    run_program_taped(upstreams, runtime, src, limits, budgets, context, Tape::Off)
}

/// [`run_program`] whose upstream calls go on `tape`: recorded, or answered from a recording.
pub fn run_program_taped(
    upstreams: Arc<Upstreams>,
    runtime: tokio::runtime::Handle,
    src: &str,
    limits: Limits,
    budgets: Budgets,
    context: Option<Value>,
    tape: Tape,
) -> ProgramRun {
    let host = Arc::new(ProgramHost::new(upstreams.clone(), runtime, budgets));
    host.set_tape(tape);
    if let Err(problems) = crate::program::precheck::precheck(&upstreams, src) {
        return ProgramRun {
            result: Err(crate::program::precheck::to_error(&problems)),
            output: String::new(),
            records: host.records(None),
        };
    }
    let mut interp = Interpreter::with_host(limits, host.clone());
    if let Some(c) = context {
        interp.set_context(c);
    }
    let result = interp.eval_str(src);
    let output = upstreams
        .redactor()
        .redact(&interp.take_output())
        .into_owned();
    let records = host.records(result.as_ref().ok());
    ProgramRun {
        result,
        output,
        records,
    }
}
