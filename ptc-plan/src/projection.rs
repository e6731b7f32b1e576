//! Where a value is in a response, and how to ask for the next page: `x-ptc-result-path` and
//! `x-ptc-pagination` (or their `operation_overrides`), read once here for the compiler and the
//! runtimes. A path is written as a JSON Pointer (`/traces`, `/data/0`) or in the JSONPath subset
//! the seed shows (`$`, `$.traces`, `$.page.items`); both read to the same segments.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A path to a value inside a JSON document, as written (shown by discovery), read to its
/// segments. An object key, or an array index when the segment is all digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ValuePath {
    text: String,
    segments: Vec<String>,
}

impl ValuePath {
    /// Reads `text`: `$`, `$.a.b` (names of letters, digits, `_`, `-`), or a JSON Pointer
    /// (`""` for the whole document, `/a/b` with `~1` for `/` and `~0` for `~`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let segments = if let Some(rest) = text.strip_prefix('$') {
            if rest.is_empty() {
                Vec::new()
            } else {
                let names = rest.strip_prefix('.').ok_or_else(|| bad(text))?;
                let names: Vec<String> = names.split('.').map(str::to_string).collect();
                let plain = |s: &String| {
                    !s.is_empty()
                        && s.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                };
                if !names.iter().all(plain) {
                    return Err(bad(text));
                }
                names
            }
        } else if text.is_empty() {
            Vec::new()
        } else if let Some(rest) = text.strip_prefix('/') {
            let mut out = Vec::new();
            for raw in rest.split('/') {
                if raw.replace("~0", "").replace("~1", "").contains('~') {
                    return Err(format!(
                        "`{text}`: `~` must be written `~0` in a JSON Pointer (and `/` as `~1`)"
                    ));
                }
                out.push(raw.replace("~1", "/").replace("~0", "~"));
            }
            out
        } else {
            return Err(bad(text));
        };
        Ok(ValuePath {
            text: text.to_string(),
            segments,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Its segments, outermost first; empty for the whole document.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The value at this path in `doc`, if there is one.
    pub fn select<'a>(&self, doc: &'a Value) -> Option<&'a Value> {
        self.segments.iter().try_fold(doc, |v, seg| match v {
            Value::Object(m) => m.get(seg),
            Value::Array(items) => items.get(index(seg)?),
            _ => None,
        })
    }
}

/// An array index segment: digits only, no leading zero (as JSON Pointer writes them).
pub fn index(seg: &str) -> Option<usize> {
    let digits = !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit());
    (digits && (seg == "0" || !seg.starts_with('0')))
        .then(|| seg.parse().ok())
        .flatten()
}

fn bad(text: &str) -> String {
    format!("`{text}` is not a path: write `$.a.b` or a JSON Pointer like `/a/b`")
}

impl TryFrom<String> for ValuePath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        ValuePath::parse(&s)
    }
}

impl From<ValuePath> for String {
    fn from(p: ValuePath) -> String {
        p.text
    }
}

impl std::fmt::Display for ValuePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// How to ask an operation for its next page (`x-ptc-pagination`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Pagination {
    /// The response names the next page's cursor; sent back in `cursor_arg`. The last page has
    /// none (missing, `null` or `""`).
    Cursor {
        /// Argument that carries the cursor.
        cursor_arg: String,
        /// Where the next cursor is in the response, e.g. `$.next_cursor`.
        next_cursor_path: ValuePath,
    },
    /// Numbered pages (`?page=2`): the last page is empty, or shorter than the page size.
    Page {
        /// Argument that carries the page number.
        page_arg: String,
        /// The first page's number.
        #[serde(default = "one")]
        first_page: i64,
        /// Argument that carries the page size, when the operation has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size_arg: Option<String>,
    },
    /// An offset into the whole list (`?offset=100`): it grows by the items a page returned;
    /// the last page is empty, or shorter than the limit.
    Offset {
        /// Argument that carries the offset.
        offset_arg: String,
        /// Argument that carries the page size, when the operation has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_arg: Option<String>,
    },
}

fn one() -> i64 {
    1
}

/// How a `x-ptc-pagination` value must look, for every message about a wrong one.
pub const PAGINATION_FORMS: &str = "{\"cursor_arg\": \"cursor\", \"next_cursor_path\": \"$.next\"}, \
     {\"page_arg\": \"page\", \"first_page\": 1, \"size_arg\": \"per_page\"} or \
     {\"offset_arg\": \"offset\", \"limit_arg\": \"limit\"}";

impl Pagination {
    /// Reads a `x-ptc-pagination` (or override) value; the error says what is wrong.
    pub fn read(value: &Value) -> Result<Self, String> {
        let m = value
            .as_object()
            .ok_or_else(|| format!("must be one of {PAGINATION_FORMS}"))?;
        let (style, keys): (&str, &[&str]) = if m.contains_key("cursor_arg") {
            ("cursor", &["cursor_arg", "next_cursor_path"])
        } else if m.contains_key("page_arg") {
            ("page", &["page_arg", "first_page", "size_arg"])
        } else if m.contains_key("offset_arg") {
            ("offset", &["offset_arg", "limit_arg"])
        } else {
            return Err(format!(
                "names no style (cursor_arg, page_arg or offset_arg): use one of {PAGINATION_FORMS}"
            ));
        };
        if let Some(k) = m.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(format!(
                "`{k}` does not belong to {style} pagination (it takes {})",
                keys.join(", ")
            ));
        }
        let text = |key: &str| -> Result<Option<String>, String> {
            match m.get(key) {
                None => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(_) => Err(format!("`{key}` must be a non-empty string")),
            }
        };
        let needed = |key: &str| text(key)?.ok_or_else(|| format!("`{key}` is missing"));
        Ok(match style {
            "cursor" => Pagination::Cursor {
                cursor_arg: needed("cursor_arg")?,
                next_cursor_path: ValuePath::parse(&needed("next_cursor_path")?)
                    .map_err(|e| format!("`next_cursor_path` {e}"))?,
            },
            "page" => Pagination::Page {
                page_arg: needed("page_arg")?,
                first_page: match m.get("first_page") {
                    None => 1,
                    Some(v) => v
                        .as_i64()
                        .filter(|n| *n >= 0)
                        .ok_or("`first_page` must be a whole number, 0 or more")?,
                },
                size_arg: text("size_arg")?,
            },
            _ => Pagination::Offset {
                offset_arg: needed("offset_arg")?,
                limit_arg: text("limit_arg")?,
            },
        })
    }

    /// The style's name: `cursor`, `page` or `offset`.
    pub fn style(&self) -> &'static str {
        match self {
            Pagination::Cursor { .. } => "cursor",
            Pagination::Page { .. } => "page",
            Pagination::Offset { .. } => "offset",
        }
    }

    /// The argument that moves to the next page.
    pub fn position_arg(&self) -> &str {
        match self {
            Pagination::Cursor { cursor_arg, .. } => cursor_arg,
            Pagination::Page { page_arg, .. } => page_arg,
            Pagination::Offset { offset_arg, .. } => offset_arg,
        }
    }

    /// Every argument the style names, with the key it is named by.
    pub fn args(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![(
            match self {
                Pagination::Cursor { .. } => "cursor_arg",
                Pagination::Page { .. } => "page_arg",
                Pagination::Offset { .. } => "offset_arg",
            },
            self.position_arg(),
        )];
        match self {
            Pagination::Page {
                size_arg: Some(a), ..
            } => out.push(("size_arg", a)),
            Pagination::Offset {
                limit_arg: Some(a), ..
            } => out.push(("limit_arg", a)),
            _ => {}
        }
        out
    }

    /// Whether each page must be a list (the items are what moves the position on).
    pub fn counts_items(&self) -> bool {
        !matches!(self, Pagination::Cursor { .. })
    }
}

/// The schema of what `path` selects in a value of `schema`, following `$ref`s into
/// `definitions`; the error names the segment that is not there and what is.
///
/// A schema that says nothing of a segment's shape (no `type`, no `properties`: an open
/// object, `{}`) lets any path through with an open schema; a schema that lists its properties
/// must list the segment.
pub fn schema_at(
    schema: &Value,
    path: &ValuePath,
    definitions: &BTreeMap<String, Value>,
) -> Result<Value, String> {
    let mut here = schema.clone();
    for (depth, seg) in path.segments().iter().enumerate() {
        let node = crate::schema::resolve(&here, definitions)
            .map_err(|e| e.message)?
            .into_owned();
        let so_far = || {
            if depth == 0 {
                "the response".to_string()
            } else {
                format!("`{}`", path.segments()[..depth].join("."))
            }
        };
        let types = type_names(&node);
        let next = if types.iter().any(|t| t == "array") && index(seg).is_some() {
            node.get("items")
                .cloned()
                .unwrap_or(Value::Object(Map::new()))
        } else if let Some(props) = node.get("properties").and_then(Value::as_object) {
            match props.get(seg) {
                Some(s) => s.clone(),
                None => {
                    let mut known: Vec<&str> = props.keys().map(String::as_str).collect();
                    known.sort_unstable();
                    return Err(format!(
                        "{} has no property `{seg}`{}",
                        so_far(),
                        if known.is_empty() {
                            String::new()
                        } else {
                            format!(" (it has {})", known.join(", "))
                        }
                    ));
                }
            }
        } else if types.is_empty() || types.iter().any(|t| t == "object") {
            // An open object: nothing to check the segment against.
            node.get("additionalProperties")
                .filter(|a| a.is_object())
                .cloned()
                .unwrap_or(Value::Object(Map::new()))
        } else {
            return Err(format!(
                "{} is {}, which has no `{seg}`",
                so_far(),
                types.join(" or ")
            ));
        };
        here = next;
    }
    Ok(here)
}

/// The `type` names a schema allows (empty when it does not say).
fn type_names(schema: &Value) -> Vec<String> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether a value of `schema` may be something other than a list (so pages of it cannot be
/// counted in items); `false` when the schema does not say.
pub fn is_not_a_list(schema: &Value, definitions: &BTreeMap<String, Value>) -> bool {
    let Ok(node) = crate::schema::resolve(schema, definitions) else {
        return false;
    };
    let types = type_names(&node);
    !types.is_empty() && !types.iter().all(|t| t == "array" || t == "null")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn segs(text: &str) -> Vec<String> {
        ValuePath::parse(text).unwrap().segments().to_vec()
    }

    #[test]
    fn both_spellings_read_to_the_same_segments() {
        assert!(segs("$").is_empty());
        assert!(segs("").is_empty());
        assert_eq!(segs("$.traces"), ["traces"]);
        assert_eq!(segs("/traces"), ["traces"]);
        assert_eq!(segs("$.page.items-x_1"), ["page", "items-x_1"]);
        assert_eq!(segs("/data/0"), ["data", "0"]);
        assert_eq!(segs("/a~1b/c~0d/"), ["a/b", "c~d", ""]);
    }

    /// The plan stores a path as written and reads it back to the same segments; a page
    /// style without `first_page` starts at 1.
    #[test]
    fn plans_keep_paths_and_styles_as_written() {
        let p = ValuePath::parse("$.traces").unwrap();
        assert_eq!(serde_json::to_value(&p).unwrap(), json!("$.traces"));
        let back: ValuePath = serde_json::from_value(json!("/a/0")).unwrap();
        assert_eq!(back.segments(), ["a", "0"]);
        assert!(serde_json::from_value::<ValuePath>(json!("a.b")).is_err());
        let page: Pagination = serde_json::from_value(json!({"page_arg": "p"})).unwrap();
        assert!(matches!(page, Pagination::Page { first_page: 1, .. }));
    }

    #[test]
    fn malformed_paths_are_refused_with_the_spellings() {
        for bad in [
            "traces", "$traces", "$.", "$.a..b", "$.a b", "$['a']", "/a~2",
        ] {
            let e = ValuePath::parse(bad).expect_err(bad);
            assert!(e.contains(bad), "{e}");
        }
        assert!(ValuePath::parse("/a~").unwrap_err().contains("~0"));
    }

    #[test]
    fn select_follows_keys_and_indexes() {
        let doc = json!({"data": [{"id": 1}, {"id": 2}], "a/b": true});
        let at = |p: &str| ValuePath::parse(p).unwrap().select(&doc).cloned();
        assert_eq!(at("/data/1/id"), Some(json!(2)));
        assert_eq!(at("$"), Some(doc.clone()));
        assert_eq!(at("/a~1b"), Some(json!(true)));
        assert_eq!(at("/data/2"), None);
        assert_eq!(at("/data/01"), None);
        assert_eq!(at("/data/x"), None);
        assert_eq!(at("$.data.id"), None);
        assert_eq!(at("$.missing"), None);
    }

    #[test]
    fn indexes_have_no_sign_and_no_leading_zero() {
        assert_eq!(index("0"), Some(0));
        assert_eq!(index("10"), Some(10));
        assert_eq!(index("01"), None);
        assert_eq!(index("-1"), None);
        assert_eq!(index("+1"), None);
        assert_eq!(index("x"), None);
        assert_eq!(index(""), None);
    }

    #[test]
    fn pagination_styles_read_with_their_keys_only() {
        let p = Pagination::read(&json!({"cursor_arg": "c", "next_cursor_path": "/next"})).unwrap();
        assert_eq!(p.position_arg(), "c");
        assert_eq!(p.style(), "cursor");
        assert!(!p.counts_items());
        let p = Pagination::read(&json!({"page_arg": "page", "size_arg": "per_page"})).unwrap();
        assert_eq!(
            p,
            Pagination::Page {
                page_arg: "page".into(),
                first_page: 1,
                size_arg: Some("per_page".into())
            }
        );
        assert_eq!(p.args(), [("page_arg", "page"), ("size_arg", "per_page")]);
        assert!(p.counts_items());
        let p = Pagination::read(&json!({"offset_arg": "offset", "limit_arg": "limit"})).unwrap();
        assert_eq!(p.args(), [("offset_arg", "offset"), ("limit_arg", "limit")]);
        let first0 = Pagination::read(&json!({"page_arg": "p", "first_page": 0})).unwrap();
        assert!(matches!(first0, Pagination::Page { first_page: 0, .. }));
        for (bad, says) in [
            (json!("cursor"), "must be one of"),
            (json!({"next": "x"}), "names no style"),
            (json!({"cursor_arg": "c"}), "`next_cursor_path` is missing"),
            (
                json!({"cursor_arg": "c", "next_cursor_path": "next"}),
                "`next_cursor_path` `next` is not a path",
            ),
            (
                json!({"page_arg": "p", "limit_arg": "l"}),
                "`limit_arg` does not belong to page pagination",
            ),
            (json!({"page_arg": "p", "first_page": -1}), "`first_page`"),
            (
                json!({"offset_arg": ""}),
                "`offset_arg` must be a non-empty string",
            ),
        ] {
            let e = Pagination::read(&bad).expect_err(&bad.to_string());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_schema_at_a_path_follows_refs_properties_and_items() {
        let defs = BTreeMap::from([(
            "List".to_string(),
            json!({"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "string"}},
                "next": {"type": ["string", "null"]}}}),
        )]);
        let root = json!({"$ref": "#/$defs/List"});
        let at = |p: &str| schema_at(&root, &ValuePath::parse(p).unwrap(), &defs);
        assert_eq!(
            at("$.items").unwrap(),
            json!({"type": "array", "items": {"type": "string"}})
        );
        assert_eq!(at("/items/0").unwrap(), json!({"type": "string"}));
        assert_eq!(at("$").unwrap(), root);
        assert_eq!(
            at("$.itemz").unwrap_err(),
            "the response has no property `itemz` (it has items, next)"
        );
        assert_eq!(
            at("$.next.x").unwrap_err(),
            "`next` is string or null, which has no `x`"
        );
        // An index only goes into an array; an array has nothing but indexes.
        assert_eq!(
            at("/0").unwrap_err(),
            "the response has no property `0` (it has items, next)"
        );
        assert_eq!(
            at("/items/x").unwrap_err(),
            "`items` is array, which has no `x`"
        );
        // An open object lets any path through.
        let open = json!({"type": "object"});
        let p = ValuePath::parse("$.a.b").unwrap();
        assert_eq!(schema_at(&open, &p, &defs).unwrap(), json!({}));
        assert!(is_not_a_list(&json!({"$ref": "#/$defs/List"}), &defs));
        assert!(!is_not_a_list(&json!({"type": ["array", "null"]}), &defs));
        assert!(!is_not_a_list(&json!({}), &defs));
    }
}
