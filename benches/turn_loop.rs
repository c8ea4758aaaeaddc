//! Turn-loop overhead: an 8-round tool conversation (7 rounds calling a
//! trivial read tool, then the answer) against the scripted provider with
//! zero latency, so what is measured is the loop itself: streaming events,
//! assembling contexts, scheduling tools, building results and events.
//! Its allocations are counted by `benches/allocations.rs` (this bench
//! times the system allocator as it is).
//!
//! ```text
//! cargo bench --bench turn_loop
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use roundtable::chat_runner::{FinishReason, NullSink};
use roundtable::providers::ScriptedProvider;
use tokio_util::sync::CancellationToken;

#[path = "support/eight_rounds.rs"]
mod eight_rounds;

use eight_rounds::{request, script, tools, turn_loop};

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tools = tools();
    let steps = script();

    // The turn is what it should be: eight rounds, stopped by the answer.
    let provider = Arc::new(ScriptedProvider::new(steps.clone()));
    let outcome = runtime.block_on(turn_loop(provider, tools.clone()).run(
        request(),
        CancellationToken::new(),
        &NullSink,
    ));
    assert_eq!(outcome.finish_reason, FinishReason::Stop);
    assert_eq!(outcome.rounds, 8);

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
