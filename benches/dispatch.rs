//! Dispatch benchmarks: full projection of threads of 1k, 10k and 100k
//! entries with 2, 8 and 32 authors; full projection of the busy chat
//! sample (`samples::chat_workload`, 10k and 100k entries; its
//! allocations are counted by `benches/allocations.rs`); incremental push
//! of one entry onto a 10k-entry thread; dispatcher decisions with a
//! 20-bot roster.
//!
//! The chat sample is also written to `target/bench-workloads/` (the
//! entries as JSONL after a first line naming the roster, and the projected
//! messages as JSON) for `benches/js/build_messages.mjs`, the JavaScript
//! port of the projection rules, to read and check itself against.
//!
//! ```text
//! cargo bench --bench dispatch
//! node benches/js/build_messages.mjs target/bench-workloads/chat-10k
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use roundtable_dispatch::{
    BotProfile, Participant, Policy, Projection, Roster, Topic, Trigger, build_messages, dispatch,
};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, StopReason, ThinkingContent, ToolCall, ToolResultMessage,
};
use roundtable_test_support::samples::{ChatWorkload, chat_workload};
use roundtable_thread_stream::{
    AssistantEntry, Chunk, Entry, EntryBody, ThreadId, ToolResultEntry, TurnEnded, TurnStarted,
};

#[path = "support/chat_roster.rs"]
mod chat_roster;

use chat_roster::{SELF, workload_roster};

/// A small deterministic generator (no randomness in benchmarks' inputs).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// `authors` participants, half humans and half bots (at least one of each);
/// bots use every trigger mode.
fn roster(authors: usize) -> Roster {
    let bots = (authors / 2).max(1);
    let humans = (authors - bots).max(1);
    let mut people = Vec::new();
    for h in 0..humans {
        people.push(Participant::human(
            format!("human-{h}"),
            format!("Human {h}"),
        ));
    }
    for b in 0..bots {
        let trigger = [Trigger::Mention, Trigger::Always, Trigger::Ambient][b % 3];
        people.push(Participant::bot(
            format!("bot-{b}"),
            format!("Bot {b}"),
            BotProfile::new(trigger, "You help.").with_topics([Topic::keyword("rust")]),
        ));
    }
    Roster::new(people).unwrap()
}

/// Writes a realistic thread: human chats, and bot turns made of
/// `turn.started`, an assistant message with thinking and a tool call, its
/// result, streamed chunks, the final answer and `turn.ended`.
struct Writer {
    entries: Vec<Entry>,
    thread: ThreadId,
    rng: Lcg,
    humans: usize,
    bots: usize,
    calls: u64,
}

impl Writer {
    fn new(authors: usize) -> Self {
        let bots = (authors / 2).max(1);
        Self {
            entries: Vec::new(),
            thread: ThreadId::new("bench").unwrap(),
            rng: Lcg(42),
            humans: (authors - bots).max(1),
            bots,
            calls: 0,
        }
    }

    fn push(&mut self, author: String, body: EntryBody) {
        let seq = self.entries.len() as u64 + 1;
        self.entries.push(Entry {
            seq,
            id: format!("entry-{seq}").into(),
            thread: self.thread.clone(),
            author: author.into(),
            at: 1_731_000_000_000 + seq as i64 * 1_000,
            body,
        });
    }

    fn assistant(turn: &str, content: Vec<AssistantBlock>, stop: StopReason) -> EntryBody {
        let mut message = AssistantMessage::empty("openai-completions", "openai", "gpt-4o", 0);
        message.content = content;
        message.stop_reason = stop;
        EntryBody::Assistant(AssistantEntry::new(Some(turn.into()), message))
    }

    /// One human chat or one bot turn (seven entries).
    fn step(&mut self) {
        if self.rng.next(10) < 4 {
            let who = self.rng.next(self.humans);
            let text = format!(
                "Message {} from human {who}: could someone look at the failing build on main? @bot-{}",
                self.entries.len(),
                self.rng.next(self.bots)
            );
            self.push(format!("human-{who}"), EntryBody::chat(text));
            return;
        }
        let bot = format!("bot-{}", self.rng.next(self.bots));
        let turn = format!("turn-{}", self.entries.len());
        self.calls += 1;
        let call = ToolCall::new(
            format!("call-{}", self.calls),
            "read_file",
            serde_json::json!({"path": "src/lib.rs"})
                .as_object()
                .unwrap()
                .clone(),
        );
        self.push(
            bot.clone(),
            EntryBody::TurnStarted(TurnStarted {
                turn: turn.as_str().into(),
                trigger: Some(self.entries.len() as u64),
                depth: 1,
                reason: Some("mention".into()),
            }),
        );
        self.push(
            bot.clone(),
            Self::assistant(
                &turn,
                vec![
                    AssistantBlock::Thinking(ThinkingContent::new(
                        "The user wants the build fixed; read the file first.",
                    )),
                    AssistantBlock::ToolCall(call.clone()),
                ],
                StopReason::ToolUse,
            ),
        );
        self.push(
            bot.clone(),
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some(turn.as_str().into()),
                message: ToolResultMessage::text(
                    &call,
                    "fn main() { println!(\"hello\"); } // 1,200 more lines",
                    false,
                    0,
                )
                .into(),
            }),
        );
        for delta in ["The build fails because ", "a feature flag is missing."] {
            self.push(
                bot.clone(),
                EntryBody::Chunk(Chunk::text(turn.as_str(), delta)),
            );
        }
        self.push(
            bot.clone(),
            Self::assistant(
                &turn,
                vec![AssistantBlock::text(
                    "The build fails because a feature flag is missing. Enable `http` in \
                     Cargo.toml and it compiles again; I checked src/lib.rs to be sure.",
                )],
                StopReason::Stop,
            ),
        );
        self.push(
            bot,
            EntryBody::TurnEnded(TurnEnded {
                turn: turn.as_str().into(),
                reason: "stop".into(),
            }),
        );
    }
}

fn thread(len: usize, authors: usize) -> Vec<Entry> {
    let mut w = Writer::new(authors);
    while w.entries.len() < len {
        w.step();
    }
    w.entries.truncate(len);
    w.entries
}

fn full_projection(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_messages");
    group.sample_size(20);
    for len in [1_000, 10_000, 100_000] {
        for authors in [2, 8, 32] {
            let entries = thread(len, authors);
            let roster = roster(authors);
            group.throughput(Throughput::Elements(len as u64));
            group.bench_with_input(
                BenchmarkId::new(format!("{authors}-authors"), len),
                &entries,
                |b, entries| b.iter(|| build_messages(SELF, black_box(entries), &roster)),
            );
        }
    }
    group.finish();
}

/// Writes `<stem>.jsonl` (a first line `{"self":..,"names":{id: name}}`,
/// then the entries as stored) and `<stem>.messages.json` (what
/// `build_messages` gives) for the JavaScript port.
fn export_workload(stem: &Path, w: &ChatWorkload, messages: &[roundtable_providers::Message]) {
    use std::io::Write;
    std::fs::create_dir_all(stem.parent().unwrap()).unwrap();
    let names: serde_json::Map<String, serde_json::Value> = w
        .humans
        .iter()
        .chain(&w.bots)
        .map(|(id, name)| (id.clone(), name.clone().into()))
        .collect();
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(stem.with_extension("jsonl")).unwrap());
    serde_json::to_writer(&mut out, &serde_json::json!({"self": SELF, "names": names})).unwrap();
    out.write_all(b"\n").unwrap();
    for e in &w.entries {
        serde_json::to_writer(&mut out, e).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    std::fs::write(
        stem.with_extension("messages.json"),
        serde_json::to_vec(messages).unwrap(),
    )
    .unwrap();
}

fn chat_sample(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_messages_chat");
    group.sample_size(50);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-workloads");
    for (len, label) in [(10_000, "10k"), (100_000, "100k")] {
        let w = chat_workload(len, 7);
        let roster = workload_roster(&w);
        let messages = build_messages(SELF, &w.entries, &roster);
        println!("build_messages_chat/{label}: {} messages", messages.len());
        export_workload(&dir.join(format!("chat-{label}")), &w, &messages);
        drop(messages);
        group.throughput(Throughput::Elements(len as u64));
        group.bench_with_input(
            BenchmarkId::new("8-authors", len),
            &w.entries,
            |b, entries| b.iter(|| build_messages(SELF, black_box(entries), &roster)),
        );
    }
    group.finish();
}

fn incremental_push(c: &mut Criterion) {
    const BASE: usize = 10_000;
    const CHUNK: usize = 10_000;
    let roster = roster(8);
    let all = thread(BASE + CHUNK, 8);
    let (base, next) = all.split_at(BASE);
    let mut projection = Projection::new(SELF, &roster);
    projection.extend(base);

    let mut group = c.benchmark_group("projection_push");
    group.throughput(Throughput::Elements(1));
    group.bench_function("onto-10k", |b| {
        // Each timed run pushes the next entries of the thread onto a fresh
        // copy of the 10k-entry projection (the copy is not timed).
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(CHUNK);
                let mut p = projection.clone();
                let start = Instant::now();
                for e in &next[..n] {
                    black_box(p.push(e));
                }
                total += start.elapsed();
                drop(p);
                left -= n;
            }
            total
        })
    });
    group.finish();
}

fn dispatcher(c: &mut Criterion) {
    // 20 bots, 5 humans; 200 recent entries.
    let roster = {
        let mut people: Vec<Participant> = (0..5)
            .map(|h| Participant::human(format!("human-{h}"), format!("Human {h}")))
            .collect();
        for b in 0..20 {
            let trigger = [Trigger::Mention, Trigger::Always, Trigger::Ambient][b % 3];
            people.push(Participant::bot(
                format!("bot-{b}"),
                format!("Bot {b}"),
                BotProfile::new(trigger, "You help."),
            ));
        }
        Roster::new(people).unwrap()
    };
    let mut w = Writer::new(2);
    w.bots = 20;
    w.humans = 5;
    while w.entries.len() < 200 {
        w.step();
    }
    w.push(
        "human-1".into(),
        EntryBody::chat("@bot-3 and @bot-7: the release is blocked, can you look at CI?"),
    );
    let (event, recent) = w.entries.split_last().unwrap();
    let policy = Policy::default();

    let mut group = c.benchmark_group("dispatch");
    group.throughput(Throughput::Elements(1));
    group.bench_function("20-bots-200-recent", |b| {
        b.iter(|| dispatch(black_box(event), recent, &roster, &policy, event.at))
    });
    group.finish();
}

criterion_group!(
    benches,
    full_projection,
    chat_sample,
    incremental_push,
    dispatcher
);
criterion_main!(benches);
