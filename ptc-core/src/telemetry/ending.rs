//! Ending spans off the program's path. Ending an SDK span (its last attributes set, its record
//! built and handed to the batch processor) took 2–3 µs on a busy evaluation's thread, where the
//! whole of a one-call evaluation over HTTP is about 500 µs; a span that ends here is a queue push
//! there, and a thread of its own hands the queued spans to the SDK's batch processor in batches,
//! each with the times it started and ended at.
//!
//! The thread is not woken per span (a wake costs more than the work): it looks at the queue
//! every [`INTERVAL`], or at once when [`WAKE_AT`] spans wait. A full queue never loses a span:
//! the span ends where it ended, as it did before this queue.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks, SpanProcessor};

/// How many ended spans may wait (the SDK's own export queue holds 2,048 by default).
pub(super) const CAPACITY: usize = 2048;
/// How many waiting spans wake the thread before its interval is up.
pub(super) const WAKE_AT: usize = 256;
/// How often the thread looks at the queue: the SDK's batch processor waits up to 5 s to
/// export, so a tenth of a second more is not seen.
const INTERVAL: Duration = Duration::from_millis(100);

/// A recorded span as it started: its identity, its parent's, and its attributes so far.
#[derive(Debug)]
pub(super) struct Started {
    pub(super) name: &'static str,
    pub(super) kind: SpanKind,
    pub(super) context: SpanContext,
    /// The parent's span id (`SpanId::INVALID` for a root) and whether it is the caller's.
    pub(super) parent: SpanId,
    pub(super) parent_is_remote: bool,
    pub(super) at: SystemTime,
    pub(super) attributes: Vec<KeyValue>,
}

/// A span that ended: how it started, and what it ended with.
#[derive(Debug)]
pub(super) struct Ended {
    pub(super) started: Started,
    pub(super) attributes: Vec<KeyValue>,
    pub(super) status: Status,
    pub(super) at: SystemTime,
}

impl Ended {
    /// The span's record, as the SDK's processors take it.
    fn data(self, scope: &InstrumentationScope) -> SpanData {
        let Started {
            name,
            kind,
            context,
            parent,
            parent_is_remote,
            at: start_time,
            mut attributes,
        } = self.started;
        attributes.extend(self.attributes);
        SpanData {
            span_context: context,
            parent_span_id: parent,
            parent_span_is_remote: parent_is_remote,
            span_kind: kind,
            name: name.into(),
            start_time,
            end_time: self.at,
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: self.status,
            instrumentation_scope: scope.clone(),
        }
    }
}

/// The queue of ended spans, the thread that hands them on, and the processor they go to.
#[derive(Debug)]
pub(super) struct Ending {
    processor: Box<dyn SpanProcessor>,
    scope: InstrumentationScope,
    queue: SyncSender<Ended>,
    waiting: Mutex<Receiver<Ended>>,
    /// Spans queued and not yet finished (an estimate the wake is decided on).
    len: AtomicUsize,
    stopped: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Ending {
    /// The queue in front of `processor`, with its thread started.
    pub(super) fn start(processor: Box<dyn SpanProcessor>) -> Result<Arc<Ending>, String> {
        let ending = Self::new(processor, CAPACITY);
        ending.spawn(INTERVAL)?;
        Ok(ending)
    }

    /// The queue for `capacity` spans, with no thread yet: spans wait for [`Ending::drain`].
    pub(super) fn new(processor: Box<dyn SpanProcessor>, capacity: usize) -> Arc<Ending> {
        let (queue, waiting) = sync_channel(capacity);
        Arc::new(Ending {
            processor,
            scope: InstrumentationScope::builder("ptc").build(),
            queue,
            waiting: Mutex::new(waiting),
            len: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            thread: Mutex::new(None),
        })
    }

    /// Starts the thread, looking at the queue every `interval` unless woken.
    fn spawn(self: &Arc<Self>, interval: Duration) -> Result<(), String> {
        let run = self.clone();
        let thread = std::thread::Builder::new()
            .name("ptc-span-ending".into())
            .spawn(move || run.run(interval))
            .map_err(|e| format!("cannot start the thread that ends spans: {e}"))?;
        *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
        Ok(())
    }

    /// Queues `ended` for the thread, waking it when [`WAKE_AT`] spans wait; finishes it here
    /// when the queue is full or stopped. Whether it woke the thread.
    pub(super) fn end(&self, ended: Ended) -> bool {
        if self.stopped.load(Ordering::Acquire) {
            self.finish(ended);
            return false;
        }
        match self.queue.try_send(ended) {
            Ok(()) => {
                let wake = self.len.fetch_add(1, Ordering::AcqRel) + 1 == WAKE_AT;
                if wake {
                    self.wake();
                }
                wake
            }
            Err(TrySendError::Full(ended) | TrySendError::Disconnected(ended)) => {
                self.finish(ended);
                false
            }
        }
    }

    /// Finishes every span queued so far, on the calling thread.
    pub(super) fn drain(&self) {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        while let Ok(ended) = waiting.try_recv() {
            self.len.fetch_sub(1, Ordering::AcqRel);
            self.finish(ended);
        }
    }

    /// Hands `ended` to the processor.
    fn finish(&self, ended: Ended) {
        self.processor.on_end(ended.data(&self.scope));
    }

    /// Hands on what is queued and has the processor export it, waiting for the collector.
    pub(super) fn flush(&self) -> Result<(), String> {
        self.drain();
        self.processor
            .force_flush()
            .map_err(|e| format!("the trace export failed: {e}"))
    }

    /// Stops the thread once it has handed on what is queued, then the processor (which exports
    /// what it holds); spans that end later go to the stopped processor, which drops them.
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            thread.thread().unpark();
            let _ = thread.join();
        }
        self.drain();
        let _ = self.processor.shutdown();
    }

    fn wake(&self) {
        if let Some(thread) = &*self.thread.lock().unwrap_or_else(|e| e.into_inner()) {
            thread.thread().unpark();
        }
    }

    fn run(&self, interval: Duration) {
        while !self.stopped.load(Ordering::Acquire) {
            std::thread::park_timeout(interval);
            self.drain();
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::{CAPACITY, Ended, Ending, Started, WAKE_AT};
    use opentelemetry::trace::TraceState;
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId};
    use opentelemetry::{Context, KeyValue};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanProcessor};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant, SystemTime};

    /// The spans a processor was handed, in order, and whether it was shut down.
    #[derive(Debug, Default, Clone)]
    pub(in crate::telemetry) struct Finished(
        pub(in crate::telemetry) Arc<Mutex<Vec<SpanData>>>,
        Arc<AtomicBool>,
    );

    impl Finished {
        fn names(&self) -> Vec<String> {
            let spans = self.0.lock().unwrap();
            spans.iter().map(|s| s.name.to_string()).collect()
        }

        pub(in crate::telemetry) fn ending(&self, capacity: usize) -> Arc<Ending> {
            Ending::new(Box::new(self.clone()), capacity)
        }
    }

    impl SpanProcessor for Finished {
        fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            self.1.store(true, Ordering::SeqCst);
            Ok(())
        }
    }

    fn ended(name: &'static str) -> Ended {
        Ended {
            started: Started {
                name,
                kind: SpanKind::Client,
                context: SpanContext::new(
                    TraceId::from(7),
                    SpanId::from(9),
                    TraceFlags::SAMPLED,
                    false,
                    TraceState::default(),
                ),
                parent: SpanId::from(8),
                parent_is_remote: true,
                at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                attributes: vec![KeyValue::new("ptc.tool", "list")],
            },
            attributes: vec![KeyValue::new("ptc.bytes", 12)],
            status: Status::error("timeout"),
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_001),
        }
    }

    #[test]
    fn a_queued_span_is_handed_on_when_drained_as_it_started_and_ended() {
        let finished = Finished::default();
        let ending = finished.ending(CAPACITY);
        assert!(!ending.end(ended("tool/call")));
        assert!(
            finished.names().is_empty(),
            "handed on off the caller's path"
        );
        ending.drain();
        let spans = finished.0.lock().unwrap();
        let [span] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        let expected = ended("tool/call");
        assert_eq!(span.name, "tool/call");
        assert_eq!(span.span_kind, SpanKind::Client);
        assert_eq!(span.span_context, expected.started.context);
        assert_eq!(
            (span.parent_span_id, span.parent_span_is_remote),
            (SpanId::from(8), true)
        );
        assert_eq!(
            (span.start_time, span.end_time),
            (expected.started.at, expected.at)
        );
        assert_eq!(
            span.attributes,
            [
                KeyValue::new("ptc.tool", "list"),
                KeyValue::new("ptc.bytes", 12)
            ]
        );
        assert_eq!(span.status, Status::error("timeout"));
        assert_eq!(span.instrumentation_scope.name(), "ptc");
    }

    #[test]
    fn a_full_queue_hands_the_span_on_where_it_ended_and_loses_none() {
        let finished = Finished::default();
        let ending = finished.ending(2);
        for name in ["a", "b"] {
            ending.end(ended(name));
        }
        assert!(finished.names().is_empty());
        ending.end(ended("c"));
        assert_eq!(finished.names(), ["c"]);
        ending.drain();
        assert_eq!(finished.names(), ["c", "a", "b"]);
    }

    #[test]
    fn the_thread_is_woken_when_the_queue_holds_its_batch() {
        let finished = Finished::default();
        let ending = finished.ending(CAPACITY);
        let woke: Vec<bool> = (0..WAKE_AT + 1).map(|_| ending.end(ended("s"))).collect();
        assert_eq!(woke.iter().position(|w| *w), Some(WAKE_AT - 1));
        assert_eq!(woke.iter().filter(|w| **w).count(), 1);
        ending.drain();
        assert_eq!(finished.names().len(), WAKE_AT + 1);
        // Drained, the count starts again: the next batch wakes the thread again.
        let woke: Vec<bool> = (0..WAKE_AT).map(|_| ending.end(ended("s"))).collect();
        assert_eq!(woke.iter().position(|w| *w), Some(WAKE_AT - 1));
    }

    #[test]
    fn a_woken_thread_hands_the_batch_on_before_its_interval() {
        let finished = Finished::default();
        let ending = finished.ending(CAPACITY);
        ending.spawn(Duration::from_secs(3600)).unwrap();
        for _ in 0..WAKE_AT {
            ending.end(ended("s"));
        }
        let waited = Instant::now();
        while finished.names().len() < WAKE_AT {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "the woken thread handed on {} spans",
                finished.names().len()
            );
            std::thread::yield_now();
        }
        ending.stop();
    }

    #[test]
    fn flushing_hands_on_what_is_queued_first() {
        let finished = Finished::default();
        let ending = finished.ending(CAPACITY);
        ending.end(ended("queued"));
        ending.flush().unwrap();
        assert_eq!(finished.names(), ["queued"]);
    }

    #[test]
    fn stopping_hands_on_what_is_queued_then_stops_the_processor() {
        let finished = Finished::default();
        let ending = finished.ending(CAPACITY);
        ending.spawn(Duration::from_secs(3600)).unwrap();
        ending.end(ended("queued"));
        ending.stop();
        assert_eq!(finished.names(), ["queued"]);
        assert!(
            finished.1.load(Ordering::SeqCst),
            "the processor was shut down"
        );
        assert!(
            ending.thread.lock().unwrap().is_none(),
            "the thread was joined"
        );
        ending.end(ended("late"));
        assert_eq!(finished.names(), ["queued", "late"]);
    }

    #[test]
    fn the_bounds_are_the_sdks_queue_and_a_batch() {
        assert_eq!((CAPACITY, WAKE_AT), (2048, 256));
    }
}
