//! What changed for the included operations between two plans of one config (the vendored
//! documents against the live ones), and what the build will say about it.

use std::collections::BTreeMap;
use std::fmt;

use ptc_plan::pins::{PinChange, ToolList};
use ptc_plan::{Plan, ToolPlan, Transport};
use serde_json::Value;

use crate::idents::{pascal, snake};

/// How an included operation changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The operation's method changed.
    Method {
        /// Before.
        from: String,
        /// After.
        to: String,
    },
    /// The operation's path changed.
    Path {
        /// Before.
        from: String,
        /// After.
        to: String,
    },
    /// A parameter appeared.
    ParamAdded {
        /// Wire name.
        name: String,
        /// Whether the caller must give it.
        required: bool,
    },
    /// A parameter disappeared.
    ParamRemoved {
        /// Wire name.
        name: String,
    },
    /// An optional parameter became required.
    ParamRequired {
        /// Wire name.
        name: String,
    },
    /// A parameter's schema (type, enum, bounds) changed.
    ParamType {
        /// Wire name.
        name: String,
    },
    /// The success response's schema changed at these JSON pointers (first few).
    Response {
        /// Where the schemas differ.
        at: Vec<String>,
    },
}

/// One change of one included operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The upstream.
    pub upstream: String,
    /// The operationId.
    pub operation: String,
    /// The tool name.
    pub tool: String,
    /// What changed.
    pub change: Change,
}

impl Drift {
    /// What `cargo build` says (or does) once the changed document is vendored.
    pub fn build_message(&self) -> String {
        let args = format!("{}::{}Args", snake(&self.upstream), pascal(&self.tool));
        let response = format!("{}::{}Response", snake(&self.upstream), pascal(&self.tool));
        match &self.change {
            Change::Method { .. } | Change::Path { .. } => format!(
                "the generated call `{}::{}` sends the new request; no Rust code changes",
                snake(&self.upstream),
                snake(&self.tool)
            ),
            Change::ParamAdded {
                name,
                required: true,
            } => format!(
                "`{args}` gains the required field `{}`: code that builds it fails with E0063 (missing field `{}`) or E0061 (`new` takes one more argument)",
                snake(name),
                snake(name)
            ),
            Change::ParamAdded {
                name,
                required: false,
            } => format!(
                "`{args}` gains the optional field `{}`: struct literals without `..` fail with E0063",
                snake(name)
            ),
            Change::ParamRemoved { name } => format!(
                "`{args}` loses the field `{}`: code that sets it fails with E0560",
                snake(name)
            ),
            Change::ParamRequired { name } => format!(
                "`{args}.{}` is no longer an `Option` and `new` takes it: code that sets it fails with E0308, calls of `new` with E0061",
                snake(name)
            ),
            Change::ParamType { name } => format!(
                "the type of `{args}.{}` follows the new schema: code that sets it may fail with E0308",
                snake(name)
            ),
            Change::Response { .. } => format!(
                "`{response}` follows the new schema: code that reads a changed field fails with E0308 or E0609"
            ),
        }
    }
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "upstream '{}', operation '{}': ",
            self.upstream, self.operation
        )?;
        match &self.change {
            Change::Method { from, to } => write!(f, "method changed from {from} to {to}")?,
            Change::Path { from, to } => write!(f, "path changed from {from} to {to}")?,
            Change::ParamAdded { name, required } => write!(
                f,
                "{} parameter `{name}` added",
                if *required { "required" } else { "optional" }
            )?,
            Change::ParamRemoved { name } => write!(f, "parameter `{name}` removed")?,
            Change::ParamRequired { name } => write!(f, "parameter `{name}` is now required")?,
            Change::ParamType { name } => write!(f, "parameter `{name}` changed type")?,
            Change::Response { at } => write!(f, "response type changed at {}", at.join(", "))?,
        }
        write!(f, "\n  = build: {}", self.build_message())
    }
}

/// The changes of the included operations of every OpenAPI upstream present in both plans.
pub fn compare(before: &Plan, after: &Plan) -> Vec<Drift> {
    let mut out = Vec::new();
    for up in &before.upstreams {
        let (Transport::Openapi(old), Some(Transport::Openapi(new))) = (
            &up.transport,
            after.upstream(&up.name).map(|u| &u.transport),
        ) else {
            continue;
        };
        for tool in &old.tools {
            let Some(now) = new
                .tools
                .iter()
                .find(|t| t.ptc.operation_id == tool.ptc.operation_id)
            else {
                continue;
            };
            let (before, after) = (
                Bundled::new(tool, &old.definitions),
                Bundled::new(now, &new.definitions),
            );
            for change in operation_changes(tool, now, &before, &after) {
                out.push(Drift {
                    upstream: up.name.clone(),
                    operation: tool.ptc.operation_id.clone(),
                    tool: now.name.clone(),
                    change,
                });
            }
        }
    }
    out
}

/// A tool's schemas as standalone JSON Schemas (the definitions they reach included), so a change
/// inside a named definition shows up in every operation that uses it.
struct Bundled {
    output: Value,
    params: BTreeMap<String, Value>,
}

impl Bundled {
    fn new(tool: &ToolPlan, definitions: &BTreeMap<String, Value>) -> Self {
        let bundle =
            |s: &Value| ptc_plan::schema::bundle(s, definitions).unwrap_or_else(|_| s.clone());
        let params = tool
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), strip(Some(bundle(v)))))
            .collect();
        Bundled {
            output: strip(Some(bundle(&tool.output_schema))),
            params,
        }
    }
}

fn operation_changes(
    old: &ToolPlan,
    new: &ToolPlan,
    before: &Bundled,
    after: &Bundled,
) -> Vec<Change> {
    let mut out = Vec::new();
    if old.ptc.method != new.ptc.method {
        out.push(Change::Method {
            from: old.ptc.method.clone(),
            to: new.ptc.method.clone(),
        });
    }
    if old.ptc.path != new.ptc.path {
        out.push(Change::Path {
            from: old.ptc.path.clone(),
            to: new.ptc.path.clone(),
        });
    }
    let required = |t: &ToolPlan, name: &str| {
        t.input_schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(name)))
    };
    for p in &new.ptc.params {
        match old.ptc.params.iter().find(|o| o.name == p.name) {
            None => out.push(Change::ParamAdded {
                name: p.name.clone(),
                required: required(new, &p.name),
            }),
            Some(_) => {
                if required(new, &p.name) && !required(old, &p.name) {
                    out.push(Change::ParamRequired {
                        name: p.name.clone(),
                    });
                }
                if before.params.get(&p.name) != after.params.get(&p.name) {
                    out.push(Change::ParamType {
                        name: p.name.clone(),
                    });
                }
            }
        }
    }
    for p in &old.ptc.params {
        if !new.ptc.params.iter().any(|n| n.name == p.name) {
            out.push(Change::ParamRemoved {
                name: p.name.clone(),
            });
        }
    }
    let mut at = Vec::new();
    differences(&before.output, &after.output, "", &mut at);
    if !at.is_empty() {
        out.push(Change::Response { at });
    }
    out
}

/// A schema without its annotations (descriptions do not change generated types).
fn strip(schema: Option<Value>) -> Value {
    match schema {
        Some(Value::Object(m)) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "description" | "title" | "example" | "examples")
                })
                .map(|(k, v)| (k, strip(Some(v))))
                .collect(),
        ),
        Some(Value::Array(a)) => Value::Array(a.into_iter().map(|v| strip(Some(v))).collect()),
        Some(other) => other,
        None => Value::Null,
    }
}

/// JSON pointers where `a` and `b` differ, at most five.
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    const MAX: usize = 5;
    if out.len() >= MAX || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, va) in x {
                let here = ptc_plan::diagnostic::pointer_join(at, k);
                match y.get(k) {
                    Some(vb) => differences(va, vb, &here, out),
                    None if out.len() < MAX => out.push(format!("#{here} (removed)")),
                    None => {}
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                if out.len() < MAX {
                    out.push(format!(
                        "#{} (added)",
                        ptc_plan::diagnostic::pointer_join(at, k)
                    ));
                }
            }
        }
        _ => out.push(format!("#{at}")),
    }
}

/// How one tool of an MCP upstream's vendored list differs from the live server's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChange {
    /// The server lists a tool the vendored list does not have (never exposed until vendored).
    Added,
    /// The server no longer lists a vendored tool.
    Removed,
    /// The live tool differs from its pin.
    Changed {
        /// Old and new description, when it changed.
        description: Option<(String, String)>,
        /// JSON pointers where the input schemas differ (first few).
        input: Vec<String>,
        /// JSON pointers where the output schemas differ (first few).
        output: Vec<String>,
        /// The annotations changed.
        annotations: bool,
    },
}

/// One difference between an MCP upstream's vendored tool list and its live server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDrift {
    /// The upstream.
    pub upstream: String,
    /// The tool's name.
    pub tool: String,
    /// The config exposes it (so the change breaks the build or the call).
    pub included: bool,
    /// What changed.
    pub change: ToolChange,
}

/// How `live` differs from `vendored`, tool by tool, sorted by tool name; `included` says
/// which tools the config exposes.
pub fn compare_tools(
    vendored: &ToolList,
    live: &ToolList,
    included: impl Fn(&str) -> bool,
) -> Vec<ToolDrift> {
    let mut out = Vec::new();
    let drift = |tool: &str, change| ToolDrift {
        upstream: vendored.upstream.clone(),
        tool: tool.to_string(),
        included: included(tool),
        change,
    };
    for pin in &vendored.tools {
        let Some(now) = live.tool(&pin.name) else {
            out.push(drift(&pin.name, ToolChange::Removed));
            continue;
        };
        let changes = pin.changes(now);
        if changes.is_empty() {
            continue;
        }
        let diff = |a: &Option<Value>, b: &Option<Value>| {
            let mut at = Vec::new();
            differences(
                &a.clone().unwrap_or(Value::Null),
                &b.clone().unwrap_or(Value::Null),
                "",
                &mut at,
            );
            at
        };
        out.push(drift(
            &pin.name,
            ToolChange::Changed {
                description: changes
                    .contains(&PinChange::Description)
                    .then(|| (pin.description.clone(), now.description.clone())),
                input: diff(
                    &Some(pin.input_schema.clone()),
                    &Some(now.input_schema.clone()),
                ),
                output: diff(&pin.output_schema, &now.output_schema),
                annotations: changes.contains(&PinChange::Annotations),
            },
        ));
    }
    for t in &live.tools {
        if vendored.tool(&t.name).is_none() {
            out.push(drift(&t.name, ToolChange::Added));
        }
    }
    out.sort_by(|a, b| a.tool.cmp(&b.tool));
    out
}

impl fmt::Display for ToolDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (upstream, tool) = (&self.upstream, &self.tool);
        write!(f, "upstream '{upstream}', tool '{tool}': ")?;
        let args = format!("{}::{}Args", snake(upstream), pascal(tool));
        let response = format!("{}::{}Response", snake(upstream), pascal(tool));
        match &self.change {
            ToolChange::Added => {
                return write!(
                    f,
                    "added on the server; not exposed until it is vendored (and listed in include_tools, if the config has one)"
                );
            }
            ToolChange::Removed => write!(f, "removed from the server")?,
            ToolChange::Changed {
                description,
                input,
                output,
                annotations,
            } => {
                let mut parts = Vec::new();
                if description.is_some() {
                    parts.push("description changed".to_string());
                }
                if !input.is_empty() {
                    parts.push(format!("inputSchema changed at {}", input.join(", ")));
                }
                if !output.is_empty() {
                    parts.push(format!("outputSchema changed at {}", output.join(", ")));
                }
                if *annotations {
                    parts.push("annotations changed".into());
                }
                write!(f, "{}", parts.join("; "))?;
                if let Some((old, new)) = description {
                    write!(f, "\n  - {}\n  + {}", one_line(old), one_line(new))?;
                }
            }
        }
        if !self.included {
            return write!(f, "\n  = not included by the config: nothing breaks");
        }
        let consequence = match &self.change {
            ToolChange::Removed => format!(
                "once vendored, the build fails: remove `{tool}` from include_tools (code using `{args}` fails with E0412); \
                 until then calls answer not_found"
            ),
            ToolChange::Changed { input, output, .. } if !input.is_empty() || !output.is_empty() => format!(
                "`{args}` and `{response}` follow the new schemas once vendored: code using a changed field fails with E0063, E0308 or E0609; \
                 until then calls answer tool_changed (pin_policy refuse)"
            ),
            _ => "no Rust type changes; until it is vendored calls answer tool_changed (pin_policy refuse)".into(),
        };
        write!(f, "\n  = {consequence}")
    }
}

/// `text` on one line, cut at 200 characters.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan_with(tool: Value) -> Plan {
        serde_json::from_value(json!({
            "credentials": [],
            "upstreams": [{"name": "obs", "description": "", "transport": {
                "transport": "openapi", "base_url": "https://x.test", "schema": {"file": "/x.json"},
                "schema_max_bytes": 1, "http": {"auth": [], "static_headers": [],
                "allow_insecure_http": false, "allow_insecure_auth": false, "request_timeout_ms": 1,
                "connect_timeout_ms": 1, "max_response_bytes": 1, "pool_size": 1,
                "backoff": {"max_retries": 0, "initial_ms": 1, "max_ms": 1}},
                "tools": [tool]}}]
        }))
        .unwrap()
    }

    fn tool(params: Value, required: Value, out: Value) -> Value {
        let names: Vec<Value> = params
            .as_object()
            .unwrap()
            .keys()
            .map(|k| json!({"name": k, "in": "query", "required": false}))
            .collect();
        json!({"name": "get-x", "description": "", "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object", "properties": params, "required": required},
            "outputSchema": out,
            "_ptc": {"transport": "openapi", "operationId": "get_x", "method": "GET", "path": "/x",
                "params": names, "defaultArgs": {}, "requestTimeoutMs": 1, "connectTimeoutMs": 1,
                "maxResponseBytes": 1}})
    }

    #[test]
    fn parameter_and_response_changes_are_named_with_the_build_message() {
        let before = plan_with(tool(
            json!({"a": {"type": "string"}, "b": {"type": "string"}}),
            json!([]),
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        ));
        let after = plan_with(tool(
            json!({"a": {"type": "string"}, "c": {"type": "string"}}),
            json!(["a", "c"]),
            json!({"type": "object", "properties": {"n": {"type": "string"}}}),
        ));
        let drift = compare(&before, &after);
        let changes: Vec<&Change> = drift.iter().map(|d| &d.change).collect();
        assert_eq!(
            changes,
            vec![
                &Change::ParamRequired { name: "a".into() },
                &Change::ParamAdded {
                    name: "c".into(),
                    required: true
                },
                &Change::ParamRemoved { name: "b".into() },
                &Change::Response {
                    at: vec!["#/properties/n/type".into()]
                },
            ]
        );
        assert!(drift[1].to_string().contains("E0063"), "{}", drift[1]);
        assert!(
            drift[1].to_string().contains("obs::GetXArgs"),
            "{}",
            drift[1]
        );
    }

    #[test]
    fn description_only_changes_are_not_drift() {
        let s = |d: &str| json!({"type": "object", "description": d, "properties": {}});
        let before = plan_with(tool(json!({}), json!([]), s("old")));
        let after = plan_with(tool(json!({}), json!([]), s("new")));
        assert_eq!(compare(&before, &after), vec![]);
    }
}
