//! Reading a JSON object field by field while collecting every problem.
//!
//! serde's `deny_unknown_fields` stops at the first error and cannot suggest the field the user
//! meant; this reader records each field it is asked for, so whatever is left over is unknown and
//! can be matched against the known names.

use std::path::Path;

use serde_json::{Map, Value};

use crate::diagnostic::{Diagnostic, Diagnostics, pointer_join};
use crate::suggest::did_you_mean;

/// Where diagnostics go and what they are about.
pub(crate) struct Cx<'a> {
    pub file: &'a Path,
    pub diags: &'a mut Diagnostics,
    pub upstream: Option<String>,
}

impl Cx<'_> {
    /// Records a problem at `pointer`, with a fix when one is known.
    pub fn error(&mut self, pointer: &str, message: impl Into<String>, help: Option<String>) {
        let mut d = Diagnostic::new(self.file, pointer, message);
        if let Some(u) = &self.upstream {
            d = d.upstream(u);
        }
        if let Some(h) = help {
            d = d.help(h);
        }
        self.diags.push(d);
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
                cx.error(
                    pointer,
                    format!("{what} must be a JSON object, got {}", type_name(other)),
                    None,
                );
                None
            }
        }
    }

    /// Pointer to one of this object's fields.
    pub fn at(&self, key: &str) -> String {
        pointer_join(&self.pointer, key)
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
                cx.error(
                    &self.at(key),
                    format!("`{key}` must be a string, got {}", type_name(other)),
                    None,
                );
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
        let v = self.required(cx, key, help)?;
        match v {
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
                cx.error(
                    &self.at(key),
                    format!("`{key}` must be a string, got {}", type_name(other)),
                    Some(help.into()),
                );
                None
            }
        }
    }

    /// An optional boolean field.
    pub fn bool(&mut self, cx: &mut Cx, key: &'static str) -> bool {
        match self.get(key) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                cx.error(
                    &self.at(key),
                    format!("`{key}` must be true or false, got {}", type_name(other)),
                    None,
                );
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
        match self.get(key)? {
            Value::Number(n) => match n.as_u64() {
                Some(v) if v > 0 => Some(v),
                _ => {
                    cx.error(
                        &self.at(key),
                        format!("`{key}` must be a positive integer, got {n}"),
                        None,
                    );
                    None
                }
            },
            other => {
                cx.error(
                    &self.at(key),
                    format!(
                        "`{key}` must be a positive integer, got {}",
                        type_name(other)
                    ),
                    None,
                );
                None
            }
        }
    }

    /// An optional non-negative integer field that fits in u32; `default` when absent.
    pub fn count(&mut self, cx: &mut Cx, key: &'static str, default: u32) -> u32 {
        match self.get(key) {
            None => default,
            Some(Value::Number(n)) => match n.as_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(v) => v,
                None => {
                    cx.error(
                        &self.at(key),
                        format!("`{key}` must be a non-negative integer, got {n}"),
                        None,
                    );
                    default
                }
            },
            Some(other) => {
                cx.error(
                    &self.at(key),
                    format!(
                        "`{key}` must be a non-negative integer, got {}",
                        type_name(other)
                    ),
                    None,
                );
                default
            }
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
                        other => cx.error(
                            &pointer_join(&at, &i.to_string()),
                            format!("`{key}` items must be strings, got {}", type_name(other)),
                            None,
                        ),
                    }
                }
                Some(out)
            }
            other => {
                cx.error(
                    &at,
                    format!(
                        "`{key}` must be an array of strings, got {}",
                        type_name(other)
                    ),
                    None,
                );
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
                        other => cx.error(
                            &pointer_join(&at, k),
                            format!(
                                "`{key}` values must be strings, got {} for `{k}`",
                                type_name(other)
                            ),
                            None,
                        ),
                    }
                }
                Some(out)
            }
            other => {
                cx.error(
                    &at,
                    format!(
                        "`{key}` must be an object of strings, got {}",
                        type_name(other)
                    ),
                    None,
                );
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
