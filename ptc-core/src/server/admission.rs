//! Admission: a limit that queues. Past the number of programs in flight (for the host, for one
//! session) or past the memory budget, a request waits its turn, first come first served, in a
//! bounded queue for a bounded time; only then is it refused, and the refusal names which. A
//! program in flight mostly waits on upstreams and holds no thread (see [`super::workers`]), so
//! the limits on programs in flight are large; programs computing are bounded by the evaluation
//! threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why a request did not get its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turned {
    /// `max_waiting` requests were waiting already.
    QueueFull,
    /// The wait ended before a turn came.
    TimedOut,
    /// The client cancelled while it waited.
    Cancelled,
}

/// A counted limit with a queue in front of it.
pub struct Queue {
    slots: Arc<Semaphore>,
    total: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// Takes a waiter off the count however its wait ends.
struct Waiter<'a>(&'a AtomicUsize);

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Queue {
    /// `units` to hand out, and at most `max_waiting` requests waiting for them.
    pub fn new(units: usize, max_waiting: usize) -> Self {
        let total = units.min(Semaphore::MAX_PERMITS);
        Queue {
            slots: Arc::new(Semaphore::new(total)),
            total,
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Units free now.
    pub fn free(&self) -> usize {
        self.slots.available_permits()
    }

    /// `units` of the limit, now or when they come free in turn; refused when the queue is full,
    /// at `until`, or when `cancel` fires. The units return when the permit drops.
    pub async fn enter(
        &self,
        units: u32,
        until: Instant,
        cancel: &CancellationToken,
    ) -> Result<OwnedSemaphorePermit, Turned> {
        if self.waiting() == 0
            && let Ok(permit) = self.slots.clone().try_acquire_many_owned(units)
        {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_waiting {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Turned::QueueFull);
        }
        let _waiter = Waiter(&self.waiting);
        tokio::select! {
            permit = self.slots.clone().acquire_many_owned(units) => {
                // The semaphore is never closed.
                permit.map_err(|_| Turned::Cancelled)
            }
            () = tokio::time::sleep_until(until) => Err(Turned::TimedOut),
            () = cancel.cancelled() => Err(Turned::Cancelled),
        }
    }
}

/// The memory budget's queue, counted in bytes, is also the pool programs in flight reserve
/// from as they grow: a running program takes what is free at once, ahead of the queue (it needs
/// the memory to finish and give it back).
impl ptc_lisp::MemoryPool for Queue {
    fn reserve(&self, bytes: u64) -> bool {
        let Ok(units) = u32::try_from(bytes) else {
            return false;
        };
        match self.slots.try_acquire_many(units) {
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        }
    }

    fn release(&self, bytes: u64) {
        self.slots
            .add_permits(usize::try_from(bytes).unwrap_or(usize::MAX).min(self.total));
    }

    fn budget(&self) -> u64 {
        self.total as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    /// Yields until `n` requests wait; fails (never hangs) if they never do.
    async fn until_waiting(q: &Queue, n: usize) {
        for _ in 0..100_000 {
            if q.waiting() == n {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("never {n} waiting (now {})", q.waiting());
    }

    #[tokio::test]
    async fn a_request_past_the_limit_waits_for_a_unit_to_come_free() {
        let q = Arc::new(Queue::new(1, 10));
        let ct = CancellationToken::new();
        let first = q.enter(1, far(), &ct).await.unwrap();
        let q2 = q.clone();
        let second =
            tokio::spawn(async move { q2.enter(1, far(), &CancellationToken::new()).await });
        until_waiting(&q, 1).await;
        assert!(!second.is_finished());
        drop(first);
        assert!(second.await.unwrap().is_ok());
        assert_eq!(q.waiting(), 0);
    }

    #[tokio::test]
    async fn the_queue_holds_max_waiting_requests_and_refuses_the_next() {
        let q = Arc::new(Queue::new(1, 2));
        let ct = CancellationToken::new();
        let _held = q.enter(1, far(), &ct).await.unwrap();
        let mut waiters = Vec::new();
        for _ in 0..2 {
            let q2 = q.clone();
            waiters.push(tokio::spawn(async move {
                q2.enter(1, far(), &CancellationToken::new()).await
            }));
        }
        until_waiting(&q, 2).await;
        assert_eq!(q.enter(1, far(), &ct).await.unwrap_err(), Turned::QueueFull);
        assert_eq!(
            q.waiting(),
            2,
            "a refused request is not counted as waiting"
        );
        for w in waiters {
            w.abort();
        }
    }

    #[tokio::test]
    async fn a_wait_ends_at_its_time_or_its_cancel() {
        let q = Queue::new(1, 10);
        let ct = CancellationToken::new();
        let _held = q.enter(1, far(), &ct).await.unwrap();
        let until = Instant::now() + Duration::from_millis(50);
        assert_eq!(q.enter(1, until, &ct).await.unwrap_err(), Turned::TimedOut);
        assert!(Instant::now() >= until, "it waited until then");
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        assert_eq!(
            q.enter(1, far(), &cancelled).await.unwrap_err(),
            Turned::Cancelled
        );
        assert_eq!(q.waiting(), 0);
    }

    #[test]
    fn as_a_memory_pool_it_gives_what_is_free_and_takes_it_back() {
        use ptc_lisp::MemoryPool;
        let q = Queue::new(100, 0);
        assert!(q.reserve(60));
        assert!(!q.reserve(41), "40 are free");
        assert!(q.reserve(40));
        assert_eq!(q.free(), 0);
        q.release(100);
        assert_eq!(q.free(), 100);
        assert_eq!(q.budget(), 100);
        assert!(
            !q.reserve(u64::from(u32::MAX) + 1),
            "more than one request can ask"
        );
    }

    #[tokio::test]
    async fn units_are_counted_many_at_a_time() {
        let q = Queue::new(10, 0);
        let ct = CancellationToken::new();
        let a = q.enter(6, far(), &ct).await.unwrap();
        assert_eq!(q.free(), 4);
        assert_eq!(q.enter(5, far(), &ct).await.unwrap_err(), Turned::QueueFull);
        let b = q.enter(4, far(), &ct).await.unwrap();
        assert_eq!(q.free(), 0);
        drop((a, b));
        assert_eq!(q.free(), 10);
    }
}
