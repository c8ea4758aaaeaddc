//! The turn the `turn_loop` bench measures, shared with the allocation
//! counts (`benches/allocations.rs`): an 8-round tool conversation (7
//! rounds calling a trivial read tool, then the answer) against the
//! scripted provider with zero latency.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use roundtable::chat_runner::{TurnLoop, TurnRequest};
use roundtable::providers::{
    AssistantBlock, AssistantMessage, Message, Model, OPENAI_COMPLETIONS, ScriptedProvider,
    StopReason, ToolCall, UserMessage,
};
use roundtable::tools::ToolRegistry;
use roundtable_test_support::tools::Lookup;

/// The tools of the turn: the trivial `lookup`.
pub(crate) fn tools() -> Arc<ToolRegistry> {
    let mut tools = ToolRegistry::new();
    tools.register(Lookup).unwrap();
    Arc::new(tools)
}

/// The model's side: seven `lookup` calls, then the answer.
pub(crate) fn script() -> Vec<AssistantMessage> {
    let mut steps = Vec::new();
    for round in 0..7 {
        let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
        m.content
            .push(AssistantBlock::text(format!("Let me look up key {round}.")));
        let args = serde_json::json!({"key": format!("k{round}")});
        m.content.push(AssistantBlock::ToolCall(ToolCall::new(
            format!("call_{round}"),
            "lookup",
            args.as_object().unwrap().clone(),
        )));
        m.stop_reason = StopReason::ToolUse;
        steps.push(m);
    }
    let mut answer = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
    answer.content.push(AssistantBlock::text(
        "All seven keys hold 42, which answers the question about life, the universe and everything.",
    ));
    steps.push(answer);
    steps
}

/// The turn loop over `provider` with `tools`.
pub(crate) fn turn_loop(provider: Arc<ScriptedProvider>, tools: Arc<ToolRegistry>) -> TurnLoop {
    TurnLoop::new(
        provider,
        Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""),
    )
    .with_tools(tools)
}

/// The turn's request.
pub(crate) fn request() -> TurnRequest {
    TurnRequest::new(vec![Message::from(UserMessage::text(
        "What do the keys hold?",
        0,
    ))])
    .with_system_prompt("You are a benchmark.")
}
