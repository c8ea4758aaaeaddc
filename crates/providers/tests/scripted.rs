//! The scripted provider as a turn loop sees it: behind `Arc<dyn Provider>`,
//! streaming text, thinking, tool calls and failures with the same event
//! grammar as the HTTP adapters.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, ErrorKind, Message, Model, OPENAI_COMPLETIONS,
    Provider, ScriptStep, ScriptedProvider, StopReason, StreamOptions, ThinkingContent, ToolCall,
    UserMessage, complete, validate_events,
};
use serde_json::json;

fn message(blocks: Vec<AssistantBlock>, stop: StopReason) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 5);
    m.content = blocks;
    m.stop_reason = stop;
    m
}

#[tokio::test]
async fn a_tool_round_through_arc_dyn_provider() {
    let args = json!({"path": "notes/ünïcode.md"})
        .as_object()
        .unwrap()
        .clone();
    let first = message(
        vec![
            AssistantBlock::Thinking(ThinkingContent::new("Need the file first.")),
            AssistantBlock::text("Reading it."),
            AssistantBlock::ToolCall(ToolCall::new("call_1", "read_file", args)),
        ],
        StopReason::ToolUse,
    );
    let second = message(
        vec![AssistantBlock::text("It says hello.")],
        StopReason::Stop,
    );
    let provider: Arc<dyn Provider> = Arc::new(
        ScriptedProvider::new([first.clone(), second.clone()])
            .with_pacing(Duration::from_millis(1))
            .with_chunk_chars(3),
    );
    let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
    let mut context = Context {
        messages: vec![Message::from(UserMessage::text("what does it say?", 1))],
        ..Context::default()
    };
    let events: Vec<_> = provider
        .stream(&model, &context, &StreamOptions::default())
        .collect()
        .await;
    assert!(
        validate_events(&events).is_empty(),
        "{:#?}",
        validate_events(&events)
    );
    assert_eq!(events.last().unwrap().final_message(), Some(&first));
    context.messages.push(Message::from(first));
    let done = complete(
        provider.as_ref(),
        &model,
        &context,
        &StreamOptions::default(),
    )
    .await;
    assert_eq!(done.message, second);
}

#[tokio::test]
async fn scripted_failures_end_with_typed_errors() {
    let mut failed = message(vec![AssistantBlock::text("partial")], StopReason::Error);
    failed.error_message = Some("Overloaded".into());
    let provider = ScriptedProvider::new([ScriptStep::Fail {
        kind: ErrorKind::Overloaded,
        message: failed,
    }]);
    let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
    let events: Vec<_> = provider
        .stream(&model, &Context::default(), &StreamOptions::default())
        .collect()
        .await;
    assert!(validate_events(&events).is_empty());
    let done = complete(
        &provider,
        &model,
        &Context::default(),
        &StreamOptions::default(),
    )
    .await;
    assert_eq!(
        done.error,
        Some(ErrorKind::Protocol),
        "the script is exhausted"
    );
    assert_eq!(provider.requests().len(), 2);
}
