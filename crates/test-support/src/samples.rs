//! Bench samples: a busy multi-party thread, built deterministically from a
//! seed, as the projection benches (and their JavaScript counterpart) read it.
//!
//! The thread has 8 authors, 4 humans and 4 bots. Humans chat (about 260
//! bytes a message, often naming a bot); bots answer in turns written as
//! `ThreadRunner` writes them: `turn.started`, for a third of the turns an
//! assistant message with thinking and a tool call and the call's result, the
//! coalesced `chat.chunk`s of the final text, the final assistant message and
//! `turn.ended`.

// A sample that cannot be built must fail the bench that asked.
#![allow(clippy::panic)]

use std::sync::Arc;

use roundtable_providers::{
    AssistantBlock, AssistantMessage, StopReason, ThinkingContent, ToolCall, ToolResultMessage,
};
use roundtable_thread_stream::{
    AssistantEntry, Chunk, Entry, EntryBody, ThreadId, ToolResultEntry, TurnEnded, TurnStarted,
};

/// A sample thread and who wrote it.
#[derive(Debug, Clone)]
pub struct ChatWorkload {
    /// The entries, seq 1, 2, 3...
    pub entries: Vec<Entry>,
    /// `(id, display name)` of each human.
    pub humans: Vec<(String, String)>,
    /// `(id, display name)` of each bot.
    pub bots: Vec<(String, String)>,
}

/// The words human messages are made of.
const WORDS: &[&str] = &[
    "the",
    "build",
    "on",
    "main",
    "fails",
    "since",
    "yesterday",
    "and",
    "I",
    "think",
    "it",
    "is",
    "the",
    "feature",
    "flag",
    "for",
    "http",
    "could",
    "someone",
    "look",
    "at",
    "release",
    "notes",
    "before",
    "Friday",
    "we",
    "still",
    "need",
    "a",
    "date",
    "from",
    "the",
    "team",
    "about",
    "launch",
    "review",
    "storage",
    "migration",
    "tests",
    "are",
    "flaky",
    "again",
    "please",
    "check",
    "logs",
    "of",
    "deploy",
    "staging",
    "server",
    "with",
    "customer",
    "report",
    "Q3",
];

/// A small deterministic generator: the same seed gives the same thread.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n.max(1) as u64) as usize
    }
}

struct Writer {
    entries: Vec<Entry>,
    thread: ThreadId,
    rng: Lcg,
    calls: u64,
}

impl Writer {
    fn push(&mut self, author: &Arc<str>, body: EntryBody) {
        let seq = self.entries.len() as u64 + 1;
        self.entries.push(Entry {
            seq,
            id: format!("entry-{seq:06}").into(),
            thread: self.thread.clone(),
            author: author.clone(),
            at: 1_731_000_000_000 + seq as i64 * 1_000,
            body,
        });
    }

    /// About `len` bytes of words, then an optional mention.
    fn words(&mut self, len: usize) -> String {
        let mut text = String::with_capacity(len + 16);
        while text.len() < len {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(WORDS[self.rng.below(WORDS.len())]);
        }
        text
    }

    fn assistant(
        turn: &Arc<str>,
        content: Vec<AssistantBlock>,
        stop: StopReason,
        at: i64,
    ) -> EntryBody {
        let mut message = AssistantMessage::empty("openai-completions", "openai", "gpt-4o", at);
        message.content = content;
        message.stop_reason = stop;
        message.usage.input = 1_812;
        message.usage.output = 96;
        message.usage.total_tokens = 1_908;
        EntryBody::Assistant(AssistantEntry::new(Some(turn.clone()), message))
    }

    /// One bot turn as the runner writes it.
    fn turn(&mut self, bot: &Arc<str>, trigger: u64) {
        let turn: Arc<str> = format!("turn-{}", self.entries.len() + 1).into();
        let at = 1_731_000_000_000 + self.entries.len() as i64 * 1_000;
        self.push(
            bot,
            EntryBody::TurnStarted(TurnStarted {
                turn: turn.clone(),
                trigger: Some(trigger),
                depth: 0,
                reason: Some("mention".into()),
            }),
        );
        if self.rng.below(3) == 0 {
            self.calls += 1;
            let mut arguments = serde_json::Map::new();
            arguments.insert(
                "path".into(),
                format!("src/module_{}.rs", self.calls % 40).into(),
            );
            let call = ToolCall::new(format!("call_{:08}", self.calls), "read_file", arguments);
            self.push(
                bot,
                Self::assistant(
                    &turn,
                    vec![
                        AssistantBlock::Thinking(ThinkingContent::new(
                            "The question is about the build; read the module first.",
                        )),
                        AssistantBlock::ToolCall(call.clone()),
                    ],
                    StopReason::ToolUse,
                    at,
                ),
            );
            let output = self.words(600);
            self.push(
                bot,
                EntryBody::ToolResult(ToolResultEntry {
                    turn: Some(turn.clone()),
                    message: ToolResultMessage::text(&call, output, false, at).into(),
                }),
            );
        }
        let answer = self.words(320);
        // The runner coalesces text deltas into a few chunks.
        let cut = [0, answer.len() / 3, 2 * answer.len() / 3, answer.len()];
        for pair in cut.windows(2) {
            let (from, to) = (
                floor_char_boundary(&answer, pair[0]),
                floor_char_boundary(&answer, pair[1]),
            );
            self.push(
                bot,
                EntryBody::Chunk(Chunk::text(turn.clone(), &answer[from..to])),
            );
        }
        self.push(
            bot,
            Self::assistant(
                &turn,
                vec![AssistantBlock::text(answer)],
                StopReason::Stop,
                at,
            ),
        );
        self.push(
            bot,
            EntryBody::TurnEnded(TurnEnded {
                turn,
                reason: "stop".into(),
            }),
        );
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A thread of `len` entries by 4 humans (`human-0`..`human-3`) and 4 bots
/// (`bot-0`..`bot-3`), the same for the same `seed`. Each human message
/// wakes one or two bots, which answer in turns; humans sometimes reply to
/// each other first.
pub fn chat_workload(len: usize, seed: u64) -> ChatWorkload {
    let humans: Vec<(String, String)> = (0..4)
        .map(|h| {
            (
                format!("human-{h}"),
                ["Alice", "Bob", "Carol", "Dan"][h].to_string(),
            )
        })
        .collect();
    let bots: Vec<(String, String)> = (0..4)
        .map(|b| (format!("bot-{b}"), format!("Bot {b}")))
        .collect();
    let human_ids: Vec<Arc<str>> = humans.iter().map(|(id, _)| id.as_str().into()).collect();
    let bot_ids: Vec<Arc<str>> = bots.iter().map(|(id, _)| id.as_str().into()).collect();
    let mut w = Writer {
        entries: Vec::with_capacity(len + 16),
        thread: ThreadId::new("bench-chat").unwrap_or_else(|e| panic!("thread id: {e}")),
        rng: Lcg(seed),
        calls: 0,
    };
    while w.entries.len() < len {
        let who = w.rng.below(human_ids.len());
        let bot = w.rng.below(bot_ids.len());
        let mut text = w.words(240);
        text.push_str(&format!(" @bot-{bot}?"));
        w.push(&human_ids[who], EntryBody::chat(text));
        if w.rng.below(3) == 0 {
            // Another human chimes in before the bots answer.
            let other = w.rng.below(human_ids.len());
            let reply = w.words(250);
            w.push(&human_ids[other], EntryBody::chat(reply));
        }
        let trigger = w.entries.len() as u64;
        w.turn(&bot_ids[bot], trigger);
        if w.rng.below(4) == 0 {
            let second = (bot + 1 + w.rng.below(bot_ids.len() - 1)) % bot_ids.len();
            w.turn(&bot_ids[second], trigger);
        }
    }
    w.entries.truncate(len);
    ChatWorkload {
        entries: w.entries,
        humans,
        bots,
    }
}
