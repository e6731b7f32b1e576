//! The in-process session store: a map behind a mutex, each entry with its idle deadline. It is
//! bounded in sessions and in bytes, since every session an agent opens adds one: past either cap
//! the session used least recently is dropped (its agent starts over, as after an expiry). Expired entries are swept when
//! a save adds one, and a load of an expired entry removes it.
//!
//! Deadlines are on tokio's clock, so tests move time with `tokio::time::advance`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::{StateKey, StateStore, StoreError, bounded};

/// How many sessions a [`MemoryStore`] from [`super::open`]`("memory")` keeps.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
/// How many bytes of state a [`MemoryStore`] from [`super::open`]`("memory")` keeps.
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;

/// Session state in this process's memory; see the module documentation.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_sessions: usize,
    max_bytes: usize,
}

/// One session's state.
struct Entry {
    bytes: Vec<u8>,
    /// Gone at this instant (and after).
    expires: Instant,
    /// The tick of its last load or save: its place in [`Inner::by_use`].
    used: u64,
}

/// The entries and two indexes over them, so that neither the sweep nor the eviction scans the
/// whole map.
#[derive(Default)]
struct Inner {
    /// By [`StateKey::id`].
    entries: HashMap<String, Entry>,
    /// Ids by their last use, least recent first.
    by_use: BTreeMap<u64, String>,
    /// `(expires, used)` of every entry, soonest first.
    by_expiry: BTreeSet<(Instant, u64)>,
    /// Counts loads and saves: the next `used`.
    ticks: u64,
    /// Bytes of every entry's state.
    bytes: usize,
}

impl Inner {
    fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.entries.remove(id)?;
        self.bytes -= entry.bytes.len();
        self.by_use.remove(&entry.used);
        self.by_expiry.remove(&(entry.expires, entry.used));
        Some(entry)
    }

    fn insert(&mut self, id: String, bytes: Vec<u8>, expires: Instant) {
        self.ticks += 1;
        let used = self.ticks;
        self.by_use.insert(used, id.clone());
        self.by_expiry.insert((expires, used));
        self.bytes += bytes.len();
        self.entries.insert(
            id,
            Entry {
                bytes,
                expires,
                used,
            },
        );
    }

    /// Drops every entry expired at `now`.
    fn sweep(&mut self, now: Instant) {
        while let Some(&(expires, used)) = self.by_expiry.first()
            && expires <= now
        {
            self.by_expiry.pop_first();
            if let Some(id) = self.by_use.remove(&used)
                && let Some(entry) = self.entries.remove(&id)
            {
                self.bytes -= entry.bytes.len();
            }
        }
    }

    /// Drops the least recently used entry.
    fn evict(&mut self) {
        if let Some((_, id)) = self.by_use.first_key_value() {
            let id = id.clone();
            self.remove(&id);
        }
    }
}

/// `ttl` from `now`, within the store's bounds.
fn deadline(now: Instant, ttl: Duration) -> Instant {
    // `bounded` keeps the sum within the clock's range on every platform ptc runs on; were it
    // not, the entry would expire at once rather than the addition panic.
    now.checked_add(bounded(ttl)).unwrap_or(now)
}

impl MemoryStore {
    /// A store of at most `max_sessions` sessions (at least one) and [`DEFAULT_MAX_BYTES`].
    pub fn new(max_sessions: usize) -> Self {
        MemoryStore::bounded(max_sessions, DEFAULT_MAX_BYTES)
    }

    /// A store of at most `max_sessions` sessions (at least one) holding at most `max_bytes`
    /// of state together (one session larger than that is kept alone).
    pub fn bounded(max_sessions: usize, max_bytes: usize) -> Self {
        MemoryStore {
            inner: Mutex::new(Inner::default()),
            max_sessions: max_sessions.max(1),
            max_bytes,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock; if something did, the map is still whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn load_now(&self, key: &StateKey, ttl: Duration) -> Option<Vec<u8>> {
        let id = key.id();
        let now = Instant::now();
        let mut inner = self.inner();
        let entry = inner.remove(&id)?;
        if entry.expires <= now {
            return None;
        }
        let bytes = entry.bytes.clone();
        inner.insert(id, entry.bytes, deadline(now, ttl));
        Some(bytes)
    }

    fn save_now(&self, key: &StateKey, bytes: Vec<u8>, ttl: Duration) {
        let id = key.id();
        let now = Instant::now();
        let mut inner = self.inner();
        inner.sweep(now);
        inner.remove(&id);
        while !inner.entries.is_empty()
            && (inner.entries.len() >= self.max_sessions
                || inner.bytes + bytes.len() > self.max_bytes)
        {
            inner.evict();
            tracing::debug!(
                max_sessions = self.max_sessions,
                max_bytes = self.max_bytes,
                "the memory session store is full: dropped the least recently used session"
            );
        }
        inner.insert(id, bytes, deadline(now, ttl));
    }

    /// Whether `key` has state now, without counting as use.
    #[cfg(test)]
    fn has(&self, key: &StateKey) -> bool {
        self.inner()
            .entries
            .get(&key.id())
            .is_some_and(|e| e.expires > Instant::now())
    }
}

impl Default for MemoryStore {
    /// A store of [`DEFAULT_MAX_SESSIONS`].
    fn default() -> Self {
        MemoryStore::new(DEFAULT_MAX_SESSIONS)
    }
}

impl StateStore for MemoryStore {
    fn load<'a>(
        &'a self,
        key: &'a StateKey,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(async move { Ok(self.load_now(key, ttl)) })
    }

    fn save<'a>(
        &'a self,
        key: &'a StateKey,
        bytes: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.save_now(key, bytes, ttl);
            Ok(())
        })
    }

    fn forget<'a>(&'a self, key: &'a StateKey) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.inner().remove(&key.id());
            Ok(())
        })
    }

    fn describe(&self) -> String {
        "memory".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    const TTL: Duration = Duration::from_secs(10);
    const MS: Duration = Duration::from_millis(1);

    fn key(name: &str) -> StateKey {
        StateKey::new("alice", name)
    }

    async fn load(store: &MemoryStore, k: &StateKey) -> Option<Vec<u8>> {
        store.load(k, TTL).await.unwrap()
    }

    async fn save(store: &MemoryStore, k: &StateKey, bytes: &[u8]) {
        store.save(k, bytes.to_vec(), TTL).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn state_is_there_until_the_ttl_and_gone_from_it() {
        let store = MemoryStore::default();
        let (a, b) = (key("a"), key("b"));
        save(&store, &a, b"one").await;
        save(&store, &b, b"two").await;
        advance(TTL - MS).await;
        assert!(
            store.has(&a) && store.has(&b),
            "present just before the TTL"
        );
        advance(MS).await;
        assert!(!store.has(&a), "gone at the TTL");
        assert_eq!(load(&store, &a).await, None);
        assert_eq!(load(&store, &b).await, None);
        assert!(
            store.inner().entries.is_empty(),
            "a load of expired state drops it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_load_just_before_the_ttl_finds_the_state_and_starts_the_ttl_again() {
        let store = MemoryStore::default();
        let a = key("a");
        save(&store, &a, b"state").await;
        advance(TTL - MS).await;
        assert_eq!(load(&store, &a).await.as_deref(), Some(&b"state"[..]));
        advance(TTL - MS).await;
        assert_eq!(
            load(&store, &a).await.as_deref(),
            Some(&b"state"[..]),
            "refreshed by the load: 2 TTLs after the save"
        );
        advance(TTL).await;
        assert_eq!(load(&store, &a).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_save_replaces_the_state_and_starts_the_ttl_again() {
        let store = MemoryStore::default();
        let a = key("a");
        save(&store, &a, b"first").await;
        advance(TTL - MS).await;
        save(&store, &a, b"second").await;
        advance(TTL - MS).await;
        assert!(store.has(&a));
        assert_eq!(load(&store, &a).await.as_deref(), Some(&b"second"[..]));
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_cap_the_least_recently_used_session_is_dropped() {
        let store = MemoryStore::new(3);
        let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(key);
        for k in [&a, &b, &c] {
            save(&store, k, b"x").await;
        }
        assert!([&a, &b, &c].iter().all(|k| store.has(k)), "N sessions kept");
        save(&store, &d, b"x").await;
        assert!(!store.has(&a), "the N+1th drops the oldest");
        assert!([&b, &c, &d].iter().all(|k| store.has(k)));

        // A load is use: b is now the most recent, so c goes next.
        assert!(load(&store, &b).await.is_some());
        save(&store, &e, b"x").await;
        assert!(!store.has(&c));
        assert!([&b, &d, &e].iter().all(|k| store.has(k)));

        // Saving a session the store holds adds none: nothing is dropped.
        save(&store, &d, b"y").await;
        assert!([&b, &d, &e].iter().all(|k| store.has(k)));
        assert_eq!(store.inner().entries.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_byte_cap_the_least_recently_used_sessions_are_dropped() {
        let store = MemoryStore::bounded(100, 10);
        let [a, b, c, d] = ["a", "b", "c", "d"].map(key);
        save(&store, &a, b"1234").await;
        save(&store, &b, b"123456").await;
        assert_eq!(store.inner().bytes, 10, "exactly at the cap: both kept");
        assert!(store.has(&a) && store.has(&b));
        save(&store, &c, b"1").await;
        assert!(!store.has(&a), "one byte past it drops the oldest");
        assert!(store.has(&b) && store.has(&c));
        assert_eq!(store.inner().bytes, 7);
        // Replacing a session counts its new size only.
        save(&store, &c, b"1234").await;
        assert_eq!(store.inner().bytes, 10);
        assert!(store.has(&b));
        // One larger than the cap is kept alone.
        save(&store, &d, &[0u8; 11]).await;
        assert!(store.has(&d) && !store.has(&b) && !store.has(&c));
        assert_eq!(store.inner().bytes, 11);
        store.forget(&d).await.unwrap();
        assert_eq!(store.inner().bytes, 0);
        // Expired entries give their bytes back when swept.
        store.save(&a, vec![0; 5], MS).await.unwrap();
        advance(MS).await;
        save(&store, &b, b"12345").await;
        assert_eq!(store.inner().bytes, 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_save_sweeps_expired_sessions_before_dropping_a_live_one() {
        let store = MemoryStore::new(2);
        let [short, long, new] = ["short", "long", "new"].map(key);
        store
            .save(&short, b"x".to_vec(), Duration::from_secs(1))
            .await
            .unwrap();
        store
            .save(&long, b"x".to_vec(), Duration::from_secs(3600))
            .await
            .unwrap();
        advance(Duration::from_secs(2)).await;
        save(&store, &new, b"x").await;
        assert!(
            store.has(&long),
            "the expired one made room, not the older live one"
        );
        assert!(store.has(&new));
        let inner = store.inner();
        assert_eq!(inner.entries.len(), 2);
        assert_eq!(inner.by_use.len(), 2);
        assert_eq!(inner.by_expiry.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn forget_removes_one_session_and_no_other() {
        let store = MemoryStore::default();
        let (a, b) = (key("a"), key("b"));
        save(&store, &a, b"for a").await;
        save(&store, &b, b"for b").await;
        assert_eq!(load(&store, &a).await.as_deref(), Some(&b"for a"[..]));
        assert_eq!(load(&store, &b).await.as_deref(), Some(&b"for b"[..]));
        store.forget(&a).await.unwrap();
        assert_eq!(load(&store, &a).await, None);
        assert_eq!(load(&store, &b).await.as_deref(), Some(&b"for b"[..]));
        store.forget(&a).await.unwrap();
        let inner = store.inner();
        assert_eq!((inner.by_use.len(), inner.by_expiry.len()), (1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_session_name_of_two_callers_is_two_sessions() {
        let store = MemoryStore::default();
        let (alice, bob) = (StateKey::new("alice", "s"), StateKey::new("bob", "s"));
        save(&store, &alice, b"alice's").await;
        assert_eq!(load(&store, &bob).await, None);
        save(&store, &bob, b"bob's").await;
        assert_eq!(load(&store, &alice).await.as_deref(), Some(&b"alice's"[..]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_or_huge_ttl_does_not_panic() {
        let store = MemoryStore::default();
        let (zero, huge) = (key("zero"), key("huge"));
        store
            .save(&zero, b"x".to_vec(), Duration::ZERO)
            .await
            .unwrap();
        store
            .save(&huge, b"x".to_vec(), Duration::MAX)
            .await
            .unwrap();
        advance(MS).await;
        assert!(!store.has(&zero), "a zero TTL keeps state a millisecond");
        advance(Duration::from_secs(1000 * 24 * 3600)).await;
        assert!(store.load(&huge, Duration::MAX).await.unwrap().is_some());
    }
}
