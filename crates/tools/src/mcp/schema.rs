//! Input schemas of MCP tools, made acceptable to both wire APIs, and what
//! a tool costs in context.
//!
//! Servers publish whatever JSON Schema their SDK generates. The OpenAI and
//! Anthropic APIs both want an object at the root with `properties`, and
//! refuse some shapes outright: no `type`, a root `$ref`, `anyOf` / `oneOf`
//! / `allOf` at the top (Anthropic), or a `$schema` dialect they do not
//! know. [`normalise_input_schema`] rewrites those into a plain object
//! schema, keeping everything below the root as the server wrote it (the
//! server still checks the arguments). Tools are never sent in strict mode
//! (the providers send `strict: false` where the API has the flag), so
//! optional properties and open objects stay as they are.

use serde_json::{Map, Value};

use crate::ToolDefinition;

/// Rewrites a tool's input schema into an object schema both wire APIs
/// accept: `$schema` dropped, a root `$ref` into `$defs` / `definitions`
/// inlined, a `type` of `"object"` (also when it was missing or a list
/// containing `"object"`), `properties` present, and a root `anyOf` /
/// `oneOf` / `allOf` of object schemas merged into one (properties of every
/// branch; required: what every `anyOf` / `oneOf` branch requires, what any
/// `allOf` branch requires), no root `enum` or `not`, and no property whose
/// schema is not a schema. A schema that is not an object at all becomes an
/// empty object schema.
pub(crate) fn normalise_input_schema(schema: &Value) -> Value {
    let Value::Object(root) = schema else {
        return empty_object_schema();
    };
    let mut root = root.clone();
    root.remove("$schema");
    inline_root_ref(&mut root);

    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = root.remove(key) {
            merge_branches(&mut root, &branches, key == "allOf");
        }
    }
    // OpenAI refuses these at the root whatever else is there.
    root.remove("not");
    root.remove("enum");

    let is_object = match root.get("type") {
        None => true,
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        Some(_) => false,
    };
    if !is_object {
        return empty_object_schema();
    }
    root.insert("type".into(), Value::from("object"));
    let properties = match root.remove("properties") {
        // A property whose schema is neither an object nor a boolean makes
        // the whole tool list invalid for OpenAI; the property goes.
        Some(Value::Object(props)) => props
            .into_iter()
            .filter(|(_, schema)| schema.is_object() || schema.is_boolean())
            .collect(),
        _ => Map::new(),
    };
    root.insert("properties".into(), Value::Object(properties));
    if let Some(Value::Array(names)) = root.remove("required") {
        let names: Vec<Value> = names.into_iter().filter(Value::is_string).collect();
        if !names.is_empty() {
            root.insert("required".into(), Value::Array(names));
        }
    }
    Value::Object(root)
}

/// The bytes a tool's definition takes in a request (its name, description
/// and schema as JSON): what it costs in context on every call of the model,
/// used or not. About four bytes make a token.
pub(crate) fn definition_bytes(definition: &ToolDefinition) -> usize {
    definition.name().len()
        + definition.description().len()
        + serde_json::to_string(definition.input_schema()).map_or(0, |s| s.len())
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// Replaces a root `{"$ref": "#/$defs/X"}` (or `#/definitions/X`) by the
/// definition it points to, keeping the definitions for nested references.
fn inline_root_ref(root: &mut Map<String, Value>) {
    let Some(Value::String(reference)) = root.get("$ref") else {
        return;
    };
    let target = ["#/$defs/", "#/definitions/"].iter().find_map(|prefix| {
        let name = reference.strip_prefix(prefix)?;
        let container = &prefix[2..prefix.len() - 1];
        root.get(container)?.get(name)?.as_object().cloned()
    });
    let Some(target) = target else {
        return;
    };
    root.remove("$ref");
    for (key, value) in target {
        root.entry(key).or_insert(value);
    }
}

/// Folds the object branches of a root combinator into the root.
fn merge_branches(root: &mut Map<String, Value>, branches: &[Value], all_required: bool) {
    let objects: Vec<&Map<String, Value>> = branches.iter().filter_map(Value::as_object).collect();
    let mut properties = match root.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    for branch in &objects {
        if let Some(Value::Object(props)) = branch.get("properties") {
            for (name, schema) in props {
                properties
                    .entry(name.clone())
                    .or_insert_with(|| schema.clone());
            }
        }
    }
    let required_of = |m: &Map<String, Value>| -> Vec<String> {
        m.get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut required = required_of(root);
    let branch_required: Vec<Vec<String>> = objects.iter().map(|b| required_of(b)).collect();
    let merged: Vec<String> = if all_required {
        branch_required.into_iter().flatten().collect()
    } else if let Some((first, rest)) = branch_required.split_first() {
        first
            .iter()
            .filter(|name| rest.iter().all(|r| r.contains(name)))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    for name in merged {
        if !required.contains(&name) {
            required.push(name);
        }
    }
    root.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        root.insert(
            "required".into(),
            Value::Array(required.into_iter().map(Value::from).collect()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plain_object_schema_only_loses_its_dialect() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
            "additionalProperties": false
        });
        let mut expected = schema.clone();
        expected.as_object_mut().unwrap().remove("$schema");
        assert_eq!(normalise_input_schema(&schema), expected);
    }

    #[test]
    fn missing_type_or_properties_are_filled_in() {
        assert_eq!(
            normalise_input_schema(&json!({})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            normalise_input_schema(&json!({"type": "object"})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            normalise_input_schema(&json!({"type": ["object", "null"], "properties": {"a": {}}})),
            json!({"type": "object", "properties": {"a": {}}})
        );
        assert_eq!(
            normalise_input_schema(&json!({"type": "string"})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            normalise_input_schema(&json!(true)),
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn shapes_openai_refuses_are_removed() {
        let schema = json!({
            "type": "object",
            "enum": [{}],
            "not": {"required": ["x"]},
            "properties": {"ok": {"type": "string"}, "any": true, "type": "object"},
            "required": ["ok", 3]
        });
        assert_eq!(
            normalise_input_schema(&schema),
            json!({"type": "object", "properties": {"ok": {"type": "string"}, "any": true}, "required": ["ok"]})
        );
    }

    #[test]
    fn a_root_ref_is_inlined() {
        let schema = json!({
            "$ref": "#/$defs/Input",
            "$defs": {
                "Input": {"type": "object", "properties": {"p": {"$ref": "#/$defs/Point"}}, "required": ["p"]},
                "Point": {"type": "object", "properties": {"x": {"type": "number"}}}
            }
        });
        let out = normalise_input_schema(&schema);
        assert_eq!(out["type"], "object");
        assert_eq!(out["required"], json!(["p"]));
        assert_eq!(out["properties"]["p"]["$ref"], "#/$defs/Point");
        assert!(out.get("$ref").is_none());
        assert!(
            out["$defs"]["Point"].is_object(),
            "nested references still resolve"
        );
    }

    #[test]
    fn root_combinators_merge_into_one_object() {
        let any = json!({"anyOf": [
            {"type": "object", "properties": {"id": {"type": "string"}, "a": {}}, "required": ["id", "a"]},
            {"type": "object", "properties": {"id": {"type": "string"}, "b": {}}, "required": ["id", "b"]}
        ]});
        let out = normalise_input_schema(&any);
        assert_eq!(
            out,
            json!({"properties": {"id": {"type": "string"}, "a": {}, "b": {}}, "required": ["id"], "type": "object"})
        );

        let all = json!({"type": "object", "allOf": [
            {"properties": {"a": {}}, "required": ["a"]},
            {"properties": {"b": {}}, "required": ["b"]}
        ]});
        let out = normalise_input_schema(&all);
        assert_eq!(out["required"], json!(["a", "b"]));
        assert!(out.get("allOf").is_none());
    }

    #[test]
    fn definition_bytes_count_name_description_and_schema() {
        let def = ToolDefinition::new(
            "ab",
            "cde",
            json!({"type": "object"}),
            crate::ToolKind::Read,
        );
        assert_eq!(definition_bytes(&def), 2 + 3 + r#"{"type":"object"}"#.len());
    }
}
