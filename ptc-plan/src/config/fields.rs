//! Reading a JSON object field by field while collecting every problem.
//!
//! serde's `deny_unknown_fields` stops at the first error and cannot suggest the field the user
//! meant; this reader records each field it is asked for, so whatever is left over is unknown and
//! can be matched against the known names.

use std::path::Path;

use serde_json::{Map, Value};

use crate::diagnostic::{Reporter, pointer_join};
use crate::suggest::did_you_mean;

/// Where diagnostics go and what they are about.
pub(crate) struct Cx<'a> {
    pub file: &'a Path,
    pub report: Reporter<'a>,
}

impl Cx<'_> {
    /// Records that `what` at `pointer` has the wrong JSON type.
    pub fn wrong_type(
        &mut self,
        pointer: &str,
        what: &str,
        expected: &str,
        got: &Value,
        help: Option<String>,
    ) {
        self.error(
            pointer,
            format!("{what} must be {expected}, got {}", type_name(got)),
            help,
        );
    }

    /// `value` as an object, or a recorded problem.
    pub fn object<'v>(
        &mut self,
        value: &'v Value,
        pointer: &str,
        what: &str,
        help: &str,
    ) -> Option<&'v Map<String, Value>> {
        match value {
            Value::Object(map) => Some(map),
            other => {
                self.wrong_type(pointer, what, "an object", other, Some(help.to_string()));
                None
            }
        }
    }

    /// Records a problem at `pointer`, with a fix when one is known.
    pub fn error(&mut self, pointer: &str, message: impl Into<String>, help: Option<String>) {
        self.report.error(self.file, pointer, message, help);
    }
}

/// The fields of one JSON object, read one at a time.
pub(crate) struct Fields<'v> {
    map: &'v Map<String, Value>,
    pub pointer: String,
    what: &'static str,
    known: Vec<&'static str>,
}

/// Describes a JSON value's type for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'v> Fields<'v> {
    /// Starts reading `value` as an object; records a problem and returns `None` when it is not one.
    pub fn new(cx: &mut Cx, value: &'v Value, pointer: &str, what: &'static str) -> Option<Self> {
        match value {
            Value::Object(map) => Some(Self {
                map,
                pointer: pointer.to_string(),
                what,
                known: Vec::new(),
            }),
            other => {
                cx.wrong_type(pointer, what, "a JSON object", other, None);
                None
            }
        }
    }

    /// Pointer to one of this object's fields.
    pub fn at(&self, key: &str) -> String {
        pointer_join(&self.pointer, key)
    }

    /// Records that field `key` has the wrong type.
    fn wrong(&self, cx: &mut Cx, key: &str, expected: &str, got: &Value, help: Option<String>) {
        cx.wrong_type(&self.at(key), &format!("`{key}`"), expected, got, help);
    }

    /// The raw field, marking it as known.
    pub fn get(&mut self, key: &'static str) -> Option<&'v Value> {
        self.known.push(key);
        self.map.get(key)
    }

    /// A field that must be present.
    pub fn required(&mut self, cx: &mut Cx, key: &'static str, help: &str) -> Option<&'v Value> {
        let v = self.get(key);
        if v.is_none() {
            cx.error(
                &self.pointer,
                format!("{} is missing required field `{key}`", self.what),
                Some(help.to_string()),
            );
        }
        v
    }

    /// An optional string field.
    pub fn string(&mut self, cx: &mut Cx, key: &'static str) -> Option<&'v str> {
        match self.get(key)? {
            Value::String(s) => Some(s),
            other => {
                self.wrong(cx, key, "a string", other, None);
                None
            }
        }
    }

    /// A required, non-empty string field.
    pub fn required_string(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
        help: &str,
    ) -> Option<&'v str> {
        match self.required(cx, key, help)? {
            Value::String(s) if !s.trim().is_empty() => Some(s),
            Value::String(_) => {
                cx.error(
                    &self.at(key),
                    format!("`{key}` must not be empty"),
                    Some(help.into()),
                );
                None
            }
            other => {
                self.wrong(cx, key, "a string", other, Some(help.into()));
                None
            }
        }
    }

    /// An optional boolean field (false when absent).
    pub fn bool(&mut self, cx: &mut Cx, key: &'static str) -> bool {
        match self.get(key) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.wrong(cx, key, "true or false", other, None);
                false
            }
        }
    }

    /// An optional positive integer field; `default` when absent.
    pub fn positive(&mut self, cx: &mut Cx, key: &'static str, default: u64) -> u64 {
        self.positive_opt(cx, key).unwrap_or(default)
    }

    /// An optional positive integer field.
    pub fn positive_opt(&mut self, cx: &mut Cx, key: &'static str) -> Option<u64> {
        let value = self.get(key)?;
        match value.as_u64() {
            Some(v) if v > 0 => Some(v),
            _ => {
                self.integer_problem(cx, key, "a positive integer", value);
                None
            }
        }
    }

    /// An optional non-negative integer field that fits in u32; `default` when absent.
    pub fn count(&mut self, cx: &mut Cx, key: &'static str, default: u32) -> u32 {
        let Some(value) = self.get(key) else {
            return default;
        };
        match value.as_u64().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => v,
            None => {
                self.integer_problem(cx, key, "a non-negative integer", value);
                default
            }
        }
    }

    fn integer_problem(&self, cx: &mut Cx, key: &str, expected: &str, value: &Value) {
        match value {
            Value::Number(n) => cx.error(
                &self.at(key),
                format!("`{key}` must be {expected}, got {n}"),
                None,
            ),
            other => self.wrong(cx, key, expected, other, None),
        }
    }

    /// An optional array of strings.
    pub fn string_list(&mut self, cx: &mut Cx, key: &'static str) -> Option<Vec<&'v str>> {
        let at = self.at(key);
        match self.get(key)? {
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.as_str()),
                        other => cx.wrong_type(
                            &pointer_join(&at, &i.to_string()),
                            &format!("`{key}` items"),
                            "strings",
                            other,
                            None,
                        ),
                    }
                }
                Some(out)
            }
            other => {
                self.wrong(cx, key, "an array of strings", other, None);
                None
            }
        }
    }

    /// An optional object whose values are all strings.
    pub fn string_map(
        &mut self,
        cx: &mut Cx,
        key: &'static str,
    ) -> Option<Vec<(&'v str, &'v str)>> {
        let at = self.at(key);
        match self.get(key)? {
            Value::Object(map) => {
                let mut out = Vec::with_capacity(map.len());
                for (k, v) in map {
                    match v {
                        Value::String(s) => out.push((k.as_str(), s.as_str())),
                        other => cx.wrong_type(
                            &pointer_join(&at, k),
                            &format!("`{key}` values"),
                            "strings",
                            other,
                            None,
                        ),
                    }
                }
                Some(out)
            }
            other => {
                self.wrong(cx, key, "an object of strings", other, None);
                None
            }
        }
    }

    /// Reports every field nobody asked for, suggesting the known field it most resembles.
    pub fn finish(self, cx: &mut Cx) {
        for key in self.map.keys() {
            if !self.known.contains(&key.as_str()) {
                let mut known = self.known.clone();
                known.sort_unstable();
                known.dedup();
                cx.error(
                    &self.at(key),
                    format!(
                        "unknown field `{key}` in {}{}",
                        self.what,
                        did_you_mean(key, known.iter().copied())
                    ),
                    Some(format!("allowed fields: {}", known.join(", "))),
                );
            }
        }
    }
}
