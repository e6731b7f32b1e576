//! Flags shared by both binaries' subcommands.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ptc_core::call::response_check::ResponseCheck;
use ptc_core::program::limits;
use ptc_core::server::{EvalLimits, HttpOptions, LogFormat};

/// Evaluation limits (defaults are safe for a shared server; each default is written once, in
/// `ptc_core::program::limits`).
#[derive(clap::Args, Clone, Debug)]
pub struct LimitArgs {
    /// Wall-clock limit of one program, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = limits::millis(limits::PROGRAM_TIMEOUT))]
    pub timeout_ms: u64,
    /// Memory one program may hold at once, in bytes (what it frees is given back).
    #[arg(long, value_name = "BYTES", default_value_t = limits::MEMORY_BYTES)]
    pub memory_bytes: u64,
    /// Memory all programs in flight may hold together; past it requests wait in the queue
    /// [default: memory-bytes × max-concurrent, at most half the machine's memory].
    #[arg(long, value_name = "BYTES")]
    pub memory_budget_bytes: Option<u64>,
    /// Programs in flight at once across all clients (computing, or waiting on upstreams, which
    /// holds no thread); past it requests wait in the queue.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_CONCURRENT)]
    pub max_concurrent: usize,
    /// Programs in flight at once in one MCP session; past it the session's requests wait.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_PER_SESSION)]
    pub max_per_session: usize,
    /// Requests that may wait for their turn (in the server's queue, and in each session's);
    /// one more gets `busy`.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_QUEUE)]
    pub max_queue: usize,
    /// How long a request waits for its turn before `busy`, in milliseconds [default: the
    /// program timeout].
    #[arg(long, value_name = "MS")]
    pub queue_wait_ms: Option<u64>,
    /// Threads programs compute on [default: the number of cores].
    #[arg(long, value_name = "N")]
    pub eval_threads: Option<usize>,
    /// Upstream calls per program.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_CALLS)]
    pub max_calls: u64,
    /// Bytes a program may fetch from upstreams, all its calls together.
    #[arg(long, value_name = "BYTES", default_value_t = limits::MAX_UPSTREAM_BYTES)]
    pub max_upstream_bytes: u64,
    /// Bytes of program text a client may send.
    #[arg(long, value_name = "BYTES", default_value_t = limits::MAX_PROGRAM_BYTES)]
    pub max_program_bytes: usize,
    /// Bytes of `context` (as JSON) a request may carry.
    #[arg(long, value_name = "BYTES", default_value_t = limits::MAX_CONTEXT_BYTES)]
    pub max_context_bytes: usize,
    /// Bytes of result text in a reply (beyond it, a truncation marker).
    #[arg(long, value_name = "BYTES", default_value_t = limits::MAX_OUTPUT_BYTES)]
    pub max_output_bytes: usize,
    /// How long a person has to approve one write, in milliseconds (the program's timeout
    /// bounds it too: raise --timeout-ms for programs that wait for approval).
    #[arg(long, value_name = "MS", default_value_t = limits::millis(limits::APPROVAL_WAIT))]
    pub approval_timeout_ms: u64,
}

impl LimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> EvalLimits {
        let mut l = EvalLimits {
            program_timeout: Duration::from_millis(self.timeout_ms),
            memory_bytes: self.memory_bytes,
            memory_budget_bytes: self.memory_budget_bytes.unwrap_or_else(|| {
                ptc_core::server::options::default_memory_budget(
                    self.memory_bytes,
                    self.max_concurrent,
                )
            }),
            max_concurrent: self.max_concurrent,
            max_per_session: self.max_per_session,
            max_queue: self.max_queue,
            queue_wait: Duration::from_millis(self.queue_wait_ms.unwrap_or(self.timeout_ms)),
            max_calls: self.max_calls,
            max_upstream_bytes: self.max_upstream_bytes,
            max_program_bytes: self.max_program_bytes,
            max_context_bytes: self.max_context_bytes,
            max_output_bytes: self.max_output_bytes,
            approval_timeout: Duration::from_millis(self.approval_timeout_ms),
            ..EvalLimits::default()
        };
        if let Some(n) = self.eval_threads {
            l.eval_threads = n;
        }
        l
    }
}

/// Operator overrides applied at start-up, under the same rules as the config.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OverrideArgs {
    /// Point upstream NAME at URL (staging vs production); https unless the upstream's config
    /// opts in to http. Repeatable; env PTC_UPSTREAM_URL takes a comma-separated list.
    #[arg(
        long = "upstream-url",
        value_name = "NAME=URL",
        env = "PTC_UPSTREAM_URL",
        value_delimiter = ','
    )]
    pub upstream_urls: Vec<String>,
    /// Read credential NAME from file PATH (a `file` credential). Repeatable; env
    /// PTC_CREDENTIAL_FILE takes a comma-separated list.
    #[arg(
        long = "credential-file",
        value_name = "NAME=PATH",
        env = "PTC_CREDENTIAL_FILE",
        value_delimiter = ','
    )]
    pub credential_files: Vec<String>,
    /// Let allow-listed writes run (the process's write gate; env PTC_ALLOW_WRITES=1 too). Off
    /// by default: every write is listed as disabled and answers `write_disabled`.
    #[arg(long)]
    pub allow_writes: bool,
    /// Check answers against their tools' output schemas: `sampled` (the first items of every
    /// list), `full` or `off`. Drift is counted per tool and field (`/ready`, the audit line).
    #[arg(long, value_name = "MODE", default_value = "sampled", value_parser = ResponseCheck::parse)]
    pub response_check: ResponseCheck,
    /// A drifted answer fails its call with `response_drift` (else the program gets it, and the
    /// drift is counted).
    #[arg(long)]
    pub strict_responses: bool,
}

impl OverrideArgs {
    /// How these flags start the upstreams, as a recording notes it (a replay starts them the
    /// same way).
    pub fn start_settings(&self) -> Result<ptc_core::call::upstreams::StartSettings, String> {
        Ok(ptc_core::call::upstreams::StartSettings {
            writes: ptc_core::WriteGate::from_flag_and_env(self.allow_writes)?,
            response_check: self.response_check,
            strict_responses: self.strict_responses,
            consent: Default::default(),
        })
    }

    /// [`OverrideArgs::start_settings`] of a command run at a terminal (`eval`, `repl`,
    /// `catalog`): an upstream that needs a person's OAuth consent asks the person there.
    pub fn terminal_start_settings(
        &self,
    ) -> Result<ptc_core::call::upstreams::StartSettings, String> {
        Ok(ptc_core::call::upstreams::StartSettings {
            consent: ptc_core::call::upstreams::ConsentAt::Terminal,
            ..self.start_settings()?
        })
    }
}

/// Log output.
#[derive(clap::Args, Clone, Debug)]
pub struct LogArgs {
    /// `text` or `json` (one object per line, on stderr; filter with RUST_LOG).
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

impl LogArgs {
    /// The chosen format.
    pub fn format(&self) -> LogFormat {
        if self.log_format == "json" {
            LogFormat::Json
        } else {
            LogFormat::Text
        }
    }
}

/// Traces (see docs/operations.md, "Traces").
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TraceArgs {
    /// Export traces to the OpenTelemetry collector at URL, its OTLP/HTTP base
    /// (`http://collector:4318`; spans go to URL/v1/traces). Without it the OTEL_EXPORTER_OTLP_*
    /// variables say; with neither, no traces.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

impl TraceArgs {
    /// The traces this process exports, named `service` unless OTEL_SERVICE_NAME says; `None`
    /// when traces are off.
    pub fn config(
        &self,
        service: &str,
    ) -> Result<Option<ptc_core::telemetry::TraceConfig>, String> {
        ptc_core::telemetry::TraceConfig::from_env(self.otlp_endpoint.as_deref(), service)
    }
}

/// Streamable HTTP flags.
#[derive(clap::Args, Clone, Debug)]
pub struct HttpArgs {
    /// Serve Streamable HTTP at ADDR (IP:PORT, or localhost:PORT for 127.0.0.1; path /mcp)
    /// instead of stdio.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:7332",
        value_parser = listen_addr
    )]
    pub http: Option<SocketAddr>,
    /// File holding the bearer token clients must send (required off loopback).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Browser origin allowed to call (scheme://host:port); repeatable. Others get 403.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// Host header value accepted besides loopback names (the DNS name clients use); repeatable.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// Largest request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = limits::HTTP_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Time until a response starts, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = limits::millis(limits::HTTP_REQUEST_TIMEOUT))]
    pub request_timeout_ms: u64,
    /// No MCP sessions: any replica can answer any request (see docs/operations.md).
    #[arg(long)]
    pub stateless: bool,
    /// Start every session id with NAME- so a load balancer can route a session's requests to
    /// the replica holding it (ASCII letters, digits, `_`; see docs/operations.md).
    #[arg(long, value_name = "NAME")]
    pub replica_id: Option<String>,
    /// File holding the token of `POST /admin/refresh` (catalog refresh; a different token from
    /// the clients'). Without it (or PTC_ADMIN_TOKEN) there is no admin endpoint.
    #[arg(long, value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    #[command(flatten)]
    pub oauth: OAuthArgs,
}

/// OAuth: callers present bearer JWTs from an authorization server (see docs/security.md).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OAuthArgs {
    /// Accept bearer JWTs issued by this authorization server (its issuer URL; https, or http
    /// on loopback). Repeatable; env PTC_OAUTH_ISSUER takes a comma-separated list.
    #[arg(
        long = "oauth-issuer",
        value_name = "URL",
        env = "PTC_OAUTH_ISSUER",
        value_delimiter = ','
    )]
    pub issuers: Vec<String>,
    /// This server's URL as clients reach it (`https://ptc.example.com/mcp`): tokens must be
    /// issued for it (`aud`).
    #[arg(
        long = "oauth-audience",
        value_name = "URL",
        env = "PTC_OAUTH_AUDIENCE"
    )]
    pub audience: Option<String>,
    /// A scope every token must grant; repeatable.
    #[arg(long = "oauth-scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// The token claim that lists the caller's groups (matched by the policy's `groups`).
    #[arg(
        long = "oauth-groups-claim",
        value_name = "CLAIM",
        default_value = "groups"
    )]
    pub groups_claim: String,
    /// Signature algorithm accepted; repeatable [default: RS256, PS256, ES256, EdDSA].
    #[arg(long = "oauth-algorithm", value_name = "ALG")]
    pub algorithms: Vec<String>,
}

impl OAuthArgs {
    /// The OAuth options, or `None` without an issuer.
    pub fn options(
        &self,
    ) -> Result<Option<ptc_core::credentials::identity::oauth::OAuthOptions>, String> {
        if self.issuers.is_empty() {
            if self.audience.is_some() {
                return Err("--oauth-audience needs --oauth-issuer".into());
            }
            return Ok(None);
        }
        let audience = self.audience.clone().ok_or(
            "--oauth-issuer needs --oauth-audience URL: the URL clients reach this server at, \
             which tokens must name as their audience",
        )?;
        let mut o = ptc_core::credentials::identity::oauth::OAuthOptions::new(
            self.issuers.clone(),
            audience,
        );
        o.required_scopes = self.scopes.clone();
        o.groups_claim = self.groups_claim.clone();
        if !self.algorithms.is_empty() {
            o.algorithms = self
                .algorithms
                .iter()
                .map(|a| {
                    a.parse()
                        .map_err(|_| format!("--oauth-algorithm: unknown algorithm `{a}`"))
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(Some(o))
    }
}

impl HttpArgs {
    /// The HTTP options, the token read from --token-file or PTC_HTTP_TOKEN.
    pub fn options(&self, addr: SocketAddr) -> Result<HttpOptions, String> {
        let token = token_from(self.token_file.as_deref(), "PTC_HTTP_TOKEN")?;
        let admin_token = token_from(self.admin_token_file.as_deref(), "PTC_ADMIN_TOKEN")?;
        Ok(HttpOptions {
            addr,
            token,
            allowed_origins: self.allowed_origins.clone(),
            allowed_hosts: self.allowed_hosts.clone(),
            max_body_bytes: self.max_body_bytes,
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            stateless: self.stateless,
            replica_id: self.replica_id.clone(),
            admin_token,
            oauth: self.oauth.options()?,
            ..HttpOptions::default()
        })
    }
}

/// A listening address: `IP:PORT`, or `localhost:PORT`, which is 127.0.0.1. The name is loopback
/// by definition (RFC 6761), so it is not looked up: no hosts file can make the host listen
/// elsewhere under it.
fn listen_addr(value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse() {
        return Ok(addr);
    }
    match value.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => port
            .parse::<u16>()
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
            .map_err(|_| format!("`{port}` is not a port (0 to 65535)")),
        _ => Err(format!(
            "`{value}` is not IP:PORT or localhost:PORT (e.g. 127.0.0.1:7332, [::1]:7332, \
             localhost:7332)"
        )),
    }
}

/// A token from its file (trimmed), else from the environment variable `var` (when set).
fn token_from(file: Option<&std::path::Path>, var: &str) -> Result<Option<String>, String> {
    match file {
        Some(p) => std::fs::read_to_string(p)
            .map(|t| Some(t.trim().to_string()))
            .map_err(|e| format!("cannot read the token file {}: {e}", p.display())),
        None => Ok(std::env::var(var).ok().filter(|t| !t.is_empty())),
    }
}

/// `serve`: MCP over stdio (default) or Streamable HTTP.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub http: HttpArgs,
    /// Policy file: what each caller may reach (tools, writes, limits; see docs/security.md).
    /// Without it every caller may call every tool.
    #[arg(long, value_name = "FILE", env = "PTC_POLICY")]
    pub policy: Option<PathBuf>,
    #[command(flatten)]
    pub sessions: SessionArgs,
    #[command(flatten)]
    pub record: RecordArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub overrides: OverrideArgs,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub traces: TraceArgs,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

/// Prometheus metrics (see docs/operations.md, "Metrics").
#[derive(clap::Args, Clone, Debug, Default)]
pub struct MetricsArgs {
    /// Serve /metrics on a listener of its own at ADDR, and not on the --http one; with stdio
    /// serving, the only HTTP listener. Unauthenticated (like /ready): bind it where only the
    /// scraper reaches.
    #[arg(long, value_name = "ADDR", value_parser = listen_addr)]
    pub metrics_listen: Option<SocketAddr>,
}

/// Recording evaluations for `replay` (see docs/operations.md, "Record and replay").
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RecordArgs {
    /// Write one run file per evaluation into DIR (created when missing): the program, its
    /// context, every upstream call's arguments and result (capped, redacted) and the answer,
    /// for `replay`. Files are named `<unix ms>-<program hash>.json`.
    #[arg(long, value_name = "DIR", env = "PTC_RECORD_DIR")]
    pub record_dir: Option<PathBuf>,
}

impl RecordArgs {
    /// Where run files go, or `None` when not recording; the directory is created now, so a
    /// path that cannot be one fails the start.
    pub fn record_dir(
        &self,
        start: ptc_core::call::upstreams::StartSettings,
    ) -> Result<Option<ptc_core::program::record_replay::RecordDir>, String> {
        let Some(dir) = &self.record_dir else {
            return Ok(None);
        };
        ptc_core::program::record_replay::RecordDir::new(dir.clone(), start).map(Some)
    }
}

/// Sessions: definitions kept between `lisp_eval` calls (see docs/operations.md).
#[derive(clap::Args, Clone, Debug)]
pub struct SessionArgs {
    /// Keep each session's definitions (def, defn) for its later programs. Off by default:
    /// every program starts from nothing.
    #[arg(long)]
    pub sessions: bool,
    /// Where sessions live: `memory` (this process), or a Redis URL (redis://host:6379/0) that
    /// several replicas share.
    #[arg(
        long,
        value_name = "STORE",
        env = "PTC_SESSION_STORE",
        default_value = "memory",
        requires = "sessions"
    )]
    pub session_store: String,
    /// How long an unused session is kept, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = limits::SESSION_TTL.as_secs(),
        requires = "sessions"
    )]
    pub session_ttl_secs: u64,
    /// Largest state a session keeps, in bytes (past it the session keeps what it had).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = limits::SESSION_MAX_BYTES,
        requires = "sessions"
    )]
    pub session_max_bytes: usize,
    /// Keep the OAuth grants of MCP upstreams called as the caller in the session store (a
    /// Redis that replicas share, so a person consents once for all of them), each sealed with
    /// AES-256-GCM under the 32-byte key in FILE (`openssl rand 32 > FILE`). Without it grants
    /// stay in each process's memory.
    #[arg(
        long,
        value_name = "FILE",
        env = "PTC_GRANT_KEY_FILE",
        requires = "sessions"
    )]
    pub grant_key_file: Option<PathBuf>,
}

/// Where OAuth grants are kept: sealed in `store` with the key in `key_file` when both are given
/// (and the store is shared), in memory when neither is.
fn grants_in(
    store: Option<std::sync::Arc<dyn ptc_core::server::state::StateStore>>,
    key_file: Option<&std::path::Path>,
) -> Result<std::sync::Arc<ptc_core::credentials::upstream_oauth::Grants>, String> {
    use ptc_core::credentials::upstream_oauth::Grants;
    let shared = store.filter(|s| s.describe() != "memory");
    let (store, path) = match (shared, key_file) {
        (_, None) => return Ok(std::sync::Arc::new(Grants::in_memory())),
        (None, Some(_)) => {
            return Err(
                "--grant-key-file seals grants kept in a shared session store: give \
                        --session-store redis://... too (in memory, grants need no key)"
                    .into(),
            );
        }
        (Some(store), Some(path)) => (store, path),
    };
    let key = std::fs::read(path)
        .map_err(|e| format!("--grant-key-file: cannot read {}: {e}", path.display()))?;
    let store = std::sync::Arc::new(ptc_core::server::state::grants::StoredGrants(store));
    Grants::sealed(store, &key)
        .map(std::sync::Arc::new)
        .map_err(|e| format!("--grant-key-file {}: {e}", path.display()))
}

impl SessionArgs {
    /// Where OAuth grants are kept: sealed in `sessions`' store when a key file is given (and
    /// the store is shared), else in memory.
    pub fn grants(
        &self,
        sessions: Option<&ptc_core::server::session_run::SessionOptions>,
    ) -> Result<std::sync::Arc<ptc_core::credentials::upstream_oauth::Grants>, String> {
        grants_in(
            sessions.map(|s| s.store.clone()),
            self.grant_key_file.as_deref(),
        )
    }

    /// The session options, or `None` when sessions are off.
    pub fn options(&self) -> Result<Option<ptc_core::server::session_run::SessionOptions>, String> {
        if !self.sessions {
            return Ok(None);
        }
        if self.session_ttl_secs == 0 {
            return Err("--session-ttl-secs must be at least 1".into());
        }
        if self.session_max_bytes == 0 {
            return Err("--session-max-bytes must be at least 1".into());
        }
        let store = ptc_core::server::state::open(&self.session_store)
            .map_err(|e| format!("--session-store: {e}"))?;
        let mut o = ptc_core::server::session_run::SessionOptions::new(store);
        o.ttl = Duration::from_secs(self.session_ttl_secs);
        o.max_bytes = self.session_max_bytes;
        Ok(Some(o))
    }
}

/// `repl`: an interactive PTC-Lisp session against the upstreams.
#[derive(clap::Args, Clone, Debug)]
pub struct ReplArgs {
    /// History file [default: ~/.ptc_history].
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

/// `catalog`: the upstreams and tools a program can call.
#[derive(clap::Args, Clone, Debug)]
pub struct CatalogArgs {
    /// Print every tool as JSON (name, description, schemas, annotations) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print the `lisp_eval` tool description clients see.
    #[arg(long, conflicts_with = "json")]
    pub tool_description: bool,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

/// `login`: consent, at the terminal, to an upstream calling as you, and keep the grant where a
/// host finds it.
#[derive(clap::Args, Clone, Debug)]
pub struct LoginArgs {
    /// The upstream: an `mcp_http` upstream whose `oauth` grant is `authorization_code`.
    pub upstream: String,
    /// Whose grant it is: the subject a host knows the caller by (their token's `sub`).
    #[arg(long, value_name = "SUBJECT", default_value = "local")]
    pub caller: String,
    /// Where to keep the grant: the shared session store of the hosts that will use it
    /// (`redis://host:6379/0`), or `memory` (this process only: a trial of the consent).
    #[arg(
        long,
        value_name = "STORE",
        env = "PTC_SESSION_STORE",
        default_value = "memory"
    )]
    pub session_store: String,
    /// The hosts' grant key (`serve --grant-key-file`), which seals the grant in the store.
    #[arg(long, value_name = "FILE", env = "PTC_GRANT_KEY_FILE")]
    pub grant_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

impl LoginArgs {
    /// Where the grant goes, and how that reads in a message.
    pub fn grants(
        &self,
    ) -> Result<
        (
            std::sync::Arc<ptc_core::credentials::upstream_oauth::Grants>,
            String,
        ),
        String,
    > {
        let store = ptc_core::server::state::open(&self.session_store)
            .map_err(|e| format!("--session-store: {e}"))?;
        let shown = store.describe();
        if shown != "memory" && self.grant_key_file.is_none() {
            return Err(format!(
                "--grant-key-file is needed to keep a grant in {shown}: the hosts' key seals it"
            ));
        }
        let grants = grants_in(Some(store), self.grant_key_file.as_deref())?;
        let kept = match shown.as_str() {
            "memory" => "this process's memory only (give --session-store and --grant-key-file \
                         to keep it for the hosts)"
                .to_string(),
            _ => format!("{shown}, sealed with the grant key"),
        };
        Ok((grants, kept))
    }
}

/// `eval`: run one program against the upstreams, in this process and for this process only.
#[derive(clap::Args, Clone, Debug)]
pub struct EvalArgs {
    /// Program text.
    #[arg(short = 'e', long = "expr", conflicts_with = "file")]
    pub expr: Option<String>,
    /// Program file (`-` reads standard input).
    pub file: Option<PathBuf>,
    /// A JSON object whose keys the program reads as `data/<key>` (decoded as it is read).
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    /// Print the result as JSON instead of Clojure syntax; what the program prints then goes to
    /// stderr, so stdout is one JSON value.
    #[arg(long)]
    pub json: bool,
    /// Print the run's upstream calls and payload metrics as one JSON line on stderr.
    #[arg(long)]
    pub metrics: bool,
    #[command(flatten)]
    pub traces: TraceArgs,
    /// Write the run to FILE for `replay`: the program, its context, every upstream call's
    /// arguments and result (capped, redacted) and the answer.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    #[command(flatten)]
    pub limits: EvalLimitArgs,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

/// The limits of one program run by `eval`. Only what bounds a single run: nothing is shared
/// with other evaluations, so the server's concurrency and memory-budget flags have no meaning
/// here, and the whole result is printed (the caller asked for it).
#[derive(clap::Args, Clone, Debug)]
pub struct EvalLimitArgs {
    /// Wall-clock limit of the program, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = limits::millis(limits::PROGRAM_TIMEOUT))]
    pub timeout_ms: u64,
    /// Memory the program (and its `--context`) may hold at once, in bytes [default: 1 GiB, the
    /// interpreter's own; one local run needs no room left for others].
    #[arg(long, value_name = "BYTES")]
    pub memory_bytes: Option<u64>,
    /// Upstream calls the program may make.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_CALLS)]
    pub max_calls: u64,
}

impl EvalLimitArgs {
    /// The interpreter limits these flags describe.
    pub fn lisp_limits(&self) -> ptc_lisp::Limits {
        let mut l = ptc_lisp::Limits {
            timeout: Some(Duration::from_millis(self.timeout_ms)),
            ..ptc_lisp::Limits::default()
        };
        if let Some(m) = self.memory_bytes {
            l.max_memory_bytes = m;
        }
        l
    }

    /// The upstream budgets these flags describe.
    pub fn budgets(&self) -> ptc_core::Budgets {
        ptc_core::Budgets {
            max_calls: self.max_calls,
            ..ptc_core::Budgets::default()
        }
    }
}

/// `replay`: run a recorded program again against its recorded results, with no upstream
/// contacted.
#[derive(clap::Args, Clone, Debug)]
pub struct ReplayArgs {
    /// The run file (`eval --record FILE`, `serve --record-dir DIR`).
    pub file: PathBuf,
    /// Print the result as JSON, as `eval --json` does (what the program prints then goes to
    /// stderr).
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        limits: LimitArgs,
    }

    /// With no flags the host runs with the limits table's defaults, and each flag reaches the
    /// limit it names (a flag read into the wrong field, or not at all, fails here).
    #[test]
    fn each_limit_flag_reaches_its_limit_and_defaults_to_the_table() {
        let none = Serve::parse_from(["serve"]).limits.limits();
        assert_eq!(format!("{none:?}"), format!("{:?}", EvalLimits::default()));
        let set = Serve::parse_from([
            "serve",
            "--timeout-ms=1001",
            "--memory-bytes=1002",
            "--memory-budget-bytes=1003",
            "--max-concurrent=1004",
            "--max-per-session=1005",
            "--max-queue=1006",
            "--queue-wait-ms=1007",
            "--eval-threads=1008",
            "--max-calls=1009",
            "--max-upstream-bytes=1010",
            "--max-program-bytes=1011",
            "--max-context-bytes=1012",
            "--max-output-bytes=1013",
            "--approval-timeout-ms=1014",
        ])
        .limits
        .limits();
        let ms = Duration::from_millis;
        assert_eq!(set.program_timeout, ms(1001));
        assert_eq!(set.memory_bytes, 1002);
        assert_eq!(set.memory_budget_bytes, 1003);
        assert_eq!(set.max_concurrent, 1004);
        assert_eq!(set.max_per_session, 1005);
        assert_eq!(set.max_queue, 1006);
        assert_eq!(set.queue_wait, ms(1007));
        assert_eq!(set.eval_threads, 1008);
        assert_eq!(set.max_calls, 1009);
        assert_eq!(set.max_upstream_bytes, 1010);
        assert_eq!(set.max_program_bytes, 1011);
        assert_eq!(set.max_context_bytes, 1012);
        assert_eq!(set.max_output_bytes, 1013);
        assert_eq!(set.approval_timeout, ms(1014));
        let budgets = set.budgets();
        assert_eq!((budgets.max_calls, budgets.max_bytes), (1009, 1010));
    }

    #[derive(Parser)]
    struct Http {
        #[command(flatten)]
        http: HttpArgs,
    }

    #[derive(Parser)]
    struct Eval {
        #[command(flatten)]
        limits: EvalLimitArgs,
    }

    /// Each HTTP flag reaches the option it names; with none, the options are the host's
    /// defaults (the limits table's).
    #[test]
    fn each_http_flag_reaches_its_option() {
        let dir = std::env::temp_dir().join(format!("ptc-args-http-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (client, admin) = (dir.join("client.token"), dir.join("admin.token"));
        std::fs::write(&client, "client-token\n").unwrap();
        std::fs::write(&admin, "admin-token").unwrap();
        let path = |p: &std::path::Path| p.display().to_string();
        let args = Http::parse_from([
            "serve".to_string(),
            format!("--token-file={}", path(&client)),
            "--allowed-origin=https://app.example:8443".into(),
            "--allowed-host=ptc.example".into(),
            "--max-body-bytes=77".into(),
            "--request-timeout-ms=88".into(),
            "--stateless".into(),
            "--replica-id=r1".into(),
            format!("--admin-token-file={}", path(&admin)),
            "--oauth-issuer=https://issuer.example".into(),
            "--oauth-audience=https://ptc.example/mcp".into(),
        ]);
        let at: SocketAddr = "127.0.0.9:9".parse().unwrap();
        let o = args.http.options(at).unwrap();
        assert_eq!(o.addr, at);
        assert_eq!(o.token.as_deref(), Some("client-token"));
        assert_eq!(o.allowed_origins, ["https://app.example:8443"]);
        assert_eq!(o.allowed_hosts, ["ptc.example"]);
        assert_eq!(o.max_body_bytes, 77);
        assert_eq!(o.request_timeout, Duration::from_millis(88));
        assert!(o.stateless);
        assert_eq!(o.replica_id.as_deref(), Some("r1"));
        assert_eq!(o.admin_token.as_deref(), Some("admin-token"));
        assert!(o.oauth.is_some());
        let none = Http::parse_from(["serve"]).http.options(at).unwrap();
        let d = HttpOptions::default();
        assert_eq!(
            (none.max_body_bytes, none.request_timeout, none.stateless),
            (d.max_body_bytes, d.request_timeout, d.stateless)
        );
        assert!(none.oauth.is_none() && none.replica_id.is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_eval_limit_flag_reaches_its_limit_and_defaults_to_the_table() {
        let set = Eval::parse_from([
            "eval",
            "--timeout-ms=1001",
            "--memory-bytes=1002",
            "--max-calls=1003",
        ])
        .limits;
        let lisp = set.lisp_limits();
        assert_eq!(lisp.timeout, Some(Duration::from_millis(1001)));
        assert_eq!(lisp.max_memory_bytes, 1002);
        assert_eq!(set.budgets().max_calls, 1003);
        let none = Eval::parse_from(["eval"]).limits;
        assert_eq!(none.lisp_limits().timeout, Some(limits::PROGRAM_TIMEOUT));
        assert_eq!(
            none.lisp_limits().max_memory_bytes,
            ptc_lisp::Limits::default().max_memory_bytes
        );
        assert_eq!(none.budgets(), ptc_core::Budgets::default());
    }

    #[test]
    fn the_queue_wait_follows_the_program_timeout_unless_set() {
        let l = Serve::parse_from(["serve", "--timeout-ms=2500"])
            .limits
            .limits();
        assert_eq!(l.queue_wait, Duration::from_millis(2500));
    }

    #[test]
    fn a_listening_address_is_an_ip_and_port_or_localhost_and_port() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(listen_addr("127.0.0.2:7332"), Ok(addr("127.0.0.2:7332")));
        assert_eq!(listen_addr("[::1]:7332"), Ok(addr("[::1]:7332")));
        assert_eq!(listen_addr("0.0.0.0:0"), Ok(addr("0.0.0.0:0")));
        assert_eq!(listen_addr("localhost:7332"), Ok(addr("127.0.0.1:7332")));
        assert_eq!(listen_addr("LocalHost:65535"), Ok(addr("127.0.0.1:65535")));
        assert_eq!(
            listen_addr("localhost:65536"),
            Err("`65536` is not a port (0 to 65535)".into())
        );
        assert_eq!(
            listen_addr("localhost:"),
            Err("`` is not a port (0 to 65535)".into())
        );
        for refused in [
            "localhost",
            "localhost.evil.example:7332",
            "ptc.example.com:7332",
            "127.0.0.1",
            "",
        ] {
            assert_eq!(
                listen_addr(refused),
                Err(format!(
                    "`{refused}` is not IP:PORT or localhost:PORT (e.g. 127.0.0.1:7332, \
                     [::1]:7332, localhost:7332)"
                )),
            );
        }
    }
}
