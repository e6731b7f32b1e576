//! OpenAPI 3.0 schema forms rewritten to their 3.1 (JSON Schema 2020-12) equivalents, so every
//! later stage sees one model.

use serde_json::{Map, Value, json};

/// Rewrites one 3.0 schema object in place (its subschemas were already rewritten):
/// `nullable: true` becomes a `"null"` type (or enum member), boolean `exclusiveMinimum` /
/// `exclusiveMaximum` become the numeric form, `example` becomes `examples`.
pub fn schema_30_to_31(schema: &mut Map<String, Value>) {
    if let Some(nullable) = schema.remove("nullable")
        && nullable == Value::Bool(true)
    {
        make_nullable(schema);
    }
    exclusive_bound(schema, "exclusiveMinimum", "minimum");
    exclusive_bound(schema, "exclusiveMaximum", "maximum");
    if let Some(example) = schema.remove("example") {
        schema
            .entry("examples")
            .or_insert_with(|| Value::Array(vec![example]));
    }
}

fn make_nullable(schema: &mut Map<String, Value>) {
    match schema.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            schema.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push(json!("null"));
            }
        }
        _ => {
            // No type to widen (e.g. a bare allOf): accept null beside whatever the schema says.
            let rest = std::mem::take(schema);
            schema.insert(
                "anyOf".into(),
                json!([Value::Object(rest), {"type": "null"}]),
            );
            return;
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

fn exclusive_bound(schema: &mut Map<String, Value>, exclusive: &str, inclusive: &str) {
    match schema.get(exclusive) {
        Some(Value::Bool(true)) => {
            schema.remove(exclusive);
            if let Some(bound) = schema.remove(inclusive) {
                schema.insert(exclusive.into(), bound);
            }
        }
        Some(Value::Bool(false)) => {
            schema.remove(exclusive);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(v: Value) -> Value {
        let Value::Object(mut m) = v else {
            unreachable!()
        };
        schema_30_to_31(&mut m);
        Value::Object(m)
    }

    #[test]
    fn nullable_forms() {
        assert_eq!(
            norm(json!({"type": "string", "nullable": true})),
            json!({"type": ["string", "null"]})
        );
        assert_eq!(
            norm(json!({"type": "string", "enum": ["a"], "nullable": true})),
            json!({"type": ["string", "null"], "enum": ["a", null]})
        );
        assert_eq!(
            norm(json!({"type": "string", "nullable": false})),
            json!({"type": "string"})
        );
        assert_eq!(
            norm(json!({"allOf": [{"type": "string"}], "nullable": true})),
            json!({"anyOf": [{"allOf": [{"type": "string"}]}, {"type": "null"}]})
        );
    }

    #[test]
    fn exclusive_bounds() {
        assert_eq!(
            norm(json!({"type": "integer", "maximum": 10, "exclusiveMaximum": true})),
            json!({"type": "integer", "exclusiveMaximum": 10})
        );
        assert_eq!(
            norm(json!({"type": "integer", "minimum": 1, "exclusiveMinimum": false})),
            json!({"type": "integer", "minimum": 1})
        );
    }

    #[test]
    fn example_becomes_examples() {
        assert_eq!(
            norm(json!({"type": "string", "example": "x"})),
            json!({"type": "string", "examples": ["x"]})
        );
    }
}
