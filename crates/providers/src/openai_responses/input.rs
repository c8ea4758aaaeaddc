//! The conversation as Responses input items, as pi-ai's
//! `convertResponsesMessages`: user messages as `input_text` /
//! `input_image` parts, assistant text as `message` items (their ids kept
//! in the text's signature), reasoning as the encrypted reasoning item it
//! arrived as, tool calls as `function_call` items and results as
//! `function_call_output`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::content::{AssistantBlock, TextContent, ToolCall, UserBlock};
use crate::context::Context;
use crate::message::{AssistantMessage, Message, ToolResultMessage};
use crate::model::{InputKind, Model};
use crate::transform::transform_messages;
use crate::user_message::UserContent;

use super::ids::{normalize_call_id, short_hash};

/// The `input` array: the system prompt, then every message of the
/// transformed history.
pub(super) fn convert_input(model: &Model, context: &Context) -> Vec<Value> {
    // Which provider and API made each call, for ids of another model's
    // calls (the transform names only the id).
    let sources: HashMap<&str, (&str, &str)> = context
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a),
            _ => None,
        })
        .flat_map(|a| {
            a.tool_calls()
                .map(move |c| (&*c.id, (&*a.provider, &*a.api)))
        })
        .collect();
    let normalize = |id: &str| {
        let foreign = sources
            .get(id)
            .is_none_or(|(p, api)| *p != model.provider || *api != model.api.as_str());
        normalize_call_id(&model.provider, id, foreign)
    };
    let messages = transform_messages(&context.messages, model, &normalize);
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = &context.system_prompt {
        let role = if model.reasoning {
            "developer"
        } else {
            "system"
        };
        out.push(json!({ "role": role, "content": system }));
    }
    let images = model.input.contains(&InputKind::Image);
    // The place of each message, for text items without an id of their own.
    let mut index = 0;
    for message in &messages {
        let before = out.len();
        match message {
            Message::User(user) => push_user(&user.content, &mut out),
            Message::Assistant(a) => push_assistant(model, a, index, &mut out),
            Message::ToolResult(r) => out.push(tool_output(r, images)),
        }
        // A message that added nothing takes no place (as pi counts).
        if out.len() > before {
            index += 1;
        }
    }
    out
}

fn image_part(mime: &str, data: &str) -> Value {
    json!({ "type": "input_image", "detail": "auto", "image_url": format!("data:{mime};base64,{data}") })
}

fn push_user(content: &UserContent, out: &mut Vec<Value>) {
    let parts: Vec<Value> = match content {
        UserContent::Text(text) => vec![json!({ "type": "input_text", "text": &**text })],
        UserContent::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b {
                UserBlock::Text(t) => json!({ "type": "input_text", "text": &*t.text }),
                UserBlock::Image(img) => image_part(&img.mime_type, &img.data),
            })
            .collect(),
    };
    if !parts.is_empty() {
        out.push(json!({ "role": "user", "content": parts }));
    }
}

/// An assistant message's items: its reasoning items as received, its
/// text as `message` items, its calls as `function_call` items.
fn push_assistant(model: &Model, a: &AssistantMessage, index: usize, out: &mut Vec<Value>) {
    // Another model of the same provider and API: its call item ids were
    // paired with its own reasoning, which is not sent, so they are left out.
    let other_model =
        *a.model != *model.id && *a.provider == *model.provider && *a.api == *model.api.as_str();
    for block in &a.content {
        match block {
            AssistantBlock::Thinking(t) => {
                // The reasoning item exactly as it arrived; one that does not
                // read as an item is not sent.
                let item = t
                    .thinking_signature
                    .as_deref()
                    .and_then(|s| serde_json::from_str::<Map<String, Value>>(s).ok());
                if let Some(item) = item {
                    out.push(Value::Object(item));
                }
            }
            AssistantBlock::Text(t) => out.push(text_item(t, index)),
            AssistantBlock::ToolCall(call) => out.push(call_item(call, other_model)),
        }
    }
}

/// A text block as a `message` item, with the id (and phase) its
/// signature kept.
fn text_item(text: &TextContent, index: usize) -> Value {
    let (id, phase) = parse_text_signature(text.text_signature.as_deref());
    let id = match id {
        None => format!("msg_{index}"),
        Some(id) if id.chars().map(char::len_utf16).sum::<usize>() > 64 => {
            format!("msg_{}", short_hash(&id))
        }
        Some(id) => id,
    };
    let mut item = json!({
        "type": "message",
        "role": "assistant",
        "content": [{ "type": "output_text", "text": &*text.text, "annotations": [] }],
        "status": "completed",
        "id": id,
    });
    if let Some(phase) = phase {
        item["phase"] = Value::from(phase);
    }
    item
}

/// A text signature's item id and phase: `{"v":1,"id":...,"phase":...}`,
/// or a plain id.
fn parse_text_signature(signature: Option<&str>) -> (Option<String>, Option<&'static str>) {
    let Some(signature) = signature.filter(|s| !s.is_empty()) else {
        return (None, None);
    };
    if signature.starts_with('{')
        && let Ok(Value::Object(v)) = serde_json::from_str::<Value>(signature)
        && v.get("v").and_then(Value::as_u64) == Some(1)
        && let Some(id) = v.get("id").and_then(Value::as_str)
    {
        let phase = match v.get("phase").and_then(Value::as_str) {
            Some("commentary") => Some("commentary"),
            Some("final_answer") => Some("final_answer"),
            _ => None,
        };
        return (Some(id.to_string()), phase);
    }
    (Some(signature.to_string()), None)
}

/// A tool call as a `function_call` item: its id is `call_id|item_id`.
fn call_item(call: &ToolCall, other_model: bool) -> Value {
    let mut parts = call.id.split('|');
    let call_id = parts.next().unwrap_or_default();
    let item_id = parts
        .next()
        .filter(|item| !(other_model && item.starts_with("fc_")));
    let mut item = Map::new();
    item.insert("type".into(), Value::from("function_call"));
    if let Some(item_id) = item_id {
        item.insert("id".into(), Value::from(item_id));
    }
    item.insert("call_id".into(), Value::from(call_id));
    item.insert("name".into(), Value::from(&*call.name));
    let arguments = serde_json::to_string(&*call.arguments).unwrap_or_else(|_| "{}".into());
    item.insert("arguments".into(), Value::from(arguments));
    Value::Object(item)
}

/// A tool result as a `function_call_output` item: its text, or its text
/// and images as parts when the model takes images.
fn tool_output(result: &ToolResultMessage, images: bool) -> Value {
    let text = crate::content::join_lines(result.content.iter().filter_map(|b| match b {
        UserBlock::Text(t) => Some(&*t.text),
        UserBlock::Image(_) => None,
    }));
    let has_images = result
        .content
        .iter()
        .any(|b| matches!(b, UserBlock::Image(_)));
    let call_id = result.tool_call_id.split('|').next().unwrap_or_default();
    let output = if has_images && images {
        let mut parts = Vec::new();
        if !text.is_empty() {
            parts.push(json!({ "type": "input_text", "text": text }));
        }
        for block in &result.content {
            if let UserBlock::Image(img) = block {
                parts.push(image_part(&img.mime_type, &img.data));
            }
        }
        Value::Array(parts)
    } else if text.is_empty() {
        Value::from("(see attached image)")
    } else {
        Value::from(text)
    };
    json!({ "type": "function_call_output", "call_id": call_id, "output": output })
}
