//! The one argument validator: checks and coerces a call's arguments against the tool's input
//! schema, whichever way the call is made (a Lisp `tool/call`, a typed generated function, the
//! static pre-check of a program's literal calls).
//!
//! Supported: `type` (incl. lists of types), `enum`, `const`, `minimum`/`maximum` (and the
//! exclusive forms), `minLength`/`maxLength`, `pattern`, `minItems`/`maxItems`, `items`, nested
//! `properties`/`required`/`additionalProperties`, `anyOf`/`oneOf`/`allOf` (a value passes
//! `oneOf` when any branch accepts it) and `$ref` into `#/$defs/..` (the plan's named
//! definitions, or the schema's own `$defs`), followed by ptc-plan's one rule: keywords written
//! beside a `$ref` apply too, and a `$ref` cycle is reported. Other keywords (`format`, ...) are
//! not validated.
//!
//! Coercion: argument names may be written kebab (`org-id`) or as on the wire (`org_id`);
//! a float with no fraction is accepted as an integer. Keyword and string values arrive as
//! strings already. Unknown argument names are rejected with a "did you mean".

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use crate::schema::{SchemaError, SchemaErrorKind, Scope};
use serde_json::{Map, Value};

use ptc_names::did_you_mean;

/// Named schema definitions a `{"$ref": "#/$defs/Name"}` may point into.
pub type Definitions = BTreeMap<String, Value>;

/// How deep schemas and values are followed; deeper parts are accepted unchecked, so a
/// recursive schema or a deeply nested value can never exhaust the stack.
const MAX_DEPTH: usize = 64;

/// Compiled `pattern`s, shared by every call (patterns come from the catalog, a bounded set).
#[derive(Default)]
pub struct Patterns {
    compiled: RwLock<HashMap<String, Option<Arc<regex::Regex>>>>,
}

impl Patterns {
    fn get(&self, pattern: &str) -> Option<Arc<regex::Regex>> {
        if let Some(r) = self
            .compiled
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(pattern)
        {
            return r.clone();
        }
        // A pattern the regex crate cannot compile (look-around, ...) is not validated.
        let re = regex::Regex::new(pattern).ok().map(Arc::new);
        self.compiled
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pattern.to_string(), re.clone());
        re
    }
}

/// A tool's input schema with what its `$ref`s resolve against.
#[derive(Clone, Copy)]
pub struct Schema<'a> {
    /// The input schema (an object schema).
    pub root: &'a Value,
    /// The plan's named definitions (contract B), if any.
    pub definitions: Option<&'a Definitions>,
}

impl<'a> Schema<'a> {
    /// Where this schema's `$ref`s are looked up: its own `$defs`/`definitions`, then the
    /// plan's (ptc-plan's one rule for references).
    fn scope(&self) -> Scope<'a> {
        Scope::of(self.root, self.definitions)
    }

    /// The schema a chain of `$ref`s at `s` ends at, without the keywords written beside the
    /// references (the named definition, for showing its shape); `None` when the chain cannot be
    /// followed. The validator itself checks against the definition with those keywords laid
    /// over it.
    pub fn resolve<'b>(&self, s: &'b Value) -> Option<&'b Value>
    where
        'a: 'b,
    {
        let scope: Scope<'b> = self.scope();
        scope.target(s).ok()
    }

    /// The constraint in force at `s`: the definition its `$ref`s name with what is written
    /// beside them laid over it, borrowed when nothing is.
    fn in_force<'b>(&self, s: &'b Value) -> Result<Cow<'b, Value>, SchemaError>
    where
        'a: 'b,
    {
        let scope: Scope<'b> = self.scope();
        scope.resolve(s)
    }

    /// The (dereferenced) top-level properties and required names.
    pub fn properties(&self) -> (Option<&'a Map<String, Value>>, Vec<&'a str>) {
        let root = self.resolve(self.root).unwrap_or(self.root);
        let props = root.get("properties").and_then(Value::as_object);
        let required = root
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        (props, required)
    }
}

/// Maps each argument name as written to the property it means: exact first, then the wire form
/// of a kebab name (`org-id` → `org_id`), then the kebab form of a wire name.
pub fn resolve_name<'p>(props: &'p Map<String, Value>, written: &str) -> Option<&'p str> {
    if let Some((k, _)) = props.get_key_value(written) {
        return Some(k);
    }
    let wire = written.replace('-', "_");
    if let Some((k, _)) = props.get_key_value(&wire) {
        return Some(k);
    }
    props
        .keys()
        .find(|k| k.replace('_', "-") == written.replace('_', "-"))
        .map(String::as_str)
}

/// The Lisp spelling of a property name, as programs usually write it (`org_id` → `:org-id`).
pub fn lisp_key(name: &str) -> String {
    format!(":{}", name.replace('_', "-"))
}

/// An argument of a literal call as the static pre-check sees it: its value, or `None` when the
/// program computes it at run time.
pub type LiteralArgs = Vec<(String, Option<Value>)>;

/// Validates and coerces `args` against `schema`. Returns the arguments keyed by their wire names,
/// or every problem found, one per entry.
pub fn check_args(
    schema: Schema<'_>,
    patterns: &Patterns,
    args: Map<String, Value>,
) -> Result<Map<String, Value>, Vec<String>> {
    let literal: LiteralArgs = args.into_iter().map(|(k, v)| (k, Some(v))).collect();
    let (out, problems) = check_entries(schema, schema.root, patterns, literal, Level::Top, 0);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The static pre-check's view: the same rules, applied to what is known before the program runs
/// (values only where written as literals). Unless `all_keys_known`, the call also has keys the
/// program computes, any of which may be a required argument: none is reported missing.
pub fn check_literal_args(
    schema: Schema<'_>,
    patterns: &Patterns,
    args: LiteralArgs,
    all_keys_known: bool,
) -> Vec<String> {
    let level = if all_keys_known {
        Level::Top
    } else {
        Level::TopWithComputedKeys
    };
    check_entries(schema, schema.root, patterns, args, level, 0).1
}

/// Where the object being checked is in the arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The arguments themselves.
    Top,
    /// The arguments, some of whose keys the program computes.
    TopWithComputedKeys,
    /// An object inside them.
    Nested,
}

/// Checks the fields of an object against `object` (a schema within `schema`, whose `$defs` its
/// refs resolve against).
fn check_entries(
    schema: Schema<'_>,
    object: &Value,
    patterns: &Patterns,
    args: LiteralArgs,
    level: Level,
    depth: usize,
) -> (Map<String, Value>, Vec<String>) {
    let top = level != Level::Nested;
    let mut problems = Vec::new();
    let mut out = Map::new();
    let root = match schema.in_force(object) {
        Ok(root) => root,
        Err(e) => {
            if top && e.kind == SchemaErrorKind::Cycle {
                problems.push(format!(
                    "the arguments cannot be checked: the tool's input schema has a {e}"
                ));
            }
            Cow::Borrowed(object)
        }
    };
    let props = root.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let additional = root.get("additionalProperties");
    let open = match additional {
        Some(Value::Bool(b)) => *b,
        Some(Value::Object(_)) => true,
        // With no declared properties, an unconstrained schema accepts anything.
        _ => props.is_none(),
    };
    let mut seen: HashMap<String, String> = HashMap::new();
    for (written, value) in args {
        let wire = match props.and_then(|p| resolve_name(p, &written)) {
            Some(w) => w.to_string(),
            None if open => written.clone(),
            None => {
                let known: Vec<&str> = props
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                let mut msg = format!("unknown argument {}", show_key(&written));
                let lisp: Vec<String> = known.iter().map(|k| lisp_key(k)).collect();
                let kebab: Vec<String> = known.iter().map(|k| k.replace('_', "-")).collect();
                let written_kebab = written.replace('_', "-");
                let candidates = kebab.iter().map(String::as_str);
                if let Some(s) = did_you_mean(&written_kebab, candidates, |s| format!(":{s}")) {
                    msg.push_str(&format!(" ({s})"));
                }
                if known.is_empty() {
                    msg.push_str(if top {
                        "; this tool takes no arguments"
                    } else {
                        "; this map takes no keys"
                    });
                } else {
                    msg.push_str(&format!("; it takes {}", lisp.join(" ")));
                }
                problems.push(msg);
                continue;
            }
        };
        if let Some(first) = seen.insert(wire.clone(), written.clone()) {
            problems.push(format!(
                "argument {} is given twice (as {} and {}); keep one",
                lisp_key(&wire),
                show_key(&first),
                show_key(&written)
            ));
            continue;
        }
        let Some(mut value) = value else {
            continue;
        };
        if value.is_null() && top && !required.contains(&wire.as_str()) {
            // An explicit nil for an optional argument means "not given", whatever its type.
            continue;
        }
        let prop_schema = props.and_then(|p| p.get(&wire)).or(match additional {
            Some(s @ Value::Object(_)) => Some(s),
            _ => None,
        });
        if let Some(s) = prop_schema {
            let label = lisp_key(&wire);
            check_value(
                &label,
                schema,
                patterns,
                s,
                &mut value,
                &mut problems,
                depth,
            );
        }
        out.insert(wire, value);
    }
    for r in &required {
        if !seen.contains_key(*r) && level != Level::TopWithComputedKeys {
            let ty = props
                .and_then(|p| p.get(*r))
                .map(|s| type_name(schema, s))
                .unwrap_or_else(|| "a value".into());
            problems.push(format!("missing required argument {} ({ty})", lisp_key(r)));
        }
    }
    (out, problems)
}

fn show_key(written: &str) -> String {
    format!(":{written}")
}

/// A short description of what `s` accepts, e.g. `string`, `integer 1..500`,
/// `one of "summary" "full"`.
pub fn type_name(schema: Schema<'_>, s: &Value) -> String {
    type_name_at(schema, s, 0)
}

fn type_name_at(schema: Schema<'_>, s: &Value, depth: usize) -> String {
    if depth > 4 {
        return "any".into();
    }
    let s = schema.in_force(s).unwrap_or(Cow::Borrowed(s));
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let opts: Vec<String> = e.iter().map(|v| v.to_string()).collect();
        return format!("one of {}", opts.join(" "));
    }
    if let Some(c) = s.get("const") {
        return format!("exactly {c}");
    }
    let mut ty = match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => {
            let branches = s
                .get("anyOf")
                .or_else(|| s.get("oneOf"))
                .and_then(Value::as_array);
            match branches {
                Some(b) => b
                    .iter()
                    .map(|x| type_name_at(schema, x, depth + 1))
                    .collect::<Vec<_>>()
                    .join("|"),
                None => "any".into(),
            }
        }
    };
    if ty == "array"
        && let Some(items) = s.get("items")
    {
        ty = format!("[{}]", type_name_at(schema, items, depth + 1));
    }
    let min = s.get("minimum").and_then(Value::as_f64);
    let max = s.get("maximum").and_then(Value::as_f64);
    match (min, max) {
        // `f64`'s `Display` writes whole numbers without a fraction (`500`, not `500.0`).
        (Some(a), Some(b)) => ty.push_str(&format!(" {a}..{b}")),
        (Some(a), None) => ty.push_str(&format!(" >= {a}")),
        (None, Some(b)) => ty.push_str(&format!(" <= {b}")),
        _ => {}
    }
    ty
}

/// Short JSON text of a value for a message.
/// A value as a message shows it: JSON text cut at 60 characters, `nil` for null (the
/// program's spelling).
fn show(v: &Value) -> String {
    if v.is_null() {
        return "nil".into();
    }
    let text = v.to_string();
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// A wrong value as a type problem names it: its kind, then the value (`nil` alone).
fn described(v: &Value) -> String {
    let kind = match v {
        Value::Null => return show(v),
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "map",
    };
    format!("{kind} {}", show(v))
}

fn type_matches(ty: &str, v: &mut Value) -> bool {
    match (ty, &*v) {
        ("null", Value::Null) => true,
        ("boolean", Value::Bool(_)) => true,
        ("string", Value::String(_)) => true,
        ("array", Value::Array(_)) => true,
        ("object", Value::Object(_)) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            if n.is_i64() || n.is_u64() {
                return true;
            }
            // 20.0 is the integer 20.
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    *v = Value::from(f as i64);
                    true
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// Checks one value (coercing it in place), pushing a problem per violation.
fn check_value(
    label: &str,
    schema: Schema<'_>,
    patterns: &Patterns,
    s: &Value,
    v: &mut Value,
    problems: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let s = match schema.in_force(s) {
        Ok(s) => s,
        // A chain that never reaches a schema: the upstream cannot mean anything by it either.
        Err(e) if e.kind == SchemaErrorKind::Cycle => {
            problems.push(format!("{label} cannot be checked: its schema has a {e}"));
            return;
        }
        // A name the schema does not define may be one another document does: the upstream
        // checks it; the call is not refused for what the validator cannot see.
        Err(_) => return,
    };
    // Composition first: a value must satisfy all of allOf and at least one of anyOf/oneOf.
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        for branch in all {
            check_value(label, schema, patterns, branch, v, problems, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array)
            && !branches.is_empty()
        {
            let mut ok = false;
            for branch in branches {
                let mut trial = v.clone();
                let mut p = Vec::new();
                check_value(
                    label,
                    schema,
                    patterns,
                    branch,
                    &mut trial,
                    &mut p,
                    depth + 1,
                );
                if p.is_empty() {
                    *v = trial;
                    ok = true;
                    break;
                }
            }
            if !ok {
                problems.push(format!(
                    "{label} must be {}, got {}",
                    type_name(schema, &s),
                    show(v)
                ));
                return;
            }
        }
    }
    match s.get("type") {
        Some(Value::String(t)) if !type_matches(t, v) => {
            problems.push(format!(
                "{label} must be {}, got {}",
                article(t),
                described(v)
            ));
            return;
        }
        Some(Value::Array(ts)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            if !names.is_empty() && !names.iter().any(|t| type_matches(t, v)) {
                problems.push(format!(
                    "{label} must be {}, got {}",
                    names.join(" or "),
                    described(v)
                ));
                return;
            }
        }
        _ => {}
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.iter().any(|x| json_eq(x, v))
    {
        let opts: Vec<String> = e.iter().map(|x| x.to_string()).collect();
        problems.push(format!(
            "{label} must be one of {}, got {}",
            opts.join(" "),
            show(v)
        ));
        return;
    }
    if let Some(c) = s.get("const")
        && !json_eq(c, v)
    {
        problems.push(format!("{label} must be exactly {c}, got {}", show(v)));
        return;
    }
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            let bound = |key: &str| s.get(key).and_then(Value::as_f64);
            if let Some(m) = bound("minimum")
                && x < m
            {
                problems.push(format!("{label} must be at least {m}, got {n}"));
            }
            if let Some(m) = bound("maximum")
                && x > m
            {
                problems.push(format!("{label} must be at most {m}, got {n}"));
            }
            if let Some(m) = bound("exclusiveMinimum")
                && x <= m
            {
                problems.push(format!("{label} must be greater than {m}, got {n}"));
            }
            if let Some(m) = bound("exclusiveMaximum")
                && x >= m
            {
                problems.push(format!("{label} must be less than {m}, got {n}"));
            }
        }
        Value::String(text) => {
            let len = text.chars().count() as u64;
            if let Some(m) = s.get("minLength").and_then(Value::as_u64)
                && len < m
            {
                problems.push(format!(
                    "{label} must be at least {m} characters long, got {len}"
                ));
            }
            if let Some(m) = s.get("maxLength").and_then(Value::as_u64)
                && len > m
            {
                problems.push(format!(
                    "{label} must be at most {m} characters long, got {len}"
                ));
            }
            if let Some(p) = s.get("pattern").and_then(Value::as_str)
                && let Some(re) = patterns.get(p)
                && !re.is_match(text)
            {
                problems.push(format!(
                    "{label} must match the pattern {p}, got {}",
                    show(&Value::String(text.clone()))
                ));
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(m) = s.get("minItems").and_then(Value::as_u64)
                && n < m
            {
                problems.push(format!("{label} must have at least {m} items, got {n}"));
            }
            if let Some(m) = s.get("maxItems").and_then(Value::as_u64)
                && n > m
            {
                problems.push(format!("{label} must have at most {m} items, got {n}"));
            }
            if let Some(item_schema) = s.get("items").filter(|i| i.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    let l = format!("{label}[{i}]");
                    check_value(&l, schema, patterns, item_schema, item, problems, depth + 1);
                }
            }
        }
        // Only a schema that constrains the fields is walked (a free-form map is left as is).
        Value::Object(fields)
            if ["properties", "required", "additionalProperties"]
                .iter()
                .any(|k| s.get(*k).is_some()) =>
        {
            let entries: LiteralArgs = std::mem::take(fields)
                .into_iter()
                .map(|(k, x)| (k, Some(x)))
                .collect();
            let (out, inner) =
                check_entries(schema, &s, patterns, entries, Level::Nested, depth + 1);
            *fields = out;
            for p in inner {
                problems.push(format!("{label}: {p}"));
            }
        }
        _ => {}
    }
}

fn article(t: &str) -> String {
    match t {
        "integer" | "array" | "object" => format!("an {t}"),
        "null" => "nil".into(),
        _ => format!("a {t}"),
    }
}

/// JSON equality where `1` equals `1.0`.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(schema: &Value, args: Value) -> Result<Value, Vec<String>> {
        let p = Patterns::default();
        let Value::Object(m) = args else { panic!() };
        check_args(
            Schema {
                root: schema,
                definitions: None,
            },
            &p,
            m,
        )
        .map(Value::Object)
    }

    /// `resolve` follows a `$ref` chain to the definition it names, leaves a schema without
    /// one as it is, and gives up on a reference that leads nowhere; `properties` reads the
    /// (dereferenced) top level.
    #[test]
    fn references_are_followed_to_their_definitions_for_showing_and_reading_properties() {
        let root = json!({
            "$ref": "#/$defs/Args",
            "$defs": {
                "Args": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
                         "required": ["a"]},
                "A": {"$ref": "#/$defs/B"},
                "B": {"type": "string"}
            }
        });
        let schema = Schema {
            root: &root,
            definitions: None,
        };
        assert_eq!(
            schema.resolve(&json!({"$ref": "#/$defs/A"})),
            Some(&json!({"type": "string"}))
        );
        let plain = json!({"type": "integer"});
        assert_eq!(schema.resolve(&plain), Some(&plain));
        assert_eq!(schema.resolve(&json!({"$ref": "#/$defs/Nope"})), None);
        let (props, required) = schema.properties();
        assert_eq!(
            props.map(|p| p.keys().map(String::as_str).collect::<Vec<_>>()),
            Some(vec!["a"])
        );
        assert_eq!(required, ["a"]);
        let bare = json!({"type": "object"});
        let bare = Schema {
            root: &bare,
            definitions: None,
        };
        assert_eq!(bare.properties(), (None, vec![]));
    }

    /// Valid arguments pass through unchanged.
    #[track_caller]
    fn accepted(schema: &Value, args: Value) {
        assert_eq!(run(schema, args.clone()), Ok(args));
    }

    fn traces() -> Value {
        json!({"type": "object", "properties": {
            "org_id": {"type": "string", "pattern": "^org_[a-z]+$"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 500},
            "mode": {"type": "string", "enum": ["summary", "full"]},
            "trace_id": {"type": "string", "minLength": 1, "maxLength": 4},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
        }, "required": ["org_id"], "additionalProperties": false})
    }

    /// A call with a computed key may be missing none of its required arguments (the key may
    /// be any of them); an object written out in it still is.
    #[test]
    fn a_computed_key_may_be_any_required_argument_but_not_one_inside() {
        let schema = json!({"type": "object", "required": ["org_id", "body"], "properties": {
            "org_id": {"type": "string"},
            "body": {"type": "object", "required": ["label"],
                     "properties": {"label": {"type": "string"}}}}});
        let check = |args: LiteralArgs, all_keys_known| {
            check_literal_args(
                Schema {
                    root: &schema,
                    definitions: None,
                },
                &Patterns::default(),
                args,
                all_keys_known,
            )
        };
        let some = vec![("body".to_string(), Some(json!({})))];
        assert_eq!(
            check(some.clone(), true),
            [
                ":body: missing required argument :label (string)",
                "missing required argument :org-id (string)"
            ]
        );
        assert_eq!(
            check(some, false),
            [":body: missing required argument :label (string)"]
        );
    }

    #[test]
    fn kebab_and_wire_names_map_to_the_wire_name() {
        let out = run(&traces(), json!({"org-id": "org_acme", "limit": 500})).unwrap();
        assert_eq!(out, json!({"org_id": "org_acme", "limit": 500}));
        let out = run(&traces(), json!({"org_id": "org_acme", "limit": 1.0})).unwrap();
        assert_eq!(out, json!({"org_id": "org_acme", "limit": 1}));
    }

    /// `additionalProperties` decides what happens to an argument the schema does not declare:
    /// `false` refuses it, `true` passes it on unchecked, a schema checks it, and a schema that
    /// declares no properties at all accepts anything.
    #[test]
    fn undeclared_arguments_follow_additional_properties() {
        let with = |extra: Value| {
            let mut s = json!({"type": "object", "properties": {"q": {"type": "string"}}});
            if !extra.is_null() {
                s["additionalProperties"] = extra;
            }
            s
        };
        assert_eq!(
            run(&with(json!(false)), json!({"q": "a", "x": 1})).unwrap_err(),
            ["unknown argument :x; it takes :q"]
        );
        // Declared properties and no `additionalProperties`: closed, as the plan compiles them.
        assert_eq!(
            run(&with(Value::Null), json!({"x": 1})).unwrap_err(),
            ["unknown argument :x; it takes :q"]
        );
        assert_eq!(
            run(&with(json!(true)), json!({"q": "a", "x": 1})).unwrap(),
            json!({"q": "a", "x": 1})
        );
        let typed = with(json!({"type": "integer"}));
        assert_eq!(run(&typed, json!({"x": 1})).unwrap(), json!({"x": 1}));
        assert_eq!(
            run(&typed, json!({"x": "one"})).unwrap_err(),
            [":x must be an integer, got string \"one\""]
        );
        assert_eq!(
            run(&json!({"type": "object"}), json!({"anything": [1]})).unwrap(),
            json!({"anything": [1]})
        );
    }

    /// Type descriptions follow four levels of nesting and say `any` below that, so a recursive
    /// schema cannot make a message unbounded.
    #[test]
    fn type_descriptions_stop_below_four_levels() {
        let nested = |levels: usize| {
            let mut s = json!({"type": "integer"});
            for _ in 0..levels {
                s = json!({"type": "array", "items": s});
            }
            s
        };
        let schema = json!({});
        let at = Schema {
            root: &schema,
            definitions: None,
        };
        assert_eq!(type_name(at, &nested(4)), "[[[[integer]]]]");
        assert_eq!(type_name(at, &nested(5)), "[[[[[any]]]]]");
        // A schema that refers to itself through `anyOf` stops at the same depth.
        let recursive =
            json!({"$defs": {"T": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/T"}]}}});
        let at = Schema {
            root: &recursive,
            definitions: None,
        };
        assert_eq!(
            type_name(at, &json!({"$ref": "#/$defs/T"})),
            "string|string|string|string|any|any"
        );
    }

    #[test]
    fn type_descriptions_name_unions_bounds_and_arrays() {
        let schema = json!({});
        let at = Schema {
            root: &schema,
            definitions: None,
        };
        let cases = [
            (json!({"type": ["string", "null"]}), "string|null"),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}),
                "string|integer",
            ),
            (
                json!({"oneOf": [{"type": "boolean"}, {"type": "null"}]}),
                "boolean|null",
            ),
            (json!({"type": "integer", "minimum": 1}), "integer >= 1"),
            (json!({"type": "number", "maximum": 2.5}), "number <= 2.5"),
            (
                json!({"type": "integer", "minimum": 1, "maximum": 500}),
                "integer 1..500",
            ),
            (
                json!({"type": "array", "items": {"type": "string"}}),
                "[string]",
            ),
            (json!({"type": "array"}), "array"),
            (
                json!({"type": "string", "items": {"type": "integer"}}),
                "string",
            ),
            (json!({"const": "x"}), "exactly \"x\""),
            (json!({}), "any"),
        ];
        for (s, want) in cases {
            assert_eq!(type_name(at, &s), want, "{s}");
        }
    }

    /// Messages name a wrong value's type (integers apart from other numbers, negative ones
    /// too) and show it whole up to 60 characters of JSON, cut to 57 and `...` beyond.
    #[test]
    fn wrong_values_are_named_by_type_and_shown_bounded() {
        let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let got = |v: Value| run(&schema, json!({"q": v})).unwrap_err().remove(0);
        assert_eq!(got(json!(2.5)), ":q must be a string, got number 2.5");
        assert_eq!(got(json!(-3)), ":q must be a string, got integer -3");
        assert_eq!(
            got(json!(u64::MAX)),
            format!(":q must be a string, got integer {}", u64::MAX)
        );
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let shown = |text: &str| run(&schema, json!({"n": text})).unwrap_err().remove(0);
        let at_limit = "a".repeat(58); // 60 characters of JSON with its quotes
        assert_eq!(
            shown(&at_limit),
            format!(":n must be an integer, got string \"{at_limit}\"")
        );
        let past = "a".repeat(59);
        assert_eq!(
            shown(&past),
            format!(":n must be an integer, got string \"{}...", "a".repeat(56))
        );
    }

    /// `number` takes any number; `integer` takes integers of either sign and size, and a whole
    /// float below 9e15 as that integer (exact there), refusing fractions and larger floats.
    #[test]
    fn numbers_and_integers_are_told_apart() {
        let schema = json!({"type": "object", "properties": {
            "x": {"type": "number"}, "n": {"type": "integer"}}});
        assert_eq!(run(&schema, json!({"x": 2.5})).unwrap(), json!({"x": 2.5}));
        assert_eq!(run(&schema, json!({"x": -7})).unwrap(), json!({"x": -7}));
        for n in [json!(-3), json!(u64::MAX), json!(i64::MIN)] {
            assert_eq!(run(&schema, json!({"n": n})).unwrap(), json!({"n": n}));
        }
        assert_eq!(run(&schema, json!({"n": 20.0})).unwrap(), json!({"n": 20}));
        let below = 8_999_999_999_999_998.0_f64;
        assert_eq!(
            run(&schema, json!({"n": below})).unwrap(),
            json!({"n": 8_999_999_999_999_998_i64})
        );
        assert_eq!(
            run(&schema, json!({"n": 9.0e15})).unwrap_err(),
            [":n must be an integer, got number 9000000000000000.0"]
        );
        assert_eq!(
            run(&schema, json!({"n": 2.5})).unwrap_err(),
            [":n must be an integer, got number 2.5"]
        );
    }

    /// Each JSON type accepts its own values and refuses every other kind, naming what came;
    /// `nil` for an optional argument of any type is left out, for a required one it is checked.
    #[test]
    fn every_type_accepts_its_own_values_only() {
        let samples = [
            ("boolean", json!(false), "boolean false"),
            ("string", json!("s"), "string \"s\""),
            ("array", json!([1]), "array [1]"),
            ("object", json!({"k": 1}), "map {\"k\":1}"),
            ("number", json!(1.5), "number 1.5"),
        ];
        let types = [
            ("null", "nil"),
            ("boolean", "a boolean"),
            ("string", "a string"),
            ("array", "an array"),
            ("object", "an object"),
            ("number", "a number"),
        ];
        for (ty, named) in types {
            let schema = json!({"type": "object", "properties": {"v": {"type": ty}}});
            assert_eq!(run(&schema, json!({"v": null})), Ok(json!({})), "{ty}");
            // Required, nil is a value like any other: only the null type takes it.
            let required = json!({"type": "object", "required": ["v"],
                "properties": {"v": {"type": ty}}});
            let nil = run(&required, json!({"v": null}));
            if ty == "null" {
                assert_eq!(nil, Ok(json!({"v": null})));
            } else {
                assert_eq!(nil, Err(vec![format!(":v must be {named}, got nil")]));
            }
            for (other, value, shown) in &samples {
                let result = run(&schema, json!({"v": value}));
                if *other == ty {
                    assert_eq!(result, Ok(json!({"v": value})), "{ty}");
                } else {
                    let problems = result.expect_err(ty);
                    assert_eq!(problems.len(), 1, "{ty} vs {other}: {problems:?}");
                    assert!(
                        problems[0].ends_with(&format!(", got {shown}")),
                        "{problems:?}"
                    );
                }
            }
        }
        let schema = json!({"type": "object", "properties": {"v": {"type": "boolean"}}});
        accepted(&schema, json!({"v": true}));
        assert_eq!(
            run(&schema, json!({"v": "true"})).unwrap_err(),
            [":v must be a boolean, got string \"true\""]
        );
    }

    /// Values are checked to `MAX_DEPTH` levels and accepted unchecked below, so no schema or
    /// value can exhaust the stack: a wrong leaf at the last checked level is reported, one
    /// level further down it is not.
    #[test]
    fn values_are_checked_to_max_depth() {
        let nested = |levels: usize| {
            let (mut s, mut v) = (json!({"type": "integer"}), json!("leaf"));
            for _ in 0..levels {
                s = json!({"type": "array", "items": s});
                v = json!([v]);
            }
            (
                json!({"type": "object", "properties": {"a": s}}),
                json!({"a": v}),
            )
        };
        // The leaf under `levels` arrays is at depth `levels` (the argument itself is at 0).
        let (schema, args) = nested(MAX_DEPTH);
        let problems = run(&schema, args).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].ends_with("must be an integer, got string \"leaf\""),
            "{problems:?}"
        );
        let (schema, args) = nested(MAX_DEPTH + 1);
        assert_eq!(run(&schema, args.clone()).unwrap(), args);
        // Through nested maps: the leaf under MAX_DEPTH + 1 maps is the last one checked (the
        // outermost is an argument, not a value level).
        let maps = |levels: usize| {
            let (mut s, mut v) = (json!({"type": "integer"}), json!("leaf"));
            for _ in 0..levels {
                s = json!({"type": "object", "properties": {"m": s}});
                v = json!({"m": v});
            }
            (s, v)
        };
        let (schema, args) = maps(MAX_DEPTH + 1);
        assert_eq!(run(&schema, args).unwrap_err().len(), 1);
        let (schema, args) = maps(MAX_DEPTH + 2);
        assert_eq!(run(&schema, args.clone()).unwrap(), args);
    }

    /// A schema that refers to itself through `allOf` or `anyOf` ends at the depth bound rather
    /// than recursing for ever; type lists name every type a value may have.
    #[test]
    fn self_referring_compositions_end_and_type_lists_are_checked() {
        let schema = json!({"type": "object", "properties": {
                "a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/B"},
                "c": {"type": ["string", "null"]}},
            "$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]},
                      "B": {"anyOf": [{"$ref": "#/$defs/B"}]}}});
        assert_eq!(
            run(&schema, json!({"a": 1, "b": [true], "c": "x"})).unwrap(),
            json!({"a": 1, "b": [true], "c": "x"})
        );
        assert_eq!(
            run(&schema, json!({"c": 5})).unwrap_err(),
            [":c must be string or null, got integer 5"]
        );
    }

    /// Nested maps are checked like the arguments themselves, `additionalProperties` included;
    /// `const` takes exactly its value; an empty type list constrains nothing.
    #[test]
    fn nested_maps_consts_and_empty_type_lists() {
        let schema = json!({"type": "object", "properties": {
            "closed": {"type": "object", "additionalProperties": false},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "free": {"type": "object"},
            "k": {"const": "x"},
            "any": {"type": []}}});
        let ok = json!({"closed": {}, "counts": {"a": 1}, "free": {"z": [1]}, "k": "x", "any": 5});
        assert_eq!(run(&schema, ok.clone()).unwrap(), ok);
        assert_eq!(
            run(&schema, json!({"closed": {"x": 1}})).unwrap_err(),
            [":closed: unknown argument :x; this map takes no keys"]
        );
        assert_eq!(
            run(&schema, json!({"counts": {"a": "one"}})).unwrap_err(),
            [":counts: :a must be an integer, got string \"one\""]
        );
        assert_eq!(
            run(&schema, json!({"k": "y"})).unwrap_err(),
            [":k must be exactly \"x\", got \"y\""]
        );
        // Numbers compare by value (1 is 1.0); `null` is spelled `nil`.
        let schema = json!({"type": "object", "properties": {
            "one": {"const": 1}, "none": {"type": "null"}}});
        accepted(&schema, json!({"one": 1.0}));
        assert_eq!(
            run(&schema, json!({"one": 2})).unwrap_err(),
            [":one must be exactly 1, got 2"]
        );
        assert_eq!(
            run(&schema, json!({"none": 1})).unwrap_err(),
            [":none must be nil, got integer 1"]
        );
    }

    /// Exclusive bounds refuse the bound itself; a length bound accepts exactly its length.
    #[test]
    fn exclusive_bounds_and_exact_lengths() {
        let items = json!({"type": "object", "properties": {
            "t": {"type": "array", "minItems": 2, "maxItems": 3}}});
        accepted(&items, json!({"t": [1, 2]}));
        accepted(&items, json!({"t": [1, 2, 3]}));
        assert_eq!(
            run(&items, json!({"t": [1]})).unwrap_err(),
            [":t must have at least 2 items, got 1"]
        );
        let schema = json!({"type": "object", "properties": {
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
            "s": {"type": "string", "minLength": 2, "maxLength": 3}}});
        accepted(&schema, json!({"x": 0.5, "s": "ab"}));
        accepted(&schema, json!({"x": 9.5, "s": "abc"}));
        assert_eq!(
            run(&schema, json!({"x": 0})).unwrap_err(),
            [":x must be greater than 0, got 0"]
        );
        assert_eq!(
            run(&schema, json!({"x": 10})).unwrap_err(),
            [":x must be less than 10, got 10"]
        );
        assert_eq!(
            run(&schema, json!({"s": "a"})).unwrap_err(),
            [":s must be at least 2 characters long, got 1"]
        );
        assert_eq!(
            run(&schema, json!({"s": "abcd"})).unwrap_err(),
            [":s must be at most 3 characters long, got 4"]
        );
    }

    #[test]
    fn bounds_pass_at_the_limit_and_fail_one_past() {
        accepted(&traces(), json!({"org_id": "org_a", "limit": 1}));
        assert_eq!(
            run(&traces(), json!({"org_id": "org_a", "limit": 501})).unwrap_err(),
            [":limit must be at most 500, got 501"]
        );
        assert_eq!(
            run(&traces(), json!({"org_id": "org_a", "limit": 0})).unwrap_err(),
            [":limit must be at least 1, got 0"]
        );
        accepted(&traces(), json!({"org_id": "org_a", "trace_id": "abcd"}));
        assert_eq!(
            run(&traces(), json!({"org_id": "org_a", "trace_id": "abcde"})).unwrap_err(),
            [":trace-id must be at most 4 characters long, got 5"]
        );
        assert_eq!(
            run(&traces(), json!({"org_id": "org_a", "trace_id": ""})).unwrap_err(),
            [":trace-id must be at least 1 characters long, got 0"]
        );
        accepted(&traces(), json!({"org_id": "org_a", "tags": ["a", "b"]}));
        assert_eq!(
            run(
                &traces(),
                json!({"org_id": "org_a", "tags": ["a", "b", "c"]})
            )
            .unwrap_err(),
            [":tags must have at most 2 items, got 3"]
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let e = run(
            &traces(),
            json!({"limt": 5, "mode": "fast", "tags": [1], "org-id": 7}),
        )
        .unwrap_err();
        assert_eq!(
            e,
            [
                "unknown argument :limt (did you mean :limit?); it takes :org-id :limit :mode :trace-id :tags",
                ":mode must be one of \"summary\" \"full\", got \"fast\"",
                ":tags[0] must be a string, got integer 1",
                ":org-id must be a string, got integer 7",
            ]
        );
        let e = run(&traces(), json!({})).unwrap_err();
        assert_eq!(e, ["missing required argument :org-id (string)"]);
        let e = run(&traces(), json!({"org_id": "acme"})).unwrap_err();
        assert_eq!(
            e,
            [":org-id must match the pattern ^org_[a-z]+$, got \"acme\""]
        );
        let e = run(&traces(), json!({"org_id": "org_a", "org-id": "org_b"})).unwrap_err();
        assert_eq!(
            e,
            ["argument :org-id is given twice (as :org_id and :org-id); keep one"]
        );
    }

    #[test]
    fn refs_resolve_into_plan_definitions_and_own_defs() {
        let defs: Definitions = [(
            "Mode".to_string(),
            json!({"type": "string", "enum": ["a", "b"]}),
        )]
        .into();
        let schema = json!({"type": "object", "properties": {"mode": {"$ref": "#/$defs/Mode"}}});
        let p = Patterns::default();
        let s = Schema {
            root: &schema,
            definitions: Some(&defs),
        };
        let bad: Map<String, Value> = [("mode".to_string(), json!("c"))].into_iter().collect();
        assert_eq!(
            check_args(s, &p, bad).unwrap_err(),
            [":mode must be one of \"a\" \"b\", got \"c\""]
        );
        // A recursive schema that carries its own $defs (the inlined form).
        let own = json!({"type": "object", "$defs": {"Node": {"type": "object",
            "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/Node"}}}},
            "properties": {"tree": {"$ref": "#/$defs/Node"}}});
        let args = json!({"tree": {"name": "a", "child": {"name": "b", "child": {"name": 3}}}});
        let e = run(&own, args).unwrap_err();
        assert_eq!(
            e,
            [":tree: :child: :child: :name must be a string, got integer 3"]
        );
    }

    /// Keywords beside a `$ref` apply as well as the definition's (3.1 documents write them; the
    /// validator once dropped them): a `maxLength` there is enforced, a `description` is harmless,
    /// and the definition's own constraints still hold.
    #[test]
    fn keywords_beside_a_ref_are_enforced_with_the_definition() {
        let defs: Definitions = [(
            "Code".to_string(),
            json!({"type": "string", "pattern": "^[a-z]+$"}),
        )]
        .into();
        let schema = json!({"type": "object", "properties": {
            "code": {"$ref": "#/$defs/Code", "maxLength": 3, "description": "a short code"}}});
        let p = Patterns::default();
        let check = |value: Value| {
            let args: Map<String, Value> = [("code".to_string(), value)].into_iter().collect();
            let s = Schema {
                root: &schema,
                definitions: Some(&defs),
            };
            check_args(s, &p, args)
        };
        assert!(check(json!("abc")).is_ok());
        assert_eq!(
            check(json!("abcd")).unwrap_err(),
            [":code must be at most 3 characters long, got 4"]
        );
        assert_eq!(
            check(json!("AB")).unwrap_err(),
            [":code must match the pattern ^[a-z]+$, got \"AB\""]
        );
        // Through the schema's own `$defs` too, and in the short description of a type.
        let own = json!({"type": "object", "required": ["n"], "properties": {
                "n": {"$ref": "#/$defs/N", "maximum": 9}},
            "$defs": {"N": {"type": "integer", "minimum": 1}}});
        assert_eq!(
            run(&own, json!({"n": 10})).unwrap_err(),
            [":n must be at most 9, got 10"]
        );
        assert_eq!(
            run(&own, json!({})).unwrap_err(),
            ["missing required argument :n (integer 1..9)"]
        );
    }

    /// A `$ref` chain that never reaches a schema is reported (it was once taken as "cannot be
    /// followed, accept anything"), without hanging; a name nothing defines is left to the
    /// upstream, as a reference into another document would be.
    #[test]
    fn a_ref_cycle_is_reported_and_a_missing_name_passes() {
        let schema = json!({"type": "object", "properties": {
                "a": {"$ref": "#/$defs/A"}, "gone": {"$ref": "#/$defs/Gone"}},
            "$defs": {"A": {"$ref": "#/$defs/A"}}});
        assert_eq!(
            run(&schema, json!({"a": 1})).unwrap_err(),
            [":a cannot be checked: its schema has a `$ref` cycle: A -> A"]
        );
        assert_eq!(
            run(&schema, json!({"gone": 1})).unwrap(),
            json!({"gone": 1})
        );
        let root = json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}});
        assert_eq!(
            run(&root, json!({"x": 1})).unwrap_err(),
            ["the arguments cannot be checked: the tool's input schema has a `$ref` cycle: A -> A"]
        );
        // At the top too, only a cycle is reported: a name nothing defines passes.
        let gone = json!({"$ref": "#/$defs/Gone", "$defs": {}});
        assert_eq!(run(&gone, json!({"x": 1})).unwrap(), json!({"x": 1}));
    }

    #[test]
    fn any_of_with_null_and_nil_arguments() {
        let schema = json!({"type": "object", "properties": {
            "q": {"anyOf": [{"type": "string"}, {"type": "null"}]}}});
        assert_eq!(run(&schema, json!({"q": "x"})).unwrap(), json!({"q": "x"}));
        assert_eq!(
            run(&schema, json!({"q": 1})).unwrap_err(),
            [":q must be string|null, got 1"]
        );
        // nil for an optional argument is left out, whatever its type; for a required one it
        // is a wrong value, named as the program wrote it.
        assert_eq!(run(&schema, json!({"q": null})).unwrap(), json!({}));
        assert_eq!(
            run(&traces(), json!({"org_id": "org_a", "limit": null})),
            Ok(json!({"org_id": "org_a"}))
        );
        assert_eq!(
            run(&traces(), json!({"org_id": null})).unwrap_err(),
            [":org-id must be a string, got nil"]
        );
        let schema = json!({"type": "object", "required": ["e"], "properties": {
            "e": {"enum": ["a", "b"]}}});
        assert_eq!(
            run(&schema, json!({"e": null})).unwrap_err(),
            [":e must be one of \"a\" \"b\", got nil"]
        );
    }
}
