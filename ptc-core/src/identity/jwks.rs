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
        let body = crate::openapi::read_capped(resp, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| match e {
                crate::openapi::ReadError::TooLarge => {
                    format!("the {what} at {url} is larger than {MAX_DOCUMENT_BYTES} bytes")
                }
                crate::openapi::ReadError::Failed(e) => {
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
}
