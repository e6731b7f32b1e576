//! A span as ptc holds it while it is open: its identity, minted where it starts, its start
//! time and its attributes. When it ends it becomes the SDK's [`SpanData`], handed to the batch
//! processor (see the module above for why the SDK's own spans are not made on the path).

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceContextExt};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, SamplingDecision, ShouldSample, SpanData, SpanEvents,
    SpanLinks, SpanProcessor,
};

/// What spans are made with: the sampler and ids of the SDK's defaults, and the processor ended
/// spans are handed to.
#[derive(Debug)]
pub(super) struct Active {
    sampler: Box<dyn ShouldSample>,
    ids: RandomIdGenerator,
    scope: InstrumentationScope,
    processor: Arc<dyn SpanProcessor>,
}

impl Active {
    /// Spans sampled as `OTEL_TRACES_SAMPLER` says (the SDK's default: every root, and a
    /// remote parent's decision), handed to `processor` when they end.
    pub(super) fn new(processor: Arc<dyn SpanProcessor>) -> Self {
        Active {
            sampler: opentelemetry_sdk::trace::Config::default().sampler,
            ids: RandomIdGenerator::default(),
            scope: InstrumentationScope::builder("ptc").build(),
            processor,
        }
    }
}

/// A span that has not been handed to the processor yet.
#[derive(Debug)]
pub(super) struct Open {
    name: Cow<'static, str>,
    kind: SpanKind,
    /// Its identity: trace, span, whether the trace is sampled, the vendors' state.
    pub(super) context: SpanContext,
    /// Its parent's span id (invalid for a root) and whether that parent is the caller's.
    parent: (SpanId, bool),
    started: SystemTime,
    /// Its attributes so far: those it started with, then the notes taken on it
    /// ([`note`](super::note)); `None` once it has ended.
    attributes: Mutex<Option<Vec<KeyValue>>>,
    /// What an upstream request of this call carries ([`outgoing`](super::outgoing)), formatted
    /// where the span starts; empty for the other spans.
    pub(super) carried: Vec<(&'static str, String)>,
    pub(super) active: Arc<Active>,
}

/// The span a context holds while its future is polled ([`traced`](super::traced),
/// [`TraceSpan::in_scope`](super::TraceSpan::in_scope)).
#[derive(Debug)]
pub(super) struct Current(pub(super) Arc<Open>);

/// Where a new span hangs.
pub(super) enum Under<'a> {
    /// Nowhere: a new trace.
    Nothing,
    /// The caller's span, from the request's `traceparent` (the context it was read into).
    Caller(&'a Context),
    /// One of ptc's spans.
    Span(&'a Open),
}

impl Open {
    /// A new span named `name` of `kind` with `attributes` under `parent`, asked of the sampler
    /// unless its parent is one of ptc's spans.
    pub(super) fn start(
        active: Arc<Active>,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        mut attributes: Vec<KeyValue>,
        parent: Under<'_>,
    ) -> Open {
        let name = name.into();
        let span_id = active.ids.new_span_id();
        let (context, parent) = match parent {
            Under::Span(p) => {
                let pc = &p.context;
                let context = SpanContext::new(
                    pc.trace_id(),
                    span_id,
                    pc.trace_flags(),
                    false,
                    pc.trace_state().clone(),
                );
                (context, (pc.span_id(), false))
            }
            Under::Nothing => Self::sampled(
                &active,
                &Context::new(),
                &name,
                &kind,
                span_id,
                &mut attributes,
            ),
            Under::Caller(cx) => Self::sampled(&active, cx, &name, &kind, span_id, &mut attributes),
        };
        Open {
            name,
            kind,
            context,
            parent,
            started: SystemTime::now(),
            attributes: Mutex::new(Some(attributes)),
            carried: Vec::new(),
            active,
        }
    }

    /// The identity of a span under `cx`'s remote span (or of a new trace), as the sampler
    /// decides it, as the SDK's tracer makes it; its parent.
    fn sampled(
        active: &Active,
        cx: &Context,
        name: &str,
        kind: &SpanKind,
        span_id: SpanId,
        attributes: &mut Vec<KeyValue>,
    ) -> (SpanContext, (SpanId, bool)) {
        let parent = cx.span().span_context().clone();
        let valid = parent.is_valid();
        let trace_id = if valid {
            parent.trace_id()
        } else {
            active.ids.new_trace_id()
        };
        let decision =
            active
                .sampler
                .should_sample(Some(cx), trace_id, name, kind, attributes, &[]);
        let flags = match decision.decision {
            SamplingDecision::RecordAndSample => parent.trace_flags().with_sampled(true),
            SamplingDecision::RecordOnly | SamplingDecision::Drop => {
                parent.trace_flags().with_sampled(false)
            }
        };
        attributes.extend(decision.attributes);
        let context = SpanContext::new(trace_id, span_id, flags, false, decision.trace_state);
        let parent = if valid {
            (parent.span_id(), parent.is_remote())
        } else {
            (SpanId::INVALID, false)
        };
        (context, parent)
    }

    /// Ends the span with `attributes` besides those it has and `status`: a sampled span goes
    /// to the processor. Once: a second end does nothing.
    pub(super) fn end(&self, attributes: impl IntoIterator<Item = KeyValue>, status: Status) {
        let ended = SystemTime::now();
        let Some(mut all) = self
            .attributes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        if !self.context.is_sampled() {
            return;
        }
        all.extend(attributes);
        self.active.processor.on_end(SpanData {
            span_context: self.context.clone(),
            parent_span_id: self.parent.0,
            parent_span_is_remote: self.parent.1,
            span_kind: self.kind.clone(),
            name: self.name.clone(),
            start_time: self.started,
            end_time: ended,
            attributes: all,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.active.scope.clone(),
        });
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.end([], Status::Unset);
    }
}

/// Notes `attribute` on `cx`'s span, when it holds one that has not ended.
pub(super) fn note_in(cx: &Context, attribute: impl FnOnce() -> KeyValue) {
    if let Some(Current(open)) = cx.get::<Current>()
        && let Some(attributes) = open
            .attributes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
    {
        attributes.push(attribute());
    }
}

/// The `traceparent` and `tracestate` that carry `span` on, as the SDK's propagator writes them.
pub(super) fn carried(span: &SpanContext) -> Vec<(&'static str, String)> {
    let mut out = Outgoing(Vec::new());
    let cx = Context::new().with_remote_span_context(span.clone());
    TraceContextPropagator::new().inject_context(&cx, &mut out);
    out.0
}

/// The propagator's carrier for [`carried`].
struct Outgoing(Vec<(&'static str, String)>);

impl Injector for Outgoing {
    fn set(&mut self, key: &str, value: String) {
        let key = match key {
            "traceparent" => "traceparent",
            // The propagator writes an empty state too; an empty header says nothing.
            "tracestate" if !value.is_empty() => "tracestate",
            _ => return,
        };
        self.0.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    use super::{Active, Open, Under};
    use crate::telemetry::{TraceParent, TraceSpan};
    use opentelemetry::trace::{SpanId, SpanKind, Status};
    use opentelemetry::{Context, KeyValue};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{Sampler, SpanData, SpanProcessor};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, SystemTime};

    /// The spans handed to the processor, in order.
    #[derive(Debug, Default, Clone)]
    struct Finished(Arc<Mutex<Vec<SpanData>>>);

    impl SpanProcessor for Finished {
        fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    impl Finished {
        fn take(&self) -> Vec<SpanData> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    fn active() -> (Arc<Active>, Finished) {
        let finished = Finished::default();
        (Arc::new(Active::new(Arc::new(finished.clone()))), finished)
    }

    /// Span making whose sampler is `sampler` rather than the environment's.
    fn sampled_by(sampler: Sampler) -> (Arc<Active>, Finished) {
        let finished = Finished::default();
        let mut active = Active::new(Arc::new(finished.clone()));
        active.sampler = Box::new(sampler);
        (Arc::new(active), finished)
    }

    fn caller(traceparent: &str, tracestate: Option<&str>) -> Context {
        TraceParent {
            traceparent: traceparent.into(),
            tracestate: tracestate.map(str::to_string),
        }
        .context()
    }

    /// An evaluation's span that starts a new trace (no caller's context).
    fn new_trace(active: Arc<Active>) -> Open {
        Open::start(
            active,
            "lisp_eval",
            SpanKind::Server,
            Vec::new(),
            Under::Nothing,
        )
    }

    /// An evaluation's span under the caller's context `cx`, and a call's span under it.
    fn eval_and_call(active: Arc<Active>, cx: &Context) -> (Open, Open) {
        let eval = Open::start(
            active.clone(),
            "lisp_eval",
            SpanKind::Server,
            Vec::new(),
            Under::Caller(cx),
        );
        let call = Open::start(
            active,
            "tool/call",
            SpanKind::Client,
            Vec::new(),
            Under::Span(&eval),
        );
        (eval, call)
    }

    fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
        let kv = span.attributes.iter().find(|kv| kv.key.as_str() == key)?;
        Some(&kv.value)
    }

    #[test]
    fn a_call_carries_the_trace_and_its_state_on() {
        use opentelemetry::trace::TraceContextExt;
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let with_state = TraceParent {
            traceparent: tp.into(),
            tracestate: Some("vendor=opaque".into()),
        };
        assert_eq!(
            super::carried(&with_state.context().span().span_context().clone()),
            [
                ("traceparent", tp.to_string()),
                ("tracestate", "vendor=opaque".to_string())
            ]
        );
        let without = TraceParent {
            traceparent: tp.into(),
            tracestate: None,
        };
        assert_eq!(
            super::carried(&without.context().span().span_context().clone()),
            [("traceparent", tp.to_string())]
        );
    }

    #[test]
    fn a_root_span_starts_a_sampled_trace_and_ends_as_the_sdks_span_data() {
        let (active, finished) = active();
        let before = SystemTime::now();
        let span = TraceSpan(Some(Arc::new(Open::start(
            active,
            "lisp_eval",
            SpanKind::Server,
            vec![KeyValue::new("ptc.caller", "local")],
            Under::Nothing,
        ))));
        assert!(
            finished.take().is_empty(),
            "nothing is handed over before it ends"
        );
        span.end([KeyValue::new("ptc.bytes", 3)], Some("fail"));
        let [data] = finished.take().try_into().unwrap();
        assert_eq!(data.name, "lisp_eval");
        assert_eq!(data.span_kind, SpanKind::Server);
        assert!(data.span_context.is_valid() && data.span_context.is_sampled());
        assert!(!data.span_context.is_remote());
        assert_eq!(data.parent_span_id, SpanId::INVALID, "a root");
        assert!(!data.parent_span_is_remote);
        assert!(before <= data.start_time && data.start_time <= data.end_time);
        assert_eq!(
            data.attributes,
            [
                KeyValue::new("ptc.caller", "local"),
                KeyValue::new("ptc.bytes", 3),
                KeyValue::new("ptc.outcome", "error"),
                KeyValue::new("ptc.reason", "fail"),
            ]
        );
        assert_eq!(data.status, Status::error("fail"));
        assert_eq!(data.instrumentation_scope.name(), "ptc");
        // Once: ending again, or dropping the last clone, hands nothing more over.
        span.end([], None);
        drop(span);
        assert!(finished.take().is_empty());
    }

    #[test]
    fn a_span_under_the_callers_trace_and_a_call_under_it_keep_the_trace_and_its_state() {
        let (active, finished) = active();
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = caller(tp, Some("vendor=opaque"));
        let (eval, call) = eval_and_call(active, &cx);
        let (e, c) = (eval.context.clone(), call.context.clone());
        assert_eq!(e.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.trace_id(), e.trace_id());
        assert_ne!(c.span_id(), e.span_id());
        assert_eq!(c.trace_state().header(), "vendor=opaque");
        assert_eq!(
            super::carried(&c),
            [
                (
                    "traceparent",
                    format!("00-{}-{}-01", c.trace_id(), c.span_id())
                ),
                ("tracestate", "vendor=opaque".to_string())
            ]
        );
        drop(call);
        drop(eval);
        let [call, eval] = finished.take().try_into().unwrap();
        assert_eq!(eval.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert!(eval.parent_span_is_remote, "the caller's span");
        assert_eq!(call.parent_span_id, e.span_id());
        assert!(!call.parent_span_is_remote);
        assert_eq!(
            call.status,
            Status::Unset,
            "dropped unended: ended without a status"
        );
    }

    #[test]
    fn a_trace_the_caller_did_not_sample_is_propagated_unsampled_and_nothing_is_exported() {
        let (active, finished) = active();
        let cx = caller(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            None,
        );
        let (eval, call) = eval_and_call(active, &cx);
        assert!(!eval.context.is_sampled() && !call.context.is_sampled());
        let carried = super::carried(&call.context);
        assert_eq!(
            carried,
            [(
                "traceparent",
                format!(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-00",
                    call.context.span_id()
                )
            )]
        );
        drop((call, eval));
        assert!(finished.take().is_empty());
    }

    #[test]
    fn notes_taken_while_a_span_is_current_end_with_it() {
        let (active, finished) = active();
        let span = TraceSpan(Some(Arc::new(Open::start(
            active,
            "tool/call",
            SpanKind::Client,
            Vec::new(),
            Under::Nothing,
        ))));
        let note = |n: i64| Context::map_current(|cx| super::note_in(cx, || KeyValue::new("n", n)));
        note(1);
        span.in_scope(|| note(2));
        span.end([], None);
        span.in_scope(|| note(3));
        let [data] = finished.take().try_into().unwrap();
        assert_eq!(
            attribute(&data, "n"),
            Some(&2.into()),
            "noted in scope only"
        );
        assert_eq!(
            data.attributes.len(),
            2,
            "and not once ended: {:?}",
            data.attributes
        );
        assert_eq!(attribute(&data, "ptc.outcome"), Some(&"ok".into()));
    }

    #[test]
    fn the_sampler_decides_a_new_trace_and_its_calls_follow_the_decision() {
        // A sampled caller's trace under a sampler that drops everything: the sampler's word,
        // not the caller's flag, decides, and the call inherits it.
        let sampled = caller(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            None,
        );
        let (active, finished) = sampled_by(Sampler::AlwaysOff);
        let (eval, call) = eval_and_call(active.clone(), &sampled);
        assert!(!eval.context.is_sampled() && !call.context.is_sampled());
        assert_eq!(eval.context.trace_id(), call.context.trace_id());
        let root = new_trace(active);
        assert!(root.context.is_valid() && !root.context.is_sampled());
        drop((call, eval, root));
        assert!(finished.take().is_empty(), "nothing dropped is exported");
        // A new trace is sampled by the default sampler, and only the caller's flag says no.
        let (active, finished) = sampled_by(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
        let root = new_trace(active);
        assert!(root.context.is_sampled());
        drop(root);
        assert_eq!(finished.take().len(), 1);
    }
}
