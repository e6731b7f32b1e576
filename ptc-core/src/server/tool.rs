//! The `lisp_eval` tool as clients see it: its input schema, its description (how to call
//! upstreams, how to discover them, and a compact catalog) and truthful annotations.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::json;

use crate::catalog::Catalog;
use crate::discovery::listing;

/// The tool's name.
pub const NAME: &str = "lisp_eval";

/// A catalog listed inline must fit these; a larger one is summarised (server names and counts)
/// and the model discovers the rest with `apropos`/`dir`/`doc`.
pub const INLINE_MAX_CHARS: usize = 2000;
/// See [`INLINE_MAX_CHARS`].
pub const INLINE_MAX_TOOLS: usize = 16;

const INTRO: &str = "\
Evaluate a PTC-Lisp program (a small, sandboxed Clojure dialect) and return its value. Call \
upstream tools inside the program with (tool/call 'server/tool {:arg value}) — the result is \
{:ok true :value v} or {:ok false :reason r :message m} — then filter, join and aggregate \
locally and return only the answer. Keys of `context` are readable as data/<key>. \
`output_schema` (JSON Schema) makes a non-matching result an error. (pmap f xs) runs calls \
in parallel.";

const DISCOVERY: &str = "\
Discovery: (tool/servers) lists upstreams, (dir 'server) its tools, (doc 'server/tool) the \
arguments and result, (meta 'server/tool) the schemas as data, (apropos \"text\") searches.";

/// The compact catalog text: every tool's `server/tool - summary` when small, else one line per
/// server with its tool count.
pub fn catalog_text(catalog: &Catalog) -> String {
    let servers = catalog.servers();
    if servers.is_empty() {
        return "No upstreams are configured: programs compute on `context` only.".into();
    }
    let mut inline = String::from("Upstreams:\n");
    let mut tools = 0;
    for s in servers {
        inline.push_str(&format!("- {}: {}\n", s.name, s.description));
        for t in s.tools().unwrap_or_default() {
            tools += 1;
            inline.push_str(&format!("  {}\n", listing(t)));
        }
    }
    if tools <= INLINE_MAX_TOOLS && inline.len() <= INLINE_MAX_CHARS {
        return inline;
    }
    let mut summary = String::from("Upstreams (use apropos/dir/doc to find tools):\n");
    for s in servers {
        let count = s
            .tools()
            .map_or("tools listed on first use".to_string(), |t| {
                format!("{} tools", t.len())
            });
        summary.push_str(&format!("- {} ({count}): {}\n", s.name, s.description));
    }
    summary
}

/// The full description of `lisp_eval`.
pub fn description(catalog: &Catalog) -> String {
    format!("{INTRO}\n{DISCOVERY}\n{}", catalog_text(catalog))
}

/// Read-only when every upstream tool is known to be read-only; no upstreams means a closed
/// world.
pub fn annotations(catalog: &Catalog) -> ToolAnnotations {
    let servers = catalog.servers();
    if servers.is_empty() {
        return ToolAnnotations::with_title("PTC-Lisp")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
    }
    let all_read_only = servers.iter().all(|s| {
        s.tools()
            .is_some_and(|ts| ts.iter().all(|t| t.read_only == Some(true)))
    });
    if all_read_only {
        ToolAnnotations::with_title("PTC-Lisp over upstream tools")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(true)
    } else {
        ToolAnnotations::with_title("PTC-Lisp over upstream tools")
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true)
    }
}

/// The input schema.
pub fn input_schema() -> serde_json::Map<String, serde_json::Value> {
    let v = json!({
        "type": "object",
        "properties": {
            "program": {
                "type": "string",
                "description": "PTC-Lisp source; the value of the last form is the answer"
            },
            "context": {
                "type": "object",
                "description": "Data for the program: each key is readable as data/<key>"
            },
            "output_schema": {
                "type": "object",
                "description": "A JSON Schema the result must satisfy"
            }
        },
        "required": ["program"],
        "additionalProperties": false
    });
    match v {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// The `lisp_eval` tool.
pub fn definition(catalog: &Catalog) -> Tool {
    Tool::new(NAME, description(catalog), Arc::new(input_schema()))
        .with_annotations(annotations(catalog))
}
