//! The `lisp_eval` tool as clients see it: its input schema, its description (how to call
//! upstreams, how to discover them, and a compact catalog of what the caller may call) and
//! truthful annotations.

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::json;

use crate::catalog::discovery::{listing, shown, visible};
use crate::catalog::policy::Grant;
use crate::catalog::{Catalog, ServerEntry};

/// The tool's name.
pub const NAME: &str = "lisp_eval";

/// A catalog listed inline must fit these; a larger one is summarised (server names and counts)
/// and the model discovers the rest with `apropos`/`dir`/`doc`.
pub const INLINE_MAX_CHARS: usize = 2000;
/// See [`INLINE_MAX_CHARS`].
pub const INLINE_MAX_TOOLS: usize = 16;

const INTRO: &str = "\
Evaluate a PTC-Lisp program (a small, sandboxed Clojure dialect) and return its value. Call \
upstream tools inside the program with (server/tool {:arg value}), the same as \
(tool/call 'server/tool {:arg value}) — the result is {:ok true :value v} or \
{:ok false :reason r :message m} — then filter, join and aggregate locally and return only the \
answer. (tool/pages 'server/tool {...} {:max-pages n}) gathers a paged tool's pages. Keys of \
`context` are readable as data/<key>. `output_schema` (JSON Schema) makes a non-matching result \
an error. (pmap f xs) runs calls in parallel.";

const DISCOVERY: &str = "\
Discovery: (tool/servers) lists upstreams, (dir 'server) its tools, (doc 'server/tool) the \
arguments and result, (meta 'server/tool) the schemas as data, (apropos \"text\") searches.";

/// The compact catalog text: every tool's `server/tool - summary` when small, else one line per
/// server with its tool count.
pub fn catalog_text(catalog: &Catalog, grant: &Grant) -> String {
    let servers: Vec<&ServerEntry> = catalog
        .servers()
        .iter()
        .filter(|s| shown(s, grant))
        .collect();
    if servers.is_empty() {
        return "No upstreams are configured: programs compute on `context` only.".into();
    }
    let mut inline = String::from("Upstreams:\n");
    let mut tools = 0;
    for s in &servers {
        inline.push_str(&format!("- {}: {}\n", s.name, s.description()));
        for t in visible(s, grant) {
            tools += 1;
            inline.push_str(&format!("  {}\n", listing(t)));
        }
    }
    if tools <= INLINE_MAX_TOOLS && inline.len() <= INLINE_MAX_CHARS {
        return inline;
    }
    let mut summary = String::from("Upstreams (use apropos/dir/doc to find tools):\n");
    for s in servers {
        let count = if s.tools().is_some() {
            format!("{} tools", visible(s, grant).len())
        } else {
            "tools listed on first use".to_string()
        };
        summary.push_str(&format!("- {} ({count}): {}\n", s.name, s.description()));
    }
    summary
}

/// The full description of `lisp_eval` for a caller with `grant`.
pub fn description(catalog: &Catalog, grant: &Grant) -> String {
    format!("{INTRO}\n{DISCOVERY}\n{}", catalog_text(catalog, grant))
}

/// Read-only when every upstream tool that can be called here is known to be read-only (a
/// disabled write cannot change anything); no upstreams means a closed world.
pub fn annotations(catalog: &Catalog, grant: &Grant) -> ToolAnnotations {
    let servers: Vec<&ServerEntry> = catalog
        .servers()
        .iter()
        .filter(|s| shown(s, grant))
        .collect();
    if servers.is_empty() {
        return ToolAnnotations::with_title("PTC-Lisp")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
    }
    let all_read_only = servers.iter().all(|s| {
        s.tools().is_some()
            && visible(s, grant)
                .iter()
                .all(|t| t.classified.effect.is_read() || t.disabled.is_some())
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
            },
            "session": {
                "type": "string",
                "description": "Where the deployment keeps sessions: the name under which this \
                    program's definitions (def, defn) are kept for later programs that give the \
                    same name. Over a stateful connection its own session is used by default"
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

/// The `lisp_eval` tool as a caller with `grant` sees it.
pub fn definition(catalog: &Catalog, grant: &Grant) -> Tool {
    Tool::new(NAME, description(catalog, grant), Arc::new(input_schema()))
        .with_annotations(annotations(catalog, grant))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ServerEntry, ToolEntry};
    use ptc_plan::effects::Classified;
    use ptc_plan::{Approval, Effect};

    /// Tool `n`: a read, or a write that is callable or disabled.
    fn entry(n: usize, effect: Effect, disabled: bool) -> ToolEntry {
        ToolEntry {
            server: "obs".into(),
            name: format!("t{n}"),
            description: "Does a thing".into(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            classified: Classified {
                effect,
                approval: Approval::Always,
            },
            disabled: disabled.then(|| "writes are off".to_string()),
            max_response_bytes: 1 << 20,
            binding: crate::catalog::tests_support::operation(&format!("t{n}")),
            projection: Default::default(),
            pin: None,
            index: n,
        }
    }

    fn text(c: &Catalog) -> String {
        catalog_text(c, &Grant::everything())
    }

    /// One server `obs` described by `description`, with `tools` read-only tools (or none loaded).
    fn catalog(description: &str, tools: Option<usize>) -> Catalog {
        let server = ServerEntry::new(
            "obs",
            description,
            ptc_plan::TransportKind::Openapi,
            Default::default(),
        );
        if let Some(n) = tools {
            server.set_tools((0..n).map(|i| entry(i, Effect::Read, false)).collect());
        }
        Catalog {
            servers: vec![server],
        }
    }

    #[test]
    fn the_catalog_is_inline_up_to_its_tool_count_and_summarised_past_it() {
        let at = text(&catalog("Obs", Some(INLINE_MAX_TOOLS)));
        assert!(
            at.starts_with("Upstreams:\n- obs: Obs\n  obs/t0 - Does a thing\n"),
            "{at}"
        );
        assert_eq!(at.lines().count(), 2 + INLINE_MAX_TOOLS, "{at}");
        let past = text(&catalog("Obs", Some(INLINE_MAX_TOOLS + 1)));
        assert_eq!(
            past,
            "Upstreams (use apropos/dir/doc to find tools):\n- obs (17 tools): Obs\n"
        );
    }

    #[test]
    fn the_catalog_is_inline_up_to_its_length_and_summarised_past_it() {
        let base = text(&catalog("", Some(1))).len();
        let pad = "d".repeat(INLINE_MAX_CHARS - base);
        let at = text(&catalog(&pad, Some(1)));
        assert_eq!(at.len(), INLINE_MAX_CHARS);
        assert!(at.starts_with("Upstreams:\n"), "{at}");
        let past = text(&catalog(&format!("{pad}d"), Some(1)));
        assert!(past.starts_with("Upstreams (use apropos/dir/doc"), "{past}");
        assert!(past.contains("- obs (1 tools): dd"), "{past}");
    }

    #[test]
    fn an_mcp_server_not_yet_listed_is_summarised_with_a_note() {
        let mut c = catalog("Obs", Some(INLINE_MAX_TOOLS + 1));
        c.servers.push(ServerEntry::new(
            "web",
            "Web",
            ptc_plan::TransportKind::McpHttp,
            Default::default(),
        ));
        let text = text(&c);
        assert!(
            text.ends_with("- web (tools listed on first use): Web\n"),
            "{text}"
        );
    }

    #[test]
    fn annotations_are_read_only_only_when_every_tool_is_known_to_be() {
        let hints = |c: &Catalog| {
            let a = annotations(c, &Grant::everything());
            (
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                a.open_world_hint,
            )
        };
        let read_only = (Some(true), Some(false), Some(true), Some(true));
        let may_write = (Some(false), Some(true), Some(false), Some(true));
        assert_eq!(hints(&catalog("", Some(2))), read_only);
        assert_eq!(
            hints(&Catalog::default()),
            (Some(true), Some(false), Some(true), Some(false))
        );
        // Tools not listed yet might write.
        assert_eq!(hints(&catalog("", None)), may_write);
        for effect in [Effect::Write, Effect::SafeQuery] {
            let c = catalog("", None);
            c.servers[0].set_tools(vec![entry(0, Effect::Read, false), entry(1, effect, false)]);
            assert_eq!(hints(&c), may_write, "{effect:?}");
            // A write this process cannot call changes nothing.
            let c = catalog("", None);
            c.servers[0].set_tools(vec![entry(0, Effect::Read, false), entry(1, effect, true)]);
            assert_eq!(hints(&c), read_only, "{effect:?}");
        }
    }

    #[test]
    fn the_description_holds_the_intro_discovery_and_catalog() {
        let d = description(&catalog("Obs", Some(1)), &Grant::everything());
        assert_eq!(
            d,
            format!("{INTRO}\n{DISCOVERY}\nUpstreams:\n- obs: Obs\n  obs/t0 - Does a thing\n")
        );
        let schema = input_schema();
        assert_eq!(schema["required"], json!(["program"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        let t = definition(&catalog("Obs", Some(1)), &Grant::everything());
        assert_eq!(t.name, NAME);
        assert_eq!(t.description.as_deref(), Some(d.as_str()));
        assert_eq!(t.annotations.unwrap().read_only_hint, Some(true));
    }

    #[test]
    fn a_caller_sees_only_what_its_grant_allows() {
        let policy = crate::catalog::policy::Policy::parse(
            r#"{"rules": [{"name": "r", "tools": ["obs/t0", "obs/t2"]}]}"#,
        )
        .unwrap();
        let grant = policy
            .grant(&crate::credentials::identity::Caller::local())
            .unwrap();
        let c = catalog("Obs", None);
        c.servers[0].set_tools(vec![
            entry(0, Effect::Read, false),
            entry(1, Effect::Write, false),
            entry(2, Effect::Read, false),
        ]);
        assert_eq!(
            catalog_text(&c, &grant),
            "Upstreams:\n- obs: Obs\n  obs/t0 - Does a thing\n  obs/t2 - Does a thing\n"
        );
        // The write it may not call does not make lisp_eval a writer for this caller.
        assert_eq!(annotations(&c, &grant).read_only_hint, Some(true));
        assert_eq!(
            annotations(&c, &Grant::everything()).read_only_hint,
            Some(false)
        );
        // A caller that may call nothing here sees no upstreams; one not listed yet is shown.
        let none = Grant::nothing();
        assert!(!shown(&c.servers[0], &none));
        assert!(catalog_text(&c, &none).starts_with("No upstreams"));
        assert!(shown(&catalog("Obs", None).servers[0], &none));
        let past = catalog("Obs", Some(INLINE_MAX_TOOLS + 1));
        let grant = crate::catalog::policy::Policy::parse(
            r#"{"rules": [{"name": "r", "tools": ["obs/t1*"]}]}"#,
        )
        .unwrap()
        .grant(&crate::credentials::identity::Caller::local())
        .unwrap();
        // t1, t10..t16: 8 of the 17, listed inline.
        assert_eq!(catalog_text(&past, &grant).lines().count(), 2 + 8);
        let big = catalog("Obs", Some(INLINE_MAX_TOOLS + 3));
        let grant = crate::catalog::policy::Policy::parse(
            r#"{"rules": [{"name": "r", "tools": ["*"], "except": ["obs/t0"]}]}"#,
        )
        .unwrap()
        .grant(&crate::credentials::identity::Caller::local())
        .unwrap();
        assert_eq!(
            catalog_text(&big, &grant),
            "Upstreams (use apropos/dir/doc to find tools):\n- obs (18 tools): Obs\n"
        );
    }
}
