//! Allocation counts of the paths the timed benches measure, with a
//! counting allocator: the busy-chat projection (`dispatch`), the 8-round
//! tool turn (`turn_loop`), the engine's fourth turn of one and of three
//! tool rounds against the same turn through the bare turn loop, and the
//! memory an idle cached runtime holds (`sessions`).
//!
//! The counts live in a binary of their own because counting is not free:
//! the counting allocator adds locked increments of shared counters to
//! every allocation and every free, which would cost an allocation-heavy
//! path a few percent of its time (more when its allocations happen on
//! several threads), so the timed benches run on the system allocator as
//! it is.
//!
//! ```text
//! cargo bench --bench allocations
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::alloc::System;
use std::sync::Arc;

use roundtable::chat_runner::{FinishReason, NullSink};
use roundtable::providers::{AssistantMessage, ScriptedProvider};
use roundtable::sessions::{Caller, SessionEngine, SessionInfo};
use roundtable::thread_stream::{MemoryStore, ThreadStore};
use roundtable_dispatch::build_messages;
use roundtable_test_support::samples::chat_workload;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, Stats, StatsAlloc};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[path = "support/chat_roster.rs"]
mod chat_roster;
#[path = "support/eight_rounds.rs"]
mod eight_rounds;
#[path = "support/engine_turn.rs"]
mod engine_turn;

/// What `run` allocated.
fn counted<T>(run: impl FnOnce() -> T) -> (T, Stats) {
    let region = Region::new(GLOBAL);
    let out = run();
    (out, region.change())
}

/// `build_messages` of the busy-chat sample, as `dispatch` times it.
fn projection() {
    for (len, label) in [(10_000, "10k"), (100_000, "100k")] {
        let w = chat_workload(len, 7);
        let roster = chat_roster::workload_roster(&w);
        let (messages, stats) = counted(|| build_messages(chat_roster::SELF, &w.entries, &roster));
        println!(
            "build_messages_chat/{label}: {} messages, {} allocations ({} bytes)",
            messages.len(),
            stats.allocations,
            stats.bytes_allocated
        );
    }
}

/// The 8-round tool turn, as `turn_loop` times it.
fn turn_loop() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let provider = Arc::new(ScriptedProvider::new(eight_rounds::script()));
    let turns = eight_rounds::turn_loop(provider, eight_rounds::tools());
    let (outcome, stats) = counted(|| {
        runtime.block_on(turns.run(eight_rounds::request(), CancellationToken::new(), &NullSink))
    });
    assert_eq!(outcome.finish_reason, FinishReason::Stop);
    assert_eq!(outcome.rounds, 8);
    println!(
        "turn_loop/8_rounds: {} allocations, {} bytes allocated per turn",
        stats.allocations, stats.bytes_allocated
    );
}

/// The engine's turns against the bare loop's, and an idle cached
/// runtime's memory, as `sessions` sets them up.
fn sessions() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ws = engine_turn::workspace();

    // The memory an idle cached runtime holds: a cold `get` keeps the
    // runtime in the cache; what stays allocated afterwards is its size.
    // The allocator's counts are global, so the `get` runs on a runtime of
    // its own, on this thread: no worker of the shared runtime takes part.
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let idle_provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let held = |session: &SessionInfo| {
        let engine =
            SessionEngine::builder(store.clone(), idle_provider.clone(), engine_turn::model())
                .build();
        let alone = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let ((), change) = counted(|| {
            drop(
                alone
                    .block_on(engine.get(&Caller::Host, &session.id))
                    .unwrap(),
            );
        });
        drop(engine);
        change.bytes_allocated as i64 - change.bytes_deallocated as i64
            + change.bytes_reallocated as i64
    };
    let (small, small_entries) =
        rt.block_on(engine_turn::session_of(store.clone(), ws.path(), 10, 0));
    let (big, big_entries) =
        rt.block_on(engine_turn::session_of(store.clone(), ws.path(), 200, 8000));
    println!(
        "sessions: an idle cached runtime holds {} bytes ({small_entries} entries), {} bytes ({big_entries} entries)",
        held(&small),
        held(&big),
    );

    // The fourth turn of a session through the engine, and the same turn
    // through the bare loop.
    let provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let turn_store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let engine = SessionEngine::builder(turn_store, provider.clone(), engine_turn::model()).build();
    let bare_provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let bare = engine_turn::bare_loop(bare_provider.clone(), ws.path());
    for (rounds, name) in [(1, "one turn"), (3, "three-round turn")] {
        let fourth = rt.block_on(engine_turn::three_turns_made(
            &engine,
            &provider,
            ws.path(),
            rounds,
        ));
        let ((), through_engine) = counted(|| {
            rt.block_on(engine_turn::rounds_turn(
                &engine, &provider, &fourth.id, rounds,
            ));
        });
        let ((), through_bare) = counted(|| {
            rt.block_on(engine_turn::bare_turn(&bare, &bare_provider, rounds));
        });
        println!(
            "sessions: {name} allocates {} times ({} bytes) through the engine (fourth of a session), {} times ({} bytes) through the bare loop",
            through_engine.allocations,
            through_engine.bytes_allocated,
            through_bare.allocations,
            through_bare.bytes_allocated
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and a filter, if given): counts are
    // printed whatever the arguments.
    projection();
    turn_loop();
    sessions();
}
