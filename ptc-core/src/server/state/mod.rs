//! Session state between `lisp_eval` calls: the bytes ptc-lisp serialises at the end of a call
//! and reads back at the start of the next one in the same MCP session. The store keeps bytes
//! only (the format and its version are ptc-lisp's), each under an idle TTL that every load and
//! save starts again.
//!
//! Two stores: [`MemoryStore`] (the default; one process, bounded, gone on restart) and
//! [`RedisStore`] (`redis://...`), which several replicas of the host share, so that a session
//! continues on whichever replica the load balancer picks. [`open`] makes either from its
//! configuration string.

pub mod grants;
pub mod memory;
pub mod redis;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use sha2::{Digest, Sha256};

pub use self::redis::RedisStore;
pub use memory::MemoryStore;

/// The longest TTL a store keeps state for; longer ones are cut to it (a Redis `PX` past its
/// clock's range is refused, and a deadline past the clock's range cannot be computed).
pub const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The shortest TTL: a TTL of zero (or under a millisecond) is kept this long, since Redis
/// refuses `PX 0`.
pub const MIN_TTL: Duration = Duration::from_millis(1);

/// `ttl` within [`MIN_TTL`]..=[`MAX_TTL`].
fn bounded(ttl: Duration) -> Duration {
    ttl.clamp(MIN_TTL, MAX_TTL)
}

/// Which session: the caller's subject and the session's name; a caller can never reach
/// another's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StateKey {
    /// Who calls: the authenticated subject.
    pub caller: String,
    /// The session's name, as the caller gave it or the transport assigned it.
    pub session: String,
    /// An OAuth grant's record rather than a session's: no caller and session name reach it.
    grant: bool,
}

impl StateKey {
    /// The key of `caller`'s session `session`.
    pub fn new(caller: &str, session: &str) -> Self {
        StateKey {
            caller: caller.to_string(),
            session: session.to_string(),
            grant: false,
        }
    }

    /// The key of the OAuth grant record `name`, apart from every session's.
    pub fn grant(name: &str) -> Self {
        StateKey {
            caller: String::new(),
            session: name.to_string(),
            grant: true,
        }
    }

    /// Hex SHA-256 over both names, each prefixed with its length so that no two pairs give the
    /// same input (`("ab", "c")` and `("a", "bc")` differ); a grant's input starts with a tag no
    /// session's can (a session's starts with a length). Stores key by it, never by the raw
    /// names, which may be personal (an e-mail address as subject) and of any length.
    pub fn id(&self) -> String {
        let mut digest = Sha256::new();
        if self.grant {
            digest.update(b"oauth-grant\0");
        }
        for part in [&self.caller, &self.session] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part.as_bytes());
        }
        let mut hex = String::with_capacity(64);
        for b in digest.finalize() {
            let _ = write!(hex, "{b:02x}");
        }
        hex
    }
}

/// Why the store could not be used: names the store (never a password) and what failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

/// Where session state is kept.
pub trait StateStore: Send + Sync {
    /// The state saved under `key`, or None; a load counts as use: the idle TTL (`ttl`) starts
    /// again.
    fn load<'a>(
        &'a self,
        key: &'a StateKey,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>>;

    /// Saves `bytes` under `key`, kept `ttl` from now (idle TTL), in place of what was there.
    fn save<'a>(
        &'a self,
        key: &'a StateKey,
        bytes: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Removes the state saved under `key` (nothing happens when there is none).
    fn forget<'a>(&'a self, key: &'a StateKey) -> BoxFuture<'a, Result<(), StoreError>>;

    /// What it is, for messages and logs: `memory` or `redis://host:port/db` (no password).
    fn describe(&self) -> String;
}

/// The store `spec` names: `memory` (a [`MemoryStore`] of [`memory::DEFAULT_MAX_SESSIONS`]
/// sessions), or a Redis URL ([`RedisStore`]): `redis://[[user]:password@]host[:port][/db]`, or
/// `redis+unix:///path/to/socket[?db=N&user=U&pass=P]`. Nothing is connected yet: a Redis store
/// connects on first use, so a Redis that is down fails the requests that need it, not the start.
/// The error names what is wrong with `spec`, without its password.
pub fn open(spec: &str) -> Result<Arc<dyn StateStore>, String> {
    let spec = spec.trim();
    if spec == "memory" {
        return Ok(Arc::new(MemoryStore::new(memory::DEFAULT_MAX_SESSIONS)));
    }
    match spec.split_once("://").map(|(scheme, _)| scheme) {
        Some(scheme) if self::redis::SCHEMES.contains(&scheme) => {
            Ok(Arc::new(RedisStore::open(spec)?))
        }
        Some("rediss" | "valkeys") => Err(format!(
            "the session store `{}` uses TLS (rediss://), which this build of ptc does not \
             support: use redis:// on a private network, or a local TLS proxy (stunnel, a \
             sidecar) reached over redis:// or redis+unix://",
            self::redis::redacted(spec)
        )),
        _ => Err(format!(
            "unknown session store `{}`: expected `memory`, `redis://[:password@]host[:port][/db]` \
             or `redis+unix:///path/to/socket`",
            self::redis::redacted(spec)
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_store_error_reads_as_its_message() {
        assert_eq!(
            super::StoreError("the session store memory is full".into()).to_string(),
            "the session store memory is full"
        );
    }

    use super::*;

    #[test]
    fn a_grant_s_id_is_no_session_s() {
        let grant = StateKey::grant("grant:abc");
        for caller in ["", "oauth-grant", "oauth-grant\0"] {
            assert_ne!(grant.id(), StateKey::new(caller, "grant:abc").id());
        }
        assert_eq!(grant.id(), StateKey::grant("grant:abc").id());
        assert_ne!(grant.id(), StateKey::grant("grant:abd").id());
    }

    #[test]
    fn ids_of_pairs_with_the_same_concatenation_differ() {
        let a = StateKey::new("ab", "c").id();
        let b = StateKey::new("a", "bc").id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(a, StateKey::new("ab", "c").id(), "the id is stable");
        assert_ne!(StateKey::new("", "x").id(), StateKey::new("x", "").id());
    }

    #[test]
    fn open_makes_memory_and_redis_stores_and_names_what_is_wrong_otherwise() {
        assert_eq!(open("memory").unwrap().describe(), "memory");
        assert_eq!(
            open("redis://127.0.0.1:6390/2").unwrap().describe(),
            "redis://127.0.0.1:6390/2"
        );
        assert_eq!(
            open("redis://:pw@localhost").unwrap().describe(),
            "redis://localhost:6379/0"
        );
        let tls = open("rediss://:s3cret-canary@example.com/0").err().unwrap();
        assert!(tls.contains("TLS"), "{tls}");
        assert!(!tls.contains("s3cret-canary"), "{tls}");
        let other = open("postgres://u:s3cret-canary@db/x").err().unwrap();
        assert!(other.contains("unknown session store"), "{other}");
        assert!(!other.contains("s3cret-canary"), "{other}");
        let garbled = open("redis//:s3cret-canary@host").err().unwrap();
        assert!(!garbled.contains("s3cret-canary"), "{garbled}");
        let bad_db = open("redis://:s3cret-canary@host/not-a-db").err().unwrap();
        assert!(bad_db.contains("database"), "{bad_db}");
        assert!(!bad_db.contains("s3cret-canary"), "{bad_db}");
    }

    #[test]
    fn ttls_are_bounded() {
        assert_eq!(bounded(Duration::ZERO), MIN_TTL);
        assert_eq!(bounded(Duration::from_nanos(10)), MIN_TTL);
        assert_eq!(bounded(Duration::MAX), MAX_TTL);
        assert_eq!(bounded(Duration::from_secs(5)), Duration::from_secs(5));
    }
}
