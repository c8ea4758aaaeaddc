//! Helpers shared by the integration tests: a thread builder and a compact
//! rendering of messages.

#![allow(dead_code)]

use std::sync::Arc;

use roundtable_dispatch::{BotProfile, Participant, Roster, Topic, Trigger};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, ImageContent, Message, StopReason, TextContent,
    ThinkingContent, ToolCall, ToolResultMessage, UserBlock, UserContent,
};
use roundtable_thread_stream::{
    AssistantEntry, Chat, Chunk, Compaction, Entry, EntryBody, Signal, ThreadId, ToolResultEntry,
    TurnEnded, TurnStarted,
};

/// Builds a thread entry by entry: seq counts from 1, `at` is seq seconds
/// unless set.
pub struct Thread {
    pub entries: Vec<Entry>,
    pub thread: ThreadId,
    pub clock: i64,
}

impl Default for Thread {
    fn default() -> Self {
        Self::new()
    }
}

impl Thread {
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            thread: ThreadId::new("t-1").unwrap(),
            clock: 0,
        }
    }

    pub fn next_seq(&self) -> u64 {
        self.entries.len() as u64 + 1
    }

    /// Appends an entry and returns it.
    pub fn push(&mut self, author: &str, body: EntryBody) -> Entry {
        self.clock += 1_000;
        self.push_at(author, body, self.clock)
    }

    pub fn push_at(&mut self, author: &str, body: EntryBody, at: i64) -> Entry {
        let seq = self.next_seq();
        let entry = Entry {
            seq,
            id: format!("e{seq}").into(),
            thread: self.thread.clone(),
            author: author.into(),
            at,
            body,
        };
        self.entries.push(entry.clone());
        entry
    }

    pub fn chat(&mut self, author: &str, text: &str) -> Entry {
        self.push(author, EntryBody::chat(text))
    }

    pub fn say(&mut self, author: &str, text: &str, turn: &str) -> Entry {
        self.push(
            author,
            assistant_body(turn, vec![text_block(text)], StopReason::Stop, 0),
        )
    }

    pub fn calls(&mut self, author: &str, turn: &str, ids: &[&str]) -> Entry {
        let blocks = ids.iter().map(|id| call_block(id)).collect();
        self.push(author, assistant_body(turn, blocks, StopReason::ToolUse, 0))
    }

    pub fn result(&mut self, author: &str, id: &str, text: &str) -> Entry {
        let ts = self.clock;
        self.push(author, result_body(id, text, ts))
    }

    pub fn started(&mut self, author: &str, turn: &str, depth: u32) -> Entry {
        self.push(
            author,
            EntryBody::TurnStarted(TurnStarted {
                turn: turn.into(),
                trigger: None,
                depth,
                reason: None,
            }),
        )
    }
}

pub fn text_block(text: &str) -> AssistantBlock {
    AssistantBlock::text(text)
}

pub fn thinking_block(text: &str) -> AssistantBlock {
    AssistantBlock::Thinking(ThinkingContent::new(text))
}

pub fn call_block(id: &str) -> AssistantBlock {
    AssistantBlock::ToolCall(ToolCall::new(id, "lookup", serde_json::Map::new()))
}

pub fn assistant_body(
    turn: &str,
    content: Vec<AssistantBlock>,
    stop: StopReason,
    timestamp: i64,
) -> EntryBody {
    let mut message = AssistantMessage::empty("openai-completions", "openai", "gpt-4o", timestamp);
    message.content = content;
    message.stop_reason = stop;
    EntryBody::Assistant(AssistantEntry {
        turn: Some(turn.into()),
        message: message.into(),
    })
}

pub fn result_body(id: &str, text: &str, timestamp: i64) -> EntryBody {
    EntryBody::ToolResult(ToolResultEntry {
        turn: None,
        message: ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "lookup".into(),
            content: vec![UserBlock::text(text)],
            details: None,
            is_error: false,
            timestamp,
        }
        .into(),
    })
}

pub fn chat_with(text: &str, parts: Vec<UserBlock>, mentions: &[&str]) -> EntryBody {
    EntryBody::Chat(Chat {
        text: text.into(),
        parts,
        mentions: mentions.iter().map(|m| Arc::from(*m)).collect(),
        files: Vec::new(),
    })
}

pub fn image(mime: &str) -> UserBlock {
    UserBlock::Image(ImageContent {
        data: "aGk=".into(),
        mime_type: mime.into(),
    })
}

pub fn chunk(turn: &str) -> EntryBody {
    EntryBody::Chunk(Chunk {
        turn: turn.into(),
        delta: "par".into(),
    })
}

pub fn signal() -> EntryBody {
    EntryBody::Signal(Signal {
        name: "typing".into(),
        data: serde_json::json!({"on": true}),
    })
}

pub fn compaction(summary: &str, upto: u64) -> EntryBody {
    EntryBody::Compaction(Compaction {
        summary: summary.into(),
        upto,
    })
}

pub fn ended(turn: &str) -> EntryBody {
    EntryBody::TurnEnded(TurnEnded {
        turn: turn.into(),
        reason: "stop".into(),
    })
}

/// The standard cast: two humans, and bots of every trigger.
///
/// | id | name | trigger |
/// | --- | --- | --- |
/// | alice, bob | Alice, Bob | human |
/// | arch | Archive Bot | mention |
/// | coder | Coder | mention |
/// | watch | Watcher | always |
/// | echo | Echo | always |
/// | herald | Herald | always |
/// | rusty | Rusty | ambient, topic "rust" |
/// | poet | Poet | ambient, no topic |
pub fn cast(ids: &[&str]) -> Roster {
    let all = |id: &str| -> Participant {
        let bot = |name: &str, trigger| {
            Participant::bot(
                id,
                name,
                BotProfile::new(trigger, format!("You are {name}.")),
            )
        };
        match id {
            "alice" => Participant::human("alice", "Alice"),
            "bob" => Participant::human("bob", "Bob"),
            "arch" => bot("Archive Bot", Trigger::Mention),
            "coder" => bot("Coder", Trigger::Mention),
            "watch" => bot("Watcher", Trigger::Always),
            "echo" => bot("Echo", Trigger::Always),
            "herald" => bot("Herald", Trigger::Always),
            "rusty" => Participant::bot(
                "rusty",
                "Rusty",
                BotProfile::new(Trigger::Ambient, "You answer Rust questions.")
                    .with_topics([Topic::keyword("rust")]),
            ),
            "poet" => bot("Poet", Trigger::Ambient),
            other => panic!("no cast member {other}"),
        }
    };
    Roster::new(ids.iter().map(|id| all(id))).unwrap()
}

/// One line per message: `user: <block> | <block>`, `assistant: <block>, ...`,
/// `result <id>: <text>` (with `!` after `result` for an error).
pub fn render(messages: &[Message]) -> Vec<String> {
    messages.iter().map(render_one).collect()
}

fn render_one(m: &Message) -> String {
    match m {
        Message::User(u) => {
            let blocks = match &u.content {
                UserContent::Text(t) => vec![t.to_string()],
                UserContent::Blocks(b) => b.iter().map(user_block).collect(),
            };
            format!("user: {}", blocks.join(" | "))
        }
        Message::Assistant(a) => {
            let blocks: Vec<String> = a
                .content
                .iter()
                .map(|b| match b {
                    AssistantBlock::Text(TextContent { text, .. }) => text.to_string(),
                    AssistantBlock::Thinking(t) => format!("thinking({})", t.thinking),
                    AssistantBlock::ToolCall(c) => format!("call({})", c.id),
                })
                .collect();
            format!("assistant: {}", blocks.join(", "))
        }
        Message::ToolResult(r) => {
            let text: Vec<String> = r.content.iter().map(user_block).collect();
            format!(
                "result{} {}: {}",
                if r.is_error { "!" } else { "" },
                r.tool_call_id,
                text.join(" | ")
            )
        }
    }
}

fn user_block(b: &UserBlock) -> String {
    match b {
        UserBlock::Text(t) => t.text.to_string(),
        UserBlock::Image(i) => format!("image({})", i.mime_type),
    }
}
