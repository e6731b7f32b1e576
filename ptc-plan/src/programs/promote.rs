//! Proposing a declared program from a program that ran (`ptc promote`): what a person reviews
//! before the program becomes a tool. The proposal is only a draft; the plan compiler checks it
//! like any declared program.
//!
//! - A tool call's *required* argument written as a literal (`:org-id "org_acme"`) becomes a
//!   parameter named after the argument, with the argument's schema, when every call that gives
//!   that argument gives the same value; the text then reads `data/<name>` there. Optional
//!   arguments (`:limit 200`) are how the question was asked, and stay.
//! - Every `data/<key>` the program reads becomes a parameter: with the schema of the argument it
//!   is passed to, else the type of the value it had when the program ran, else any type.
//! - The result schema is the shape of the value the program answered, when it is known.
//! - The writes it calls are its `writes`.

use std::collections::BTreeMap;

use ptc_lisp::{LiteralArg, Value as Lisp};
use serde_json::{Map, Value, json};

use super::tools::{Listed, Tool, tools_of};
use crate::call_form::{self, FormArg};
use crate::plan::{Plan, find_tool};
use crate::validate::resolve_name;

/// A program proposed for review.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The program text, with the parameters read as `data/<name>`.
    pub source: String,
    /// Its declaration (without `file`): description, parameters, result and writes.
    pub declaration: Value,
    /// The literals made parameters: `(name, the literal as written)`.
    pub lifted: Vec<(String, String)>,
}

/// Keywords of an argument's schema a parameter keeps: what says which values it takes.
const KEPT: &[&str] = &[
    "type",
    "enum",
    "const",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "items",
    "description",
];

/// How deep the result's shape is described.
const SHAPE_DEPTH: usize = 4;

/// The draft of program `source` over `plan`'s tools, described by `description`; `context`
/// and `answer` are what it was given and answered when it ran, when known. `None` when the text
/// does not read (the check names where).
pub fn propose(
    plan: &Plan,
    source: &str,
    description: &str,
    context: Option<&Map<String, Value>>,
    answer: Option<&Value>,
) -> Option<Proposal> {
    let servers: Vec<&str> = plan.upstreams.iter().map(|u| u.name.as_str()).collect();
    let named = |s: &str| call_form::is_call_head(s, &servers);
    let uses = ptc_lisp::uses(source, &named).ok()?;
    // Per argument name: the values written for it (as literals) and its schema.
    let mut literals: BTreeMap<String, (Vec<Lisp>, Value)> = BTreeMap::new();
    let mut flows: BTreeMap<String, Value> = BTreeMap::new();
    let mut writes: Vec<String> = Vec::new();
    for (head, site) in &uses.calls {
        let (_, args) = call_form::site_args(head, &site.args);
        let Ok(call) = call_form::read(&args) else {
            continue;
        };
        let Some(up) = plan.upstream(&call.server) else {
            continue;
        };
        let Listed::Tools(tools) = tools_of(up) else {
            continue;
        };
        let Some(tool) = find_tool(&tools, &call.tool, |t| t.name, |t| t.operation_id) else {
            continue;
        };
        if !tool.reads() {
            let q = format!("{}/{}", call.server, tool.name);
            if !writes.contains(&q) {
                writes.push(q);
            }
        }
        let Some(LiteralArg::Map(entries)) = &call.args else {
            continue;
        };
        for (k, v) in entries {
            let Some(written) = k.value().map(call_form::key_text) else {
                continue;
            };
            let Some((wire, schema, required)) = argument(tool, &written) else {
                continue;
            };
            match v {
                LiteralArg::Const(value @ (Lisp::Str(_) | Lisp::Int(_) | Lisp::Float(_)))
                    if required =>
                {
                    let entry = literals.entry(wire).or_insert((Vec::new(), schema));
                    entry.0.push(value.clone());
                }
                LiteralArg::Data(key) => {
                    flows.entry(key.clone()).or_insert(schema);
                }
                _ => {}
            }
        }
    }
    let mut text = source.to_string();
    let mut properties = Map::new();
    let mut lifted = Vec::new();
    for (wire, (values, schema)) in literals {
        let first = &values[0];
        if values.iter().any(|v| v != first) || uses.data.iter().any(|(k, _)| *k == wire) {
            continue;
        }
        let Some(rewritten) = lift(&text, &wire, first) else {
            continue;
        };
        text = rewritten;
        lifted.push((wire.clone(), first.to_string()));
        properties.insert(wire, schema);
    }
    for (key, _) in &uses.data {
        if properties.contains_key(key) {
            continue;
        }
        let schema = flows.get(key).cloned().unwrap_or_else(|| {
            context
                .and_then(|c| c.get(key))
                .map_or_else(|| json!({}), |v| json!({"type": json_type(v)}))
        });
        properties.insert(key.clone(), schema);
    }
    let required: Vec<&String> = properties.keys().collect();
    let mut declaration = json!({
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    });
    if let Some(answer) = answer {
        declaration["result"] = shape(&[answer], SHAPE_DEPTH);
    }
    if !writes.is_empty() {
        writes.sort();
        declaration["writes"] = json!(writes);
    }
    Some(Proposal {
        source: text,
        declaration,
        lifted,
    })
}

/// Argument `written` of `tool`: its wire name, its schema as a parameter's, and whether the
/// tool requires it.
fn argument(tool: &Tool, written: &str) -> Option<(String, Value, bool)> {
    let (props, required) = tool.schema.properties();
    let wire = resolve_name(props?, written)?;
    let prop = props?.get(wire)?;
    let target = tool.schema.resolve(prop).unwrap_or(prop);
    let mut schema: Map<String, Value> = KEPT
        .iter()
        .filter_map(|k| target.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    if let Some(d) = prop.get("description") {
        schema.insert("description".into(), d.clone());
    }
    Some((
        wire.to_string(),
        Value::Object(schema),
        required.contains(&wire),
    ))
}

/// `text` with each `:<arg> <value>` (the argument written kebab or as on the wire) reading
/// `:<arg> data/<wire>`; `None` when it is written some other way.
fn lift(text: &str, wire: &str, value: &Lisp) -> Option<String> {
    let keys = [wire.replace('_', "-"), wire.to_string()];
    let alternatives: Vec<String> = keys.iter().map(|k| regex::escape(k)).collect();
    let pattern = format!(
        r"(:(?:{})\s+){}([\s,}}])",
        alternatives.join("|"),
        regex::escape(&value.to_string())
    );
    let re = regex::Regex::new(&pattern).ok()?;
    if !re.is_match(text) {
        return None;
    }
    Some(
        re.replace_all(text, format!("${{1}}data/{wire}${{2}}"))
            .into_owned(),
    )
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if !n.is_f64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The shape the `samples` share: their type (or types), and below it, to `depth`, the items
/// of arrays and the properties of objects (required where every sample has them).
fn shape(samples: &[&Value], depth: usize) -> Value {
    let mut types: Vec<&str> = samples.iter().map(|v| json_type(v)).collect();
    types.sort_unstable();
    types.dedup();
    // An integer is a number too: a mix is numbers.
    if types == ["integer", "number"] {
        types = vec!["number"];
    }
    let mut out = match types.as_slice() {
        [] => return json!({}),
        [one] => json!({"type": one}),
        many => json!({"type": many}),
    };
    if depth == 0 || types.len() != 1 {
        return out;
    }
    match types[0] {
        "array" => {
            let items: Vec<&Value> = samples
                .iter()
                .filter_map(|v| v.as_array())
                .flatten()
                .collect();
            if !items.is_empty() {
                out["items"] = shape(&items, depth - 1);
            }
        }
        "object" => {
            let objects: Vec<&Map<String, Value>> =
                samples.iter().filter_map(|v| v.as_object()).collect();
            let mut keys: Vec<&String> = objects.iter().flat_map(|o| o.keys()).collect();
            keys.sort();
            keys.dedup();
            let mut properties = Map::new();
            let mut required = Vec::new();
            for key in keys {
                let values: Vec<&Value> = objects.iter().filter_map(|o| o.get(key)).collect();
                if values.len() == objects.len() {
                    required.push(key.clone());
                }
                properties.insert(key.clone(), shape(&values, depth - 1));
            }
            out["properties"] = Value::Object(properties);
            out["required"] = json!(required);
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_is_what_every_sample_shares() {
        let answer = json!([["timeout", 64], ["tool_error", 47]]);
        assert_eq!(
            shape(&[&answer], SHAPE_DEPTH),
            json!({"type": "array", "items": {"type": "array", "items": {"type": ["integer", "string"]}}})
        );
        let rows = json!([{"a": 1, "b": "x"}, {"a": 2.5}]);
        assert_eq!(
            shape(&[&rows], SHAPE_DEPTH),
            json!({"type": "array", "items": {"type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "string"}},
                "required": ["a"]}})
        );
        assert_eq!(shape(&[&json!([])], SHAPE_DEPTH), json!({"type": "array"}));
        // Described to the depth asked, arrays and objects alike.
        assert_eq!(
            shape(&[&json!([[1]])], 1),
            json!({"type": "array", "items": {"type": "array"}})
        );
        assert_eq!(
            shape(&[&json!({"a": [1]})], 1),
            json!({"type": "object",
            "properties": {"a": {"type": "array"}}, "required": ["a"]})
        );
    }

    #[test]
    fn a_literal_is_lifted_where_it_is_written_as_the_argument() {
        let text = "(obs/list {:org-id \"acme\" :limit 3})\n(obs/get {:org_id \"acme\", :id x})";
        assert_eq!(
            lift(text, "org_id", &Lisp::Str("acme".into())).as_deref(),
            Some(
                "(obs/list {:org-id data/org_id :limit 3})\n(obs/get {:org_id data/org_id, :id x})"
            )
        );
        assert_eq!(lift(text, "org_id", &Lisp::Str("other".into())), None);
        assert_eq!(
            lift("(f {:n 30})", "n", &Lisp::Int(3)),
            None,
            "a prefix of a literal is not the literal"
        );
    }
}
