//! Building an Anthropic messages request: a pure function from the model,
//! context and options to the JSON body, as pi-ai builds it.

use serde_json::{Map, Value, json};

use crate::content::{AssistantBlock, ThinkingContent, UserBlock};
use crate::context::{Context, ModelTool, StreamOptions};
use crate::message::{AssistantMessage, Message};
use crate::model::Model;
use crate::thinking::ThinkingLevel;
use crate::transform::transform_messages;
use crate::user_message::UserContent;

const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// The URL of the messages endpoint under the model's base URL.
pub(super) fn endpoint(model: &Model) -> String {
    let base = model.base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

/// Whether the model thinks adaptively (an effort instead of a budget).
fn uses_adaptive_thinking(model_id: &str) -> bool {
    [
        "opus-4-6",
        "opus-4.6",
        "opus-4-7",
        "opus-4.7",
        "sonnet-4-6",
        "sonnet-4.6",
    ]
    .iter()
    .any(|m| model_id.contains(m))
}

/// The request headers: API key, version, beta flags, the model's headers,
/// then the options' headers.
pub(super) fn headers(
    model: &Model,
    options: &StreamOptions,
    api_key: Option<&str>,
) -> Vec<(String, String)> {
    let mut out = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "text/event-stream".to_string()),
        ("anthropic-version".to_string(), "2023-06-01".to_string()),
    ];
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        out.push(("x-api-key".to_string(), key.to_string()));
    }
    if !uses_adaptive_thinking(&model.id) {
        out.push((
            "anthropic-beta".to_string(),
            INTERLEAVED_THINKING_BETA.to_string(),
        ));
    }
    for (k, v) in model.headers.iter().chain(options.headers.iter()) {
        out.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        out.push((k.clone(), v.clone()));
    }
    out
}

/// The thinking budget and output limit for a level, as pi-ai's
/// `adjustMaxTokensForThinking`: the budget is added to the output limit
/// (capped by the model), and shrunk when the limit leaves too little room.
/// The sum saturates: an output limit near `u64::MAX` (a host's option, or
/// a model list a server published) is capped, never overflowed.
fn thinking_budget(
    base_max_tokens: u64,
    model_max_tokens: u64,
    level: ThinkingLevel,
) -> (u64, u64) {
    let budget = match level {
        ThinkingLevel::Off | ThinkingLevel::Minimal => 1024,
        ThinkingLevel::Low => 2048,
        ThinkingLevel::Medium => 8192,
        ThinkingLevel::High | ThinkingLevel::Xhigh => 16384,
    };
    let max_tokens = base_max_tokens.saturating_add(budget).min(model_max_tokens);
    let budget = if max_tokens <= budget {
        max_tokens.saturating_sub(1024)
    } else {
        budget
    };
    (max_tokens, budget)
}

fn effort(model: &Model, level: ThinkingLevel) -> String {
    if let Some(Some(mapped)) = model.thinking_override(level) {
        return mapped.to_string();
    }
    match level {
        ThinkingLevel::Minimal | ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        _ => "high",
    }
    .to_string()
}

/// The JSON body of a streaming messages request.
pub fn build_request(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let cache = json!({ "type": "ephemeral" });
    let level = if model.reasoning {
        model.clamp_thinking(options.thinking)
    } else {
        ThinkingLevel::Off
    };
    let thinking_on = level != ThinkingLevel::Off;
    let base_max = options
        .effective_max_tokens(model.max_tokens)
        .unwrap_or(model.max_tokens / 3);
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model.id.as_str()));
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(model, &context.messages, &cache)),
    );
    let mut max_tokens = base_max;
    let mut thinking = None;
    if model.reasoning {
        if !thinking_on {
            thinking = Some(json!({ "type": "disabled" }));
        } else if uses_adaptive_thinking(&model.id) {
            thinking = Some(json!({ "type": "adaptive", "display": "summarized" }));
            body.insert(
                "output_config".into(),
                json!({ "effort": effort(model, level) }),
            );
        } else {
            let (max, budget) = thinking_budget(base_max, model.max_tokens, level);
            max_tokens = max;
            thinking = Some(
                json!({ "type": "enabled", "budget_tokens": budget, "display": "summarized" }),
            );
        }
    }
    body.insert("max_tokens".into(), Value::from(max_tokens));
    body.insert("stream".into(), Value::Bool(true));
    if let Some(system) = &context.system_prompt {
        body.insert(
            "system".into(),
            json!([{ "type": "text", "text": system, "cache_control": cache }]),
        );
    }
    if let Some(t) = options.temperature
        && !thinking_on
    {
        body.insert("temperature".into(), json!(t));
    }
    if !context.tools.is_empty() {
        body.insert(
            "tools".into(),
            Value::Array(convert_tools(&context.tools, &cache)),
        );
    }
    if let Some(thinking) = thinking {
        body.insert("thinking".into(), thinking);
    }
    Value::Object(body)
}

fn convert_tools(tools: &[ModelTool], cache: &Value) -> Vec<Value> {
    let last = tools.len().saturating_sub(1);
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let mut t = Map::new();
            t.insert("name".into(), Value::from(tool.name.as_str()));
            t.insert("description".into(), Value::from(tool.description.as_str()));
            t.insert("eager_input_streaming".into(), Value::Bool(true));
            t.insert(
                "input_schema".into(),
                json!({
                    "type": "object",
                    "properties": tool.parameters.get("properties").cloned().unwrap_or_else(|| json!({})),
                    "required": tool.parameters.get("required").cloned().unwrap_or_else(|| json!([])),
                }),
            );
            if i == last {
                t.insert("cache_control".into(), cache.clone());
            }
            Value::Object(t)
        })
        .collect()
}

fn normalize_tool_call_id(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

fn image(mime: &str, data: &str) -> Value {
    json!({ "type": "image", "source": { "type": "base64", "media_type": mime, "data": data } })
}

fn tool_result_content(blocks: &[UserBlock]) -> Value {
    let has_images = blocks.iter().any(|b| matches!(b, UserBlock::Image(_)));
    if !has_images {
        let texts: Vec<&str> = blocks
            .iter()
            .filter_map(|b| match b {
                UserBlock::Text(t) => Some(&*t.text),
                UserBlock::Image(_) => None,
            })
            .collect();
        return Value::from(texts.join("\n"));
    }
    let mut out: Vec<Value> = blocks
        .iter()
        .map(|b| match b {
            UserBlock::Text(t) => json!({ "type": "text", "text": &*t.text }),
            UserBlock::Image(img) => image(&img.mime_type, &img.data),
        })
        .collect();
    if !blocks.iter().any(|b| matches!(b, UserBlock::Text(_))) {
        out.insert(0, json!({ "type": "text", "text": "(see attached image)" }));
    }
    Value::Array(out)
}

/// The `messages` array, as pi-ai's `convertMessages`: tool results go back
/// as `tool_result` blocks of one user message, right after the calls.
fn convert_messages(model: &Model, messages: &[Message], cache: &Value) -> Vec<Value> {
    let messages = transform_messages(messages, model, &normalize_tool_call_id);
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::User(user) => out.extend(user_message(&user.content)),
            Message::Assistant(assistant) => out.extend(assistant_message(assistant)),
            Message::ToolResult(_) => {
                let (results, taken) = tool_results(&messages[i..]);
                out.push(results);
                i += taken;
                continue;
            }
        }
        i += 1;
    }
    cache_last_user_block(&mut out, cache);
    out
}

/// A user message, or `None` when it holds no text or image to send.
fn user_message(content: &UserContent) -> Option<Value> {
    match content {
        UserContent::Text(text) => {
            (!text.trim().is_empty()).then(|| json!({ "role": "user", "content": &**text }))
        }
        UserContent::Blocks(blocks) => {
            let parts: Vec<Value> = blocks
                .iter()
                .filter(|b| !matches!(b, UserBlock::Text(t) if t.text.trim().is_empty()))
                .map(|b| match b {
                    UserBlock::Text(t) => json!({ "type": "text", "text": &*t.text }),
                    UserBlock::Image(img) => image(&img.mime_type, &img.data),
                })
                .collect();
            (!parts.is_empty()).then(|| json!({ "role": "user", "content": parts }))
        }
    }
}

/// An assistant message, or `None` when none of its blocks is sent.
fn assistant_message(assistant: &AssistantMessage) -> Option<Value> {
    let mut blocks = Vec::new();
    for block in &assistant.content {
        match block {
            AssistantBlock::Text(t) => {
                if !t.text.trim().is_empty() {
                    blocks.push(json!({ "type": "text", "text": &*t.text }));
                }
            }
            AssistantBlock::Thinking(t) => blocks.extend(thinking_block(t)),
            AssistantBlock::ToolCall(call) => blocks.push(json!({
                "type": "tool_use",
                "id": &*call.id,
                "name": &*call.name,
                "input": &*call.arguments,
            })),
        }
    }
    (!blocks.is_empty()).then(|| json!({ "role": "assistant", "content": blocks }))
}

/// A reasoning block: redacted reasoning goes back as its data, signed
/// reasoning as `thinking`, unsigned reasoning as text; empty reasoning is
/// dropped.
fn thinking_block(t: &ThinkingContent) -> Option<Value> {
    if t.is_redacted() {
        return Some(json!({
            "type": "redacted_thinking",
            "data": t.thinking_signature.as_deref().unwrap_or_default(),
        }));
    }
    if t.thinking.trim().is_empty() {
        return None;
    }
    Some(
        match t
            .thinking_signature
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            Some(signature) => json!({
                "type": "thinking",
                "thinking": &*t.thinking,
                "signature": signature,
            }),
            None => json!({ "type": "text", "text": &*t.thinking }),
        },
    )
}

/// The tool results at the start of `messages` as one user message of
/// `tool_result` blocks, and how many messages they were.
fn tool_results(messages: &[Message]) -> (Value, usize) {
    let mut results = Vec::new();
    while let Some(Message::ToolResult(result)) = messages.get(results.len()) {
        results.push(json!({
            "type": "tool_result",
            "tool_use_id": &*result.tool_call_id,
            "content": tool_result_content(&result.content),
            "is_error": result.is_error,
        }));
    }
    let taken = results.len();
    (json!({ "role": "user", "content": results }), taken)
}

/// Caches the conversation so far: marks the last user message's last block.
fn cache_last_user_block(out: &mut [Value], cache: &Value) {
    let Some(last) = out.last_mut() else {
        return;
    };
    if last.get("role").and_then(Value::as_str) != Some("user") {
        return;
    }
    match last.get_mut("content") {
        Some(Value::Array(blocks)) => {
            if let Some(Value::Object(block)) = blocks.last_mut() {
                let kind = block
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if matches!(kind, "text" | "image" | "tool_result") {
                    block.insert("cache_control".into(), cache.clone());
                }
            }
        }
        Some(Value::String(text)) => {
            let text = std::mem::take(text);
            last["content"] = json!([{ "type": "text", "text": text, "cache_control": cache }]);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_follow_pi() {
        assert_eq!(
            thinking_budget(32_000, 64_000, ThinkingLevel::High),
            (48_384, 16_384)
        );
        assert_eq!(
            thinking_budget(32_000, 20_000, ThinkingLevel::High),
            (20_000, 16_384)
        );
        assert_eq!(
            thinking_budget(4_000, 8_000, ThinkingLevel::High),
            (8_000, 6_976)
        );
        assert_eq!(
            thinking_budget(1_000, 64_000, ThinkingLevel::Minimal),
            (2_024, 1_024)
        );
    }

    #[test]
    fn budgets_saturate_at_the_largest_limit() {
        assert_eq!(
            thinking_budget(u64::MAX, u64::MAX, ThinkingLevel::High),
            (u64::MAX, 16_384)
        );
        assert_eq!(
            thinking_budget(u64::MAX, 64_000, ThinkingLevel::Low),
            (64_000, 2_048)
        );
    }

    #[test]
    fn endpoint_accepts_base_urls_with_or_without_v1() {
        let mut m = Model::new(
            crate::wire::ANTHROPIC_MESSAGES,
            "anthropic",
            "c",
            "https://api.anthropic.com",
        );
        assert_eq!(endpoint(&m), "https://api.anthropic.com/v1/messages");
        m.base_url = "https://proxy.example/v1/".into();
        assert_eq!(endpoint(&m), "https://proxy.example/v1/messages");
    }
}
