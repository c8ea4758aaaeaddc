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
    UserMessage, complete,
};
use roundtable_providers::{retry::RetryObserver, validate::validate_events};
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

#[tokio::test]
async fn scripted_retries_are_announced_waited_for_and_abortable() {
    let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
    let reply = message(
        vec![AssistantBlock::text("late but fine")],
        StopReason::Stop,
    );
    let provider = ScriptedProvider::new([reply.clone(), reply.clone()]);
    let notices = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = notices.clone();
    let options = StreamOptions {
        on_retry: Some(RetryObserver::new(move |n| {
            seen.lock().unwrap().push(n.clone())
        })),
        ..StreamOptions::default()
    };
    provider.retry_next_call(2, Duration::from_millis(5), "overloaded");
    let events: Vec<_> = provider
        .stream(&model, &Context::default(), &options)
        .collect()
        .await;
    assert_eq!(events.last().unwrap().final_message(), Some(&reply));
    assert!(validate_events(&events).is_empty());
    let numbers: Vec<u32> = notices.lock().unwrap().iter().map(|n| n.retry).collect();
    assert_eq!(numbers, [1, 2]);

    // Cancelled while waiting: the call ends as aborted, nothing streamed.
    provider.retry_next_call(1, Duration::from_secs(600), "overloaded");
    let options = StreamOptions::default();
    let cancel = options.cancel.clone();
    let stream = provider.stream(&model, &Context::default(), &options);
    tokio::time::sleep(Duration::from_millis(20)).await;
    cancel.cancel();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .expect("the wait is cut short");
    assert!(matches!(
        events.last(),
        Some(roundtable_providers::AssistantEvent::Error {
            kind: ErrorKind::Aborted,
            ..
        })
    ));
}
