//! `x-ptc-*` vendor extensions on an operation: agent-facing metadata the document may carry.
//! They are read here and never sent over the wire.

use serde_json::{Map, Value};

use crate::projection::{Pagination, ValuePath};
use crate::suggest::did_you_mean;

/// Every extension ptc understands.
pub const KNOWN: [&str; 7] = [
    "x-ptc-name",
    "x-ptc-read-only",
    "x-ptc-default-args",
    "x-ptc-result-path",
    "x-ptc-pagination",
    "x-ptc-max-response-bytes",
    "x-ptc-notes",
];

/// The extensions of one operation.
#[derive(Debug, Default)]
pub struct Extensions {
    pub name: Option<String>,
    pub read_only: Option<bool>,
    pub default_args: Option<Map<String, Value>>,
    pub result_path: Option<ValuePath>,
    pub pagination: Option<Pagination>,
    pub max_response_bytes: Option<u64>,
    pub notes: Option<String>,
}

/// Reads the `x-ptc-*` keys of `op`. Each problem is `(key, message)`.
pub fn read(op: &Map<String, Value>) -> (Extensions, Vec<(String, String)>) {
    let mut ext = Extensions::default();
    let mut problems = Vec::new();
    for (key, value) in op.iter().filter(|(k, _)| k.starts_with("x-ptc-")) {
        let mut bad = |what: &str| problems.push((key.clone(), format!("`{key}` must be {what}")));
        match key.as_str() {
            "x-ptc-name" => match value {
                Value::String(s) if !s.trim().is_empty() => ext.name = Some(s.clone()),
                _ => bad("a non-empty string"),
            },
            "x-ptc-read-only" => match value {
                Value::Bool(b) => ext.read_only = Some(*b),
                _ => bad("true or false"),
            },
            "x-ptc-default-args" => match value {
                Value::Object(m) => ext.default_args = Some(m.clone()),
                _ => bad("an object of argument defaults"),
            },
            "x-ptc-result-path" => match value.as_str().map(ValuePath::parse) {
                Some(Ok(p)) => ext.result_path = Some(p),
                Some(Err(e)) => problems.push((key.clone(), format!("`{key}`: {e}"))),
                None => bad("a path like `$.traces` or `/traces`"),
            },
            "x-ptc-pagination" => match Pagination::read(value) {
                Ok(p) => ext.pagination = Some(p),
                Err(e) => problems.push((key.clone(), format!("`{key}` {e}"))),
            },
            "x-ptc-max-response-bytes" => match value.as_u64() {
                Some(n) if n > 0 => ext.max_response_bytes = Some(n),
                _ => bad("a positive integer"),
            },
            "x-ptc-notes" => match value {
                Value::String(s) => ext.notes = Some(s.clone()),
                _ => bad("a string"),
            },
            other => problems.push((
                key.clone(),
                format!(
                    "unknown PTC extension `{other}`{}",
                    did_you_mean(other, KNOWN)
                ),
            )),
        }
    }
    (ext, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_known_extensions() {
        let op = json!({
            "x-ptc-name": "list_traces", "x-ptc-read-only": true,
            "x-ptc-default-args": {"limit": 50}, "x-ptc-result-path": "$.traces",
            "x-ptc-pagination": {"cursor_arg": "cursor", "next_cursor_path": "$.next_cursor"},
            "x-ptc-max-response-bytes": 1024, "x-ptc-notes": "filter first"
        });
        let (ext, problems) = read(op.as_object().unwrap());
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(ext.name.as_deref(), Some("list_traces"));
        assert_eq!(ext.max_response_bytes, Some(1024));
        assert_eq!(ext.pagination.unwrap().position_arg(), "cursor");
        assert_eq!(ext.result_path.unwrap().segments(), ["traces"]);
        assert_eq!(ext.default_args.unwrap()["limit"], 50);
    }

    #[test]
    fn rejects_malformed_and_unknown() {
        let op = json!({"x-ptc-default-arg": {}, "x-ptc-result-path": "traces[0]", "x-ptc-max-response-bytes": -1, "x-ptc-pagination": {"cursor_arg": "c"}});
        let (_, problems) = read(op.as_object().unwrap());
        let text: Vec<String> = problems.into_iter().map(|(_, m)| m).collect();
        assert!(
            text.iter().any(|m| m.contains(
                "unknown PTC extension `x-ptc-default-arg` (did you mean `x-ptc-default-args`?)"
            )),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|m| m.contains("`x-ptc-result-path`: `traces[0]` is not a path")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|m| m.contains("`x-ptc-pagination` `next_cursor_path` is missing")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|m| m.contains("`x-ptc-max-response-bytes` must be a positive integer")),
            "{text:?}"
        );
    }
}
