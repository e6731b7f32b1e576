//! The test OAuth 2.1 authorization server (`fixtures/auth-issuer/issuer.py`): a launcher that
//! starts it on a free port and helpers for its test-control endpoints (mint a token, rotate the
//! keys, choose who consents at `/authorize`, revoke a user's refresh tokens, read what it
//! counted). See `fixtures/auth-issuer/README.md` for what it serves.

use crate::python_server::{self, PythonServer};

/// The client id and secret the issuer accepts at `/token` when started without `--client`.
const DEFAULT_CLIENT: (&str, &str) = ("ptc-host", "ptc-host-secret-for-tests-only");

/// A running issuer, killed when dropped (see [`PythonServer`]).
pub struct Issuer {
    /// Its issuer identifier (`iss`) and base URL: `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    server: PythonServer,
    http: reqwest::Client,
}

/// The default client's id and secret (`ptc-host`), for client authentication at `/token`.
pub fn client() -> (&'static str, &'static str) {
    DEFAULT_CLIENT
}

/// An HTTP client for talking to the issuer (no proxy: it is on 127.0.0.1), with rustls' ring
/// provider installed the way `ptc_core::wire::http_client` does, since reqwest here has none of its
/// own.
pub fn http_client() -> reqwest::Client {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        // Installs ring, the one provider rustls' features name, unless one is installed.
        let _ = rustls::ClientConfig::builder();
    });
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client")
}

/// Starts `issuer.py --port 0 args...` (for example `["--exchange-ttl", "5"]` or
/// `["--client", "id:secret"]`) and waits until it says where it listens. `None` after
/// [`crate::skip`] says how to install the fixture's venv when it is missing. Panics, with the
/// issuer's stderr, when it exits or stays silent for 30 seconds.
pub fn start(args: &[&str]) -> Option<Issuer> {
    let server = python_server::start("auth-issuer", "issuer.py", args, "the auth issuer")?;
    Some(Issuer {
        url: server.url.clone(),
        server,
        http: http_client(),
    })
}

impl Issuer {
    /// Its token endpoint (`{url}/token`).
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.url)
    }

    /// Its JWKS (`{url}/jwks`).
    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.url)
    }

    /// The HTTP client the helpers use.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// What the issuer wrote to stderr so far (nothing, unless it hit a bug).
    pub fn stderr(&self) -> String {
        self.server.stderr()
    }

    /// POSTs `body` as JSON to `path` and returns the JSON answer; panics unless it is 200.
    async fn control(&self, path: &str, body: &serde_json::Value) -> serde_json::Value {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .json(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path} to the auth issuer: {e}"));
        ok_json(response, path).await
    }

    /// A token from `POST /test/mint` with `body` (`{"claims": {...}, "alg": "RS256" | "ES256" |
    /// "none" | "HS256", "key": "current" | "stranger", "kid": ... | null, "ttl": seconds}`;
    /// `iss`, `iat`, `exp` and `jti` are filled in unless given, and a claim given as null is
    /// left out).
    pub async fn mint(&self, body: serde_json::Value) -> String {
        let answer = self.control("/test/mint", &body).await;
        answer["token"]
            .as_str()
            .unwrap_or_else(|| panic!("/test/mint answered {answer}"))
            .to_string()
    }

    /// A caller's own token for `subject`, as a host's identity check accepts it (meant for the
    /// host, scope `read`): what a caller exchanges for a token meant for an upstream.
    pub async fn caller_token(&self, subject: &str) -> String {
        self.mint(serde_json::json!({"claims": {"sub": subject,
            "aud": "http://127.0.0.1/ptc-host", "scope": "read"}}))
            .await
    }

    /// Rotates the signing keys (`POST /test/rotate`): new RS256 and ES256 keys become current;
    /// the old ones stay in the JWKS unless `drop_old`. Returns `{"kids": {"RS256": .., "ES256":
    /// ..}}`, the new kids.
    pub async fn rotate(&self, drop_old: bool) -> serde_json::Value {
        self.control("/test/rotate", &serde_json::json!({ "drop_old": drop_old }))
            .await
    }

    /// Its authorization endpoint (`{url}/authorize`).
    pub fn authorization_endpoint(&self) -> String {
        format!("{}/authorize", self.url)
    }

    /// Its dynamic client registration endpoint (`{url}/register`).
    pub fn registration_endpoint(&self) -> String {
        format!("{}/register", self.url)
    }

    /// Chooses who consents at `/authorize` from now on (`POST /test/user`): `subject` becomes
    /// the `sub` of the tokens the code flow issues (`alice` until changed), and with `deny` the
    /// user refuses, so `/authorize` redirects with `error=access_denied`.
    pub async fn set_user(&self, subject: &str, deny: bool) {
        self.control(
            "/test/user",
            &serde_json::json!({ "subject": subject, "deny": deny }),
        )
        .await;
    }

    /// Revokes every refresh token issued to `subject` (`POST /test/revoke`): their next
    /// refresh is 400 `invalid_grant`. Access tokens already issued stay valid (they are JWTs).
    /// Returns how many refresh token families were revoked.
    pub async fn revoke(&self, subject: &str) -> u64 {
        let answer = self
            .control("/test/revoke", &serde_json::json!({ "subject": subject }))
            .await;
        answer["revoked_families"]
            .as_u64()
            .unwrap_or_else(|| panic!("/test/revoke answered {answer}"))
    }

    /// The consents `/authorize` gave since the last reset (the `authorizations` of
    /// [`Issuer::stats`]): `[{"client_id", "subject", "scope", "resource", "redirect_uri"}]`.
    pub async fn authorizations(&self) -> Vec<serde_json::Value> {
        let stats = self.stats().await;
        stats["authorizations"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("/test/stats answered {stats}"))
    }

    /// How many refresh grants succeeded since the last reset (`refreshes` of [`Issuer::stats`]).
    pub async fn refreshes(&self) -> u64 {
        self.counter("refreshes").await
    }

    /// How many clients registered at `/register` since the last reset (`registrations` of
    /// [`Issuer::stats`]).
    pub async fn registrations(&self) -> u64 {
        self.counter("registrations").await
    }

    /// One number from [`Issuer::stats`].
    async fn counter(&self, name: &str) -> u64 {
        let stats = self.stats().await;
        stats[name]
            .as_u64()
            .unwrap_or_else(|| panic!("/test/stats has no number {name}: {stats}"))
    }

    /// `GET /test/stats`: `{"jwks_requests": n, "token_requests": n, "exchanges": [{"subject",
    /// "audience", "resource", "aud", "scope", "client_id", "jti", "expires_in", ..}],
    /// "authorizations": [{"client_id", "subject", "scope", "resource", "redirect_uri"}],
    /// "refreshes": n, "registrations": n}`.
    pub async fn stats(&self) -> serde_json::Value {
        let response = self
            .http
            .get(format!("{}/test/stats", self.url))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET /test/stats from the auth issuer: {e}"));
        ok_json(response, "/test/stats").await
    }

    /// Zeroes the counters and forgets the recorded exchanges and authorizations (`POST
    /// /test/reset-stats`); registered clients, live codes, refresh tokens and the current user
    /// stay.
    pub async fn reset_stats(&self) {
        self.control("/test/reset-stats", &serde_json::json!({}))
            .await;
    }

    /// An access token for the default client by `client_credentials`, with `form` added (for
    /// example `[("resource", "http://127.0.0.1:8080/mcp"), ("scope", "lisp")]`).
    pub async fn client_credentials(&self, form: &[(&str, &str)]) -> String {
        let (id, secret) = client();
        let mut params = vec![("grant_type", "client_credentials")];
        params.extend_from_slice(form);
        let response = self
            .http
            .post(self.token_endpoint())
            .basic_auth(id, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_encode(&params))
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST /token to the auth issuer: {e}"));
        let answer = ok_json(response, "/token").await;
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("/token answered {answer}"))
            .to_string()
    }
}

/// `params` as an `application/x-www-form-urlencoded` body (reqwest's `form` is a feature the
/// workspace leaves off).
pub fn form_encode(params: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish()
}

/// The JSON of a 200 answer; panics with the status and body otherwise.
async fn ok_json(response: reqwest::Response, path: &str) -> serde_json::Value {
    let status = response.status();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("reading the auth issuer's answer to {path}: {e}"));
    assert!(status.is_success(), "{path} answered {status}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} answered non-JSON ({e}): {text}"))
}
