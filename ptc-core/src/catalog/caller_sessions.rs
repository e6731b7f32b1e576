//! The sessions of an MCP upstream called *as the caller*: one session per caller, each with
//! the caller's own grant, so caller A's token never serves caller B's call. The pool is
//! bounded ([`MAX_CALLER_SESSIONS`] per upstream; the least recently used session is closed to
//! make room) and a session unused for [`CALLER_SESSION_IDLE`] is closed; the counts are in
//! `/metrics`.
//!
//! A session is opened outside the pool's lock (a handshake, perhaps a person's consent, takes
//! time): callers wait only for their own session.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

// tokio's clock, so a test can move it.
use tokio::time::Instant;

use crate::call::contract::ToolError;
use crate::catalog::pin_check::Compared;
use crate::wire::mcp::McpClient;

pub use crate::program::limits::{CALLER_SESSION_IDLE, MAX_CALLER_SESSIONS};

/// One session: a connected client, and which of its listings was compared with the pins.
#[derive(Clone)]
pub(crate) struct Session {
    pub client: McpClient,
    pub compared: Arc<Compared>,
}

impl Session {
    pub(crate) fn new(client: McpClient) -> Self {
        Session {
            client,
            compared: Arc::default(),
        }
    }
}

/// What the pool did, for `/metrics`.
#[derive(Debug, Default)]
pub struct SessionCounts {
    /// Sessions held now.
    pub open: AtomicU64,
    /// Sessions opened.
    pub opened: AtomicU64,
    /// Sessions closed after they were unused for the idle time.
    pub closed_idle: AtomicU64,
    /// Sessions closed to make room for another caller's.
    pub evicted: AtomicU64,
}

/// A caller's place in the pool: its session once opened, and when it was last used.
struct Slot<S> {
    session: tokio::sync::OnceCell<S>,
    used: Mutex<Instant>,
}

impl<S> Slot<S> {
    fn used(&self) -> Instant {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self, now: Instant) {
        *self.used.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }
}

/// The per-caller sessions of one upstream (`S`: a [`Session`]).
pub(crate) struct CallerSessions<S = Session> {
    max: usize,
    idle: Duration,
    slots: Mutex<HashMap<String, Arc<Slot<S>>>>,
    pub(crate) counts: SessionCounts,
}

impl<S: Clone> CallerSessions<S> {
    /// A pool of at most `max` sessions, each closed after `idle` unused.
    pub(crate) fn new(max: usize, idle: Duration) -> Self {
        CallerSessions {
            max: max.max(1),
            idle,
            slots: Mutex::new(HashMap::new()),
            counts: SessionCounts::default(),
        }
    }

    /// `caller`'s session, opened with `open` when it has none (or its last one was closed).
    pub(crate) async fn get<F, Fut>(&self, caller: &str, open: F) -> Result<S, ToolError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<S, ToolError>>,
    {
        let now = Instant::now();
        let slot = self.slot(caller, now);
        let session = slot
            .session
            .get_or_try_init(|| async {
                let session = open().await?;
                self.counts.opened.fetch_add(1, Ordering::Relaxed);
                Ok::<_, ToolError>(session)
            })
            .await;
        if session.is_err() {
            // A failed open leaves no empty place behind.
            self.forget(caller, &slot);
        }
        let session = session?.clone();
        slot.touch(Instant::now());
        self.count_open();
        Ok(session)
    }

    /// `caller`'s slot, made if needed; idle sessions are closed first, and the least recently
    /// used one when the pool is full.
    fn slot(&self, caller: &str, now: Instant) -> Arc<Slot<S>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let before = slots.len();
        slots.retain(|_, slot| {
            // A slot still opening (no session yet) is not idle: its caller waits on it.
            slot.session.get().is_none() || now.saturating_duration_since(slot.used()) < self.idle
        });
        let idle = (before - slots.len()) as u64;
        self.counts.closed_idle.fetch_add(idle, Ordering::Relaxed);
        if let Some(slot) = slots.get(caller) {
            return slot.clone();
        }
        if slots.len() >= self.max
            && let Some(oldest) = slots
                .iter()
                .min_by_key(|(_, s)| s.used())
                .map(|(k, _)| k.clone())
        {
            slots.remove(&oldest);
            self.counts.evicted.fetch_add(1, Ordering::Relaxed);
        }
        let slot = Arc::new(Slot {
            session: tokio::sync::OnceCell::new(),
            used: Mutex::new(now),
        });
        slots.insert(caller.to_string(), slot.clone());
        slot
    }

    /// Drops `caller`'s slot if it is still `slot`.
    fn forget(&self, caller: &str, slot: &Arc<Slot<S>>) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.get(caller).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(caller);
        }
    }

    fn count_open(&self) {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let open = slots.values().filter(|s| s.session.get().is_some()).count();
        self.counts.open.store(open as u64, Ordering::Relaxed);
    }

    /// Every open session (to close them).
    pub(crate) fn sessions(&self) -> Vec<S> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .values()
            .filter_map(|s| s.session.get().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::contract::Reason;

    fn pool(max: usize, idle: Duration) -> CallerSessions<u32> {
        CallerSessions::new(max, idle)
    }

    async fn open(pool: &CallerSessions<u32>, caller: &str, id: u32) -> u32 {
        pool.get(caller, || async move { Ok(id) }).await.unwrap()
    }

    fn count(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    #[tokio::test]
    async fn each_caller_keeps_their_own_session() {
        let p = pool(4, Duration::from_secs(60));
        assert_eq!(open(&p, "alice", 1).await, 1);
        assert_eq!(open(&p, "bob", 2).await, 2);
        // Alice's is kept: a second open is never asked for.
        assert_eq!(open(&p, "alice", 3).await, 1);
        assert_eq!(count(&p.counts.opened), 2);
        assert_eq!(count(&p.counts.open), 2);
        // Every open session is there to be closed at shutdown.
        let mut all = p.sessions();
        all.sort();
        assert_eq!(all, [1, 2]);
    }

    #[tokio::test]
    async fn a_full_pool_closes_the_least_recently_used_session() {
        let p = pool(2, Duration::from_secs(60));
        open(&p, "alice", 1).await;
        open(&p, "bob", 2).await;
        open(&p, "alice", 0).await; // Bob is now the least recently used.
        assert_eq!(open(&p, "carol", 3).await, 3);
        assert_eq!(count(&p.counts.evicted), 1);
        assert_eq!(open(&p, "alice", 9).await, 1, "alice's was kept");
        assert_eq!(open(&p, "bob", 4).await, 4, "bob's was closed");
        assert_eq!(count(&p.counts.open), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_unused_for_the_idle_time_is_closed() {
        let idle = Duration::from_secs(600);
        let p = pool(8, idle);
        open(&p, "alice", 1).await;
        tokio::time::advance(idle - Duration::from_secs(1)).await;
        assert_eq!(open(&p, "alice", 2).await, 1, "used within the idle time");
        tokio::time::advance(idle).await;
        assert_eq!(open(&p, "alice", 3).await, 3, "closed after the idle time");
        assert_eq!(count(&p.counts.closed_idle), 1);
    }

    #[tokio::test]
    async fn a_failed_open_leaves_no_place_behind() {
        let p = pool(1, Duration::from_secs(60));
        let refused = p
            .get("alice", || async {
                Err(ToolError {
                    reason: Reason::AuthRequired,
                    message: "no consent".into(),
                })
            })
            .await;
        assert_eq!(refused.unwrap_err().reason, Reason::AuthRequired);
        assert_eq!(open(&p, "bob", 2).await, 2);
        assert_eq!(count(&p.counts.evicted), 0, "nothing was held for alice");
        assert_eq!(open(&p, "alice", 5).await, 5, "alice may try again");
    }
}
