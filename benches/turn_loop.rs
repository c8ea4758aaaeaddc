//! Turn-loop overhead: an 8-round tool conversation (7 rounds calling a
//! trivial read tool, then the answer) against the scripted provider with
//! zero latency, so what is measured is the loop itself: streaming events,
//! assembling contexts, scheduling tools, building results and events.
//! A counting allocator reports allocations per turn.
//!
//! ```text
//! cargo bench --bench turn_loop
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use roundtable::chat_runner::{FinishReason, NullSink, TurnLoop, TurnRequest};
use roundtable::providers::{
    AssistantBlock, AssistantMessage, Message, Model, OPENAI_COMPLETIONS, ScriptedProvider,
    StopReason, ToolCall, UserMessage,
};
use roundtable::tools::ToolRegistry;
use roundtable_test_support::tools::Lookup;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn script() -> Vec<AssistantMessage> {
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

fn turn_loop(provider: Arc<ScriptedProvider>, tools: Arc<ToolRegistry>) -> TurnLoop {
    TurnLoop::new(
        provider,
        Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""),
    )
    .with_tools(tools)
}

fn request() -> TurnRequest {
    TurnRequest::new(vec![Message::from(UserMessage::text(
        "What do the keys hold?",
        0,
    ))])
    .with_system_prompt("You are a benchmark.")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Lookup).unwrap();
    let tools = Arc::new(tools);
    let steps = script();

    // Allocations of one turn, measured once outside criterion.
    let provider = Arc::new(ScriptedProvider::new(steps.clone()));
    let turns = turn_loop(provider, tools.clone());
    let region = Region::new(GLOBAL);
    let outcome = runtime.block_on(turns.run(request(), CancellationToken::new(), &NullSink));
    let stats = region.change();
    assert_eq!(outcome.finish_reason, FinishReason::Stop);
    assert_eq!(outcome.rounds, 8);
    eprintln!(
        "turn_loop/8_rounds: {} allocations, {} bytes allocated per turn",
        stats.allocations, stats.bytes_allocated
    );

    c.bench_function("turn_loop/8_rounds", |b| {
        b.to_async(&runtime).iter_batched(
            || {
                turn_loop(
                    Arc::new(ScriptedProvider::new(steps.clone())),
                    tools.clone(),
                )
            },
            |turns| async move {
                let outcome = turns
                    .run(request(), CancellationToken::new(), &NullSink)
                    .await;
                black_box(outcome)
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
