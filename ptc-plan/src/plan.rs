//! The validated plan: what every later stage consumes.
//!
//! A `Plan` is plain data (serde both ways) so the compile-time path (`ptc_upstreams!` emits it as
//! Rust) and the run-time path (`ptc serve` loads it directly) see the same thing. It never holds a
//! secret value: credentials appear as bindings (where to read the secret), literal values live in
//! [`crate::Secrets`], which cannot be serialised.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::effects::{Classified, WriteGrant};
pub use crate::pins::{PinPolicy, PinnedTool};
pub use crate::projection::{Pagination, ValuePath};
use crate::schema::SchemaError;

/// Everything a host needs to run a deployment's upstreams (`Default`: none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Named credential bindings, sorted by name.
    pub credentials: Vec<CredentialBinding>,
    /// Upstreams, sorted by name.
    pub upstreams: Vec<UpstreamPlan>,
    /// `approval_webhook`: where calls that need a person's approval are asked, instead of the
    /// MCP client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_webhook: Option<ApprovalWebhook>,
    /// Programs offered as tools, sorted by name, each checked against the upstreams above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<ProgramPlan>,
}

/// A PTC-Lisp program offered as a named tool: its text, checked at load against the upstreams'
/// tools, with what the check found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramPlan {
    /// Its tool name (kebab-case).
    pub name: String,
    /// What it answers.
    pub description: String,
    /// The file it was read from (messages name it with the line and column).
    pub file: String,
    /// The program text.
    pub source: String,
    /// JSON Schema of its arguments (an object schema); the program reads each as `data/<name>`.
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// JSON Schema of its result (`{}`: any value).
    #[serde(rename = "outputSchema")]
    pub output_schema: Value,
    /// Every tool it calls, `server/tool`, sorted.
    pub calls: Vec<String>,
    /// The calls that are not reads (writes and safe queries), each allowed by its upstream and
    /// declared by the program.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<String>,
    /// MCP tool annotations from what it calls.
    pub annotations: ProgramAnnotations,
}

/// A program's MCP tool annotations, from the effects of the tools it calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramAnnotations {
    /// It calls only reads.
    #[serde(rename = "readOnlyHint")]
    pub read_only_hint: bool,
    /// A write it calls may destroy or overwrite (false for reads only).
    #[serde(rename = "destructiveHint")]
    pub destructive_hint: bool,
    /// Calling it again with the same arguments changes nothing more.
    #[serde(rename = "idempotentHint")]
    pub idempotent_hint: bool,
}

/// The tool a call names `name` among `tools`: its exposed name, that name with `_` for `-`
/// (`list_traces`), or its original operation id. The one lookup rule, for the catalog's calls
/// and the check of declared programs alike.
pub fn find_tool<'t, T>(
    tools: &'t [T],
    name: &str,
    exposed: impl Fn(&T) -> &str,
    operation_id: impl Fn(&T) -> Option<&str>,
) -> Option<&'t T> {
    let kebab = name.replace('_', "-");
    tools
        .iter()
        .find(|t| exposed(t) == name)
        .or_else(|| tools.iter().find(|t| exposed(t) == kebab))
        .or_else(|| tools.iter().find(|t| operation_id(t) == Some(name)))
}

/// An HTTP endpoint that approves calls for a person (see docs/security.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalWebhook {
    /// Where approvals are POSTed.
    pub url: String,
    /// Its auth emitters, static headers and `http://` opt-ins (timeouts: the approval wait).
    pub http: HttpSettings,
}

impl Plan {
    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&UpstreamPlan> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// The credential binding called `name`.
    pub fn credential(&self, name: &str) -> Option<&CredentialBinding> {
        self.credentials.iter().find(|c| c.name == name)
    }

    /// The program called `name`.
    pub fn program(&self, name: &str) -> Option<&ProgramPlan> {
        self.programs.iter().find(|p| p.name == name)
    }
}

/// Where a secret is read from. Values are read per request by the runtime, never stored here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialBinding {
    /// Binding name referenced by `auth` emitters.
    pub name: String,
    /// Source of the secret.
    pub source: CredentialSource,
    /// What the secret is meant for; checked against the emitters that use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme_hint: Option<SchemeHint>,
}

/// Source of a secret value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum CredentialSource {
    /// An environment variable, read on each use.
    Env {
        /// Variable name.
        var: String,
    },
    /// A file, read on each use (so rotation needs no restart); trailing whitespace is trimmed.
    File {
        /// Absolute path (relative paths were resolved against the config's folder).
        path: String,
    },
    /// A value written in the config; held in [`crate::Secrets`], never in the plan.
    Literal,
    /// The first line a command prints, cached for `cache_ttl_ms` and fetched again after a
    /// 401. The command runs without a shell, with only the named environment variables.
    Exec(ExecSource),
    /// The caller's own access token, exchanged at the authorization server (RFC 8693) for a
    /// token meant for the upstream; cached per caller until it expires. The caller's token
    /// itself never reaches the upstream.
    CallerTokenExchange(TokenExchangeSource),
    /// A secret per caller: a file per subject, `*` for every other caller (none: callers not
    /// named get no credential).
    PerCaller {
        /// Subject (or `*`) → absolute file path, read on each use.
        files: BTreeMap<String, String>,
    },
}

impl CredentialSource {
    /// Whether the value depends on who calls (so only a call made for a caller can read it).
    pub fn is_per_caller(&self) -> bool {
        matches!(
            self,
            CredentialSource::CallerTokenExchange(_) | CredentialSource::PerCaller { .. }
        )
    }
}

/// An RFC 8693 token exchange (`"source": "caller_token_exchange"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenExchangeSource {
    /// The authorization server's token endpoint.
    pub token_endpoint: String,
    /// The upstream as the authorization server names it (`audience`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The upstream's URL (`resource`, RFC 8707).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The scopes asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The host's client id at the authorization server.
    pub client_id: String,
    /// The binding that holds the host's client secret.
    pub client_secret: String,
}

/// A credential command (`"source": "exec"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecSource {
    /// The program: an absolute path (relative paths were resolved against the config's
    /// folder); never looked up on `PATH`.
    pub command: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables passed through from the host's environment; nothing else is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// How long the command may run.
    pub timeout_ms: u64,
    /// How long its output is used before the command runs again (0: every use).
    pub cache_ttl_ms: u64,
}

impl ExecSource {
    /// Default `timeout_ms`.
    pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
    /// Largest `timeout_ms`.
    pub const MAX_TIMEOUT_MS: u64 = 60_000;
    /// Default `cache_ttl_ms`.
    pub const DEFAULT_CACHE_TTL_MS: u64 = 300_000;
    /// The most a command may print, in bytes.
    pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
}

/// What a credential is meant to be used as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemeHint {
    /// A bearer token.
    Bearer,
    /// `user:pass` or `{"user","pass"}`.
    Basic,
    /// A raw value for a custom header.
    Raw,
}

/// One configured upstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamPlan {
    /// Namespace the upstream's tools live in (`observatory` in `observatory/list-traces`).
    pub name: String,
    /// Operator description shown by `(tool/servers)`.
    #[serde(default)]
    pub description: String,
    /// How the upstream is reached.
    pub transport: Transport,
}

/// How an upstream is reached, with its transport-specific settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Transport {
    /// A read-only HTTPS JSON API described by OpenAPI; its tools are compiled here.
    Openapi(OpenApiPlan),
    /// An MCP server spawned as a child process speaking stdio; tools are listed at run time.
    McpStdio(McpStdioPlan),
    /// An MCP server over Streamable HTTP; tools are listed at run time.
    McpHttp(McpHttpPlan),
}

impl Transport {
    /// Which transport this is, without its settings.
    pub fn kind(&self) -> TransportKind {
        match self {
            Transport::Openapi(_) => TransportKind::Openapi,
            Transport::McpStdio(_) => TransportKind::McpStdio,
            Transport::McpHttp(_) => TransportKind::McpHttp,
        }
    }

    /// The transport tag as written in the config.
    pub fn tag(&self) -> &'static str {
        self.kind().as_str()
    }
}

/// Which transport an upstream speaks: what a runtime decides by once the settings are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// An HTTPS JSON API described by OpenAPI.
    Openapi,
    /// An MCP server spoken to over stdio.
    McpStdio,
    /// An MCP server spoken to over Streamable HTTP.
    McpHttp,
}

impl TransportKind {
    /// The transport tag as written in the config, e.g. `mcp_stdio`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Openapi => "openapi",
            TransportKind::McpStdio => "mcp_stdio",
            TransportKind::McpHttp => "mcp_http",
        }
    }
}

/// Settings shared by the HTTP-based transports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpSettings {
    /// Header emitters, applied in order.
    pub auth: Vec<AuthEmitter>,
    /// Non-secret headers sent on every request, names lowercased, sorted.
    pub static_headers: Vec<(String, String)>,
    /// `http://` allowed.
    pub allow_insecure_http: bool,
    /// Credentials may be sent over `http://`.
    pub allow_insecure_auth: bool,
    /// Whole-request timeout.
    pub request_timeout_ms: u64,
    /// Connect timeout.
    pub connect_timeout_ms: u64,
    /// Largest response body read before giving up with `response_too_large`.
    pub max_response_bytes: u64,
    /// Idle connections kept per host.
    pub pool_size: u32,
    /// Retry policy for idempotent requests that failed in transit or with 502/503/504.
    pub backoff: Backoff,
}

/// Retry policy: exponential backoff with full jitter between `initial_ms` and `max_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    /// Retries after the first attempt (0 = never retry).
    pub max_retries: u32,
    /// First delay.
    pub initial_ms: u64,
    /// Largest delay.
    pub max_ms: u64,
}

/// Turns a credential binding into a request header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "snake_case")]
pub enum AuthEmitter {
    /// `Authorization: Bearer <secret>`.
    Bearer {
        /// Credential binding name.
        binding: String,
    },
    /// `Authorization: Basic base64(user:pass)`.
    Basic {
        /// Credential binding name.
        binding: String,
    },
    /// `<header>: <secret>`.
    CustomHeader {
        /// Credential binding name.
        binding: String,
        /// Header name (an RFC 7230 token), as written.
        header: String,
    },
}

impl AuthEmitter {
    /// The binding this emitter reads.
    pub fn binding(&self) -> &str {
        match self {
            AuthEmitter::Bearer { binding }
            | AuthEmitter::Basic { binding }
            | AuthEmitter::CustomHeader { binding, .. } => binding,
        }
    }

    /// The header this emitter sets, lowercased.
    pub fn header(&self) -> String {
        match self {
            AuthEmitter::Bearer { .. } | AuthEmitter::Basic { .. } => "authorization".into(),
            AuthEmitter::CustomHeader { header, .. } => header.to_ascii_lowercase(),
        }
    }
}

/// Where an OpenAPI document comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaLocation {
    /// A local file (absolute path).
    File(String),
    /// An HTTPS URL, fetched once at start-up by the runtime.
    Url(String),
}

/// An OpenAPI upstream with its compiled tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenApiPlan {
    /// Origin (and optional path prefix) every request goes to.
    pub base_url: String,
    /// Where the document came from.
    pub schema: SchemaLocation,
    /// Cap on the document's size.
    pub schema_max_bytes: u64,
    /// Transport settings.
    pub http: HttpSettings,
    /// The included operations, compiled, in `include_operations` order.
    pub tools: Vec<ToolPlan>,
    /// `idempotency_header`: the request header a write's idempotency key goes in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_header: Option<String>,
    /// The component schemas the tools reach, each kept once under its name; tool schemas and
    /// definitions refer to them as `{"$ref": "#/$defs/<Name>"}` (see [`crate::schema`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub definitions: BTreeMap<String, Value>,
}

impl OpenApiPlan {
    /// The tool called `name` (its exposed, kebab-case name).
    pub fn tool(&self, name: &str) -> Option<&ToolPlan> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The schema in force at `schema` (a tool schema or a part of one): the definition a
    /// `$ref` names, with what is written beside the `$ref` laid over it. See
    /// [`crate::schema::resolve`].
    pub fn resolve<'a>(&'a self, schema: &'a Value) -> Result<Cow<'a, Value>, SchemaError> {
        crate::schema::resolve(schema, &self.definitions)
    }

    /// `schema` as a standalone JSON Schema, with the definitions it reaches under `$defs`.
    /// See [`crate::schema::bundle`].
    pub fn bundle(&self, schema: &Value) -> Result<Value, SchemaError> {
        crate::schema::bundle(schema, &self.definitions)
    }
}

/// An MCP server started as a child process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpStdioPlan {
    /// Program to run (absolute, or looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables, sorted by name.
    pub env: Vec<(String, String)>,
    /// Working directory (absolute), if set.
    pub cwd: Option<String>,
    /// Time allowed for the MCP initialize handshake.
    pub handshake_timeout_ms: u64,
    /// Time allowed for one tool call.
    pub request_timeout_ms: u64,
    /// Largest response accepted.
    pub max_response_bytes: u64,
    /// Which of its tools are exposed, and their pins.
    #[serde(default)]
    pub tools: McpTools,
    /// How the server is isolated (`sandbox`); `None` when the config opts out
    /// (`"sandbox": false`) and the server runs with the host's own rights.
    pub sandbox: Option<SandboxPlan>,
}

impl McpStdioPlan {
    /// How the server is isolated, in one line (`ptc check`, the start-up warning).
    pub fn isolation(&self) -> String {
        let Some(s) = &self.sandbox else {
            return "not isolated (\"sandbox\": false): it runs with the host's own rights".into();
        };
        let list = |paths: &[String], none: &str| {
            if paths.is_empty() {
                none.to_string()
            } else {
                paths.join(", ")
            }
        };
        let l = &s.limits;
        format!(
            "isolated: network {}; reads {}; writes {}; limits {} MiB memory, {} processes, {} open files, {} s CPU",
            if s.network { "the host's" } else { "none" },
            list(&s.read_paths, "its command and the system folders only"),
            list(&s.write_paths, "its temp folder only"),
            l.memory_mb,
            l.processes,
            l.open_files,
            l.cpu_seconds
        )
    }
}

/// The isolation of a stdio server: what it may read, write and reach, and its limits. The
/// system folders, its own command's installation and a private temp folder are always in its
/// view; nothing else of the host is, unless named here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPlan {
    /// `network`: the host's network (all or nothing); otherwise a network of its own with
    /// nothing on it.
    pub network: bool,
    /// `read_paths`: folders and files it may read (absolute).
    pub read_paths: Vec<String>,
    /// `write_paths`: folders it may write (absolute).
    pub write_paths: Vec<String>,
    /// What it must never see even inside a path it may read or write (absolute): the config
    /// file, the files credentials are read from, the other stdio upstreams' working folders.
    /// Filled by the loader.
    pub hidden: Vec<String>,
    /// Its resource limits.
    pub limits: SandboxLimits,
}

/// A sandboxed server's resource limits, per process it starts (`sandbox.*` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxLimits {
    /// `memory_mb`: its data segment (heap and private writable mappings), in MiB.
    pub memory_mb: u64,
    /// `processes`: processes and threads it may have at once.
    pub processes: u64,
    /// `open_files`: file descriptors each process may hold.
    pub open_files: u64,
    /// `cpu_seconds`: CPU time each process may use; a process past it is killed.
    pub cpu_seconds: u64,
}

/// The limits where the config names none: enough for a Node or Python server and its runtime's
/// threads, far below what a fork or memory bomb would take.
impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_mb: 1024,
            processes: 128,
            open_files: 1024,
            cpu_seconds: 3600,
        }
    }
}

/// An MCP server over Streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpHttpPlan {
    /// Endpoint URL.
    pub url: String,
    /// Time allowed for the MCP initialize handshake.
    pub handshake_timeout_ms: u64,
    /// Transport settings.
    pub http: HttpSettings,
    /// Which of its tools are exposed, and their pins.
    #[serde(default)]
    pub tools: McpTools,
    /// `oauth`: access tokens obtained with OAuth 2.1 as the MCP authorization spec says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<McpOAuthPlan>,
}

/// How an `mcp_http` upstream's access tokens are obtained: the MCP authorization spec (OAuth
/// 2.1). The authorization server is discovered from the upstream's `401` (protected resource
/// metadata, then the server's own metadata); nothing here names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpOAuthPlan {
    /// The grant tokens come from.
    pub grant: OAuthGrant,
    /// Who ptc is at the authorization server.
    pub client: OAuthClient,
    /// The scopes asked for (empty: the challenge's, else the resource's `scopes_supported`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Where the authorization server sends the person back (`authorization_code` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
}

impl McpOAuthPlan {
    /// How many times one call may ask for more scopes after a `403 insufficient_scope` before
    /// it fails.
    pub const MAX_STEP_UPS: u32 = 2;
    /// The client name sent with a dynamic registration when the config gives none.
    pub const DEFAULT_CLIENT_NAME: &'static str = "ptc";
}

/// An OAuth grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// A person consents in a browser; ptc receives the code on its redirect URI (PKCE, S256).
    AuthorizationCode,
    /// The deployment's own identity: a confidential client's id and secret.
    ClientCredentials,
}

/// Who ptc is at an authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OAuthClient {
    /// A client registered beforehand: its id and, for a confidential client, the binding that
    /// holds its secret.
    Registered {
        /// The client id.
        client_id: String,
        /// The credential binding of the client secret (`None`: a public client).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<String>,
    },
    /// A Client ID Metadata Document: its https URL is the client id (used where the server
    /// says it supports them, else dynamic registration).
    MetadataDocument {
        /// The document's URL.
        url: String,
        /// The name a dynamic registration gives when the server does not take the document.
        client_name: String,
    },
    /// Dynamic Client Registration (RFC 7591) at the server's registration endpoint.
    Dynamic {
        /// The name registered.
        client_name: String,
    },
}

/// Which tools of an MCP upstream are exposed, and what they were pinned to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpTools {
    /// `include_tools` as written: the tools to expose (`None`: every pinned tool, or every
    /// listed tool when nothing is pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// `pin_policy`: what a changed pinned tool does.
    #[serde(default)]
    pub policy: PinPolicy,
    /// The vendored pins of the exposed tools, sorted by name, when a tool list was vendored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Vec<PinnedTool>>,
    /// Vendored tools the config leaves out: reviewed, never exposed, and not news when the
    /// server lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// `allow_writes`: the tools that are not reads the operator allows, by tool name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub writes: BTreeMap<String, WriteGrant>,
}

/// One tool in the normalised catalog shape shared with MCP tool metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolPlan {
    /// Exposed, Lisp-facing name (kebab-case): `list-traces`.
    pub name: String,
    /// Description shown by discovery.
    pub description: String,
    /// JSON Schema of the arguments (an object of the path and query parameters). May refer to
    /// the upstream's [`OpenApiPlan::definitions`].
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// JSON Schema of a successful result (`{"type":"null"}` for empty responses). May refer to
    /// the upstream's [`OpenApiPlan::definitions`].
    #[serde(rename = "outputSchema")]
    pub output_schema: Value,
    /// MCP-style hints.
    pub annotations: Annotations,
    /// What calling it does to the world, and whether a person approves each call.
    #[serde(default, skip_serializing_if = "is_default")]
    pub classified: Classified,
    /// Provenance and execution hints; shown by `meta`, never sent upstream.
    #[serde(rename = "_ptc")]
    pub ptc: OperationBinding,
}

/// MCP tool annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    /// The tool does not change the world.
    #[serde(rename = "readOnlyHint")]
    pub read_only_hint: bool,
}

/// How a tool maps onto its OpenAPI operation, and how to execute it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationBinding {
    /// Always `"openapi"`.
    pub transport: String,
    /// The original operationId.
    #[serde(rename = "operationId")]
    pub operation_id: String,
    /// HTTP method (`GET` in v1).
    pub method: String,
    /// Path template relative to the base URL, e.g. `/api/traces/{id}`.
    pub path: String,
    /// Base URL for this operation when a same-origin operation-level server overrides the upstream's.
    #[serde(rename = "baseUrl", default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Parameters, path ones first, in declaration order.
    pub params: Vec<Param>,
    /// The JSON request body, taken from the `body` argument (write methods only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<RequestBody>,
    /// Arguments applied when the caller omits them.
    #[serde(rename = "defaultArgs")]
    pub default_args: Map<String, Value>,
    /// Effective per-request timeout.
    #[serde(rename = "requestTimeoutMs")]
    pub request_timeout_ms: u64,
    /// Effective connect timeout.
    #[serde(rename = "connectTimeoutMs")]
    pub connect_timeout_ms: u64,
    /// Effective response cap: the smallest of the upstream's, the override's and the schema's.
    #[serde(rename = "maxResponseBytes")]
    pub max_response_bytes: u64,
    /// `x-ptc-result-path` (or its override): what a call returns, selected from the response.
    /// The tool's `outputSchema` is already the selected value's.
    #[serde(
        rename = "resultPath",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub result_path: Option<ValuePath>,
    /// `x-ptc-pagination` (or its override): how `tool/pages` asks for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pagination: Option<Pagination>,
    /// `x-ptc-notes` and operator notes: agent guidance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    /// Schema constructs kept as metadata but not validated in v1 (`oneOf at /properties/x`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unvalidated: Vec<String>,
}

/// An operation's JSON request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestBody {
    /// The caller must give `body`.
    pub required: bool,
}

/// The argument a request body is given in.
pub const BODY_ARG: &str = "body";

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Where a parameter goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamLocation {
    /// Substituted into the path template, percent-encoded as one segment.
    Path,
    /// Appended to the query string.
    Query,
}

/// One request parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// Name on the wire.
    pub name: String,
    /// Where it goes.
    #[serde(rename = "in")]
    pub location: ParamLocation,
    /// The caller must supply it (after default args).
    pub required: bool,
    /// Array values are sent as repeated `name=v` pairs (form style, explode).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeated: bool,
}
