//! What a tool call comes back with, whichever transport ran it: the result contract's
//! [`Reason`]s, the [`ToolError`] a failed call carries and the [`ToolOutput`] of a successful
//! one. Every other module of the crate builds on these; this one builds on nothing of the crate.

use std::fmt;

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
    /// The upstream needs a person's OAuth consent and nobody could be asked (the message
    /// holds the URL to open).
    AuthRequired,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 429 (the message carries Retry-After).
    RateLimited,
    /// A pinned MCP tool changed on the server since it was vendored, and the pin policy
    /// refuses it until the change is reviewed.
    ToolChanged,
    /// A write (or safe query) this process does not run: the config does not allow-list it,
    /// or the write gate is closed. Nothing was sent.
    WriteDisabled,
    /// The person asked to approve the call said no, or did not answer in time. Nothing was
    /// sent.
    ApprovalDeclined,
    /// The call needs a person's approval and nobody could be asked (a client without
    /// elicitation, no approval channel). Nothing was sent.
    ApprovalUnavailable,
    /// The same write earlier in this run has an unknown outcome (`mutation_state:
    /// indeterminate`), so it is not sent again.
    WriteIndeterminate,
    /// The call's deadline passed.
    Timeout,
    /// The body exceeded the response cap.
    ResponseTooLarge,
    /// The answer does not match the tool's output schema and the process checks strictly.
    ResponseDrift,
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
    pub const ALL: [Reason; 20] = [
        Reason::UpstreamUnavailable,
        Reason::UpstreamError,
        Reason::ToolError,
        Reason::AuthFailed,
        Reason::AuthRequired,
        Reason::Forbidden,
        Reason::NotFound,
        Reason::RateLimited,
        Reason::ToolChanged,
        Reason::WriteDisabled,
        Reason::ApprovalDeclined,
        Reason::ApprovalUnavailable,
        Reason::WriteIndeterminate,
        Reason::Timeout,
        Reason::ResponseTooLarge,
        Reason::ResponseDrift,
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
            Reason::AuthRequired => "auth_required",
            Reason::Forbidden => "forbidden",
            Reason::NotFound => "not_found",
            Reason::RateLimited => "rate_limited",
            Reason::ToolChanged => "tool_changed",
            Reason::WriteDisabled => "write_disabled",
            Reason::ApprovalDeclined => "approval_declined",
            Reason::ApprovalUnavailable => "approval_unavailable",
            Reason::WriteIndeterminate => "write_indeterminate",
            Reason::Timeout => "timeout",
            Reason::ResponseTooLarge => "response_too_large",
            Reason::ResponseDrift => "response_drift",
            Reason::CapExhausted => "cap_exhausted",
            Reason::UnknownServer => "unknown_server",
            Reason::UnknownTool => "unknown_tool",
            Reason::InvalidArgs => "invalid_args",
        }
    }

    /// The reason called `name` (its [`Reason::as_str`]).
    pub fn from_name(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == name)
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

/// As its contract name: how run files keep it.
impl serde::Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(deserializer)?;
        Reason::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown reason `{name}`")))
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

/// The most bytes one answer may hold: its tool's `max_response_bytes`, narrowed to what a
/// program's byte budget has left when that is less. The one rule an answer is read under,
/// whichever transport reads it, and the one message of an answer past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseCap {
    /// The bytes an answer may hold.
    pub bytes: u64,
    /// The program's budget, not the tool's own cap, is the smaller limit: an answer past it is
    /// the budget spent, not a tool answering too much.
    pub budget_binds: bool,
}

impl ResponseCap {
    /// The cap of a tool with `max_response_bytes`, in a program with `budget_left` bytes left
    /// (`None`: no budget, as for a typed call).
    pub fn of(max_response_bytes: u64, budget_left: Option<u64>) -> Self {
        match budget_left {
            Some(left) if left < max_response_bytes => ResponseCap {
                bytes: left,
                budget_binds: true,
            },
            _ => ResponseCap {
                bytes: max_response_bytes,
                budget_binds: false,
            },
        }
    }

    /// Why an answer past this cap was refused.
    pub fn exceeded(&self) -> String {
        if self.budget_binds {
            format!(
                "the response is larger than the {} bytes the program's budget has left",
                self.bytes
            )
        } else {
            response_too_large(self.bytes)
        }
    }
}

/// Why an answer larger than a `max_response_bytes` of `limit` bytes was refused: the one
/// message every transport gives.
pub fn response_too_large(limit: u64) -> String {
    format!(
        "the response is larger than the {limit}-byte cap (max_response_bytes); ask for less \
         (filters, a smaller limit, a summary mode)"
    )
}

/// What a successful call produced, before anyone decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolOutput {
    /// A JSON document (OpenAPI 2xx body, MCP `structuredContent` or JSON text), as bytes, so the
    /// Lisp runtime decodes it with its own limits and typed code with serde.
    Json(Vec<u8>),
    /// Non-JSON text (MCP text content), every registered secret already masked.
    Text(String),
    /// No content (204, empty body, MCP result without content).
    Empty,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_capped_by_its_tool_or_by_the_smaller_budget() {
        let tool = ResponseCap::of(1000, None);
        assert_eq!((tool.bytes, tool.budget_binds), (1000, false));
        // A budget with exactly the tool's cap left does not bind: the tool's cap is reached first.
        let even = ResponseCap::of(1000, Some(1000));
        assert_eq!((even.bytes, even.budget_binds), (1000, false));
        let below = ResponseCap::of(1000, Some(999));
        assert_eq!((below.bytes, below.budget_binds), (999, true));
        assert_eq!(ResponseCap::of(1000, Some(1001)), even);
        assert_eq!(tool.exceeded(), response_too_large(1000));
        assert_eq!(
            below.exceeded(),
            "the response is larger than the 999 bytes the program's budget has left"
        );
        assert_eq!(
            response_too_large(4096),
            "the response is larger than the 4096-byte cap (max_response_bytes); ask for less \
             (filters, a smaller limit, a summary mode)"
        );
    }
}
