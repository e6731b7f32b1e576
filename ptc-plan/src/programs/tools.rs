//! The tools a declared program may call, as the plan has them: an OpenAPI upstream's compiled
//! operations and an MCP upstream's pinned tools, each with its input schema, paging and effect.

use serde_json::Value;

use crate::effects::{Classified, Effect, classify, mcp_effect};
use crate::plan::{Transport, UpstreamPlan};
use crate::validate::Schema;

/// One tool, as a program's call of it is checked.
pub(crate) struct Tool<'a> {
    pub name: &'a str,
    pub operation_id: Option<&'a str>,
    pub schema: Schema<'a>,
    pub paged: bool,
    /// Its effect once the upstream's allow-list is applied; `None`: a write the upstream does
    /// not allow, so it is not exposed.
    pub classified: Option<Classified>,
    /// A write that may destroy or overwrite (MCP's `destructiveHint`, default true; an HTTP
    /// `PUT`, `PATCH` or `DELETE`).
    pub destructive: bool,
    /// A write that changes nothing more when repeated (MCP's `idempotentHint`; an HTTP `PUT`
    /// or `DELETE`).
    pub idempotent: bool,
}

/// What the plan knows of an upstream's tools.
pub(crate) enum Listed<'a> {
    /// Its tools.
    Tools(Vec<Tool<'a>>),
    /// An MCP upstream whose tools were not vendored: listed only when it runs.
    Unpinned,
}

/// The tools of `up`.
pub(crate) fn tools_of(up: &UpstreamPlan) -> Listed<'_> {
    match &up.transport {
        Transport::Openapi(api) => Listed::Tools(
            api.tools
                .iter()
                .map(|t| {
                    let method = t.ptc.method.to_ascii_uppercase();
                    Tool {
                        name: &t.name,
                        operation_id: Some(&t.ptc.operation_id),
                        schema: Schema {
                            root: &t.input_schema,
                            definitions: Some(&api.definitions),
                        },
                        paged: t.ptc.pagination.is_some(),
                        classified: Some(t.classified),
                        destructive: matches!(method.as_str(), "PUT" | "PATCH" | "DELETE"),
                        idempotent: matches!(method.as_str(), "GET" | "HEAD" | "PUT" | "DELETE"),
                    }
                })
                .collect(),
        ),
        Transport::McpStdio(p) => mcp_tools(&p.tools),
        Transport::McpHttp(p) => mcp_tools(&p.tools),
    }
}

fn mcp_tools(tools: &crate::plan::McpTools) -> Listed<'_> {
    let Some(pinned) = &tools.pinned else {
        return Listed::Unpinned;
    };
    Listed::Tools(
        pinned
            .iter()
            .map(|t| {
                let hint = |k: &str| t.annotations.get(k).and_then(Value::as_bool);
                let natural = mcp_effect(Some(&Value::Object(t.annotations.clone())));
                Tool {
                    name: &t.name,
                    operation_id: None,
                    schema: Schema {
                        root: &t.input_schema,
                        definitions: None,
                    },
                    paged: false,
                    classified: classify(natural, tools.writes.get(&t.name), true).ok(),
                    destructive: hint("destructiveHint") != Some(false),
                    idempotent: hint("idempotentHint") == Some(true),
                }
            })
            .collect(),
    )
}

impl Tool<'_> {
    /// Only reads the world (a safe query included: it changes nothing).
    pub fn reads(&self) -> bool {
        self.classified.is_some_and(|c| c.effect != Effect::Write)
    }
}
