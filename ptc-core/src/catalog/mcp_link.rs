//! MCP upstreams in the catalog and the executor: one [`McpClient`] per `mcp_stdio` or
//! `mcp_http` upstream, connected at start-up or on first use, its tools mapped into catalog
//! entries. The client itself (handshake, both protocol eras, pagination, result unwrapping,
//! reconnection) lives in [`crate::wire::mcp`].
//!
//! An upstream with a vendored tool list exposes its pinned tools from the start (the catalog
//! holds the pins, as reviewed) and compares the live listing with them whenever the session or
//! the server's tool list changed ([`crate::catalog::pin_check`]). One without exposes what the server lists
//! on first use, narrowed by `include_tools`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use ptc_plan::WriteGrant;
use ptc_plan::effects::{Classified, Refusal, classify};

use serde_json::{Map, Value};

use crate::call::contract::{ToolError, ToolOutput};
use crate::call::writes::WriteGate;
use crate::catalog::caller_sessions::{
    CALLER_SESSION_IDLE, CallerSessions, MAX_CALLER_SESSIONS, Session,
};
use crate::catalog::pin_check::{PinBoard, PinCell};
use crate::catalog::{Binding, ServerEntry, ToolEntry};
use crate::credentials::per_caller::CallEnv;
use crate::credentials::upstream_oauth::{Grants, asking};
use crate::wire::mcp::{Holder, McpClient, McpTool};

/// How the upstream is reached.
enum Connect {
    Stdio(ptc_plan::McpStdioPlan),
    Http(ptc_plan::McpHttpPlan),
}

/// Which sessions an upstream's calls go through.
enum Sessions {
    /// One session serves every caller: the deployment's own credentials.
    Shared(tokio::sync::OnceCell<Session>),
    /// A session per caller, with the caller's own grant (a person's OAuth consent).
    PerCaller(CallerSessions),
}

/// A configured MCP upstream; connected on first need.
pub(crate) struct McpLink {
    name: String,
    transport: ptc_plan::TransportKind,
    /// The upstream's `max_response_bytes`, which its client enforces on every answer.
    max_response_bytes: u64,
    connect: Connect,
    sessions: Sessions,
    /// Which tools are exposed when nothing is pinned (`None`: all).
    include: Option<Vec<String>>,
    /// The pins, when a tool list was vendored (shared with the task that compares them when
    /// the listing changes).
    pins: Option<Arc<PinBoard>>,
    /// `allow_writes`, by tool name.
    writes: BTreeMap<String, WriteGrant>,
    /// Whether this process runs writes.
    gate: WriteGate,
    /// What its sessions share with the rest of the process.
    shared: Shared,
}

/// What an MCP upstream's sessions share with the process: where OAuth grants are kept, and
/// the tokens exchanged for callers.
#[derive(Clone, Default)]
pub(crate) struct Shared {
    pub grants: Arc<Grants>,
    pub exchanges: Arc<crate::credentials::per_caller::Exchanges>,
}

impl McpLink {
    /// The link for an `mcp_stdio` or `mcp_http` upstream (`None` for any other transport).
    /// Called as the caller when its grant is a person's (`authorization_code`) or its `auth`
    /// reads a credential that depends on the caller (one of `credentials`).
    pub(crate) fn new(
        name: &str,
        transport: &ptc_plan::Transport,
        gate: WriteGate,
        credentials: &[ptc_plan::CredentialBinding],
        shared: Shared,
    ) -> Option<Self> {
        let (connect, max_response_bytes, tools) = match transport {
            ptc_plan::Transport::McpStdio(p) => {
                (Connect::Stdio(p.clone()), p.max_response_bytes, &p.tools)
            }
            ptc_plan::Transport::McpHttp(p) => (
                Connect::Http(p.clone()),
                p.http.max_response_bytes,
                &p.tools,
            ),
            ptc_plan::Transport::Openapi(_) => return None,
        };
        let per_caller = match transport {
            ptc_plan::Transport::McpHttp(p) => {
                let persons = p
                    .oauth
                    .as_ref()
                    .is_some_and(|o| o.grant == ptc_plan::OAuthGrant::AuthorizationCode);
                let callers_credentials = p.http.auth.iter().any(|e| {
                    credentials
                        .iter()
                        .any(|c| c.name == e.binding() && c.source.is_per_caller())
                });
                persons || callers_credentials
            }
            _ => false,
        };
        Some(McpLink {
            name: name.to_string(),
            transport: transport.kind(),
            max_response_bytes,
            connect,
            sessions: match per_caller {
                true => Sessions::PerCaller(CallerSessions::new(
                    MAX_CALLER_SESSIONS,
                    CALLER_SESSION_IDLE,
                )),
                false => Sessions::Shared(tokio::sync::OnceCell::new()),
            },
            include: tools.include.clone(),
            pins: tools
                .pinned
                .as_deref()
                .map(|pins| Arc::new(PinBoard::new(name, tools.policy, pins, &tools.left_out))),
            writes: tools.writes.clone(),
            gate,
            shared,
        })
    }

    /// The catalog entries of the pinned tools, as reviewed (`None` when nothing is pinned:
    /// the tools are known once the server is listed).
    pub(crate) fn pinned_entries(&self) -> Option<Vec<ToolEntry>> {
        let board = self.pins.as_ref()?;
        Some(
            board
                .pins()
                .enumerate()
                .map(|(index, (pin, cell))| self.entry(index, pin.into(), Some(cell.clone())))
                .collect(),
        )
    }

    fn entry(&self, index: usize, t: McpTool, pin: Option<Arc<PinCell>>) -> ToolEntry {
        let natural = ptc_plan::effects::mcp_effect(Some(&Value::Object(t.annotations.clone())));
        let grant = self.writes.get(&t.name);
        let classified = match classify(natural, grant, true) {
            // A listed (unpinned) tool the server now calls a read but the operator granted as
            // a write: the stricter reading wins. (Pinned tools were checked by the plan.)
            Err(Refusal::ReadGranted) => {
                Ok(grant.map_or_else(Classified::default, |g| Classified {
                    effect: g.effect,
                    approval: g.approval,
                }))
            }
            other => other,
        };
        ToolEntry {
            server: self.name.clone(),
            binding: Binding::Mcp {
                transport: self.transport,
            },
            disabled: crate::call::writes::disabled_reason(&classified, self.gate),
            // An ungranted write is classified as what it is, and disabled.
            classified: classified.unwrap_or(Classified {
                effect: natural,
                approval: ptc_plan::Approval::Always,
            }),
            name: t.name,
            description: t.description,
            input_schema: t.input_schema,
            output_schema: t.output_schema,
            max_response_bytes: self.max_response_bytes,
            projection: Default::default(),
            pin,
            index,
        }
    }

    /// Whether the catalog entry is up to date: listed (unpinned), or the pins compared with the
    /// listing of the current session and tool-list generation. Per caller, the pins are the
    /// catalog (each caller's session is compared with them before its calls).
    pub(crate) fn is_current(&self, entry: &ServerEntry) -> bool {
        match (&self.pins, &self.sessions) {
            (None, _) => entry.tools().is_some(),
            (Some(_), Sessions::PerCaller(_)) => true,
            (Some(_), Sessions::Shared(shared)) => shared
                .get()
                .is_some_and(|s| s.compared.is_current(s.client.tools_generation())),
        }
    }

    /// Brings the catalog entry up to date: lists the tools (unpinned, first use), or compares
    /// the live listing with the pins (pinned, whenever the session or the server's tool list
    /// changed since the last comparison).
    pub(crate) async fn load(
        &self,
        entry: &ServerEntry,
        env: &CallEnv<'_>,
    ) -> Result<(), ToolError> {
        asking(env.consent.cloned(), async {
            let session = self.session(env).await?;
            let client = &session.client;
            match &self.pins {
                None => {
                    let tools = client
                        .list_tools()
                        .await?
                        .into_iter()
                        .filter(|t| self.include.as_ref().is_none_or(|i| i.contains(&t.name)))
                        .enumerate()
                        .map(|(index, t)| self.entry(index, t, None))
                        .collect();
                    entry.set_tools(tools);
                }
                Some(board) => {
                    compare(&session, board).await?;
                }
            }
            if let Some(summary) = client.server_summary() {
                entry.set_server_description(summary);
            }
            Ok(())
        })
        .await
    }

    /// A stdio server the config runs with the host's own rights (`"sandbox": false`).
    pub(crate) fn unisolated(&self) -> bool {
        matches!(&self.connect, Connect::Stdio(p) if p.sandbox.is_none())
    }

    /// The pin events counted so far (`None` when nothing is pinned).
    pub(crate) fn pin_counts(&self) -> Option<&crate::catalog::pin_check::PinCounts> {
        self.pins.as_ref().map(|b| &b.counts)
    }

    /// The session this call goes through, connecting now if this is its first use: the shared
    /// one, or the caller's own. A pinned upstream's new session also starts the task that compares its
    /// listing with the pins as soon as it changes (a new connection, a `tools/list_changed`),
    /// so a change is logged and counted when it happens; a call checks the generation itself
    /// before it is sent.
    async fn session(&self, env: &CallEnv<'_>) -> Result<Session, ToolError> {
        // Whose grant the session holds: the caller's, or (shared) the deployment's. A call
        // made for nobody in particular (start-up, `catalog`) is the process's own, whose caller
        // is whoever started it, as its programs' is.
        let local = crate::credentials::identity::Caller::local();
        let holder = match &self.sessions {
            Sessions::Shared(_) => "",
            Sessions::PerCaller(_) => env
                .caller
                .map_or(local.subject.as_str(), |c| c.subject.as_str()),
        };
        let open = || async {
            let client = match &self.connect {
                Connect::Stdio(plan) => {
                    McpClient::connect_stdio(&self.name, plan, Vec::new(), env.redactor.clone())
                        .await
                }
                Connect::Http(plan) => {
                    let grant = Holder {
                        grants: self.shared.grants.clone(),
                        exchanges: self.shared.exchanges.clone(),
                        subject: holder,
                        caller: env.caller.map(|c| Arc::new(c.clone())),
                    };
                    McpClient::connect_http_holding(
                        &self.name,
                        plan,
                        env.credentials,
                        env.secrets,
                        env.redactor.clone(),
                        grant,
                    )
                    .await
                }
            }?;
            let session = Session::new(client);
            if let Some(board) = &self.pins {
                watch(&session, board.clone());
            }
            Ok(session)
        };
        match &self.sessions {
            Sessions::Shared(shared) => shared.get_or_try_init(open).await.cloned(),
            Sessions::PerCaller(pool) => {
                let session = pool.get(holder, open).await?;
                // The caller's credentials are read per request, from this call's caller (their
                // token now, for an exchange).
                session
                    .client
                    .act_for(env.caller.map(|c| Arc::new(c.clone())));
                Ok(session)
            }
        }
    }

    /// Calls tool `name` with validated arguments. A pinned tool is sent only while the listing
    /// it was compared at is current: after a reconnection or a `tools/list_changed` the listing
    /// is compared again first, so a server restarted with a changed tool never runs it unchecked.
    pub(crate) async fn call(
        &self,
        env: &CallEnv<'_>,
        tool: &ToolEntry,
        args: Map<String, Value>,
        deadline: Option<Instant>,
    ) -> Result<ToolOutput, ToolError> {
        asking(env.consent.cloned(), async {
            let name = tool.name.as_str();
            let session = self.session(env).await?;
            let client = &session.client;
            let (Some(board), Some(pin)) = (&self.pins, &tool.pin) else {
                return client.call_tool(name, args, deadline).await;
            };
            // Twice at most: a listing that moves again between the comparison and the send
            // (a notification storm, a flapping server) is reported rather than chased.
            for _ in 0..2 {
                let generation = compare(&session, board).await?;
                if let Some(refused) = pin.refusal(&tool.qualified()) {
                    return Err(refused);
                }
                if let Ok(done) = client
                    .call_tool_listed(name, args.clone(), deadline, generation)
                    .await
                {
                    return done;
                }
            }
            Err(ToolError {
                reason: crate::call::contract::Reason::UpstreamUnavailable,
                message: format!(
                    "{}/{name}: the server's tool list changed twice while the call was being sent; \
                     it was not sent",
                    self.name
                ),
            })
        })
        .await
    }

    /// Opens the session of `env`'s caller and lists the server's tools (their number).
    pub(crate) async fn sign_in(&self, env: &CallEnv<'_>) -> Result<usize, ToolError> {
        asking(env.consent.cloned(), async {
            let session = self.session(env).await?;
            Ok(session.client.list_tools().await?.len())
        })
        .await
    }

    /// The per-caller sessions' counts (`None` when one session serves every caller).
    pub(crate) fn caller_session_counts(
        &self,
    ) -> Option<&crate::catalog::caller_sessions::SessionCounts> {
        match &self.sessions {
            Sessions::PerCaller(pool) => Some(&pool.counts),
            Sessions::Shared(_) => None,
        }
    }

    /// Stops the upstream (closes its sessions, kills a child process).
    pub(crate) async fn shutdown(&self) {
        let sessions = match &self.sessions {
            Sessions::Shared(shared) => shared.get().cloned().into_iter().collect(),
            Sessions::PerCaller(pool) => pool.sessions(),
        };
        for s in sessions {
            s.client.shutdown().await;
        }
    }
}

/// Every tool MCP upstream `upstream` of `plan` lists now, unfiltered and unpinned: what
/// `ptc vendor` pins. Connects with the configured command or URL and credentials, then closes
/// the session. Messages have passed `redactor`.
pub async fn list_live_tools(
    plan: &ptc_plan::Plan,
    secrets: &ptc_plan::Secrets,
    upstream: &str,
    redactor: &crate::credentials::redact::Redactor,
    consent: Option<&Arc<dyn crate::credentials::upstream_oauth::Consent>>,
) -> Result<Vec<McpTool>, ToolError> {
    let unknown = || ToolError {
        reason: crate::call::contract::Reason::UnknownServer,
        message: format!("no MCP upstream `{upstream}` in the config"),
    };
    let up = plan.upstream(upstream).ok_or_else(unknown)?;
    // Listing for `ptc vendor` calls nothing: the gate does not matter.
    let link = McpLink::new(
        upstream,
        &up.transport,
        WriteGate::Closed,
        &plan.credentials,
        Shared::default(),
    )
    .ok_or_else(unknown)?;
    let exchanges = crate::credentials::per_caller::Exchanges::default();
    let env = CallEnv {
        credentials: &plan.credentials,
        secrets,
        redactor,
        caller: None,
        exchanges: &exchanges,
        consent,
    };
    let listed = asking(env.consent.cloned(), async {
        link.session(&env).await?.client.list_tools().await
    })
    .await;
    link.shutdown().await;
    listed
}

/// Compares the live listing with the pins unless the current session's listing already
/// was; the generation compared.
async fn compare(session: &Session, board: &PinBoard) -> Result<u64, ToolError> {
    let client = &session.client;
    // The common case takes no lock: a session that closed since is reconnected inside the
    // call, which then finds the generation moved and is not sent (`ListingMoved`).
    let generation = client.tools_generation();
    if session.compared.is_current(generation) {
        return Ok(generation);
    }
    let _one_at_a_time = board.comparing.lock().await;
    let generation = client.connected_generation().await?;
    if !session.compared.is_current(generation) {
        let live = client.list_tools().await?;
        board.compare(&session.compared, generation, &live);
    }
    Ok(generation)
}

/// Compares `session`'s listing with `board`'s pins each time it changes, until its client is
/// gone (the task holds no strong reference to it while it waits).
fn watch(session: &Session, board: Arc<PinBoard>) {
    let watch = session.client.watch_listing();
    let compared = session.compared.clone();
    tokio::spawn(async move {
        while let Some(client) = watch.changed().await {
            let session = Session {
                client,
                compared: compared.clone(),
            };
            if let Err(e) = compare(&session, &board).await {
                tracing::debug!(error = %e, "the changed tool listing is compared at the next call");
            }
        }
    });
}
