//! Thread fixtures: a thread built entry by entry in memory, entry bodies,
//! the sample entries of the store benches, appending a line to a store, and
//! the check of every turn's lifecycle.

// A fixture that cannot be built, or a thread that breaks the lifecycle,
// must fail the test that asked.
#![allow(clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;

use roundtable_providers::{
    AssistantBlock, AssistantMessage, ImageContent, StopReason, ThinkingContent, ToolCall,
    ToolResultMessage, UserBlock,
};
use roundtable_thread_stream::{
    AssistantEntry, Chat, Chunk, ChunkKind, Compaction, Entry, EntryBody, Expect, NewEntry, Signal,
    ThreadId, ThreadStore, ToolResultEntry, TurnEnded, TurnStarted,
};

/// A thread id, checked.
///
/// # Panics
///
/// When `id` is not a valid thread id.
pub fn thread(id: &str) -> ThreadId {
    ThreadId::new(id).unwrap_or_else(|e| panic!("thread id {id:?}: {e}"))
}

/// Builds a thread (`t-1`) entry by entry in memory: seq counts from 1, the
/// time from 1 s by 1 s unless set.
pub struct Thread {
    /// The entries so far.
    pub entries: Vec<Entry>,
    /// The thread's id.
    pub thread: ThreadId,
    /// The time of the last entry pushed without one, in Unix milliseconds.
    pub clock: i64,
}

impl Default for Thread {
    fn default() -> Self {
        Self::new()
    }
}

impl Thread {
    /// An empty thread `t-1`.
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            thread: thread("t-1"),
            clock: 0,
        }
    }

    /// The seq the next entry gets.
    pub fn next_seq(&self) -> u64 {
        self.entries.len() as u64 + 1
    }

    /// Appends an entry one second after the last and returns it.
    pub fn push(&mut self, author: &str, body: EntryBody) -> Entry {
        self.clock += 1_000;
        self.push_at(author, body, self.clock)
    }

    /// Appends an entry at `at` and returns it.
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

    /// A chat line.
    pub fn chat(&mut self, author: &str, text: &str) -> Entry {
        self.push(author, EntryBody::chat(text))
    }

    /// A bot's final answer in `turn`.
    pub fn say(&mut self, author: &str, text: &str, turn: &str) -> Entry {
        self.push(
            author,
            assistant_body(turn, vec![text_block(text)], StopReason::Stop, 0),
        )
    }

    /// A bot's message calling `lookup` once per id in `ids`.
    pub fn calls(&mut self, author: &str, turn: &str, ids: &[&str]) -> Entry {
        let blocks = ids.iter().map(|id| call_block(id)).collect();
        self.push(author, assistant_body(turn, blocks, StopReason::ToolUse, 0))
    }

    /// The result of call `id`.
    pub fn result(&mut self, author: &str, id: &str, text: &str) -> Entry {
        let ts = self.clock;
        self.push(author, result_body(id, text, ts))
    }

    /// `turn.started` of `turn` at `depth`.
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

/// A text block.
pub fn text_block(text: &str) -> AssistantBlock {
    AssistantBlock::text(text)
}

/// A thinking block.
pub fn thinking_block(text: &str) -> AssistantBlock {
    AssistantBlock::Thinking(ThinkingContent::new(text))
}

/// A call of `lookup` with no arguments.
pub fn call_block(id: &str) -> AssistantBlock {
    AssistantBlock::ToolCall(ToolCall::new(id, "lookup", serde_json::Map::new()))
}

/// A `pi.assistant` body of `turn`.
pub fn assistant_body(
    turn: &str,
    content: Vec<AssistantBlock>,
    stop: StopReason,
    timestamp: i64,
) -> EntryBody {
    let mut message = AssistantMessage::empty("openai-completions", "openai", "gpt-4o", timestamp);
    message.content = content;
    message.stop_reason = stop;
    EntryBody::Assistant(AssistantEntry::new(Some(turn.into()), message))
}

/// A `pi.tool_result` body answering call `id` of `lookup`.
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

/// A chat body with parts and mentions.
pub fn chat_with(text: &str, parts: Vec<UserBlock>, mentions: &[&str]) -> EntryBody {
    EntryBody::Chat(Chat {
        text: text.into(),
        parts: parts.into(),
        mentions: mentions.iter().map(|m| Arc::from(*m)).collect(),
        files: Default::default(),
    })
}

/// An image block of type `mime`.
pub fn image(mime: &str) -> UserBlock {
    UserBlock::Image(ImageContent {
        data: "aGk=".into(),
        mime_type: mime.into(),
    })
}

/// A `chat.chunk` of `turn`.
pub fn chunk(turn: &str) -> EntryBody {
    EntryBody::Chunk(Chunk::text(turn, "par"))
}

/// A `signal.typing`.
pub fn signal() -> EntryBody {
    EntryBody::Signal(Signal {
        name: "typing".into(),
        data: serde_json::json!({"on": true}).into(),
    })
}

/// A compaction summarising up to `upto`.
pub fn compaction(summary: &str, upto: u64) -> EntryBody {
    EntryBody::Compaction(Compaction {
        summary: summary.into(),
        upto,
    })
}

/// `turn.ended` of `turn`.
pub fn ended(turn: &str) -> EntryBody {
    EntryBody::TurnEnded(TurnEnded {
        turn: turn.into(),
        reason: "stop".into(),
    })
}

/// Entry `i` of a realistic thread, as the store benches append and replay
/// it: mostly chat lines from three humans, every fourth an assistant
/// message with usage.
pub fn sample_entry(i: usize) -> NewEntry {
    if i % 4 == 3 {
        let mut m = AssistantMessage::empty(
            "openai-completions",
            "openai",
            "gpt-4o-mini",
            1_731_000_000_000,
        );
        m.content.push(AssistantBlock::text(
            "Here is what I found in the archive: the launch moved to the 21st after Monday's review.",
        ));
        m.usage.input = 812;
        m.usage.output = 41;
        m.usage.total_tokens = 853;
        NewEntry::new(
            "archive-bot",
            EntryBody::Assistant(AssistantEntry::new(Some("turn-1".into()), m)),
        )
    } else {
        NewEntry::new(
            ["alice", "bob", "carol"][i % 3],
            EntryBody::chat(format!(
                "message {i}: did anyone check the launch date with the release team?"
            )),
        )
    }
}

/// Appends a chat line by `who` and returns its seq.
///
/// # Panics
///
/// When the store fails.
pub async fn say(store: &dyn ThreadStore, thread: &ThreadId, who: &str, text: &str) -> u64 {
    let entries = store
        .append(
            thread,
            Expect::Any,
            vec![NewEntry::new(who, EntryBody::chat(text))],
        )
        .await
        .unwrap_or_else(|e| panic!("appending to {thread}: {e}"));
    entries[0].seq
}

/// Checks the lifecycle invariants of every turn in `entries`: each turn
/// starts once and ends once, its entries carry its id and lie between its
/// start and end, its text chunks concatenate to the text of its assistant
/// messages and its thinking chunks to their reasoning, and a bot never has
/// two turns open at once.
///
/// # Panics
///
/// When an invariant is broken, saying which.
pub fn check_turns(entries: &[Entry]) {
    let mut open: HashMap<String, String> = HashMap::new(); // bot -> turn
    // Per turn, what its chunks say and what its messages say: (text,
    // thinking) each.
    let mut chunks: HashMap<String, (String, String)> = HashMap::new();
    let mut texts: HashMap<String, (String, String)> = HashMap::new();
    let mut ended: HashMap<String, bool> = HashMap::new();
    for e in entries {
        let bot = e.author.to_string();
        match &e.body {
            EntryBody::TurnStarted(s) => {
                if let Some(other) = open.get(&bot) {
                    panic!("bot {bot} started {} with {other} still open", s.turn);
                }
                assert!(
                    ended.insert(s.turn.to_string(), false).is_none(),
                    "turn started twice"
                );
                open.insert(bot, s.turn.to_string());
            }
            EntryBody::TurnEnded(x) => {
                assert_eq!(open.remove(&bot).as_deref(), Some(&*x.turn));
                ended.insert(x.turn.to_string(), true);
            }
            EntryBody::TurnFailed(x) => {
                assert_eq!(open.remove(&bot).as_deref(), Some(&*x.turn));
                ended.insert(x.turn.to_string(), true);
            }
            EntryBody::Chunk(c) => {
                assert_eq!(open.get(&bot).map(String::as_str), Some(&*c.turn));
                let (text, thinking) = chunks.entry(c.turn.to_string()).or_default();
                match c.kind {
                    ChunkKind::Text => text.push_str(&c.delta),
                    ChunkKind::Thinking => thinking.push_str(&c.delta),
                }
            }
            EntryBody::Assistant(a) => {
                let Some(turn) = a.turn.as_deref() else {
                    panic!("seq {}: an assistant message outside a turn", e.seq);
                };
                assert_eq!(open.get(&bot).map(String::as_str), Some(turn));
                let (text, thinking) = texts.entry(turn.to_string()).or_default();
                text.push_str(&a.message().text());
                for block in &a.message().content {
                    if let AssistantBlock::Thinking(t) = block {
                        thinking.push_str(&t.thinking);
                    }
                }
            }
            EntryBody::ToolResult(r) => {
                assert_eq!(open.get(&bot).map(String::as_str), r.turn.as_deref());
            }
            _ => {}
        }
    }
    for (turn, said) in &texts {
        assert_eq!(
            chunks.get(turn).cloned().unwrap_or_default(),
            *said,
            "chunks of {turn} (text, thinking)"
        );
    }
}
