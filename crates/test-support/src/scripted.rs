//! Scripted model replies and the model they come from: what a test gives a
//! `ScriptedProvider`.

use roundtable_providers::{
    AssistantBlock, AssistantMessage, Model, OPENAI_COMPLETIONS, StopReason, ToolCall, Usage,
};

/// The model every scripted reply claims to come from.
pub fn model() -> Model {
    Model::new(OPENAI_COMPLETIONS, "scripted", "m", "")
}

/// Usage of `input` and `output` tokens costing `cost` in all.
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

/// A message calling `calls` = [(id, tool, arguments)].
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

/// A message calling one tool with `arguments`.
pub fn call(id: &str, name: &str, arguments: serde_json::Value) -> AssistantMessage {
    calls(&[(id, name, arguments)])
}
