//! The Redis session store, shared by replicas of the host: a session continues on whichever
//! replica serves its next call. One key per session, `ptc:state:v1:<StateKey::id>`, holding the
//! bytes with Redis' own expiry: a load is `GETEX key PX ttl` (Redis 6.2 and later), so that it
//! starts the idle TTL again in the same step, a save `SET key bytes PX ttl`, forget `DEL key`.
//!
//! One [`ConnectionManager`] (a multiplexed connection that reconnects by itself after a Redis
//! restart), made on first use: opening the store does no I/O, so a Redis that is down fails the
//! requests that need it, each within a few seconds and with an error naming the store, and the
//! host recovers without a restart when Redis is back. The URL's password never appears in what
//! the store says: [`RedisStore::describe`] leaves it out and errors are scrubbed of it.
//!
//! No TLS (`rediss://`): the redis crate's TLS feature is not built; [`super::open`] says so.

use std::sync::Mutex;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{Client, ConnectionAddr, FromRedisValue, RedisError};
use futures_util::future::BoxFuture;

use super::{StateKey, StateStore, StoreError, bounded};

/// URL schemes of a Redis (or Valkey) reached over TCP or a Unix socket, without TLS.
pub(super) const SCHEMES: &[&str] = &["redis", "valkey", "redis+unix", "valkey+unix", "unix"];

/// The prefix of every key the store writes; `v1` is the key scheme's version (the bytes carry
/// their own).
pub const KEY_PREFIX: &str = "ptc:state:v1:";

/// One connection attempt's limit (a host that drops packets would otherwise hold a request for
/// the OS's TCP timeout, minutes).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One command's limit once connected.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// One operation's limit, its retry on a fresh connection included: past it the request fails
/// rather than wait on.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(5);

/// Session state in Redis; see the module documentation.
pub struct RedisStore {
    client: Client,
    /// What [`StateStore::describe`] says: the URL without its password.
    name: String,
    /// The password as written in the URL and decoded, scrubbed from every error.
    secrets: Vec<String>,
    /// Made on first use, and made again after an error a reconnect does not mend.
    manager: Mutex<Option<ConnectionManager>>,
}

/// The Redis key of `key`'s state.
pub fn redis_key(key: &StateKey) -> String {
    format!("{KEY_PREFIX}{}", key.id())
}

/// `spec` fit to show: the password of a URL (or the `pass=` of a Unix socket URL) replaced by
/// `***`, and everything before the last `@` when `spec` is not a URL at all.
pub(super) fn redacted(spec: &str) -> String {
    let masked_userinfo = || match spec.rfind('@') {
        Some(at) => match spec.find("://") {
            Some(scheme_end) if scheme_end < at => {
                format!("{}://***{}", &spec[..scheme_end], &spec[at..])
            }
            _ => format!("***{}", &spec[at..]),
        },
        None => spec.to_string(),
    };
    let Ok(mut url) = url::Url::parse(spec) else {
        return masked_userinfo();
    };
    if url.password().is_some() && url.set_password(Some("***")).is_err() {
        return masked_userinfo();
    }
    if url.query_pairs().any(|(name, _)| name == "pass") {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(name, value)| {
                let value = if name == "pass" { "***".into() } else { value };
                (name.into_owned(), value.into_owned())
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// Whether a failed operation is worth one more try: the connection broke or could not be made,
/// and the manager is making a new one (the first command after a Redis restart meets the old
/// connection, or the failed attempt of when Redis was down). Not after a timeout: the retry would
/// wait as long again.
fn retry_on_fresh_connection(e: &RedisError) -> bool {
    (e.is_io_error() || e.is_unrecoverable_error()) && !e.is_timeout()
}

impl RedisStore {
    /// The store at `url` (`redis://[[user]:password@]host[:port][/db]`,
    /// `redis+unix:///path/to/socket[?db=N&user=U&pass=P]`, or the same with `valkey`); no
    /// connection yet. The error names what is wrong with the URL, without its password.
    pub fn open(url: &str) -> Result<Self, String> {
        let shown = redacted(url);
        let parsed = url::Url::parse(url)
            .map_err(|e| format!("the session store `{shown}` is not a URL: {e}"))?;
        let scheme = parsed.scheme().to_string();
        if !SCHEMES.contains(&scheme.as_str()) {
            return Err(format!(
                "the session store `{shown}` is not a Redis URL: expected one of {}",
                SCHEMES.join("://, ") + "://"
            ));
        }
        let mut secrets: Vec<String> = Vec::new();
        let written = parsed.password().map(str::to_string).into_iter().chain(
            parsed
                .query_pairs()
                .filter(|(name, _)| name == "pass")
                .map(|(_, value)| value.into_owned()),
        );
        for secret in written {
            if let Ok(decoded) = percent_encoding::percent_decode_str(&secret).decode_utf8() {
                secrets.push(decoded.into_owned());
            }
            secrets.push(secret);
        }
        secrets.retain(|s| !s.is_empty());
        let client = Client::open(parsed).map_err(|e| {
            format!(
                "the session store `{shown}` is not a usable Redis URL: {}",
                cause(&e, &secrets)
            )
        })?;
        let info = client.get_connection_info();
        let db = info.redis_settings().db();
        let name = match info.addr() {
            ConnectionAddr::Tcp(host, port) if host.contains(':') => {
                format!("{scheme}://[{host}]:{port}/{db}")
            }
            ConnectionAddr::Tcp(host, port) => format!("{scheme}://{host}:{port}/{db}"),
            ConnectionAddr::Unix(path) => format!("{scheme}://{}?db={db}", path.display()),
            // TLS is not built (see the module documentation), and a future kind of address is
            // still shown by the URL it came from.
            _ => shown.clone(),
        };
        if let Some(secret) = info.redis_settings().password()
            && !secret.is_empty()
            && !secrets.iter().any(|s| s == secret)
        {
            secrets.push(secret.to_string());
        }
        Ok(RedisStore {
            client,
            name,
            secrets,
            manager: Mutex::new(None),
        })
    }

    /// The connection manager, made now if there is none.
    fn manager(&self) -> Result<ConnectionManager, RedisError> {
        let mut slot = self.manager.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(manager) = slot.as_ref() {
            return Ok(manager.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            // One attempt per connection: the manager's own retries, with their back-off, would
            // hold every request while Redis is down; `run` retries once instead.
            .set_number_of_retries(0);
        let manager = ConnectionManager::new_lazy_with_config(self.client.clone(), config)?;
        *slot = Some(manager.clone());
        Ok(manager)
    }

    /// Drops the connection manager: the next operation makes a new one. For errors the manager
    /// does not reconnect after (a refused password stays refused on its connection even once
    /// the server's password is changed).
    fn reset(&self) {
        self.manager
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// Runs `cmd` (to `what` the state, for the error), once more on a fresh connection after a
    /// broken one, within [`OPERATION_TIMEOUT`].
    async fn run<T: FromRedisValue>(&self, what: &str, cmd: ::redis::Cmd) -> Result<T, StoreError> {
        let attempts = async {
            let mut retried = false;
            loop {
                let mut manager = self.manager()?;
                match cmd.query_async::<T>(&mut manager).await {
                    Ok(value) => return Ok(value),
                    Err(e) if !retried && retry_on_fresh_connection(&e) => retried = true,
                    Err(e) => {
                        if !e.is_io_error() {
                            self.reset();
                        }
                        return Err(e);
                    }
                }
            }
        };
        match tokio::time::timeout(OPERATION_TIMEOUT, attempts).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.is_timeout() => Err(StoreError(format!(
                "the session store {} cannot be reached: no answer within {:?}",
                self.name,
                CONNECT_TIMEOUT.max(RESPONSE_TIMEOUT)
            ))),
            Ok(Err(e)) if e.is_io_error() || e.is_connection_dropped() => Err(StoreError(format!(
                "the session store {} cannot be reached: {}",
                self.name,
                cause(&e, &self.secrets)
            ))),
            Ok(Err(e)) => Err(StoreError(format!(
                "the session store {} could not {what} the session state: {}",
                self.name,
                cause(&e, &self.secrets)
            ))),
            Err(_) => Err(StoreError(format!(
                "the session store {} cannot be reached: no answer within {OPERATION_TIMEOUT:?}",
                self.name
            ))),
        }
    }
}

/// What a Redis error says, on one line, with every one of `secrets` replaced by `***` (the
/// errors seen do not repeat the password; this keeps it so should one ever do). The store's
/// name, made without the password, is left alone: a short password would garble it.
fn cause(e: &RedisError, secrets: &[String]) -> String {
    let mut text = e.to_string().lines().collect::<Vec<_>>().join(" ");
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret.as_str(), "***");
    }
    text
}

/// `ttl` as Redis' `PX` argument: whole milliseconds within the store's bounds.
fn px(ttl: Duration) -> u64 {
    u64::try_from(bounded(ttl).as_millis()).unwrap_or(u64::MAX)
}

impl StateStore for RedisStore {
    fn load<'a>(
        &'a self,
        key: &'a StateKey,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let mut cmd = ::redis::cmd("GETEX");
        cmd.arg(redis_key(key)).arg("PX").arg(px(ttl));
        Box::pin(async move { self.run("load", cmd).await })
    }

    fn save<'a>(
        &'a self,
        key: &'a StateKey,
        bytes: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut cmd = ::redis::cmd("SET");
        cmd.arg(redis_key(key))
            .arg(bytes.as_slice())
            .arg("PX")
            .arg(px(ttl));
        Box::pin(async move { self.run("save", cmd).await })
    }

    fn forget<'a>(&'a self, key: &'a StateKey) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut cmd = ::redis::cmd("DEL");
        cmd.arg(redis_key(key));
        Box::pin(async move { self.run::<i64>("forget", cmd).await.map(drop) })
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_hides_the_password_wherever_it_is_written() {
        assert_eq!(
            redacted("redis://user:s3cret@host:1/2"),
            "redis://user:***@host:1/2"
        );
        assert_eq!(
            redacted("redis+unix:///tmp/r.sock?db=1&pass=s3cret"),
            "redis+unix:///tmp/r.sock?db=1&pass=***"
        );
        assert_eq!(redacted("redis//:s3cret@host"), "***@host");
        assert_eq!(redacted("x://:s3cret@@host"), "x://:***@host");
        assert_eq!(
            redacted("redis://:s3cret@host:no-port"),
            "redis://***@host:no-port"
        );
        assert_eq!(redacted("memory"), "memory");
    }

    #[test]
    fn describe_leaves_the_password_out() {
        let cases = [
            ("redis://:pw@127.0.0.1:6390/0", "redis://127.0.0.1:6390/0"),
            ("redis://user:pw@[::1]:7000/3", "redis://[::1]:7000/3"),
            ("valkey://example.com", "valkey://example.com:6379/0"),
            (
                "redis+unix:///run/redis.sock?db=2&pass=pw",
                "redis+unix:///run/redis.sock?db=2",
            ),
        ];
        for (url, described) in cases {
            assert_eq!(RedisStore::open(url).unwrap().describe(), described);
        }
    }

    #[test]
    fn a_bad_url_is_named_without_its_password() {
        for url in [
            "redis://:s3cret-canary@host/not-a-db",
            "redis://:s3cret-canary@0.0.0.0/0",
            "ftp://:s3cret-canary@host/0",
            "redis://:s3cret%2Dcanary@host/zz",
        ] {
            let e = RedisStore::open(url).err().unwrap();
            assert!(e.contains("the session store `"), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn a_cause_repeating_the_password_is_scrubbed_of_it() {
        let e = RedisError::from((
            ::redis::ErrorKind::Client,
            "refused",
            "for user x with password s3cret-canary\nsecond line".to_string(),
        ));
        let said = cause(&e, &["s3cret-canary".to_string(), String::new()]);
        assert!(!said.contains("s3cret-canary"), "{said}");
        assert!(said.contains("password ***"), "{said}");
        assert!(!said.contains('\n'), "one line: {said}");
    }

    #[test]
    fn ttls_become_milliseconds_redis_accepts() {
        assert_eq!(px(Duration::ZERO), 1);
        assert_eq!(px(Duration::from_micros(1500)), 1);
        assert_eq!(px(Duration::from_secs(2)), 2000);
        assert_eq!(px(Duration::MAX), super::super::MAX_TTL.as_millis() as u64);
    }
}
