//! Reading an OpenAPI document: bytes → JSON value, version check.

use std::path::Path;

use serde_json::{Map, Value};

use crate::diagnostic::Diagnostic;

/// OpenAPI major.minor versions the compiler accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// 3.0.x: schemas use `nullable` and boolean exclusive bounds, normalised on the way in.
    V30,
    /// 3.1.x: schemas are JSON Schema 2020-12.
    V31,
}

/// A parsed OpenAPI document.
#[derive(Debug, Clone)]
pub struct Document {
    /// The whole document.
    pub root: Value,
    /// Its version.
    pub version: Version,
}

/// Parses JSON or YAML bytes into a document and checks the version. The file extension picks
/// the syntax; without one, text that does not start with `{` is read as YAML.
pub fn parse(bytes: &[u8], file: &Path) -> Result<Document, Box<Diagnostic>> {
    let is_yaml = match file.extension().and_then(|e| e.to_str()) {
        Some("json") => false,
        Some("yaml" | "yml") => true,
        _ => bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{'),
    };
    let root = if is_yaml {
        let y: serde_yaml_ng::Value = serde_yaml_ng::from_slice(bytes).map_err(|e| {
            Box::new(Diagnostic::new(
                file,
                "",
                format!("OpenAPI document is not valid YAML: {e}"),
            ))
        })?;
        yaml_to_json(y).map_err(|m| Box::new(Diagnostic::new(file, "", m)))?
    } else {
        serde_json::from_slice(bytes).map_err(|e| {
            Box::new(Diagnostic::new(
                file,
                "",
                format!("OpenAPI document is not valid JSON: {e}"),
            ))
        })?
    };
    let version = version_of(&root, file)?;
    Ok(Document { root, version })
}

fn version_of(root: &Value, file: &Path) -> Result<Version, Box<Diagnostic>> {
    let err = |pointer: &str, message: String, help: Option<&str>| {
        let d = Diagnostic::new(file, pointer, message);
        Err(Box::new(match help {
            Some(h) => d.help(h),
            None => d,
        }))
    };
    let Value::Object(map) = root else {
        return err("", "an OpenAPI document must be a JSON object".into(), None);
    };
    if let Some(v) = map.get("swagger") {
        return err(
            "/swagger",
            format!(
                "Swagger {} documents are not supported; ptc reads OpenAPI 3.0 and 3.1",
                short(v)
            ),
            Some(
                "convert the document to OpenAPI 3 (e.g. `npx swagger2openapi in.json -o out.json`)",
            ),
        );
    }
    match map.get("openapi") {
        Some(Value::String(s)) if s.starts_with("3.0.") || s == "3.0" => Ok(Version::V30),
        Some(Value::String(s)) if s.starts_with("3.1.") || s == "3.1" => Ok(Version::V31),
        Some(v) => err(
            "/openapi",
            format!(
                "OpenAPI version {} is not supported; ptc reads 3.0.x and 3.1.x",
                short(v)
            ),
            None,
        ),
        None => err(
            "",
            "not an OpenAPI document: it has no `openapi` version field".into(),
            Some("point schema_file at an OpenAPI 3.0 or 3.1 document"),
        ),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}…", &s[..s.floor_char_boundary(40)])
    } else {
        s
    }
}

/// YAML allows non-string keys (`200:` in `responses`); OpenAPI means them as strings.
fn yaml_to_json(v: serde_yaml_ng::Value) -> Result<Value, String> {
    use serde_yaml_ng::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(
            items
                .into_iter()
                .map(yaml_to_json)
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(m) => {
            let mut out = Map::with_capacity(m.len());
            for (k, v) in m {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => {
                        return Err(format!(
                            "YAML mapping key {other:?} cannot be a JSON object key"
                        ));
                    }
                };
                out.insert(key, yaml_to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str, name: &str) -> Result<Document, Box<Diagnostic>> {
        parse(s.as_bytes(), Path::new(name))
    }

    #[test]
    fn versions() {
        assert_eq!(
            parse_str(r#"{"openapi":"3.0.3"}"#, "a.json")
                .unwrap()
                .version,
            Version::V30
        );
        assert_eq!(
            parse_str(r#"{"openapi":"3.1.0"}"#, "a.json")
                .unwrap()
                .version,
            Version::V31
        );
        let e = parse_str(r#"{"swagger":"2.0"}"#, "a.json").unwrap_err();
        assert!(
            e.message
                .contains("Swagger \"2.0\" documents are not supported"),
            "{e}"
        );
        let e = parse_str(r#"{"openapi":"4.0.0"}"#, "a.json").unwrap_err();
        assert!(
            e.message
                .contains("OpenAPI version \"4.0.0\" is not supported"),
            "{e}"
        );
        let e = parse_str(r#"{"info":{}}"#, "a.json").unwrap_err();
        assert!(e.message.contains("no `openapi` version field"), "{e}");
    }

    #[test]
    fn yaml_with_numeric_keys() {
        let doc = parse_str("openapi: 3.1.0\npaths:\n  /x:\n    get:\n      responses:\n        200:\n          description: ok\n", "a.yaml").unwrap();
        assert!(doc.root.pointer("/paths/~1x/get/responses/200").is_some());
    }

    #[test]
    fn bad_syntax_is_reported_not_panicked() {
        let e = parse_str("{\"openapi\": ", "a.json").unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{e}");
        let e = parse_str("openapi: [unclosed", "a.yaml").unwrap_err();
        assert!(e.message.contains("not valid YAML"), "{e}");
    }
}
