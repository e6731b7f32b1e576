//! The executor: the one interface through which every tool call runs, whichever way it is made.
//!
//! Two callers meet here: the PTC-Lisp host (`tool/call` in a program) and the typed functions
//! that `ptc_upstreams!` generates (`observatory::list_traces(&upstreams, args)`). Both hand the
//! executor a server, a tool and JSON arguments; argument validation, defaults, auth, caps,
//! timeouts, retries and status mapping all live behind [`Upstreams::call`], never in callers.

use std::fmt;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Why a call did not produce a value. The names are the result contract's `:reason` keywords.
///
/// World faults (the upstream, the network, the budget) come back to a Lisp program as
/// `{:ok false :reason ...}` data; programmer faults ([`Reason::is_programmer_fault`]) end the
/// program with a message naming the call and the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The upstream could not be reached: connect/TLS failure, 5xx after retries, crashed server.
    UpstreamUnavailable,
    /// The upstream answered with something unusable: malformed JSON, non-JSON 2xx, JSON-RPC
    /// error, a refused redirect, an unmapped status.
    UpstreamError,
    /// The upstream rejected the call: 400/422 problem detail, MCP `isError`.
    ToolError,
    /// 401, after one fresh credential read and retry; or the credential could not be read.
    AuthFailed,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 429 (the message carries Retry-After).
    RateLimited,
    /// The call's deadline passed.
    Timeout,
    /// The body exceeded the response cap.
    ResponseTooLarge,
    /// A per-program budget (calls, discovery operations, bytes) is spent.
    CapExhausted,
    /// Programmer fault: no upstream of that name.
    UnknownServer,
    /// Programmer fault: no tool of that name in the upstream.
    UnknownTool,
    /// Programmer fault: the arguments do not satisfy the tool's input schema.
    InvalidArgs,
}

impl Reason {
    /// Every reason, in documentation order.
    pub const ALL: [Reason; 13] = [
        Reason::UpstreamUnavailable,
        Reason::UpstreamError,
        Reason::ToolError,
        Reason::AuthFailed,
        Reason::Forbidden,
        Reason::NotFound,
        Reason::RateLimited,
        Reason::Timeout,
        Reason::ResponseTooLarge,
        Reason::CapExhausted,
        Reason::UnknownServer,
        Reason::UnknownTool,
        Reason::InvalidArgs,
    ];

    /// The contract name, e.g. `"auth_failed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::UpstreamUnavailable => "upstream_unavailable",
            Reason::UpstreamError => "upstream_error",
            Reason::ToolError => "tool_error",
            Reason::AuthFailed => "auth_failed",
            Reason::Forbidden => "forbidden",
            Reason::NotFound => "not_found",
            Reason::RateLimited => "rate_limited",
            Reason::Timeout => "timeout",
            Reason::ResponseTooLarge => "response_too_large",
            Reason::CapExhausted => "cap_exhausted",
            Reason::UnknownServer => "unknown_server",
            Reason::UnknownTool => "unknown_tool",
            Reason::InvalidArgs => "invalid_args",
        }
    }

    /// A mistake in the calling program rather than a fault of the world.
    pub fn is_programmer_fault(self) -> bool {
        matches!(
            self,
            Reason::UnknownServer | Reason::UnknownTool | Reason::InvalidArgs
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call. The message has already passed the redactor: it never holds a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    /// Why.
    pub reason: Reason,
    /// What happened, naming the upstream and tool, and the fix where there is one.
    pub message: String,
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for ToolError {}

/// What a successful call produced, before anyone decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolOutput {
    /// A JSON document (OpenAPI 2xx body, MCP `structuredContent` or JSON text), as bytes, so the
    /// Lisp runtime decodes it with its own limits and typed code with serde.
    Json(Vec<u8>),
    /// Non-JSON text (MCP text content).
    Text(String),
    /// No content (204, empty body, MCP result without content).
    Empty,
}

/// Per-call settings from the caller.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallOptions {
    /// The caller's deadline (a program's remaining time); the executor's own timeouts are capped
    /// by it.
    pub deadline: Option<Instant>,
}

/// Decodes a typed call's output: the typed path's half of the executor interface.
///
/// Empty output decodes as JSON `null` (so `()`/`Option` responses work); text is an
/// `upstream_error` because typed operations are JSON operations.
pub fn decode_typed<R: DeserializeOwned>(
    server: &str,
    tool: &str,
    output: ToolOutput,
) -> Result<R, ToolError> {
    let bytes: &[u8] = match &output {
        ToolOutput::Json(bytes) => bytes,
        ToolOutput::Empty => b"null",
        ToolOutput::Text(_) => {
            return Err(ToolError {
                reason: Reason::UpstreamError,
                message: format!("{server}/{tool} answered with text where JSON was expected"),
            });
        }
    };
    serde_json::from_slice(bytes).map_err(|e| ToolError {
        reason: Reason::UpstreamError,
        message: format!("{server}/{tool}: the response does not match its documented schema: {e}"),
    })
}

/// Encodes a typed call's arguments as the JSON object the executor takes.
pub fn encode_args<A: Serialize>(
    server: &str,
    tool: &str,
    args: &A,
) -> Result<Map<String, Value>, ToolError> {
    match serde_json::to_value(args) {
        Ok(Value::Object(map)) => Ok(map),
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

/// A deployment's upstreams at run time: the catalog plus one live transport per upstream.
///
/// Built once from a [`ptc_plan::Plan`] (generated at compile time or loaded at start-up) and
/// shared (`Arc`) by every program run and every typed call.
pub struct Upstreams {
    plan: ptc_plan::Plan,
}

impl Upstreams {
    /// The upstreams of `plan`. Literal credential values come from `secrets`.
    pub fn new(plan: ptc_plan::Plan, secrets: ptc_plan::Secrets) -> Self {
        let _ = secrets;
        Upstreams { plan }
    }

    /// The plan these upstreams were built from.
    pub fn plan(&self) -> &ptc_plan::Plan {
        &self.plan
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
        let _ = (args, options);
        Err(ToolError {
            reason: Reason::UpstreamUnavailable,
            message: format!("{server}/{tool}: the upstream runtime is not built yet"),
        })
    }

    /// The typed path: encodes `args`, runs [`Upstreams::call`], decodes the result with serde.
    /// What generated operation functions call.
    pub async fn call_typed<A: Serialize, R: DeserializeOwned>(
        &self,
        server: &str,
        tool: &str,
        args: &A,
        options: CallOptions,
    ) -> Result<R, ToolError> {
        let args = encode_args(server, tool, args)?;
        let output = self.call(server, tool, args, options).await?;
        decode_typed(server, tool, output)
    }
}
