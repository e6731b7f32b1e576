//! An authorization server's signing keys: found through its metadata (RFC 8414, else OpenID
//! discovery), fetched from its `jwks_uri`, cached, and fetched again when they age or when a
//! token names a key id the cache lacks (a rotation), at most once per interval so a flood of
//! tokens with made-up key ids cannot turn into a flood of fetches.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey};

/// Largest metadata or key set document read.
const MAX_DOCUMENT_BYTES: u64 = 1 << 20;

/// One verification key.
pub struct Key {
    /// The key, ready to verify.
    pub decoding: DecodingKey,
    /// The algorithm the key set binds it to, if any: a token must then use exactly that one.
    pub alg: Option<Algorithm>,
    family: Family,
}

/// What kind of key, so a token's algorithm can only be checked with a key made for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Okp,
}

impl Family {
    fn of(alg: Algorithm) -> Option<Family> {
        use Algorithm::*;
        match alg {
            RS256 | RS384 | RS512 | PS256 | PS384 | PS512 => Some(Family::Rsa),
            ES256 | ES384 => Some(Family::Ec),
            EdDSA => Some(Family::Okp),
            HS256 | HS384 | HS512 => None,
        }
    }
}

impl Key {
    /// Whether this key may check a token signed with `alg`.
    pub fn fits(&self, alg: Algorithm) -> bool {
        self.alg.is_none_or(|a| a == alg) && Family::of(alg) == Some(self.family)
    }
}

/// Why no key was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The key set has no key with that id, even fetched again: the token was not signed by this
    /// issuer (or with a key it retired).
    Unknown(String),
    /// The keys cannot be had: the issuer's metadata or key set could not be fetched or read.
    Unavailable(String),
}

#[derive(Default)]
struct Cached {
    fetched: Option<Instant>,
    by_kid: HashMap<String, Arc<Key>>,
    /// Keys without a `kid`: tried in turn for a token without one.
    unnamed: Vec<Arc<Key>>,
}

/// The cached signing keys of one issuer.
pub struct IssuerKeys {
    issuer: String,
    http: reqwest::Client,
    /// How long fetched keys are used before they are fetched again.
    ttl: Duration,
    /// Shortest time between two fetches for an unknown key id.
    refetch_interval: Duration,
    jwks_uri: tokio::sync::OnceCell<String>,
    cached: RwLock<Cached>,
    /// One fetch at a time (the others wait for it and use its keys), holding when an unknown
    /// key id last fetched.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

impl IssuerKeys {
    /// The keys of `issuer` (its identifier, as tokens carry it in `iss`), fetched on first use.
    pub fn new(issuer: &str, http: reqwest::Client, ttl: Duration, refetch: Duration) -> Self {
        IssuerKeys {
            issuer: issuer.trim_end_matches('/').to_string(),
            http,
            ttl,
            refetch_interval: refetch,
            jwks_uri: tokio::sync::OnceCell::new(),
            cached: RwLock::new(Cached::default()),
            fetching: tokio::sync::Mutex::new(None),
        }
    }

    /// The issuer's identifier.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The key with id `kid` (or, without one, the keys without ids), fetching the key set when
    /// it is missing, old, or lacks that id.
    pub async fn keys(&self, kid: Option<&str>) -> Result<Vec<Arc<Key>>, KeyError> {
        let fresh = |c: &Cached| c.fetched.is_some_and(|t| t.elapsed() < self.ttl);
        if let Some(found) = self.lookup(kid, fresh) {
            return Ok(found);
        }
        let mut refetched = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(found) = self.lookup(kid, fresh) {
            return Ok(found);
        }
        let last = self.read().fetched;
        let stale = last.is_none_or(|t| t.elapsed() >= self.ttl);
        // An unknown id fetches again (a rotation), but not twice within the interval: made-up
        // ids must not turn into a flood of fetches.
        let may_refetch = refetched.is_none_or(|t| t.elapsed() >= self.refetch_interval);
        if !stale && may_refetch {
            *refetched = Some(Instant::now());
        }
        if (stale || may_refetch)
            && let Err(e) = self.fetch().await
        {
            if last.is_none() {
                return Err(KeyError::Unavailable(e));
            }
            // The keys in hand stay in use while the issuer cannot be reached.
            tracing::warn!(target: "ptc::auth", issuer = %self.issuer, "{e}");
        }
        self.lookup(kid, |c| c.fetched.is_some())
            .ok_or_else(|| match kid {
                Some(kid) => KeyError::Unknown(format!(
                    "the issuer {} has no key with id `{kid}` (its current key set)",
                    self.issuer
                )),
                None => KeyError::Unknown(format!(
                    "the token names no key id (`kid`) and the issuer {} has no key without one",
                    self.issuer
                )),
            })
    }

    /// Whether a key this set once had (`kid`) is still in it (keys without an id always are):
    /// a token checked with a key the issuer has since dropped is checked again.
    pub fn still_has(&self, kid: Option<&str>) -> bool {
        kid.is_none_or(|k| self.read().by_kid.contains_key(k))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Cached> {
        self.cached.read().unwrap_or_else(|e| e.into_inner())
    }

    fn lookup(&self, kid: Option<&str>, usable: impl Fn(&Cached) -> bool) -> Option<Vec<Arc<Key>>> {
        let cached = self.read();
        if !usable(&cached) {
            return None;
        }
        match kid {
            Some(kid) => cached.by_kid.get(kid).map(|k| vec![k.clone()]),
            None if cached.unnamed.is_empty() => None,
            None => Some(cached.unnamed.clone()),
        }
    }

    /// Fetches the key set (finding `jwks_uri` first, once) and replaces the cache.
    async fn fetch(&self) -> Result<(), String> {
        let uri = self
            .jwks_uri
            .get_or_try_init(|| self.discover())
            .await?
            .clone();
        let doc = self.get_json(&uri, "key set").await?;
        let keys = doc
            .get("keys")
            .and_then(|k| k.as_array())
            .ok_or_else(|| format!("the key set at {uri} has no `keys` list"))?;
        let mut cached = Cached {
            fetched: Some(Instant::now()),
            ..Cached::default()
        };
        for key in keys {
            match parse_key(key) {
                Ok(Some((kid, k))) => match kid {
                    Some(kid) => {
                        cached.by_kid.insert(kid, Arc::new(k));
                    }
                    None => cached.unnamed.push(Arc::new(k)),
                },
                // Encryption keys and symmetric keys are not for checking signatures.
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(target: "ptc::auth", issuer = %self.issuer, "key skipped: {e}")
                }
            }
        }
        *self.cached.write().unwrap_or_else(|e| e.into_inner()) = cached;
        Ok(())
    }

    /// The `jwks_uri` from the issuer's metadata, whose `issuer` must be the one configured
    /// (RFC 8414 §3.3: otherwise another server's keys could be passed off as this one's).
    async fn discover(&self) -> Result<String, String> {
        let mut tried = Vec::new();
        for well_known in ["oauth-authorization-server", "openid-configuration"] {
            let url = metadata_url(&self.issuer, well_known)?;
            match self.get_json(&url, "metadata").await {
                Ok(doc) => {
                    let named = doc.get("issuer").and_then(|i| i.as_str()).unwrap_or("");
                    if named.trim_end_matches('/') != self.issuer {
                        return Err(format!(
                            "the metadata at {url} names the issuer `{named}`, not `{}`",
                            self.issuer
                        ));
                    }
                    return doc
                        .get("jwks_uri")
                        .and_then(|u| u.as_str())
                        .map(str::to_string)
                        .ok_or_else(|| format!("the metadata at {url} has no `jwks_uri`"));
                }
                Err(e) => tried.push(e),
            }
        }
        Err(tried.join("; "))
    }

    async fn get_json(&self, url: &str, what: &str) -> Result<serde_json::Value, String> {
        let resp = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("cannot fetch the {what} at {url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("the {what} at {url} answered {}", resp.status()));
        }
        let body = crate::wire::http_client::read_capped(resp, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| match e {
                crate::wire::http_client::ReadError::TooLarge => {
                    format!("the {what} at {url} is larger than {MAX_DOCUMENT_BYTES} bytes")
                }
                crate::wire::http_client::ReadError::Failed(e) => {
                    format!("cannot read the {what} at {url}: {e}")
                }
            })?;
        serde_json::from_slice(&body).map_err(|e| format!("the {what} at {url} is not JSON: {e}"))
    }
}

/// Where an issuer's metadata is: the well-known segment goes between the host and the
/// issuer's path (RFC 8414 §3.1).
pub fn metadata_url(issuer: &str, well_known: &str) -> Result<String, String> {
    let url =
        url::Url::parse(issuer).map_err(|e| format!("issuer `{issuer}` is not a URL: {e}"))?;
    let path = url.path().trim_end_matches('/');
    let mut out = url.clone();
    out.set_path(&format!("/.well-known/{well_known}{path}"));
    out.set_query(None);
    Ok(out.to_string())
}

/// A signing key of the set, with its id; `None` for keys not meant for checking signatures.
fn parse_key(value: &serde_json::Value) -> Result<Option<(Option<String>, Key)>, String> {
    if value
        .get("use")
        .and_then(|u| u.as_str())
        .is_some_and(|u| u != "sig")
    {
        return Ok(None);
    }
    let jwk: Jwk = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Family::Rsa,
        AlgorithmParameters::EllipticCurve(_) => Family::Ec,
        AlgorithmParameters::OctetKeyPair(_) => Family::Okp,
        // A shared secret never comes from a public key set.
        AlgorithmParameters::OctetKey(_) => return Ok(None),
    };
    let alg = value
        .get("alg")
        .and_then(|a| a.as_str())
        .map(|a| {
            a.parse::<Algorithm>()
                .map_err(|_| format!("unknown alg `{a}`"))
        })
        .transpose()?;
    let decoding = DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string())?;
    Ok(Some((
        jwk.common.key_id.clone(),
        Key {
            decoding,
            alg,
            family,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_goes_between_host_and_path() {
        assert_eq!(
            metadata_url("https://auth.example.com", "oauth-authorization-server").unwrap(),
            "https://auth.example.com/.well-known/oauth-authorization-server"
        );
        assert_eq!(
            metadata_url("https://auth.example.com/tenant/a/", "openid-configuration").unwrap(),
            "https://auth.example.com/.well-known/openid-configuration/tenant/a"
        );
        assert!(metadata_url("not a url", "x").is_err());
    }

    #[test]
    fn keys_check_only_their_own_algorithms() {
        let rsa = serde_json::json!({"kty": "RSA", "kid": "r", "alg": "RS256", "use": "sig",
            "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
            "e": "AQAB"});
        let (kid, key) = parse_key(&rsa).unwrap().unwrap();
        assert_eq!(kid.as_deref(), Some("r"));
        assert!(key.fits(Algorithm::RS256));
        assert!(!key.fits(Algorithm::RS512), "bound to RS256 by the set");
        assert!(!key.fits(Algorithm::ES256));
        assert!(!key.fits(Algorithm::HS256));
        let enc = serde_json::json!({"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"});
        assert!(parse_key(&enc).unwrap().is_none());
        let oct = serde_json::json!({"kty": "oct", "k": "c2VjcmV0"});
        assert!(parse_key(&oct).unwrap().is_none());
        assert!(parse_key(&serde_json::json!({"kty": "XYZ"})).is_err());
    }

    /// The RSA public key of the test above, with `kid` (`None`: without one).
    fn rsa(kid: Option<&str>) -> serde_json::Value {
        let mut k = serde_json::json!({"kty": "RSA", "alg": "RS256", "use": "sig",
            "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
            "e": "AQAB"});
        if let Some(kid) = kid {
            k["kid"] = kid.into();
        }
        k
    }

    /// A loopback authorization server: its metadata (at `which` well-known path, naming
    /// `issuer` or its own URL) and a key set the test changes; it counts the key set fetches.
    struct Server {
        url: String,
        keys: Arc<std::sync::Mutex<(u16, String)>>,
        fetches: Arc<std::sync::atomic::AtomicU32>,
    }

    async fn server(which: &'static str, issuer: Option<&'static str>) -> Server {
        use axum::routing::get;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let keys = Arc::new(std::sync::Mutex::new((
            200,
            serde_json::json!({"keys": [rsa(Some("k1"))]}).to_string(),
        )));
        let fetches = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let meta = serde_json::json!({"issuer": issuer.unwrap_or(&url),
            "jwks_uri": format!("{url}/jwks")})
        .to_string();
        let (k, f) = (keys.clone(), fetches.clone());
        let app = axum::Router::new()
            .route(
                &format!("/.well-known/{which}"),
                get(move || async move { meta }),
            )
            .route(
                "/jwks",
                get(move || {
                    let (k, f) = (k.clone(), f.clone());
                    async move {
                        f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let (status, body) = k.lock().unwrap().clone();
                        (axum::http::StatusCode::from_u16(status).unwrap(), body)
                    }
                }),
            );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Server { url, keys, fetches }
    }

    impl Server {
        fn set(&self, status: u16, body: serde_json::Value) {
            *self.keys.lock().unwrap() = (status, body.to_string());
        }
        fn fetches(&self) -> u32 {
            self.fetches.load(std::sync::atomic::Ordering::Relaxed)
        }
        fn keys(&self, ttl: Duration, refetch: Duration) -> IssuerKeys {
            IssuerKeys::new(
                &format!("{}/", self.url),
                crate::wire::http_client::builder().build().unwrap(),
                ttl,
                refetch,
            )
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[tokio::test]
    async fn keys_are_fetched_once_and_an_unknown_id_fetches_again_once_per_interval() {
        let s = server("oauth-authorization-server", None).await;
        let keys = s.keys(HOUR, HOUR);
        assert_eq!(keys.issuer(), s.url, "without its trailing slash");
        assert_eq!(keys.keys(Some("k1")).await.unwrap().len(), 1);
        assert_eq!(keys.keys(Some("k1")).await.unwrap().len(), 1);
        assert_eq!(s.fetches(), 1, "fetched on first use, then cached");
        assert!(keys.still_has(Some("k1")) && keys.still_has(None));
        assert!(!keys.still_has(Some("k9")));
        // A rotation: the new id is not cached, so the set is fetched again and it is found.
        s.set(200, serde_json::json!({"keys": [rsa(Some("k2"))]}));
        assert_eq!(keys.keys(Some("k2")).await.unwrap().len(), 1);
        assert_eq!(s.fetches(), 2);
        assert!(!keys.still_has(Some("k1")), "the old key left the set");
        // An id the issuer never had: no second fetch within the interval.
        let e = keys.keys(Some("nope")).await.err().unwrap();
        assert_eq!(
            e,
            KeyError::Unknown(format!(
                "the issuer {} has no key with id `nope` (its current key set)",
                s.url
            ))
        );
        assert_eq!(s.fetches(), 2);
        // Without keys that have no id, a token without one has no key.
        assert!(
            matches!(keys.keys(None).await, Err(KeyError::Unknown(m)) if m.contains("names no key id"))
        );
    }

    #[tokio::test]
    async fn with_no_interval_every_unknown_id_fetches_and_old_keys_are_fetched_again() {
        let s = server("oauth-authorization-server", None).await;
        let keys = s.keys(HOUR, Duration::ZERO);
        keys.keys(Some("k1")).await.unwrap();
        assert!(keys.keys(Some("x")).await.is_err());
        assert!(keys.keys(Some("y")).await.is_err());
        assert_eq!(s.fetches(), 3);
        let stale = s.keys(Duration::ZERO, HOUR);
        stale.keys(Some("k1")).await.unwrap();
        stale.keys(Some("k1")).await.unwrap();
        assert_eq!(
            s.fetches(),
            5,
            "keys older than their time are fetched again"
        );
    }

    #[tokio::test]
    async fn keys_without_an_id_check_tokens_without_one() {
        let s = server("openid-configuration", None).await;
        s.set(
            200,
            serde_json::json!({"keys": [rsa(None), rsa(Some("k1")),
                {"kty": "oct", "k": "c2VjcmV0"}, {"kty": "XYZ"}]}),
        );
        let keys = s.keys(HOUR, HOUR);
        assert_eq!(
            keys.keys(None).await.unwrap().len(),
            1,
            "found through OpenID discovery"
        );
        assert_eq!(keys.keys(Some("k1")).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_broken_issuer_says_what_is_wrong_and_keys_in_hand_stay_in_use() {
        let s = server("oauth-authorization-server", None).await;
        let keys = s.keys(Duration::ZERO, HOUR);
        keys.keys(Some("k1")).await.unwrap();
        s.set(500, serde_json::json!({}));
        assert_eq!(
            keys.keys(Some("k1")).await.unwrap().len(),
            1,
            "the old keys serve"
        );
        let fresh = s.keys(HOUR, HOUR);
        let unavailable = |e: Result<Vec<Arc<Key>>, KeyError>| match e {
            Err(KeyError::Unavailable(m)) => m,
            other => panic!("unavailable, not {:?}", other.map(|k| k.len())),
        };
        let m = unavailable(fresh.keys(Some("k1")).await);
        assert_eq!(
            m,
            format!(
                "the key set at {}/jwks answered 500 Internal Server Error",
                s.url
            )
        );
        for (body, says) in [
            (serde_json::json!({"no": "keys"}), "has no `keys` list"),
            (
                serde_json::json!("x".repeat(MAX_DOCUMENT_BYTES as usize)),
                "is larger than",
            ),
        ] {
            s.set(200, body);
            let m = unavailable(s.keys(HOUR, HOUR).keys(Some("k1")).await);
            assert!(m.contains(says), "{m}");
        }
        *s.keys.lock().unwrap() = (200, "not json".into());
        let m = unavailable(s.keys(HOUR, HOUR).keys(Some("k1")).await);
        assert!(m.contains("is not JSON"), "{m}");
        // Metadata naming another issuer: its keys could be anyone's.
        let other = server(
            "oauth-authorization-server",
            Some("https://evil.example.com"),
        )
        .await;
        let m = unavailable(other.keys(HOUR, HOUR).keys(Some("k1")).await);
        assert_eq!(
            m,
            format!(
                "the metadata at {}/.well-known/oauth-authorization-server names the issuer \
                 `https://evil.example.com`, not `{}`",
                other.url, other.url
            )
        );
        let nobody = IssuerKeys::new(
            "http://127.0.0.1:1",
            crate::wire::http_client::builder().build().unwrap(),
            HOUR,
            HOUR,
        );
        let m = unavailable(nobody.keys(Some("k1")).await);
        assert!(m.starts_with("cannot fetch the metadata at http://127.0.0.1:1/.well-known/oauth-authorization-server"), "{m}");
        assert!(m.contains("openid-configuration"), "both were tried: {m}");
    }
}
