//! Local `$ref` resolution, and schemas in their stored form: every schema `$ref` becomes a
//! reference to a named definition (see [`crate::schema`]), kept once per upstream, with 3.0 →
//! 3.1 normalisation on the way.
//!
//! Only the schemas reachable from included operations are visited, so compiling a few
//! operations of a multi-megabyte document costs little beyond parsing it. A definition is
//! converted once however often it is referenced, so shared and recursive components cost their
//! own size, never their expansion.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::document::Version;
use super::normalize;
use crate::diagnostic::pointer_join;
use crate::schema::{DEFS_PREFIX, SUBSCHEMA, SUBSCHEMA_LIST, SUBSCHEMA_MAP};

/// Deepest nesting one stored schema (a tool schema or one definition) may have; keeps the
/// recursion of every later walk (and the stack) bounded.
pub(crate) const MAX_DEPTH: usize = 200;
/// Most nodes one stored schema may have, counted with every definition it references once.
pub(crate) const MAX_NODES: usize = 200_000;

/// A schema problem: where (JSON pointer in the document) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError {
    /// Pointer of the offending value.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// Resolves references inside one document.
pub struct Resolver<'d> {
    root: &'d Value,
    version: Version,
}

impl<'d> Resolver<'d> {
    /// A resolver over `root`.
    pub fn new(root: &'d Value, version: Version) -> Self {
        Self { root, version }
    }

    /// Looks up a local reference (`#/components/...`).
    pub fn lookup(&self, reference: &str, at: &str) -> Result<&'d Value, RefError> {
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(RefError {
                pointer: at.to_string(),
                message: format!(
                    "external $ref `{reference}` is not supported; only local `#/...` references are"
                ),
            });
        };
        // JSON pointers in URI fragments may be percent-encoded.
        let decoded = percent_decode(pointer);
        self.root.pointer(&decoded).ok_or_else(|| RefError {
            pointer: at.to_string(),
            message: format!("$ref `{reference}` points at nothing in this document"),
        })
    }

    /// Follows a chain of `$ref`s (for parameters, responses and path items) to the real object.
    /// Returns it with the pointer it was found at.
    pub fn follow(&self, value: &'d Value, at: &str) -> Result<(&'d Value, String), RefError> {
        let mut current = value;
        let mut pointer = at.to_string();
        let mut seen: Vec<&str> = Vec::new();
        while let Some(Value::String(reference)) = current.get("$ref") {
            if seen.contains(&reference.as_str()) {
                return Err(RefError {
                    pointer: at.to_string(),
                    message: format!("$ref cycle: {} -> {reference}", seen.join(" -> ")),
                });
            }
            seen.push(reference);
            current = self.lookup(reference, &pointer)?;
            pointer = percent_decode(reference.trim_start_matches('#'));
        }
        Ok((current, pointer))
    }
}

/// Keywords v1 keeps but does not validate against.
const UNVALIDATED: &[&str] = &["allOf", "anyOf", "oneOf", "not", "if"];

/// One converted definition.
struct Definition {
    /// Pointer of the schema in the document.
    at: String,
    /// The stored form, or why it could not be converted.
    result: Result<Value, RefError>,
    /// Constructs v1 does not validate, relative to the definition (`oneOf at /$defs/Pet/...`).
    notes: Vec<String>,
    /// Definitions it refers to directly.
    refs: Vec<String>,
}

/// The named definitions of one upstream, filled as the included operations' schemas are
/// converted.
#[derive(Default)]
pub struct Store {
    /// Reference as written (`#/components/schemas/Trace`) → definition name.
    names: HashMap<String, String>,
    /// Names given so far.
    taken: HashSet<String>,
    /// Named, not yet converted: (name, reference).
    pending: Vec<(String, String)>,
    defs: BTreeMap<String, Definition>,
    /// The stored form of every definition converted without a problem.
    values: BTreeMap<String, Value>,
}

impl Store {
    /// The definitions converted so far, by name (what [`crate::schema::resolve`] reads).
    pub fn values(&self) -> &BTreeMap<String, Value> {
        &self.values
    }

    /// The definitions, keeping only those named in `keep`.
    pub fn into_definitions(mut self, keep: &HashSet<String>) -> BTreeMap<String, Value> {
        self.values.retain(|name, _| keep.contains(name));
        self.values
    }

    /// Converts `schema`, found at `at` in the document, to its stored form. Every component it
    /// references is converted too (once per upstream) and kept by name. Constructs v1 does not
    /// validate, in the schema and in every definition it reaches, are appended to `unvalidated`.
    pub fn schema(
        &mut self,
        resolver: &Resolver,
        schema: &Value,
        at: &str,
        unvalidated: &mut Vec<String>,
    ) -> Result<Value, RefError> {
        let (out, notes, refs) = self.convert(resolver, schema, at, "")?;
        for note in notes {
            push_note(unvalidated, note);
        }
        // Converting one definition may name more; a work list, never recursion, so chains
        // of references of any length are fine.
        while let Some((name, reference)) = self.pending.pop() {
            let target_at = percent_decode(reference.trim_start_matches('#'));
            let rel = format!("/$defs/{name}");
            let converted = resolver
                .lookup(&reference, &target_at)
                .and_then(|target| self.convert(resolver, target, &target_at, &rel));
            let def = match converted {
                Ok((value, notes, refs)) => {
                    self.values.insert(name.clone(), value.clone());
                    Definition {
                        at: target_at,
                        result: Ok(value),
                        notes,
                        refs,
                    }
                }
                Err(e) => Definition {
                    at: target_at,
                    result: Err(e),
                    notes: Vec::new(),
                    refs: Vec::new(),
                },
            };
            self.defs.insert(name, def);
        }
        self.reach(&refs, unvalidated)?;
        Ok(out)
    }

    /// Walks the definitions reachable from `refs`: the first that failed fails the schema;
    /// their notes join `unvalidated`.
    fn reach(&self, refs: &[String], unvalidated: &mut Vec<String>) -> Result<(), RefError> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut queue: Vec<&str> = refs.iter().map(String::as_str).collect();
        queue.reverse();
        while let Some(name) = queue.pop() {
            if !seen.insert(name) {
                continue;
            }
            let Some(def) = self.defs.get(name) else {
                continue;
            };
            match &def.result {
                Err(e) => return Err(e.clone()),
                Ok(value) => self.check_alias_cycle(name, value, &def.at)?,
            }
            for note in &def.notes {
                push_note(unvalidated, note.clone());
            }
            queue.extend(def.refs.iter().rev().map(String::as_str));
        }
        Ok(())
    }

    /// A definition that is only a reference to itself (through other bare references) describes
    /// nothing and would send every consumer round in circles.
    fn check_alias_cycle(&self, name: &str, value: &Value, at: &str) -> Result<(), RefError> {
        let mut chain = vec![name];
        let mut current = value;
        while let Some(next) = bare_ref(current) {
            if chain.contains(&next) {
                chain.push(next);
                return Err(RefError {
                    pointer: at.to_string(),
                    message: format!("$ref cycle: {}", chain.join(" -> ")),
                });
            }
            chain.push(next);
            match self.values.get(next) {
                Some(v) => current = v,
                None => break,
            }
        }
        Ok(())
    }

    /// Converts one schema; returns it with its notes and the definitions it names directly.
    fn convert(
        &mut self,
        resolver: &Resolver,
        schema: &Value,
        at: &str,
        rel: &str,
    ) -> Result<(Value, Vec<String>, Vec<String>), RefError> {
        let mut run = Convert {
            resolver,
            store: self,
            nodes: 0,
            notes: Vec::new(),
            refs: Vec::new(),
            origin: at.to_string(),
        };
        let out = run.node(schema, at, rel, 0)?;
        Ok((out, run.notes, run.refs))
    }

    /// The definition name for `reference`, naming it (and queueing its conversion) if new.
    fn name(&mut self, reference: &str) -> String {
        if let Some(name) = self.names.get(reference) {
            return name.clone();
        }
        let base = def_name(reference);
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            name = format!("{base}{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        self.names.insert(reference.to_string(), name.clone());
        self.pending.push((name.clone(), reference.to_string()));
        name
    }
}

fn push_note(notes: &mut Vec<String>, note: String) {
    if !notes.contains(&note) {
        notes.push(note);
    }
}

/// The definition a schema that is nothing but `{"$ref": ...}` names.
fn bare_ref(schema: &Value) -> Option<&str> {
    match schema {
        Value::Object(m) if m.len() == 1 => crate::schema::ref_name(schema),
        _ => None,
    }
}

struct Convert<'r, 'd, 's> {
    resolver: &'r Resolver<'d>,
    store: &'s mut Store,
    nodes: usize,
    notes: Vec<String>,
    refs: Vec<String>,
    origin: String,
}

impl Convert<'_, '_, '_> {
    /// `at` is the pointer in the document; `rel` the pointer inside the stored schema.
    fn node(
        &mut self,
        schema: &Value,
        at: &str,
        rel: &str,
        depth: usize,
    ) -> Result<Value, RefError> {
        if depth > MAX_DEPTH {
            return Err(RefError {
                pointer: at.to_string(),
                message: format!("schema nests deeper than {MAX_DEPTH} levels"),
            });
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(RefError {
                pointer: self.origin.clone(),
                message: format!(
                    "schema has more than {MAX_NODES} nodes (each named component counted once); it is too large to compile"
                ),
            });
        }
        let Value::Object(map) = schema else {
            // `true`/`false` schemas and (invalid) scalars pass through.
            return Ok(schema.clone());
        };
        if self.resolver.version == Version::V30
            && let Some(reference) = map.get("$ref")
        {
            let target = json!({ "$ref": self.reference(reference, at)? });
            // 3.0 ignores $ref siblings, except the ubiquitous `nullable: true` next to a $ref.
            return Ok(if map.get("nullable") == Some(&Value::Bool(true)) {
                json!({ "anyOf": [target, { "type": "null" }] })
            } else {
                target
            });
        }
        let mut out = Map::with_capacity(map.len());
        for (key, value) in map {
            let key = key.as_str();
            let child_at = pointer_join(at, key);
            let child_rel = pointer_join(rel, key);
            let v = if key == "$ref" {
                // 3.1: the reference, with whatever is written beside it.
                self.reference(value, at)?
            } else if key == "$defs" || key == "definitions" {
                // Every reference into them became a named definition; the container is dead.
                continue;
            } else if SUBSCHEMA.contains(&key) {
                self.node(value, &child_at, &child_rel, depth + 1)?
            } else if SUBSCHEMA_LIST.contains(&key) {
                match value {
                    Value::Array(items) => {
                        let mut list = Vec::with_capacity(items.len());
                        for (i, item) in items.iter().enumerate() {
                            let i = i.to_string();
                            list.push(self.node(
                                item,
                                &pointer_join(&child_at, &i),
                                &pointer_join(&child_rel, &i),
                                depth + 1,
                            )?);
                        }
                        Value::Array(list)
                    }
                    other => other.clone(),
                }
            } else if SUBSCHEMA_MAP.contains(&key) {
                match value {
                    Value::Object(props) => {
                        let mut m = Map::with_capacity(props.len());
                        for (name, sub) in props {
                            let sub = self.node(
                                sub,
                                &pointer_join(&child_at, name),
                                &pointer_join(&child_rel, name),
                                depth + 1,
                            )?;
                            m.insert(name.clone(), sub);
                        }
                        Value::Object(m)
                    }
                    other => other.clone(),
                }
            } else {
                value.clone()
            };
            if UNVALIDATED.contains(&key) {
                let note = format!("{key} at {}", if rel.is_empty() { "/" } else { rel });
                push_note(&mut self.notes, note);
            }
            out.insert(key.to_string(), v);
        }
        if self.resolver.version == Version::V30 {
            normalize::schema_30_to_31(&mut out);
        }
        Ok(Value::Object(out))
    }

    /// The stored `$ref` value (`#/$defs/<Name>`) for a document reference.
    fn reference(&mut self, reference: &Value, at: &str) -> Result<Value, RefError> {
        let Value::String(reference) = reference else {
            return Err(RefError {
                pointer: at.to_string(),
                message: "$ref must be a string".into(),
            });
        };
        if !self.store.names.contains_key(reference) {
            // Checked where the reference is written, so a dangling one is reported there.
            self.resolver.lookup(reference, at)?;
        }
        let name = self.store.name(reference);
        if !self.refs.contains(&name) {
            self.refs.push(name.clone());
        }
        Ok(Value::String(format!("{DEFS_PREFIX}{name}")))
    }
}

/// The definition name for a reference: the component's own name for
/// `#/components/schemas/<Name>`, otherwise one made from the pointer; always of
/// `A-Z a-z 0-9 . _ -` (so it needs no escaping in a pointer or a URI fragment).
fn def_name(reference: &str) -> String {
    let pointer = percent_decode(reference.trim_start_matches('#'));
    let tokens: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let raw = match tokens.as_slice() {
        [c, s, rest @ ..] if c == "components" && s == "schemas" && !rest.is_empty() => {
            rest.join("_")
        }
        all => all.join("_"),
    };
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "schema".to_string()
    } else {
        clean
    }
}

/// Decodes `%XX` escapes (JSON pointers inside URI fragments may use them).
fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored schema, the definitions and the notes.
    type Stored = (Value, BTreeMap<String, Value>, Vec<String>);

    /// Stores the schema at `at`.
    fn store(doc: &Value, version: Version, at: &str) -> Result<Stored, RefError> {
        let r = Resolver::new(doc, version);
        let mut store = Store::default();
        let mut notes = Vec::new();
        let out = store.schema(&r, doc.pointer(at).unwrap(), at, &mut notes)?;
        Ok((out, store.values().clone(), notes))
    }

    #[test]
    fn component_refs_become_named_definitions_normalised_from_30() {
        let doc = json!({
            "components": {"schemas": {
                "Trace": {"type": "object", "properties": {
                    "cost": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
                    "error": {"type": "string", "nullable": true},
                    "step": {"$ref": "#/components/schemas/Step", "nullable": true}
                }},
                "Step": {"type": "object", "properties": {"id": {"type": "string"}}}
            }},
            "root": {"$ref": "#/components/schemas/Trace"}
        });
        let (out, defs, notes) = store(&doc, Version::V30, "/root").unwrap();
        assert_eq!(out, json!({"$ref": "#/$defs/Trace"}));
        let trace = &defs["Trace"];
        assert_eq!(
            trace["properties"]["cost"],
            json!({"type": "number", "exclusiveMinimum": 0})
        );
        assert_eq!(
            trace["properties"]["error"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            trace["properties"]["step"],
            json!({"anyOf": [{"$ref": "#/$defs/Step"}, {"type": "null"}]})
        );
        assert_eq!(defs["Step"]["properties"]["id"]["type"], "string");
        assert_eq!(defs.len(), 2);
        assert!(
            notes.is_empty(),
            "normalisation must not count as unvalidated: {notes:?}"
        );
    }

    #[test]
    fn recursion_is_a_reference_like_any_other() {
        let doc = json!({
            "components": {"schemas": {
                "Node": {"type": "object", "properties": {
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}
                }}
            }},
            "root": {"$ref": "#/components/schemas/Node", "description": "the root"}
        });
        let (out, defs, _) = store(&doc, Version::V31, "/root").unwrap();
        assert_eq!(
            out,
            json!({"$ref": "#/$defs/Node", "description": "the root"})
        );
        assert_eq!(
            defs["Node"]["properties"]["children"]["items"],
            json!({"$ref": "#/$defs/Node"})
        );
    }

    #[test]
    fn a_component_is_stored_once_however_often_it_is_reached() {
        let doc = json!({
            "components": {"schemas": {
                "A": {"type": "object", "properties": {"x": {"$ref": "#/components/schemas/B"}}},
                "B": {"type": "string"}
            }},
            "one": {"$ref": "#/components/schemas/A"},
            "two": {"type": "array", "items": {"$ref": "#/components/schemas/B"}}
        });
        let r = Resolver::new(&doc, Version::V31);
        let mut store = Store::default();
        let mut notes = Vec::new();
        let one = store.schema(&r, &doc["one"], "/one", &mut notes).unwrap();
        let two = store.schema(&r, &doc["two"], "/two", &mut notes).unwrap();
        assert_eq!(one, json!({"$ref": "#/$defs/A"}));
        assert_eq!(two["items"], json!({"$ref": "#/$defs/B"}));
        assert_eq!(store.values().keys().collect::<Vec<_>>(), ["A", "B"]);
    }

    #[test]
    fn non_component_targets_get_names_from_their_pointer() {
        let doc = json!({
            "components": {"schemas": {
                "A": {"type": "object", "properties": {"x": {"type": "integer"}}},
                "A_properties_x": {"type": "string"}
            }},
            "root": {"type": "object", "properties": {
                "p": {"$ref": "#/components/schemas/A/properties/x"},
                "q": {"$ref": "#/components/schemas/A_properties_x"},
                "w": {"$ref": "#/components/schemas/we%20ird"}
            }},
            "components2": {}
        });
        let mut doc = doc;
        doc["components"]["schemas"]["we ird"] = json!({"type": "boolean"});
        let (out, defs, _) = store(&doc, Version::V31, "/root").unwrap();
        assert_eq!(
            out["properties"]["p"],
            json!({"$ref": "#/$defs/A_properties_x"})
        );
        assert_eq!(
            out["properties"]["q"],
            json!({"$ref": "#/$defs/A_properties_x2"})
        );
        assert_eq!(out["properties"]["w"], json!({"$ref": "#/$defs/we_ird"}));
        assert_eq!(defs["A_properties_x"]["type"], "integer");
        assert_eq!(defs["A_properties_x2"]["type"], "string");
        assert_eq!(defs["we_ird"]["type"], "boolean");
    }

    /// Only `#/components/schemas/...` loses its prefix in a definition's name; any other
    /// pointer keeps every segment.
    #[test]
    fn only_component_schemas_drop_their_prefix() {
        let doc = json!({
            "shared": {"x": {"type": "string"}},
            "components": {"other": {"Y": {"type": "integer"}}, "schemas": {"Z": {"type": "boolean"}}},
            "root": {"type": "object", "properties": {
                "a": {"$ref": "#/shared/x"},
                "b": {"$ref": "#/components/other/Y"},
                "c": {"$ref": "#/components/schemas/Z"}
            }}
        });
        let (_, defs, _) = store(&doc, Version::V31, "/root").unwrap();
        let names: Vec<&str> = defs.keys().map(String::as_str).collect();
        assert_eq!(names, ["Z", "components_other_Y", "shared_x"]);
    }

    /// A third definition whose name collides gets the next number, not the second's again.
    #[test]
    fn colliding_names_are_numbered_in_turn() {
        let doc = json!({
            "components": {"schemas": {
                "A": {"type": "object", "properties": {"x": {"type": "integer"}}},
                "A_properties_x": {"type": "string"},
                "A_properties": {"x": {"type": "boolean"}}
            }},
            "root": {"type": "object", "properties": {
                "p": {"$ref": "#/components/schemas/A/properties/x"},
                "q": {"$ref": "#/components/schemas/A_properties_x"},
                "r": {"$ref": "#/components/schemas/A_properties/x"}
            }}
        });
        let (out, defs, _) = store(&doc, Version::V31, "/root").unwrap();
        assert_eq!(
            out["properties"]["r"],
            json!({"$ref": "#/$defs/A_properties_x3"})
        );
        assert_eq!(defs["A_properties_x"]["type"], "integer");
        assert_eq!(defs["A_properties_x2"]["type"], "string");
        assert_eq!(defs["A_properties_x3"]["type"], "boolean");
    }

    /// A schema's own `$defs` or `definitions` container is dropped once its entries are named
    /// definitions; a reference with a constraint beside it is not a bare alias, so a loop
    /// through it is no cycle.
    #[test]
    fn defs_containers_go_and_constrained_references_are_not_aliases() {
        let doc = json!({
            "root": {"type": "object",
                "$defs": {"X": {"type": "string"}},
                "definitions": {"Y": {"type": "integer"}},
                "properties": {"a": {"$ref": "#/root/$defs/X"}, "b": {"$ref": "#/root/definitions/Y"}}}
        });
        let (out, defs, _) = store(&doc, Version::V31, "/root").unwrap();
        assert!(
            out.get("$defs").is_none() && out.get("definitions").is_none(),
            "{out}"
        );
        assert_eq!(defs.len(), 2, "{defs:?}");
        let doc = json!({
            "components": {"schemas": {
                "A": {"$ref": "#/components/schemas/B", "type": "string"},
                "B": {"$ref": "#/components/schemas/A"}
            }},
            "root": {"$ref": "#/components/schemas/A"}
        });
        let stored = store(&doc, Version::V31, "/root");
        assert!(stored.is_ok(), "{stored:?}");
    }

    #[test]
    fn external_and_dangling_refs_are_errors_where_they_are_written() {
        let doc = json!({"root": {"$ref": "other.json#/x"}});
        let e = store(&doc, Version::V31, "/root").unwrap_err();
        assert!(
            e.message
                .contains("external $ref `other.json#/x` is not supported")
        );
        let doc = json!({"root": {"properties": {"a": {"$ref": "#/components/schemas/Nope"}}}});
        let e = store(&doc, Version::V31, "/root").unwrap_err();
        assert!(e.message.contains("points at nothing"), "{e:?}");
        assert_eq!(e.pointer, "/root/properties/a");
        // Inside a definition: reported in the definition, for every schema that reaches it.
        let doc = json!({
            "components": {"schemas": {"A": {"properties": {"b": {"$ref": "#/components/schemas/Nope"}}}}},
            "root": {"items": {"$ref": "#/components/schemas/A"}}
        });
        let e = store(&doc, Version::V31, "/root").unwrap_err();
        assert_eq!(e.pointer, "/components/schemas/A/properties/b");
    }

    #[test]
    fn a_definition_that_only_refers_to_itself_is_a_cycle() {
        let doc = json!({
            "components": {"schemas": {
                "A": {"$ref": "#/components/schemas/B"},
                "B": {"$ref": "#/components/schemas/A"}
            }},
            "root": {"$ref": "#/components/schemas/A"}
        });
        let e = store(&doc, Version::V31, "/root").unwrap_err();
        assert_eq!(e.message, "$ref cycle: A -> B -> A");
    }

    #[test]
    fn exponential_fan_out_costs_its_stored_size() {
        // Each level references the next twice: 2^30 nodes if inlined, 31 definitions stored.
        let mut schemas = Map::new();
        for i in 0..30 {
            schemas.insert(
                format!("L{i}"),
                json!({"type": "object", "properties": {
                    "a": {"$ref": format!("#/components/schemas/L{}", i + 1)},
                    "b": {"$ref": format!("#/components/schemas/L{}", i + 1)}
                }}),
            );
        }
        schemas.insert("L30".into(), json!({"type": "string"}));
        let doc = json!({"components": {"schemas": schemas}, "root": {"$ref": "#/components/schemas/L0"}});
        let (out, defs, _) = store(&doc, Version::V31, "/root").unwrap();
        assert_eq!(out, json!({"$ref": "#/$defs/L0"}));
        assert_eq!(defs.len(), 31);
    }

    #[test]
    fn the_node_budget_holds_per_stored_schema_at_its_boundary() {
        // An object schema with MAX_NODES nodes: itself and `true` properties (cheap to build).
        let props: Map<String, Value> = (1..MAX_NODES)
            .map(|i| (format!("p{i}"), Value::Bool(true)))
            .collect();
        let mut doc = json!({
            "components": {"schemas": {}},
            "root": {"type": "object", "properties": props}
        });
        assert!(store(&doc, Version::V31, "/root").is_ok());
        doc["root"]["properties"]["one-more"] = Value::Bool(true);
        let e = store(&doc, Version::V31, "/root").unwrap_err();
        assert!(e.message.contains("more than 200000 nodes"), "{e:?}");
        assert_eq!(e.pointer, "/root");
        // A definition has its own budget: a tool schema referencing a full one twice is fine...
        let mut big = doc["root"].take();
        big["properties"]
            .as_object_mut()
            .unwrap()
            .remove("one-more");
        doc["components"]["schemas"]["Big"] = big;
        doc["root"] = json!({"type": "object", "properties": {
            "a": {"$ref": "#/components/schemas/Big"},
            "b": {"$ref": "#/components/schemas/Big"}
        }});
        assert!(store(&doc, Version::V31, "/root").is_ok());
        // ...and one over it fails every schema that reaches it, located in the definition.
        doc["components"]["schemas"]["Big"]["properties"]["one-more"] = Value::Bool(true);
        let e = store(&doc, Version::V31, "/root").unwrap_err();
        assert_eq!(e.pointer, "/components/schemas/Big");
    }

    /// A schema nesting `depth` levels below its root.
    fn nested(depth: usize) -> Value {
        let mut v = json!({"type": "string"});
        for _ in 0..depth {
            v = json!({"type": "array", "items": v});
        }
        v
    }

    #[test]
    fn the_depth_budget_holds_per_stored_schema_at_its_boundary() {
        let doc = json!({"root": nested(MAX_DEPTH)});
        assert!(store(&doc, Version::V31, "/root").is_ok());
        let doc = json!({"root": nested(MAX_DEPTH + 1)});
        let e = store(&doc, Version::V31, "/root").unwrap_err();
        assert!(e.message.contains("deeper than 200 levels"), "{e:?}");
        // Depth is not added up across references: each definition counts its own.
        let doc = json!({
            "components": {"schemas": {"Deep": nested(MAX_DEPTH - 1)}},
            "root": {"items": {"$ref": "#/components/schemas/Deep"}}
        });
        assert!(store(&doc, Version::V31, "/root").is_ok());
    }

    /// Every kind of nesting counts a level: a schema list (`anyOf`) and a schema map
    /// (`properties`) as much as `items`.
    #[test]
    fn lists_and_maps_of_schemas_count_toward_the_depth_budget() {
        let wrap: [fn(Value) -> Value; 2] = [
            |v| json!({"anyOf": [v]}),
            |v| json!({"type": "object", "properties": {"p": v}}),
        ];
        for w in wrap {
            let nest = |depth: usize| {
                let mut v = json!({"type": "string"});
                for _ in 0..depth {
                    v = w(v);
                }
                v
            };
            let doc = json!({"root": nest(MAX_DEPTH)});
            assert!(
                store(&doc, Version::V31, "/root").is_ok(),
                "{}",
                w(json!({}))
            );
            let doc = json!({"root": nest(MAX_DEPTH + 1)});
            let e = store(&doc, Version::V31, "/root").unwrap_err();
            assert!(e.message.contains("deeper than 200 levels"), "{e:?}");
        }
    }

    #[test]
    fn unsupported_combinators_are_listed_in_schemas_and_the_definitions_they_reach() {
        let doc = json!({
            "components": {"schemas": {"U": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
            "root": {"type": "object", "properties": {
                "x": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "u": {"$ref": "#/components/schemas/U"}
            }}
        });
        let (_, _, notes) = store(&doc, Version::V31, "/root").unwrap();
        assert_eq!(notes, ["oneOf at /properties/x", "anyOf at /$defs/U"]);
    }

    #[test]
    fn ref_chains_and_cycles_in_follow() {
        let doc = json!({"components": {"parameters": {
            "A": {"$ref": "#/components/parameters/B"},
            "B": {"name": "org_id", "in": "query"},
            "C": {"$ref": "#/components/parameters/C"}
        }}});
        let r = Resolver::new(&doc, Version::V30);
        let a = json!({"$ref": "#/components/parameters/A"});
        let (v, at) = r.follow(&a, "/x").unwrap();
        assert_eq!(v["name"], "org_id");
        assert_eq!(at, "/components/parameters/B");
        let c = json!({"$ref": "#/components/parameters/C"});
        let e = r.follow(&c, "/x").unwrap_err();
        assert!(e.message.contains("$ref cycle"), "{e:?}");
    }
}
