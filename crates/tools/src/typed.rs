//! Typed tools: the input is a Rust type, its JSON schema is generated and
//! the model's arguments are checked against it before the tool runs.

use std::any::TypeId;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use async_trait::async_trait;
use roundtable_providers::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::{Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolResult};

/// A tool whose input is a Rust type.
///
/// Every `TypedTool` is a [`Tool`]: its schema comes from `schemars`, and the
/// arguments are deserialised into [`Input`](Self::Input) before
/// [`run`](Self::run); a mismatch becomes an error result that names the field,
/// and `run` is never called.
///
/// ```
/// use roundtable_tools::{ToolContext, ToolError, ToolKind, ToolRegistry, ToolResult, TypedTool};
/// use roundtable_providers::ToolCall;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct AddInput {
///     /// First addend.
///     a: i64,
///     /// Second addend.
///     b: i64,
/// }
///
/// struct Add;
///
/// #[async_trait::async_trait]
/// impl TypedTool for Add {
///     type Input = AddInput;
///     fn name(&self) -> &str { "add" }
///     fn description(&self) -> &str { "Adds two integers." }
///     fn kind(&self) -> ToolKind { ToolKind::Read }
///     async fn run(&self, _ctx: ToolContext, input: AddInput) -> Result<ToolResult, ToolError> {
///         Ok(ToolResult::text((input.a + input.b).to_string()))
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut registry = ToolRegistry::new();
/// registry.register(Add).unwrap();
/// let args = serde_json::json!({"a": 2, "b": 3});
/// let call = ToolCall::new("call_1", "add", args.as_object().unwrap().clone());
/// let result = registry.invoke(&call, roundtable_tools::ToolContext::new("call_1")).await.unwrap();
/// assert_eq!(result.text_content(), "5");
///
/// let bad = serde_json::json!({"a": 2, "b": "three"});
/// let call = ToolCall::new("call_2", "add", bad.as_object().unwrap().clone());
/// let result = registry.invoke(&call, roundtable_tools::ToolContext::new("call_2")).await.unwrap();
/// assert!(!result.ok);
/// assert!(result.text_content().contains("- b: invalid type"));
/// # });
/// ```
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    /// The input; its doc comments become the schema's descriptions.
    type Input: DeserializeOwned + JsonSchema + Send + 'static;

    /// The tool's name.
    fn name(&self) -> &str;

    /// What the tool does, for the model.
    fn description(&self) -> &str;

    /// The kind of effect the tool has.
    fn kind(&self) -> ToolKind;

    /// True when every call needs approval whatever the policy says.
    fn requires_approval(&self) -> bool {
        false
    }

    /// Runs a call whose arguments have been checked.
    async fn run(&self, ctx: ToolContext, input: Self::Input) -> Result<ToolResult, ToolError>;
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            self.name(),
            self.description(),
            input_schema::<T::Input>(),
            self.kind(),
        )
        .with_requires_approval(self.requires_approval())
    }

    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        match decode_arguments_lenient::<T::Input>(self.name(), &args) {
            Ok(input) => self.run(ctx, input).await,
            Err(message) => Ok(ToolResult::error(message)),
        }
    }
}

/// The JSON schema of a tool input type, as providers want it: an object
/// schema with every sub-schema inlined (no `$ref`), and no `$schema` or
/// `title` keys.
///
/// A type's schema is generated once per process and kept: a host that
/// registers its tools again for every turn (their state bound to the
/// turn) asks for the same schemas over and over.
pub(crate) fn input_schema<T: JsonSchema + 'static>() -> serde_json::Value {
    static SCHEMAS: OnceLock<Mutex<HashMap<TypeId, serde_json::Value>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Mutex::default);
    // A poisoned lock holds whole schemas (each is one insert).
    let known = schemas
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&TypeId::of::<T>())
        .cloned();
    if let Some(schema) = known {
        return schema;
    }
    let schema = generate_schema::<T>();
    schemas
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(TypeId::of::<T>(), schema.clone());
    schema
}

/// [`input_schema`], generated.
fn generate_schema<T: JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(map) = value.as_object_mut() {
        map.remove("title");
        map.remove("$schema");
        if !map.contains_key("properties") && map.get("type").is_some_and(|t| t == "object") {
            map.insert(
                "properties".into(),
                serde_json::Value::Object(Default::default()),
            );
        }
    }
    value
}

/// Deserialises tool arguments into `T`, or explains to the model what is
/// wrong: the message names the tool, each offending field, and repeats the
/// arguments received (the format pi-ai uses).
pub(crate) fn decode_arguments<T: DeserializeOwned>(
    tool: &str,
    args: &JsonObject,
) -> Result<T, String> {
    let value = serde_json::Value::Object((**args).clone());
    match serde_path_to_error::deserialize::<_, T>(&value) {
        Ok(input) => Ok(input),
        Err(err) => {
            let path = err.path().to_string();
            let location: Cow<'_, str> = if path == "." || path.is_empty() {
                Cow::Borrowed("root")
            } else {
                Cow::Owned(path)
            };
            let received =
                serde_json::to_string_pretty(&value).unwrap_or_else(|_| String::from("{}"));
            Err(format!(
                "Validation failed for tool \"{tool}\":\n  - {location}: {}\n\nReceived arguments:\n{received}",
                err.inner()
            ))
        }
    }
}

/// Like [`decode_arguments`], but first repairs primitives the model sent
/// with the wrong JSON type (`"5"` for an integer, `"true"` for a boolean,
/// a number for a string) as the schema of `T` asks, the way pi-ai does.
/// The happy path costs nothing extra: the schema is only built when the
/// arguments do not deserialise as they are.
pub(crate) fn decode_arguments_lenient<T: DeserializeOwned + JsonSchema + 'static>(
    tool: &str,
    args: &JsonObject,
) -> Result<T, String> {
    match decode_arguments::<T>(tool, args) {
        Ok(input) => Ok(input),
        Err(message) => {
            let mut value = serde_json::Value::Object((**args).clone());
            if crate::coerce::coerce(&mut value, &input_schema::<T>())
                && let Ok(input) = serde_json::from_value::<T>(value)
            {
                return Ok(input);
            }
            Err(message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Input {
        /// A path.
        path: String,
        /// An optional count.
        count: Option<u32>,
        nested: Option<Nested>,
    }

    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Nested {
        depth: u8,
    }

    fn args(v: serde_json::Value) -> JsonObject {
        Arc::new(v.as_object().unwrap().clone())
    }

    #[test]
    fn schema_is_an_inlined_object_schema() {
        let schema = input_schema::<Input>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], serde_json::json!(["path"]));
        assert_eq!(schema["properties"]["path"]["description"], "A path.");
        assert!(schema.get("$schema").is_none());
        assert!(schema.get("title").is_none());
        assert!(!schema.to_string().contains("$ref"));
        assert_eq!(
            schema["properties"]["nested"]["properties"]["depth"]["type"],
            "integer"
        );
    }

    #[test]
    fn errors_name_the_field() {
        let err =
            decode_arguments::<Input>("t", &args(serde_json::json!({"path": 3}))).unwrap_err();
        assert!(
            err.starts_with("Validation failed for tool \"t\":\n  - path: invalid type"),
            "{err}"
        );
        assert!(
            err.contains("Received arguments:\n{\n  \"path\": 3\n}"),
            "{err}"
        );

        let err = decode_arguments::<Input>("t", &args(serde_json::json!({}))).unwrap_err();
        assert!(err.contains("root: missing field `path`"), "{err}");

        let err = decode_arguments::<Input>(
            "t",
            &args(serde_json::json!({"path": "a", "nested": {"depth": 300}})),
        )
        .unwrap_err();
        assert!(err.contains("  - nested.depth: invalid value"), "{err}");

        let ok =
            decode_arguments::<Input>("t", &args(serde_json::json!({"path": "a", "count": 2})));
        assert!(ok.is_ok());
    }

    #[test]
    fn lenient_parsing_repairs_primitive_types_only() {
        let input = decode_arguments_lenient::<Input>(
            "t",
            &args(serde_json::json!({"path": 5, "count": "2", "nested": {"depth": "4"}})),
        )
        .unwrap();
        assert_eq!(input.path, "5");
        assert_eq!(input.count, Some(2));
        assert_eq!(input.nested.unwrap().depth, 4);
        let err = decode_arguments_lenient::<Input>(
            "t",
            &args(serde_json::json!({"path": "a", "count": "two"})),
        )
        .unwrap_err();
        assert!(
            err.contains("  - count: invalid type: string \"two\""),
            "{err}"
        );
    }
}
