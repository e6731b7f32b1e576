//! Streamable HTTP (`/mcp`) with axum: bearer auth (required off loopback): a static token
//! (compared in constant time) or OAuth bearer JWTs with the protected resource metadata that
//! points clients at the authorization server ([`crate::credentials::identity::oauth`]); the caller it
//! establishes goes with the request to the evaluation; Host and Origin checks against
//! allow-lists (DNS-rebinding protection), a request body limit, a request timeout,
//! unauthenticated `/health`, `/ready` and `/metrics`, `POST /admin/refresh` behind its own token
//! when one is set, and a graceful shutdown that finishes in-flight evaluations. Both protocol
//! eras are served by rmcp: the legacy `initialize` handshake (with `Mcp-Session-Id` sessions
//! unless `stateless`) and the 2026-07-28 stateless requests.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::credentials::identity::Caller;
use crate::credentials::identity::oauth::{MISSING, OAuthOptions, Rejection, TokenValidator};
use crate::server::eval::Evaluator;
use crate::server::handler::PtcServer;
use crate::server::sessions::{ReplicaSessions, replica_id_problem};

/// Shortest bearer token accepted: shorter ones are guessable.
pub const MIN_TOKEN_CHARS: usize = 32;

/// The HTTP transport's settings.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Where to listen (`127.0.0.1:7332` by default).
    pub addr: SocketAddr,
    /// The bearer token clients must send; required unless `addr` is loopback.
    pub token: Option<String>,
    /// Browser origins allowed to call (`scheme://host:port`) besides, when `addr` is loopback,
    /// pages on a loopback name (`localhost`, `127.0.0.1`, `[::1]` or `addr`'s own; http or
    /// https, any port); any other `Origin` gets 403. Requests without `Origin` (non-browser
    /// clients) pass.
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted besides loopback names; needed when clients reach the server by a
    /// DNS name. Empty with a token set off loopback: any Host (the token guards the server).
    pub allowed_hosts: Vec<String>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Time allowed until a request's response starts.
    pub request_timeout: Duration,
    /// Serve without sessions: every POST is answered with JSON on its own (any replica can
    /// take any request). Cancellation then comes from the client closing the request.
    pub stateless: bool,
    /// Session ids start with `<replica_id>-`, so a load balancer can send each session's
    /// requests to the replica holding it (see [`ReplicaSessions`]).
    pub replica_id: Option<String>,
    /// Time after the in-flight evaluations finish for their replies to be written before open
    /// streams are closed.
    pub shutdown_grace: Duration,
    /// The bearer token of `POST /admin/refresh` (its own, never the clients'); without one
    /// there is no admin endpoint.
    pub admin_token: Option<String>,
    /// Callers present OAuth bearer JWTs, each checked and made the evaluation's caller
    /// (instead of one shared `token`).
    pub oauth: Option<OAuthOptions>,
    /// Serve `/metrics` (unauthenticated, like `/ready`) on this listener; off when
    /// `--metrics-listen` gives it one of its own ([`serve_metrics`]).
    pub metrics: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 7332)),
            token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: crate::program::limits::HTTP_MAX_BODY_BYTES,
            request_timeout: crate::program::limits::HTTP_REQUEST_TIMEOUT,
            stateless: false,
            replica_id: None,
            shutdown_grace: Duration::from_secs(2),
            admin_token: None,
            oauth: None,
            metrics: true,
        }
    }
}

impl HttpOptions {
    /// The rules of the options themselves: a token off loopback, and a long one; a replica id
    /// that is safe in a header.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(problem) = self.replica_id.as_deref().and_then(replica_id_problem) {
            return Err(problem);
        }
        if let Some(admin) = &self.admin_token {
            token_problem(admin, "admin token")?;
            if self.token.as_deref() == Some(admin.as_str()) {
                return Err(
                    "the admin token must differ from the clients' bearer token: a client must \
                     not be able to refresh the catalog"
                        .into(),
                );
            }
        }
        if let Some(oauth) = &self.oauth {
            if self.token.is_some() {
                return Err(
                    "give either a static bearer token or OAuth (--oauth-issuer), not both: \
                     with OAuth every caller has a token of its own"
                        .into(),
                );
            }
            return oauth.validate();
        }
        match &self.token {
            None if !self.addr.ip().is_loopback() => Err(format!(
                "listening on {} (not loopback) needs callers to authenticate: give \
                 --oauth-issuer URL (OAuth bearer JWTs), or --token-file FILE or PTC_HTTP_TOKEN \
                 (one shared token of at least {MIN_TOKEN_CHARS} characters)",
                self.addr
            )),
            Some(t) => token_problem(t, "bearer token"),
            None => Ok(()),
        }
    }
}

/// A token long enough not to be guessed, and safe in a header.
fn token_problem(t: &str, what: &str) -> Result<(), String> {
    let n = t.chars().count();
    if n < MIN_TOKEN_CHARS {
        return Err(format!(
            "the {what} is {n} characters; use at least {MIN_TOKEN_CHARS} (e.g. `openssl rand \
             -hex 32`)"
        ));
    }
    if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the {what} must not contain spaces or control characters"
        ));
    }
    Ok(())
}

#[derive(Clone)]
struct AppState {
    evaluator: Arc<Evaluator>,
    auth: Auth,
    timeout: Duration,
}

/// How `/mcp` knows its callers.
#[derive(Clone)]
enum Auth {
    /// Loopback without a token: whoever can reach the port is the local operator.
    Open,
    /// One shared token.
    Token(Arc<[u8]>),
    /// OAuth bearer JWTs.
    Jwt(Arc<TokenValidator>),
}

impl Auth {
    /// The caller a request with the bearer token `given` speaks for, or the refusal to send.
    async fn caller(&self, given: Option<String>) -> Result<Caller, Response> {
        match self {
            Auth::Open => Ok(Caller::local()),
            Auth::Token(t) => match refused_token(given.as_deref(), t) {
                Some(r) => Err(r),
                None => Ok(Caller::shared_token()),
            },
            Auth::Jwt(v) => {
                let checked = match given {
                    None => Err(Rejection::Invalid(MISSING.into())),
                    Some(token) => v.validate(&token).await,
                };
                checked.map_err(|r| challenge(v.options(), &r))
            }
        }
    }
}

/// The refusal of an OAuth token: 401 (no token, or not valid), 403 (a scope missing) or 503
/// (the issuer's keys cannot be had), with the challenge that tells the client what to do.
fn challenge(options: &OAuthOptions, rejection: &Rejection) -> Response {
    let status = match rejection {
        Rejection::Invalid(_) => StatusCode::UNAUTHORIZED,
        Rejection::InsufficientScope(_) => StatusCode::FORBIDDEN,
        Rejection::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let message = rejection.message();
    if !matches!(rejection, Rejection::Invalid(m) if m == MISSING) {
        tracing::warn!(target: "ptc::auth", status = status.as_u16(), "token refused: {message}");
    }
    let mut r = (status, format!("{message}\n")).into_response();
    let header = rejection.challenge(&options.metadata_url(), &options.required_scopes);
    if let Ok(v) = HeaderValue::from_str(&header) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// `GET` of the protected resource metadata (RFC 9728): the resource and its authorization
/// servers, unauthenticated so a client can learn where to get a token.
async fn resource_metadata(State(options): State<Arc<OAuthOptions>>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        options.metadata().to_string(),
    )
        .into_response()
}

/// The bearer token a request carries, if any.
fn bearer(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
}

/// Why `req` may not pass `expected` (constant-time comparison), or `None`.
fn refused(req: &Request, expected: &[u8]) -> Option<Response> {
    refused_token(bearer(req), expected)
}

/// Why the bearer token `given` is not `expected` (constant-time comparison), or `None`.
fn refused_token(given: Option<&str>, expected: &[u8]) -> Option<Response> {
    match given {
        None => Some(unauthorized("missing bearer token")),
        Some(given) if !bool::from(given.as_bytes().ct_eq(expected)) => {
            Some(unauthorized("wrong bearer token"))
        }
        Some(_) => None,
    }
}

/// `POST /admin/refresh`: re-reads and recompiles the catalog, swaps it in for new
/// evaluations, and answers what changed (JSON); 422 with the reason when it cannot (the
/// catalog in force stays).
async fn admin_refresh(State(state): State<AdminState>, req: Request) -> Response {
    if let Some(r) = refused(&req, &state.token) {
        return r;
    }
    match state.evaluator.refresh().await {
        Ok(diff) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&diff).unwrap_or_default(),
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(target: "ptc::server", "catalog refresh refused: {e}");
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("the catalog was not refreshed: {e}\n"),
            )
                .into_response()
        }
    }
}

#[derive(Clone)]
struct AdminState {
    evaluator: Arc<Evaluator>,
    token: Arc<[u8]>,
}

async fn health() -> &'static str {
    "ok\n"
}

/// `ready` and the load behind it: programs in flight, requests waiting for their turn, per
/// pinned MCP upstream the pin events seen (changed, removed, unpinned tools), per tool and
/// field the answers that drifted from the output schema, and a warning per stdio upstream the
/// config runs unisolated.
async fn ready(State(state): State<AppState>) -> Response {
    let ev = &state.evaluator;
    if ev.is_accepting() {
        let mut body = format!(
            "ready\nrunning {}\nwaiting {}\n",
            ev.running(),
            ev.waiting()
        );
        for (upstream, c) in ev.upstreams().pin_counts() {
            let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
            body.push_str(&format!(
                "pins {upstream} changed {} removed {} unpinned {}\n",
                n(&c.changed),
                n(&c.removed),
                n(&c.unpinned)
            ));
        }
        for (tool, field, n) in ev.upstreams().drift().counts() {
            body.push_str(&format!("drift {tool} {field} {n}\n"));
        }
        for upstream in ev.upstreams().unisolated() {
            body.push_str(&format!(
                "warning: {upstream} is not isolated (\"sandbox\": false)\n"
            ));
        }
        (StatusCode::OK, body).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    }
}

fn unauthorized(why: &str) -> Response {
    let mut r = (
        StatusCode::UNAUTHORIZED,
        format!("{why}: send `Authorization: Bearer <token>`\n"),
    )
        .into_response();
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// Who is calling (the caller goes into the request for the evaluation), and the request
/// timeout, in front of `/mcp`.
async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let given = bearer(&req).map(str::to_string);
    match state.auth.caller(given).await {
        Ok(caller) => {
            req.extensions_mut().insert(Arc::new(caller));
        }
        Err(refusal) => return refusal,
    }
    match tokio::time::timeout(state.timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the request took longer than {} ms to start answering\n",
                state.timeout.as_millis()
            ),
        )
            .into_response(),
    }
}

/// The names a host on loopback goes by: the ones every local client uses, and the address it is
/// bound to when that is another loopback address (`127.0.0.2`), which its own clients then use.
fn loopback_names(addr: SocketAddr) -> Vec<String> {
    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    let own = addr.ip().to_string();
    if addr.ip().is_loopback() && !names.contains(&own) {
        names.push(own);
    }
    names
}

/// The `Host` and `Origin` checks rmcp makes on `/mcp` before reading a message (403 when
/// refused), as one rule over the [loopback names](loopback_names):
///
/// - `Host` (DNS rebinding: a hostile name resolved to this address): the loopback names and
///   `--allowed-host`. Off loopback with no `--allowed-host`, any Host: the token, mandatory
///   there, is what stops a rebinding page.
/// - `Origin` (the page a browser request comes from; a request without one, from a
///   non-browser client, passes): `--allowed-origin`, and on a loopback listener a page on a
///   loopback name too (`http` or `https`, any port): it is served from this machine, which
///   alone can reach such a listener anyway. Any other page, `null` and a malformed Origin are
///   refused, and off loopback only `--allowed-origin` passes.
fn host_and_origin_checks(
    config: StreamableHttpServerConfig,
    options: &HttpOptions,
) -> StreamableHttpServerConfig {
    let loopback = options.addr.ip().is_loopback();
    let names = loopback_names(options.addr);
    let mut origins = options.allowed_origins.clone();
    if loopback {
        for name in &names {
            // rmcp compares hosts without IPv6 brackets but parses origins as URLs, which need them.
            let host = if name.contains(':') {
                format!("[{name}]")
            } else {
                name.clone()
            };
            origins.push(format!("http://{host}:*"));
            origins.push(format!("https://{host}:*"));
        }
    }
    let config = config
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    if loopback || !options.allowed_hosts.is_empty() {
        let mut hosts = names;
        hosts.extend(options.allowed_hosts.iter().cloned());
        config.with_allowed_hosts(hosts)
    } else {
        config.disable_allowed_hosts()
    }
}

/// The axum app: `/mcp`, `/health`, `/ready`, `/metrics` unless it has a listener of its own,
/// and with OAuth the protected resource metadata.
/// `ct` ends every MCP session when cancelled.
pub fn router(
    evaluator: Arc<Evaluator>,
    options: &HttpOptions,
    ct: CancellationToken,
) -> Result<Router, String> {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct)
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_legacy_session_mode(!options.stateless)
        .with_json_response(options.stateless);
    let config = host_and_origin_checks(config, options);
    let ev = evaluator.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(PtcServer::new(ev.clone())),
        Arc::new(ReplicaSessions::new(options.replica_id.as_deref())),
        config,
    );
    let admin = options.admin_token.as_ref().map(|t| AdminState {
        evaluator: evaluator.clone(),
        token: Arc::from(t.as_bytes().to_vec().into_boxed_slice()),
    });
    let auth = match (&options.oauth, &options.token) {
        (Some(oauth), _) => Auth::Jwt(Arc::new(TokenValidator::new(
            oauth.clone(),
            crate::wire::http_client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| format!("cannot build the HTTP client for OAuth keys: {e}"))?,
        )?)),
        (None, Some(t)) => Auth::Token(Arc::from(t.as_bytes().to_vec().into_boxed_slice())),
        (None, None) => Auth::Open,
    };
    let metrics = options.metrics.then(|| metrics_router(evaluator.clone()));
    let evaluator_plan = evaluator.upstreams().plan().clone();
    let state = AppState {
        evaluator,
        auth,
        timeout: options.request_timeout,
    };
    let mcp = Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(state.clone(), guard));
    let mut app = Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(state)
        .merge(mcp);
    if let Some(metrics) = metrics {
        app = app.merge(metrics);
    }
    if let Some(admin) = admin {
        app = app.merge(
            Router::new()
                .route("/admin/refresh", axum::routing::post(admin_refresh))
                .with_state(admin),
        );
    }
    let hosted = crate::credentials::upstream_oauth::hosted_routes(
        &evaluator_plan,
        &["/mcp", "/health", "/ready", "/metrics", "/admin/refresh"],
    );
    for path in hosted.redirects {
        app = app.route(&path, get(consent_callback));
    }
    for (path, document) in hosted.documents {
        let document = axum::Json(document);
        app = app.route(&path, get(move || std::future::ready(document.clone())));
    }
    if let Some(oauth) = &options.oauth {
        // At the path RFC 9728 derives from the resource, and at the root for clients that
        // look there first.
        let mut metadata = Router::new().route(
            "/.well-known/oauth-protected-resource",
            get(resource_metadata),
        );
        let path = oauth.metadata_path();
        if path != "/.well-known/oauth-protected-resource" {
            metadata = metadata.route(&path, get(resource_metadata));
        }
        app = app.merge(metadata.with_state(Arc::new(oauth.clone())));
    }
    Ok(app)
}

/// A person's browser back from an authorization server: handed to the authorization that waits
/// for it. Unauthenticated, as the Client ID Metadata Documents are: a browser carries no token,
/// and the authorization's unguessable `state` is what matches it.
async fn consent_callback(
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    match crate::credentials::upstream_oauth::deliver(&query) {
        Ok(page) => (StatusCode::OK, page).into_response(),
        Err(page) => (StatusCode::BAD_REQUEST, page).into_response(),
    }
}

/// A listening server: its address, and the task to await for it to end.
pub struct Running {
    /// The bound address (the port is real when 0 was asked).
    pub addr: SocketAddr,
    /// Ends when the server has shut down.
    pub done: tokio::task::JoinHandle<Result<(), String>>,
}

/// Binds and serves until `shutdown` completes; then refuses new evaluations (`busy`, `/ready`
/// 503), finishes the running ones, lets their replies go out and stops.
pub async fn serve(
    evaluator: Arc<Evaluator>,
    options: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Running, String> {
    options.validate()?;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", options.addr))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    let ct = CancellationToken::new();
    let app = router(evaluator.clone(), &options, ct.child_token())?;
    let grace = options.shutdown_grace;
    let drained = CancellationToken::new();
    let drained_signal = drained.clone();
    let ev = evaluator.clone();
    let graceful = async move {
        shutdown.await;
        tracing::info!(target: "ptc::server", "shutting down: finishing running evaluations");
        ev.stop_accepting();
        ev.drain().await;
        drained_signal.cancel();
    };
    // Once the evaluations are done, their replies get `grace` to be written; then the
    // long-lived streams (SSE) are closed so the server can stop.
    tokio::spawn(async move {
        drained.cancelled().await;
        tokio::time::sleep(grace).await;
        ct.cancel();
    });
    tracing::info!(target: "ptc::server", %addr, path = "/mcp", "listening");
    let done = tokio::spawn(async move {
        // Replies are small and written in pieces (SSE events): without TCP_NODELAY, Nagle and
        // delayed ACKs add ~40 ms to every call.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(graceful)
            .await
            .map_err(|e| format!("the HTTP server stopped: {e}"))
    });
    Ok(Running { addr, done })
}

/// `GET /metrics` for `evaluator`, unauthenticated like `/ready`.
fn metrics_router(evaluator: Arc<Evaluator>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(evaluator)
}

async fn scrape(State(evaluator): State<Arc<Evaluator>>) -> Response {
    match evaluator.metrics().render(evaluator.metrics_now()) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, crate::server::metrics::CONTENT_TYPE)],
            body,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be written\n",
        )
            .into_response(),
    }
}

/// Serves `/metrics` alone on `addr` (`--metrics-listen`) until `shutdown` completes.
pub async fn serve_metrics(
    evaluator: Arc<Evaluator>,
    addr: std::net::SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Running, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} for /metrics: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    tracing::info!(target: "ptc::server", %addr, path = "/metrics", "listening");
    let done = tokio::spawn(async move {
        axum::serve(listener, metrics_router(evaluator))
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| format!("the metrics server stopped: {e}"))
    });
    Ok(Running { addr, done })
}

#[cfg(test)]
mod tests {
    use super::{HttpOptions, host_and_origin_checks};
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use rmcp::ServerHandler;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use std::net::SocketAddr;
    use std::sync::Arc;

    /// A server that only answers the handshake: the checks come before any handler.
    #[derive(Clone)]
    struct Quiet;
    impl ServerHandler for Quiet {}

    /// What rmcp answers an `initialize` sent to a host listening on `listen` with `options`'
    /// lists, with `host` as the Host header and `origin` as the Origin header (none when
    /// `None`): the status and, when refused, rmcp's reason.
    async fn answer(
        listen: &str,
        options: HttpOptions,
        host: &str,
        origin: Option<&str>,
    ) -> (StatusCode, String) {
        let addr: SocketAddr = listen.parse().unwrap();
        let options = HttpOptions { addr, ..options };
        let config = host_and_origin_checks(StreamableHttpServerConfig::default(), &options);
        let service = StreamableHttpService::new(
            || Ok(Quiet),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let mut request = Request::post("/mcp")
            .header("host", host)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let response = service
            .handle(request.body(Body::from(init)).unwrap())
            .await;
        let status = response.status();
        let reason = if status == StatusCode::FORBIDDEN {
            let body = axum::body::to_bytes(Body::new(response.into_body()), 1 << 16)
                .await
                .unwrap();
            String::from_utf8_lossy(&body).into_owned()
        } else {
            String::new()
        };
        (status, reason)
    }

    const ORIGIN_REFUSED: &str = "Forbidden: Origin header is not allowed";
    const ORIGIN_MALFORMED: &str = "Forbidden: Invalid Origin header";
    const HOST_REFUSED: &str = "Forbidden: Host header is not allowed";

    /// Each origin's answer from a host on `listen` with `allowed_origins`, the Host header the
    /// listener's own address.
    async fn origins(listen: &str, allowed_origins: &[&str], cases: &[(&str, Result<(), &str>)]) {
        assert!(!cases.is_empty());
        let addr: SocketAddr = listen.parse().unwrap();
        for (origin, expected) in cases {
            let options = HttpOptions {
                allowed_origins: allowed_origins.iter().map(|o| o.to_string()).collect(),
                ..Default::default()
            };
            let got = answer(listen, options, &addr.to_string(), Some(origin)).await;
            let want = match expected {
                Ok(()) => (StatusCode::OK, String::new()),
                Err(reason) => (StatusCode::FORBIDDEN, reason.to_string()),
            };
            assert_eq!(
                got, want,
                "Origin {origin:?} on a host listening on {listen}"
            );
        }
    }

    #[tokio::test]
    async fn a_loopback_host_accepts_pages_on_loopback_names_and_refuses_every_other() {
        origins(
            "127.0.0.1:7332",
            &[],
            &[
                ("http://localhost:3000", Ok(())),
                ("http://127.0.0.1:5173", Ok(())),
                ("http://[::1]:8080", Ok(())),
                ("https://localhost:8443", Ok(())),
                ("http://localhost", Ok(())),
                ("HTTP://LOCALHOST:3000", Ok(())),
                // Another loopback address than the names and the host's own is not one of them.
                ("http://127.0.0.2:3000", Err(ORIGIN_REFUSED)),
                ("http://evil.example", Err(ORIGIN_REFUSED)),
                ("http://localhost.evil.example", Err(ORIGIN_REFUSED)),
                ("http://127.0.0.1.nip.io", Err(ORIGIN_REFUSED)),
                ("http://evil.example:3000", Err(ORIGIN_REFUSED)),
                ("ws://localhost:3000", Err(ORIGIN_REFUSED)),
                ("null", Err(ORIGIN_REFUSED)),
                ("localhost:3000", Err(ORIGIN_MALFORMED)),
                ("not an origin", Err(ORIGIN_MALFORMED)),
                ("", Err(ORIGIN_MALFORMED)),
            ],
        )
        .await;
    }

    #[tokio::test]
    async fn a_loopback_host_goes_by_its_own_address_too() {
        for (listen, own) in [
            ("127.0.0.2:7332", "http://127.0.0.2:3000"),
            ("[::1]:7332", "http://[::1]:3000"),
        ] {
            origins(
                listen,
                &[],
                &[
                    (own, Ok(())),
                    ("http://localhost:3000", Ok(())),
                    ("http://127.0.0.3:3000", Err(ORIGIN_REFUSED)),
                    ("http://evil.example", Err(ORIGIN_REFUSED)),
                ],
            )
            .await;
        }
        // Its clients name it by that address, which the Host check accepts as it does the
        // loopback names; a rebinding name still not.
        for (host, status) in [
            ("127.0.0.2:7332", StatusCode::OK),
            ("localhost:7332", StatusCode::OK),
            ("127.0.0.3:7332", StatusCode::FORBIDDEN),
            ("evil.example:7332", StatusCode::FORBIDDEN),
        ] {
            let (got, _) = answer("127.0.0.2:7332", HttpOptions::default(), host, None).await;
            assert_eq!(got, status, "Host {host}");
        }
    }

    #[tokio::test]
    async fn allowed_origins_add_to_the_loopback_pages() {
        origins(
            "127.0.0.1:7332",
            &["https://app.example.com:443", "null"],
            &[
                ("https://app.example.com", Ok(())),
                ("null", Ok(())),
                ("http://localhost:3000", Ok(())),
                ("https://app.example.com:8443", Err(ORIGIN_REFUSED)),
                ("http://evil.example", Err(ORIGIN_REFUSED)),
            ],
        )
        .await;
    }

    #[tokio::test]
    async fn off_loopback_only_allowed_origins_pass() {
        origins(
            "192.0.2.10:7332",
            &["https://app.example.com:443"],
            &[
                ("https://app.example.com", Ok(())),
                ("http://localhost:3000", Err(ORIGIN_REFUSED)),
                ("http://127.0.0.1:5173", Err(ORIGIN_REFUSED)),
                ("http://[::1]:8080", Err(ORIGIN_REFUSED)),
                ("http://evil.example", Err(ORIGIN_REFUSED)),
            ],
        )
        .await;
        origins(
            "0.0.0.0:7332",
            &[],
            &[("http://localhost:3000", Err(ORIGIN_REFUSED))],
        )
        .await;
    }

    #[tokio::test]
    async fn the_host_check_follows_the_listener_and_allowed_hosts() {
        let hosts = |allowed_hosts: &[&str]| HttpOptions {
            allowed_hosts: allowed_hosts.iter().map(|h| h.to_string()).collect(),
            ..Default::default()
        };
        let cases = [
            // On loopback: the loopback names, and the allowed hosts.
            ("127.0.0.1:7332", hosts(&[]), "localhost:7332", Ok(())),
            ("127.0.0.1:7332", hosts(&[]), "[::1]:7332", Ok(())),
            (
                "127.0.0.1:7332",
                hosts(&[]),
                "evil.example",
                Err(HOST_REFUSED),
            ),
            (
                "127.0.0.1:7332",
                hosts(&["ptc.internal"]),
                "ptc.internal",
                Ok(()),
            ),
            // Off loopback with no list: any Host (the mandatory token guards it).
            ("192.0.2.10:7332", hosts(&[]), "evil.example", Ok(())),
            // Off loopback with a list: the list and the loopback names, as before; the bound
            // address is a name only when it is a loopback one.
            (
                "192.0.2.10:7332",
                hosts(&["ptc.example.com"]),
                "192.0.2.10:7332",
                Err(HOST_REFUSED),
            ),
            (
                "192.0.2.10:7332",
                hosts(&["ptc.example.com"]),
                "ptc.example.com",
                Ok(()),
            ),
            (
                "192.0.2.10:7332",
                hosts(&["ptc.example.com"]),
                "localhost",
                Ok(()),
            ),
            (
                "192.0.2.10:7332",
                hosts(&["ptc.example.com"]),
                "evil.example",
                Err(HOST_REFUSED),
            ),
        ];
        for (listen, options, host, expected) in cases {
            let got = answer(listen, options, host, None).await;
            let want = match expected {
                Ok(()) => (StatusCode::OK, String::new()),
                Err(reason) => (StatusCode::FORBIDDEN, reason.to_string()),
            };
            assert_eq!(got, want, "Host {host} on a host listening on {listen}");
        }
    }
}
