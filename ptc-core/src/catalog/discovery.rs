//! Discovery text and data: what `(tool/servers)`, `dir`, `doc`, `meta` and `apropos` show for
//! upstream tools: only the tools the caller's [`Grant`] allows. Transport-neutral: no transport
//! names in anything but `_ptc` provenance.

use serde_json::{Value, json};

use crate::call::validate::{Schema, lisp_key, type_name};
use crate::catalog::policy::Grant;
use crate::catalog::{Catalog, ServerEntry, ToolEntry};

/// First line of a description, for one-line listings.
pub fn summary(description: &str) -> &str {
    description.lines().next().unwrap_or("").trim()
}

/// `server/tool - summary`: one line of `dir` and `apropos` (with, for a pinned tool that
/// changed on the server, what and whether it is callable, and for a write what it is).
pub fn listing(tool: &ToolEntry) -> String {
    match tool.notes() {
        Some(note) => format!(
            "{} - {} [{note}]",
            tool.qualified(),
            summary(&tool.description)
        ),
        None => format!("{} - {}", tool.qualified(), summary(&tool.description)),
    }
}

/// A placeholder argument value of the right shape for an example call (an object with its
/// required keys filled in, two levels deep).
fn placeholder(schema: Schema<'_>, s: &Value, depth: usize) -> String {
    let s = match s.get("$ref").and_then(Value::as_str) {
        Some(_) => schema.resolve(s).unwrap_or(s),
        None => s,
    };
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.to_string();
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string"),
        _ => "string",
    };
    match ty {
        "integer" => s
            .get("minimum")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .to_string(),
        "number" => "1.0".into(),
        "boolean" => "true".into(),
        "array" => "[]".into(),
        "object" if depth < 2 => format!("{{{}}}", required_args(schema, s, depth + 1)),
        "object" => "{}".into(),
        _ => "\"...\"".into(),
    }
}

/// `:key placeholder` for each required property of object schema `s`.
fn required_args(schema: Schema<'_>, s: &Value, depth: usize) -> String {
    let object = Schema {
        root: s,
        definitions: schema.definitions,
    };
    let (props, required) = object.properties();
    required
        .iter()
        .map(|r| {
            let v = props
                .and_then(|p| p.get(*r))
                .map(|p| placeholder(schema, p, depth))
                .unwrap_or_else(|| "\"...\"".into());
            format!("{} {v}", lisp_key(r))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A ready-to-edit call with the required arguments filled with placeholders; `schema` is the
/// tool's input schema with its upstream's definitions.
pub fn example_call(schema: Schema<'_>, tool: &ToolEntry) -> String {
    format!(
        "(tool/call '{} {{{}}})",
        tool.qualified(),
        required_args(schema, schema.root, 0)
    )
}

/// The shape of a JSON Schema in Lisp notation, e.g. `{:traces [map] :next_cursor string|null}`.
fn shape(schema: Schema<'_>, s: &Value, depth: usize) -> String {
    let s = schema.resolve(s).unwrap_or(s);
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if s.get("properties").is_some() => "object".into(),
        _ => "any".into(),
    };
    match ty.as_str() {
        "object" | "object|null" => {
            let props = s.get("properties").and_then(Value::as_object);
            match props {
                Some(p) if depth < 2 => {
                    let required: Vec<&str> = s
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let fields: Vec<String> = p
                        .iter()
                        // As the program gets them: decoded JSON keeps its keys as strings; one
                        // the schema does not require may be missing (`?`).
                        .map(|(k, v)| {
                            let may_miss = if required.contains(&k.as_str()) {
                                ""
                            } else {
                                "?"
                            };
                            format!("{k:?}{may_miss} {}", shape(schema, v, depth + 1))
                        })
                        .collect();
                    format!("{{{}}}", fields.join(" "))
                }
                _ => "map".into(),
            }
        }
        "array" => match s.get("items") {
            Some(items) if depth < 2 => format!("[{}]", shape(schema, items, depth + 1)),
            _ => "[any]".into(),
        },
        "null" => "nil".into(),
        other => other.to_string(),
    }
}

/// `(doc 'server/tool)`: description, arguments (type, required marker, description), a
/// ready-to-edit call, and the result shape.
pub fn doc_text(server: &ServerEntry, tool: &ToolEntry) -> String {
    let schema = server.schema(tool);
    let mut out = format!("-------------------------\n{}\n", tool.qualified());
    if let Some(note) = tool.notes() {
        out.push_str(&format!("  [{note}]\n"));
    }
    for line in tool.description.lines() {
        if line.trim().is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!("  {line}\n"));
        }
    }
    let (props, required) = schema.properties();
    out.push_str("Args:\n");
    match props {
        Some(p) if !p.is_empty() => {
            for (name, s) in p {
                let marker = if required.contains(&name.as_str()) {
                    " (required)"
                } else {
                    ""
                };
                let mut line = format!("  {} {}{marker}", lisp_key(name), type_name(schema, s));
                if let Some(d) = s.get("description").and_then(Value::as_str) {
                    line.push_str(&format!(" - {}", summary(d)));
                }
                if let Some(d) = tool
                    .binding
                    .default_args()
                    .and_then(|a| a.get(name.as_str()))
                {
                    line.push_str(&format!(" (default {d})"));
                }
                out.push_str(&line);
                out.push('\n');
            }
        }
        _ => out.push_str("  none\n"),
    }
    let call = example_call(schema, tool);
    // `(server/tool {...})` is the same call, shorter.
    let sugar = call.replacen(
        &format!("tool/call '{}", tool.qualified()),
        &tool.qualified(),
        1,
    );
    out.push_str(&format!("Call:\n  {call}\n  or {sugar}\n"));
    let value = match &tool.output_schema {
        Some(s) if s.get("type").and_then(Value::as_str) == Some("null") => {
            "{:ok true :value nil :value_kind :none}".to_string()
        }
        Some(s) => {
            // The output schema's own `$defs` resolve against it, not against the input's.
            let output = Schema {
                root: s,
                definitions: schema.definitions,
            };
            format!(
                "{{:ok true :value {} :value_kind :json}}",
                shape(output, s, 0)
            )
        }
        None => "{:ok true :value any :value_kind :json|:text}".to_string(),
    };
    out.push_str(&format!(
        "Returns:\n  {value}\n  or {{:ok false :reason kw :message string}}; check :ok first\n"
    ));
    if value.contains("{\"") {
        out.push_str(
            "  (keys are strings, as the answer has them; (:k m) reads key \"k\" too; a key \
             marked ? may be missing)\n",
        );
    }
    if let Some(path) = &tool.projection.result_path {
        out.push_str(&format!("  (:value is the answer's {path})\n"));
    }
    if let Some(style) = &tool.projection.pagination {
        let call = example_call(schema, tool).replacen("tool/call", "tool/pages", 1);
        out.push_str(&format!(
            "Pages ({} pagination, on :{}):\n  {} {{:max-pages 5}})\n  => {{:ok true :value \
             [every page's items] :pages n :complete bool :next position-to-go-on-from}}\n",
            style.style(),
            style.position_arg().replace('_', "-"),
            call.trim_end_matches(')'),
        ));
    }
    if tool.classified.effect == ptc_plan::Effect::Write {
        out.push_str(
            "  A write's answer also has :mutation_state (:applied, :not_applied, or \
             :indeterminate: it may have happened; read before writing again)\n",
        );
    }
    if let Some(notes) = tool.binding.notes() {
        out.push_str(&format!("Notes: {notes}\n"));
    }
    out
}

/// Whether the caller sees `server` at all: not when every one of its listed tools is hidden
/// (an upstream not listed yet is shown: what it has is not known).
pub fn shown(server: &ServerEntry, grant: &Grant) -> bool {
    server.tools().is_none() || !visible(server, grant).is_empty()
}

/// The tools of `server` the caller may see, in catalog order.
pub fn visible<'s>(server: &'s ServerEntry, grant: &Grant) -> Vec<&'s ToolEntry> {
    server
        .tools()
        .unwrap_or_default()
        .iter()
        .filter(|t| grant.sees(t))
        .collect()
}

/// `(dir 'server)`: one listing line per tool the caller may see, by name.
pub fn dir_lines(server: &ServerEntry, grant: &Grant) -> Vec<String> {
    let mut tools = visible(server, grant);
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools.into_iter().map(listing).collect()
}

/// `(doc 'server)`: the upstream's name, description and one listing line per tool the caller
/// may see.
pub fn server_doc_text(server: &ServerEntry, grant: &Grant) -> String {
    let mut text = format!("-------------------------\n{}\n", server.name);
    if !server.description().is_empty() {
        text.push_str(&format!("  {}\n", server.description()));
    }
    for t in visible(server, grant) {
        text.push_str(&format!("  {}\n", listing(t)));
    }
    text
}

/// `(meta 'server)`: the upstream's name, description and the names of the tools the caller
/// may see.
pub fn server_meta(server: &ServerEntry, grant: &Grant) -> Value {
    json!({
        "name": server.name,
        "description": server.description(),
        "tools": visible(server, grant).iter().map(|t| &t.name).collect::<Vec<_>>(),
    })
}

/// `(apropos query)`: the tools `query` finds, best first ([`crate::catalog::search`]), from `offset`,
/// at most `limit`. Only tools already listed are searched: apropos never connects to an
/// upstream.
pub fn apropos<'c>(
    catalog: &'c Catalog,
    grant: &Grant,
    query: &str,
    offset: usize,
    limit: usize,
) -> Vec<&'c ToolEntry> {
    crate::catalog::search::search(catalog, query)
        .into_iter()
        .filter(|h| grant.sees(h.tool))
        .skip(offset)
        .take(limit)
        .map(|h| h.tool)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool() -> ToolEntry {
        ToolEntry {
            server: "obs".into(),
            name: "list-traces".into(),
            description: "List traces\n\nNewest first.".into(),
            input_schema: json!({"type": "object", "properties": {
                "org_id": {"type": "string", "description": "Tenant."},
                "mode": {"type": "string", "enum": ["summary", "full"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500}},
                "required": ["org_id", "mode"]}),
            output_schema: Some(json!({"type": "object", "properties": {
                "traces": {"type": "array", "items": {"type": "object"}},
                "next_cursor": {"type": ["string", "null"]}}})),
            classified: Default::default(),
            disabled: None,
            max_response_bytes: 1 << 20,
            binding: crate::catalog::tests_support::operation_with("list_traces", |op| {
                op.default_args.insert("mode".into(), json!("summary"));
            }),
            projection: Default::default(),
            pin: None,
            index: 0,
        }
    }

    #[test]
    fn doc_shows_args_call_and_result_shape() {
        let server = ServerEntry::new(
            "obs",
            "",
            ptc_plan::TransportKind::Openapi,
            Default::default(),
        );
        let text = doc_text(&server, &tool());
        assert_eq!(
            text,
            "-------------------------\nobs/list-traces\n  List traces\n\n  Newest first.\nArgs:\n  \
             :org-id string (required) - Tenant.\n  :mode one of \"summary\" \"full\" (required) \
             (default \"summary\")\n  :limit integer 1..500\nCall:\n  (tool/call 'obs/list-traces \
             {:org-id \"...\" :mode \"summary\"})\n  or (obs/list-traces {:org-id \"...\" \
             :mode \"summary\"})\nReturns:\n  {:ok true :value {\"traces\"? [map] \
             \"next_cursor\"? string|null} :value_kind :json}\n  or {:ok false :reason kw :message \
             string}; check :ok first\n  (keys are strings, as the answer has them; (:k m) reads \
             key \"k\" too; a key marked ? may be missing)\n"
        );
        // The operation's notes close the doc.
        let mut noted = tool();
        if let crate::catalog::Binding::OpenApi(op) = &mut noted.binding {
            op.notes = Some("Slow for whole orgs.".into());
        }
        assert_eq!(
            doc_text(&server, &noted).strip_prefix(text.as_str()),
            Some("Notes: Slow for whole orgs.\n")
        );
    }

    /// A projected, paged tool says what `:value` is and how to page it.
    #[test]
    fn doc_shows_the_result_path_and_how_to_page() {
        let mut t = tool();
        t.output_schema = Some(json!({"type": "array", "items": {"type": "object"}}));
        t.projection = crate::call::projection::Projection {
            result_path: Some(ptc_plan::ValuePath::parse("$.traces").unwrap()),
            pagination: Some(ptc_plan::Pagination::Cursor {
                cursor_arg: "next_cursor".into(),
                next_cursor_path: ptc_plan::ValuePath::parse("$.next_cursor").unwrap(),
            }),
        };
        let server = ServerEntry::new(
            "obs",
            "",
            ptc_plan::TransportKind::Openapi,
            Default::default(),
        );
        let text = doc_text(&server, &t);
        assert!(
            text.contains(
                "{:ok true :value [map] :value_kind :json}\n  or {:ok false :reason kw :message \
                 string}; check :ok first\n  (:value is the answer's $.traces)\nPages (cursor \
                 pagination, on :next-cursor):\n  (tool/pages 'obs/list-traces {:org-id \"...\" \
                 :mode \"summary\"} {:max-pages 5})\n  => {:ok true :value [every page's items] \
                 :pages n :complete bool :next position-to-go-on-from}\n"
            ),
            "{text}"
        );
        assert!(!doc_text(&server, &tool()).contains("Pages"));
    }

    /// Arguments and results that are `$ref`s into the schema's own definitions are shown as
    /// what they refer to.
    #[test]
    fn doc_follows_references_into_definitions() {
        let mut t = tool();
        t.input_schema = json!({"type": "object", "properties": {
            "mode": {"$ref": "#/$defs/Mode"}}, "required": ["mode"],
            "$defs": {"Mode": {"type": "string", "enum": ["summary", "full"]}}});
        t.output_schema = Some(json!({"$ref": "#/$defs/Page", "$defs": {"Page": {
            "type": "object", "properties": {"next_cursor": {"type": ["string", "null"]}}}}}));
        t.binding = crate::catalog::tests_support::operation("list_traces");
        let server = ServerEntry::new(
            "obs",
            "",
            ptc_plan::TransportKind::Openapi,
            Default::default(),
        );
        let text = doc_text(&server, &t);
        assert!(
            text.contains(
                "Call:\n  (tool/call 'obs/list-traces {:mode \"summary\"})\n  or \
                 (obs/list-traces {:mode \"summary\"})\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("{:ok true :value {\"next_cursor\"? string|null} :value_kind :json}"),
            "{text}"
        );
    }

    /// An example call's placeholder per argument type: the first enum value, an integer's
    /// minimum (else 1), and a typical value of every other type; a type list's first non-null.
    #[test]
    fn example_calls_fill_each_type_with_a_placeholder() {
        let mut t = tool();
        t.input_schema = json!({"type": "object", "properties": {
            "a": {"type": "integer", "minimum": 5}, "b": {"type": "integer"},
            "c": {"type": "number"}, "d": {"type": "boolean"}, "e": {"type": "array"},
            "f": {"type": "object"}, "g": {"type": ["null", "boolean"]}, "h": {"type": "string"},
            "i": {}, "j": {"type": ["null"]}},
            "required": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]});
        let schema = Schema {
            root: &t.input_schema,
            definitions: None,
        };
        assert_eq!(
            example_call(schema, &t),
            "(tool/call 'obs/list-traces {:a 5 :b 1 :c 1.0 :d true :e [] :f {} :g true :h \"...\" \
             :i \"...\" :j \"...\"})"
        );
        // An object shows its required keys, two levels deep, through references.
        let defs: crate::call::validate::Definitions = serde_json::from_value(json!({
            "Body": {"type": "object", "required": ["label", "meta"], "properties": {
                "label": {"type": "string"}, "note": {"type": "string"},
                "meta": {"type": "object", "required": ["deep"], "properties": {
                    "deep": {"type": "object", "required": ["x"]}}}}}
        }))
        .unwrap();
        t.input_schema = json!({"type": "object", "required": ["body"],
            "properties": {"body": {"$ref": "#/$defs/Body"}}});
        let schema = Schema {
            root: &t.input_schema,
            definitions: Some(&defs),
        };
        assert_eq!(
            example_call(schema, &t),
            "(tool/call 'obs/list-traces {:body {:label \"...\" :meta {:deep {}}}})"
        );
    }

    /// A tool with no arguments says so, one whose result is `null` returns nil, and one with no
    /// result schema returns anything.
    #[test]
    fn doc_shows_no_args_a_null_result_and_an_unknown_one() {
        let server = ServerEntry::new(
            "obs",
            "",
            ptc_plan::TransportKind::Openapi,
            Default::default(),
        );
        let mut t = tool();
        t.input_schema = json!({"type": "object", "properties": {}});
        t.output_schema = Some(json!({"type": "null"}));
        let text = doc_text(&server, &t);
        assert!(text.contains("Args:\n  none\nCall:\n"), "{text}");
        assert!(
            text.contains("Returns:\n  {:ok true :value nil :value_kind :none}\n"),
            "{text}"
        );
        t.output_schema = None;
        let text = doc_text(&server, &t);
        assert!(
            text.contains("Returns:\n  {:ok true :value any :value_kind :json|:text}\n"),
            "{text}"
        );
    }

    /// A result shape: an untyped schema with properties is a map; fields are shown two levels
    /// deep, deeper ones as `map` / `[any]`; a field its object does not require is marked `?`.
    #[test]
    fn result_shapes_stop_two_levels_down() {
        let schema = Schema {
            root: &Value::Null,
            definitions: None,
        };
        let s = json!({"required": ["a"], "properties": {"a": {"type": "object",
            "required": ["l", "elsewhere"], "properties": {
            "b": {"type": "object", "properties": {"c": {"type": "integer"}}},
            "l": {"type": "array", "items": {"type": "integer"}}}}}});
        assert_eq!(shape(schema, &s, 0), r#"{"a" {"b"? map "l" [any]}}"#);
        assert_eq!(shape(schema, &json!({}), 0), "any");
    }
}
