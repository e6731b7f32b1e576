//! Catalog refresh: an operator's explicit action (the HTTP host's admin endpoint, or SIGHUP)
//! that re-reads the config and documents, recompiles, lists every upstream's tools, reports
//! what changed by stable tool name, and swaps the upstreams for new evaluations. Evaluations
//! already running finish on the upstreams they started with. Never implicit: no call, program
//! or agent can refresh.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

use crate::call::upstreams::Upstreams;
use crate::catalog::{Catalog, ServerEntry, ToolEntry};

/// How a host rebuilds its upstreams for a refresh: re-read and recompile, then start them.
/// An error (an invalid config, an unreadable document) keeps the catalog in force.
pub type Reload =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Upstreams, String>> + Send>> + Send + Sync>;

/// What a refresh changed, by `server/tool` name.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct CatalogDiff {
    /// Tools that are new.
    pub added: Vec<String>,
    /// Tools that are gone.
    pub removed: Vec<String>,
    /// Tools whose description, schemas, effect, approval or availability changed, with what.
    pub changed: Vec<Changed>,
    /// Tools that are the same.
    pub unchanged: usize,
    /// Upstreams whose tools could not be listed (`name: why`); their tools count as removed.
    pub unavailable: Vec<String>,
    /// Client sessions sent `notifications/tools/list_changed` (none when no tool changed).
    pub told: usize,
}

/// One changed tool.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Changed {
    /// `server/tool`.
    pub tool: String,
    /// What changed: `description`, `inputSchema`, `outputSchema`, `effect`, `availability`,
    /// `binding` (method, path, defaults, caps).
    pub what: Vec<&'static str>,
}

impl CatalogDiff {
    /// Whether a tool was added, removed or changed: what the sessions open are told of.
    pub fn changes_tools(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty())
    }

    /// One line for logs: the counts and the names.
    pub fn summary(&self) -> String {
        let names = |v: &[String]| {
            if v.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.join(", "))
            }
        };
        let changed: Vec<String> = self
            .changed
            .iter()
            .map(|c| format!("{}: {}", c.tool, c.what.join("+")))
            .collect();
        format!(
            "{} added{}, {} removed{}, {} changed{}, {} unchanged{}{}",
            self.added.len(),
            names(&self.added),
            self.removed.len(),
            names(&self.removed),
            self.changed.len(),
            names(&changed),
            self.unchanged,
            if self.unavailable.is_empty() {
                String::new()
            } else {
                format!("; not listed: {}", self.unavailable.join("; "))
            },
            match self.told {
                0 => String::new(),
                1 => "; 1 session told".into(),
                n => format!("; {n} sessions told"),
            }
        )
    }
}

/// Every tool of `catalog` by `server/tool`, as the parts a refresh compares; upstreams whose
/// tools are not listed contribute none.
fn fingerprints(catalog: &Catalog) -> BTreeMap<String, BTreeMap<&'static str, Value>> {
    let mut out = BTreeMap::new();
    for server in catalog.servers() {
        for tool in server.tools().unwrap_or_default() {
            out.insert(tool.qualified(), fingerprint(server, tool));
        }
    }
    out
}

fn fingerprint(server: &ServerEntry, tool: &ToolEntry) -> BTreeMap<&'static str, Value> {
    // Schemas with the definitions they reach, so a changed component shows in every tool
    // that uses it.
    let bundled = |s: &Value| ptc_plan::schema::bundle(s, &server.definitions).unwrap_or(s.clone());
    // Notes are guidance, not part of what a call does.
    let mut binding = tool.provenance();
    binding.remove("notes");
    BTreeMap::from([
        ("description", json!(tool.description)),
        ("inputSchema", bundled(&tool.input_schema)),
        (
            "outputSchema",
            tool.output_schema.as_ref().map_or(Value::Null, bundled),
        ),
        (
            "effect",
            json!([
                tool.classified.effect.as_str(),
                tool.classified.approval.as_str()
            ]),
        ),
        ("availability", json!(tool.disabled)),
        ("binding", Value::Object(binding)),
    ])
}

/// What changed from `old` to `new`.
pub fn diff(old: &Catalog, new: &Catalog) -> CatalogDiff {
    let (before, after) = (fingerprints(old), fingerprints(new));
    let mut d = CatalogDiff::default();
    for (name, was) in &before {
        match after.get(name) {
            None => d.removed.push(name.clone()),
            Some(is) => {
                let what: Vec<&'static str> = was
                    .iter()
                    .filter(|(k, v)| is.get(*k) != Some(*v))
                    .map(|(k, _)| *k)
                    .collect();
                if what.is_empty() {
                    d.unchanged += 1;
                } else {
                    d.changed.push(Changed {
                        tool: name.clone(),
                        what,
                    });
                }
            }
        }
    }
    d.added = after
        .keys()
        .filter(|k| !before.contains_key(*k))
        .cloned()
        .collect();
    d
}

/// Lists every upstream's tools (connecting to MCP servers), so the diff and the first
/// evaluations see the whole catalog; the upstreams that cannot be listed, with why.
pub(crate) async fn list_all(upstreams: &Upstreams) -> Vec<String> {
    let mut unavailable = Vec::new();
    for (i, server) in upstreams.catalog().servers().iter().enumerate() {
        if let Err(e) = upstreams.load(i).await {
            unavailable.push(format!("{}: {}", server.name, e.message));
        }
    }
    unavailable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::projection::Projection;

    fn tool(name: &str, description: &str) -> ToolEntry {
        ToolEntry {
            server: "obs".into(),
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object"}),
            output_schema: Some(json!({"$ref": "#/$defs/Out"})),
            classified: Default::default(),
            disabled: None,
            max_response_bytes: 1,
            binding: crate::catalog::tests_support::operation_with(name, |op| {
                op.notes = Some("n".into());
            }),
            projection: Projection::default(),
            pin: None,
            index: 0,
        }
    }

    fn catalog(tools: Vec<ToolEntry>, out: Value) -> Catalog {
        let defs = BTreeMap::from([("Out".to_string(), out)]);
        let server = ServerEntry::new("obs", "", ptc_plan::TransportKind::Openapi, defs);
        server.set_tools(tools);
        Catalog {
            servers: vec![server],
        }
    }

    #[test]
    fn only_an_added_removed_or_changed_tool_is_a_change_to_tell_sessions_of() {
        let diff = |added: &[&str], removed: &[&str], changed: bool| CatalogDiff {
            added: added.iter().map(|s| s.to_string()).collect(),
            removed: removed.iter().map(|s| s.to_string()).collect(),
            changed: if changed {
                vec![Changed {
                    tool: "obs/b".into(),
                    what: vec!["description"],
                }]
            } else {
                Vec::new()
            },
            unchanged: 3,
            unavailable: vec!["mcp: down".into()],
            told: 0,
        };
        assert!(!diff(&[], &[], false).changes_tools());
        assert!(diff(&["obs/e"], &[], false).changes_tools());
        assert!(diff(&[], &["obs/a"], false).changes_tools());
        assert!(diff(&[], &[], true).changes_tools());
        let told = |n| CatalogDiff {
            told: n,
            ..diff(&[], &[], true)
        };
        assert!(told(0).summary().ends_with("; not listed: mcp: down"));
        assert!(
            told(1)
                .summary()
                .ends_with("; not listed: mcp: down; 1 session told")
        );
        assert!(told(3).summary().ends_with("; 3 sessions told"));
    }

    #[test]
    fn a_diff_names_added_removed_and_changed_tools_by_name() {
        let out = json!({"type": "object"});
        let old = catalog(
            vec![
                tool("a", "A"),
                tool("b", "B"),
                tool("c", "C"),
                tool("d", "D"),
            ],
            out.clone(),
        );
        let mut changed_b = tool("b", "B, better");
        changed_b.binding = crate::catalog::tests_support::operation_with("b", |op| {
            op.path = "/b2".into();
            op.notes = Some("n".into());
        });
        let mut disabled_c = tool("c", "C");
        disabled_c.disabled = Some("writes are off".into());
        let mut noted_d = tool("d", "D");
        noted_d.binding = crate::catalog::tests_support::operation_with("d", |op| {
            op.notes = Some("new guidance".into());
        });
        let new = catalog(
            vec![
                tool("a", "A"),
                changed_b,
                disabled_c,
                noted_d,
                tool("e", "E"),
            ],
            out.clone(),
        );
        let d = diff(&old, &new);
        assert_eq!(d.added, ["obs/e"]);
        assert!(d.removed.is_empty());
        assert_eq!(
            d.changed,
            [
                Changed {
                    tool: "obs/b".into(),
                    what: vec!["binding", "description"]
                },
                Changed {
                    tool: "obs/c".into(),
                    what: vec!["availability"]
                }
            ]
        );
        assert_eq!(d.unchanged, 2);
        assert_eq!(
            d.summary(),
            "1 added (obs/e), 0 removed, 2 changed (obs/b: binding+description, obs/c: \
             availability), 2 unchanged"
        );
        // A changed definition changes every tool whose schema reaches it.
        let newer = catalog(vec![tool("a", "A")], json!({"type": "array"}));
        let d = diff(&old, &newer);
        assert_eq!(d.removed, ["obs/b", "obs/c", "obs/d"]);
        assert_eq!(
            d.changed,
            [Changed {
                tool: "obs/a".into(),
                what: vec!["outputSchema"]
            }]
        );
    }

    /// Listing reports each upstream it cannot list, by name and why; a reachable catalog
    /// (OpenAPI tools are known at start) reports nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn list_all_names_each_upstream_it_cannot_list() {
        let config = json!({"upstreams": {"gone": {
            "transport": "mcp_stdio",
            "command": "/nonexistent/ptc-mcp-server",
        }}})
        .to_string();
        let loaded = ptc_plan::load_str(
            &config,
            std::path::Path::new("/refresh-test/upstreams.json"),
            &ptc_plan::FileSource,
        )
        .unwrap();
        // Listed on first use, as a host started with an upstream down is.
        let options = crate::StartOptions {
            catalog: crate::CatalogLoad::OnFirstUse,
            ..Default::default()
        };
        let up = Upstreams::start(loaded.plan, loaded.secrets, options)
            .await
            .unwrap();
        let unavailable = list_all(&up).await;
        assert_eq!(unavailable.len(), 1, "{unavailable:?}");
        assert!(unavailable[0].starts_with("gone: "), "{unavailable:?}");
        assert!(
            unavailable[0].contains("/nonexistent/ptc-mcp-server"),
            "{unavailable:?}"
        );
        up.shutdown().await;
    }
}
