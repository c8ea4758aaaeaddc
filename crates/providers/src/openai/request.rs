//! Building an OpenAI chat-completions request: pure functions from the
//! model, its compat flags, the context and the options to the URL, the
//! headers and the JSON body, as pi-ai builds them.

use serde_json::{Map, Value, json};

use super::compat::{MaxTokensField, ResolvedCompat, ThinkingFormat};
use crate::content::{AssistantBlock, ThinkingContent, UserBlock};
use crate::context::{Context, ModelTool, StreamOptions};
use crate::message::{AssistantMessage, Message, ToolResultMessage};
use crate::model::{InputKind, Model};
use crate::thinking::ThinkingLevel;
use crate::transform::transform_messages;
use crate::user_message::UserContent;

/// The URL of the chat-completions endpoint under the model's base URL.
pub(super) fn endpoint(model: &Model) -> String {
    format!("{}/chat/completions", model.base_url.trim_end_matches('/'))
}

/// The request headers: bearer key (when there is one), the model's headers,
/// then the options' headers.
pub(crate) fn headers(
    model: &Model,
    options: &StreamOptions,
    api_key: Option<&str>,
) -> Vec<(String, String)> {
    let mut out = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "text/event-stream".to_string()),
    ];
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        out.push(("authorization".to_string(), format!("Bearer {key}")));
    }
    for (k, v) in model.headers.iter().chain(options.headers.iter()) {
        out.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        out.push((k.clone(), v.clone()));
    }
    out
}

/// The JSON body of a streaming chat-completions request for a server with
/// the given compat flags.
pub(super) fn build_request_with(
    model: &Model,
    compat: &ResolvedCompat,
    context: &Context,
    options: &StreamOptions,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model.id.as_str()));
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(model, context, compat)),
    );
    body.insert("stream".into(), Value::Bool(true));
    if compat.supports_usage_in_streaming {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    if compat.supports_store {
        body.insert("store".into(), Value::Bool(false));
    }
    if let Some(max) = options.effective_max_tokens(model.max_tokens) {
        let field = match compat.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), Value::from(max));
    }
    if let Some(t) = options.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if !context.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(&context.tools, compat)),
        );
    } else if has_tool_history(&context.messages) {
        // Proxies in front of Anthropic want `tools` when the history has calls.
        body.insert("tools".into(), Value::Array(Vec::new()));
    }
    apply_thinking(&mut body, model, options.thinking, compat);
    Value::Object(body)
}

fn apply_thinking(
    body: &mut Map<String, Value>,
    model: &Model,
    level: ThinkingLevel,
    compat: &ResolvedCompat,
) {
    if !model.reasoning {
        return;
    }
    let level = model.clamp_thinking(level);
    let effort = (level != ThinkingLevel::Off).then(|| {
        model
            .thinking_override(level)
            .flatten()
            .unwrap_or(level.as_str())
            .to_string()
    });
    match compat.thinking_format {
        ThinkingFormat::Zai | ThinkingFormat::Qwen => {
            body.insert("enable_thinking".into(), Value::Bool(effort.is_some()));
        }
        ThinkingFormat::QwenChatTemplate => {
            body.insert(
                "chat_template_kwargs".into(),
                json!({ "enable_thinking": effort.is_some(), "preserve_thinking": true }),
            );
        }
        ThinkingFormat::Deepseek => {
            let kind = if effort.is_some() {
                "enabled"
            } else {
                "disabled"
            };
            body.insert("thinking".into(), json!({ "type": kind }));
            if let Some(effort) = effort {
                body.insert("reasoning_effort".into(), Value::from(effort));
            }
        }
        ThinkingFormat::Openrouter => match effort {
            Some(effort) => {
                body.insert("reasoning".into(), json!({ "effort": effort }));
            }
            None => match model.thinking_override(ThinkingLevel::Off) {
                Some(None) => {}
                Some(Some(off)) => {
                    body.insert("reasoning".into(), json!({ "effort": off }));
                }
                None => {
                    body.insert("reasoning".into(), json!({ "effort": "none" }));
                }
            },
        },
        ThinkingFormat::Openai => {
            if !compat.supports_reasoning_effort {
                return;
            }
            match effort {
                Some(effort) => {
                    body.insert("reasoning_effort".into(), Value::from(effort));
                }
                None => {
                    if let Some(Some(off)) = model.thinking_override(ThinkingLevel::Off) {
                        body.insert("reasoning_effort".into(), Value::from(off));
                    }
                }
            }
        }
    }
}

fn has_tool_history(messages: &[Message]) -> bool {
    messages.iter().any(|m| match m {
        Message::ToolResult(_) => true,
        Message::Assistant(a) => a.tool_calls().next().is_some(),
        Message::User(_) => false,
    })
}

fn convert_tools(tools: &[ModelTool], compat: &ResolvedCompat) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut function = Map::new();
            function.insert("name".into(), Value::from(tool.name.as_str()));
            function.insert("description".into(), Value::from(tool.description.as_str()));
            function.insert("parameters".into(), tool.parameters.clone());
            if compat.supports_strict_mode {
                function.insert("strict".into(), Value::Bool(false));
            }
            json!({ "type": "function", "function": function })
        })
        .collect()
}

fn normalize_tool_call_id(model: &Model, id: &str) -> String {
    if let Some((call_id, _)) = id.split_once('|') {
        let cleaned: String = call_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        return cleaned.chars().take(40).collect();
    }
    if model.provider == "openai" && id.len() > 40 {
        return id.chars().take(40).collect();
    }
    id.to_string()
}

fn image_url(mime: &str, data: &str) -> Value {
    json!({ "type": "image_url", "image_url": { "url": format!("data:{mime};base64,{data}") } })
}

/// The `messages` array, as pi-ai's `convertMessages`.
fn convert_messages(model: &Model, context: &Context, compat: &ResolvedCompat) -> Vec<Value> {
    let messages = transform_messages(&context.messages, model, &|id| {
        normalize_tool_call_id(model, id)
    });
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = &context.system_prompt {
        out.push(system_message(model, compat, system));
    }
    let takes_images = model.input.contains(&InputKind::Image);
    let mut last_was_tool_result = false;
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::User(user) => {
                if compat.requires_assistant_after_tool_result && last_was_tool_result {
                    out.push(tool_results_processed());
                }
                last_was_tool_result = false;
                out.extend(user_message(&user.content));
            }
            Message::Assistant(assistant) => {
                last_was_tool_result = false;
                out.extend(convert_assistant(model, compat, assistant));
            }
            Message::ToolResult(_) => {
                let (taken, ends_on_tool) =
                    push_tool_results(&mut out, &messages[i..], compat, takes_images);
                i += taken;
                last_was_tool_result = ends_on_tool;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The system prompt, as a `developer` message for reasoning models on
/// servers that take that role.
fn system_message(model: &Model, compat: &ResolvedCompat, system: &str) -> Value {
    let role = if model.reasoning && compat.supports_developer_role {
        "developer"
    } else {
        "system"
    };
    json!({ "role": role, "content": system })
}

/// The assistant message put between tool results and a user message for
/// servers that require one.
fn tool_results_processed() -> Value {
    json!({ "role": "assistant", "content": "I have processed the tool results." })
}

/// A user message: text as it is, blocks as parts (`None` when there are
/// none).
fn user_message(content: &UserContent) -> Option<Value> {
    match content {
        UserContent::Text(text) => Some(json!({ "role": "user", "content": &**text })),
        UserContent::Blocks(blocks) => {
            let parts: Vec<Value> = blocks
                .iter()
                .map(|b| match b {
                    UserBlock::Text(t) => json!({ "type": "text", "text": &*t.text }),
                    UserBlock::Image(img) => image_url(&img.mime_type, &img.data),
                })
                .collect();
            (!parts.is_empty()).then(|| json!({ "role": "user", "content": parts }))
        }
    }
}

/// Pushes the tool results at the start of `messages` as `tool` messages,
/// then their images (when the model takes images) in one user message, as
/// tool messages carry no images. Returns how many messages were results,
/// and whether the output now ends on a tool message.
fn push_tool_results(
    out: &mut Vec<Value>,
    messages: &[Message],
    compat: &ResolvedCompat,
    takes_images: bool,
) -> (usize, bool) {
    let mut images = Vec::new();
    let mut taken = 0;
    while let Some(Message::ToolResult(result)) = messages.get(taken) {
        out.push(tool_message(result, compat));
        if takes_images {
            for b in &result.content {
                if let UserBlock::Image(img) = b {
                    images.push(image_url(&img.mime_type, &img.data));
                }
            }
        }
        taken += 1;
    }
    if images.is_empty() {
        return (taken, true);
    }
    if compat.requires_assistant_after_tool_result {
        out.push(tool_results_processed());
    }
    let mut parts = vec![json!({ "type": "text", "text": "Attached image(s) from tool result:" })];
    parts.extend(images);
    out.push(json!({ "role": "user", "content": parts }));
    (taken, false)
}

/// One tool result as a `tool` message of its text.
fn tool_message(result: &ToolResultMessage, compat: &ResolvedCompat) -> Value {
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| match b {
            UserBlock::Text(t) => Some(&*t.text),
            UserBlock::Image(_) => None,
        })
        .collect();
    let text = text.join("\n");
    let mut m = Map::new();
    m.insert("role".into(), Value::from("tool"));
    m.insert(
        "content".into(),
        Value::from(if text.is_empty() {
            "(see attached image)".to_string()
        } else {
            text
        }),
    );
    m.insert("tool_call_id".into(), Value::from(&*result.tool_call_id));
    if compat.requires_tool_result_name && !result.tool_name.is_empty() {
        m.insert("name".into(), Value::from(&*result.tool_name));
    }
    Value::Object(m)
}

fn convert_assistant(
    model: &Model,
    compat: &ResolvedCompat,
    assistant: &AssistantMessage,
) -> Option<Value> {
    let mut m = Map::new();
    m.insert("role".into(), Value::from("assistant"));
    let empty_content = if compat.requires_assistant_after_tool_result {
        Value::from("")
    } else {
        Value::Null
    };
    m.insert("content".into(), empty_content);
    insert_text_and_reasoning(&mut m, assistant, compat);
    let has_calls = insert_tool_calls(&mut m, assistant);
    if compat.requires_reasoning_content_on_assistant_messages
        && model.reasoning
        && !m.contains_key("reasoning_content")
    {
        m.insert("reasoning_content".into(), Value::from(""));
    }
    let has_content = match m.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        _ => false,
    };
    (has_content || has_calls).then_some(Value::Object(m))
}

/// Sets the assistant's text as its `content`, and its reasoning either as
/// leading text parts (servers that want reasoning as text) or in the field
/// it arrived in.
fn insert_text_and_reasoning(
    m: &mut Map<String, Value>,
    assistant: &AssistantMessage,
    compat: &ResolvedCompat,
) {
    let texts: Vec<&str> = assistant
        .content
        .iter()
        .filter_map(|b| match b {
            AssistantBlock::Text(t) if !t.text.trim().is_empty() => Some(&*t.text),
            _ => None,
        })
        .collect();
    let text = texts.concat();
    let thinking: Vec<&ThinkingContent> = assistant
        .content
        .iter()
        .filter_map(|b| match b {
            AssistantBlock::Thinking(t) if !t.thinking.trim().is_empty() => Some(t),
            _ => None,
        })
        .collect();
    if !thinking.is_empty() && compat.requires_thinking_as_text {
        let joined: Vec<&str> = thinking.iter().map(|t| &*t.thinking).collect();
        let mut parts = vec![json!({ "type": "text", "text": joined.join("\n\n") })];
        parts.extend(texts.iter().map(|t| json!({ "type": "text", "text": t })));
        m.insert("content".into(), Value::Array(parts));
        return;
    }
    if !text.is_empty() {
        m.insert("content".into(), Value::from(text));
    }
    // Reasoning is replayed in the field it arrived in (`reasoning_content`
    // for llama.cpp and DeepSeek, `reasoning` for others).
    if let Some(field) = thinking
        .first()
        .and_then(|t| t.thinking_signature.as_deref())
        && !field.is_empty()
    {
        let joined: Vec<&str> = thinking.iter().map(|t| &*t.thinking).collect();
        m.insert(field.to_string(), Value::from(joined.join("\n")));
    }
}

/// Sets the assistant's `tool_calls` (and the `reasoning_details` their
/// signatures carry); returns whether it made any.
fn insert_tool_calls(m: &mut Map<String, Value>, assistant: &AssistantMessage) -> bool {
    let calls: Vec<Value> = assistant
        .tool_calls()
        .map(|c| {
            json!({
                "id": &*c.id,
                "type": "function",
                "function": {
                    "name": &*c.name,
                    "arguments": serde_json::to_string(&*c.arguments).unwrap_or_else(|_| "{}".into()),
                }
            })
        })
        .collect();
    if calls.is_empty() {
        return false;
    }
    let details: Vec<Value> = assistant
        .tool_calls()
        .filter_map(|c| c.thought_signature.as_deref())
        .filter_map(|s| serde_json::from_str(s).ok())
        .collect();
    m.insert("tool_calls".into(), Value::Array(calls));
    if !details.is_empty() {
        m.insert("reasoning_details".into(), Value::Array(details));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::ImageContent;
    use crate::message::ToolResultMessage;
    use crate::openai::build_request;
    use crate::user_message::UserMessage;
    use crate::wire::OPENAI_COMPLETIONS;

    fn ctx() -> Context {
        Context {
            system_prompt: Some("sys".into()),
            messages: vec![Message::from(UserMessage::text("hi", 0))],
            tools: Default::default(),
        }
    }

    fn reasoning_model(provider: &str, url: &str) -> Model {
        let mut m = Model::new(OPENAI_COMPLETIONS, provider, "m", url);
        m.reasoning = true;
        m
    }

    fn with(level: ThinkingLevel) -> StreamOptions {
        StreamOptions {
            thinking: level,
            ..StreamOptions::default()
        }
    }

    #[test]
    fn thinking_levels_map_to_each_servers_field() {
        let body = build_request(
            &reasoning_model("openai", "https://api.openai.com/v1"),
            &ctx(),
            &with(ThinkingLevel::Low),
        );
        assert_eq!(body["reasoning_effort"], "low");
        assert_eq!(body["messages"][0]["role"], "developer");
        let body = build_request(
            &reasoning_model("openrouter", "https://openrouter.ai/api/v1"),
            &ctx(),
            &with(ThinkingLevel::Off),
        );
        assert_eq!(body["reasoning"], json!({"effort": "none"}));
        let body = build_request(
            &reasoning_model("deepseek", "https://api.deepseek.com"),
            &ctx(),
            &with(ThinkingLevel::High),
        );
        assert_eq!(body["thinking"], json!({"type": "enabled"}));
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(
            body["messages"][0]["role"], "system",
            "DeepSeek takes no developer role"
        );
        let body = build_request(
            &reasoning_model("zai", "https://api.z.ai/api/paas/v4"),
            &ctx(),
            &with(ThinkingLevel::Medium),
        );
        assert_eq!(body["enable_thinking"], true);
        let plain = Model::new(
            OPENAI_COMPLETIONS,
            "openai",
            "gpt-4o-mini",
            "https://api.openai.com/v1",
        );
        let body = build_request(&plain, &ctx(), &with(ThinkingLevel::High));
        assert!(body.get("reasoning_effort").is_none());
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["max_completion_tokens"], 16_384);
    }

    #[test]
    fn images_go_as_data_urls_and_tool_images_follow_in_a_user_message() {
        let mut model = Model::new(OPENAI_COMPLETIONS, "openai", "m", "http://x");
        model.input.push(InputKind::Image);
        let image = UserBlock::Image(ImageContent {
            data: "AAAA".into(),
            mime_type: "image/png".into(),
        });
        let call = crate::content::ToolCall::new("c1", "shot", serde_json::Map::new());
        let mut assistant =
            crate::message::AssistantMessage::empty(OPENAI_COMPLETIONS, "openai", "m", 0);
        assistant
            .content
            .push(AssistantBlock::ToolCall(call.clone()));
        let result = ToolResultMessage {
            content: vec![image.clone()],
            ..ToolResultMessage::text(&call, "", false, 0)
        };
        let context = Context {
            system_prompt: None,
            messages: vec![
                Message::from(UserMessage::blocks(vec![UserBlock::text("look"), image], 0)),
                Message::from(assistant),
                Message::from(result),
            ],
            tools: Default::default(),
        };
        let body = build_request(&model, &context, &StreamOptions::default());
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(
            messages[0]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        assert_eq!(messages[2]["role"], "tool");
        assert_eq!(messages[2]["content"], "(see attached image)");
        assert_eq!(messages[3]["role"], "user");
        assert_eq!(messages[3]["content"][1]["type"], "image_url");
        // History with calls but no tools offered still sends `tools: []`.
        assert_eq!(body["tools"], json!([]));
    }
}
