//! MCP upstreams, client side: one [`McpClient`] per configured `mcp_stdio` or `mcp_http`
//! upstream, built on rmcp.
//!
//! The client speaks both protocol eras: it probes with `server/discover` (2026-07-28 and later)
//! and falls back to the `initialize` handshake for servers that only know the older one. It
//! lists tools across every page, unwraps call results into the executor's [`ToolOutput`] and
//! maps every failure onto the result contract's reasons, with messages that name the upstream
//! and tool and have passed the redactor.
//!
//! A connection that closes (a crashed stdio server, a server that went away) fails the calls in
//! flight as `upstream_unavailable`; the next call reconnects, no sooner than the backoff after
//! consecutive failures allows.

mod framing;
mod handshake;
mod http;
mod input;
mod listing;
mod result;
mod sandbox;
mod stdio;

use std::sync::Arc;
use std::sync::Mutex as StdMutex;
use std::time::{Duration, Instant};

use ptc_plan::{Backoff, CredentialBinding, McpHttpPlan, McpStdioPlan, Secrets};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::{Map, Value};

use crate::call::contract::{Reason, ToolError, ToolOutput};
use crate::credentials::redact::Redactor;
use crate::credentials::upstream_oauth::{Grants, UpstreamOAuth};
use listing::Listing;
pub use listing::ListingWatch;
use result::Subject;
pub use stdio::INHERITED_ENV;

/// The `tracing` filter directive a host must include in its log filter: rmcp logs whole
/// protocol messages (tool results, arguments, notifications) from `info` down, and those bypass
/// the redactor. Its errors carry no payloads.
pub const LOG_DIRECTIVE: &str = "rmcp=error";

/// Most `tools/list` pages followed before the listing is refused as endless.
pub const MAX_TOOL_PAGES: usize = 1000;

/// The reconnect backoff of an `mcp_stdio` upstream (its config has no backoff fields): 200 ms
/// after the first failure, doubling per consecutive failure up to 10 s. An `mcp_http` upstream
/// takes `backoff_initial_ms`, `backoff_max_ms` and `max_retries` from its config.
const STDIO_BACKOFF: Backoff = Backoff {
    max_retries: 0,
    initial_ms: 200,
    max_ms: 10_000,
};
/// Time `shutdown` gives a server to exit before it is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// A tool as the upstream lists it; descriptions and schemas have passed the redactor.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    /// The tool's name on the upstream.
    pub name: String,
    /// Its description (empty when it has none).
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured result, if declared.
    pub output_schema: Option<Value>,
    /// Its annotations (`readOnlyHint`, `destructiveHint`, ...: hints, not guarantees).
    pub annotations: Map<String, Value>,
}

impl McpTool {
    /// The tool as a pin: what `ptc vendor` writes and the host compares.
    pub fn pin(&self) -> ptc_plan::PinnedTool {
        ptc_plan::PinnedTool::new(
            &self.name,
            &self.description,
            self.input_schema.clone(),
            self.output_schema.clone(),
            self.annotations.clone(),
        )
    }
}

impl From<&ptc_plan::PinnedTool> for McpTool {
    /// The tool as it was pinned (the other way round from [`McpTool::pin`]).
    fn from(pin: &ptc_plan::PinnedTool) -> Self {
        McpTool {
            name: pin.name.clone(),
            description: pin.description.clone(),
            input_schema: pin.input_schema.clone(),
            output_schema: pin.output_schema.clone(),
            annotations: pin.annotations.clone(),
        }
    }
}

/// A call not sent because the tool listing changed since the generation it was checked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingMoved;

/// Whose session a connection is: where its OAuth grant is kept and its caller's tokens are
/// exchanged, and the holder (a caller's subject, or empty for the deployment).
pub struct Holder<'a> {
    /// Where grants are kept.
    pub grants: Arc<Grants>,
    /// Tokens exchanged for callers (credentials that depend on the caller).
    pub exchanges: Arc<crate::credentials::per_caller::Exchanges>,
    /// A caller's subject, or empty for the deployment.
    pub subject: &'a str,
    /// The caller whose credentials the session reads first (see [`McpClient::act_for`]).
    pub caller: Option<Arc<crate::credentials::identity::Caller>>,
}

/// A connection to one MCP upstream. `Send + Sync`; clones share the connection.
///
/// Dropping the last clone (or [`McpClient::shutdown`]) ends the session and, for stdio, kills the
/// server's process group.
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

struct Inner {
    upstream: String,
    redactor: Redactor,
    connector: Connector,
    handshake_timeout: Duration,
    request_timeout: Duration,
    /// The reconnect wait, and how often a call that never reached the server is retried.
    backoff: Backoff,
    state: tokio::sync::Mutex<State>,
    protocol_version: StdMutex<Option<String>>,
    /// How the server describes itself (`serverInfo`), once connected.
    server_summary: StdMutex<Option<String>>,
    /// Answers the stdio transport refused for their size, by request ticket.
    refusals: stdio::Refusals,
    /// The last ticket given to a request.
    tickets: std::sync::atomic::AtomicU64,
    /// The tool listing's generation and its wake-up (see [`Listing`]).
    listing: Arc<Listing>,
    /// The server answered the newer era's probe with something else: it is spoken to with the
    /// `initialize` handshake only.
    legacy_only: std::sync::atomic::AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A [`ListingWatch`] waiting on this client learns it is gone.
        self.listing.changed.notify_one();
    }
}

enum Connector {
    Stdio {
        plan: Box<McpStdioPlan>,
        env: Vec<(String, String)>,
    },
    Http(http::HttpSetup),
}

#[derive(Default)]
struct State {
    live: Option<Live>,
    /// Consecutive failed connections or lost connections since the last answered call.
    failures: u32,
    /// No reconnect before this.
    not_before: Option<Instant>,
    shut_down: bool,
}

struct Live {
    service: RunningService<RoleClient, Handler>,
    stderr: Option<stdio::StderrTail>,
}

/// Our side of the session: identifies ptc and offers no client capabilities (no sampling, no
/// roots, no elicitation). `tools/list_changed` is counted by the transport (see [`listing`]).
#[derive(Clone)]
struct Handler;

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("ptc", env!("CARGO_PKG_VERSION")),
        )
    }
}

impl McpClient {
    /// Starts `plan`'s server and completes the handshake within `handshake_timeout_ms`.
    ///
    /// The child's environment is [`INHERITED_ENV`] from the host, then `plan.env`, then `env`
    /// (resolved values; secrets among them must already be registered with `redactor`).
    pub async fn connect_stdio(
        upstream: &str,
        plan: &McpStdioPlan,
        env: Vec<(String, String)>,
        redactor: Redactor,
    ) -> Result<McpClient, ToolError> {
        let client = McpClient::new(
            upstream,
            redactor,
            Connector::Stdio {
                plan: Box::new(plan.clone()),
                env,
            },
            plan.handshake_timeout_ms,
            plan.request_timeout_ms,
            STDIO_BACKOFF,
        );
        client.connect_now().await?;
        Ok(client)
    }

    /// Opens a Streamable HTTP session with `plan.url` within `handshake_timeout_ms`. Auth headers
    /// are built from `credentials` (read per request, so rotation needs no restart) and every
    /// secret is registered with `redactor` before it is sent.
    ///
    /// An upstream with `oauth` gets its access tokens as the MCP authorization spec says; a
    /// person's consent is asked through the consent the call runs with
    /// ([`crate::credentials::upstream_oauth::asking`]; none: it answers `auth_required`).
    pub async fn connect_http(
        upstream: &str,
        plan: &McpHttpPlan,
        credentials: &[CredentialBinding],
        secrets: &Secrets,
        redactor: Redactor,
    ) -> Result<McpClient, ToolError> {
        let holder = Holder {
            grants: Arc::default(),
            exchanges: Arc::default(),
            subject: "",
            caller: None,
        };
        Self::connect_http_holding(upstream, plan, credentials, secrets, redactor, holder).await
    }

    /// [`McpClient::connect_http`] for `holder`: their OAuth grant, their credentials.
    pub async fn connect_http_holding(
        upstream: &str,
        plan: &McpHttpPlan,
        credentials: &[CredentialBinding],
        secrets: &Secrets,
        redactor: Redactor,
        holder: Holder<'_>,
    ) -> Result<McpClient, ToolError> {
        let subject = Subject {
            upstream,
            tool: None,
            redactor: &redactor,
            step: None,
        };
        let oauth = plan.oauth.as_ref().map(|o| {
            Arc::new(UpstreamOAuth::new(
                upstream,
                &plan.url,
                o,
                credentials,
                secrets,
                redactor.clone(),
                holder.grants.clone(),
                holder.subject,
            ))
        });
        let setup = http::HttpSetup::new(
            plan,
            credentials,
            secrets,
            redactor.clone(),
            oauth,
            holder.exchanges.clone(),
        )
        .inspect(|setup| setup.act_for(holder.caller.clone()))
        .map_err(|e| subject.error(Reason::UpstreamUnavailable, e))?;
        let client = McpClient::new(
            upstream,
            redactor,
            Connector::Http(setup),
            plan.handshake_timeout_ms,
            plan.http.request_timeout_ms,
            plan.http.backoff,
        );
        client.connect_now().await?;
        Ok(client)
    }

    fn new(
        upstream: &str,
        redactor: Redactor,
        connector: Connector,
        handshake_ms: u64,
        request_ms: u64,
        backoff: Backoff,
    ) -> McpClient {
        McpClient {
            inner: Arc::new(Inner {
                upstream: upstream.to_string(),
                redactor,
                connector,
                handshake_timeout: Duration::from_millis(handshake_ms),
                request_timeout: Duration::from_millis(request_ms),
                backoff,
                state: tokio::sync::Mutex::new(State::default()),
                protocol_version: StdMutex::new(None),
                server_summary: StdMutex::new(None),
                refusals: stdio::Refusals::default(),
                tickets: std::sync::atomic::AtomicU64::new(0),
                listing: Arc::new(Listing::default()),
                legacy_only: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// Reads the credentials that depend on the caller, from the next request on, for
    /// `caller` (the caller of the call being made over this caller's session: the same
    /// subject, their token now).
    pub fn act_for(&self, caller: Option<Arc<crate::credentials::identity::Caller>>) {
        if let Connector::Http(setup) = &self.inner.connector {
            setup.act_for(caller);
        }
    }

    /// The protocol version agreed with the server (e.g. `2026-07-28` or `2025-11-25`), once
    /// connected.
    pub fn protocol_version(&self) -> Option<String> {
        self.inner
            .protocol_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The generation of the tool listing: it changes with every new session and every
    /// `tools/list_changed` the server sends, so a listing taken at an older one may be stale.
    pub fn tools_generation(&self) -> u64 {
        self.inner.listing.generation()
    }

    /// A watch on this client's tool listing (see [`ListingWatch`]).
    pub fn watch_listing(&self) -> ListingWatch {
        ListingWatch {
            client: Arc::downgrade(&self.inner),
            listing: self.inner.listing.clone(),
        }
    }

    /// Makes sure a session is live (reconnecting after the backoff when it closed) and returns
    /// [`McpClient::tools_generation`] as of that session.
    pub async fn connected_generation(&self) -> Result<u64, ToolError> {
        // A reconnection here ends at the handshake timeout, as every reconnection does.
        self.peer(&self.subject(None), None).await?;
        Ok(self.tools_generation())
    }

    /// Opens a `subscriptions/listen` stream for `tools/list_changed` on a session of the newer
    /// protocol era, without which such a server sends none; the older era has no such request.
    /// Either era's notifications are counted by the transport (see [`listing`]). (A server that
    /// will never send one acknowledges the subscription, or refuses it, and that is all.)
    fn watch_tools(&self, peer: &Peer<RoleClient>) {
        let newer = peer
            .peer_info()
            .is_some_and(|i| i.protocol_version >= ProtocolVersion::V_2026_07_28);
        if !newer {
            return;
        }
        let peer = peer.clone();
        let upstream = self.inner.upstream.clone();
        tokio::spawn(async move {
            let filter = rmcp::model::SubscriptionFilter::builder()
                .tools_list_changed()
                .build();
            let mut subscription = match peer.listen(filter).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%upstream, error = %e, "no tools/list_changed subscription");
                    return;
                }
            };
            // The transport has counted each notification as it read it (see [`listing`]); the
            // stream is drained so that rmcp, finding it full, does not end the subscription.
            while let Ok(Some(_)) = subscription.next().await {}
        });
    }

    /// A new request's ticket (see [`stdio::Refusals`]).
    fn ticket(&self) -> Ticket<'_> {
        let n = self
            .inner
            .tickets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ticket {
            n,
            refusals: &self.inner.refusals,
        }
    }

    /// The server's own one-line description from its `serverInfo` (its description, else its
    /// title, else `name version`), once connected; at most [`SUMMARY_CHARS`] bytes.
    pub fn server_summary(&self) -> Option<String> {
        self.inner
            .server_summary
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every tool the upstream offers, following `nextCursor` to the last page (at most
    /// [`MAX_TOOL_PAGES`]; a cursor that repeats is refused).
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, ToolError> {
        let subject = self.subject(None);
        let deadline = Instant::now() + self.inner.request_timeout;
        let peer = self.peer_by(&subject, deadline).await?;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        let mut authorizations = 0u32;
        for _ in 0..MAX_TOOL_PAGES {
            let ticket = self.ticket();
            let mut params = PaginatedRequestParams::default().with_cursor(cursor.clone());
            params.meta = Some(ticket.meta());
            let page = match tokio::time::timeout_at(deadline.into(), peer.list_tools(Some(params)))
                .await
            {
                Err(_) => {
                    return Err(subject.error(
                        Reason::Timeout,
                        format!(
                            "listing tools took longer than {} ms",
                            self.inner.request_timeout.as_millis()
                        ),
                    ));
                }
                Ok(Err(e)) => {
                    let challenge = self.challenge_of(&e);
                    let error = self.failed(&subject, e, &ticket).await;
                    match challenge {
                        Some(challenge) => {
                            match self.answer(&subject, &challenge, &mut authorizations).await {
                                // The same page again, with the new token.
                                Ok(()) => continue,
                                Err(e) => return Err(e.unwrap_or(error)),
                            }
                        }
                        None => return Err(error),
                    }
                }
                Ok(Ok(page)) => page,
            };
            tools.extend(page.tools.into_iter().map(|t| self.tool(t)));
            match page.next_cursor {
                None => {
                    self.succeeded().await;
                    return Ok(tools);
                }
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(subject.error(
                        Reason::UpstreamError,
                        "the tool listing repeated a page cursor, so it would never end",
                    ));
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(subject.error(
            Reason::UpstreamError,
            format!("the tool listing did not end within {MAX_TOOL_PAGES} pages"),
        ))
    }

    /// Calls `tool` with `args` and unwraps the result. The call ends at `deadline` or after the
    /// upstream's `request_timeout_ms`, whichever is sooner (`timeout`).
    pub async fn call_tool(
        &self,
        tool: &str,
        args: Map<String, Value>,
        deadline: Option<Instant>,
    ) -> Result<ToolOutput, ToolError> {
        match self.call_tool_in(tool, args, deadline, None).await {
            Ok(done) => done,
            // Without a generation to hold, the listing cannot be said to have moved.
            Err(ListingMoved) => Err(self
                .subject(Some(tool))
                .error(Reason::UpstreamUnavailable, "the tool listing changed")),
        }
    }

    /// [`McpClient::call_tool`], sent only while the tool listing is still at `generation`
    /// ([`McpClient::tools_generation`]): a call that would go to a new session, or after a
    /// `tools/list_changed`, is not sent ([`ListingMoved`]), so the caller can compare the
    /// listing with its pins first.
    pub async fn call_tool_listed(
        &self,
        tool: &str,
        args: Map<String, Value>,
        deadline: Option<Instant>,
        generation: u64,
    ) -> Result<Result<ToolOutput, ToolError>, ListingMoved> {
        self.call_tool_in(tool, args, deadline, Some(generation))
            .await
    }

    async fn call_tool_in(
        &self,
        tool: &str,
        args: Map<String, Value>,
        deadline: Option<Instant>,
        generation: Option<u64>,
    ) -> Result<Result<ToolOutput, ToolError>, ListingMoved> {
        let subject = self.subject(Some(tool));
        let limit = Instant::now() + self.inner.request_timeout;
        let deadline = deadline.map_or(limit, |d| d.min(limit));
        let ticket = self.ticket();
        let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let mut meta = ticket.meta();
        // The call's trace context (traces on), so the server's spans join the trace.
        for (key, value) in crate::telemetry::outgoing() {
            meta.insert(key.into(), Value::from(value));
        }
        params.meta = Some(meta);
        let mut retried = false;
        let mut retries = 0u32;
        let mut authorizations = 0u32;
        // Only a call that never reached the server is retried (the connection could not be
        // made, or the request's own connection was refused): a tool may act, so one that may
        // have run is never sent twice. The wait between tries is the reconnect backoff.
        let may_retry = |retries: u32, e: &ToolError| {
            e.reason == Reason::UpstreamUnavailable && retries < self.inner.backoff.max_retries
        };
        loop {
            let peer = match self.peer_by(&subject, deadline).await {
                Ok(peer) => peer,
                Err(e) if may_retry(retries, &e) && self.can_reconnect_by(deadline).await => {
                    retries += 1;
                    crate::telemetry::note_retries(retries);
                    continue;
                }
                Err(e) => return Ok(Err(with_retries(e, retries))),
            };
            if generation.is_some_and(|g| g != self.tools_generation()) {
                return Err(ListingMoved);
            }
            let outcome =
                tokio::time::timeout_at(deadline.into(), input::call(&peer, params.clone())).await;
            return Ok(match outcome {
                Err(_) => Err(subject.error(
                    Reason::Timeout,
                    "no answer before the call's deadline (the request timeout or the program's \
                     remaining time)",
                )),
                Ok(input::Rounds::Done(result)) => {
                    self.succeeded().await;
                    result::unwrap(&subject, result)
                }
                Ok(input::Rounds::Unanswered(why)) => Err(with_retries(
                    subject.error(Reason::UpstreamError, why),
                    retries,
                )),
                Ok(input::Rounds::Failed(e)) => {
                    let unsent = result::never_sent(&e);
                    let refused = result::refused_credentials_of(&e);
                    let challenge = self.challenge_of(&e);
                    let error = self.failed(&subject, e, &ticket).await;
                    // A refusal with an OAuth challenge is sent again once answered: the server
                    // did not run the call.
                    if let Some(challenge) = challenge {
                        match self.answer(&subject, &challenge, &mut authorizations).await {
                            Ok(()) => continue,
                            Err(Some(e)) => return Ok(Err(with_retries(e, retries))),
                            Err(None) => {}
                        }
                    }
                    if unsent && may_retry(retries, &error) {
                        self.drop_session().await;
                        if self.can_reconnect_by(deadline).await {
                            retries += 1;
                            crate::telemetry::note_retries(retries);
                            continue;
                        }
                    }
                    // A 401 gets one more try: the credentials are read afresh per request (an
                    // exec credential's cache was dropped when the 401 came back).
                    if refused && !retried {
                        retried = true;
                        continue;
                    }
                    Err(with_retries(error, retries))
                }
            });
        }
    }

    /// Ends the session: a stdio server gets its input closed and is killed if it has not exited
    /// within a few seconds. Later calls fail with `upstream_unavailable`.
    pub async fn shutdown(&self) {
        let mut state = self.inner.state.lock().await;
        state.shut_down = true;
        if let Some(mut live) = state.live.take() {
            let _ = live.service.close_with_timeout(SHUTDOWN_GRACE).await;
        }
    }

    fn subject<'a>(&'a self, tool: Option<&'a str>) -> Subject<'a> {
        Subject {
            upstream: &self.inner.upstream,
            tool,
            redactor: &self.inner.redactor,
            step: None,
        }
    }

    fn tool(&self, t: rmcp::model::Tool) -> McpTool {
        let r = &self.inner.redactor;
        let object =
            |o: &rmcp::model::JsonObject| result::redact_value(r, Value::Object(o.clone()));
        McpTool {
            name: t.name.into_owned(),
            description: r
                .redact(t.description.as_deref().unwrap_or(""))
                .into_owned(),
            input_schema: object(&t.input_schema),
            output_schema: t.output_schema.as_deref().map(object),
            annotations: match t.annotations.map(serde_json::to_value) {
                Some(Ok(v)) => match result::redact_value(r, v) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                },
                _ => Map::new(),
            },
        }
    }

    /// Connects at start-up: failures are reported at once, with no backoff wait.
    async fn connect_now(&self) -> Result<(), ToolError> {
        let subject = self.subject(None);
        self.peer(&subject, None).await.map(|_| ())
    }

    /// [`McpClient::peer`], but a caller queued behind another's reconnection also gives up at
    /// its own deadline.
    async fn peer_by(
        &self,
        subject: &Subject<'_>,
        deadline: Instant,
    ) -> Result<Peer<RoleClient>, ToolError> {
        tokio::time::timeout_at(deadline.into(), self.peer(subject, Some(deadline)))
            .await
            .unwrap_or_else(|_| {
                Err(subject.error(
                    Reason::Timeout,
                    "the deadline passed while waiting for the connection to the server",
                ))
            })
    }

    /// The live session's peer, reconnecting first when there is none or it has closed. A
    /// reconnection ends at the handshake timeout or `deadline`, whichever comes first.
    async fn peer(
        &self,
        subject: &Subject<'_>,
        deadline: Option<Instant>,
    ) -> Result<Peer<RoleClient>, ToolError> {
        let mut state = self.inner.state.lock().await;
        if state.shut_down {
            return Err(subject.error(Reason::UpstreamUnavailable, "the client was shut down"));
        }
        if let Some(live) = &state.live {
            if !live.service.peer().is_transport_closed() {
                return Ok(live.service.peer().clone());
            }
            let detail = live
                .stderr
                .as_ref()
                .map(|t| t.summary())
                .unwrap_or_default();
            tracing::warn!(
                upstream = %self.inner.upstream,
                stderr = %detail,
                "the connection closed; reconnecting"
            );
            state.live = None;
            note_failure(&mut state, &self.inner.backoff);
        }
        if let Some(not_before) = state.not_before {
            if deadline.is_some_and(|d| not_before > d) {
                return Err(subject.error(
                    Reason::UpstreamUnavailable,
                    format!(
                        "reconnecting after {} failure(s); next attempt in {} ms, after this \
                         call's deadline",
                        state.failures,
                        not_before
                            .saturating_duration_since(Instant::now())
                            .as_millis()
                    ),
                ));
            }
            tokio::time::sleep_until(not_before.into()).await;
        }
        let handshake_limit = Instant::now() + self.inner.handshake_timeout;
        let (handshake_deadline, timed_out) = match deadline.filter(|d| *d < handshake_limit) {
            None => (
                handshake_limit,
                subject.error(
                    Reason::UpstreamUnavailable,
                    format!(
                        "the handshake did not complete within {} ms",
                        self.inner.handshake_timeout.as_millis()
                    ),
                ),
            ),
            Some(deadline) => (
                deadline,
                subject.error(
                    Reason::Timeout,
                    "the deadline passed while reconnecting to the server",
                ),
            ),
        };
        match self.connect(subject, handshake_deadline, timed_out).await {
            Ok(live) => {
                let peer = live.service.peer().clone();
                let version = live
                    .service
                    .peer_info()
                    .map(|info| info.protocol_version.to_string());
                let summary = live
                    .service
                    .peer_info()
                    .and_then(|info| info.server_info.as_ref().map(summary_of));
                *self
                    .inner
                    .server_summary
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = summary;
                *self
                    .inner
                    .protocol_version
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = version;
                state.live = Some(live);
                state.not_before = None;
                self.inner.listing.bump();
                self.watch_tools(&peer);
                Ok(peer)
            }
            Err(e) => {
                note_failure(&mut state, &self.inner.backoff);
                Err(e)
            }
        }
    }

    fn handler(&self) -> Handler {
        Handler
    }

    /// Maps a failed request; a closed connection counts towards the reconnect backoff.
    async fn failed(
        &self,
        subject: &Subject<'_>,
        error: rmcp::ServiceError,
        ticket: &Ticket<'_>,
    ) -> ToolError {
        // The error rmcp saw stands in for an answer the transport refused: the refusal says why.
        if let Some(limit) = ticket.refused() {
            return subject.error(
                Reason::ResponseTooLarge,
                crate::call::contract::response_too_large(limit as u64),
            );
        }
        let mut error = result::service_error(subject, error);
        if error.reason == Reason::UpstreamUnavailable {
            let closed = {
                let mut state = self.inner.state.lock().await;
                match &state.live {
                    Some(live) if live.service.peer().is_transport_closed() => {
                        let tail = live.stderr.clone();
                        state.live = None;
                        note_failure(&mut state, &self.inner.backoff);
                        Some(tail)
                    }
                    _ => None,
                }
            };
            if let Some(Some(tail)) = closed {
                // A sandbox says why its server ended as it exits: the limit, when one killed it.
                if let Some(verdict) = tail.verdict(VERDICT_WAIT).await {
                    error.message = format!("{}; {verdict}", error.message);
                }
                tracing::warn!(
                    upstream = %self.inner.upstream,
                    stderr = %tail.summary(),
                    "the server's connection closed"
                );
            }
        }
        error
    }

    /// Forgets the session after a request could not reach the server, so the next try
    /// reconnects, after the backoff.
    async fn drop_session(&self) {
        let mut state = self.inner.state.lock().await;
        if state.live.take().is_some() {
            note_failure(&mut state, &self.inner.backoff);
        }
    }

    /// Whether the next reconnection may start before `deadline` (a retry that could only fail
    /// on its deadline is not made).
    async fn can_reconnect_by(&self, deadline: Instant) -> bool {
        let state = self.inner.state.lock().await;
        state.not_before.is_none_or(|t| t < deadline)
    }

    async fn succeeded(&self) {
        let mut state = self.inner.state.lock().await;
        state.failures = 0;
        state.not_before = None;
    }
}

fn note_failure(state: &mut State, backoff: &Backoff) {
    state.failures = state.failures.saturating_add(1);
    state.not_before = Some(Instant::now() + backoff_after(state.failures, backoff));
}

/// One request's ticket: how a refusal of its answer reaches the caller as a value. Dropping it
/// forgets the ticket, whatever became of the request.
struct Ticket<'a> {
    n: u64,
    refusals: &'a stdio::Refusals,
}

impl Ticket<'_> {
    /// `_meta` carrying the ticket to the transport.
    fn meta(&self) -> rmcp::model::RequestMetaObject {
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.insert(stdio::TICKET_KEY.into(), Value::from(self.n));
        meta
    }

    /// The limit the request's answer exceeded, if the transport refused it.
    fn refused(&self) -> Option<usize> {
        self.refusals.take(self.n)
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.refusals.take(self.n);
    }
}

/// Longest server summary kept: it is shown in discovery and the `lisp_eval` description.
pub const SUMMARY_CHARS: usize = 200;

/// One line describing a server from its `serverInfo`.
fn summary_of(info: &rmcp::model::Implementation) -> String {
    let text = [info.description.as_deref(), info.title.as_deref()]
        .into_iter()
        .flatten()
        .map(|t| t.lines().next().unwrap_or("").trim())
        .find(|t| !t.is_empty())
        .map_or_else(|| format!("{} {}", info.name, info.version), str::to_string);
    let text = text.trim();
    text[..text.floor_char_boundary(SUMMARY_CHARS)].to_string()
}

/// The wait before reconnecting after `failures` consecutive failures (at least one):
/// `initial_ms`, doubling per failure, never past `max_ms`.
fn backoff_after(failures: u32, backoff: &Backoff) -> Duration {
    let factor = 1u64 << failures.saturating_sub(1).min(32);
    Duration::from_millis(
        backoff
            .initial_ms
            .saturating_mul(factor)
            .min(backoff.max_ms),
    )
}

/// `error` saying how often the call was retried, as the OpenAPI client says it.
fn with_retries(mut error: ToolError, retries: u32) -> ToolError {
    match retries {
        0 => {}
        1 => error.message.push_str(" (after 1 retry)"),
        n => error.message.push_str(&format!(" (after {n} retries)")),
    }
    error
}

/// How long a closed connection's error waits for the sandbox to say why its server ended: it
/// says so as it exits, right after the server.
const VERDICT_WAIT: Duration = Duration::from_secs(2);

/// `error` with the server's last stderr lines (already redacted) appended, for diagnosis.
fn with_stderr(mut error: ToolError, tail: &stdio::StderrTail, redactor: &Redactor) -> ToolError {
    let lines = tail.summary();
    if !lines.is_empty() {
        error.message = redactor
            .redact(&format!(
                "{}; its stderr ends: {}",
                error.message,
                result::bounded(&lines)
            ))
            .into_owned();
    }
    error
}

#[cfg(test)]
mod tests {

    fn unconnected() -> super::McpClient {
        let plan = ptc_plan::McpStdioPlan {
            command: "never-started".into(),
            args: vec![],
            env: vec![],
            cwd: None,
            handshake_timeout_ms: 1,
            request_timeout_ms: 1,
            max_response_bytes: 1,
            tools: Default::default(),
            sandbox: None,
        };
        super::McpClient::new(
            "peer",
            crate::credentials::redact::Redactor::default(),
            super::Connector::Stdio {
                plan: Box::new(plan),
                env: vec![],
            },
            1,
            1,
            super::STDIO_BACKOFF,
        )
    }

    /// A listing watch wakes at each change with its client, keeps no change that happened
    /// while nobody waited from being seen, and ends when the client is gone (so the task that
    /// compares pins never outlives it).
    #[tokio::test]
    async fn a_listing_watch_wakes_at_each_change_and_ends_with_its_client() {
        use std::time::Duration;
        let client = unconnected();
        let watch = client.watch_listing();
        let before = client.tools_generation();
        client.inner.listing.bump();
        assert_eq!(client.tools_generation(), before + 1);
        let woke = tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("a change wakes the watch");
        assert!(woke.is_some_and(|c| std::sync::Arc::ptr_eq(&c.inner, &client.inner)));
        drop(client);
        let ended = tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("the client's end wakes the watch");
        assert!(ended.is_none());
    }

    /// A ticket whose call ended without asking (a timeout, a cancel) takes its refusal with it
    /// when it drops, so the book never keeps one.
    #[test]
    fn a_dropped_ticket_takes_its_refusal_with_it() {
        let refusals = super::stdio::Refusals::default();
        let id = rmcp::model::RequestId::Number(7);
        refusals.sent(id.clone(), 3);
        refusals.refuse(&id, 100);
        drop(super::Ticket {
            n: 3,
            refusals: &refusals,
        });
        assert_eq!(refusals.take(3), None);
    }

    #[test]
    fn a_server_is_summarised_by_its_description_title_or_name() {
        let mut info = rmcp::model::Implementation::new("peer", "1.2.3");
        assert_eq!(super::summary_of(&info), "peer 1.2.3");
        info.title = Some("  ".into());
        assert_eq!(
            super::summary_of(&info),
            "peer 1.2.3",
            "a blank title says nothing"
        );
        info.title = Some("Peer Server\nmore".into());
        assert_eq!(super::summary_of(&info), "Peer Server");
        info.description = Some("Records of the peer.\nSecond line.".into());
        assert_eq!(super::summary_of(&info), "Records of the peer.");
        let at = "é".repeat(super::SUMMARY_CHARS / 2);
        info.description = Some(at.clone());
        assert_eq!(super::summary_of(&info), at, "exactly the limit is kept");
        info.description = Some(format!("{at}é"));
        assert_eq!(super::summary_of(&info), at, "past it, cut at a character");
    }
    #[test]
    fn a_client_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync + Clone + 'static>() {}
        shareable::<super::McpClient>();
    }

    #[test]
    fn the_stdio_reconnect_wait_doubles_per_failure_up_to_ten_seconds() {
        let ms = |f| super::backoff_after(f, &super::STDIO_BACKOFF).as_millis();
        assert_eq!(
            [1, 2, 3, 4, 5, 6].map(ms),
            [200, 400, 800, 1_600, 3_200, 6_400]
        );
        assert_eq!([7, 17, 18, u32::MAX].map(ms), [10_000; 4]);
    }

    /// An mcp_http upstream's `backoff_initial_ms` and `backoff_max_ms`: the max reached exactly
    /// and held, and a max between two doublings capping the second.
    #[test]
    fn the_configured_reconnect_wait_starts_at_initial_and_stops_at_max() {
        let b = ptc_plan::Backoff {
            max_retries: 0,
            initial_ms: 150,
            max_ms: 1_200,
        };
        let ms = |f| super::backoff_after(f, &b).as_millis();
        assert_eq!([1, 2, 3, 4].map(ms), [150, 300, 600, 1_200]);
        assert_eq!([5, 64, u32::MAX].map(ms), [1_200; 3]);
        let b = ptc_plan::Backoff { max_ms: 1_199, ..b };
        let ms = |f| super::backoff_after(f, &b).as_millis();
        assert_eq!([3, 4].map(ms), [600, 1_199]);
        let huge = ptc_plan::Backoff {
            max_retries: 0,
            initial_ms: u64::MAX / 2,
            max_ms: u64::MAX,
        };
        assert_eq!(
            super::backoff_after(40, &huge).as_millis(),
            u128::from(u64::MAX)
        );
    }

    #[test]
    fn the_client_names_itself_and_offers_no_capabilities() {
        use rmcp::ClientHandler;
        let info = super::Handler.get_info();
        assert_eq!(info.client_info.name, "ptc");
        assert_eq!(info.client_info.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            info.capabilities,
            rmcp::model::ClientCapabilities::default()
        );
    }
}
