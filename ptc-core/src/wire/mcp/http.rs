//! The Streamable HTTP transport: rmcp's reqwest client, with the upstream's auth headers read
//! afresh for every request (so a rotated token file takes effect on the next call) and every
//! secret registered with the redactor before it is sent.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::BoxStream;
use ptc_plan::{AuthEmitter, CredentialBinding, McpHttpPlan, Secrets};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ErrorData, ServerJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpClientTransportConfig,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use crate::credentials::binding::{self, CredentialError};
use crate::credentials::identity::Caller;
use crate::credentials::per_caller::{self, CallEnv, Exchanges};
use crate::credentials::redact::Redactor;
use crate::credentials::upstream_oauth::UpstreamOAuth;

/// Room for SSE framing (`event:`/`id:` lines, `data: ` prefixes) on top of the message cap.
const SSE_FRAMING_ALLOWANCE: usize = 512;

/// Where auth headers come from, read per request.
pub(crate) struct AuthSource {
    emitters: Vec<AuthEmitter>,
    credentials: Vec<CredentialBinding>,
    secrets: Secrets,
    redactor: Redactor,
    /// The OAuth client whose access token goes in `Authorization`, when the upstream has one.
    oauth: Option<Arc<UpstreamOAuth>>,
    /// Tokens exchanged for callers, and the caller whose credentials this session reads.
    exchanges: Arc<Exchanges>,
    caller: std::sync::Mutex<Option<Arc<Caller>>>,
}

impl AuthSource {
    /// After a 401: the next headers read every credential afresh (a caller's exchanged token
    /// is exchanged again).
    fn forget(&self) {
        binding::refresh(&self.emitters, &self.credentials);
        let caller = self.caller();
        for e in &self.emitters {
            self.exchanges.forget(e.binding(), caller.as_deref());
        }
    }

    fn caller(&self) -> Option<Arc<Caller>> {
        self.caller
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The auth headers now, every secret in them registered with the redactor first; those
    /// that depend on the caller read for this session's caller.
    pub(crate) async fn headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, CredentialError> {
        let caller = self.caller();
        let env = CallEnv {
            credentials: &self.credentials,
            secrets: &self.secrets,
            redactor: &self.redactor,
            caller: caller.as_deref(),
            exchanges: &self.exchanges,
            consent: None,
        };
        let per_caller = per_caller::for_call(&self.emitters, &env).await?;
        binding::auth_headers_with(
            &self.emitters,
            &self.credentials,
            &self.secrets,
            &self.redactor,
            &per_caller,
        )?
        .into_iter()
        .map(|(name, value)| {
            let value = value.expose();
            // `Basic <base64>` carries the secret encoded: mask that form too.
            if let Some((_, token)) = value.split_once(' ') {
                self.redactor.register(token);
            }
            self.redactor.register(value);
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| CredentialError(format!("auth header name `{name}` is not valid")))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                CredentialError(format!(
                    "the credential for header `{name}` is not a valid header value"
                ))
            })?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
    }
}

/// rmcp's reqwest client plus per-request auth headers.
#[derive(Clone)]
pub(crate) struct AuthedClient {
    client: reqwest::Client,
    auth: Arc<AuthSource>,
}

impl AuthedClient {
    async fn with_auth(
        &self,
        mut headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<HashMap<HeaderName, HeaderValue>, StreamableHttpError<reqwest::Error>> {
        let auth = self
            .auth
            .headers()
            .await
            .map_err(|e| StreamableHttpError::Io(std::io::Error::other(e)))?;
        headers.extend(auth);
        if let Some(oauth) = &self.auth.oauth {
            // No token yet (or one that could not be refreshed): the request goes out without
            // one, and the server's challenge says how to get one.
            let token = oauth.token().await.unwrap_or_else(|e| {
                tracing::warn!(message = %e.message, "the OAuth token could not be read");
                None
            });
            if let Some(token) = token {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        StreamableHttpError::Io(std::io::Error::other(
                            "the OAuth access token is not a valid header value",
                        ))
                    })?;
                value.set_sensitive(true);
                headers.insert(reqwest::header::AUTHORIZATION, value);
            }
        }
        Ok(headers)
    }
}

impl StreamableHttpClient for AuthedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            None,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            None,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.with_auth(custom_headers).await?;
        let renewable = session_id.is_some() && matches!(message, ClientJsonRpcMessage::Request(_));
        let response = self
            .client
            .post_message_with_response_limits(uri, message, session_id, None, headers, limits)
            .await
            .map_err(typed_refusal)
            .inspect_err(|e| {
                // The call is tried once more after a 401: an exec credential runs its command
                // again for it.
                if super::result::refused_credentials(e) {
                    self.auth.forget();
                }
            })?;
        // The TypeScript SDK's servers (server-everything among them) answer a session they no
        // longer know with `400` and an error without an id instead of the `404` the spec asks
        // for. Nothing could match that error to the call, which would hang until its deadline;
        // treated as the expired session it is, rmcp opens a new session and retries.
        if renewable
            && let StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(e), _) = &response
            && e.id.is_none()
            && names_unknown_session(&e.error)
        {
            return Err(StreamableHttpError::SessionExpired);
        }
        Ok(response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let headers = self.with_auth(custom_headers).await?;
        self.client
            .delete_session(uri, session_id, None, headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let headers = self.with_auth(custom_headers).await?;
        self.client
            .get_stream(uri, session_id, last_event_id, None, headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let headers = self.with_auth(custom_headers).await?;
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                None,
                headers,
                max_sse_event_size,
            )
            .await
    }
}

/// `error`, with an unchallenged 401 or 403 as the typed `HttpStatus` error rmcp lets a client
/// backend return. rmcp's reqwest client reports a 401/403 that carries no `WWW-Authenticate`
/// challenge only as the text of `StreamableHttpError::UnexpectedServerResponse`, which it
/// writes as `HTTP {status}: {body prefix}`; this is the one place that reads the status from
/// that text, so every decision after it is on the number. Other statuses keep their text: it
/// carries the body, the diagnosis an operator needs.
fn typed_refusal(
    error: StreamableHttpError<reqwest::Error>,
) -> StreamableHttpError<reqwest::Error> {
    let StreamableHttpError::UnexpectedServerResponse(text) = &error else {
        return error;
    };
    let status = text
        .strip_prefix("HTTP ")
        .filter(|rest| rest.get(3..4) == Some(" "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok());
    match status {
        Some(status @ (401 | 403)) => HttpStatusError::new(status, None).into(),
        _ => error,
    }
}

/// Whether an error without an id is a server saying it does not know the session. The
/// TypeScript SDK's servers say so in prose only (`Bad Request: No valid session ID provided`,
/// with the code -32000 they give every refusal of their transport), so this is the one place
/// that reads a server's error message to decide.
fn names_unknown_session(error: &ErrorData) -> bool {
    error.message.to_ascii_lowercase().contains("session")
}

/// What one connection needs; built once per client, a transport per (re)connection.
pub(crate) struct HttpSetup {
    client: AuthedClient,
    url: String,
    static_headers: HashMap<HeaderName, HeaderValue>,
    max: usize,
}

impl HttpSetup {
    /// Checks `plan`'s headers and builds the pooled HTTP client; `oauth` is the upstream's
    /// OAuth client, when it has one.
    pub(crate) fn new(
        plan: &McpHttpPlan,
        credentials: &[CredentialBinding],
        secrets: &Secrets,
        redactor: Redactor,
        oauth: Option<Arc<UpstreamOAuth>>,
        exchanges: Arc<Exchanges>,
    ) -> Result<HttpSetup, String> {
        let http = &plan.http;
        let mut static_headers = HashMap::new();
        for (name, value) in &http.static_headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("static header name `{name}` is not valid"))?;
            let v = HeaderValue::from_str(value)
                .map_err(|_| format!("static header `{name}` has a value that is not valid"))?;
            static_headers.insert(n, v);
        }
        let client = crate::wire::http_client::builder()
            .connect_timeout(Duration::from_millis(http.connect_timeout_ms))
            // No idle connections, as in rmcp's own client: reusing one whose event stream was
            // not read to the end stalls ~40 ms on delayed ACKs. `pool_size` does not apply here.
            .pool_max_idle_per_host(0)
            // A redirect would replay the session id and credentials somewhere unplanned.
            .redirect(reqwest::redirect::Policy::none())
            .https_only(!http.allow_insecure_http)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpSetup {
            client: AuthedClient {
                client,
                auth: Arc::new(AuthSource {
                    emitters: http.auth.clone(),
                    credentials: credentials.to_vec(),
                    secrets: secrets.clone(),
                    redactor,
                    oauth,
                    exchanges,
                    caller: std::sync::Mutex::new(None),
                }),
            },
            url: plan.url.clone(),
            static_headers,
            max: usize::try_from(http.max_response_bytes).unwrap_or(usize::MAX),
        })
    }

    /// Whose credentials the session reads from the next request on.
    pub(crate) fn act_for(&self, caller: Option<Arc<Caller>>) {
        *self
            .client
            .auth
            .caller
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = caller;
    }

    /// The MCP endpoint.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The upstream's OAuth client, when it has one.
    pub(crate) fn oauth(&self) -> Option<&Arc<UpstreamOAuth>> {
        self.client.auth.oauth.as_ref()
    }

    /// A fresh transport (a new session once initialised).
    pub(crate) fn transport(&self) -> StreamableHttpClientTransport<AuthedClient> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str());
        config.custom_headers = self.static_headers.clone();
        config.max_json_response_size = self.max;
        config.max_sse_event_size = self.max.saturating_add(SSE_FRAMING_ALLOWANCE);
        config.reinit_on_expired_session = true;
        StreamableHttpClientTransport::with_client(self.client.clone(), config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        ClientNotification, ClientRequest, InitializedNotification, PingRequest, RequestId,
    };

    /// A server that answers every POST as the TypeScript SDK answers an unknown session: HTTP
    /// 400 with a JSON-RPC error that has no id.
    async fn forgetful_server() -> Arc<str> {
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(|| async {
                (
                    axum::http::StatusCode::BAD_REQUEST,
                    [("content-type", "application/json")],
                    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#,
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/mcp").into()
    }

    fn client() -> AuthedClient {
        AuthedClient {
            client: crate::wire::http_client::builder()
                .build()
                .expect("an HTTP client"),
            auth: Arc::new(AuthSource {
                emitters: vec![],
                credentials: vec![],
                secrets: Secrets::default(),
                redactor: Redactor::new(),
                oauth: None,
                exchanges: Arc::default(),
                caller: std::sync::Mutex::new(None),
            }),
        }
    }

    fn ping() -> ClientJsonRpcMessage {
        ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(PingRequest::default()),
            RequestId::Number(1),
        )
    }

    /// A server that answers every POST with `status`, no challenge, and a body that claims
    /// another status.
    async fn refusing_server(status: u16) -> Arc<str> {
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(move || async move {
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    [("content-type", "text/plain")],
                    "HTTP 403 says the body, HTTP 401 too",
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/mcp").into()
    }

    /// An unchallenged 401 or 403 comes back as its status, whatever the body says; another
    /// refusal keeps rmcp's text, body and all, for the operator to read.
    #[tokio::test]
    async fn an_unchallenged_refusal_is_typed_by_its_status() {
        let client = client();
        for code in [401, 403, 400] {
            let uri = refusing_server(code).await;
            let got = client
                .post_message(uri, ping(), Some("s-1".into()), None, HashMap::new())
                .await;
            match (code, got) {
                (401 | 403, Err(StreamableHttpError::HttpStatus(s))) => {
                    assert_eq!((s.status, s.retry_after), (code, None));
                }
                (400, Err(StreamableHttpError::UnexpectedServerResponse(text))) => assert_eq!(
                    text,
                    "HTTP 400 Bad Request: HTTP 403 says the body, HTTP 401 too"
                ),
                (code, other) => panic!("{code}: {other:?}"),
            }
        }
    }

    #[test]
    fn only_rmcp_s_text_of_a_401_or_403_is_read_for_its_status() {
        let typed = |text: &'static str| match typed_refusal(
            StreamableHttpError::UnexpectedServerResponse(text.into()),
        ) {
            StreamableHttpError::HttpStatus(s) => Some(s.status),
            StreamableHttpError::UnexpectedServerResponse(kept) => {
                assert_eq!(kept, text);
                None
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(typed("HTTP 401 Unauthorized: "), Some(401));
        assert_eq!(typed("HTTP 403 Forbidden: no"), Some(403));
        assert_eq!(typed("HTTP 404 Not Found: HTTP 401"), None);
        assert_eq!(typed("HTTP 4011"), None);
        assert_eq!(
            typed("could not parse JSON response: HTTP 401 Unauthorized"),
            None
        );
        assert_eq!(typed("HTTP 40"), None);
    }

    #[test]
    fn only_an_error_about_the_session_names_an_unknown_session() {
        let error = |m: &str| ErrorData::new(rmcp::model::ErrorCode(-32_000), m.to_string(), None);
        assert!(names_unknown_session(&error(
            "Bad Request: No valid session ID provided"
        )));
        assert!(!names_unknown_session(&error("Bad Request: Parse error")));
    }

    #[tokio::test]
    async fn an_id_less_session_error_expires_only_a_request_in_a_session() {
        let uri = forgetful_server().await;
        let client = client();
        let initialized = || {
            ClientJsonRpcMessage::notification(ClientNotification::InitializedNotification(
                InitializedNotification {
                    method: Default::default(),
                    extensions: Default::default(),
                },
            ))
        };
        let post = |message, session: Option<&str>| {
            client.post_message(
                uri.clone(),
                message,
                session.map(Arc::from),
                None,
                HashMap::new(),
            )
        };
        let expired = |r: &Result<StreamableHttpPostResponse, _>| {
            matches!(r, Err(StreamableHttpError::SessionExpired))
        };
        assert!(expired(&post(ping(), Some("s-1")).await));
        // Without a session there is nothing to renew, and a notification awaits no answer:
        // the error is passed on as it came.
        let passed_on = |r: Result<StreamableHttpPostResponse, StreamableHttpError<_>>| {
            matches!(
                r,
                Ok(StreamableHttpPostResponse::Json(
                    ServerJsonRpcMessage::Error(_),
                    _
                ))
            )
        };
        assert!(passed_on(post(ping(), None).await));
        assert!(passed_on(post(initialized(), Some("s-1")).await));
    }
}
