//! An argument given straight from a parameter (`{:org-id data/org_id}`): whatever the caller
//! passes within the parameter's schema must be a value the tool's argument takes.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::validate::{Schema, resolve_name};

/// A parameter: its name and schema, and whether the caller must give it.
pub(crate) struct Param<'a> {
    pub name: &'a str,
    pub schema: &'a Value,
    pub required: bool,
}

/// What is wrong with passing `param` as argument `written` of tool `call` (whose input schema
/// is `tool`), and the fix; `None` when every value the parameter admits is one the argument
/// takes (or the argument is unknown, which the argument check reports).
pub(crate) fn problem(
    param: &Param,
    written: &str,
    tool: Schema<'_>,
    call: &str,
) -> Option<(String, String)> {
    let (props, required) = tool.properties();
    let wire = resolve_name(props?, written)?;
    let arg = props?.get(wire)?;
    let arg = tool.resolve(arg).unwrap_or(arg);
    let p = param.name;
    if required.contains(&wire) && !param.required {
        return Some((
            format!("`{wire}` is required by {call}, but parameter `{p}` is optional"),
            format!("add \"{p}\" to the parameters' \"required\" list"),
        ));
    }
    if let Some(takes) = types(arg) {
        let Some(gives) = types(param.schema) else {
            return Some((
                format!(
                    "parameter `{p}` has no type, and {call}'s `{wire}` takes {}",
                    shown(&takes)
                ),
                format!("give parameter `{p}` \"type\": {}", json_types(&takes)),
            ));
        };
        let refused: Vec<&String> = gives.iter().filter(|t| !accepts(&takes, t)).collect();
        if !refused.is_empty() {
            return Some((
                format!(
                    "parameter `{p}` is {}, but {call}'s `{wire}` takes {}",
                    shown(&gives),
                    shown(&takes)
                ),
                format!("give parameter `{p}` \"type\": {}", json_types(&takes)),
            ));
        }
    }
    if let Some(Value::Array(allowed)) = arg.get("enum") {
        let fits = match param.schema.get("enum") {
            Some(Value::Array(given)) => given.iter().all(|v| allowed.contains(v)),
            _ => false,
        };
        if !fits {
            return Some((
                format!(
                    "{call}'s `{wire}` takes one of {}, but parameter `{p}` may hold other values",
                    Value::Array(allowed.clone())
                ),
                format!(
                    "give parameter `{p}` \"enum\": {} (or a part of it)",
                    Value::Array(allowed.clone())
                ),
            ));
        }
    }
    None
}

/// The JSON types a schema names, `None` when it names none (any type).
fn types(s: &Value) -> Option<BTreeSet<String>> {
    match s.get("type")? {
        Value::String(t) => Some([t.clone()].into()),
        Value::Array(ts) => Some(
            ts.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => None,
    }
}

/// A value of type `t` is one of `takes` (an integer is a number).
fn accepts(takes: &BTreeSet<String>, t: &str) -> bool {
    takes.contains(t) || (t == "integer" && takes.contains("number"))
}

fn shown(ts: &BTreeSet<String>) -> String {
    ts.iter().cloned().collect::<Vec<_>>().join(" or ")
}

fn json_types(ts: &BTreeSet<String>) -> String {
    match ts.iter().collect::<Vec<_>>()[..] {
        [one] => format!("{one:?}"),
        ref many => format!("{many:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The fix names the type to declare, as JSON.
    #[test]
    fn the_fix_names_the_argument_s_type() {
        let root = json!({"type": "object", "properties": {
            "one": {"type": "integer"}, "two": {"type": ["string", "null"]}}});
        let tool = Schema {
            root: &root,
            definitions: None,
        };
        let param = json!({"type": "boolean"});
        let p = Param {
            name: "p",
            schema: &param,
            required: true,
        };
        let help = |arg: &str| problem(&p, arg, tool, "t").map(|(_, help)| help);
        assert_eq!(
            help("one").as_deref(),
            Some("give parameter `p` \"type\": \"integer\"")
        );
        assert_eq!(
            help("two").as_deref(),
            Some("give parameter `p` \"type\": [\"null\", \"string\"]")
        );
    }

    fn check(param: Value, required: bool, arg: Value, arg_required: bool) -> Option<String> {
        let root = json!({
            "type": "object",
            "properties": {"org_id": arg},
            "required": if arg_required { json!(["org_id"]) } else { json!([]) },
        });
        let p = Param {
            name: "org",
            schema: &param,
            required,
        };
        let tool = Schema {
            root: &root,
            definitions: None,
        };
        problem(&p, "org-id", tool, "obs/list").map(|(m, _)| m)
    }

    #[test]
    fn a_parameter_passes_when_every_value_it_admits_is_taken() {
        let s = json!({"type": "string"});
        assert_eq!(check(s.clone(), true, s.clone(), true), None);
        assert_eq!(check(s.clone(), false, s.clone(), false), None);
        assert_eq!(check(s.clone(), true, s.clone(), false), None);
        assert_eq!(
            check(
                json!({"type": "integer"}),
                true,
                json!({"type": "number"}),
                true
            ),
            None
        );
        assert_eq!(check(json!({}), true, json!({}), true), None);
        assert_eq!(
            check(
                json!({"type": "string", "enum": ["a"]}),
                true,
                json!({"type": "string", "enum": ["a", "b"]}),
                true
            ),
            None
        );
    }

    #[test]
    fn a_parameter_that_admits_what_the_argument_refuses_is_a_problem() {
        let s = json!({"type": "string"});
        assert_eq!(
            check(s.clone(), false, s.clone(), true).unwrap(),
            "`org_id` is required by obs/list, but parameter `org` is optional"
        );
        assert_eq!(
            check(
                json!({"type": "number"}),
                true,
                json!({"type": "integer"}),
                true
            )
            .unwrap(),
            "parameter `org` is number, but obs/list's `org_id` takes integer"
        );
        assert_eq!(
            check(json!({"type": ["string", "null"]}), true, s.clone(), true).unwrap(),
            "parameter `org` is null or string, but obs/list's `org_id` takes string"
        );
        assert_eq!(
            check(json!({}), true, s.clone(), true).unwrap(),
            "parameter `org` has no type, and obs/list's `org_id` takes string"
        );
        let e = json!({"type": "string", "enum": ["a", "b"]});
        assert_eq!(
            check(s.clone(), true, e.clone(), true).unwrap(),
            "obs/list's `org_id` takes one of [\"a\",\"b\"], but parameter `org` may hold other values"
        );
        assert!(check(json!({"type": "string", "enum": ["a", "c"]}), true, e, true).is_some());
    }
}
