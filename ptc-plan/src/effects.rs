//! What a tool does to the world, and what the operator allowed: the classification rules, in
//! one place for OpenAPI operations and MCP tools alike.
//!
//! A tool's effect comes from what the upstream says of itself (an OpenAPI operation's method, an
//! MCP tool's annotations), never from ptc's own config or `x-ptc-*` extensions: those can make an
//! effect stricter, never milder. A tool that changes the world is exposed only when the
//! operator allow-lists it (`allow_writes`); whether it may run at all is the process's write
//! gate, decided at run time.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What calling a tool does to the world.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Reads only (an OpenAPI `GET`/`HEAD`, an MCP tool annotated `readOnlyHint: true`).
    #[default]
    Read,
    /// A request in a write method that only queries (a search `POST`), as the operator
    /// declared it in `allow_writes`.
    SafeQuery,
    /// Changes the world.
    Write,
}

impl Effect {
    /// The config and contract name: `read`, `safe_query` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::SafeQuery => "safe_query",
            Effect::Write => "write",
        }
    }

    /// Only reads; needs neither the allow-list nor the write gate.
    pub fn is_read(self) -> bool {
        self == Effect::Read
    }
}

/// Whether a person approves each call before it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Calls run without asking.
    #[default]
    None,
    /// Every call waits for a person's yes.
    Always,
}

impl Approval {
    /// The config name: `none` or `always`.
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::None => "none",
            Approval::Always => "always",
        }
    }
}

/// One `allow_writes` entry: the operator's permission for a tool that is not a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteGrant {
    /// `write` (the default) or `safe_query`.
    pub effect: Effect,
    /// `always` by default for a write, `none` for a safe query.
    pub approval: Approval,
}

impl WriteGrant {
    /// The grant for `effect` with its default approval.
    pub fn with_default_approval(effect: Effect) -> Self {
        WriteGrant {
            effect,
            approval: if effect == Effect::Write {
                Approval::Always
            } else {
                Approval::None
            },
        }
    }
}

/// A tool's effect and approval once the allow-list has been applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classified {
    /// What it does.
    pub effect: Effect,
    /// Whether a person approves each call.
    pub approval: Approval,
}

/// Why a tool cannot be exposed as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It is not a read and `allow_writes` does not name it.
    NotAllowListed,
    /// `allow_writes` names a read: the config cannot change a tool's effect.
    ReadGranted,
    /// `safe_query` was granted to something other than a `POST`.
    SafeQueryNotPost,
}

/// The effect of an OpenAPI operation: its method says, and `x-ptc-read-only: false` may only
/// make a read stricter (`true` never makes a write a read).
pub fn openapi_effect(method: &str, read_only_extension: Option<bool>) -> Effect {
    let reads = matches!(method.to_ascii_uppercase().as_str(), "GET" | "HEAD");
    if reads && read_only_extension != Some(false) {
        Effect::Read
    } else {
        Effect::Write
    }
}

/// The effect of an MCP tool from its annotations: a read only when it says `readOnlyHint:
/// true`; anything else, unknown included, is a write.
pub fn mcp_effect(annotations: Option<&Value>) -> Effect {
    match annotations.and_then(|a| a.get("readOnlyHint")) {
        Some(Value::Bool(true)) => Effect::Read,
        _ => Effect::Write,
    }
}

/// Applies the operator's grant to a tool of effect `natural`. `post` says whether the tool is
/// an HTTP `POST` (MCP tools count as one: a tool call is a request, not a resource method).
pub fn classify(
    natural: Effect,
    grant: Option<&WriteGrant>,
    post: bool,
) -> Result<Classified, Refusal> {
    match (natural, grant) {
        (Effect::Read, None) => Ok(Classified::default()),
        (Effect::Read, Some(_)) => Err(Refusal::ReadGranted),
        (_, None) => Err(Refusal::NotAllowListed),
        (_, Some(g)) if g.effect == Effect::SafeQuery && !post => Err(Refusal::SafeQueryNotPost),
        (_, Some(g)) => Ok(Classified {
            effect: g.effect,
            approval: g.approval,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_as_the_config_writes_them() {
        let names = [Effect::Read, Effect::SafeQuery, Effect::Write].map(Effect::as_str);
        assert_eq!(names, ["read", "safe_query", "write"]);
        assert_eq!(
            [Approval::None, Approval::Always].map(Approval::as_str),
            ["none", "always"]
        );
        // The serde names are the same.
        assert_eq!(
            serde_json::to_value(Effect::SafeQuery).unwrap(),
            json!("safe_query")
        );
        assert_eq!(
            serde_json::to_value(Approval::Always).unwrap(),
            json!("always")
        );
    }

    #[test]
    fn openapi_methods() {
        assert_eq!(openapi_effect("GET", None), Effect::Read);
        assert_eq!(openapi_effect("get", Some(true)), Effect::Read);
        assert_eq!(openapi_effect("HEAD", None), Effect::Read);
        // The extension can only make a read stricter.
        assert_eq!(openapi_effect("GET", Some(false)), Effect::Write);
        for m in ["POST", "PUT", "PATCH", "DELETE", "post"] {
            assert_eq!(openapi_effect(m, None), Effect::Write, "{m}");
            assert_eq!(openapi_effect(m, Some(true)), Effect::Write, "{m}");
        }
    }

    #[test]
    fn mcp_annotations() {
        assert_eq!(
            mcp_effect(Some(&json!({"readOnlyHint": true}))),
            Effect::Read
        );
        assert_eq!(
            mcp_effect(Some(&json!({"readOnlyHint": false}))),
            Effect::Write
        );
        // Hints that do not say read-only, or say it in the wrong type, are writes.
        assert_eq!(
            mcp_effect(Some(
                &json!({"destructiveHint": false, "idempotentHint": true})
            )),
            Effect::Write
        );
        assert_eq!(
            mcp_effect(Some(&json!({"readOnlyHint": "true"}))),
            Effect::Write
        );
        assert_eq!(mcp_effect(Some(&json!({}))), Effect::Write);
        assert_eq!(mcp_effect(None), Effect::Write);
    }

    #[test]
    fn grants() {
        let write = WriteGrant::with_default_approval(Effect::Write);
        let query = WriteGrant::with_default_approval(Effect::SafeQuery);
        assert_eq!(write.approval, Approval::Always);
        assert_eq!(query.approval, Approval::None);
        assert_eq!(
            classify(Effect::Read, None, false),
            Ok(Classified {
                effect: Effect::Read,
                approval: Approval::None
            })
        );
        assert_eq!(
            classify(Effect::Read, Some(&write), true),
            Err(Refusal::ReadGranted)
        );
        assert_eq!(
            classify(Effect::Write, None, true),
            Err(Refusal::NotAllowListed)
        );
        assert_eq!(
            classify(Effect::Write, Some(&write), false),
            Ok(Classified {
                effect: Effect::Write,
                approval: Approval::Always
            })
        );
        assert_eq!(
            classify(Effect::Write, Some(&query), true),
            Ok(Classified {
                effect: Effect::SafeQuery,
                approval: Approval::None
            })
        );
        assert_eq!(
            classify(Effect::Write, Some(&query), false),
            Err(Refusal::SafeQueryNotPost)
        );
        let unapproved = WriteGrant {
            effect: Effect::Write,
            approval: Approval::None,
        };
        assert_eq!(
            classify(Effect::Write, Some(&unapproved), false).map(|c| c.approval),
            Ok(Approval::None)
        );
    }
}
