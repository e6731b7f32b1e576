//! Ending spans off the program's path. Ending an SDK span (its last attributes set, its record
//! built and handed to the batch processor) took 2–3 µs on a busy evaluation's thread, where the
//! whole of a one-call evaluation over HTTP is about 500 µs; a span that ends here is a queue push
//! there, and a thread of its own ends the queued spans in batches, with the time each ended at.
//!
//! The thread is not woken per span (a wake costs more than the work): it looks at the queue
//! every [`INTERVAL`], or at once when [`WAKE_AT`] spans wait. A full queue never loses a span:
//! the span ends where it ended, as it did before this queue.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, Status};
use opentelemetry_sdk::trace::Span;

/// How many ended spans may wait (the SDK's own export queue holds 2,048 by default).
pub(super) const CAPACITY: usize = 2048;
/// How many waiting spans wake the thread before its interval is up.
pub(super) const WAKE_AT: usize = 256;
/// How often the thread looks at the queue: the SDK's batch processor waits up to 5 s to
/// export, so a tenth of a second more is not seen.
const INTERVAL: Duration = Duration::from_millis(100);

/// A span that ended: the SDK's span with what it ended with.
#[derive(Debug)]
pub(super) struct Ended {
    pub(super) span: Span,
    pub(super) attributes: Vec<KeyValue>,
    pub(super) status: Option<Status>,
    pub(super) at: SystemTime,
}

impl Ended {
    /// Ends the SDK's span: sets what it ended with and hands it to the batch processor.
    fn finish(mut self) {
        self.span.set_attributes(self.attributes);
        if let Some(status) = self.status {
            self.span.set_status(status);
        }
        self.span.end_with_timestamp(self.at);
    }
}

/// The queue of ended spans and the thread that finishes them.
#[derive(Debug)]
pub(super) struct Ending {
    queue: SyncSender<Ended>,
    waiting: Mutex<Receiver<Ended>>,
    /// Spans queued and not yet finished (an estimate the wake is decided on).
    len: AtomicUsize,
    stopped: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Ending {
    /// The queue, with its thread started.
    pub(super) fn start() -> Result<Arc<Ending>, String> {
        let ending = Self::new(CAPACITY);
        ending.spawn(INTERVAL)?;
        Ok(ending)
    }

    /// The queue for `capacity` spans, with no thread yet.
    fn new(capacity: usize) -> Arc<Ending> {
        let (queue, waiting) = sync_channel(capacity);
        Arc::new(Ending {
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
            ended.finish();
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
                ended.finish();
                false
            }
        }
    }

    /// Finishes every span queued so far, on the calling thread.
    pub(super) fn drain(&self) {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        while let Ok(ended) = waiting.try_recv() {
            self.len.fetch_sub(1, Ordering::AcqRel);
            ended.finish();
        }
    }

    /// Stops the thread once it has finished what is queued; spans that end later finish where
    /// they end.
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            thread.thread().unpark();
            let _ = thread.join();
        }
        self.drain();
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
mod tests {
    use super::{CAPACITY, Ended, Ending, WAKE_AT};
    use opentelemetry::trace::{Status, Tracer as _, TracerProvider as _};
    use opentelemetry::{Context, KeyValue};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanProcessor};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant, SystemTime};

    /// The spans the SDK was handed, in order.
    #[derive(Debug, Default, Clone)]
    struct Finished(Arc<Mutex<Vec<SpanData>>>);

    impl Finished {
        fn names(&self) -> Vec<String> {
            let spans = self.0.lock().unwrap();
            spans.iter().map(|s| s.name.to_string()).collect()
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
            Ok(())
        }
    }

    fn tracer() -> (opentelemetry_sdk::trace::SdkTracer, Finished) {
        let finished = Finished::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(finished.clone())
            .build();
        (provider.tracer("test"), finished)
    }

    fn ended(tracer: &opentelemetry_sdk::trace::SdkTracer, name: &str) -> Ended {
        Ended {
            span: tracer.start(name.to_string()),
            attributes: Vec::new(),
            status: None,
            at: SystemTime::now(),
        }
    }

    #[test]
    fn a_queued_span_ends_when_drained_with_what_and_when_it_ended() {
        let (tracer, finished) = tracer();
        let ending = Ending::new(CAPACITY);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let woke = ending.end(Ended {
            span: tracer.start("call"),
            attributes: vec![KeyValue::new("ptc.bytes", 12)],
            status: Some(Status::error("timeout")),
            at,
        });
        assert!(!woke);
        assert!(finished.names().is_empty(), "ended off the caller's path");
        ending.drain();
        let spans = finished.0.lock().unwrap();
        let [span] = spans.as_slice() else {
            panic!("{spans:?}")
        };
        assert_eq!(span.end_time, at);
        assert_eq!(span.attributes, [KeyValue::new("ptc.bytes", 12)]);
        assert_eq!(span.status, Status::error("timeout"));
    }

    #[test]
    fn a_full_queue_ends_the_span_where_it_ended_and_loses_none() {
        let (tracer, finished) = tracer();
        let ending = Ending::new(2);
        for name in ["a", "b"] {
            ending.end(ended(&tracer, name));
        }
        assert!(finished.names().is_empty());
        ending.end(ended(&tracer, "c"));
        assert_eq!(finished.names(), ["c"]);
        ending.drain();
        assert_eq!(finished.names(), ["c", "a", "b"]);
    }

    #[test]
    fn the_thread_is_woken_when_the_queue_holds_its_batch() {
        let (tracer, finished) = tracer();
        let ending = Ending::new(CAPACITY);
        let woke: Vec<bool> = (0..WAKE_AT + 1)
            .map(|_| ending.end(ended(&tracer, "s")))
            .collect();
        assert_eq!(woke.iter().position(|w| *w), Some(WAKE_AT - 1));
        assert_eq!(woke.iter().filter(|w| **w).count(), 1);
        ending.drain();
        assert_eq!(finished.names().len(), WAKE_AT + 1);
        // Drained, the count starts again: the next batch wakes the thread again.
        let woke: Vec<bool> = (0..WAKE_AT)
            .map(|_| ending.end(ended(&tracer, "s")))
            .collect();
        assert_eq!(woke.iter().position(|w| *w), Some(WAKE_AT - 1));
    }

    #[test]
    fn a_woken_thread_ends_the_batch_before_its_interval() {
        let (tracer, finished) = tracer();
        let ending = Ending::new(CAPACITY);
        ending.spawn(Duration::from_secs(3600)).unwrap();
        for _ in 0..WAKE_AT {
            ending.end(ended(&tracer, "s"));
        }
        let waited = Instant::now();
        while finished.names().len() < WAKE_AT {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "the woken thread ended {} spans",
                finished.names().len()
            );
            std::thread::yield_now();
        }
        ending.stop();
    }

    #[test]
    fn stopping_ends_what_is_queued_and_later_spans_end_where_they_end() {
        let (tracer, finished) = tracer();
        let ending = Ending::new(CAPACITY);
        ending.spawn(Duration::from_secs(3600)).unwrap();
        ending.end(ended(&tracer, "queued"));
        ending.stop();
        assert_eq!(finished.names(), ["queued"]);
        assert!(
            ending.thread.lock().unwrap().is_none(),
            "the thread was joined"
        );
        ending.end(ended(&tracer, "late"));
        assert_eq!(finished.names(), ["queued", "late"]);
    }

    #[test]
    fn the_bounds_are_the_sdks_queue_and_a_batch() {
        assert_eq!((CAPACITY, WAKE_AT), (2048, 256));
    }
}
