//! Credentials that depend on who calls: a file per caller (`per_caller`), or the caller's own
//! token exchanged at its authorization server for one meant for the upstream
//! (`caller_token_exchange`, RFC 8693), cached per caller token until it expires.
//!
//! The caller's token goes to the token endpoint only, never to an upstream (MCP forbids token
//! passthrough). Exchanged tokens are secrets like any other: registered with the redactor while
//! cached, and forgotten by it when they leave the cache, so the redactor does not grow with the
//! number of callers ever seen.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ptc_plan::{AuthEmitter, CredentialBinding, CredentialSource, TokenExchangeSource};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::credentials::binding::{CallerSecrets, CredentialError, Secret, resolve};
use crate::credentials::identity::Caller;

/// Most exchanged tokens kept at once; past it the one expiring soonest goes.
const MAX_CACHED: usize = 1024;
/// An exchanged token is used until this long before it expires (an upstream must not see it
/// expire in flight).
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// Largest token endpoint answer read.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// How long a token exchange may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a call needs besides the upstream: where secrets come from, the redactor, and who the
/// call is made for (per-caller bindings read the caller's secret).
pub(crate) struct CallEnv<'a> {
    pub credentials: &'a [CredentialBinding],
    pub secrets: &'a ptc_plan::Secrets,
    pub redactor: &'a crate::credentials::redact::Redactor,
    pub caller: Option<&'a Caller>,
    pub exchanges: &'a Exchanges,
    /// Who is asked when an upstream needs a person's OAuth consent (none: nobody can be).
    pub consent: Option<&'a std::sync::Arc<dyn crate::credentials::upstream_oauth::Consent>>,
}

/// The per-caller secrets the bindings of `emitters` need, for the caller in `env`.
pub(crate) async fn for_call(
    emitters: &[AuthEmitter],
    env: &CallEnv<'_>,
) -> Result<CallerSecrets, CredentialError> {
    let mut out = CallerSecrets::default();
    for e in emitters {
        let Some(binding) = env
            .credentials
            .iter()
            .find(|c| c.name == e.binding() && c.source.is_per_caller())
        else {
            continue;
        };
        let caller = env.caller.ok_or_else(|| {
            CredentialError(format!(
                "credential `{}` depends on the caller, and this call is made for none",
                binding.name
            ))
        })?;
        let secret = match &binding.source {
            CredentialSource::PerCaller { files } => per_caller_file(binding, files, caller)?,
            CredentialSource::CallerTokenExchange(x) => {
                env.exchanges.token(&binding.name, x, caller, env).await?
            }
            _ => continue,
        };
        out.0.push((binding.name.clone(), secret));
    }
    Ok(out)
}

/// The caller's file (or `*`'s), read as a `file` binding is.
fn per_caller_file(
    binding: &CredentialBinding,
    files: &std::collections::BTreeMap<String, String>,
    caller: &Caller,
) -> Result<Secret, CredentialError> {
    let path = files
        .get(&caller.subject)
        .or_else(|| files.get("*"))
        .ok_or_else(|| {
            CredentialError(format!(
                "credential `{}` has no file for the caller `{}` (and no \"*\" entry)",
                binding.name, caller.subject
            ))
        })?;
    let file = CredentialBinding {
        name: binding.name.clone(),
        source: CredentialSource::File { path: path.clone() },
        scheme_hint: binding.scheme_hint,
    };
    resolve(&file, &ptc_plan::Secrets::default())
}

/// A binding's name and the SHA-256 of the caller's token.
type CacheKey = (String, [u8; 32]);

/// Exchanged tokens until they are due to expire, at most `cap` of them.
struct Cache {
    tokens: HashMap<CacheKey, (Secret, Instant)>,
    cap: usize,
}

impl Cache {
    fn new(cap: usize) -> Self {
        Cache {
            tokens: HashMap::new(),
            cap,
        }
    }

    /// The token cached under `key`, while it is before its time at `now`.
    fn get(&self, key: &CacheKey, now: Instant) -> Option<Secret> {
        self.tokens
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(s, _)| s.clone())
    }

    /// Caches `secret` under `key` until `until`; the tokens that left the cache (past their
    /// time at `now`, the one due soonest when it is full, the one it replaces), for the
    /// redactor to forget.
    fn put(&mut self, key: CacheKey, secret: Secret, until: Instant, now: Instant) -> Vec<Secret> {
        let mut gone = Vec::new();
        self.tokens.retain(|_, (s, t)| {
            let live = now < *t;
            if !live {
                gone.push(s.clone());
            }
            live
        });
        if !self.tokens.contains_key(&key)
            && self.tokens.len() >= self.cap
            && let Some(k) = self
                .tokens
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
            && let Some((s, _)) = self.tokens.remove(&k)
        {
            gone.push(s);
        }
        if let Some((old, _)) = self.tokens.insert(key, (secret.clone(), until)) {
            gone.push(old);
        }
        gone.retain(|s| *s != secret);
        gone
    }
}

/// When a token that lives `lifetime` from `now` stops being used: [`EXPIRY_MARGIN`] before it
/// expires, or half way for a token that lives less than twice the margin.
fn use_until(now: Instant, lifetime: Duration) -> Instant {
    now + lifetime.saturating_sub(EXPIRY_MARGIN.min(lifetime / 2))
}

/// Exchanged tokens by binding and caller token, until they expire.
pub struct Exchanges {
    cached: Mutex<Cache>,
    http: OnceLock<reqwest::Client>,
    /// Exchanges made (not answered from the cache), for tests and metrics.
    made: std::sync::atomic::AtomicU64,
}

impl Default for Exchanges {
    fn default() -> Self {
        Exchanges {
            cached: Mutex::new(Cache::new(MAX_CACHED)),
            http: OnceLock::new(),
            made: Default::default(),
        }
    }
}

fn cache_key(name: &str, token: &crate::credentials::identity::CallerToken) -> CacheKey {
    (
        name.to_string(),
        Sha256::digest(token.expose().as_bytes()).into(),
    )
}

impl Exchanges {
    /// How many exchanges reached the token endpoint.
    pub fn made(&self) -> u64 {
        self.made.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The token binding `name` gets for `caller`: cached, or exchanged now.
    async fn token(
        &self,
        name: &str,
        x: &TokenExchangeSource,
        caller: &Caller,
        env: &CallEnv<'_>,
    ) -> Result<Secret, CredentialError> {
        let subject_token = caller.token.as_ref().ok_or_else(|| {
            CredentialError(format!(
                "credential `{name}` exchanges the caller's token, but the caller `{}` has none \
                 (it did not authenticate with OAuth)",
                caller.subject
            ))
        })?;
        let key = cache_key(name, subject_token);
        if let Some(secret) = self.lock().get(&key, Instant::now()) {
            return Ok(secret);
        }
        let (secret, lifetime) = self.exchange(name, x, subject_token.expose(), env).await?;
        self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::credentials::binding::register(env.redactor, &secret);
        let now = Instant::now();
        let gone = self
            .lock()
            .put(key, secret.clone(), use_until(now, lifetime), now);
        for s in gone {
            env.redactor.forget(s.expose());
        }
        Ok(secret)
    }

    /// After a 401: the token binding `name` got for `caller` is not used again. It stays
    /// masked: refused by one upstream, it may still be good elsewhere (401s are rare, so the
    /// redactor does not grow by much).
    pub(crate) fn forget(&self, name: &str, caller: Option<&Caller>) {
        if let Some(token) = caller.and_then(|c| c.token.as_ref()) {
            self.lock().tokens.remove(&cache_key(name, token));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One RFC 8693 request: the token and how long it lives.
    async fn exchange(
        &self,
        name: &str,
        x: &TokenExchangeSource,
        subject_token: &str,
        env: &CallEnv<'_>,
    ) -> Result<(Secret, Duration), CredentialError> {
        let fail = |why: String| {
            // The caller's token must not come back in a message, even if the server echoed it.
            CredentialError(format!(
                "credential `{name}`: the token exchange at {} {}",
                x.token_endpoint,
                why.replace(subject_token, crate::credentials::redact::MASK)
            ))
        };
        let client_secret = env
            .credentials
            .iter()
            .find(|c| c.name == x.client_secret)
            .ok_or_else(|| {
                fail(format!(
                    "has no client secret binding `{}`",
                    x.client_secret
                ))
            })
            .and_then(|b| resolve(b, env.secrets))?;
        crate::credentials::binding::register(env.redactor, &client_secret);
        let body = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair(
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            )
            .append_pair("subject_token", subject_token)
            .append_pair(
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            )
            .append_pair(
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            );
            if let Some(a) = &x.audience {
                form.append_pair("audience", a);
            }
            if let Some(r) = &x.resource {
                form.append_pair("resource", r);
            }
            if let Some(s) = &x.scope {
                form.append_pair("scope", s);
            }
            form.finish()
        };
        let http = self.http.get_or_init(|| {
            crate::wire::http_client::builder()
                .timeout(EXCHANGE_TIMEOUT)
                .build()
                .unwrap_or_default()
        });
        let resp = http
            .post(&x.token_endpoint)
            .basic_auth(&x.client_id, Some(client_secret.expose()))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                fail(format!(
                    "failed: {}",
                    crate::wire::http_client::describe(&e)
                ))
            })?;
        let status = resp.status();
        let body = crate::wire::http_client::read_capped(resp, MAX_ANSWER_BYTES)
            .await
            .map_err(|_| fail("answered more than 64 KiB, or broke off".into()))?;
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if !status.is_success() {
            let field = |k: &str| answer.get(k).and_then(Value::as_str).unwrap_or("");
            return Err(fail(
                format!(
                    "answered {}: {} {}",
                    status.as_u16(),
                    field("error"),
                    field("error_description")
                )
                .trim_end()
                .to_string(),
            ));
        }
        let token = answer
            .get("access_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty() && !t.contains(['\r', '\n']))
            .ok_or_else(|| fail("answered without a usable access_token".into()))?;
        // Without `expires_in` the token is used for a minute: long enough to help, short
        // enough that an unknown lifetime does no harm.
        let lifetime = Duration::from_secs(
            answer
                .get("expires_in")
                .and_then(Value::as_u64)
                .unwrap_or(60),
        );
        Ok((Secret::new(token), lifetime))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::identity::CallerToken;
    use crate::credentials::redact::Redactor;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn caller(subject: &str, token: Option<&str>) -> Caller {
        Caller {
            token: token.map(CallerToken::new),
            ..Caller::local()
        }
        .with_subject(subject)
    }

    impl Caller {
        fn with_subject(mut self, s: &str) -> Self {
            self.subject = s.into();
            self
        }
    }

    fn files(entries: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_caller_reads_its_own_file_else_stars() {
        let dir = std::env::temp_dir().join(format!("ptc-per-caller-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, s) = (dir.join("a"), dir.join("s"));
        std::fs::write(&a, "alice-secret\n").unwrap();
        std::fs::write(&s, "shared-secret").unwrap();
        let binding = CredentialBinding {
            name: "p".into(),
            source: CredentialSource::PerCaller {
                files: Default::default(),
            },
            scheme_hint: None,
        };
        let both = files(&[("alice", a.to_str().unwrap()), ("*", s.to_str().unwrap())]);
        // Through a call's secrets, as the transport reads them.
        let per_caller = CredentialBinding {
            name: "p".into(),
            source: CredentialSource::PerCaller {
                files: both.clone(),
            },
            scheme_hint: None,
        };
        let exchanges = Exchanges::default();
        let alice = caller("alice", None);
        let env = CallEnv {
            credentials: std::slice::from_ref(&per_caller),
            secrets: &ptc_plan::Secrets::default(),
            redactor: &Redactor::new(),
            caller: Some(&alice),
            exchanges: &exchanges,
            consent: None,
        };
        let emitters = [AuthEmitter::Bearer {
            binding: "p".into(),
        }];
        let read = futures_util::FutureExt::now_or_never(for_call(&emitters, &env))
            .expect("a file read does not wait")
            .unwrap();
        assert_eq!(read.get("p").unwrap().expose(), "alice-secret");
        let read = |f: &_, who: &str| {
            per_caller_file(&binding, f, &caller(who, None)).map(|s| s.expose().to_string())
        };
        assert_eq!(read(&both, "alice").unwrap(), "alice-secret");
        assert_eq!(read(&both, "bob").unwrap(), "shared-secret");
        let only_alice = files(&[("alice", a.to_str().unwrap())]);
        assert_eq!(
            read(&only_alice, "bob").unwrap_err().0,
            "credential `p` has no file for the caller `bob` (and no \"*\" entry)"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A loopback token endpoint: answers `answer` (status, JSON) and counts the requests,
    /// keeping the last form it got.
    struct Endpoint {
        url: String,
        hits: Arc<AtomicU64>,
        last: Arc<Mutex<String>>,
    }

    async fn endpoint(status: u16, answer: Value) -> Endpoint {
        let hits = Arc::new(AtomicU64::new(0));
        let last = Arc::new(Mutex::new(String::new()));
        let (h, l) = (hits.clone(), last.clone());
        let app = axum::Router::new().route(
            "/token",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
                let (h, l, answer) = (h.clone(), l.clone(), answer.clone());
                async move {
                    h.fetch_add(1, Ordering::Relaxed);
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    *l.lock().unwrap() = format!("{auth}\n{body}");
                    (
                        axum::http::StatusCode::from_u16(status).unwrap(),
                        axum::Json(answer),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Endpoint {
            url: format!("http://{addr}/token"),
            hits,
            last,
        }
    }

    fn source(url: &str) -> TokenExchangeSource {
        TokenExchangeSource {
            token_endpoint: url.into(),
            audience: Some("https://api.example.test".into()),
            resource: None,
            scope: Some("read".into()),
            client_id: "ptc-host".into(),
            client_secret: "client".into(),
        }
    }

    fn bindings(url: &str) -> Vec<CredentialBinding> {
        static N: AtomicU64 = AtomicU64::new(0);
        let file = std::env::temp_dir().join(format!(
            "ptc-exchange-client-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&file, "client-secret-value").unwrap();
        vec![
            CredentialBinding {
                name: "client".into(),
                source: CredentialSource::File {
                    path: file.to_string_lossy().into(),
                },
                scheme_hint: None,
            },
            CredentialBinding {
                name: "x".into(),
                source: CredentialSource::CallerTokenExchange(source(url)),
                scheme_hint: None,
            },
        ]
    }

    struct Env {
        credentials: Vec<CredentialBinding>,
        secrets: ptc_plan::Secrets,
        redactor: Redactor,
        exchanges: Exchanges,
    }

    impl Env {
        fn new(url: &str) -> Self {
            Env {
                credentials: bindings(url),
                secrets: ptc_plan::Secrets::default(),
                redactor: Redactor::new(),
                exchanges: Exchanges::default(),
            }
        }

        async fn token(&self, who: &Caller) -> Result<String, String> {
            let env = CallEnv {
                credentials: &self.credentials,
                secrets: &self.secrets,
                redactor: &self.redactor,
                caller: Some(who),
                exchanges: &self.exchanges,
                consent: None,
            };
            let emitters = [AuthEmitter::Bearer {
                binding: "x".into(),
            }];
            for_call(&emitters, &env)
                .await
                .map(|s| s.get("x").unwrap().expose().to_string())
                .map_err(|e| e.0)
        }
    }

    #[tokio::test]
    async fn an_exchange_asks_for_the_upstream_and_is_cached_per_caller_token() {
        let ep = endpoint(
            200,
            serde_json::json!({"access_token": "exchanged-1", "expires_in": 3600,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
        )
        .await;
        let env = Env::new(&ep.url);
        let alice = caller("alice", Some("alice-own-token"));
        assert_eq!(env.token(&alice).await.unwrap(), "exchanged-1");
        let sent = ep.last.lock().unwrap().clone();
        let (auth, form) = sent.split_once('\n').unwrap();
        use base64::Engine;
        assert_eq!(
            auth,
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("ptc-host:client-secret-value")
            )
        );
        let pairs: HashMap<String, String> = url::form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        assert_eq!(
            pairs["grant_type"],
            "urn:ietf:params:oauth:grant-type:token-exchange"
        );
        assert_eq!(pairs["subject_token"], "alice-own-token");
        assert_eq!(
            pairs["subject_token_type"],
            "urn:ietf:params:oauth:token-type:access_token"
        );
        assert_eq!(pairs["audience"], "https://api.example.test");
        assert_eq!(pairs["scope"], "read");
        assert!(!pairs.contains_key("resource"));
        // Cached: no second request; the token is a secret the redactor masks.
        assert_eq!(env.token(&alice).await.unwrap(), "exchanged-1");
        assert_eq!(ep.hits.load(Ordering::Relaxed), 1);
        assert_eq!(env.exchanges.made(), 1);
        assert_eq!(env.redactor.redact("x exchanged-1 y"), "x [REDACTED] y");
        // Another token of the same subject is exchanged on its own.
        let again = caller("alice", Some("alice-second-token"));
        env.token(&again).await.unwrap();
        assert_eq!(ep.hits.load(Ordering::Relaxed), 2);
        // After a 401 the cached one is not used again.
        assert_eq!(env.exchanges.made(), 2);
        env.exchanges.forget("x", Some(&alice));
        env.token(&alice).await.unwrap();
        assert_eq!(ep.hits.load(Ordering::Relaxed), 3);
        env.exchanges.forget("x", None);
        env.exchanges.forget("other", Some(&alice));
        env.token(&alice).await.unwrap();
        assert_eq!(
            ep.hits.load(Ordering::Relaxed),
            3,
            "nothing else forgets it"
        );
    }

    #[tokio::test]
    async fn a_short_lived_token_is_exchanged_again_and_leaves_the_redactor() {
        // 1 s: used until half of it is left at most, so at once expired for this test's needs.
        let ep = endpoint(
            200,
            serde_json::json!({"access_token": "short-lived", "expires_in": 0}),
        )
        .await;
        let env = Env::new(&ep.url);
        let alice = caller("alice", Some("alice-own-token"));
        env.token(&alice).await.unwrap();
        env.token(&alice).await.unwrap();
        assert_eq!(
            ep.hits.load(Ordering::Relaxed),
            2,
            "a token living 0 s is not cached"
        );
        // The same value came back, so it is still masked.
        assert_eq!(env.redactor.redact("short-lived"), "[REDACTED]");
    }

    #[tokio::test]
    async fn refusals_say_why_and_never_carry_the_callers_token() {
        let ep = endpoint(
            400,
            serde_json::json!({"error": "invalid_grant",
                "error_description": "subject token alice-own-token expired"}),
        )
        .await;
        let env = Env::new(&ep.url);
        let alice = caller("alice", Some("alice-own-token"));
        let e = env.token(&alice).await.unwrap_err();
        assert_eq!(
            e,
            format!(
                "credential `x`: the token exchange at {} answered 400: invalid_grant subject \
                 token [REDACTED] expired",
                ep.url
            )
        );
        let no_token = env.token(&caller("local", None)).await.unwrap_err();
        assert_eq!(
            no_token,
            "credential `x` exchanges the caller's token, but the caller `local` has none (it \
             did not authenticate with OAuth)"
        );
        // A long token (an answer of several KiB) is fine; the cap is 64 KiB.
        let long = "t".repeat(8 * 1024);
        let ep = endpoint(
            200,
            serde_json::json!({"access_token": long, "expires_in": 60}),
        )
        .await;
        assert_eq!(Env::new(&ep.url).token(&alice).await.unwrap(), long);
        let huge = "t".repeat(64 * 1024);
        let ep = endpoint(200, serde_json::json!({"access_token": huge})).await;
        assert!(
            Env::new(&ep.url)
                .token(&alice)
                .await
                .unwrap_err()
                .ends_with("answered more than 64 KiB, or broke off")
        );
        let ep = endpoint(200, serde_json::json!({"token": "wrong-field"})).await;
        let env = Env::new(&ep.url);
        assert!(
            env.token(&alice)
                .await
                .unwrap_err()
                .ends_with("answered without a usable access_token")
        );
        let env = Env::new("http://127.0.0.1:1/token");
        assert!(env.token(&alice).await.unwrap_err().contains("failed:"));
    }

    #[tokio::test]
    async fn a_call_for_nobody_cannot_read_a_per_caller_binding() {
        let env = Env::new("http://127.0.0.1:1/token");
        let call_env = CallEnv {
            credentials: &env.credentials,
            secrets: &env.secrets,
            redactor: &env.redactor,
            caller: None,
            exchanges: &env.exchanges,
            consent: None,
        };
        let per_caller = [AuthEmitter::Bearer {
            binding: "x".into(),
        }];
        assert_eq!(
            for_call(&per_caller, &call_env).await.err().unwrap().0,
            "credential `x` depends on the caller, and this call is made for none"
        );
        // Other bindings are not read here at all.
        let plain = [AuthEmitter::Bearer {
            binding: "client".into(),
        }];
        let none = for_call(&plain, &call_env).await.unwrap();
        assert!(none.get("client").is_none());
    }

    fn k(n: u8) -> CacheKey {
        ("x".into(), [n; 32])
    }

    #[test]
    fn a_cached_token_is_used_until_its_time_and_not_at_it() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut c = Cache::new(10);
        assert!(c.put(k(1), Secret::new("a"), t0 + s, t0).is_empty());
        assert_eq!(
            c.get(&k(1), t0 + s - Duration::from_nanos(1)),
            Some(Secret::new("a"))
        );
        assert_eq!(c.get(&k(1), t0 + s), None);
        assert_eq!(c.get(&k(2), t0), None);
    }

    #[test]
    fn what_leaves_the_cache_is_forgotten_by_the_redactor() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut c = Cache::new(2);
        c.put(k(1), Secret::new("one"), t0 + s, t0);
        c.put(k(2), Secret::new("two"), t0 + 3 * s, t0);
        // Full: the one due soonest goes.
        assert_eq!(
            c.put(k(3), Secret::new("three"), t0 + 2 * s, t0),
            [Secret::new("one")]
        );
        assert_eq!(c.tokens.len(), 2);
        // Replacing a key makes no room and drops its old token (not the new one).
        assert_eq!(
            c.put(k(3), Secret::new("three-b"), t0 + 2 * s, t0),
            [Secret::new("three")]
        );
        assert!(
            c.put(k(3), Secret::new("three-b"), t0 + 2 * s, t0)
                .is_empty()
        );
        assert_eq!(c.tokens.len(), 2);
        // Past their time, tokens are swept at the next put (exactly at it included).
        let gone = c.put(k(4), Secret::new("four"), t0 + 9 * s, t0 + 2 * s);
        assert_eq!(gone, [Secret::new("three-b")]);
        assert!(c.tokens.contains_key(&k(2)) && c.tokens.contains_key(&k(4)));
        // With room to spare, only the sweep drops one: at its time, not a moment before.
        let mut roomy = Cache::new(10);
        roomy.put(k(1), Secret::new("one"), t0 + s, t0);
        assert!(
            roomy
                .put(
                    k(2),
                    Secret::new("two"),
                    t0 + 9 * s,
                    t0 + s - Duration::from_nanos(1)
                )
                .is_empty()
        );
        assert_eq!(
            roomy.put(k(3), Secret::new("three"), t0 + 9 * s, t0 + s),
            [Secret::new("one")]
        );
    }

    #[test]
    fn a_token_is_used_until_the_margin_before_it_expires_or_half_way() {
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        assert_eq!(use_until(t0, secs(3600)), t0 + secs(3570));
        assert_eq!(use_until(t0, secs(60)), t0 + secs(30));
        assert_eq!(use_until(t0, secs(20)), t0 + secs(10));
        assert_eq!(use_until(t0, secs(0)), t0);
    }

    #[tokio::test]
    async fn an_empty_or_multi_line_token_is_not_usable() {
        let alice = caller("alice", Some("alice-own-token"));
        for bad in ["", "two\nlines", "carriage\rreturn"] {
            let ep = endpoint(200, serde_json::json!({"access_token": bad})).await;
            assert!(
                Env::new(&ep.url)
                    .token(&alice)
                    .await
                    .unwrap_err()
                    .ends_with("answered without a usable access_token"),
                "{bad:?}"
            );
        }
    }
}
