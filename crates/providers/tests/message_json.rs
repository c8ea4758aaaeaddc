//! Round trips of pi-ai-shaped message JSON: what pi writes, roundtable reads
//! and writes back unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use roundtable_providers::{
    AssistantBlock, AssistantMessage, Message, StopReason, ToolCall, UserBlock, UserContent,
};
use serde_json::{Value, json};

/// Parses `value` as a message, serialises it again and checks nothing changed,
/// key order included.
fn round_trip(value: Value) -> Message {
    let text = serde_json::to_string(&value).unwrap();
    let message: Message = serde_json::from_str(&text).unwrap();
    let again = serde_json::to_string(&message).unwrap();
    assert_eq!(again, text, "round trip changed the JSON");
    message
}

#[test]
fn user_message_with_string_content() {
    let m = round_trip(
        json!({"role": "user", "content": "hi there", "timestamp": 1_731_000_000_000_i64}),
    );
    let Message::User(u) = m else {
        panic!("not a user message")
    };
    assert_eq!(u.content, UserContent::Text("hi there".into()));
}

#[test]
fn user_message_with_text_and_image_blocks() {
    let m = round_trip(json!({
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        ],
        "timestamp": 1
    }));
    let Message::User(user) = m else {
        panic!("expected a user message")
    };
    let UserContent::Blocks(blocks) = &user.content else {
        panic!("expected blocks")
    };
    assert!(matches!(&blocks[1], UserBlock::Image(i) if &*i.mime_type == "image/png"));
}

#[test]
fn assistant_message_with_every_block_kind() {
    let m = round_trip(json!({
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "let me look", "thinkingSignature": "sig=="},
            {"type": "thinking", "thinking": "", "thinkingSignature": "opaque", "redacted": true},
            {"type": "text", "text": "Reading the file."},
            {"type": "toolCall", "id": "call_1", "name": "read_file", "arguments": {"path": "src/lib.rs", "range": [1, 20]}}
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "responseId": "msg_01",
        "usage": {
            "input": 120, "output": 40, "cacheRead": 1000, "cacheWrite": 0, "totalTokens": 1160,
            "cost": {"input": 0.00036, "output": 0.0006, "cacheRead": 0.0003, "cacheWrite": 0, "total": 0.00126}
        },
        "stopReason": "toolUse",
        "timestamp": 1_731_000_000_123_i64
    }));
    let Message::Assistant(a) = m else {
        panic!("not an assistant message")
    };
    assert_eq!(a.stop_reason, StopReason::ToolUse);
    assert_eq!(a.text(), "Reading the file.");
    let calls: Vec<&ToolCall> = a.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments["path"], "src/lib.rs");
    assert!(matches!(&a.content[1], AssistantBlock::Thinking(t) if t.is_redacted()));
    assert_eq!(a.usage.cache_read, 1000);
}

#[test]
fn failed_assistant_message_keeps_error_and_diagnostics() {
    let m = round_trip(json!({
        "role": "assistant",
        "content": [{"type": "text", "text": "partial"}],
        "api": "openai-completions",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "diagnostics": [{"type": "invalid_tool_arguments", "timestamp": 5, "error": {"message": "EOF"}, "details": {"toolCallId": "c1", "raw": "{\"a\":"}}],
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "error",
        "errorMessage": "stream ended before its terminal event",
        "timestamp": 2
    }));
    let Message::Assistant(a) = m else {
        panic!("not an assistant message")
    };
    assert!(a.stop_reason.is_failure());
    assert_eq!(a.diagnostics.as_ref().map(Vec::len), Some(1));
}

#[test]
fn tool_result_message() {
    let m = round_trip(json!({
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "read_file",
        "content": [{"type": "text", "text": "fn main() {}"}],
        "details": {"bytes": 12},
        "isError": false,
        "timestamp": 3
    }));
    assert!(matches!(m, Message::ToolResult(r) if !r.is_error));
}

#[test]
fn every_stop_reason_uses_pi_spelling() {
    for (reason, text) in [
        (StopReason::Stop, "stop"),
        (StopReason::Length, "length"),
        (StopReason::ToolUse, "toolUse"),
        (StopReason::Error, "error"),
        (StopReason::Aborted, "aborted"),
    ] {
        assert_eq!(serde_json::to_value(reason).unwrap(), json!(text));
    }
}

#[test]
fn built_messages_serialise_as_pi_does() {
    let mut a = AssistantMessage::empty("openai-completions", "openai", "gpt-4o", 7);
    a.content.push(AssistantBlock::text("hello"));
    let json = serde_json::to_value(Message::from(a)).unwrap();
    assert_eq!(json["role"], "assistant");
    assert_eq!(json["stopReason"], "stop");
    assert_eq!(json["content"][0], json!({"type": "text", "text": "hello"}));
    assert!(json.get("errorMessage").is_none());
}

#[test]
fn unknown_role_and_block_types_are_errors_not_panics() {
    assert!(
        serde_json::from_value::<Message>(
            json!({"role": "system", "content": "x", "timestamp": 1})
        )
        .is_err()
    );
    assert!(
        serde_json::from_value::<Message>(
            json!({"role": "user", "content": [{"type": "audio"}], "timestamp": 1})
        )
        .is_err()
    );
}
