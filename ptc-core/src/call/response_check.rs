//! Live response drift: an answer checked against its tool's output schema as the program gets
//! it, so an operator learns that an upstream changed before the next build does. The check
//! walks the decoded value (no second pass over the bytes); sampled (the default) it looks at
//! the first [`SAMPLED_ITEMS`] items of every list, in full at every item. It reports each
//! field that drifted once per answer, by a path like `/*/status` (`*`: any item of a list),
//! and looks for what an upstream change looks like: a type that changed, a required field
//! that is gone, a value outside an enum, a field a closed object does not list. Extra fields
//! of an open object are not drift.

use serde_json::Value as Json;

use ptc_lisp::Value;

use crate::call::validate::Schema;

/// Items of each list a sampled check looks at.
pub const SAMPLED_ITEMS: usize = 16;
/// Drifted fields reported for one answer.
pub const MAX_FINDINGS: usize = 8;
/// Deepest nesting checked.
const MAX_DEPTH: usize = 64;

/// How answers are checked against their output schemas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponseCheck {
    /// Not checked.
    Off,
    /// The first items of every list.
    #[default]
    Sampled,
    /// Every item.
    Full,
}

impl ResponseCheck {
    /// The flag's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseCheck::Off => "off",
            ResponseCheck::Sampled => "sampled",
            ResponseCheck::Full => "full",
        }
    }

    /// Reads the flag's value (`off`, `sampled`, `full`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(ResponseCheck::Off),
            "sampled" => Ok(ResponseCheck::Sampled),
            "full" => Ok(ResponseCheck::Full),
            other => Err(format!(
                "response check `{other}`: use off, sampled or full"
            )),
        }
    }
}

/// As the flag's value: how run files keep it.
impl serde::Serialize for ResponseCheck {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ResponseCheck {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(deserializer)?;
        ResponseCheck::parse(&name).map_err(serde::de::Error::custom)
    }
}

/// The process's response checking: how answers are checked, whether drift fails the call,
/// and how often each tool's fields drifted so far.
#[derive(Debug, Default)]
pub struct DriftWatch {
    mode: ResponseCheck,
    strict: bool,
    counts: std::sync::Mutex<std::collections::BTreeMap<(String, String), u64>>,
}

impl DriftWatch {
    /// Checking `mode`; `strict` turns drift into the `response_drift` reason.
    pub fn new(mode: ResponseCheck, strict: bool) -> Self {
        DriftWatch {
            mode,
            strict,
            counts: Default::default(),
        }
    }

    /// Whether a drifted answer fails its call.
    pub fn strict(&self) -> bool {
        self.strict
    }

    /// Checks `tool`'s answer `value` against `schema`, counting what drifted.
    pub fn check(&self, tool: &str, value: &Value, schema: Schema<'_>) -> Vec<String> {
        let found = check(value, schema, self.mode);
        if !found.is_empty() {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            for f in &found {
                let field = f.split(": ").next().unwrap_or(f).to_string();
                *counts.entry((tool.to_string(), field)).or_default() += 1;
            }
        }
        found
    }

    /// Drift seen so far: `(server/tool, field path, answers it drifted in)`.
    pub fn counts(&self) -> Vec<(String, String, u64)> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|((t, f), n)| (t.clone(), f.clone(), *n))
            .collect()
    }
}

/// The drifted fields of `value` against `schema` (at most [`MAX_FINDINGS`], one per path),
/// each `path: what`.
pub fn check(value: &Value, schema: Schema<'_>, mode: ResponseCheck) -> Vec<String> {
    let mut found = Findings(Vec::new());
    if mode != ResponseCheck::Off {
        let mut path = String::new();
        walk(value, schema.root, schema, mode, &mut path, 0, &mut found);
    }
    found.into()
}

struct Findings(Vec<(String, String)>);

impl Findings {
    fn add(&mut self, path: &str, what: String) {
        let path = if path.is_empty() { "/" } else { path };
        if self.0.len() < MAX_FINDINGS && !self.0.iter().any(|(p, _)| p == path) {
            self.0.push((path.to_string(), what));
        }
    }

    fn full(&self) -> bool {
        self.0.len() >= MAX_FINDINGS
    }
}

impl From<Findings> for Vec<String> {
    fn from(f: Findings) -> Self {
        f.0.into_iter().map(|(p, w)| format!("{p}: {w}")).collect()
    }
}

/// The JSON type names a value has (`integer` is also a `number`).
fn kinds(v: &Value) -> &'static [&'static str] {
    match v {
        Value::Nil => &["null"],
        Value::Bool(_) => &["boolean"],
        Value::Int(_) => &["integer", "number"],
        Value::Float(_) => &["number"],
        Value::Str(_) => &["string"],
        Value::Vector(_) => &["array"],
        Value::Map(_) => &["object"],
        _ => &[],
    }
}

fn same(v: &Value, j: &Json) -> bool {
    match (v, j) {
        (Value::Nil, Json::Null) => true,
        (Value::Bool(a), Json::Bool(b)) => a == b,
        (Value::Str(a), Json::String(b)) => **a == **b,
        (Value::Int(a), Json::Number(n)) => n.as_i64() == Some(*a),
        (Value::Float(a), Json::Number(n)) => n.as_f64() == Some(*a),
        _ => false,
    }
}

fn walk(
    v: &Value,
    s: &Json,
    schema: Schema<'_>,
    mode: ResponseCheck,
    path: &mut String,
    depth: usize,
    found: &mut Findings,
) {
    if depth > MAX_DEPTH || found.full() {
        return;
    }
    let s = schema.resolve(s).unwrap_or(s);
    let types: Vec<&str> = match s.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable = s.get("nullable") == Some(&Json::Bool(true));
    let have = kinds(v);
    let allowed = types.is_empty()
        || types.iter().any(|t| have.contains(t))
        || (nullable && matches!(v, Value::Nil));
    if !allowed {
        found.add(
            path,
            format!(
                "expected {}, got {}",
                types.join(" or "),
                have.first().unwrap_or(&"?")
            ),
        );
        return;
    }
    if let Some(Json::Array(allowed)) = s.get("enum")
        && !allowed.iter().any(|a| same(v, a))
    {
        let shown = v.to_string();
        let shown: String = shown.chars().take(40).collect();
        found.add(path, format!("{shown} is not one of the documented values"));
        return;
    }
    match v {
        Value::Map(m) => {
            let props = s.get("properties").and_then(Json::as_object);
            for name in s
                .get("required")
                .and_then(Json::as_array)
                .into_iter()
                .flatten()
                .filter_map(Json::as_str)
            {
                if m.get_named(name, false).is_none() {
                    found.add(&format!("{path}/{name}"), "required, missing".into());
                }
            }
            let closed = s.get("additionalProperties") == Some(&Json::Bool(false));
            for (k, item) in m.iter() {
                let Value::Str(k) = k else { continue };
                let len = path.len();
                path.push('/');
                path.push_str(k);
                match props.and_then(|p| p.get(&**k)) {
                    Some(sub) => walk(item, sub, schema, mode, path, depth + 1, found),
                    None if closed => found.add(path, "not in the schema".into()),
                    None => {}
                }
                path.truncate(len);
            }
        }
        Value::Vector(items) => {
            let Some(sub) = s.get("items") else { return };
            let n = match mode {
                ResponseCheck::Full => items.len(),
                _ => items.len().min(SAMPLED_ITEMS),
            };
            let len = path.len();
            path.push_str("/*");
            for item in items.iter().take(n) {
                walk(item, sub, schema, mode, path, depth + 1, found);
            }
            path.truncate(len);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn findings(value: Json, schema: Json, mode: ResponseCheck) -> Vec<String> {
        let v = Value::from_json_bytes(value.to_string().as_bytes(), &Default::default()).unwrap();
        let defs = BTreeMap::from([(
            "Trace".to_string(),
            json!({"type": "object", "required": ["id", "status"], "properties": {
                "id": {"type": "string"},
                "status": {"type": "string", "enum": ["ok", "error"]},
                "cost": {"type": ["number", "null"]}}}),
        )]);
        check(
            &v,
            Schema {
                root: &schema,
                definitions: Some(&defs),
            },
            mode,
        )
    }

    fn list() -> Json {
        json!({"type": "array", "items": {"$ref": "#/$defs/Trace"}})
    }

    #[test]
    fn a_matching_answer_has_no_drift_and_extra_fields_are_not_drift() {
        let v = json!([{"id": "a", "status": "ok", "cost": 1, "new_field": true},
                       {"id": "b", "status": "error", "cost": null}]);
        assert!(findings(v, list(), ResponseCheck::Full).is_empty());
    }

    #[test]
    fn each_drifted_field_is_named_once_by_its_path() {
        let v = json!([{"id": 1, "status": "cancelled"}, {"status": "ok", "cost": "free"},
                       {"id": 2, "status": "cancelled"}]);
        // Item 2's missing `id` is the same field as item 1's wrong type: named once.
        assert_eq!(
            findings(v, list(), ResponseCheck::Full),
            [
                "/*/id: expected string, got integer",
                "/*/status: \"cancelled\" is not one of the documented values",
                "/*/cost: expected number or null, got string",
            ]
        );
        let closed = json!({"type": "object", "additionalProperties": false,
                            "properties": {"a": {"type": "integer"}}});
        assert_eq!(
            findings(json!({"a": 1, "b": 2}), closed, ResponseCheck::Full),
            ["/b: not in the schema"]
        );
        assert_eq!(
            findings(json!("x"), json!({"type": "object"}), ResponseCheck::Full),
            ["/: expected object, got string"]
        );
        assert_eq!(
            findings(
                json!(null),
                json!({"type": "string", "nullable": true}),
                ResponseCheck::Full
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn sampled_checks_look_at_the_first_items_of_each_list_only() {
        let mut items = vec![json!({"id": "a", "status": "ok"}); SAMPLED_ITEMS];
        items.push(json!({"id": "late", "status": "cancelled"}));
        let v = Json::Array(items);
        assert!(findings(v.clone(), list(), ResponseCheck::Sampled).is_empty());
        assert_eq!(findings(v.clone(), list(), ResponseCheck::Full).len(), 1);
        assert!(findings(v, list(), ResponseCheck::Off).is_empty());
    }

    #[test]
    fn findings_stop_at_their_cap() {
        let props: serde_json::Map<String, Json> = (0..20)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        let value: serde_json::Map<String, Json> =
            (0..20).map(|i| (format!("f{i}"), json!(i))).collect();
        let f = findings(
            Json::Object(value),
            json!({"type": "object", "properties": props}),
            ResponseCheck::Full,
        );
        assert_eq!(f.len(), MAX_FINDINGS);
    }

    /// Every JSON type and enum member a decoded answer can hold matches its schema.
    #[test]
    fn each_json_type_and_enum_member_matches() {
        let schema = json!({"type": "object", "properties": {
            "b": {"type": "boolean"}, "f": {"type": "number"}, "i": {"type": "integer"},
            "n": {"type": "null"}, "s": {"type": "string"},
            "eb": {"enum": [true]}, "ef": {"enum": [1.5]}, "ei": {"enum": [2]},
            "en": {"enum": [null]}, "es": {"enum": ["x"]}}});
        let value = json!({"b": false, "f": 0.5, "i": 3, "n": null, "s": "t",
            "eb": true, "ef": 1.5, "ei": 2, "en": null, "es": "x"});
        assert!(findings(value, schema.clone(), ResponseCheck::Full).is_empty());
        let wrong = json!({"eb": false, "ef": 2.5, "ei": 3, "en": 0, "es": "y"});
        assert_eq!(findings(wrong, schema, ResponseCheck::Full).len(), 5);
        // `nullable` admits null, and only null.
        let nullable = json!({"type": "string", "nullable": true});
        assert!(findings(json!(null), nullable.clone(), ResponseCheck::Full).is_empty());
        assert_eq!(
            findings(json!(5), nullable, ResponseCheck::Full),
            ["/: expected string, got integer"]
        );
    }

    /// The walk stops at its depth limit: drift nested deeper is not looked for.
    #[test]
    fn nesting_is_checked_down_to_the_depth_limit() {
        let nested = |depth: usize| {
            let mut v = json!("leaf");
            for _ in 0..depth {
                v = json!([v]);
            }
            v
        };
        // `{"$ref": "#/$defs/Trace"}` everywhere would need a definition: an array of arrays
        // says it with `items` pointing at itself through the root's `$defs`.
        let v = |depth| {
            Value::from_json_bytes(nested(depth).to_string().as_bytes(), &Default::default())
                .unwrap()
        };
        let defs = BTreeMap::from([(
            "N".to_string(),
            json!({"type": "array", "items": {"$ref": "#/$defs/N"}}),
        )]);
        let root = json!({"$ref": "#/$defs/N"});
        let schema = Schema {
            root: &root,
            definitions: Some(&defs),
        };
        let at = |depth| check(&v(depth), schema, ResponseCheck::Full);
        // The leaf (a string where an array is documented) is at depth `depth`.
        assert_eq!(at(MAX_DEPTH).len(), 1);
        assert!(at(MAX_DEPTH + 1).is_empty());
        // Objects count the same way.
        let defs = BTreeMap::from([(
            "O".to_string(),
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/O"}}}),
        )]);
        let root = json!({"$ref": "#/$defs/O"});
        let in_objects = |depth: usize| {
            let mut j = json!("leaf");
            for _ in 0..depth {
                j = json!({"a": j});
            }
            let v = Value::from_json_bytes(j.to_string().as_bytes(), &Default::default()).unwrap();
            let schema = Schema {
                root: &root,
                definitions: Some(&defs),
            };
            check(&v, schema, ResponseCheck::Full)
        };
        assert_eq!(in_objects(MAX_DEPTH).len(), 1);
        assert!(in_objects(MAX_DEPTH + 1).is_empty());
    }

    /// Fields a closed object does not list are findings too, and stop at the cap.
    #[test]
    fn closed_objects_findings_stop_at_their_cap() {
        let value: serde_json::Map<String, Json> =
            (0..20).map(|i| (format!("f{i:02}"), json!(i))).collect();
        let f = findings(
            Json::Object(value),
            json!({"type": "object", "additionalProperties": false}),
            ResponseCheck::Full,
        );
        assert_eq!(f.len(), MAX_FINDINGS);
    }

    /// The process's watch counts each drifted field per tool, and says whether it is strict.
    #[test]
    fn the_watch_counts_drift_per_tool_and_field() {
        let watch = DriftWatch::new(ResponseCheck::Full, true);
        assert!(watch.strict());
        assert!(!DriftWatch::new(ResponseCheck::Full, false).strict());
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"},
            "b": {"type": "string"}}});
        let defs = BTreeMap::new();
        let s = Schema {
            root: &schema,
            definitions: Some(&defs),
        };
        let v = |j: Json| {
            Value::from_json_bytes(j.to_string().as_bytes(), &Default::default()).unwrap()
        };
        assert_eq!(
            watch.check("up/t", &v(json!({"a": 1, "b": 2})), s),
            [
                "/a: expected string, got integer",
                "/b: expected string, got integer"
            ]
        );
        assert!(watch.check("up/t", &v(json!({"a": "ok", "b": 2})), s).len() == 1);
        assert!(watch.check("up/u", &v(json!({"a": "ok"})), s).is_empty());
        assert_eq!(
            watch.counts(),
            [
                ("up/t".to_string(), "/a".to_string(), 1),
                ("up/t".to_string(), "/b".to_string(), 2)
            ]
        );
    }

    #[test]
    fn flag_values_read_and_name_themselves() {
        for m in [
            ResponseCheck::Off,
            ResponseCheck::Sampled,
            ResponseCheck::Full,
        ] {
            assert_eq!(ResponseCheck::parse(m.as_str()), Ok(m));
        }
        assert_eq!(
            ResponseCheck::parse("all").unwrap_err(),
            "response check `all`: use off, sampled or full"
        );
    }
}
