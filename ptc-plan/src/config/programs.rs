//! `programs`: PTC-Lisp programs a deployment offers as named tools, each a file beside the
//! config with its description, parameters and result. Only the declaration is read here; the
//! program text is read and checked against the compiled upstreams by [`crate::programs`].

use serde_json::{Value, json};

use super::fields::{Cx, Fields};
use crate::diagnostic::pointer_join;

/// One declared program, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramConfig {
    /// Its tool name (kebab-case).
    pub name: String,
    /// JSON pointer of its entry in the config.
    pub pointer: String,
    /// The program file, resolved against the config's folder.
    pub file: String,
    /// What it answers, for the agent choosing a tool.
    pub description: String,
    /// JSON Schema of its arguments: an object schema whose properties the program reads as
    /// `data/<name>`.
    pub parameters: Value,
    /// JSON Schema of its result (`{}`: any value).
    pub result: Value,
    /// The writes it may call, `server/tool`, each with the pointer it is written at.
    pub writes: Vec<(String, String)>,
}

/// The longest program name: MCP clients show tool names in narrow places, and some cap them
/// at 64 characters.
pub const MAX_NAME: usize = 64;

/// Reads the `programs` object: name → declaration.
pub(super) fn parse_all(
    cx: &mut Cx,
    value: &Value,
    pointer: &str,
    base_dir: &std::path::Path,
) -> Vec<ProgramConfig> {
    let Some(map) = cx.object(
        value,
        pointer,
        "`programs`",
        "map each program's tool name to {\"file\": ..., \"description\": ..., \"parameters\": {...}}",
    ) else {
        return Vec::new();
    };
    let mut out: Vec<ProgramConfig> = map
        .iter()
        .filter_map(|(name, entry)| {
            parse_one(cx, name, entry, &pointer_join(pointer, name), base_dir)
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn parse_one(
    cx: &mut Cx,
    name: &str,
    entry: &Value,
    pointer: &str,
    base_dir: &std::path::Path,
) -> Option<ProgramConfig> {
    if !is_tool_name(name) {
        cx.error(
            pointer,
            format!(
                "program name `{name}` is not a tool name: lowercase letters, digits and single \
                 dashes, starting with a letter, at most {MAX_NAME} characters"
            ),
            Some(format!(
                "rename it, e.g. `{}`",
                heck::AsKebabCase(name)
                    .to_string()
                    .chars()
                    .take(MAX_NAME)
                    .collect::<String>()
            )),
        );
    }
    let mut f = Fields::new(cx, entry, pointer, "a program")?;
    let file = f.required_string(
        cx,
        "file",
        "name the program's file, relative to this config: \"file\": \"programs/NAME.clj\"",
    );
    let description = f.required_string(
        cx,
        "description",
        "say what the program answers: agents choose tools by it",
    );
    let parameters = match f.get("parameters") {
        None => json!({"type": "object", "properties": {}}),
        Some(p) => {
            check_parameters(cx, p, &f.at("parameters"));
            p.clone()
        }
    };
    let result = match f.get("result") {
        None => json!({}),
        Some(r @ Value::Object(_)) => r.clone(),
        Some(other) => {
            cx.wrong_type(
                &f.at("result"),
                "`result`",
                "a JSON Schema object",
                other,
                Some("describe the program's answer, e.g. {\"type\": \"object\", ...}".into()),
            );
            json!({})
        }
    };
    let writes_at = f.at("writes");
    let writes = match f.get("writes") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let at = pointer_join(&writes_at, &i.to_string());
                match w.as_str() {
                    Some(w) => Some((w.to_string(), at)),
                    None => {
                        cx.wrong_type(&at, "a `writes` entry", "a string (server/tool)", w, None);
                        None
                    }
                }
            })
            .collect(),
        Some(other) => {
            cx.wrong_type(
                &writes_at,
                "`writes`",
                "an array of server/tool names",
                other,
                None,
            );
            Vec::new()
        }
    };
    f.finish(cx);
    Some(ProgramConfig {
        name: name.to_string(),
        pointer: pointer.to_string(),
        file: crate::paths::resolve(base_dir, file?),
        description: description?.to_string(),
        parameters,
        result,
        writes,
    })
}

/// A kebab-case name: lowercase letters and digits in words joined by single dashes.
fn is_tool_name(name: &str) -> bool {
    name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A parameter name the program can read as `data/<name>`.
fn is_parameter_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `parameters` must be an object schema: its properties are the arguments, each read as
/// `data/<name>`.
fn check_parameters(cx: &mut Cx, p: &Value, pointer: &str) {
    let help = "give an object schema: {\"type\": \"object\", \"properties\": {\"org_id\": \
                {\"type\": \"string\"}}, \"required\": [\"org_id\"]}";
    let Some(schema) = cx.object(p, pointer, "`parameters`", help) else {
        return;
    };
    if schema.get("type") != Some(&Value::String("object".into())) {
        cx.error(
            &pointer_join(pointer, "type"),
            "`parameters` must be an object schema (\"type\": \"object\"): a program's \
             arguments are named",
            Some(help.into()),
        );
    }
    let props = match schema.get("properties") {
        None => None,
        Some(Value::Object(props)) => Some(props),
        Some(other) => {
            cx.wrong_type(
                &pointer_join(pointer, "properties"),
                "`properties`",
                "an object",
                other,
                Some(help.into()),
            );
            None
        }
    };
    for (name, schema) in props.into_iter().flatten() {
        let at = pointer_join(&pointer_join(pointer, "properties"), name);
        if !is_parameter_name(name) {
            cx.error(
                &at,
                format!(
                    "parameter name `{name}` cannot be read as data/{name}: use letters, digits, \
                     `_` and `-`, starting with a letter or `_`"
                ),
                Some("rename the parameter".into()),
            );
        }
        if !schema.is_object() {
            cx.wrong_type(
                &at,
                &format!("parameter `{name}`"),
                "a JSON Schema object",
                schema,
                None,
            );
        }
    }
    match schema.get("required") {
        None => {}
        Some(Value::Array(required)) => {
            for (i, r) in required.iter().enumerate() {
                let at = pointer_join(&pointer_join(pointer, "required"), &i.to_string());
                match r.as_str() {
                    Some(r) if props.is_some_and(|p| p.contains_key(r)) => {}
                    Some(r) => cx.error(
                        &at,
                        format!(
                            "`required` names `{r}`, which is not a parameter{}",
                            crate::suggest::did_you_mean(
                                r,
                                props.into_iter().flatten().map(|(k, _)| k.as_str())
                            )
                        ),
                        Some(format!(
                            "add `{r}` to `properties`, or remove it from `required`"
                        )),
                    ),
                    None => cx.wrong_type(&at, "a `required` entry", "a string", r, None),
                }
            }
        }
        Some(other) => cx.wrong_type(
            &pointer_join(pointer, "required"),
            "`required`",
            "an array of parameter names",
            other,
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_kebab_case_and_at_most_64_characters() {
        for good in ["errors-by-class", "a", "a1-b2", &"a".repeat(MAX_NAME)] {
            assert!(is_tool_name(good), "{good}");
        }
        for bad in [
            "",
            "Errors",
            "errors_by_class",
            "-a",
            "a-",
            "a--b",
            "1a",
            "a b",
            &"a".repeat(MAX_NAME + 1),
        ] {
            assert!(!is_tool_name(bad), "{bad}");
        }
    }

    #[test]
    fn parameter_names_are_readable_as_data_keys() {
        for good in ["org_id", "org-id", "_x", "A1"] {
            assert!(is_parameter_name(good), "{good}");
        }
        for bad in ["", "1a", "-a", "a/b", "a b", "a.b"] {
            assert!(!is_parameter_name(bad), "{bad}");
        }
    }
}
