//! The bodies that carry a model message: `pi.assistant` and
//! `pi.tool_result`, with their content blocks and usage.

use std::sync::Arc;

use roundtable_providers::{
    AssistantBlock, AssistantMessage, Cost, ImageContent, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, Usage, UserBlock,
};

use super::{HandCursor, optional_turn, shared_str};
use crate::body::{AssistantEntry, ToolResultEntry};
use crate::known_thread::KnownThread;

/// `[,"turn":...],"message":{"content":[...],"api":...,"provider":...,
/// "model":...[,"responseModel":...][,"responseId":...],"usage":{...},
/// "stopReason":...[,"errorMessage":...],"timestamp":...}}`
pub(super) fn assistant(
    c: &mut HandCursor<'_>,
    known: &mut KnownThread,
    scratch: &mut String,
) -> Option<AssistantEntry> {
    let turn = optional_turn(c, known, scratch)?;
    c.literal(",\"message\":{\"content\":[")?;
    let mut content = Vec::new();
    if !c.next_is("]") {
        loop {
            content.push(assistant_block(c, known, scratch)?);
            if c.next_is("]") {
                break;
            }
            c.literal(",")?;
        }
    }
    c.literal(",\"api\":")?;
    let api = known.label(c.str_in(scratch)?);
    c.literal(",\"provider\":")?;
    let provider = known.label(c.str_in(scratch)?);
    c.literal(",\"model\":")?;
    let model = known.label(c.str_in(scratch)?);
    let response_model = match c.next_is(",\"responseModel\":") {
        true => Some(known.label(c.str_in(scratch)?)),
        false => None,
    };
    let response_id = match c.next_is(",\"responseId\":") {
        true => Some(shared_str(c, scratch)?),
        false => None,
    };
    c.literal(",\"usage\":")?;
    let usage = usage(c)?;
    c.literal(",\"stopReason\":")?;
    let stop_reason = match c.plain_str()? {
        "stop" => StopReason::Stop,
        "length" => StopReason::Length,
        "toolUse" => StopReason::ToolUse,
        "error" => StopReason::Error,
        "aborted" => StopReason::Aborted,
        _ => return None,
    };
    let error_message = match c.next_is(",\"errorMessage\":") {
        true => Some(c.str_in(scratch)?.to_owned()),
        false => None,
    };
    c.literal(",\"timestamp\":")?;
    let timestamp = c.signed()?;
    c.literal("}}")?;
    let message = AssistantMessage {
        content,
        api,
        provider,
        model,
        response_model,
        response_id,
        diagnostics: None,
        usage,
        stop_reason,
        error_message,
        timestamp,
    };
    Some(AssistantEntry::new(turn, Arc::new(message)))
}

/// `{"type":"text"|"thinking"|"toolCall",...}`
fn assistant_block(
    c: &mut HandCursor<'_>,
    known: &mut KnownThread,
    scratch: &mut String,
) -> Option<AssistantBlock> {
    c.literal("{\"type\":")?;
    let block = match c.plain_str()? {
        "text" => AssistantBlock::Text(text_content(c, scratch)?),
        "thinking" => {
            c.literal(",\"thinking\":")?;
            let mut thinking = ThinkingContent::new(shared_str(c, scratch)?);
            if c.next_is(",\"thinkingSignature\":") {
                thinking.thinking_signature = Some(shared_str(c, scratch)?);
            }
            if c.next_is(",\"redacted\":") {
                thinking.redacted = Some(c.boolean()?);
            }
            AssistantBlock::Thinking(thinking)
        }
        "toolCall" => {
            c.literal(",\"id\":")?;
            let id = shared_str(c, scratch)?;
            c.literal(",\"name\":")?;
            let name = known.label(c.str_in(scratch)?);
            c.literal(",\"arguments\":")?;
            let arguments = serde_json::from_str(c.raw_nested()?).ok()?;
            let mut call = ToolCall::new(id, name, arguments);
            if c.next_is(",\"thoughtSignature\":") {
                call.thought_signature = Some(shared_str(c, scratch)?);
            }
            AssistantBlock::ToolCall(call)
        }
        _ => return None,
    };
    c.literal("}")?;
    Some(block)
}

/// The fields of a text block after its `type`: `,"text":...[,"textSignature":...]`.
fn text_content(c: &mut HandCursor<'_>, scratch: &mut String) -> Option<TextContent> {
    c.literal(",\"text\":")?;
    let mut text = TextContent::new(shared_str(c, scratch)?);
    if c.next_is(",\"textSignature\":") {
        text.text_signature = Some(shared_str(c, scratch)?);
    }
    Some(text)
}

/// `{"input":...,"output":...,"cacheRead":...,"cacheWrite":...,"totalTokens":...,"cost":{...}}`
fn usage(c: &mut HandCursor<'_>) -> Option<Usage> {
    let count = |c: &mut HandCursor<'_>, key: &str| {
        c.literal(key)?;
        c.unsigned(19)
    };
    let input = count(c, "{\"input\":")?;
    let output = count(c, ",\"output\":")?;
    let cache_read = count(c, ",\"cacheRead\":")?;
    let cache_write = count(c, ",\"cacheWrite\":")?;
    let total_tokens = count(c, ",\"totalTokens\":")?;
    let dollars = |c: &mut HandCursor<'_>, key: &str| {
        c.literal(key)?;
        c.float()
    };
    let cost = Cost {
        input: dollars(c, ",\"cost\":{\"input\":")?,
        output: dollars(c, ",\"output\":")?,
        cache_read: dollars(c, ",\"cacheRead\":")?,
        cache_write: dollars(c, ",\"cacheWrite\":")?,
        total: dollars(c, ",\"total\":")?,
    };
    c.literal("}}")?;
    Some(Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens,
        cost,
    })
}

/// `[,"turn":...],"message":{"toolCallId":...,"toolName":...,"content":[...]
/// [,"details":{...}],"isError":...,"timestamp":...}}`
pub(super) fn tool_result(
    c: &mut HandCursor<'_>,
    known: &mut KnownThread,
    scratch: &mut String,
) -> Option<ToolResultEntry> {
    let turn = optional_turn(c, known, scratch)?;
    c.literal(",\"message\":{\"toolCallId\":")?;
    let tool_call_id = shared_str(c, scratch)?;
    c.literal(",\"toolName\":")?;
    let tool_name = known.label(c.str_in(scratch)?);
    c.literal(",\"content\":[")?;
    let mut content = Vec::new();
    if !c.next_is("]") {
        loop {
            content.push(user_block(c, scratch)?);
            if c.next_is("]") {
                break;
            }
            c.literal(",")?;
        }
    }
    let details = match c.next_is(",\"details\":") {
        // `null` reads as no details, as serde reads an `Option`.
        true => serde_json::from_str::<Option<serde_json::Value>>(c.raw_nested()?).ok()?,
        false => None,
    };
    c.literal(",\"isError\":")?;
    let is_error = c.boolean()?;
    c.literal(",\"timestamp\":")?;
    let timestamp = c.signed()?;
    c.literal("}}")?;
    let message = ToolResultMessage {
        tool_call_id,
        tool_name,
        content,
        details,
        is_error,
        timestamp,
    };
    Some(ToolResultEntry {
        turn,
        message: Arc::new(message),
    })
}

/// `{"type":"text"|"image",...}`
fn user_block(c: &mut HandCursor<'_>, scratch: &mut String) -> Option<UserBlock> {
    c.literal("{\"type\":")?;
    let block = match c.plain_str()? {
        "text" => UserBlock::Text(text_content(c, scratch)?),
        "image" => {
            c.literal(",\"data\":")?;
            let data = shared_str(c, scratch)?;
            c.literal(",\"mimeType\":")?;
            let mime_type = shared_str(c, scratch)?;
            UserBlock::Image(ImageContent { data, mime_type })
        }
        _ => return None,
    };
    c.literal("}")?;
    Some(block)
}
