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

use crate::identity::jwks::{IssuerKeys, KeyError};
use crate::identity::{Caller, CallerToken};

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
        crate::identity::jwks::metadata_url(&self.audience, "oauth-protected-resource")
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
        if let Some(caller) = self.remembered(&digest) {
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

    /// A remembered caller whose token has not expired and whose key is still in its
    /// issuer's set.
    fn remembered(&self, digest: &[u8; 32]) -> Option<Caller> {
        let now = now();
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
}
