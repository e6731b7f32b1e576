//! One evaluation as a client asks for it: admission (global slots, the memory budget, request
//! size), the run on an evaluation thread off the async executor (see [`Workers`]: a program
//! waiting on an upstream holds none), cancellation, the `output_schema` check and the audit
//! line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ptc_lisp::{Interpreter, LispError, SessionState, Value};
use serde_json::{Map, Value as Json};
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::call::approval::Approver;
use crate::call::upstreams::Upstreams;
use crate::call::validate::{Patterns, Schema, check_args};
use crate::catalog::policy::{Grant, Pace, Policy};
use crate::credentials::identity::Caller;
use crate::program::host::{ProgramHost, Spawned};
use crate::program::run_report::RunRecords;
use crate::server::admission::{Queue, Turned};
use crate::server::options::EvalLimits;
use crate::server::outcome::{EvalError, EvalOutcome, EvalRequest, EvalValue, HostReason};
use crate::server::refresh::{self, CatalogDiff, Reload};
use crate::server::rounds::Parked;
use crate::server::session_run::{self, SessionOptions};
use crate::server::workers::Workers;

/// Counts running evaluations so shutdown can wait for them.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

struct InFlightGuard(Arc<InFlight>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Runs programs for every client of one process, within the global limits.
pub struct Evaluator {
    /// The upstreams new evaluations use; a refresh replaces them (running evaluations keep
    /// the ones they started with).
    upstreams: std::sync::RwLock<Arc<Upstreams>>,
    /// How a refresh rebuilds the upstreams (`None`: this host cannot refresh).
    reload: std::sync::OnceLock<Reload>,
    /// One refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
    runtime: tokio::runtime::Handle,
    workers: Workers,
    limits: EvalLimits,
    slots: Queue,
    memory: Arc<Queue>,
    in_flight: Arc<InFlight>,
    accepting: AtomicBool,
    /// Cancelled when the server stops accepting: requests waiting in the queue are told so.
    closing: CancellationToken,
    patterns: Patterns,
    /// Programs waiting for a person between request rounds (MCP 2026-07-28).
    parked: Parked,
    /// What each caller may reach; everything when unset.
    policy: std::sync::OnceLock<Arc<Policy>>,
    /// Where sessions keep their definitions; none kept when unset.
    sessions: std::sync::OnceLock<SessionOptions>,
    /// Where each evaluation's run file goes (`serve --record-dir`); none written when unset.
    record_dir: std::sync::OnceLock<crate::program::record_replay::RecordDir>,
    /// Programs per minute per caller, under the policy's limits.
    pace: Pace,
    /// What `/metrics` reports.
    metrics: crate::server::metrics::HostMetrics,
    /// The client sessions told when a refresh changes the tool list.
    listeners: crate::server::listeners::Listeners,
}

impl Evaluator {
    /// An evaluator over `upstreams`, whose I/O runs on `runtime`; programs run on one
    /// evaluation thread per core.
    pub fn new(
        upstreams: Arc<Upstreams>,
        runtime: tokio::runtime::Handle,
        limits: EvalLimits,
    ) -> Result<Arc<Self>, String> {
        limits.validate()?;
        let metrics = crate::server::metrics::HostMetrics::new();
        let workers = Workers::new(limits.eval_threads, metrics.ready_wait())
            .map_err(|e| format!("cannot start the evaluation threads: {e}"))?;
        // Counted in bytes: programs reserve from it as they grow (see `ptc_lisp::MemoryPool`).
        let budget = usize::try_from(limits.memory_budget_bytes).unwrap_or(usize::MAX);
        Ok(Arc::new(Evaluator {
            upstreams: std::sync::RwLock::new(upstreams),
            reload: std::sync::OnceLock::new(),
            refreshing: tokio::sync::Mutex::new(()),
            runtime,
            workers,
            slots: Queue::new(limits.max_concurrent, limits.max_queue),
            memory: Arc::new(Queue::new(budget, limits.max_queue)),
            limits,
            in_flight: Arc::default(),
            accepting: AtomicBool::new(true),
            closing: CancellationToken::new(),
            patterns: Patterns::default(),
            parked: Parked::default(),
            policy: std::sync::OnceLock::new(),
            sessions: std::sync::OnceLock::new(),
            record_dir: std::sync::OnceLock::new(),
            pace: Pace::default(),
            metrics,
            listeners: Default::default(),
        }))
    }

    /// The upstreams new programs call.
    pub fn upstreams(&self) -> Arc<Upstreams> {
        self.upstreams
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Lets [`Self::refresh`] rebuild the upstreams with `reload` (once; later calls are
    /// ignored).
    pub fn set_reload(&self, reload: Reload) {
        let _ = self.reload.set(reload);
    }

    /// Re-reads, recompiles and lists the catalog, swaps it in for new evaluations, and says
    /// what changed. On an error the catalog in force stays.
    pub async fn refresh(&self) -> Result<CatalogDiff, String> {
        let _one = self.refreshing.lock().await;
        let reload = self
            .reload
            .get()
            .ok_or("this host cannot refresh its catalog")?;
        let new = reload().await?;
        let old = self.upstreams();
        // Both fully listed, so MCP tools compare too (the old ones usually already are).
        refresh::list_all(&old).await;
        let unavailable = refresh::list_all(&new).await;
        let mut diff = refresh::diff(old.catalog(), new.catalog());
        diff.unavailable = unavailable;
        *self.upstreams.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
        // `lisp_eval`'s description holds the catalog: the sessions open now list again.
        if diff.changes_tools() {
            diff.told = self.listeners.tell_all().await;
        }
        tracing::info!(target: "ptc::server", "catalog refreshed: {}", diff.summary());
        // The old upstreams (and their MCP servers) stop when the last evaluation using them
        // ends and drops them.
        Ok(diff)
    }

    /// The client sessions told when a refresh changes the tool list.
    pub(crate) fn listeners(&self) -> &crate::server::listeners::Listeners {
        &self.listeners
    }

    /// Keeps sessions' definitions as `options` say (once; later calls are ignored).
    pub fn set_sessions(&self, options: SessionOptions) {
        let _ = self.sessions.set(options);
    }

    /// Writes one run file per evaluation into `dir` (once; later calls are ignored).
    pub fn set_record_dir(&self, dir: crate::program::record_replay::RecordDir) {
        let _ = self.record_dir.set(dir);
    }

    /// Whether sessions keep definitions.
    pub fn keeps_sessions(&self) -> bool {
        self.sessions.get().is_some()
    }

    /// Makes `policy` decide what each caller may reach (once; later calls are ignored).
    pub fn set_policy(&self, policy: Policy) {
        let _ = self.policy.set(Arc::new(policy));
    }

    /// What `caller` may reach, counting the program it starts against its rule's pace:
    /// `forbidden` when no rule is for it, `rate_limited` past its programs per minute.
    pub(crate) fn grant(&self, caller: &Caller) -> Result<Grant, EvalError> {
        let Some(policy) = self.policy.get() else {
            return Ok(Grant::everything());
        };
        let grant = policy
            .grant(caller)
            .map_err(|m| EvalError::host(HostReason::Forbidden, m))?;
        self.pace
            .admit(&grant, &caller.subject, Instant::now())
            .map_err(|m| EvalError::host(HostReason::RateLimited, m))?;
        Ok(grant)
    }

    /// What `caller` may see, for its listing of `lisp_eval` (its pace is not counted).
    pub fn visible_to(&self, caller: &Caller) -> Grant {
        match self.policy.get() {
            None => Grant::everything(),
            // A caller no rule is for sees nothing: its programs are refused.
            Some(p) => p.grant(caller).unwrap_or_else(|_| Grant::nothing()),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &EvalLimits {
        &self.limits
    }

    /// Programs waiting for a person between request rounds.
    pub(crate) fn parked(&self) -> &Parked {
        &self.parked
    }

    /// Stops admitting new evaluations: they, and the requests waiting for their turn, get
    /// `busy`; running ones continue.
    pub fn stop_accepting(&self) {
        self.accepting.store(false, Ordering::Release);
        self.closing.cancel();
        self.listeners.stop();
    }

    /// Whether new evaluations are admitted (`/ready`).
    pub fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::Acquire)
    }

    /// The counters `/metrics` reports.
    pub fn metrics(&self) -> &crate::server::metrics::HostMetrics {
        &self.metrics
    }

    /// What a `/metrics` scrape reads now rather than counts: programs in flight, requests
    /// waiting, the pin events of pinned MCP upstreams and the sessions of those called as
    /// the caller.
    pub fn metrics_now(&self) -> crate::server::metrics::Now {
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        crate::server::metrics::Now {
            in_flight: self.running(),
            queue_depth: self.waiting(),
            pins: self
                .upstreams()
                .pin_counts()
                .into_iter()
                .map(|(upstream, c)| crate::server::metrics::PinEvents {
                    upstream: upstream.to_string(),
                    changed: n(&c.changed),
                    removed: n(&c.removed),
                    unpinned: n(&c.unpinned),
                })
                .collect(),
            caller_sessions: self
                .upstreams()
                .caller_sessions()
                .into_iter()
                .map(
                    |(upstream, c)| crate::server::metrics::CallerSessionCounts {
                        upstream: upstream.to_string(),
                        open: n(&c.open),
                        opened: n(&c.opened),
                        closed_idle: n(&c.closed_idle),
                        evicted: n(&c.evicted),
                    },
                )
                .collect(),
        }
    }

    /// Evaluations running now.
    pub fn running(&self) -> usize {
        self.in_flight.count.load(Ordering::Acquire)
    }

    /// Requests waiting for their turn now (for a slot, or for memory).
    pub fn waiting(&self) -> usize {
        self.slots.waiting() + self.memory.waiting()
    }

    /// Until when a request arriving now may wait for its turn (`queue_wait` from now).
    pub fn wait_until(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.limits.queue_wait
    }

    /// Waits until no evaluation is running.
    pub async fn drain(&self) {
        loop {
            let idle = self.in_flight.idle.notified();
            if self.in_flight.count.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// A request that did not get its turn: `busy` naming what was full, or `cancelled`.
    pub(crate) fn turned_away(&self, turned: Turned, what: &str) -> EvalError {
        let why = match turned {
            Turned::QueueFull => format!(
                "{what}, and {} requests wait already, the queue's limit",
                self.limits.max_queue
            ),
            Turned::TimedOut => format!(
                "{what}, and no turn came within {} ms",
                self.limits.queue_wait.as_millis()
            ),
            Turned::Cancelled => {
                return EvalError::host(
                    HostReason::Cancelled,
                    "the request was cancelled while it waited for its turn",
                );
            }
        };
        EvalError::host(
            HostReason::Busy,
            format!("the server is busy ({why}); retry shortly, or run fewer evaluations at once"),
        )
    }

    /// Admits the request against the global limits, now or in turn until `until`: a slot, and
    /// one chunk of the memory budget (held until the program ends; it reserves what it uses
    /// beyond as it grows). `busy` when the queue is full or the turn does not come in time.
    async fn admit(
        &self,
        until: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), EvalError> {
        let shutting_down = || {
            EvalError::host(
                HostReason::Busy,
                "the server is shutting down; retry on another replica",
            )
        };
        if !self.is_accepting() {
            return Err(shutting_down());
        }
        let _waited = self.metrics.queue_wait();
        let turns = async {
            let slot = self.slots.enter(1, until, cancel).await;
            let slot = slot.map_err(|t| {
                self.turned_away(
                    t,
                    &format!(
                        "{} programs are in flight, the limit",
                        self.limits.max_concurrent
                    ),
                )
            })?;
            // A program reserves memory as it grows; to start it needs one chunk free.
            let memory = self
                .memory
                .enter(ptc_lisp::RESERVE_CHUNK as u32, until, cancel)
                .await
                .map_err(|t| {
                    self.turned_away(
                        t,
                        &format!(
                            "the global memory budget of {} bytes is in use by programs in flight",
                            self.limits.memory_budget_bytes
                        ),
                    )
                })?;
            Ok((slot, memory))
        };
        tokio::select! {
            admitted = turns => admitted,
            () = self.closing.cancelled() => Err(shutting_down()),
        }
    }

    fn check_request(&self, req: &EvalRequest) -> Result<Option<Value>, EvalError> {
        if req.program.trim().is_empty() {
            return Err(EvalError::host(
                HostReason::InvalidRequest,
                "`program` is empty; send PTC-Lisp source such as (+ 1 2)",
            ));
        }
        if req.program.len() > self.limits.max_program_bytes {
            return Err(EvalError::host(
                HostReason::InvalidRequest,
                format!(
                    "`program` is {} bytes, over the limit of {}",
                    req.program.len(),
                    self.limits.max_program_bytes
                ),
            ));
        }
        if let Some(schema) = &req.output_schema
            && !schema.is_object()
        {
            return Err(EvalError::host(
                HostReason::InvalidRequest,
                "`output_schema` must be a JSON Schema object",
            ));
        }
        let Some(context) = &req.context else {
            return Ok(None);
        };
        let bytes = serde_json::to_vec(context).map_err(|e| {
            EvalError::host(
                HostReason::InvalidRequest,
                format!("`context` cannot be read: {e}"),
            )
        })?;
        if bytes.len() > self.limits.max_context_bytes {
            return Err(EvalError::host(
                HostReason::InvalidRequest,
                format!(
                    "`context` is {} bytes of JSON, over the limit of {}",
                    bytes.len(),
                    self.limits.max_context_bytes
                ),
            ));
        }
        Value::from_json_bytes(&bytes, &self.limits.lisp_limits())
            .map(Some)
            .map_err(|e| EvalError::host(HostReason::InvalidRequest, format!("`context`: {e}")))
    }

    /// Runs one request. `cancel` stops the program at its next check (the client's
    /// `notifications/cancelled`, or a closed session). It waits for its turn until
    /// [`Evaluator::wait_until`].
    pub async fn eval(&self, req: EvalRequest, cancel: CancellationToken) -> EvalOutcome {
        self.eval_within(req, cancel, self.wait_until(), None).await
    }

    /// [`Evaluator::eval`] for a request that may wait for its turn until `until` (a session
    /// that queued it already spent part of its wait), whose calls that need approval ask
    /// `approver` (`None`: nobody can be asked).
    pub async fn eval_within(
        &self,
        req: EvalRequest,
        cancel: CancellationToken,
        until: tokio::time::Instant,
        approver: Option<Arc<dyn Approver>>,
    ) -> EvalOutcome {
        let started = Instant::now();
        // Once for the audit line and the span.
        let hash = crate::program::program_hash(&req.program);
        let span = crate::telemetry::eval_span(
            req.tool.as_deref().unwrap_or(crate::server::tool::NAME),
            &req.program,
            |_| hash.clone(),
            &req.caller.subject,
            req.trace.as_ref(),
        );
        let outcome = self.eval_inner(&req, cancel, until, approver, &span).await;
        let outcome = EvalOutcome {
            duration: started.elapsed(),
            caller: req.caller.subject.clone(),
            tool: req.tool.clone(),
            ..outcome
        };
        crate::server::audit::record(&req.program, &hash, &outcome);
        let reason = outcome.result.as_ref().err().map(|e| e.reason.as_str());
        crate::telemetry::eval_ended(&span, reason, &outcome.records, outcome.prints.len());
        self.metrics.observe(&outcome, self.upstreams().catalog());
        outcome
    }

    async fn eval_inner(
        &self,
        req: &EvalRequest,
        cancel: CancellationToken,
        until: tokio::time::Instant,
        approver: Option<Arc<dyn Approver>>,
        span: &crate::telemetry::TraceSpan,
    ) -> EvalOutcome {
        let context = match self.check_request(req) {
            Ok(c) => c,
            Err(e) => return EvalOutcome::refused(e),
        };
        let grant = match self.grant(&req.caller) {
            Ok(g) => g,
            Err(e) => return EvalOutcome::refused(e),
        };
        let opened = match (self.sessions.get(), &req.session) {
            (Some(options), Some(name)) => {
                match session_run::open(options, &req.caller.subject, name).await {
                    Ok(o) => Some(o),
                    Err(e) => return EvalOutcome::refused(e),
                }
            }
            (None, Some(_)) => {
                return EvalOutcome::refused(EvalError::host(
                    HostReason::InvalidRequest,
                    "this deployment keeps no sessions (its host runs without --sessions): \
                     leave out `session`",
                ));
            }
            _ => None,
        };
        let restore = opened.as_ref().map(|o| o.state.clone());
        let permits = match self.admit(until, &cancel).await {
            Ok(p) => p,
            Err(e) => return EvalOutcome::refused(e),
        };
        self.in_flight.count.fetch_add(1, Ordering::AcqRel);
        let guard = InFlightGuard(self.in_flight.clone());

        // The interpreter is made here so its cancel flag is at hand without a watcher task:
        // every task hand-off is a thread wake-up, tens of microseconds on a virtual machine.
        // One snapshot for the whole run: a refresh meanwhile does not change its catalog.
        let upstreams = self.upstreams();
        // The program's calls are children of the span current when its host is made.
        // The client's person, when there is one, is also who consents to an upstream calling
        // as them (whether or not a webhook approves writes).
        let consent = approver.clone().map(|person| {
            Arc::new(crate::credentials::upstream_oauth::PersonConsent::new(
                person,
                crate::program::limits::CONSENT_WAIT,
            )) as Arc<dyn crate::credentials::upstream_oauth::Consent>
        });
        let host = Arc::new(span.in_scope(|| {
            ProgramHost::for_caller(
                upstreams.clone(),
                self.runtime.clone(),
                self.limits.budgets(),
                approver.unwrap_or_else(|| Arc::new(crate::call::approval::Nobody)),
                req.caller.clone(),
                grant,
            )
        }));
        if let Some(consent) = consent {
            host.set_consent(consent);
        }
        let recorder = self
            .record_dir
            .get()
            .map(|d| d.recorder(&self.limits.lisp_limits()));
        if let Some(r) = &recorder {
            host.set_tape(crate::program::record_replay::Tape::Record(r.clone()));
        }
        let mut interp = Interpreter::with_host(self.limits.lisp_limits(), host.clone());
        interp.set_memory_pool(self.memory.clone());
        let flag = interp.cancel_handle();
        if let Some(c) = context {
            interp.set_context(c);
        }
        let for_run = upstreams.clone();
        let program = req.program.clone();
        // A declared program's calls were checked when the plan was compiled.
        let checked = req.tool.is_some();
        let deadline = tokio::time::Instant::now() + self.limits.program_timeout;
        let stop_on = cancel.clone();
        let io = self.runtime.clone();
        let party: Arc<str> = Arc::from(req.party.as_deref().unwrap_or(&req.caller.subject));
        let job = self.workers.run(party, move || async move {
            let _held = (permits, guard);
            // While the program waits on its host, these end the wait; while it computes, it
            // notices the deadline and the cancel flag itself. The timer runs on the I/O runtime
            // (the evaluation thread has none), started only if the program ever waits.
            let stop = async move {
                let timer =
                    Spawned(io.spawn(async move { tokio::time::sleep_until(deadline).await }));
                tokio::select! {
                    () = stop_on.cancelled() => ptc_lisp::Reason::Cancelled,
                    _ = timer => ptc_lisp::Reason::Timeout,
                }
            };
            run(&for_run, &host, interp, &program, restore, checked, stop).await
        });
        let mut job = std::pin::pin!(job);
        let run = tokio::select! {
            r = &mut job => r,
            () = cancel.cancelled() => {
                flag.store(true, Ordering::Relaxed);
                job.await
            }
        };
        let Some((result, prints, records, after)) = run else {
            return EvalOutcome::refused(EvalError::host(
                HostReason::InternalError,
                "the evaluation stopped unexpectedly",
            ));
        };
        if let (Some(dir), Some(r)) = (self.record_dir.get(), recorder) {
            let context = req.context.as_ref();
            dir.save(
                upstreams.clone(),
                r,
                crate::program::record_replay::Evaluated {
                    program: &req.program,
                    tool: req.tool.as_deref(),
                    context,
                    prints: &prints,
                    result: &result,
                },
            )
            .await;
        }
        let session = match (opened, after) {
            (Some(o), Some(after)) => Some(o.save(&after).await),
            _ => None,
        };
        let redactor = upstreams.redactor();
        let result = match result {
            Ok(v) => {
                let json = v
                    .to_json_string()
                    .ok()
                    .and_then(|s| serde_json::from_str::<Json>(&redactor.redact(&s)).ok());
                let text = redactor.redact(&v.to_string()).into_owned();
                match (&req.output_schema, &json) {
                    (Some(schema), Some(j)) => match self.check_output(schema, j) {
                        Ok(()) => Ok(EvalValue { text, json }),
                        Err(e) => Err(e),
                    },
                    (Some(_), None) => Err(EvalError::host(
                        HostReason::OutputMismatch,
                        "the result has no JSON form (a function?), so it cannot match \
                         output_schema",
                    )),
                    (None, _) => Ok(EvalValue { text, json }),
                }
            }
            Err(e) => Err(lisp_error(&e, redactor)),
        };
        EvalOutcome {
            result,
            prints,
            records,
            duration: Duration::ZERO,
            caller: String::new(),
            session,
            tool: None,
        }
    }

    /// The result against the client's `output_schema`, with the validator `tool/call` uses for
    /// arguments (one validator): the result is checked as the single property `result`.
    fn check_output(&self, schema: &Json, value: &Json) -> Result<(), EvalError> {
        let mut root = serde_json::json!({
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
        });
        for key in ["$defs", "definitions"] {
            if let Some(d) = schema.get(key) {
                root[key] = d.clone();
            }
        }
        let mut args = Map::new();
        args.insert("result".into(), value.clone());
        let schema = Schema {
            root: &root,
            definitions: None,
        };
        check_args(schema, &self.patterns, args)
            .map(|_| ())
            .map_err(|problems| {
                EvalError::host(
                    HostReason::OutputMismatch,
                    format!(
                        "the result does not match output_schema: {}",
                        problems.join("; ")
                    ),
                )
            })
    }
}

type RunResult = (
    Result<Value, LispError>,
    String,
    RunRecords,
    Option<SessionState>,
);

/// The half on an evaluation thread: the pre-check (unless the plan compiler `checked` the
/// program, a declared one, at load), the session's definitions when it runs in one, then the
/// evaluation; with what it leaves for the session.
async fn run(
    upstreams: &Upstreams,
    host: &ProgramHost,
    mut interp: Interpreter,
    src: &str,
    session: Option<SessionState>,
    checked: bool,
    stop: impl std::future::Future<Output = ptc_lisp::Reason>,
) -> RunResult {
    if !checked && let Err(problems) = crate::program::precheck::precheck(upstreams, src) {
        return (
            Err(crate::program::precheck::to_error(&problems)),
            String::new(),
            host.records(None),
            None,
        );
    }
    let in_session = session.is_some();
    if let Some(state) = session {
        interp.enable_session(true);
        if let Err(e) = interp.restore_session(&state) {
            // Nothing is saved: the session keeps what it had.
            return (Err(e), String::new(), host.records(None), None);
        }
    }
    let result = interp.eval_async(src, stop).await;
    let prints = upstreams
        .redactor()
        .redact(&interp.take_output())
        .into_owned();
    let records = host.records(result.as_ref().ok());
    // Definitions made before an error are kept too, as at a REPL.
    let after = in_session.then(|| interp.session_state());
    (result, prints, records, after)
}

fn lisp_error(e: &LispError, redactor: &crate::credentials::redact::Redactor) -> EvalError {
    let mut message = e.message().to_string();
    if let Some(h) = e.hint() {
        message.push_str(" — ");
        message.push_str(h);
    }
    EvalError {
        reason: crate::server::outcome::EvalReason::Program(e.reason()),
        message: redactor.redact(&message).into_owned(),
        position: e.pos(),
        value: e
            .value()
            .and_then(|v| v.to_json_string().ok())
            .map(|s| redactor.redact(&s).into_owned())
            .and_then(|s| serde_json::from_str(&s).ok())
            .map(Box::new),
    }
}
