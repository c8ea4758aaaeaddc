//! The conversation as Gemini `contents`, as pi-ai's `convertMessages`:
//! user turns, `model` turns (thoughts and their signatures kept for the
//! same model), function calls, and their responses merged into one user
//! turn.

use serde_json::{Map, Value, json};

use crate::content::{AssistantBlock, UserBlock};
use crate::message::{AssistantMessage, Message, ToolResultMessage};
use crate::model::{InputKind, Model};
use crate::transform::transform_messages;
use crate::user_message::UserContent;

/// Whether calls and responses carry their ids: models served through
/// Google's API that need them (Claude, gpt-oss).
fn requires_call_ids(model_id: &str) -> bool {
    model_id.starts_with("claude-") || model_id.starts_with("gpt-oss-")
}

/// A call id the model accepts: ids are sent only to models that need
/// them, which take letters, digits, `_` and `-`, 64 at most.
fn normalize_call_id(model_id: &str, id: &str) -> String {
    if !requires_call_ids(model_id) {
        return id.to_string();
    }
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    out.truncate(64);
    out
}

/// Whether function responses may hold images (Gemini 3 and later, and
/// models that are not Gemini); older models get them in a user turn.
fn multimodal_function_responses(model_id: &str) -> bool {
    let id = model_id.to_ascii_lowercase();
    let rest = id
        .strip_prefix("gemini-live-")
        .or_else(|| id.strip_prefix("gemini-"));
    let Some(rest) = rest else {
        return true;
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u32>().map_or(true, |major| major >= 3)
}

/// A thought signature worth sending back: from the same model, and
/// base64 as the API requires.
fn valid_signature(same_model: bool, signature: Option<&str>) -> Option<&str> {
    signature.filter(|s| {
        let digits = s.trim_end_matches('=');
        same_model
            && !digits.is_empty()
            && s.len() % 4 == 0
            && s.len() - digits.len() <= 2
            && digits
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    })
}

/// The `contents` array of the transformed history.
pub(super) fn convert_contents(model: &Model, messages: &[Message]) -> Vec<Value> {
    let normalize = |id: &str| normalize_call_id(&model.id, id);
    let messages = transform_messages(messages, model, &normalize);
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    for message in &messages {
        match message {
            Message::User(user) => {
                if let Some(turn) = user_turn(&user.content) {
                    out.push(turn);
                }
            }
            Message::Assistant(a) => {
                let parts = model_parts(model, a);
                if !parts.is_empty() {
                    out.push(json!({ "role": "model", "parts": parts }));
                }
            }
            Message::ToolResult(result) => push_response(model, result, &mut out),
        }
    }
    out
}

fn inline_data(mime: &str, data: &str) -> Value {
    json!({ "inlineData": { "mimeType": mime, "data": data } })
}

fn user_turn(content: &UserContent) -> Option<Value> {
    let parts: Vec<Value> = match content {
        UserContent::Text(text) => vec![json!({ "text": &**text })],
        UserContent::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b {
                UserBlock::Text(t) => json!({ "text": &*t.text }),
                UserBlock::Image(img) => inline_data(&img.mime_type, &img.data),
            })
            .collect(),
    };
    (!parts.is_empty()).then(|| json!({ "role": "user", "parts": parts }))
}

/// An assistant message's parts: text, thoughts (as thoughts for the same
/// model, else as text), function calls; signatures only for the same
/// model.
fn model_parts(model: &Model, a: &AssistantMessage) -> Vec<Value> {
    let same = *a.provider == *model.provider && *a.model == *model.id;
    let mut parts = Vec::new();
    for block in &a.content {
        let mut part = Map::new();
        let signature = match block {
            AssistantBlock::Text(t) => {
                if t.text.trim().is_empty() {
                    continue;
                }
                part.insert("text".into(), Value::from(&*t.text));
                t.text_signature.as_deref()
            }
            AssistantBlock::Thinking(t) => {
                if t.thinking.trim().is_empty() {
                    continue;
                }
                if same {
                    part.insert("thought".into(), Value::Bool(true));
                }
                part.insert("text".into(), Value::from(&*t.thinking));
                t.thinking_signature.as_deref().filter(|_| same)
            }
            AssistantBlock::ToolCall(call) => {
                let mut function = Map::new();
                function.insert("name".into(), Value::from(&*call.name));
                function.insert("args".into(), Value::Object((*call.arguments).clone()));
                if requires_call_ids(&model.id) {
                    function.insert("id".into(), Value::from(&*call.id));
                }
                part.insert("functionCall".into(), Value::Object(function));
                call.thought_signature.as_deref()
            }
        };
        if let Some(signature) = valid_signature(same, signature) {
            part.insert("thoughtSignature".into(), Value::from(signature));
        }
        parts.push(Value::Object(part));
    }
    parts
}

/// A tool result as a `functionResponse` part, merged into the user turn
/// of the responses before it; images inside it for models that take them
/// there, else in a user turn of their own.
fn push_response(model: &Model, result: &ToolResultMessage, out: &mut Vec<Value>) {
    let text = crate::content::join_lines(result.content.iter().filter_map(|b| match b {
        UserBlock::Text(t) => Some(&*t.text),
        UserBlock::Image(_) => None,
    }));
    let images: Vec<Value> = if model.input.contains(&InputKind::Image) {
        result
            .content
            .iter()
            .filter_map(|b| match b {
                UserBlock::Image(img) => Some(inline_data(&img.mime_type, &img.data)),
                UserBlock::Text(_) => None,
            })
            .collect()
    } else {
        Vec::new()
    };
    let value = if !text.is_empty() {
        text
    } else if !images.is_empty() {
        "(see attached image)".to_string()
    } else {
        String::new()
    };
    let key = if result.is_error { "error" } else { "output" };
    let mut response = Map::new();
    response.insert("name".into(), Value::from(&*result.tool_name));
    response.insert("response".into(), json!({ key: value }));
    let inline = multimodal_function_responses(&model.id);
    if !images.is_empty() && inline {
        response.insert("parts".into(), Value::Array(images.clone()));
    }
    if requires_call_ids(&model.id) {
        response.insert("id".into(), Value::from(&*result.tool_call_id));
    }
    let part = json!({ "functionResponse": response });
    match out.last_mut() {
        Some(last) if is_response_turn(last) => {
            if let Some(Value::Array(parts)) = last.get_mut("parts") {
                parts.push(part);
            }
        }
        _ => out.push(json!({ "role": "user", "parts": [part] })),
    }
    if !images.is_empty() && !inline {
        let mut parts = vec![json!({ "text": "Tool result image:" })];
        parts.extend(images);
        out.push(json!({ "role": "user", "parts": parts }));
    }
}

fn is_response_turn(content: &Value) -> bool {
    content.get("role").and_then(Value::as_str) == Some("user")
        && content
            .get("parts")
            .and_then(Value::as_array)
            .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_must_be_base64_from_the_same_model() {
        assert_eq!(valid_signature(true, Some("QUJD")), Some("QUJD"));
        assert_eq!(valid_signature(true, Some("QUI=")), Some("QUI="));
        assert_eq!(valid_signature(true, Some("QUJ")), None);
        assert_eq!(valid_signature(true, Some("reasoning_content")), None);
        assert_eq!(valid_signature(false, Some("QUJD")), None);
        assert_eq!(valid_signature(true, Some("Q===")), None);
    }

    #[test]
    fn ids_and_inline_images_follow_the_model() {
        assert_eq!(normalize_call_id("gemini-2.5-flash", "a|b"), "a|b");
        assert_eq!(normalize_call_id("claude-x", "a|b"), "a_b");
        assert!(!multimodal_function_responses("gemini-2.5-flash"));
        assert!(multimodal_function_responses("gemini-3-pro-preview"));
        assert!(multimodal_function_responses("claude-sonnet"));
    }
}
