//! Traces: one OpenTelemetry span per evaluation (`lisp_eval`), a child per upstream call
//! (`tool/call`, and each page of `tool/pages`) and a child of a call per approval wait
//! (`approval`), exported as OTLP over HTTP/protobuf (docs/operations.md#traces).
//!
//! Off unless configured ([`TraceConfig::from_env`]): then no span is made and nothing is added
//! to an upstream request, so tracing off costs one relaxed atomic load per evaluation and per
//! call. A span's attributes are names, hashes, counts and reasons: never a program, an argument,
//! a result, a header or a secret. The logs and the traces are separate: no log event becomes a
//! span event.
//!
//! **Only ids on the program's path.** A span is a record ([`TraceSpan`]): its identity (minted
//! where it starts, since its children and the requests it propagates to need it at once), its
//! start time and the attributes noted on it. When it ends, the record becomes the SDK's span
//! data and goes to the SDK's batch processor, whose thread encodes and exports it. No SDK span is
//! made on the path: on a one-call program, minting and propagating the ids alone cost nothing
//! measurable where the SDK's spans cost 6 % (docs/performance.md#traces-issue-28). The sampler
//! is the SDK's (`OTEL_TRACES_SAMPLER`), asked once per trace root as the SDK asks it; a span under
//! one of ptc's inherits its decision, which is what every sampler the SDK offers decides there.
//!
//! A span is current the way OpenTelemetry makes it so: a context holding it is attached while
//! the future it covers is polled (`traced`), which is where an upstream request reads what it
//! propagates (`outgoing`) and the call's status is noted.

mod export;
mod parent;
mod record;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use futures_util::future::Either;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Context, KeyValue};

pub use export::{TraceConfig, Traces};
pub use parent::TraceParent;
use record::{Active, Current, Open, Under, carried, note_in};

use crate::program::run_report::RunRecords;

/// Whether spans are made: a [`Traces`] is running and recording.
static ON: AtomicBool = AtomicBool::new(false);

/// How the running [`Traces`] makes spans and where they go when they end.
static ACTIVE: RwLock<Option<Arc<Active>>> = RwLock::new(None);

/// Whether traces are on: an exporter is running and recording.
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns span making on or off while the exporter runs. [`Traces::start`] turns it on; the bench
/// turns it off to measure the same program without traces in the same process.
pub fn set_recording(on: bool) {
    let running = ACTIVE.read().is_ok_and(|t| t.is_some());
    ON.store(on && running, Ordering::Relaxed);
}

/// The running exporter's span making, when traces are on.
fn active() -> Option<Arc<Active>> {
    if !is_on() {
        return None;
    }
    ACTIVE.read().ok()?.clone()
}

/// One of ptc's spans; none when traces are off. Ended by its `*_ended` function, or when its
/// last clone is dropped.
#[derive(Clone, Debug, Default)]
pub struct TraceSpan(Option<Arc<Open>>);

impl TraceSpan {
    /// Runs `f` with this span current: the spans `f` starts are its children.
    pub fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        let _current = self
            .0
            .as_ref()
            .map(|open| Context::new().with_value(Current(open.clone())).attach());
        f()
    }

    /// Ends the span with `attributes`, `ptc.outcome`, `ptc.reason` and, for an error, the span's
    /// status (its reason, never the message: a message may quote the program's data).
    fn end(&self, attributes: impl IntoIterator<Item = KeyValue>, reason: Option<&str>) {
        // Traces off: nothing is collected, formatted or allocated.
        let Some(open) = &self.0 else { return };
        let (outcome, status) = match reason {
            None => (KeyValue::new("ptc.outcome", "ok"), Status::Unset),
            Some(r) => (
                KeyValue::new("ptc.outcome", "error"),
                Status::error(r.to_string()),
            ),
        };
        let reason = reason.map(|r| KeyValue::new("ptc.reason", r.to_string()));
        open.end(
            attributes.into_iter().chain([outcome]).chain(reason),
            status,
        );
    }
}

/// `fut` with `span` current while it is polled; `fut` itself when traces are off.
pub(crate) fn traced<F: Future>(
    fut: F,
    span: &TraceSpan,
) -> impl Future<Output = F::Output> + use<F> {
    match &span.0 {
        None => Either::Left(fut),
        Some(open) => {
            Either::Right(fut.with_context(Context::new().with_value(Current(open.clone()))))
        }
    }
}

/// The span the calls of one program run are children of (the evaluation's).
#[derive(Clone, Debug)]
pub(crate) struct Parent(Arc<Open>);

impl Parent {
    /// The current span, when traces are on and a span is current.
    pub(crate) fn current() -> Option<Parent> {
        if !is_on() {
            return None;
        }
        Context::map_current(|cx| cx.get::<Current>().map(|c| Parent(c.0.clone())))
    }
}

/// The span of one evaluation of `program` for `caller`, continuing `parent`'s trace when the
/// request carried one; none when traces are off. It is named `name`, after the tool called
/// (`lisp_eval`, or the declared program the request ran). `hash` gives the program's hash
/// (`program::program_hash`), asked only when traces are on. Ended by [`eval_ended`].
pub fn eval_span(
    name: &str,
    program: &str,
    hash: impl FnOnce(&str) -> String,
    caller: &str,
    parent: Option<&TraceParent>,
) -> TraceSpan {
    let Some(active) = active() else {
        return TraceSpan(None);
    };
    let attributes = vec![
        KeyValue::new("ptc.program.sha256", hash(program)),
        KeyValue::new("ptc.program.bytes", int(program.len() as u64)),
        KeyValue::new("ptc.caller", caller.to_string()),
    ];
    // A root unless the caller sent its trace: never a child of whatever the host's thread had.
    let caller = parent.map(TraceParent::context);
    let under = caller.as_ref().map_or(Under::Nothing, Under::Caller);
    let open = Open::start(
        active,
        name.to_string(),
        SpanKind::Server,
        attributes,
        under,
    );
    TraceSpan(Some(Arc::new(open)))
}

/// Records how the evaluation of `span` ended: its error's reason (`None`: a value), what it
/// read from upstreams and what it answered with.
pub fn eval_ended(
    span: &TraceSpan,
    reason: Option<&str>,
    records: &RunRecords,
    prints_bytes: usize,
) {
    let m = &records.ptc_metrics;
    span.end(
        [
            KeyValue::new("ptc.upstream.calls", int(m.upstream_call_count)),
            KeyValue::new("ptc.upstream.bytes", int(m.upstream_result_bytes)),
            KeyValue::new("ptc.result.bytes", int(m.final_result_bytes)),
            KeyValue::new("ptc.prints.bytes", int(prints_bytes as u64)),
        ],
        reason,
    );
}

/// A count as an OpenTelemetry integer.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The span of one upstream call of `server/tool` over `transport` (page `page` of a
/// `tool/pages`), a child of `parent`; none when there is no parent (traces off).
/// Ended by [`call_ended`].
pub(crate) fn call_span(
    parent: Option<&Parent>,
    server: &str,
    tool: &str,
    transport: impl FnOnce() -> &'static str,
    page: Option<u64>,
) -> TraceSpan {
    let Some(parent) = parent else {
        return TraceSpan(None);
    };
    let mut attributes = vec![
        KeyValue::new("ptc.upstream", server.to_string()),
        KeyValue::new("ptc.tool", tool.to_string()),
        KeyValue::new("ptc.transport", transport()),
    ];
    let name = match page {
        None => "tool/call",
        Some(n) => {
            attributes.push(KeyValue::new("ptc.page", int(n)));
            "tool/pages"
        }
    };
    let under = Under::Span(&parent.0);
    let mut open = Open::start(
        parent.0.active.clone(),
        name,
        SpanKind::Client,
        attributes,
        under,
    );
    open.carried = carried(&open.context);
    TraceSpan(Some(Arc::new(open)))
}

/// Records how the call of `span` ended: its reason (`None`: answered), the answer's bytes and
/// the time since `started`.
pub(crate) fn call_ended(span: &TraceSpan, reason: Option<&str>, bytes: u64, started: Instant) {
    span.end(
        [
            KeyValue::new("ptc.bytes", int(bytes)),
            KeyValue::new("ptc.duration_ms", int(started.elapsed().as_millis() as u64)),
        ],
        reason,
    );
}

/// The span of a wait for a person's approval, a child of the call waiting (the current span);
/// none when traces are off. Ended by [`approval_ended`].
pub(crate) fn approval_span() -> TraceSpan {
    let Some(active) = active() else {
        return TraceSpan(None);
    };
    let open = Context::map_current(|cx| {
        let under = cx
            .get::<Current>()
            .map_or(Under::Nothing, |c| Under::Span(&c.0));
        Open::start(active, "approval", SpanKind::Internal, Vec::new(), under)
    });
    TraceSpan(Some(Arc::new(open)))
}

/// Records the person's answer (`approved`, `declined`, `unavailable`); the span ends.
pub(crate) fn approval_ended(span: &TraceSpan, answer: &str) {
    if let Some(open) = &span.0 {
        open.end(
            [KeyValue::new("ptc.approval", answer.to_string())],
            Status::Unset,
        );
    }
}

/// Notes `attribute` on the current span (the call's), when traces are on.
fn note(attribute: impl FnOnce() -> KeyValue) {
    if is_on() {
        Context::map_current(|cx| note_in(cx, attribute));
    }
}

/// Notes the HTTP status an upstream answered the current call with.
pub(crate) fn note_status(status: u16) {
    note(|| KeyValue::new("http.response.status_code", i64::from(status)));
}

/// Notes how many times the current call has been retried so far.
pub(crate) fn note_retries(retries: u32) {
    note(|| KeyValue::new("ptc.retries", i64::from(retries)));
}

/// The trace context an upstream request of the current call carries (`traceparent` and
/// `tracestate`, as HTTP headers or MCP `_meta` keys), so the upstream's own spans join the
/// trace; none when traces are off or no call span is current.
pub(crate) fn outgoing() -> Vec<(&'static str, String)> {
    if !is_on() {
        return Vec::new();
    }
    Context::map_current(|cx| {
        cx.get::<Current>()
            .map(|c| c.0.carried.clone())
            .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn with_traces_off_no_span_is_made_and_nothing_is_propagated() {
        // Nothing in this test binary starts an exporter, so recording cannot be turned on.
        super::set_recording(true);
        assert!(!super::is_on());
        let parent = TraceParent {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: None,
        };
        let hash = |_: &str| -> String { panic!("the program is hashed with traces off") };
        assert!(
            super::eval_span("lisp_eval", "(+ 1 2)", hash, "local", Some(&parent))
                .0
                .is_none()
        );
        assert!(super::Parent::current().is_none());
        let transport = || -> &'static str { panic!("the transport is looked up with traces off") };
        assert!(
            super::call_span(None, "obs", "list", transport, None)
                .0
                .is_none()
        );
        assert!(super::approval_span().0.is_none());
        assert!(super::outgoing().is_empty());
    }
}
