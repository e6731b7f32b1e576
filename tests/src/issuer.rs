//! The test OAuth 2.1 authorization server (`fixtures/auth-issuer/issuer.py`): a launcher that
//! starts it on a free port and helpers for its test-control endpoints (mint a token, rotate the
//! keys, read what it counted). See `fixtures/auth-issuer/README.md` for what it serves.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// How long the issuer has to say where it listens (RSA key generation and a cold Python start
/// on a loaded 2-core machine take a few seconds at most).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The client id and secret the issuer accepts at `/token` when started without `--client`.
const DEFAULT_CLIENT: (&str, &str) = ("ptc-host", "ptc-host-secret-for-tests-only");

/// A running issuer, killed when dropped. Its stdin is a pipe held open until then, and it is
/// started with `--exit-with-stdin`, so it also ends when the test process dies without
/// dropping it.
pub struct Issuer {
    /// Its issuer identifier (`iss`) and base URL: `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    child: Child,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

/// The default client's id and secret (`ptc-host`), for client authentication at `/token`.
pub fn client() -> (&'static str, &'static str) {
    DEFAULT_CLIENT
}

/// An HTTP client for talking to the issuer (no proxy: it is on 127.0.0.1), with rustls' ring
/// provider installed the way `ptc_core::http_client` does, since reqwest here has none of its
/// own.
pub fn http_client() -> reqwest::Client {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        // Err only when a provider is already installed, which is then the one used.
        let _ = rustls::crypto::ring::default_provider().install_default();
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
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/auth-issuer");
    let python = dir.join(".venv/bin/python");
    if !python.exists() {
        crate::skip(
            "the fixtures/auth-issuer Python venv is missing (run `python3 -m venv \
             fixtures/auth-issuer/.venv && fixtures/auth-issuer/.venv/bin/pip install -r \
             fixtures/auth-issuer/requirements.txt`)",
        );
        return None;
    }
    let mut child = Command::new(&python)
        .arg(dir.join("issuer.py"))
        .args(["--port", "0", "--exit-with-stdin"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));

    // stderr is read to the end in the background (so the pipe never fills), kept to show when
    // something goes wrong.
    let stderr = Arc::new(Mutex::new(String::new()));
    let stderr_reader = {
        let mut pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                let mut kept = stderr.lock().unwrap_or_else(|e| e.into_inner());
                kept.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    // stdout: the first line goes to the channel; the rest (there should be none) is drained.
    let (tx, rx) = mpsc::channel();
    {
        let pipe = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            let mut lines = BufReader::new(pipe).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = tx.send(line);
            }
            lines.for_each(drop);
        });
    }

    let first = rx.recv_timeout(START_TIMEOUT);
    let url = first
        .as_deref()
        .ok()
        .and_then(|line| line.strip_prefix("listening "))
        .filter(|url| url.starts_with("http://127.0.0.1:"))
        .map(str::to_string);
    let Some(url) = url else {
        let _ = child.kill();
        let status = child.wait();
        let _ = stderr_reader.join();
        let said = stderr.lock().unwrap_or_else(|e| e.into_inner()).clone();
        panic!(
            "the auth issuer did not say where it listens within {START_TIMEOUT:?} (first stdout \
             line: {first:?}, exit: {status:?}); its stderr:\n{said}"
        );
    };
    Some(Issuer {
        url,
        child,
        stderr,
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
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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

    /// Rotates the signing keys (`POST /test/rotate`): new RS256 and ES256 keys become current;
    /// the old ones stay in the JWKS unless `drop_old`. Returns `{"kids": {"RS256": .., "ES256":
    /// ..}}`, the new kids.
    pub async fn rotate(&self, drop_old: bool) -> serde_json::Value {
        self.control("/test/rotate", &serde_json::json!({ "drop_old": drop_old }))
            .await
    }

    /// `GET /test/stats`: `{"jwks_requests": n, "token_requests": n, "exchanges": [{"subject",
    /// "audience", "resource", "aud", "scope", "client_id", "jti", "expires_in", ..}]}`.
    pub async fn stats(&self) -> serde_json::Value {
        let response = self
            .http
            .get(format!("{}/test/stats", self.url))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET /test/stats from the auth issuer: {e}"));
        ok_json(response, "/test/stats").await
    }

    /// Zeroes the counters and forgets the recorded exchanges (`POST /test/reset-stats`).
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

impl Drop for Issuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
