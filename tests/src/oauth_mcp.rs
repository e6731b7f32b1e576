//! The MCP server behind OAuth 2.1 (`fixtures/mcp/oauth_server.py`): a hosted MCP server for
//! ptc's MCP client to reach with the test issuer's tokens ([`crate::issuer`]). It verifies each
//! bearer JWT against the issuer's JWKS and its own resource URL, answers 401 with a
//! `resource_metadata` challenge without one, 403 `insufficient_scope` (a step-up challenge for
//! `read admin`) when `admin_note` is called without scope `admin`, and records whose token
//! served each tool call. See the script's docstring for the details.

use crate::issuer;
use crate::python_server::{self, PythonServer};

/// A running OAuth-protected MCP server, killed when dropped (see [`PythonServer`]).
pub struct OAuthMcp {
    /// Its Streamable HTTP endpoint, `http://127.0.0.1:PORT/mcp`, which is also its resource
    /// identifier: the `resource` to ask the issuer for, and the `aud` its tokens must carry.
    pub url: String,
    server: PythonServer,
    http: reqwest::Client,
}

impl OAuthMcp {
    /// A config with this server as upstream `hosted`, called as each caller: the caller's own
    /// token exchanged at `issuer` (RFC 8693, `caller_token_exchange`, scope `read`) for one
    /// meant for this server, with the issuer's default client.
    pub fn as_each_caller(&self, issuer: &issuer::Issuer) -> serde_json::Value {
        let (id, secret) = issuer::client();
        serde_json::json!({
            "credentials": {
                "host-client": {"source": "literal", "value": secret},
                "as-caller": {"source": "caller_token_exchange",
                              "token_endpoint": issuer.token_endpoint(),
                              "resource": self.url, "scope": "read",
                              "client_id": id, "client_secret": "host-client"},
            },
            "upstreams": {"hosted": {
                "transport": "mcp_http", "url": self.url,
                "allow_insecure_http": true, "allow_insecure_auth": true,
                "auth": [{"scheme": "bearer", "binding": "as-caller"}],
            }},
        })
    }

    /// Starts `oauth_server.py --port 0 --issuer issuer_url extra_args...` (for example
    /// `["--required-scope", "write"]`; the default required scope is `read`) and waits until it
    /// says where it listens. `None` after [`crate::skip`] says how to install the
    /// `fixtures/mcp` venv when it is missing. Panics, with the server's stderr, when it exits or
    /// stays silent for 30 seconds.
    pub fn start(issuer_url: &str, extra_args: &[&str]) -> Option<OAuthMcp> {
        let mut args = vec!["--issuer", issuer_url];
        args.extend_from_slice(extra_args);
        let server = python_server::start("mcp", "oauth_server.py", &args, "the OAuth MCP server")?;
        Some(OAuthMcp {
            url: server.url.clone(),
            server,
            http: issuer::http_client(),
        })
    }

    /// Its origin, `http://127.0.0.1:PORT` (the [`OAuthMcp::url`] without `/mcp`).
    pub fn base_url(&self) -> &str {
        self.url.strip_suffix("/mcp").unwrap_or(&self.url)
    }

    /// Its protected resource metadata (RFC 9728), the URL its 401 challenge names:
    /// `{base}/.well-known/oauth-protected-resource/mcp`.
    pub fn resource_metadata_url(&self) -> String {
        format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            self.base_url()
        )
    }

    /// From now on refuses every token it has accepted so far (401, as if revoked, though they
    /// have not expired); tokens issued later are taken (`POST /test/refuse-seen`).
    pub async fn refuse_seen(&self) {
        let response = self
            .http
            .post(format!("{}/test/refuse-seen", self.base_url()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST /test/refuse-seen to the OAuth MCP server: {e}"));
        assert!(response.status().is_success(), "{}", response.status());
    }

    /// The tool calls it served, oldest first (`GET /test/calls`): `[{"tool", "sub",
    /// "client_id"}]`, so a test can tell whose token served which call. Refused calls (401,
    /// 403) are not there. Panics unless it answers 200 with JSON.
    pub async fn calls(&self) -> serde_json::Value {
        let response = self
            .http
            .get(format!("{}/test/calls", self.base_url()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET /test/calls from the OAuth MCP server: {e}"));
        let status = response.status();
        let text = response
            .text()
            .await
            .unwrap_or_else(|e| panic!("reading the OAuth MCP server's /test/calls: {e}"));
        assert!(status.is_success(), "/test/calls answered {status}: {text}");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("/test/calls answered non-JSON ({e}): {text}"))
    }

    /// What the server wrote to stderr so far (the SDK's log lines; never a token).
    pub fn stderr(&self) -> String {
        self.server.stderr()
    }
}
