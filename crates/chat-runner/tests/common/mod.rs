//! Helpers shared by the integration tests: scripted replies, test tools and
//! a history validator.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use roundtable_chat_runner::{EventSink, TurnEvent};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, JsonObject, Message, Model, OPENAI_COMPLETIONS, StopReason,
    ToolCall, Usage,
};
use roundtable_tools::{Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolResult};

pub fn model() -> Model {
    Model::new(OPENAI_COMPLETIONS, "scripted", "m", "")
}

pub fn usage(input: u64, output: u64, cost: f64) -> Usage {
    let mut u = Usage {
        input,
        output,
        total_tokens: input + output,
        ..Usage::default()
    };
    u.cost.total = cost;
    u
}

/// A final answer.
pub fn text(t: &str) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
    m.content.push(AssistantBlock::text(t));
    m.usage = usage(10, 5, 0.001);
    m
}

/// A message calling `calls` = [(id, tool, args)].
pub fn calls(calls: &[(&str, &str, serde_json::Value)]) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
    for (id, name, args) in calls {
        m.content.push(AssistantBlock::ToolCall(ToolCall::new(
            *id,
            *name,
            args.as_object().cloned().unwrap_or_default(),
        )));
    }
    m.stop_reason = StopReason::ToolUse;
    m.usage = usage(10, 5, 0.001);
    m
}

pub fn call(id: &str, name: &str) -> AssistantMessage {
    calls(&[(id, name, serde_json::json!({}))])
}

type Body = Arc<
    dyn Fn(
            ToolContext,
            JsonObject,
        ) -> Pin<Box<dyn Future<Output = Result<ToolResult, ToolError>> + Send>>
        + Send
        + Sync,
>;

/// A tool whose body is a closure.
pub struct FnTool {
    pub def: ToolDefinition,
    pub body: Body,
}

#[async_trait::async_trait]
impl Tool for FnTool {
    fn definition(&self) -> ToolDefinition {
        self.def.clone()
    }
    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        (self.body)(ctx, args).await
    }
}

pub fn tool<F, Fut>(name: &str, kind: ToolKind, f: F) -> FnTool
where
    F: Fn(ToolContext, JsonObject) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    FnTool {
        def: ToolDefinition::new(
            name,
            format!("test tool {name}"),
            serde_json::json!({"type": "object", "properties": {}}),
            kind,
        ),
        body: Arc::new(move |ctx, args| Box::pin(f(ctx, args))),
    }
}

/// A tool that waits until its call is cancelled.
pub fn blocker(name: &str, kind: ToolKind) -> FnTool {
    tool(name, kind, |ctx: ToolContext, _| async move {
        ctx.cancel.cancelled().await;
        Err(ToolError::Cancelled {
            tool: "blocker".into(),
            call_id: ctx.call_id.clone(),
        })
    })
}

/// Records every event.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<TurnEvent>>);

impl EventSink for Recorder {
    fn emit(&self, event: TurnEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Recorder {
    pub fn events(&self) -> Vec<TurnEvent> {
        self.0.lock().unwrap().clone()
    }
    pub fn types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }
}

/// Every tool call has exactly one result after it, every result answers an
/// earlier call.
pub fn assert_history_valid(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    let mut answered = HashSet::new();
    for m in messages {
        match m {
            Message::Assistant(a) => {
                assert!(
                    open.is_empty(),
                    "calls {open:?} unanswered before the next assistant message"
                );
                open = a.tool_calls().map(|c| c.id.to_string()).collect();
            }
            Message::ToolResult(r) => {
                let id = r.tool_call_id.to_string();
                let pos = open.iter().position(|o| *o == id);
                assert!(pos.is_some(), "result {id} answers no open call");
                open.remove(pos.unwrap());
                assert!(answered.insert(id), "call answered twice");
            }
            Message::User(_) => assert!(
                open.is_empty(),
                "calls {open:?} unanswered before a user message"
            ),
        }
    }
    assert!(open.is_empty(), "calls {open:?} left without a result");
}

pub fn tool_results(messages: &[Message]) -> Vec<&roundtable_providers::ToolResultMessage> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

pub fn result_text(r: &roundtable_providers::ToolResultMessage) -> String {
    r.content
        .iter()
        .filter_map(|b| match b {
            roundtable_providers::UserBlock::Text(t) => Some(t.text.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
