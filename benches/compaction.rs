//! The cost of compaction's check before every model request, on a
//! one-on-one conversation of 10k entries (a human asking, the agent
//! reading a file and answering), with the workspace tools and an 8 KB
//! system prompt: the step a turn asks (`Compactor::turn_step`), which
//! estimates the request and finds it under the threshold. Measured with
//! the provider's count of the previous request (the usual case: only the
//! messages after the last answer are estimated) and without (every
//! message estimated by its characters). Beside it, what a compaction
//! costs before its summarizer is called: splitting the view into units and
//! planning the cut.
//!
//! ```text
//! cargo bench --bench compaction
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use roundtable_chat_runner::compaction::{
    CompactionConfig, CompactionTarget, Compactor, StoreView,
};
use roundtable_chat_runner::lifecycle::TurnWriter;
use roundtable_chat_runner::{CompactionReason, ContextCheck, NullSink, TurnLoop};
use roundtable_dispatch::compaction::{plan_cut, split_view};
use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger, build_messages};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, Message, Model, OPENAI_COMPLETIONS,
    ScriptedProvider, StopReason, ToolCall, ToolResultMessage,
};
use roundtable_thread_stream::{
    AssistantEntry, Entry, EntryBody, Expect, MemoryStore, NewEntry, ThreadId, ThreadStore,
    ToolResultEntry,
};
use roundtable_tools::ToolRegistry;
use roundtable_tools::workspace::Workspace;
use tokio_util::sync::CancellationToken;

const AGENT: &str = "agent";
const ENTRIES: usize = 10_000;

fn model() -> Model {
    Model::new(OPENAI_COMPLETIONS, "scripted", "m", "")
}

fn assistant(blocks: Vec<AssistantBlock>, stop: StopReason, input_tokens: u64) -> EntryBody {
    let mut m = AssistantMessage::for_model(&model(), 1_731_000_000_000);
    m.content = blocks;
    m.stop_reason = stop;
    m.usage.input = input_tokens;
    m.usage.total_tokens = input_tokens;
    EntryBody::Assistant(AssistantEntry::new(Some("turn".into()), m))
}

/// A session of `ENTRIES` entries: per exchange a question, a
/// `read_file` call, its result (1 KB) and the answer. With `usage`, the
/// answers report the provider's count of their request.
fn session(usage: bool) -> Vec<NewEntry> {
    let mut entries = Vec::with_capacity(ENTRIES);
    let mut i = 0u64;
    while entries.len() < ENTRIES {
        i += 1;
        let tokens = if usage { 1_000 + i * 10 } else { 0 };
        let call = ToolCall::new(
            format!("call-{i}"),
            "read_file",
            serde_json::json!({"path": format!("src/module_{i}.rs")})
                .as_object()
                .unwrap()
                .clone(),
        );
        entries.push(NewEntry::new(
            "alice",
            EntryBody::chat(format!(
                "Question {i}: why does module {i} fail to build on main since this morning?"
            )),
        ));
        entries.push(NewEntry::new(
            AGENT,
            assistant(
                vec![AssistantBlock::ToolCall(call.clone())],
                StopReason::ToolUse,
                tokens,
            ),
        ));
        entries.push(NewEntry::new(
            AGENT,
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some("turn".into()),
                message: ToolResultMessage::text(&call, "x".repeat(1_000), false, 0).into(),
            }),
        ));
        entries.push(NewEntry::new(
            AGENT,
            assistant(
                vec![AssistantBlock::text(
                    "The module imports a feature that is off by default; enabling it in \
                     Cargo.toml fixes the build.",
                )],
                StopReason::Stop,
                tokens,
            ),
        ));
    }
    entries.truncate(ENTRIES);
    entries
}

fn roster() -> Roster {
    Roster::new([
        Participant::bot(AGENT, AGENT, BotProfile::new(Trigger::Mention, "")),
        Participant::human("alice", "alice"),
    ])
    .unwrap()
}

fn bench_check(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut registry = ToolRegistry::new();
    for tool in Workspace::open(workspace.path()).unwrap().toolset() {
        registry.register_arc(tool).unwrap();
    }
    let turns = TurnLoop::new(
        Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new())),
        model(),
    )
    .with_tools(Arc::new(registry));
    let system_prompt = "You are a coding agent. ".repeat(350);
    // A window far above the conversation: the check finds nothing to do,
    // which is what it finds before almost every request.
    let compactor = Compactor::new(CompactionConfig::default().with_context_window(100_000_000));

    let mut group = c.benchmark_group("compaction check");
    for usage in [true, false] {
        let store = Arc::new(MemoryStore::new());
        let thread = ThreadId::new("session").unwrap();
        let entries: Vec<Entry> = rt
            .block_on(store.append(&thread, Expect::Any, session(usage)))
            .unwrap();
        let context = Context {
            system_prompt: Some(system_prompt.clone()),
            messages: build_messages(AGENT, &entries, &roster()),
            tools: turns.model_tools().clone(),
        };
        let writer = rt.block_on(async {
            TurnWriter::start(
                store.clone(),
                thread.clone(),
                AGENT.into(),
                "turn".into(),
                None,
            )
        });
        let target = CompactionTarget {
            thread: thread.clone(),
            bot: AGENT.into(),
            roster: roster(),
            view: Arc::new(StoreView::new(store.clone(), thread.clone())),
        };
        let step = compactor.turn_step(target, &turns, writer.sink());
        let turn: Arc<str> = "turn".into();
        let cancel = CancellationToken::new();
        let name = if usage {
            "10k entries, usage reported"
        } else {
            "10k entries, estimated by characters"
        };
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let replaced = step
                    .check(ContextCheck {
                        turn: &turn,
                        round: 2,
                        reason: CompactionReason::Threshold,
                        context: &context,
                        sink: &NullSink,
                        cancel: &cancel,
                    })
                    .await;
                assert!(replaced.is_none());
            })
        });
        let messages: Vec<Message> = context.messages;
        black_box(messages);
    }
    group.finish();

    let entries: Vec<Entry> = session(false)
        .into_iter()
        .enumerate()
        .map(|(i, e)| e.into_entry(ThreadId::new("session").unwrap(), i as u64 + 1))
        .collect();
    let roster = roster();
    c.bench_function("compaction cut: split and plan, 10k entries", |b| {
        b.iter(|| {
            let split = split_view(AGENT, black_box(&entries), &roster);
            let cut = plan_cut(&entries, &split, 20_000).unwrap();
            black_box(cut.upto)
        })
    });
}

criterion_group!(benches, bench_check);
criterion_main!(benches);
