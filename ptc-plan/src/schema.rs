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
//! References are followed here only: the compiler, the argument validator (whose schemas may
//! carry their own `$defs`, see [`Scope`]) and the code generator all ask this module, so they
//! agree on what a reference names, on sibling keywords and on cycles.
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

/// Why a reference cannot be followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaErrorKind {
    /// The `$ref` names nothing in scope.
    Missing,
    /// The references lead back to one already followed: the chain never reaches a schema.
    Cycle,
}

/// A reference that cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// What is wrong, naming the reference.
    pub message: String,
    /// Which of the ways to fail it is, for callers that treat them differently.
    pub kind: SchemaErrorKind,
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

/// The table of named schemas a `$ref` points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `#/$defs/Name`: what the plan writes, and what a standalone schema's own `$defs` hold.
    Defs,
    /// `#/definitions/Name`: a draft-07 schema's own `definitions` (MCP servers still send them).
    Definitions,
    /// `#/components/schemas/Name`: an OpenAPI component, kept by the plan under its name.
    Components,
}

/// A `$ref` into named schemas, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference<'r> {
    /// Which table it points into.
    pub table: Table,
    /// The name in that table, JSON-pointer escapes (`~1`, `~0`) undone.
    pub name: Cow<'r, str>,
}

impl<'r> Reference<'r> {
    /// The reference written in `text`, when it points into a table of named schemas; `None`
    /// for any other (another document, a pointer into the schema's own properties), which no
    /// caller follows.
    pub fn parse(text: &'r str) -> Option<Self> {
        let (table, name) = [
            (Table::Defs, DEFS_PREFIX),
            (Table::Definitions, "#/definitions/"),
            (Table::Components, "#/components/schemas/"),
        ]
        .into_iter()
        .find_map(|(table, prefix)| Some((table, text.strip_prefix(prefix)?)))?;
        let name = if name.contains('~') {
            Cow::Owned(name.replace("~1", "/").replace("~0", "~"))
        } else {
            Cow::Borrowed(name)
        };
        Some(Reference { table, name })
    }
}

/// Where a definition was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// In the schema's own `$defs` or `definitions`.
    Own,
    /// In the plan's definitions.
    Plan,
}

/// The named schemas the `$ref`s of one schema may name: the schema's own (a standalone schema
/// carries them) and the plan's. Following references is done here only, for the compiler, the
/// argument validator and the code generator alike.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    /// The top-level `$defs` of the schema being read.
    pub own_defs: Option<&'a Map<String, Value>>,
    /// The top-level `definitions` of the schema being read.
    pub own_definitions: Option<&'a Map<String, Value>>,
    /// The plan's named definitions.
    pub plan: Option<&'a BTreeMap<String, Value>>,
}

impl<'a> Scope<'a> {
    /// The plan's definitions alone (what a compiled tool schema refers to).
    pub fn plan(definitions: &'a BTreeMap<String, Value>) -> Self {
        Scope {
            plan: Some(definitions),
            ..Scope::default()
        }
    }

    /// The scope of the schema `root`: its own top-level `$defs` and `definitions`, then `plan`.
    pub fn of(root: &'a Value, plan: Option<&'a BTreeMap<String, Value>>) -> Self {
        let own = |key: &str| root.get(key).and_then(Value::as_object);
        Scope {
            own_defs: own("$defs"),
            own_definitions: own("definitions"),
            plan,
        }
    }

    /// The schema `reference` names, one step (a definition may itself be a reference), and
    /// where it was found. The schema's own tables win over the plan's: `#` is that schema.
    pub fn lookup(&self, reference: &Reference<'_>) -> Option<(Origin, &'a Value)> {
        let name = reference.name.as_ref();
        let own = match reference.table {
            Table::Defs => self.own_defs,
            Table::Definitions => self.own_definitions,
            Table::Components => None,
        };
        own.and_then(|o| o.get(name))
            .map(|s| (Origin::Own, s))
            .or_else(|| Some((Origin::Plan, self.plan?.get(name)?)))
    }

    /// How many references a chain can follow before one repeats.
    fn longest_chain(&self) -> usize {
        let len = |m: Option<&Map<String, Value>>| m.map_or(0, Map::len);
        len(self.own_defs) + len(self.own_definitions) + self.plan.map_or(0, BTreeMap::len)
    }

    /// Follows the chain of references at `schema` to the schema it ends at, handing each
    /// `$ref` object that carries other keywords to `layer`, outermost first.
    fn follow(
        &self,
        schema: &'a Value,
        mut layer: impl FnMut(&'a Map<String, Value>),
    ) -> Result<&'a Value, SchemaError> {
        // A chain longer than the number of named schemas has repeated one: no set of the names
        // seen is kept on this path, which every checked value takes.
        let longest = self.longest_chain();
        let mut current = schema;
        let mut hops = 0;
        while let Some(text) = current.get("$ref").and_then(Value::as_str) {
            let Some(reference) = Reference::parse(text) else {
                break;
            };
            let Some((_, next)) = self.lookup(&reference) else {
                return Err(SchemaError {
                    message: format!("`$ref` `{text}` names no definition"),
                    kind: SchemaErrorKind::Missing,
                });
            };
            if hops == longest {
                return Err(self.cycle(schema));
            }
            hops += 1;
            if let Value::Object(m) = current
                && m.len() > 1
            {
                layer(m);
            }
            current = next;
        }
        Ok(current)
    }

    /// The error for the cycle the chain at `schema` runs into, naming the chain up to the
    /// first repeat.
    fn cycle(&self, schema: &'a Value) -> SchemaError {
        let mut seen = HashSet::new();
        let mut chain: Vec<Cow<'_, str>> = Vec::new();
        let mut current = schema;
        while let Some(text) = current.get("$ref").and_then(Value::as_str)
            && let Some(reference) = Reference::parse(text)
        {
            let repeat = !seen.insert(text);
            chain.push(reference.name.clone());
            match self.lookup(&reference) {
                Some((_, next)) if !repeat => current = next,
                _ => break,
            }
        }
        SchemaError {
            message: format!("`$ref` cycle: {}", chain.join(" -> ")),
            kind: SchemaErrorKind::Cycle,
        }
    }

    /// The schema the chain of references at `schema` ends at (`schema` itself when it is no
    /// reference), without the keywords written beside the references: for callers that want
    /// the named definition, not the constraint in force (see [`Scope::resolve`]).
    pub fn target(&self, schema: &'a Value) -> Result<&'a Value, SchemaError> {
        self.follow(schema, |_| {})
    }

    /// The schema in force at `schema`: `schema` itself, or, when it is a reference, the schema
    /// its chain of references ends at with the keywords written beside each `$ref` laid over it
    /// (they win, as annotations written beside a reference do). Borrowed when nothing is laid
    /// over, which is the common case and costs no copy.
    ///
    /// Only this one node is resolved: the subschemas of the result may still be references.
    pub fn resolve(&self, schema: &'a Value) -> Result<Cow<'a, Value>, SchemaError> {
        let mut layers: Vec<&Map<String, Value>> = Vec::new();
        let target = self.follow(schema, |m| layers.push(m))?;
        if layers.is_empty() {
            return Ok(Cow::Borrowed(target));
        }
        let mut out = match target {
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
}

fn lookup<'a>(
    name: &str,
    definitions: &'a BTreeMap<String, Value>,
) -> Result<&'a Value, SchemaError> {
    definitions.get(name).ok_or_else(|| SchemaError {
        message: format!("`$ref` `{DEFS_PREFIX}{name}` names no definition"),
        kind: SchemaErrorKind::Missing,
    })
}

/// The schema in force at `schema`, a schema of the plan whose references name `definitions`:
/// see [`Scope::resolve`].
pub fn resolve<'a>(
    schema: &'a Value,
    definitions: &'a BTreeMap<String, Value>,
) -> Result<Cow<'a, Value>, SchemaError> {
    Scope::plan(definitions).resolve(schema)
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
    fn cycles_and_missing_names_are_told_apart_at_every_length() {
        // A pure self-reference in a schema's own `$defs`: reported, no hang, no overflow.
        let own = json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}});
        let e = Scope::of(&own, None).resolve(&own).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::Cycle);
        assert_eq!(e.message, "`$ref` cycle: A -> A");
        // A chain as long as the definitions are many ends in a missing name: that is what is
        // reported, not a cycle (the chain is exactly as long as a chain can be without one).
        let d = defs(&[
            ("A", json!({"$ref": "#/$defs/B"})),
            ("B", json!({"$ref": "#/$defs/Gone"})),
        ]);
        let e = resolve(&json!({"$ref": "#/$defs/A"}), &d).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::Missing);
        assert_eq!(e.message, "`$ref` `#/$defs/Gone` names no definition");
        // ... and one that leads back is a cycle, entered from outside it.
        let d = defs(&[
            ("A", json!({"$ref": "#/$defs/B"})),
            ("B", json!({"$ref": "#/$defs/A"})),
            ("C", json!({"$ref": "#/$defs/A"})),
        ]);
        let e = resolve(&json!({"$ref": "#/$defs/C"}), &d).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::Cycle);
        assert_eq!(e.message, "`$ref` cycle: C -> A -> B -> A");
    }

    /// A chain may be as long as the named schemas of all three tables together (the schema's
    /// own `$defs` and `definitions`, and the plan's) without being taken for a cycle.
    #[test]
    fn a_chain_through_every_table_may_visit_each_name_once() {
        let plan = defs(&[
            ("D", json!({"$ref": "#/$defs/E"})),
            ("E", json!({"type": "string"})),
        ]);
        let root = json!({
            "$ref": "#/$defs/A",
            "$defs": {"A": {"$ref": "#/definitions/B"}},
            "definitions": {"B": {"$ref": "#/definitions/C"}, "C": {"$ref": "#/components/schemas/D"}},
        });
        let scope = Scope::of(&root, Some(&plan));
        assert_eq!(scope.target(&root).unwrap(), &json!({"type": "string"}));
        // One more hop, back to the start, and it is a cycle.
        let plan = defs(&[
            ("D", json!({"$ref": "#/$defs/E"})),
            ("E", json!({"$ref": "#/$defs/A"})),
        ]);
        let scope = Scope::of(&root, Some(&plan));
        assert_eq!(
            scope.target(&root).unwrap_err().kind,
            SchemaErrorKind::Cycle
        );
    }

    /// A boolean definition laid under siblings keeps its meaning: `false` accepts nothing, `true`
    /// adds no constraint.
    #[test]
    fn boolean_definitions_keep_their_meaning_under_siblings() {
        let d = defs(&[("Never", json!(false)), ("Any", json!(true))]);
        let never = json!({"$ref": "#/$defs/Never", "description": "x"});
        assert_eq!(
            *resolve(&never, &d).unwrap(),
            json!({"not": {}, "description": "x"})
        );
        let any = json!({"$ref": "#/$defs/Any", "description": "x"});
        assert_eq!(*resolve(&any, &d).unwrap(), json!({"description": "x"}));
    }

    #[test]
    fn long_chains_resolve() {
        let n = 20_000;
        let d: BTreeMap<String, Value> = (0..n)
            .map(|i| {
                let next = if i + 1 < n {
                    json!({"$ref": format!("#/$defs/D{}", i + 1)})
                } else {
                    json!({"type": "string"})
                };
                (format!("D{i}"), next)
            })
            .collect();
        let root = json!({"$ref": "#/$defs/D0", "maxLength": 3});
        assert_eq!(
            *resolve(&root, &d).unwrap(),
            json!({"type": "string", "maxLength": 3})
        );
    }

    /// A schema's own `$defs` win over the plan's (`#` is that schema); `definitions` and
    /// OpenAPI component references are followed too, escapes undone; a reference elsewhere is
    /// left as it is.
    #[test]
    fn a_scope_looks_in_the_schemas_own_tables_first() {
        let plan = defs(&[
            ("Mode", json!({"type": "string", "title": "plan"})),
            ("a/b", json!({"type": "integer"})),
        ]);
        let root = json!({
            "$defs": {"Mode": {"type": "string", "title": "own"}},
            "definitions": {"Old": {"type": "boolean"}},
        });
        let scope = Scope::of(&root, Some(&plan));
        let target = |text: &str| scope.target(&json!({"$ref": text})).cloned();
        assert_eq!(target("#/$defs/Mode").unwrap()["title"], "own");
        assert_eq!(
            target("#/components/schemas/Mode").unwrap()["title"],
            "plan"
        );
        assert_eq!(target("#/definitions/Old").unwrap()["type"], "boolean");
        assert_eq!(target("#/$defs/a~1b").unwrap()["type"], "integer");
        assert_eq!(
            target("#/$defs/Old").unwrap_err().kind,
            SchemaErrorKind::Missing
        );
        let elsewhere = json!({"$ref": "other.json#/Mode", "type": "string"});
        assert!(std::ptr::eq(scope.target(&elsewhere).unwrap(), &elsewhere));
        let reference = Reference::parse("#/$defs/Mode").unwrap();
        assert_eq!(scope.lookup(&reference).unwrap().0, Origin::Own);
        let reference = Reference::parse("#/components/schemas/Mode").unwrap();
        assert_eq!(scope.lookup(&reference).unwrap().0, Origin::Plan);
        assert_eq!(Reference::parse("#/properties/x"), None);
    }

    /// `target` is the named definition alone, `resolve` the constraint in force: the same
    /// schema, with what is written beside the `$ref` laid over it.
    #[test]
    fn target_leaves_the_siblings_out_and_resolve_lays_them_over() {
        let d = defs(&[("Code", json!({"type": "string"}))]);
        let scope = Scope::plan(&d);
        let bare = json!({"$ref": "#/$defs/Code"});
        assert!(matches!(scope.resolve(&bare).unwrap(), Cow::Borrowed(_)));
        let with = json!({"$ref": "#/$defs/Code", "maxLength": 3});
        assert_eq!(*scope.target(&with).unwrap(), d["Code"]);
        assert_eq!(
            *scope.resolve(&with).unwrap(),
            json!({"type": "string", "maxLength": 3})
        );
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
