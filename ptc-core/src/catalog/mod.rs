//! The catalog: every upstream and its tools in one transport-neutral shape, for lookup
//! (with "did you mean"), validation and discovery. OpenAPI tools come from the plan; MCP tools
//! from the server's `tools/list`, at start-up or on first use.
//!
//! The room around it: MCP upstreams' live tool lists (`mcp_link`), the sessions of an upstream
//! called as the caller ([`caller_sessions`]), their comparison with the reviewed pins
//! (`pin_check`), what each caller may reach ([`policy`]), ranking tools for
//! a search ([`search`]) and the discovery text and data programs read ([`discovery`]).

pub mod caller_sessions;
pub mod discovery;
pub(crate) mod mcp_link;
pub(crate) mod pin_check;
pub mod policy;
pub mod search;

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value, json};

use crate::call::contract::{Reason, ToolError};
use crate::call::validate::{Definitions, Schema};
use crate::call::writes::WriteGate;
use crate::catalog::pin_check::PinCell;
use ptc_names::did_you_mean;
use ptc_plan::effects::Classified;
use ptc_plan::{Approval, Effect, OperationBinding, TransportKind};

/// How a tool is bound to its upstream: what lookups and discovery decide by, and what the
/// `_ptc` provenance shows of it ([`ToolEntry::provenance`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Binding {
    /// An OpenAPI operation, as the plan compiled it.
    OpenApi(Box<OperationBinding>),
    /// A tool an MCP server lists; it is exposed under its name on the server.
    Mcp {
        /// How the server is reached (`mcp_stdio` or `mcp_http`).
        transport: TransportKind,
    },
}

impl Binding {
    /// The OpenAPI operation's original operationId.
    pub fn operation_id(&self) -> Option<&str> {
        match self {
            Binding::OpenApi(op) => Some(&op.operation_id),
            Binding::Mcp { .. } => None,
        }
    }

    /// The arguments the runtime fills in when a call leaves them out (OpenAPI tools).
    pub fn default_args(&self) -> Option<&Map<String, Value>> {
        match self {
            Binding::OpenApi(op) => Some(&op.default_args),
            Binding::Mcp { .. } => None,
        }
    }

    /// The guidance for agents the config or the document adds (OpenAPI tools).
    pub fn notes(&self) -> Option<&str> {
        match self {
            Binding::OpenApi(op) => op.notes.as_deref(),
            Binding::Mcp { .. } => None,
        }
    }
}

/// One tool as discovery shows it and the executor routes it.
#[derive(Clone, Debug)]
pub struct ToolEntry {
    /// The upstream it belongs to.
    pub server: String,
    /// Exposed (Lisp-facing) name, e.g. `list-traces`.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of a successful result, when known.
    pub output_schema: Option<Value>,
    /// What it does to the world and whether a person approves each call.
    pub classified: Classified,
    /// Why it cannot be called in this process (a write the config does not allow-list, or
    /// the write gate is closed); `None` when it can.
    pub disabled: Option<String>,
    /// The largest answer its upstream accepts, in bytes (the config's `max_response_bytes`,
    /// narrowed per operation for OpenAPI): a larger one fails with `response_too_large`.
    pub max_response_bytes: u64,
    /// What it is bound to upstream: the OpenAPI operation, or the MCP tool.
    pub binding: Binding,
    /// What a call returns (the result path) and how it pages (OpenAPI tools that say).
    pub projection: crate::call::projection::Projection,
    /// The pinned tool's comparison verdict (pinned MCP tools only).
    pub pin: Option<Arc<PinCell>>,
    /// Index of the tool in its transport's own list.
    pub(crate) index: usize,
}

impl ToolEntry {
    /// `server/name`.
    pub fn qualified(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }

    /// The arguments the runtime fills in when a call leaves them out (OpenAPI tools).
    pub fn default_args(&self) -> Map<String, Value> {
        self.binding.default_args().cloned().unwrap_or_default()
    }

    /// The `_ptc` provenance of its binding, as `meta` and a refresh's diff show it: an OpenAPI
    /// tool's operation without its execution knobs (`params`, `body`); an MCP tool's transport
    /// and name, and whether it is pinned. Never credentials.
    pub fn provenance(&self) -> Map<String, Value> {
        match &self.binding {
            Binding::OpenApi(op) => {
                let mut shown = match serde_json::to_value(op) {
                    Ok(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                // Execution knobs stay out of the agent's view; provenance and hints stay in.
                shown.remove("params");
                shown.remove("body");
                shown
            }
            Binding::Mcp { transport } => {
                let mut shown = Map::new();
                shown.insert("transport".into(), json!(transport.as_str()));
                shown.insert("name".into(), json!(self.name));
                if self.pin.is_some() {
                    shown.insert("pinned".into(), json!(true));
                }
                shown
            }
        }
    }

    /// What discovery adds to the tool's description: why a pinned tool is not callable, or
    /// that it changed (`None` when there is nothing to say).
    pub fn pin_note(&self) -> Option<String> {
        self.pin.as_ref().and_then(|p| p.note())
    }

    /// What discovery adds for a tool that is not a read: what it does, whether a person
    /// approves each call, and why it cannot be called here (`None` for a read).
    pub fn write_note(&self) -> Option<String> {
        let c = self.classified;
        let what = match c.effect {
            Effect::Read => return None,
            Effect::SafeQuery => "safe query",
            Effect::Write => "write",
        };
        let mut note = match c.approval {
            Approval::Always => format!("{what}; a person approves each call"),
            Approval::None => what.to_string(),
        };
        if let Some(why) = &self.disabled {
            note.push_str(&format!("; disabled: {why}"));
        }
        Some(note)
    }

    /// Everything discovery notes about the tool (its pin, its writes), `None` when nothing.
    pub fn notes(&self) -> Option<String> {
        let notes: Vec<String> = [self.pin_note(), self.write_note()]
            .into_iter()
            .flatten()
            .collect();
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// The tool entry as JSON, in the MCP tool shape plus `server` and `_ptc` (which says, for
    /// a pinned tool that changed, what and whether it is callable).
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("server".into(), json!(self.server));
        m.insert("name".into(), json!(self.name));
        m.insert("description".into(), json!(self.description));
        m.insert("inputSchema".into(), self.input_schema.clone());
        if let Some(o) = &self.output_schema {
            m.insert("outputSchema".into(), o.clone());
        }
        m.insert(
            "annotations".into(),
            json!({"readOnlyHint": self.classified.effect.is_read()}),
        );
        let mut p = self.provenance();
        if let Some(note) = self.pin_note() {
            p.insert("pin".into(), json!(note));
        }
        p.insert("effect".into(), json!(self.classified.effect.as_str()));
        if !self.classified.effect.is_read() {
            p.insert("approval".into(), json!(self.classified.approval.as_str()));
        }
        if let Some(why) = &self.disabled {
            p.insert("disabled".into(), json!(why));
        }
        m.insert("_ptc".into(), Value::Object(p));
        Value::Object(m)
    }
}

/// One upstream in the catalog.
#[derive(Debug)]
pub struct ServerEntry {
    /// Namespace name.
    pub name: String,
    /// Operator description (the plan's: the config's, else the OpenAPI document's title).
    description: String,
    /// What an MCP server said of itself, shown when the config gives no description.
    described_by_server: OnceLock<String>,
    /// How the upstream is reached; its tag (`openapi`, `mcp_stdio`, `mcp_http`) is for
    /// provenance and labels only, never in names, hints or messages.
    pub transport: TransportKind,
    /// Named schema definitions the tools' `$ref`s point into.
    pub definitions: Definitions,
    tools: OnceLock<Vec<ToolEntry>>,
}

impl ServerEntry {
    pub(crate) fn new(
        name: &str,
        description: &str,
        transport: TransportKind,
        definitions: Definitions,
    ) -> Self {
        ServerEntry {
            name: name.to_string(),
            description: description.to_string(),
            described_by_server: OnceLock::new(),
            transport,
            definitions,
            tools: OnceLock::new(),
        }
    }

    /// What the upstream is: the operator's description, else the API's own (the OpenAPI
    /// document's title, or an MCP server's `serverInfo` once it has been listed).
    pub fn description(&self) -> &str {
        if self.description.trim().is_empty() {
            self.described_by_server
                .get()
                .map_or(&self.description, String::as_str)
        } else {
            &self.description
        }
    }

    pub(crate) fn set_server_description(&self, text: String) {
        let _ = self.described_by_server.set(text);
    }

    /// The tools, once loaded (OpenAPI upstreams always are).
    pub fn tools(&self) -> Option<&[ToolEntry]> {
        self.tools.get().map(Vec::as_slice)
    }

    pub(crate) fn set_tools(&self, tools: Vec<ToolEntry>) {
        let _ = self.tools.set(tools);
    }

    /// The tool called `name`: its exposed name, that name with `_` for `-` (`list_traces`),
    /// or its original operation id.
    pub fn tool(&self, name: &str) -> Result<&ToolEntry, ToolError> {
        let tools = self.tools().unwrap_or_default();
        if let Some(t) = ptc_plan::find_tool(tools, name, |t| &t.name, |t| t.binding.operation_id())
        {
            return Ok(t);
        }
        let kebab = name.replace('_', "-");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let mut msg = format!("no tool `{name}` in upstream `{}`", self.name);
        let qualified = |s: &str| format!("`{}/{s}`", self.name);
        if let Some(s) = did_you_mean(&kebab, names.iter().copied(), qualified) {
            msg.push_str(&format!(" ({s})"));
        }
        msg.push_str(&format!(
            "; its tools: {}. List them with (dir '{})",
            names.join(" "),
            self.name
        ));
        Err(ToolError {
            reason: Reason::UnknownTool,
            message: msg,
        })
    }

    /// The tool's input schema with this upstream's definitions.
    pub fn schema<'a>(&'a self, tool: &'a ToolEntry) -> Schema<'a> {
        Schema {
            root: &tool.input_schema,
            definitions: Some(&self.definitions),
        }
    }
}

/// Every upstream, sorted by name.
#[derive(Debug, Default)]
pub struct Catalog {
    pub(crate) servers: Vec<ServerEntry>,
}

impl Catalog {
    /// The upstreams.
    pub fn servers(&self) -> &[ServerEntry] {
        &self.servers
    }

    /// Position of upstream `name`, or an `unknown_server` error with a suggestion.
    pub fn index_of(&self, name: &str) -> Result<usize, ToolError> {
        if let Some(i) = self.servers.iter().position(|s| s.name == name) {
            return Ok(i);
        }
        let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
        let mut msg = format!("no upstream `{name}`");
        if let Some(s) = did_you_mean(name, names.iter().copied(), |s| format!("`{s}`")) {
            msg.push_str(&format!(" ({s})"));
        }
        if names.is_empty() {
            msg.push_str("; no upstreams are configured");
        } else {
            msg.push_str(&format!(
                "; configured upstreams: {}. List them with (tool/servers)",
                names.join(" ")
            ));
        }
        Err(ToolError {
            reason: Reason::UnknownServer,
            message: msg,
        })
    }

    /// The upstream called `name`.
    pub fn server(&self, name: &str) -> Result<&ServerEntry, ToolError> {
        self.index_of(name).map(|i| &self.servers[i])
    }
}

/// The catalog entries of an OpenAPI upstream's compiled tools, callable as `gate` allows.
pub(crate) fn openapi_tools(
    server: &str,
    tools: &[ptc_plan::ToolPlan],
    gate: WriteGate,
) -> Vec<ToolEntry> {
    tools
        .iter()
        .enumerate()
        .map(|(index, t)| ToolEntry {
            server: server.to_string(),
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
            output_schema: Some(t.output_schema.clone()),
            classified: t.classified,
            // The compiler refused every write the config does not allow-list.
            disabled: crate::call::writes::disabled_reason(&Ok(t.classified), gate),
            max_response_bytes: t.ptc.max_response_bytes,
            binding: Binding::OpenApi(Box::new(t.ptc.clone())),
            projection: crate::call::projection::Projection {
                result_path: t.ptc.result_path.clone(),
                pagination: t.ptc.pagination.clone(),
            },
            pin: None,
            index,
        })
        .collect()
}

/// A plain read tool for other modules' unit tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// `server/name`, a read with an open object schema.
    pub(crate) fn tool(server: &str, name: &str) -> ToolEntry {
        ToolEntry {
            server: server.into(),
            name: name.into(),
            description: name.into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            classified: Classified::default(),
            disabled: None,
            max_response_bytes: 1 << 20,
            binding: operation(name),
            projection: Default::default(),
            pin: None,
            index: 0,
        }
    }

    /// The binding of `GET /{operation_id}`, with no parameters, defaults or notes.
    pub(crate) fn operation(operation_id: &str) -> Binding {
        Binding::OpenApi(Box::new(OperationBinding {
            transport: "openapi".into(),
            operation_id: operation_id.into(),
            method: "GET".into(),
            path: format!("/{operation_id}"),
            base_url: None,
            params: Vec::new(),
            body: None,
            default_args: Map::new(),
            request_timeout_ms: 1_000,
            connect_timeout_ms: 1_000,
            max_response_bytes: 1 << 20,
            result_path: None,
            pagination: None,
            notes: None,
            unvalidated: Vec::new(),
        }))
    }

    /// [`operation`], changed by `edit`.
    pub(crate) fn operation_with(
        operation_id: &str,
        edit: impl FnOnce(&mut OperationBinding),
    ) -> Binding {
        let mut binding = operation(operation_id);
        if let Binding::OpenApi(op) = &mut binding {
            edit(op);
        }
        binding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(effect: Effect, approval: Approval, disabled: Option<&str>) -> ToolEntry {
        ToolEntry {
            server: "obs".into(),
            name: "annotate".into(),
            description: "Annotate".into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            classified: Classified { effect, approval },
            disabled: disabled.map(str::to_string),
            max_response_bytes: 1,
            binding: Binding::Mcp {
                transport: TransportKind::McpStdio,
            },
            projection: Default::default(),
            pin: None,
            index: 0,
        }
    }

    /// An OpenAPI tool is found by its operationId too, and shows its operation without the
    /// execution knobs; an MCP tool shows its transport and name, and whether it is pinned.
    #[test]
    fn a_tool_is_looked_up_and_shown_by_its_binding() {
        let mut listed = tests_support::tool("obs", "list-traces");
        listed.binding = tests_support::operation_with("listTraces", |op| {
            op.params.push(ptc_plan::Param {
                name: "org_id".into(),
                location: ptc_plan::ParamLocation::Query,
                required: true,
                repeated: false,
            });
            op.body = Some(ptc_plan::RequestBody { required: false });
            op.default_args.insert("mode".into(), json!("summary"));
        });
        let server = ServerEntry::new("obs", "", TransportKind::Openapi, Default::default());
        server.set_tools(vec![listed, tests_support::tool("obs", "get-trace")]);
        for name in ["list-traces", "list_traces", "listTraces"] {
            assert_eq!(server.tool(name).unwrap().name, "list-traces", "{name}");
        }
        let t = server.tool("listTraces").unwrap();
        assert_eq!(
            t.default_args(),
            json!({"mode": "summary"}).as_object().unwrap().clone()
        );
        assert_eq!(
            Value::Object(t.provenance()),
            json!({"transport": "openapi", "operationId": "listTraces", "method": "GET",
                   "path": "/listTraces", "defaultArgs": {"mode": "summary"},
                   "requestTimeoutMs": 1000, "connectTimeoutMs": 1000,
                   "maxResponseBytes": 1_048_576})
        );
        assert_eq!(
            server.tool("mode").unwrap_err().reason,
            Reason::UnknownTool,
            "a default argument is no name"
        );

        let mut mcp = entry(Effect::Read, Approval::None, None);
        assert_eq!(mcp.default_args(), Map::new());
        let pin = ptc_plan::PinnedTool::new("annotate", "", json!({}), None, Map::new());
        let board =
            crate::catalog::pin_check::PinBoard::new("obs", Default::default(), &[pin], &[]);
        mcp.pin = board.pins().next().map(|(_, cell)| cell.clone());
        assert_eq!(
            Value::Object(mcp.provenance()),
            json!({"transport": "mcp_stdio", "name": "annotate", "pinned": true})
        );
    }

    #[test]
    fn a_write_says_what_it_is_and_why_it_is_disabled() {
        let read = entry(Effect::Read, Approval::None, None);
        assert_eq!(read.write_note(), None);
        assert_eq!(read.notes(), None);
        let meta = read.to_json();
        assert_eq!(meta["annotations"], json!({"readOnlyHint": true}));
        assert_eq!(
            meta["_ptc"],
            json!({"transport": "mcp_stdio", "name": "annotate", "effect": "read"})
        );

        let write = entry(Effect::Write, Approval::Always, Some("writes are off"));
        assert_eq!(
            write.notes().as_deref(),
            Some("write; a person approves each call; disabled: writes are off")
        );
        let meta = write.to_json();
        assert_eq!(meta["annotations"], json!({"readOnlyHint": false}));
        assert_eq!(
            meta["_ptc"],
            json!({"transport": "mcp_stdio", "name": "annotate", "effect": "write",
                   "approval": "always", "disabled": "writes are off"})
        );
        assert_eq!(meta["name"], "annotate");
        assert_eq!(meta["server"], "obs");

        let query = entry(Effect::SafeQuery, Approval::None, None);
        assert_eq!(query.write_note().as_deref(), Some("safe query"));
        assert_eq!(
            entry(Effect::SafeQuery, Approval::Always, None)
                .write_note()
                .as_deref(),
            Some("safe query; a person approves each call")
        );
        assert_eq!(
            entry(Effect::Write, Approval::None, None)
                .write_note()
                .as_deref(),
            Some("write")
        );
    }
}
