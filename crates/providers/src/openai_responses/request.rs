//! Building a Responses request: pure functions from the model, context
//! and options to the URL, the headers and the JSON body, as pi-ai's
//! `buildParams` builds them.

use serde_json::{Map, Value, json};

use crate::context::{Context, ModelTool, StreamOptions};
use crate::model::Model;
use crate::thinking::ThinkingLevel;

use super::input::convert_input;

/// The URL of the responses endpoint under the model's base URL.
pub(super) fn endpoint(model: &Model) -> String {
    format!("{}/responses", model.base_url.trim_end_matches('/'))
}

/// The JSON body of a streaming Responses request. Nothing is stored on
/// the server (`store: false`): the conversation travels in `input`, with
/// the model's encrypted reasoning items asked for and sent back.
pub(super) fn build_body(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model.id.as_str()));
    body.insert("input".into(), Value::Array(convert_input(model, context)));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("store".into(), Value::Bool(false));
    if let Some(max) = options.effective_max_tokens(model.max_tokens) {
        body.insert("max_output_tokens".into(), Value::from(max));
    }
    if let Some(t) = options.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !context.tools.is_empty() {
        let tools = context.tools.iter().map(convert_tool).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    apply_reasoning(&mut body, model, options.thinking);
    Value::Object(body)
}

fn convert_tool(tool: &ModelTool) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": false,
    })
}

/// The reasoning effort of a reasoning model: the level (or the model's
/// value for it) with summaries and the encrypted reasoning asked for, or
/// when thinking is off, the model's `off` value (`none` by default).
fn apply_reasoning(body: &mut Map<String, Value>, model: &Model, level: ThinkingLevel) {
    if !model.reasoning {
        return;
    }
    // Off asks for no reasoning: it is not clamped to a level the model has.
    let level = match level {
        ThinkingLevel::Off => ThinkingLevel::Off,
        level => model.clamp_thinking(level),
    };
    if level != ThinkingLevel::Off {
        let effort = model
            .thinking_override(level)
            .flatten()
            .unwrap_or(level.as_str());
        body.insert(
            "reasoning".into(),
            json!({ "effort": effort, "summary": "auto" }),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        return;
    }
    let off = match model.thinking_override(ThinkingLevel::Off) {
        Some(None) => return,
        Some(Some(off)) => off,
        None => "none",
    };
    body.insert("reasoning".into(), json!({ "effort": off }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::OPENAI_RESPONSES;

    fn model() -> Model {
        Model::new(
            OPENAI_RESPONSES,
            "openai",
            "gpt-5-mini",
            "https://api.openai.com/v1/",
        )
    }

    #[test]
    fn endpoint_and_headers() {
        let model = model();
        assert_eq!(endpoint(&model), "https://api.openai.com/v1/responses");
        let options = StreamOptions::default();
        let headers = crate::openai::headers(&model, &options, Some("k"));
        assert!(headers.contains(&("authorization".into(), "Bearer k".into())));
    }

    #[test]
    fn reasoning_follows_the_level_and_the_models_map() {
        let mut model = model();
        let body = |model: &Model, level| {
            let options = StreamOptions {
                thinking: level,
                ..StreamOptions::default()
            };
            build_body(model, &Context::default(), &options)
        };
        assert!(body(&model, ThinkingLevel::High).get("reasoning").is_none());
        model.reasoning = true;
        let high = body(&model, ThinkingLevel::High);
        assert_eq!(
            high["reasoning"],
            json!({"effort": "high", "summary": "auto"})
        );
        assert_eq!(high["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(
            body(&model, ThinkingLevel::Off)["reasoning"],
            json!({"effort": "none"})
        );
        model.thinking_level_map = Some([(ThinkingLevel::Off, None)].into_iter().collect());
        assert!(body(&model, ThinkingLevel::Off).get("reasoning").is_none());
    }
}
