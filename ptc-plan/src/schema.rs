//! Named schemas: how a plan's tool schemas refer to its definitions, and how to follow them.
//!
//! The OpenAPI compiler keeps every component schema the included operations reach once, by
//! name, in [`OpenApiPlan::definitions`](crate::OpenApiPlan::definitions). Tool schemas (and the
//! definitions themselves) point at them with `{"$ref": "#/$defs/<Name>"}`, so a shared or
//! recursive component costs its size once and recursion needs no special case. Names are made
//! of `A-Z a-z 0-9 . _ -` only, so they need no escaping in a JSON pointer or a URI fragment.
//!
//! A `$ref` object may carry sibling keywords (3.1 documents write `description` next to a
//! `$ref`); as in JSON Schema 2020-12 they apply in addition to the definition, and
//! [`resolve`] lays them over it.
//!
//! ```
//! use std::collections::BTreeMap;
//! use serde_json::json;
//!
//! let definitions = BTreeMap::from([(
//!     "Node".to_string(),
//!     json!({"type": "object", "properties": {
//!         "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}),
//! )]);
//! let output = json!({"$ref": "#/$defs/Node", "description": "the root"});
//!
//! let root = ptc_plan::schema::resolve(&output, &definitions).unwrap();
//! assert_eq!(root["type"], "object");
//! assert_eq!(root["description"], "the root");
//!
//! let standalone = ptc_plan::schema::bundle(&output, &definitions).unwrap();
//! assert_eq!(standalone["$defs"]["Node"], definitions["Node"]);
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};

/// What every reference into the definitions starts with.
pub const DEFS_PREFIX: &str = "#/$defs/";

/// Keywords whose value is one subschema.
pub(crate) const SUBSCHEMA: &[&str] = &[
    "additionalProperties",
    "items",
    "not",
    "contains",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
];
/// Keywords whose value is an array of subschemas.
pub(crate) const SUBSCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
pub(crate) const SUBSCHEMA_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// A reference that cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// What is wrong, naming the reference.
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SchemaError {}

/// The definition name `schema` refers to (`{"$ref": "#/$defs/Trace"}` gives `Trace`), when it
/// is a reference into the definitions.
pub fn ref_name(schema: &Value) -> Option<&str> {
    schema.get("$ref")?.as_str()?.strip_prefix(DEFS_PREFIX)
}

fn lookup<'a>(
    name: &str,
    definitions: &'a BTreeMap<String, Value>,
) -> Result<&'a Value, SchemaError> {
    definitions.get(name).ok_or_else(|| SchemaError {
        message: format!("`$ref` `{DEFS_PREFIX}{name}` names no definition"),
    })
}

/// The schema in force at `schema`: `schema` itself, or, when it is a `$ref` into `definitions`,
/// the definition it names (through chains of references), with the keywords written next to
/// each `$ref` laid over it (they win, as annotations written beside a reference do).
///
/// Only this one node is resolved: the subschemas of the result may still be references.
pub fn resolve<'a>(
    schema: &'a Value,
    definitions: &'a BTreeMap<String, Value>,
) -> Result<Cow<'a, Value>, SchemaError> {
    let mut layers: Vec<&Map<String, Value>> = Vec::new();
    let mut current = schema;
    let mut chain: Vec<&str> = Vec::new();
    while let Some(name) = ref_name(current) {
        if chain.contains(&name) {
            chain.push(name);
            return Err(SchemaError {
                message: format!("`$ref` cycle: {}", chain.join(" -> ")),
            });
        }
        chain.push(name);
        if let Value::Object(m) = current
            && m.len() > 1
        {
            layers.push(m);
        }
        current = lookup(name, definitions)?;
    }
    if layers.is_empty() {
        return Ok(Cow::Borrowed(current));
    }
    let mut out = match current {
        Value::Object(m) => m.clone(),
        Value::Bool(false) => Map::from_iter([("not".to_string(), Value::Object(Map::new()))]),
        // `true` and (invalid) scalars add no constraint.
        _ => Map::new(),
    };
    // Innermost first, so what is written at the outermost reference wins.
    for layer in layers.into_iter().rev() {
        for (k, v) in layer {
            if k != "$ref" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Cow::Owned(Value::Object(out)))
}

/// The names of the definitions `schema` refers to, directly or through other definitions, in
/// the order they are first reached. References the schema's own top-level `$defs` satisfy are
/// left to it.
pub fn referenced<'a>(
    schema: &'a Value,
    definitions: &'a BTreeMap<String, Value>,
) -> Result<Vec<&'a str>, SchemaError> {
    let own = schema.get("$defs").and_then(Value::as_object);
    let mut names: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    // An explicit work list: schemas nest deeply and definitions chain without bound.
    let mut stack: Vec<&Value> = vec![schema];
    while let Some(node) = stack.pop() {
        let Value::Object(map) = node else { continue };
        if let Some(name) = ref_name(node)
            && !own.is_some_and(|o| o.contains_key(name))
            && seen.insert(name)
        {
            names.push(name);
            stack.push(lookup(name, definitions)?);
        }
        // Reverse order keeps "first reached" close to reading order.
        for (key, value) in map.iter().rev() {
            let key = key.as_str();
            if SUBSCHEMA.contains(&key) {
                stack.push(value);
            } else if SUBSCHEMA_LIST.contains(&key) {
                if let Value::Array(items) = value {
                    stack.extend(items.iter().rev());
                }
            } else if SUBSCHEMA_MAP.contains(&key)
                && let Value::Object(subs) = value
            {
                stack.extend(subs.values().rev());
            }
        }
    }
    Ok(names)
}

/// `schema` as a standalone JSON Schema: a copy with every definition it reaches under `$defs`
/// (what an MCP `tools/list` answer or a discovery result needs).
pub fn bundle(schema: &Value, definitions: &BTreeMap<String, Value>) -> Result<Value, SchemaError> {
    let names = referenced(schema, definitions)?;
    let mut out = schema.clone();
    if names.is_empty() {
        return Ok(out);
    }
    let mut defs = Map::new();
    for name in names {
        defs.insert(name.to_string(), lookup(name, definitions)?.clone());
    }
    match &mut out {
        Value::Object(m) => match m.get_mut("$defs") {
            Some(Value::Object(own)) => own.extend(defs),
            _ => {
                m.insert("$defs".into(), Value::Object(defs));
            }
        },
        // Only objects hold references; kept total for any input.
        other => {
            *other = serde_json::json!({"allOf": [other.clone()], "$defs": defs});
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs(entries: &[(&str, Value)]) -> BTreeMap<String, Value> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn resolve_follows_chains_and_lays_siblings_over_the_definition() {
        let d = defs(&[
            (
                "A",
                json!({"$ref": "#/$defs/B", "description": "from A", "title": "A"}),
            ),
            ("B", json!({"type": "string", "description": "from B"})),
        ]);
        let plain = json!({"type": "integer"});
        assert!(matches!(resolve(&plain, &d).unwrap(), Cow::Borrowed(_)));
        let direct = json!({"$ref": "#/$defs/B"});
        assert_eq!(*resolve(&direct, &d).unwrap(), d["B"]);
        let outer = json!({"$ref": "#/$defs/A", "description": "outer"});
        assert_eq!(
            *resolve(&outer, &d).unwrap(),
            json!({"type": "string", "description": "outer", "title": "A"})
        );
    }

    #[test]
    fn resolve_reports_cycles_and_missing_names() {
        let d = defs(&[
            ("A", json!({"$ref": "#/$defs/B"})),
            ("B", json!({"$ref": "#/$defs/A"})),
        ]);
        let e = resolve(&json!({"$ref": "#/$defs/A"}), &d).unwrap_err();
        assert_eq!(e.message, "`$ref` cycle: A -> B -> A");
        let e = resolve(&json!({"$ref": "#/$defs/Nope"}), &d).unwrap_err();
        assert_eq!(e.message, "`$ref` `#/$defs/Nope` names no definition");
    }

    #[test]
    fn bundle_carries_exactly_the_transitively_referenced_definitions() {
        let d = defs(&[
            (
                "Trace",
                json!({"type": "object", "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/Step"}}}}),
            ),
            (
                "Step",
                json!({"type": "object", "properties": {"parent": {"$ref": "#/$defs/Step"}}}),
            ),
            ("Unused", json!({"type": "string"})),
        ]);
        let schema = json!({"type": "object", "properties": {"trace": {"$ref": "#/$defs/Trace"}}});
        assert_eq!(referenced(&schema, &d).unwrap(), ["Trace", "Step"]);
        let b = bundle(&schema, &d).unwrap();
        assert_eq!(
            b["$defs"],
            json!({"Trace": d["Trace"].clone(), "Step": d["Step"].clone()})
        );
        assert_eq!(b["properties"], schema["properties"]);
        // Nothing referenced: the schema as it is.
        let plain = json!({"type": "string"});
        assert_eq!(bundle(&plain, &d).unwrap(), plain);
        // A dangling reference is an error, not a silently incomplete schema.
        let dangling = json!({"items": {"$ref": "#/$defs/Gone"}});
        assert!(bundle(&dangling, &d).unwrap_err().message.contains("Gone"));
    }

    #[test]
    fn a_schemas_own_defs_are_kept_and_satisfy_its_references() {
        let schema = json!({"$ref": "#/$defs/Local", "$defs": {"Local": {"type": "string"}}});
        assert!(referenced(&schema, &BTreeMap::new()).unwrap().is_empty());
        assert_eq!(bundle(&schema, &BTreeMap::new()).unwrap(), schema);
    }

    #[test]
    fn deep_definition_chains_do_not_overflow_the_stack() {
        let n = 20_000;
        let d: BTreeMap<String, Value> = (0..n)
            .map(|i| {
                let next = if i + 1 < n {
                    json!({"type": "object", "properties": {"next": {"$ref": format!("#/$defs/D{}", i + 1)}}})
                } else {
                    json!({"type": "string"})
                };
                (format!("D{i}"), next)
            })
            .collect();
        let root = json!({"$ref": "#/$defs/D0"});
        let names = referenced(&root, &d).unwrap();
        assert_eq!(names.len(), n);
    }
}
