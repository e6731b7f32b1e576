//! Local `$ref` resolution and schema inlining, with 3.0 → 3.1 normalisation on the way.
//!
//! Only the schemas reachable from included operations are visited, so compiling a few
//! operations of a multi-megabyte document costs little beyond parsing it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::document::Version;
use super::normalize;

/// Deepest schema nesting accepted after `$ref` expansion; keeps recursion (and the stack) bounded.
const MAX_DEPTH: usize = 200;
/// Largest number of schema nodes one inlined schema may have; stops exponential `$ref` fan-out.
const MAX_NODES: usize = 200_000;

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

    /// Inlines every `$ref` in `schema` (normalising 3.0 forms), so consumers see one
    /// self-contained JSON Schema. Recursive schemas keep a `$ref` into a `$defs` section
    /// attached to the result. Constructs v1 does not validate are listed in `unvalidated`.
    pub fn inline(
        &self,
        schema: &Value,
        at: &str,
        unvalidated: &mut Vec<String>,
    ) -> Result<Value, RefError> {
        let mut run = Inline {
            resolver: self,
            stack: Vec::new(),
            defs: BTreeMap::new(),
            nodes: 0,
            unvalidated,
            origin: at.to_string(),
        };
        let mut out = run.schema(schema, at, "", 0)?;
        // Expand every schema that a cycle pointed at; expanding one may reveal more.
        let mut done: BTreeMap<String, Value> = BTreeMap::new();
        while let Some((reference, name)) = run
            .defs
            .iter()
            .find(|(r, _)| !done.contains_key(*r))
            .map(|(r, n)| (r.clone(), n.clone()))
        {
            let target = self.lookup(&reference, at)?;
            run.stack.push(reference.clone());
            let expanded = run.schema(
                target,
                &percent_decode(reference.trim_start_matches('#')),
                &format!("/$defs/{name}"),
                0,
            )?;
            run.stack.pop();
            done.insert(reference, expanded);
        }
        if !done.is_empty() {
            let mut defs = Map::new();
            for (reference, body) in done {
                defs.insert(run.defs[&reference].clone(), body);
            }
            match &mut out {
                Value::Object(m) => {
                    m.insert("$defs".into(), Value::Object(defs));
                }
                other => {
                    *other = json!({"allOf": [other.clone()], "$defs": defs});
                }
            }
        }
        Ok(out)
    }
}

struct Inline<'r, 'd, 'n> {
    resolver: &'r Resolver<'d>,
    /// References being expanded right now: meeting one again means a cycle.
    stack: Vec<String>,
    /// Reference → name in `$defs`, for references that closed a cycle.
    defs: BTreeMap<String, String>,
    nodes: usize,
    unvalidated: &'n mut Vec<String>,
    origin: String,
}

/// Keywords whose value is one subschema.
const SUBSCHEMA: &[&str] = &[
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
const SUBSCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const SUBSCHEMA_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];
/// Keywords v1 keeps but does not validate against.
const UNVALIDATED: &[&str] = &["allOf", "anyOf", "oneOf", "not", "if"];

impl Inline<'_, '_, '_> {
    fn too_deep(&self, at: &str) -> RefError {
        RefError {
            pointer: at.to_string(),
            message: format!("schema nests deeper than {MAX_DEPTH} levels after $ref expansion"),
        }
    }

    /// `at` is the pointer in the document; `rel` the pointer inside the schema being built.
    fn schema(
        &mut self,
        schema: &Value,
        at: &str,
        rel: &str,
        depth: usize,
    ) -> Result<Value, RefError> {
        if depth > MAX_DEPTH {
            return Err(self.too_deep(at));
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(RefError {
                pointer: self.origin.clone(),
                message: format!(
                    "schema expands to more than {MAX_NODES} nodes after inlining $refs; it is too large to compile"
                ),
            });
        }
        let Value::Object(map) = schema else {
            // `true`/`false` schemas and (invalid) scalars pass through.
            return Ok(schema.clone());
        };
        if let Some(reference) = map.get("$ref") {
            return self.reference(map, reference, at, rel, depth);
        }
        let mut out = Map::with_capacity(map.len());
        for (key, value) in map {
            let child_at = crate::diagnostic::pointer_join(at, key);
            let child_rel = crate::diagnostic::pointer_join(rel, key);
            let v = if SUBSCHEMA.contains(&key.as_str()) {
                self.schema(value, &child_at, &child_rel, depth + 1)?
            } else if SUBSCHEMA_LIST.contains(&key.as_str()) {
                match value {
                    Value::Array(items) => Value::Array(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, item)| {
                                let i = i.to_string();
                                self.schema(
                                    item,
                                    &crate::diagnostic::pointer_join(&child_at, &i),
                                    &crate::diagnostic::pointer_join(&child_rel, &i),
                                    depth + 1,
                                )
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    other => other.clone(),
                }
            } else if SUBSCHEMA_MAP.contains(&key.as_str()) {
                match value {
                    Value::Object(props) => {
                        let mut m = Map::with_capacity(props.len());
                        for (name, sub) in props {
                            m.insert(
                                name.clone(),
                                self.schema(
                                    sub,
                                    &crate::diagnostic::pointer_join(&child_at, name),
                                    &crate::diagnostic::pointer_join(&child_rel, name),
                                    depth + 1,
                                )?,
                            );
                        }
                        Value::Object(m)
                    }
                    other => other.clone(),
                }
            } else {
                value.clone()
            };
            if UNVALIDATED.contains(&key.as_str()) {
                let note = format!("{key} at {}", if rel.is_empty() { "/" } else { rel });
                if !self.unvalidated.contains(&note) {
                    self.unvalidated.push(note);
                }
            }
            out.insert(key.clone(), v);
        }
        if self.resolver.version == Version::V30 {
            normalize::schema_30_to_31(&mut out);
        }
        Ok(Value::Object(out))
    }

    fn reference(
        &mut self,
        map: &Map<String, Value>,
        reference: &Value,
        at: &str,
        rel: &str,
        depth: usize,
    ) -> Result<Value, RefError> {
        let Value::String(reference) = reference else {
            return Err(RefError {
                pointer: at.to_string(),
                message: "$ref must be a string".into(),
            });
        };
        let resolved = if self.stack.contains(reference) {
            let name = match self.defs.get(reference) {
                Some(name) => name.clone(),
                None => {
                    let mut name = def_name(reference, self.defs.len());
                    if self.defs.values().any(|n| *n == name) {
                        name = format!("{name}{}", self.defs.len());
                    }
                    self.defs.insert(reference.clone(), name.clone());
                    name
                }
            };
            json!({ "$ref": format!("#/$defs/{name}") })
        } else {
            let target = self.resolver.lookup(reference, at)?;
            self.stack.push(reference.clone());
            let target_at = percent_decode(reference.trim_start_matches('#'));
            let r = self.schema(target, &target_at, rel, depth + 1);
            self.stack.pop();
            r?
        };
        let siblings: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| k.as_str() != "$ref")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(match self.resolver.version {
            // 3.0 ignores $ref siblings, except the ubiquitous `nullable: true` next to a $ref.
            Version::V30 if siblings.get("nullable") == Some(&Value::Bool(true)) => {
                json!({ "anyOf": [resolved, { "type": "null" }] })
            }
            Version::V30 => resolved,
            // 3.1 allows siblings; annotations written next to the $ref win.
            Version::V31 if siblings.is_empty() => resolved,
            Version::V31 => match resolved {
                Value::Object(mut m) if !m.contains_key("$ref") => {
                    m.extend(siblings);
                    Value::Object(m)
                }
                other => {
                    let mut m = siblings;
                    m.insert("allOf".into(), Value::Array(vec![other]));
                    Value::Object(m)
                }
            },
        })
    }
}

fn def_name(reference: &str, index: usize) -> String {
    let last = reference.rsplit('/').next().unwrap_or("schema");
    let clean: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        format!("schema{index}")
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

    fn inline(doc: Value, version: Version, at: &str) -> (Result<Value, RefError>, Vec<String>) {
        let r = Resolver::new(&doc, version);
        let mut notes = Vec::new();
        let schema = doc.pointer(at).unwrap().clone();
        (r.inline(&schema, at, &mut notes), notes)
    }

    #[test]
    fn inlines_component_refs_and_normalises_30() {
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
        let (out, notes) = inline(doc, Version::V30, "/root");
        let out = out.unwrap();
        assert_eq!(
            out["properties"]["cost"],
            json!({"type": "number", "exclusiveMinimum": 0})
        );
        assert_eq!(
            out["properties"]["error"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            out["properties"]["step"]["anyOf"][1],
            json!({"type": "null"})
        );
        assert_eq!(
            out["properties"]["step"]["anyOf"][0]["properties"]["id"]["type"],
            "string"
        );
        assert!(
            notes.is_empty(),
            "normalisation must not count as unvalidated: {notes:?}"
        );
    }

    #[test]
    fn recursive_schemas_become_defs() {
        let doc = json!({
            "components": {"schemas": {
                "Node": {"type": "object", "properties": {
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}
                }}
            }},
            "root": {"$ref": "#/components/schemas/Node"}
        });
        let (out, _) = inline(doc, Version::V31, "/root");
        let out = out.unwrap();
        assert_eq!(
            out["properties"]["children"]["items"],
            json!({"$ref": "#/$defs/Node"})
        );
        assert_eq!(
            out["$defs"]["Node"]["properties"]["children"]["items"],
            json!({"$ref": "#/$defs/Node"})
        );
    }

    #[test]
    fn external_and_dangling_refs_are_errors() {
        let doc = json!({"root": {"$ref": "other.json#/x"}});
        let (out, _) = inline(doc, Version::V31, "/root");
        assert!(
            out.unwrap_err()
                .message
                .contains("external $ref `other.json#/x` is not supported")
        );
        let doc = json!({"root": {"properties": {"a": {"$ref": "#/components/schemas/Nope"}}}});
        let (out, _) = inline(doc, Version::V31, "/root");
        let e = out.unwrap_err();
        assert!(e.message.contains("points at nothing"), "{e:?}");
        assert_eq!(e.pointer, "/root/properties/a");
    }

    #[test]
    fn exponential_fan_out_is_bounded() {
        // Each level references the next twice: 2^30 nodes if inlined naively.
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
        let (out, _) = inline(doc, Version::V31, "/root");
        assert!(out.unwrap_err().message.contains("too large to compile"));
    }

    #[test]
    fn unsupported_combinators_are_listed() {
        let doc = json!({"root": {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}});
        let (out, notes) = inline(doc, Version::V31, "/root");
        assert!(out.is_ok());
        assert_eq!(notes, vec!["oneOf at /properties/x".to_string()]);
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
