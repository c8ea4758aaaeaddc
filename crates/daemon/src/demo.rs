//! `roundtable serve --demo`: rooms with three scripted bots that need no
//! model or key, so a newcomer sees a room at work at once. Archivist
//! wakes when named and looks documents up with a read-only `lookup` tool;
//! Chatty answers everything and asks Archivist to double-check, so the two
//! would talk forever but for the loop guard; Rusty joins conversations
//! about Rust or cargo.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use roundtable_chat_runner::TurnLoop;
use roundtable_dispatch::{BotProfile, Participant, Policy, Topic, Trigger};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, JsonObject, Message, Model,
    OPENAI_COMPLETIONS, Provider, ScriptStep, StopReason, StreamOptions, ToolCall, UserBlock,
    UserContent, now_millis, script_events,
};
use roundtable_tools::{
    Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolRegistry, ToolResult,
};

/// The demo's dispatch policy: the loop guard stops the bots after four
/// bot messages in a row, soon enough to watch.
pub(crate) fn policy() -> Policy {
    Policy {
        loop_events: 4,
        ..Policy::default()
    }
}

/// The demo's bots.
pub(crate) fn bots() -> Vec<(Participant, TurnLoop)> {
    let model = Model::new(OPENAI_COMPLETIONS, "demo", "persona", "");
    let turns = |name: &str| TurnLoop::new(Arc::new(Persona(name.to_string())), model.clone());
    let mut lookup = ToolRegistry::new();
    // One tool in an empty registry: no name can clash.
    let _ = lookup.register(Lookup);
    let bot = |id: &str, name: &str, profile: BotProfile, about: &str| {
        Participant::bot(id, name, profile).with_about(about)
    };
    vec![
        (
            bot(
                "archivist",
                "Archivist",
                BotProfile::new(
                    Trigger::Mention,
                    "You are Archivist. You find documents with the lookup tool.",
                ),
                "finds documents in the archive",
            ),
            turns("Archivist").with_tools(Arc::new(lookup)),
        ),
        (
            bot(
                "chatty",
                "Chatty",
                BotProfile::new(Trigger::Always, "You are Chatty, a friendly host."),
                "keeps the conversation going",
            ),
            turns("Chatty"),
        ),
        (
            bot(
                "rusty",
                "Rusty",
                BotProfile::new(Trigger::Ambient, "You are Rusty, a Rust expert.")
                    .with_topics([Topic::keyword("rust"), Topic::keyword("cargo")]),
                "answers Rust questions",
            ),
            turns("Rusty"),
        ),
    ]
}

/// A scripted bot: answers from what it was sent, streamed in small paced
/// deltas so that a client sees them arrive.
struct Persona(String);

impl Persona {
    fn reply(&self, context: &Context) -> AssistantMessage {
        let mut message =
            AssistantMessage::empty(OPENAI_COMPLETIONS, "demo", "persona", now_millis());
        // Everything said since the bot's last turn, `[Speaker]: text` a line.
        let heard = match context.messages.last() {
            Some(Message::ToolResult(r)) => {
                let found = texts(&r.content);
                message
                    .content
                    .push(AssistantBlock::text(format!("Found it: {found}.")));
                return message;
            }
            Some(Message::User(user)) => match &user.content {
                UserContent::Text(t) => t.to_string(),
                UserContent::Blocks(blocks) => texts(blocks),
            },
            _ => String::new(),
        };
        let last = heard.lines().last().unwrap_or("");
        let speaker = last
            .strip_prefix('[')
            .and_then(|rest| rest.split_once("]: "))
            .map_or("someone", |(speaker, _)| speaker);
        let text = match self.0.as_str() {
            "Archivist" => {
                // Others may have spoken after the request, before this turn.
                let asked = heard.lines().rev().find_map(|line| line.split_once("look up "));
                if let Some((_, key)) = asked {
                    let key = key.trim().trim_end_matches(['.', '?', '!']);
                    let mut args = serde_json::Map::new();
                    args.insert("key".into(), key.into());
                    let id = format!("call-{}", now_millis());
                    message
                        .content
                        .push(AssistantBlock::ToolCall(ToolCall::new(id, "lookup", args)));
                    message.stop_reason = StopReason::ToolUse;
                    return message;
                }
                format!("{speaker}, I double-checked: the archive agrees.")
            }
            "Chatty" => format!("Thanks, {speaker}! @archivist, can you double-check that?"),
            _ => "Rust tip: `cargo check` skips code generation, so it is much faster than `cargo build`.".to_string(),
        };
        message.content.push(AssistantBlock::text(text));
        message
    }
}

/// The text blocks of `blocks`, one a line.
fn texts(blocks: &[UserBlock]) -> String {
    let lines: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            UserBlock::Text(t) => Some(&*t.text),
            _ => None,
        })
        .collect();
    lines.join("\n")
}

impl Provider for Persona {
    fn stream(&self, _model: &Model, context: &Context, _options: &StreamOptions) -> EventStream {
        let events = script_events(ScriptStep::Reply(self.reply(context)), 6);
        futures::stream::iter(events)
            .then(|event| async move {
                tokio::time::sleep(Duration::from_millis(12)).await;
                event
            })
            .boxed()
    }
}

/// The archive's read-only `lookup` tool.
struct Lookup;

#[async_trait]
impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup",
            "Finds where a document is kept in the archive. Read-only.",
            serde_json::json!({
                "type": "object",
                "properties": {"key": {"type": "string", "description": "what to look for"}},
                "required": ["key"]
            }),
            ToolKind::Read,
        )
    }

    async fn invoke(&self, _ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        let key = args
            .get("key")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_lowercase();
        let place = match key.as_str() {
            "invoices" => "/finance/2024/q3/invoices.pdf",
            "roadmap" => "/product/roadmap-2025.md",
            _ => "nowhere I know of",
        };
        Ok(ToolResult::text(format!("{key}: {place}")))
    }
}
