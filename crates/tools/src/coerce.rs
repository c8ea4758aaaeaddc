//! Lenient argument repair: models often send `"5"` for 5 or `"true"` for
//! true. Like pi-ai, primitive values are converted to the type the schema
//! asks for before the arguments are rejected.

use serde_json::{Map, Number, Value};

/// The JSON types a schema allows (`"type": "x"` or `"type": [..]`).
fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn matches(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

fn convert(value: &Value, ty: &str) -> Option<Value> {
    match (ty, value) {
        ("integer", Value::String(s)) => {
            let s = s.trim();
            s.parse::<i64>()
                .map(Value::from)
                .or_else(|_| s.parse::<u64>().map(Value::from))
                .ok()
        }
        ("integer", Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| Value::from(f as i64)),
        ("number", Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number),
        ("boolean", Value::String(s)) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Number(n)) => Some(Value::String(n.to_string())),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        _ => None,
    }
}

/// Converts, in place, the primitives of `value` that do not have a type
/// `schema` allows but can be read as one. Returns true when anything changed.
pub(crate) fn coerce(value: &mut Value, schema: &Value) -> bool {
    match value {
        Value::Object(map) => coerce_object(map, schema),
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) => items
                .iter_mut()
                .fold(false, |changed, item| coerce(item, item_schema) | changed),
            None => false,
        },
        primitive => {
            let allowed = types(schema);
            if allowed.is_empty() || allowed.iter().any(|t| matches(primitive, t)) {
                return false;
            }
            match allowed.iter().find_map(|t| convert(primitive, t)) {
                Some(converted) => {
                    *primitive = converted;
                    true
                }
                None => false,
            }
        }
    }
}

fn coerce_object(map: &mut Map<String, Value>, schema: &Value) -> bool {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return false;
    };
    let mut changed = false;
    for (key, value) in map.iter_mut() {
        if let Some(property) = properties.get(key) {
            changed |= coerce(value, property);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_primitives_to_the_schema_type() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "maybe": {"type": ["integer", "null"]},
                "f": {"type": "number"},
                "b": {"type": "boolean"},
                "s": {"type": "string"},
                "list": {"type": "array", "items": {"type": "integer"}},
                "nested": {"type": "object", "properties": {"depth": {"type": "integer"}}}
            }
        });
        let mut args = json!({
            "n": "42", "maybe": null, "f": "1.5", "b": "true", "s": 7,
            "list": ["1", 2], "nested": {"depth": "3"}, "extra": "x"
        });
        assert!(coerce(&mut args, &schema));
        assert_eq!(
            args,
            json!({
                "n": 42, "maybe": null, "f": 1.5, "b": true, "s": "7",
                "list": [1, 2], "nested": {"depth": 3}, "extra": "x"
            })
        );
        let mut fine = json!({"n": 1});
        assert!(!coerce(&mut fine, &schema));
        let mut hopeless = json!({"n": "forty"});
        assert!(!coerce(&mut hopeless, &schema));
        assert_eq!(hopeless, json!({"n": "forty"}));
    }
}
