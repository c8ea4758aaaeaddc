//! ThreadRunner benchmark: a thread with 8 bots (2 `always`, 3 `mention`,
//! 3 `ambient` with topics) and 1000 human messages replayed through the
//! runner over the memory store, with zero-latency scripted providers.
//!
//! - `paced`: each message waits for the bots to finish before the next is
//!   appended, so every wake is its own turn;
//! - `burst`: all 1000 messages are appended at once; wakes that arrive
//!   while a bot runs coalesce into its next turn.
//!
//! Before measuring, it prints how many turns (wakes answered) and entries
//! one replay makes, to turn the times into time per wake and per entry.
//!
//! ```text
//! cargo bench --bench thread_runner
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use roundtable_chat_runner::{ThreadRunner, TurnLoop};
use roundtable_dispatch::{BotProfile, Participant, Policy, Roster, Topic, Trigger};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, Model, OPENAI_COMPLETIONS, Provider,
    ScriptStep, StreamOptions, script_events,
};
use roundtable_thread_stream::{EntryBody, Expect, MemoryStore, NewEntry, ThreadId, ThreadStore};

const MESSAGES: usize = 1000;
const BOTS: usize = 8;

fn roster() -> Roster {
    let mut people = vec![
        Participant::human("alice", "Alice"),
        Participant::human("bob", "Bob"),
    ];
    for b in 0..BOTS {
        let (trigger, topics) = match b {
            0 | 1 => (Trigger::Always, vec![]),
            2..=4 => (Trigger::Mention, vec![]),
            _ => (
                Trigger::Ambient,
                vec![Topic::keyword(["rust", "deploy", "budget"][b - 5])],
            ),
        };
        people.push(Participant::bot(
            format!("bot-{b}"),
            format!("Bot {b}"),
            BotProfile::new(trigger, "You help.").with_topics(topics),
        ));
    }
    Roster::new(people).unwrap()
}

/// The i-th human message: mentions and topics in a fixed rotation.
fn message(i: usize) -> String {
    match i % 5 {
        0 => format!("@bot-{} can you check item {i}?", 2 + i % 3),
        1 => format!("is rust good for item {i}?"),
        2 => format!("the deploy of {i} and the budget"),
        3 => format!("just chatting, line {i}"),
        _ => format!(
            "@bot-{} and @bot-{} look at {i}",
            2 + i % 3,
            2 + (i + 1) % 3
        ),
    }
}

/// A zero-latency scripted provider: every call streams the same reply
/// (in 8-character deltas) at once. Unlike `ScriptedProvider` it keeps no
/// copy of the requests, which would dominate a long replay.
struct Instant0;

impl Provider for Instant0 {
    fn stream(&self, _model: &Model, _context: &Context, _options: &StreamOptions) -> EventStream {
        Box::pin(futures::stream::iter(script_events(
            ScriptStep::Reply(reply()),
            8,
        )))
    }
}

fn reply() -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "bench", "m", 0);
    m.content.push(AssistantBlock::text(
        "Sure, I had a look and everything is in order.",
    ));
    m
}

fn runner(store: Arc<dyn ThreadStore>) -> ThreadRunner {
    let model = Model::new(OPENAI_COMPLETIONS, "bench", "m", "");
    let mut builder = ThreadRunner::builder(store, roster())
        .policy(Policy {
            max_depth: 1,
            ..Policy::default()
        })
        .chunk_interval(Duration::ZERO);
    for b in 0..BOTS {
        builder = builder.bot(
            format!("bot-{b}"),
            TurnLoop::new(Arc::new(Instant0), model.clone()),
        );
    }
    builder.build()
}

/// One replay; returns its time, the turns run and the entries the runner
/// appended.
async fn replay(paced: bool) -> (Duration, usize, usize) {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let runner = runner(store.clone());
    let thread = ThreadId::new("bench").unwrap();
    runner.follow(&thread).await.unwrap();
    let start = Instant::now();
    for i in 0..MESSAGES {
        let who = if i % 2 == 0 { "alice" } else { "bob" };
        store
            .append(
                &thread,
                Expect::Any,
                vec![NewEntry::new(who, EntryBody::chat(message(i)))],
            )
            .await
            .unwrap();
        if paced {
            runner.idle().await.unwrap();
        }
    }
    runner.idle().await.unwrap();
    let elapsed = start.elapsed();
    let entries = store.read_all(&thread).await.unwrap();
    let turns = entries
        .iter()
        .filter(|e| matches!(e.body, EntryBody::TurnStarted(_)))
        .count();
    runner.shutdown().await;
    (elapsed, turns, entries.len() - MESSAGES)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("thread_runner");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for (name, paced) in [("paced", true), ("burst", false)] {
        let (time, turns, appended) = rt.block_on(replay(paced));
        let us = time.as_secs_f64() * 1e6;
        eprintln!(
            "thread_runner/{name}: {MESSAGES} messages, {turns} turns, {appended} entries appended \
             in {time:?}: {:.1} µs per human message, {:.1} µs per turn, {:.1} µs per appended entry",
            us / MESSAGES as f64,
            us / turns as f64,
            us / appended as f64,
        );
        group.bench_function(format!("{name}_1000_messages_8_bots"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += rt.block_on(replay(paced)).0;
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
