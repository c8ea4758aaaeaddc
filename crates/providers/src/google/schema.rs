//! Tool schemas in the subset of JSON Schema Gemini's
//! `parametersJsonSchema` takes: local `$ref`s are inlined (the API
//! resolves none), meta declarations (`$schema`, `$id`, `$defs`, ...)
//! dropped, and `const` written as a one-value `enum`. The rest is kept
//! as the tool wrote it.

use serde_json::{Map, Value, json};

/// Keys that declare things about a schema rather than constrain a value.
const META: [&str; 8] = [
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
];

/// How deep `$ref`s are followed; deeper (or cyclic) ones become an
/// object of any shape.
const MAX_REF_DEPTH: usize = 5;

/// `schema` in the subset Gemini takes.
pub(super) fn gemini_schema(schema: &Value) -> Value {
    convert(schema, schema, 0)
}

fn convert(schema: &Value, root: &Value, depth: usize) -> Value {
    match schema {
        Value::Object(map) => convert_object(map, root, depth),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| convert(v, root, depth)).collect())
        }
        other => other.clone(),
    }
}

fn convert_object(map: &Map<String, Value>, root: &Value, depth: usize) -> Value {
    let mut out = Map::new();
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        match resolve(reference, root).filter(|_| depth < MAX_REF_DEPTH) {
            Some(target) => {
                if let Value::Object(resolved) = convert(target, root, depth + 1) {
                    out = resolved;
                }
            }
            None => {
                out.insert("type".into(), json!("object"));
            }
        }
    }
    for (key, value) in map {
        if META.contains(&key.as_str()) || key == "$ref" {
            continue;
        }
        let value = match key.as_str() {
            // Maps of names to schemas: their keys are names, not keywords.
            "properties" | "patternProperties" => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), convert(s, root, depth)))
                        .collect(),
                ),
                other => other.clone(),
            },
            // Values, not schemas.
            "enum" | "default" | "examples" | "required" => value.clone(),
            "const" => {
                if !map.contains_key("enum") {
                    out.insert("enum".into(), json!([value]));
                }
                continue;
            }
            _ => convert(value, root, depth),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

/// The schema a local reference (`#/$defs/Name`, `#/definitions/Name`,
/// any JSON pointer into the root) names.
fn resolve<'a>(reference: &str, root: &'a Value) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_schema_is_unchanged() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
        assert_eq!(gemini_schema(&schema), schema);
    }

    #[test]
    fn refs_are_inlined_and_meta_dropped() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "$ref": {"type": "string"},
                "point": {"$ref": "#/$defs/Point", "description": "where"},
                "mode": {"const": "fast"},
                "self": {"$ref": "#"}
            },
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}}
        });
        let out = gemini_schema(&schema);
        assert!(out.get("$schema").is_none() && out.get("$defs").is_none());
        // A property named like a keyword is a property.
        assert_eq!(out["properties"]["$ref"], json!({"type": "string"}));
        assert_eq!(
            out["properties"]["point"],
            json!({"type": "object", "properties": {"x": {"type": "number"}}, "description": "where"})
        );
        assert_eq!(out["properties"]["mode"], json!({"enum": ["fast"]}));
        // A cycle ends in an object of any shape.
        let mut node = &out["properties"]["self"];
        for _ in 0..MAX_REF_DEPTH - 1 {
            node = &node["properties"]["self"];
        }
        assert_eq!(node["properties"]["self"], json!({"type": "object"}));
    }
}
