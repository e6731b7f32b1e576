//! The HTTP host as an OAuth 2.1 resource server (MCP authorization): bearer JWTs checked
//! against the issuer's keys, `iss`, `aud` (this resource), `exp`/`nbf` with a small leeway and an
//! allow-list of algorithms (`none` and shared-secret ones are never accepted); the protected
//! resource metadata (RFC 9728) that tells clients where to get a token; and the
//! `WWW-Authenticate` challenge of a refusal.
//!
//! A token seen before is not checked again until it expires: its claims are cached under its
//! SHA-256, and the cache entry holds only while the key that signed it is still in the issuer's
//! set.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::credentials::identity::jwks::{IssuerKeys, KeyError};
use crate::credentials::identity::{Caller, CallerToken};

/// Most tokens remembered as checked; past it the cache starts over.
const MAX_REMEMBERED: usize = 10_000;

/// How the host checks bearer JWTs.
#[derive(Clone, Debug)]
pub struct OAuthOptions {
    /// The authorization servers whose tokens are accepted (their issuer identifiers). https,
    /// or http on a loopback address.
    pub issuers: Vec<String>,
    /// This resource's URL as clients use it (`https://ptc.example.com/mcp`): tokens must name
    /// it in `aud`, and the metadata names it as the resource.
    pub audience: String,
    /// Scopes every token must grant.
    pub required_scopes: Vec<String>,
    /// Signature algorithms accepted.
    pub algorithms: Vec<Algorithm>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// The claim that lists the caller's groups.
    pub groups_claim: String,
    /// How long an issuer's keys are used before they are fetched again.
    pub keys_ttl: Duration,
    /// Shortest time between two key fetches for an unknown key id.
    pub refetch_interval: Duration,
}

impl OAuthOptions {
    /// Options for tokens of `issuers` meant for `audience`, with the defaults: RS256, PS256,
    /// ES256 and EdDSA; 30 s leeway; groups from `groups`; keys kept 5 minutes; an unknown key id
    /// fetches them again at most every 10 s.
    pub fn new(issuers: Vec<String>, audience: String) -> Self {
        OAuthOptions {
            issuers,
            audience,
            required_scopes: Vec::new(),
            algorithms: vec![
                Algorithm::RS256,
                Algorithm::PS256,
                Algorithm::ES256,
                Algorithm::EdDSA,
            ],
            leeway: Duration::from_secs(30),
            groups_claim: "groups".into(),
            keys_ttl: Duration::from_secs(300),
            refetch_interval: Duration::from_secs(10),
        }
    }

    /// The options' own rules: at least one issuer, each https (or http on loopback), an
    /// absolute audience, asymmetric algorithms only.
    pub fn validate(&self) -> Result<(), String> {
        if self.issuers.is_empty() {
            return Err("OAuth needs at least one issuer (--oauth-issuer URL)".into());
        }
        for issuer in &self.issuers {
            secure_url(issuer, "issuer")?;
        }
        secure_url(&self.audience, "audience")?;
        if self.algorithms.is_empty() {
            return Err("OAuth needs at least one signature algorithm".into());
        }
        if let Some(a) = self
            .algorithms
            .iter()
            .find(|a| matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
        {
            return Err(format!(
                "{a:?} is a shared-secret algorithm: a resource server holding the secret could \
                 mint tokens itself; allow RS*, PS*, ES* or EdDSA"
            ));
        }
        Ok(())
    }

    /// The protected resource metadata (RFC 9728) served at [`Self::metadata_url`].
    pub fn metadata(&self) -> Json {
        let mut doc = serde_json::json!({
            "resource": self.audience,
            "authorization_servers": self.issuers,
            "bearer_methods_supported": ["header"],
            "resource_name": "ptc",
        });
        if !self.required_scopes.is_empty() {
            doc["scopes_supported"] = serde_json::json!(self.required_scopes);
        }
        doc
    }

    /// Where the metadata is: the well-known segment between the resource's host and its path
    /// (RFC 9728 §3.1).
    pub fn metadata_url(&self) -> String {
        crate::credentials::identity::jwks::metadata_url(&self.audience, "oauth-protected-resource")
            .unwrap_or_default()
    }

    /// The path the metadata is served at.
    pub fn metadata_path(&self) -> String {
        url::Url::parse(&self.metadata_url())
            .map(|u| u.path().to_string())
            .unwrap_or_else(|_| "/.well-known/oauth-protected-resource".into())
    }
}

/// https, or http on a loopback address (a test or a sidecar).
fn secure_url(url: &str, what: &str) -> Result<(), String> {
    let parsed =
        url::Url::parse(url).map_err(|e| format!("the OAuth {what} `{url}` is not a URL: {e}"))?;
    match ptc_plan::https_or_loopback(&parsed) {
        true => Ok(()),
        false => Err(format!(
            "the OAuth {what} `{url}` must use https:// (http:// only on a loopback address)"
        )),
    }
}

/// Why a request's token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// No token, or one that is not valid (401 `invalid_token`).
    Invalid(String),
    /// A valid token without a required scope (403 `insufficient_scope`).
    InsufficientScope(Vec<String>),
    /// The issuer's keys cannot be had (503): the token could not be checked.
    Unavailable(String),
}

impl Rejection {
    /// What the client is told (never the token).
    pub fn message(&self) -> String {
        match self {
            Rejection::Invalid(why) => why.clone(),
            Rejection::InsufficientScope(missing) => {
                format!("the token lacks the scope {}", missing.join(" "))
            }
            Rejection::Unavailable(why) => format!("the token cannot be checked now: {why}"),
        }
    }

    /// The `WWW-Authenticate` value (RFC 6750 §3, with RFC 9728's `resource_metadata`).
    pub fn challenge(&self, metadata_url: &str, scopes: &[String]) -> String {
        let mut parts = vec![format!("resource_metadata=\"{metadata_url}\"")];
        match self {
            Rejection::Invalid(why) if why != MISSING => {
                parts.push("error=\"invalid_token\"".into());
                parts.push(format!("error_description=\"{}\"", quoted(why)));
            }
            Rejection::InsufficientScope(_) => {
                parts.push("error=\"insufficient_scope\"".into());
            }
            _ => {}
        }
        if !scopes.is_empty() {
            parts.push(format!("scope=\"{}\"", scopes.join(" ")));
        }
        format!("Bearer {}", parts.join(", "))
    }
}

/// The refusal of a request without a token.
pub const MISSING: &str = "missing bearer token";

/// Safe inside a quoted header parameter.
fn quoted(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
        .collect()
}

/// Checks bearer tokens and says who they are for.
pub struct TokenValidator {
    options: OAuthOptions,
    keys: HashMap<String, IssuerKeys>,
    /// Checked tokens by SHA-256: the caller, when it expires, and the issuer and key id whose
    /// presence in the key set keeps it valid.
    seen: Mutex<HashMap<[u8; 32], Seen>>,
}

struct Seen {
    caller: Caller,
    expires: u64,
    not_before: u64,
    issuer: String,
    kid: Option<String>,
}

impl TokenValidator {
    /// A validator for `options` (checked with [`OAuthOptions::validate`]); keys are fetched
    /// with `http` on first use.
    pub fn new(options: OAuthOptions, http: reqwest::Client) -> Result<Self, String> {
        options.validate()?;
        let keys = options
            .issuers
            .iter()
            .map(|i| {
                let k =
                    IssuerKeys::new(i, http.clone(), options.keys_ttl, options.refetch_interval);
                (k.issuer().to_string(), k)
            })
            .collect();
        Ok(TokenValidator {
            options,
            keys,
            seen: Mutex::new(HashMap::new()),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &OAuthOptions {
        &self.options
    }

    /// The caller `token` speaks for, or why it is refused.
    pub async fn validate(&self, token: &str) -> Result<Caller, Rejection> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(caller) = self.remembered(&digest, now()) {
            return self.scoped(caller);
        }
        let header = Header::read(token)?;
        let alg = self.algorithm(&header.alg)?;
        let keys = match self.keys.values().next() {
            // One issuer: its keys check every token (and `iss` is verified with the rest).
            Some(only) if self.keys.len() == 1 => only,
            _ => {
                let issuer = unverified_issuer(token)?;
                self.keys.get(issuer.trim_end_matches('/')).ok_or_else(|| {
                    Rejection::Invalid(format!(
                        "the token's issuer `{issuer}` is not trusted here (trusted: {})",
                        self.options.issuers.join(", ")
                    ))
                })?
            }
        };
        let candidates = keys
            .keys(header.kid.as_deref())
            .await
            .map_err(|e| match e {
                KeyError::Unknown(m) => Rejection::Invalid(m),
                KeyError::Unavailable(m) => Rejection::Unavailable(m),
            })?;
        let mut validation = Validation::new(alg);
        validation.leeway = self.options.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[keys.issuer(), &format!("{}/", keys.issuer())]);
        validation.set_audience(&[&self.options.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let mut last = Rejection::Invalid(format!(
            "no key of the issuer {} is for {alg:?}",
            keys.issuer()
        ));
        for key in candidates.iter().filter(|k| k.fits(alg)) {
            match jsonwebtoken::decode::<Json>(token, &key.decoding, &validation) {
                Ok(data) => {
                    let claims = data.claims;
                    let caller = self.caller(&claims, token);
                    self.remember(digest, &claims, caller.clone(), keys.issuer(), header.kid);
                    return self.scoped(caller);
                }
                Err(e) => last = Rejection::Invalid(self.explain(e.kind(), token)),
            }
        }
        Err(last)
    }

    /// A remembered caller whose token has not expired at `now` (seconds since the epoch) and
    /// whose key is still in its issuer's set.
    fn remembered(&self, digest: &[u8; 32], now: u64) -> Option<Caller> {
        let leeway = self.options.leeway.as_secs();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let entry = seen.get(digest)?;
        let live = now < entry.expires.saturating_add(leeway)
            && now.saturating_add(leeway) >= entry.not_before
            && self
                .keys
                .get(&entry.issuer)
                .is_some_and(|k| k.still_has(entry.kid.as_deref()));
        if live {
            Some(entry.caller.clone())
        } else {
            seen.remove(digest);
            None
        }
    }

    fn remember(
        &self,
        digest: [u8; 32],
        claims: &Json,
        caller: Caller,
        issuer: &str,
        kid: Option<String>,
    ) {
        let time = |name: &str| claims.get(name).and_then(Json::as_u64);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        seen.insert(
            digest,
            Seen {
                caller,
                expires: time("exp").unwrap_or(0),
                not_before: time("nbf").unwrap_or(0),
                issuer: issuer.to_string(),
                kid,
            },
        );
    }

    /// The caller if its token grants every required scope.
    fn scoped(&self, caller: Caller) -> Result<Caller, Rejection> {
        let missing: Vec<String> = self
            .options
            .required_scopes
            .iter()
            .filter(|s| !caller.scopes.contains(s))
            .cloned()
            .collect();
        if missing.is_empty() {
            Ok(caller)
        } else {
            Err(Rejection::InsufficientScope(missing))
        }
    }

    fn algorithm(&self, name: &str) -> Result<Algorithm, Rejection> {
        let allowed = || {
            self.options
                .algorithms
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        name.parse::<Algorithm>()
            .ok()
            .filter(|a| self.options.algorithms.contains(a))
            .ok_or_else(|| {
                Rejection::Invalid(format!(
                    "the token's algorithm `{name}` is not accepted (accepted: {})",
                    allowed()
                ))
            })
    }

    fn caller(&self, claims: &Json, token: &str) -> Caller {
        let text = |name: &str| claims.get(name).and_then(Json::as_str).map(str::to_string);
        let list = |v: Option<&Json>| -> Vec<String> {
            match v {
                Some(Json::String(s)) => s.split_whitespace().map(str::to_string).collect(),
                Some(Json::Array(items)) => items
                    .iter()
                    .filter_map(Json::as_str)
                    .map(str::to_string)
                    .collect(),
                _ => Vec::new(),
            }
        };
        let mut scopes = list(claims.get("scope"));
        scopes.extend(list(claims.get("scp")));
        Caller {
            subject: text("sub").unwrap_or_default(),
            client_id: text("client_id").or_else(|| text("azp")),
            scopes,
            groups: list(claims.get(&self.options.groups_claim)),
            issuer: text("iss"),
            token: Some(CallerToken::new(token)),
        }
    }

    /// A validation failure in words, with the claim's value where it helps (never the token).
    fn explain(&self, kind: &jsonwebtoken::errors::ErrorKind, token: &str) -> String {
        use jsonwebtoken::errors::ErrorKind as K;
        let claims = unverified_claims(token).unwrap_or(Json::Null);
        let claim = |n: &str| {
            claims
                .get(n)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "none".into())
        };
        match kind {
            K::ExpiredSignature => format!(
                "the token expired (exp {}, now {}, leeway {} s)",
                claim("exp"),
                now(),
                self.options.leeway.as_secs()
            ),
            K::ImmatureSignature => format!(
                "the token is not valid yet (nbf {}, now {})",
                claim("nbf"),
                now()
            ),
            K::InvalidAudience => format!(
                "the token's audience is {}, not this resource `{}`",
                claim("aud"),
                self.options.audience
            ),
            K::InvalidIssuer => format!(
                "the token's issuer `{}` is not trusted here (trusted: {})",
                claims.get("iss").and_then(Json::as_str).unwrap_or("?"),
                self.options.issuers.join(", ")
            ),
            K::MissingRequiredClaim(c) => format!("the token has no `{c}` claim"),
            K::InvalidSignature => "the token's signature does not verify".into(),
            K::InvalidAlgorithm => "the token's algorithm does not match its key".into(),
            other => format!("the token is not a valid JWT ({other:?})"),
        }
    }
}

/// The parts of a token's header the checks need, read before anything is verified.
struct Header {
    alg: String,
    kid: Option<String>,
}

impl Header {
    fn read(token: &str) -> Result<Header, Rejection> {
        let not_jwt = || Rejection::Invalid("the bearer token is not a JWT".into());
        let first = token.split('.').next().ok_or_else(not_jwt)?;
        if token.split('.').count() != 3 {
            return Err(not_jwt());
        }
        let json: Json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(first.trim_end_matches('='))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(not_jwt)?;
        Ok(Header {
            alg: json
                .get("alg")
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_string(),
            kid: json.get("kid").and_then(Json::as_str).map(str::to_string),
        })
    }
}

fn unverified_claims(token: &str) -> Option<Json> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The `iss` a token claims: it picks whose keys check it, and is verified with the rest.
fn unverified_issuer(token: &str) -> Result<String, Rejection> {
    unverified_claims(token)
        .and_then(|c| c.get("iss").and_then(Json::as_str).map(str::to_string))
        .ok_or_else(|| Rejection::Invalid("the token has no `iss` claim".into()))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> OAuthOptions {
        OAuthOptions::new(
            vec!["https://auth.example.com".into()],
            "https://ptc.example.com/mcp".into(),
        )
    }

    #[test]
    fn the_options_rules() {
        assert!(options().validate().is_ok());
        let mut o = options();
        o.issuers.clear();
        assert!(o.validate().unwrap_err().contains("at least one issuer"));
        let mut o = options();
        o.issuers = vec!["http://auth.example.com".into()];
        assert!(o.validate().unwrap_err().contains("must use https://"));
        o.issuers = vec!["http://127.0.0.1:9000".into(), "http://localhost:1".into()];
        assert!(o.validate().is_ok(), "loopback may use http");
        let mut o = options();
        o.audience = "/mcp".into();
        assert!(o.validate().unwrap_err().contains("audience"));
        let mut o = options();
        o.algorithms = vec![Algorithm::RS256, Algorithm::HS256];
        assert!(o.validate().unwrap_err().contains("shared-secret"));
        o.algorithms.clear();
        assert!(o.validate().unwrap_err().contains("at least one signature"));
    }

    #[test]
    fn the_metadata_names_the_resource_and_its_servers() {
        let mut o = options();
        assert_eq!(
            o.metadata_url(),
            "https://ptc.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            o.metadata_path(),
            "/.well-known/oauth-protected-resource/mcp"
        );
        assert!(o.metadata().get("scopes_supported").is_none());
        o.required_scopes = vec!["ptc:eval".into()];
        let doc = o.metadata();
        assert_eq!(doc["resource"], "https://ptc.example.com/mcp");
        assert_eq!(doc["authorization_servers"][0], "https://auth.example.com");
        assert_eq!(doc["scopes_supported"][0], "ptc:eval");
    }

    #[test]
    fn the_challenge_says_what_the_client_must_do() {
        let url = "https://ptc.example.com/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            Rejection::Invalid(MISSING.into()).challenge(url, &[]),
            format!("Bearer resource_metadata=\"{url}\"")
        );
        assert_eq!(
            Rejection::Invalid("the \"token\" expired\n".into()).challenge(url, &[]),
            format!(
                "Bearer resource_metadata=\"{url}\", error=\"invalid_token\", \
                 error_description=\"the 'token' expired\""
            )
        );
        assert_eq!(
            Rejection::InsufficientScope(vec!["a".into()])
                .challenge(url, &["a".into(), "b".into()]),
            format!(
                "Bearer resource_metadata=\"{url}\", error=\"insufficient_scope\", scope=\"a b\""
            )
        );
    }

    #[test]
    fn a_header_is_read_before_anything_is_verified() {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let token = format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(r#"{"iss":"x"}"#));
        let h = Header::read(&token).unwrap();
        assert_eq!((h.alg.as_str(), h.kid), ("none", None));
        assert!(Header::read("abc").is_err());
        assert!(Header::read("a.b").is_err());
        assert!(Header::read("!!.b.c").is_err());
        assert_eq!(unverified_issuer(&token).unwrap(), "x");
        assert!(unverified_issuer(&format!("{}.{}.", b64("{}"), b64("{}"))).is_err());
    }

    const AUD: &str = "https://ptc.example.com/mcp";

    /// A loopback authorization server: metadata and a key set of Ed25519 keys made for the
    /// test, which the test can change; and tokens signed with those keys.
    struct Issuer {
        url: String,
        keys: Vec<(String, jsonwebtoken::EncodingKey, Json)>,
        set: std::sync::Arc<Mutex<Json>>,
    }

    async fn issuer(kids: &[&str]) -> Issuer {
        use axum::routing::get;
        let rng = ring::rand::SystemRandom::new();
        let keys: Vec<_> = kids
            .iter()
            .map(|kid| {
                let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
                let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
                use ring::signature::KeyPair;
                let x = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(pair.public_key().as_ref());
                let jwk = serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": x,
                    "kid": kid, "alg": "EdDSA", "use": "sig"});
                let signing = jsonwebtoken::EncodingKey::from_ed_der(pkcs8.as_ref());
                (kid.to_string(), signing, jwk)
            })
            .collect();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let set = std::sync::Arc::new(Mutex::new(serde_json::json!({
            "keys": keys.iter().map(|k| k.2.clone()).collect::<Vec<_>>()
        })));
        let meta = serde_json::json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
        let served = set.clone();
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                get(move || async move { axum::Json(meta) }),
            )
            .route(
                "/jwks",
                get(move || {
                    let set = served.lock().unwrap().clone();
                    async move { axum::Json(set) }
                }),
            );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Issuer { url, keys, set }
    }

    impl Issuer {
        /// Claims valid for [`AUD`] for ten minutes, with `extra` added (a null removes one).
        fn claims(&self, extra: Json) -> Json {
            let mut c = serde_json::json!({"iss": self.url, "aud": AUD, "sub": "alice",
                "exp": now() + 600});
            for (k, v) in extra.as_object().unwrap() {
                match v {
                    Json::Null => c.as_object_mut().unwrap().remove(k),
                    v => c.as_object_mut().unwrap().insert(k.clone(), v.clone()),
                };
            }
            c
        }

        /// `claims` signed with the key `kid`.
        fn sign(&self, kid: &str, claims: &Json) -> String {
            let key = &self.keys.iter().find(|k| k.0 == kid).unwrap().1;
            let mut header = jsonwebtoken::Header::new(Algorithm::EdDSA);
            header.kid = Some(kid.into());
            jsonwebtoken::encode(&header, claims, key).unwrap()
        }

        fn token(&self, extra: Json) -> String {
            self.sign(&self.keys[0].0, &self.claims(extra))
        }

        /// Only the key `kid` left in the set.
        fn keep_only(&self, kid: &str) {
            let jwk = self.keys.iter().find(|k| k.0 == kid).unwrap().2.clone();
            *self.set.lock().unwrap() = serde_json::json!({"keys": [jwk]});
        }

        fn validator(&self, change: impl FnOnce(&mut OAuthOptions)) -> TokenValidator {
            let mut o = OAuthOptions::new(vec![self.url.clone()], AUD.into());
            change(&mut o);
            TokenValidator::new(o, crate::wire::http_client::builder().build().unwrap()).unwrap()
        }
    }

    fn refusal(r: Result<Caller, Rejection>) -> String {
        match r {
            Err(Rejection::Invalid(why)) => why,
            other => panic!("expected an invalid token, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_valid_token_speaks_for_its_caller_and_is_remembered() {
        let iss = issuer(&["k1"]).await;
        let v = iss.validator(|o| o.groups_claim = "roles".into());
        let token = iss.token(serde_json::json!({"scope": "read  write", "scp": ["admin"],
            "azp": "cli-azp", "roles": ["ops", 7, "dev"], "groups": ["ignored"]}));
        let caller = v.validate(&token).await.unwrap();
        assert_eq!(caller.subject, "alice");
        assert_eq!(caller.client_id.as_deref(), Some("cli-azp"));
        assert_eq!(caller.scopes, ["read", "write", "admin"]);
        assert_eq!(
            caller.groups,
            ["ops", "dev"],
            "from the configured claim, strings only"
        );
        assert_eq!(caller.issuer.as_deref(), Some(iss.url.as_str()));
        assert_eq!(v.seen.lock().unwrap().len(), 1, "remembered by its digest");
        assert_eq!(v.validate(&token).await.unwrap(), caller);
        // `client_id` wins over `azp`; `groups` is the default claim.
        let v = iss.validator(|_| {});
        let token =
            iss.token(serde_json::json!({"client_id": "cli", "azp": "other", "groups": "a b"}));
        let caller = v.validate(&token).await.unwrap();
        assert_eq!(caller.client_id.as_deref(), Some("cli"));
        assert_eq!(caller.groups, ["a", "b"]);
        assert!(caller.scopes.is_empty());
    }

    #[tokio::test]
    async fn a_token_without_a_required_scope_is_refused_first_and_when_remembered() {
        let iss = issuer(&["k1"]).await;
        let v = iss.validator(|o| o.required_scopes = vec!["read".into(), "ops".into()]);
        let token = iss.token(serde_json::json!({"scope": "read"}));
        for _ in 0..2 {
            assert_eq!(
                v.validate(&token).await,
                Err(Rejection::InsufficientScope(vec!["ops".into()]))
            );
        }
        let both = iss.token(serde_json::json!({"scope": "ops read"}));
        assert!(v.validate(&both).await.is_ok());
    }

    #[tokio::test]
    async fn each_check_refuses_with_what_is_wrong() {
        let iss = issuer(&["k1", "k2"]).await;
        let v = iss.validator(|_| {});
        let t = now();
        // `exp` and `nbf` within the 30 s leeway pass; past it they do not.
        assert!(
            v.validate(&iss.token(serde_json::json!({"exp": t - 20})))
                .await
                .is_ok()
        );
        let expired = refusal(
            v.validate(&iss.token(serde_json::json!({"exp": t - 40})))
                .await,
        );
        assert!(expired.starts_with("the token expired (exp "), "{expired}");
        assert!(expired.ends_with("leeway 30 s)"), "{expired}");
        assert!(
            v.validate(&iss.token(serde_json::json!({"nbf": t + 20})))
                .await
                .is_ok()
        );
        let early = refusal(
            v.validate(&iss.token(serde_json::json!({"nbf": t + 60})))
                .await,
        );
        assert!(
            early.starts_with("the token is not valid yet (nbf "),
            "{early}"
        );
        let aud = refusal(
            v.validate(&iss.token(serde_json::json!({"aud": "https://other/mcp"})))
                .await,
        );
        assert_eq!(
            aud,
            format!("the token's audience is \"https://other/mcp\", not this resource `{AUD}`")
        );
        let wrong_iss = refusal(
            v.validate(&iss.token(serde_json::json!({"iss": "https://evil.example"})))
                .await,
        );
        assert_eq!(
            wrong_iss,
            format!(
                "the token's issuer `https://evil.example` is not trusted here (trusted: {})",
                iss.url
            )
        );
        for claim in ["sub", "exp"] {
            let missing = refusal(
                v.validate(&iss.token(serde_json::json!({claim: null})))
                    .await,
            );
            assert_eq!(missing, format!("the token has no `{claim}` claim"));
        }
        // Signed by k2, claiming k1.
        let k2 = iss.sign("k2", &iss.claims(serde_json::json!({})));
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let body = k2.split_once('.').unwrap().1;
        let forged = format!(
            "{}.{body}",
            b64(r#"{"alg":"EdDSA","typ":"JWT","kid":"k1"}"#)
        );
        assert_eq!(
            refusal(v.validate(&forged).await),
            "the token's signature does not verify"
        );
        // An accepted algorithm no key of the set is for.
        let rs = format!("{}.{body}", b64(r#"{"alg":"RS256","kid":"k1"}"#));
        assert_eq!(
            refusal(v.validate(&rs).await),
            format!("no key of the issuer {} is for RS256", iss.url)
        );
        // With one issuer its keys are asked first, whatever the token claims.
        let evil = iss.token(serde_json::json!({"iss": "https://evil.example"}));
        let evil_body = evil.split_once('.').unwrap().1;
        let unknown_kid = format!("{}.{evil_body}", b64(r#"{"alg":"EdDSA","kid":"zz"}"#));
        assert_eq!(
            refusal(v.validate(&unknown_kid).await),
            format!(
                "the issuer {} has no key with id `zz` (its current key set)",
                iss.url
            )
        );
        let none = format!("{}.{body}", b64(r#"{"alg":"none"}"#));
        assert_eq!(
            refusal(v.validate(&none).await),
            "the token's algorithm `none` is not accepted (accepted: RS256, PS256, ES256, EdDSA)"
        );
        let hs = format!("{}.{body}", b64(r#"{"alg":"HS256"}"#));
        assert!(refusal(v.validate(&hs).await).contains("`HS256` is not accepted"));
        assert_eq!(
            refusal(v.validate("opaque").await),
            "the bearer token is not a JWT"
        );
        assert!(
            v.seen.lock().unwrap().len() <= 2,
            "only the two good tokens are remembered"
        );
    }

    #[tokio::test]
    async fn with_several_issuers_the_claimed_one_checks_the_token() {
        let (a, b) = (issuer(&["a1"]).await, issuer(&["b1"]).await);
        let o = OAuthOptions::new(vec![a.url.clone(), format!("{}/", b.url)], AUD.into());
        let v =
            TokenValidator::new(o, crate::wire::http_client::builder().build().unwrap()).unwrap();
        assert!(v.validate(&a.token(serde_json::json!({}))).await.is_ok());
        let from_b = b.token(serde_json::json!({"iss": format!("{}/", b.url)}));
        assert!(
            v.validate(&from_b).await.is_ok(),
            "a trailing slash is the same issuer"
        );
        let stranger = a.token(serde_json::json!({"iss": "https://evil.example"}));
        assert_eq!(
            refusal(v.validate(&stranger).await),
            format!(
                "the token's issuer `https://evil.example` is not trusted here (trusted: {}, {}/)",
                a.url, b.url
            )
        );
        let anonymous = a.token(serde_json::json!({"iss": null}));
        assert_eq!(
            refusal(v.validate(&anonymous).await),
            "the token has no `iss` claim"
        );
        // Signed by a's key, claiming b: b's keys do not know it.
        let crossed = a.token(serde_json::json!({"iss": b.url}));
        assert!(refusal(v.validate(&crossed).await).contains("has no key with id `a1`"));
    }

    #[tokio::test]
    async fn a_remembered_token_holds_until_its_expiry_and_while_its_key_is_in_the_set() {
        let iss = issuer(&["k1", "k2"]).await;
        let v = iss.validator(|_| {});
        iss.keep_only("k1");
        let token = iss.token(serde_json::json!({"exp": 1_000_000, "nbf": 500_000}));
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Keys fetched, then the token remembered as checked (it is long expired by the clock).
        assert!(v.validate(&iss.token(serde_json::json!({}))).await.is_ok());
        let claims = unverified_claims(&token).unwrap();
        let remember = || {
            let caller = v.caller(&claims, &token);
            v.remember(digest, &claims, caller, &iss.url, Some("k1".into()));
        };
        remember();
        assert!(
            v.remembered(&digest, 1_000_029).is_some(),
            "within the leeway"
        );
        assert!(
            v.remembered(&digest, 1_000_030).is_none(),
            "at exp + leeway"
        );
        assert!(
            v.remembered(&digest, 1_000_029).is_none(),
            "forgotten once expired"
        );
        remember();
        assert!(v.remembered(&digest, 499_970).is_some(), "nbf - leeway");
        assert!(v.remembered(&digest, 499_969).is_none());
        remember();
        assert!(v.remembered(&digest, 700_000).is_some());
        // The issuer swaps k1 for k2; a k2 token makes the host fetch the set again.
        iss.keep_only("k2");
        let k2 = iss.sign("k2", &iss.claims(serde_json::json!({})));
        assert!(v.validate(&k2).await.is_ok());
        assert!(
            v.remembered(&digest, 700_000).is_none(),
            "its key left the set"
        );
        // A token of an issuer the validator no longer knows is not remembered either.
        let caller = v.caller(&claims, &token);
        v.remember(digest, &claims, caller, "https://gone.example", None);
        assert!(v.remembered(&digest, 700_000).is_none());
    }

    #[tokio::test]
    async fn the_memory_of_checked_tokens_starts_over_at_its_cap() {
        let iss = issuer(&["k1"]).await;
        let v = iss.validator(|_| {});
        let claims = serde_json::json!({"exp": now() + 600});
        let caller = v.caller(&claims, "t");
        for i in 0..MAX_REMEMBERED - 1 {
            let digest: [u8; 32] = Sha256::digest(i.to_le_bytes()).into();
            v.remember(digest, &claims, caller.clone(), &iss.url, None);
        }
        let next = |tag: &str| {
            let digest: [u8; 32] = Sha256::digest(tag.as_bytes()).into();
            v.remember(digest, &claims, caller.clone(), &iss.url, None);
            v.seen.lock().unwrap().len()
        };
        assert_eq!(next("last that fits"), MAX_REMEMBERED);
        assert_eq!(next("one more"), 1, "cleared, then this one");
    }

    #[test]
    fn a_rejection_tells_the_client_why() {
        assert_eq!(Rejection::Invalid("bad".into()).message(), "bad");
        assert_eq!(
            Rejection::InsufficientScope(vec!["a".into(), "b".into()]).message(),
            "the token lacks the scope a b"
        );
        assert_eq!(
            Rejection::Unavailable("down".into()).message(),
            "the token cannot be checked now: down"
        );
    }
}
