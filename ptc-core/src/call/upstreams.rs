//! The executor: the one interface through which every tool call runs, whichever way it is made.
//!
//! Two callers meet here: the PTC-Lisp host (`tool/call` in a program) and the typed operations
//! that `ptc_upstreams!` generates (`upstreams.run(observatory::ListTracesArgs::new(org))`, an
//! [`Operation`]). Both hand the
//! executor a server, a tool and JSON arguments; argument validation, defaults, auth, caps,
//! timeouts, retries and status mapping all live behind [`Upstreams::call`], never in callers.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::call::approval::{ApprovalRequest, Decision};
use crate::call::contract::{Reason, ResponseCap, ToolError, ToolOutput};
use crate::call::response_check::ResponseCheck;
use crate::call::validate::{Patterns, check_args};
use crate::call::writes::{IdempotencyKey, WriteGate};
use crate::catalog::mcp_link::McpLink;
use crate::catalog::{self, Catalog, ServerEntry, ToolEntry};
use crate::credentials::per_caller::CallEnv;
use crate::credentials::redact::Redactor;
use crate::credentials::upstream_oauth::{Consent, LoopbackConsent};
use crate::wire::openapi::OpenApiUpstream;
use crate::wire::webhook::Webhook;

/// Per-call settings from the caller.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    /// The caller's deadline (a program's remaining time); the executor's own timeouts are capped
    /// by it.
    pub deadline: Option<Instant>,
    /// The idempotency key a write carries (in the upstream's `idempotency_header`).
    pub idempotency_key: Option<IdempotencyKey>,
    /// Who the call is made for: per-caller credentials read its secret.
    pub caller: Option<std::sync::Arc<crate::credentials::identity::Caller>>,
    /// Who is asked should an upstream need a person's OAuth consent for this call (none: the
    /// process's, from [`StartOptions::consent`]).
    pub consent: Option<Arc<dyn Consent>>,
}

/// Decodes a typed call's output: the typed path's half of the executor interface.
///
/// Empty output decodes as JSON `null` (so `()`/`Option` responses work). Text decodes as a JSON
/// string: an MCP tool without an `outputSchema` answers text, and its response type is
/// `serde_json::Value`; a typed response that expected JSON gets an `upstream_error`.
///
/// With a `result_path`, only the value there is deserialised (the rest is skipped); an answer
/// without one is an `upstream_error`.
pub fn decode_typed<R: DeserializeOwned>(
    server: &str,
    tool: &str,
    output: ToolOutput,
    result_path: Option<&ptc_plan::ValuePath>,
) -> Result<R, ToolError> {
    let mismatch = |e: serde_json::Error| ToolError {
        reason: Reason::UpstreamError,
        message: format!("{server}/{tool}: the response does not match its documented schema: {e}"),
    };
    match output {
        ToolOutput::Json(bytes) => match crate::call::projection::json_at(&bytes, result_path) {
            Ok(Some(v)) => Ok(v),
            // Only a path can find nothing.
            Ok(None) => Err(ToolError {
                reason: Reason::UpstreamError,
                message: format!(
                    "{server}/{tool}: {}",
                    result_path.map_or_else(String::new, crate::call::projection::missing)
                ),
            }),
            Err(e) => Err(mismatch(e)),
        },
        ToolOutput::Empty => serde_json::from_slice(b"null").map_err(mismatch),
        ToolOutput::Text(text) => {
            serde_json::from_value(Value::String(text)).map_err(|_| ToolError {
                reason: Reason::UpstreamError,
                message: format!("{server}/{tool} answered with text where JSON was expected"),
            })
        }
    }
}

/// A generated operation's arguments: the tool they call and what its success decodes to.
///
/// `ptc_upstreams!` implements it for every arguments struct it generates; [`Upstreams::run`]
/// runs one through [`Upstreams::call`], so a typed call meets the same validation, defaults,
/// auth, caps and status mapping as a Lisp `tool/call`.
pub trait Operation: Serialize {
    /// The tool's catalog name, `upstream/tool` (what a Lisp program calls).
    const TOOL: &'static str;
    /// What a successful call decodes to.
    type Response: DeserializeOwned;
}

/// Encodes a typed call's arguments as the JSON object the executor takes. A field that is
/// `None` (serialized as null) is an argument not given, so it is left out: Rust's `Option` has
/// no "given as null", and generated structs need no `skip_serializing_if` on every field.
pub fn encode_args<A: Serialize>(
    server: &str,
    tool: &str,
    args: &A,
) -> Result<Map<String, Value>, ToolError> {
    match serde_json::to_value(args) {
        Ok(Value::Object(mut map)) => {
            map.retain(|_, v| !v.is_null());
            Ok(map)
        }
        Ok(other) => Err(ToolError {
            reason: Reason::InvalidArgs,
            message: format!("{server}/{tool}: arguments must be a JSON object, got {other}"),
        }),
        Err(e) => Err(ToolError {
            reason: Reason::InvalidArgs,
            message: format!("{server}/{tool}: arguments cannot be encoded: {e}"),
        }),
    }
}

/// When MCP upstreams' tool lists are loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CatalogLoad {
    /// At start-up: a server that cannot be listed fails the start, naming it.
    #[default]
    AtStart,
    /// On the first call or discovery that needs it.
    OnFirstUse,
}

/// How [`Upstreams::start`] behaves.
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// When MCP tool lists are loaded.
    pub catalog: CatalogLoad,
    /// The redactor to register secrets with (a new one when `None`); share it with whatever
    /// else prints (logs, the MCP host).
    pub redactor: Option<Redactor>,
    /// Whether allow-listed writes (and safe queries) may run in this process.
    pub writes: WriteGate,
    /// How answers are checked against their output schemas.
    pub response_check: ResponseCheck,
    /// A drifted answer fails its call with `response_drift` (else it is counted and noted).
    pub strict_responses: bool,
    /// Who is asked when an upstream needs a person's OAuth consent (none: such a call answers
    /// `auth_required` with the URL to open).
    pub consent: Option<Arc<dyn Consent>>,
    /// Where MCP upstreams' OAuth grants are kept (in memory by default).
    pub grants: Arc<crate::credentials::upstream_oauth::Grants>,
}

/// How a process starts its upstreams, as its flags say (read once, with the environment, by
/// the command that starts them), as a recording notes it and as a replay starts them again.
#[derive(Clone, Copy, Debug, Default)]
pub struct StartSettings {
    /// The write gate.
    pub writes: WriteGate,
    /// Response checking.
    pub response_check: ResponseCheck,
    /// A drifted answer fails its call.
    pub strict_responses: bool,
    /// Who is asked when an upstream needs a person's OAuth consent.
    pub consent: ConsentAt,
}

/// Who a process asks when an upstream needs a person's OAuth consent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConsentAt {
    /// Nobody: the call answers `auth_required` with the URL to open.
    #[default]
    Nobody,
    /// The person at the terminal (`ptc eval`, `repl`, `catalog`, `vendor`): the URL is printed on stderr
    /// and ptc receives the redirect on the upstream's loopback `redirect_uri`.
    Terminal,
}

impl StartSettings {
    /// The start options these settings make, everything else at its default.
    pub fn options(self) -> StartOptions {
        let consent: Option<Arc<dyn Consent>> = match self.consent {
            ConsentAt::Nobody => None,
            ConsentAt::Terminal => Some(Arc::new(LoopbackConsent::new(
                |upstream, url| {
                    eprintln!(
                        "upstream `{upstream}` needs your consent: open this URL in a browser \
                         (ptc waits for it to come back)\n  {url}"
                    );
                },
                crate::program::limits::CONSENT_WAIT,
            ))),
        };
        StartOptions {
            writes: self.writes,
            response_check: self.response_check,
            strict_responses: self.strict_responses,
            consent,
            ..StartOptions::default()
        }
    }
}

/// Why the upstreams could not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartError {
    /// The upstream at fault, when one is.
    pub upstream: Option<String>,
    /// What went wrong (redacted).
    pub message: String,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.upstream {
            Some(u) => write!(f, "upstream `{u}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for StartError {}

/// One upstream's live transport.
enum Link {
    OpenApi(Box<OpenApiUpstream>),
    Mcp(Box<McpLink>),
}

/// A call that passed validation: what [`Upstreams::execute`] runs.
pub(crate) struct Prepared<'a> {
    pub(crate) server: usize,
    pub(crate) tool: &'a ToolEntry,
    pub(crate) args: Map<String, Value>,
}

/// A successful call with what the records need.
pub(crate) struct Executed {
    pub(crate) output: ToolOutput,
    pub(crate) bytes: u64,
}

/// A deployment's upstreams at run time: the catalog plus one live transport per upstream.
///
/// Built once from a [`ptc_plan::Plan`] (generated at compile time or loaded at start-up) and
/// shared (`Arc`) by every program run and every typed call.
pub struct Upstreams {
    plan: ptc_plan::Plan,
    secrets: ptc_plan::Secrets,
    redactor: Redactor,
    catalog: Catalog,
    links: Vec<Link>,
    /// Serialises first-use catalog loads per upstream.
    loading: Vec<Mutex<()>>,
    patterns: Patterns,
    /// The deployment's approval webhook, when it names one.
    webhook: Option<Webhook>,
    /// Response checking and what drifted.
    drift: crate::call::response_check::DriftWatch,
    /// Tokens exchanged for callers (per-caller credentials).
    exchanges: Arc<crate::credentials::per_caller::Exchanges>,
    /// Who is asked when an upstream needs a person's OAuth consent.
    consent: Option<Arc<dyn Consent>>,
    /// The start of each caller's last text answer per tool, for `doc`.
    samples: crate::call::samples::Samples,
}

impl Upstreams {
    /// Starts the upstreams of `plan`: builds one pooled HTTP client per OpenAPI upstream and
    /// connects MCP upstreams (listing their tools now or on first use, per `options`).
    /// Literal credential values come from `secrets`; each is registered with the redactor.
    pub async fn start(
        plan: ptc_plan::Plan,
        secrets: ptc_plan::Secrets,
        options: StartOptions,
    ) -> Result<Upstreams, StartError> {
        let redactor = options.redactor.unwrap_or_default();
        for c in &plan.credentials {
            if matches!(c.source, ptc_plan::CredentialSource::Literal)
                && let Ok(secret) = crate::credentials::binding::resolve(c, &secrets)
            {
                crate::credentials::binding::register(&redactor, &secret);
            }
        }
        let exchanges = Arc::new(crate::credentials::per_caller::Exchanges::default());
        let mut servers = Vec::with_capacity(plan.upstreams.len());
        let mut links = Vec::with_capacity(plan.upstreams.len());
        for up in &plan.upstreams {
            let fail = |message: String| StartError {
                upstream: Some(up.name.clone()),
                message: redactor.redact(&message).into_owned(),
            };
            match &up.transport {
                ptc_plan::Transport::Openapi(api) => {
                    let link = OpenApiUpstream::new(&up.name, api).map_err(fail)?;
                    let entry = ServerEntry::new(
                        &up.name,
                        &up.description,
                        ptc_plan::TransportKind::Openapi,
                        api.definitions.clone(),
                    );
                    entry.set_tools(catalog::openapi_tools(
                        &up.name,
                        link.tools(),
                        options.writes,
                    ));
                    servers.push(entry);
                    links.push(Link::OpenApi(Box::new(link)));
                }
                other => {
                    if let ptc_plan::Transport::McpStdio(p) = other
                        && p.sandbox.is_none()
                    {
                        tracing::warn!(upstream = %up.name, "{}", p.isolation());
                    }
                    let shared = crate::catalog::mcp_link::Shared {
                        grants: options.grants.clone(),
                        exchanges: exchanges.clone(),
                    };
                    let Some(link) =
                        McpLink::new(&up.name, other, options.writes, &plan.credentials, shared)
                    else {
                        return Err(fail(format!("unsupported transport {}", other.tag())));
                    };
                    let entry = ServerEntry::new(
                        &up.name,
                        &up.description,
                        other.kind(),
                        Default::default(),
                    );
                    if let Some(pinned) = link.pinned_entries() {
                        entry.set_tools(pinned);
                    }
                    servers.push(entry);
                    links.push(Link::Mcp(Box::new(link)));
                }
            }
        }
        let webhook = match &plan.approval_webhook {
            Some(w) => Some(Webhook::new(w).map_err(|message| StartError {
                upstream: None,
                message,
            })?),
            None => None,
        };
        let upstreams = Upstreams {
            webhook,
            drift: crate::call::response_check::DriftWatch::new(
                options.response_check,
                options.strict_responses,
            ),
            exchanges,
            consent: options.consent.clone(),
            loading: links.iter().map(|_| Mutex::new(())).collect(),
            plan,
            secrets,
            redactor,
            catalog: Catalog { servers },
            links,
            patterns: Patterns::default(),
            samples: Default::default(),
        };
        if options.catalog == CatalogLoad::AtStart {
            for i in 0..upstreams.links.len() {
                match upstreams.load(i).await {
                    Ok(_) => {}
                    // An upstream called as the caller may not be listable for nobody (no
                    // person to consent, no caller's token to exchange): it is listed on the
                    // first call made for someone it serves.
                    Err(e) if upstreams.called_as_the_caller(i) => tracing::warn!(
                        upstream = %upstreams.catalog.servers[i].name,
                        error = %e.message,
                        "not listed at start: it is called as the caller; listed on first use"
                    ),
                    Err(e) => {
                        let name = &upstreams.catalog.servers[i].name;
                        // The error names the upstream already; the start error says it once.
                        let message = match e.message.strip_prefix(&format!("upstream `{name}`: "))
                        {
                            Some(rest) => rest.to_string(),
                            None => e.message,
                        };
                        return Err(StartError {
                            upstream: Some(name.clone()),
                            message,
                        });
                    }
                }
            }
        }
        Ok(upstreams)
    }

    /// The plan these upstreams were built from.
    pub fn plan(&self) -> &ptc_plan::Plan {
        &self.plan
    }

    /// The samples of callers' last text answers (see [`crate::call::samples`]).
    pub fn samples(&self) -> &crate::call::samples::Samples {
        &self.samples
    }

    /// The redactor every secret is registered with.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The catalog (tools of upstreams not loaded yet are absent).
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The validator's compiled patterns.
    pub fn patterns(&self) -> &Patterns {
        &self.patterns
    }

    /// Makes sure upstream `i`'s catalog entry is up to date: an MCP upstream's tools listed,
    /// or its pins compared with the current listing.
    pub(crate) async fn load(&self, i: usize) -> Result<&ServerEntry, ToolError> {
        self.load_for(i, &CallOptions::default()).await
    }

    /// [`Upstreams::load`] for the caller (and who consents) of `options`: an upstream called
    /// as the caller is listed through the caller's own session.
    pub(crate) async fn load_for(
        &self,
        i: usize,
        options: &CallOptions,
    ) -> Result<&ServerEntry, ToolError> {
        let entry = &self.catalog.servers[i];
        let Link::Mcp(link) = &self.links[i] else {
            return Ok(entry);
        };
        if link.is_current(entry) {
            return Ok(entry);
        }
        let _guard = self.loading[i].lock().await;
        if !link.is_current(entry) {
            link.load(entry, &self.env_of(options))
                .await
                .map_err(|e| self.redact_error(e))?;
        }
        Ok(entry)
    }

    /// The stdio upstreams the config runs with the host's own rights (`"sandbox": false`).
    pub fn unisolated(&self) -> Vec<&str> {
        self.catalog
            .servers
            .iter()
            .zip(&self.links)
            .filter(|(_, l)| matches!(l, Link::Mcp(m) if m.unisolated()))
            .map(|(s, _)| s.name.as_str())
            .collect()
    }

    /// The pin events of every pinned MCP upstream, by upstream name.
    pub fn pin_counts(&self) -> Vec<(&str, &crate::catalog::pin_check::PinCounts)> {
        self.catalog
            .servers
            .iter()
            .zip(&self.links)
            .filter_map(|(s, l)| match l {
                Link::Mcp(m) => m.pin_counts().map(|c| (s.name.as_str(), c)),
                Link::OpenApi(_) => None,
            })
            .collect()
    }

    /// Whether upstream `i` is called as the caller (a session per caller).
    fn called_as_the_caller(&self, i: usize) -> bool {
        matches!(&self.links[i], Link::Mcp(m) if m.caller_session_counts().is_some())
    }

    /// Opens `caller`'s session with MCP upstream `server` (asking for their consent if it
    /// needs one, through the process's consent) and lists its tools: what `ptc login` does.
    /// The number of tools listed.
    pub async fn sign_in(
        &self,
        server: &str,
        caller: Arc<crate::credentials::identity::Caller>,
    ) -> Result<usize, ToolError> {
        let i = self.catalog.index_of(server)?;
        let Link::Mcp(link) = &self.links[i] else {
            return Err(ToolError {
                reason: Reason::InvalidArgs,
                message: format!("upstream `{server}` is not an MCP upstream"),
            });
        };
        let options = CallOptions {
            caller: Some(caller),
            ..CallOptions::default()
        };
        link.sign_in(&self.env_of(&options))
            .await
            .map_err(|e| self.redact_error(e))
    }

    /// The sessions of every MCP upstream called as the caller, by upstream name.
    pub fn caller_sessions(&self) -> Vec<(&str, &crate::catalog::caller_sessions::SessionCounts)> {
        self.catalog
            .servers
            .iter()
            .zip(&self.links)
            .filter_map(|(s, l)| match l {
                Link::Mcp(m) => m.caller_session_counts().map(|c| (s.name.as_str(), c)),
                Link::OpenApi(_) => None,
            })
            .collect()
    }

    /// Response checking, and the drift seen so far.
    pub fn drift(&self) -> &crate::call::response_check::DriftWatch {
        &self.drift
    }

    /// Upstream `server`, its tools loaded (for the caller of `options`).
    pub(crate) async fn server(
        &self,
        server: &str,
        options: &CallOptions,
    ) -> Result<(usize, &ServerEntry), ToolError> {
        let i = self.catalog.index_of(server)?;
        Ok((i, self.load_for(i, options).await?))
    }

    /// Resolves the tool and validates/coerces `args`: every programmer fault is found here,
    /// before any budget is spent or any request is made.
    pub(crate) async fn prepare(
        &self,
        server: &str,
        tool: &str,
        args: Map<String, Value>,
        options: &CallOptions,
    ) -> Result<Prepared<'_>, ToolError> {
        let (i, entry) = self.server(server, options).await?;
        let t = entry.tool(tool)?;
        if let Some(refused) = t.pin.as_ref().and_then(|p| p.refusal(&t.qualified())) {
            return Err(refused);
        }
        if let Some(why) = &t.disabled {
            return Err(ToolError {
                reason: Reason::WriteDisabled,
                message: format!("{}: not called: it is {why}", t.qualified()),
            });
        }
        let args = check_args(entry.schema(t), &self.patterns, args).map_err(|problems| {
            let call = t.qualified();
            ToolError {
                reason: Reason::InvalidArgs,
                message: self
                    .redactor
                    .redact(&invalid_args_message(&call, entry.schema(t), t, &problems))
                    .into_owned(),
            }
        })?;
        Ok(Prepared {
            server: i,
            tool: t,
            args,
        })
    }

    /// Runs a prepared call within its [`ResponseCap`]: the tool's, narrowed to `budget_left`
    /// (a program's remaining byte budget).
    pub(crate) async fn execute(
        &self,
        call: Prepared<'_>,
        options: CallOptions,
        budget_left: Option<u64>,
    ) -> Result<Executed, ToolError> {
        let cap = ResponseCap::of(call.tool.max_response_bytes, budget_left);
        let env = self.env_of(&options);
        let result = match &self.links[call.server] {
            Link::OpenApi(api) => api
                .call(
                    &env,
                    call.tool.index,
                    call.args,
                    options.deadline,
                    options.idempotency_key,
                    cap,
                )
                .await
                .map(|f| Executed {
                    output: f.output,
                    bytes: f.bytes,
                }),
            Link::Mcp(link) => link
                .call(&env, call.tool, call.args, options.deadline)
                .await
                .and_then(|output| {
                    let bytes = match &output {
                        ToolOutput::Json(b) => b.len() as u64,
                        ToolOutput::Text(t) => t.len() as u64,
                        ToolOutput::Empty => 0,
                    };
                    // The client caps a result at the upstream's limit; the program's byte
                    // budget is checked here, once the size is known.
                    if bytes > cap.bytes {
                        Err(ToolError {
                            reason: Reason::ResponseTooLarge,
                            message: format!("{}: {}", call.tool.qualified(), cap.exceeded()),
                        })
                    } else {
                        Ok(Executed { output, bytes })
                    }
                }),
        };
        match result {
            Ok(mut done) => {
                done.output = self.redact_output(done.output);
                Ok(done)
            }
            Err(e) => Err(self.redact_error(e)),
        }
    }

    /// What a person is asked when `call` needs approval: the tool, the request it makes and
    /// its arguments, every secret redacted.
    pub(crate) fn approval_request(&self, call: &Prepared<'_>) -> ApprovalRequest {
        let tool = call.tool;
        let preview = match &self.links[call.server] {
            Link::OpenApi(api) => api.preview(tool.index, &call.args),
            Link::Mcp(_) => format!(
                "MCP tools/call `{}` on upstream `{}`",
                tool.name, tool.server
            ),
        };
        let args = Value::Object(call.args.clone()).to_string();
        let args = self.redactor.redact(&args);
        ApprovalRequest {
            tool: tool.qualified(),
            effect: tool.classified.effect,
            summary: self
                .redactor
                .redact(crate::catalog::discovery::summary(&tool.description))
                .into_owned(),
            preview: self.redactor.redact(&preview).into_owned(),
            // A secret cut out of a JSON string leaves valid JSON; if it ever did not, the text
            // (redacted) is shown instead.
            arguments: serde_json::from_str(&args)
                .unwrap_or_else(|_| Value::String(args.into_owned())),
        }
    }

    /// Whether the deployment names an approval webhook (which then approves every call that
    /// needs a person, instead of the MCP client).
    pub fn has_approval_webhook(&self) -> bool {
        self.webhook.is_some()
    }

    /// Asks the deployment's approval webhook about `request`, waiting at most `wait`.
    pub async fn ask_approval_webhook(
        &self,
        request: &ApprovalRequest,
        wait: Duration,
    ) -> Decision {
        match &self.webhook {
            Some(w) => w.ask(&self.call_env(), request, wait).await,
            None => Decision::Unavailable("this deployment names no approval webhook".into()),
        }
    }

    /// [`Self::call_env_for`] the caller of `options`, asking its consent (else the process's).
    fn env_of<'a>(&'a self, options: &'a CallOptions) -> CallEnv<'a> {
        let mut env = self.call_env_for(options.caller.as_deref());
        if options.consent.is_some() {
            env.consent = options.consent.as_ref();
        }
        env
    }

    /// Where calls read credentials from, and the redactor they register them with.
    fn call_env(&self) -> CallEnv<'_> {
        self.call_env_for(None)
    }

    /// [`Self::call_env`] for a call made for `caller`.
    fn call_env_for<'a>(
        &'a self,
        caller: Option<&'a crate::credentials::identity::Caller>,
    ) -> CallEnv<'a> {
        CallEnv {
            credentials: &self.plan.credentials,
            secrets: &self.secrets,
            redactor: &self.redactor,
            caller,
            exchanges: &self.exchanges,
            consent: self.consent.as_ref(),
        }
    }

    /// Token exchanges for per-caller credentials.
    pub fn exchanges(&self) -> &crate::credentials::per_caller::Exchanges {
        &self.exchanges
    }

    fn redact_output(&self, output: ToolOutput) -> ToolOutput {
        if self.redactor.is_empty() {
            return output;
        }
        match output {
            ToolOutput::Json(bytes) => match self.redactor.redact_bytes(&bytes) {
                std::borrow::Cow::Borrowed(_) => ToolOutput::Json(bytes),
                std::borrow::Cow::Owned(b) => ToolOutput::Json(b),
            },
            ToolOutput::Text(t) => ToolOutput::Text(self.redactor.redact(&t).into_owned()),
            ToolOutput::Empty => ToolOutput::Empty,
        }
    }

    pub(crate) fn redact_error(&self, e: ToolError) -> ToolError {
        ToolError {
            reason: e.reason,
            message: self.redactor.redact(&e.message).into_owned(),
        }
    }

    /// Runs one tool call: validates and coerces `args` against the tool's input schema, applies
    /// default args, sends the request and maps the outcome.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Map<String, Value>,
        options: CallOptions,
    ) -> Result<ToolOutput, ToolError> {
        let prepared = self.prepare(server, tool, args, &options).await?;
        self.execute(prepared, options, None)
            .await
            .map(|done| done.output)
    }

    /// Runs a generated operation with the default call options.
    pub async fn run<O: Operation>(&self, args: O) -> Result<O::Response, ToolError> {
        self.run_with(args, CallOptions::default()).await
    }

    /// Runs a generated operation with `options`.
    pub async fn run_with<O: Operation>(
        &self,
        args: O,
        options: CallOptions,
    ) -> Result<O::Response, ToolError> {
        let (server, tool) = O::TOOL.split_once('/').unwrap_or(("", O::TOOL));
        self.call_typed(server, tool, &args, options).await
    }

    /// The typed path by name: encodes `args`, runs [`Upstreams::call`], decodes the result with
    /// serde. [`Upstreams::run`] is this for a generated [`Operation`].
    pub async fn call_typed<A: Serialize, R: DeserializeOwned>(
        &self,
        server: &str,
        tool: &str,
        args: &A,
        options: CallOptions,
    ) -> Result<R, ToolError> {
        let args = encode_args(server, tool, args)?;
        let output = self.call(server, tool, args, options).await?;
        decode_typed(server, tool, output, self.result_path(server, tool))
    }

    /// The result path of `server/tool`, when it has one.
    fn result_path(&self, server: &str, tool: &str) -> Option<&ptc_plan::ValuePath> {
        let entry = self
            .catalog
            .server(server)
            .and_then(|s| s.tool(tool))
            .ok()?;
        entry.projection.result_path.as_ref()
    }

    /// Stops every upstream (kills MCP child processes).
    pub async fn shutdown(&self) {
        for link in &self.links {
            if let Link::Mcp(m) = link {
                m.shutdown().await;
            }
        }
    }
}

/// The `invalid_args` message: the call, every problem, and the fix (a call with the required
/// arguments filled in).
pub(crate) fn invalid_args_message(
    call: &str,
    schema: crate::call::validate::Schema<'_>,
    tool: &ToolEntry,
    problems: &[String],
) -> String {
    let mut msg = format!("{call}: invalid arguments: {}", problems.join("; "));
    msg.push_str(&format!(
        ". Fix the args map, e.g. {}; (doc '{call}) lists every argument",
        crate::catalog::discovery::example_call(schema, tool)
    ));
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encoded_args_leave_out_none_and_keep_every_other_value() {
        #[derive(Serialize)]
        struct Args {
            org_id: String,
            limit: Option<i64>,
            cursor: Option<String>,
            flags: Vec<Option<bool>>,
        }
        let args = Args {
            org_id: "acme".into(),
            limit: Some(0),
            cursor: None,
            flags: vec![None, Some(false)],
        };
        let map = encode_args("obs", "list", &args).expect("an object");
        // Only a top-level `None` is an argument not given; a null inside a value is data.
        assert_eq!(
            Value::Object(map),
            json!({"org_id": "acme", "limit": 0, "flags": [null, false]})
        );
    }

    #[test]
    fn encoded_args_must_be_an_object() {
        let e = encode_args("obs", "list", &vec![1, 2]).expect_err("not an object");
        assert_eq!(e.reason, Reason::InvalidArgs);
        assert_eq!(
            e.to_string(),
            "invalid_args: obs/list: arguments must be a JSON object, got [1,2]"
        );
    }
}
