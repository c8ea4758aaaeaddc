//! Runs the sessions bench's measured turn alone, many times, for a
//! profiler: the fourth turn of a session (the session and its first three
//! turns are made beforehand, outside [`fourth_turns`]), over a
//! `MemoryStore`, the workspace tools on a temp folder and the scripted
//! provider with zero latency.
//!
//! ```text
//! cargo run --release --example engine_turn --all-features -- [sessions] [rounds] [current]
//! valgrind --tool=callgrind --toggle-collect='engine_turn::fourth_turns' \
//!     target/release/examples/engine_turn 200 3 current
//! ```
//!
//! `perf record --control fifo:/tmp/ctl -D -1` with `PERF_CTL=/tmp/ctl`
//! records the measured part alone.
//!
//! `rounds` is the number of tool rounds (a `read_file` call each) before
//! the answer (1 unless given); `current` runs everything on a
//! current-thread runtime, so that a profiler that follows one thread sees
//! the whole turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use roundtable::providers::{AssistantMessage, ScriptedProvider};
use roundtable::sessions::{SessionEngine, SessionInfo};
use roundtable::thread_stream::MemoryStore;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::runtime::Runtime;

#[path = "../benches/support/engine_turn.rs"]
mod engine_turn;

use engine_turn::{model, new_session, rounds_turn, workspace};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// The measured part: one fourth turn in each of `sessions`.
#[inline(never)]
fn fourth_turns(
    rt: &Runtime,
    engine: &SessionEngine,
    provider: &ScriptedProvider,
    sessions: &[SessionInfo],
    rounds: usize,
) {
    for session in sessions {
        rt.block_on(rounds_turn(engine, provider, &session.id, rounds));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map_or(200, |a| a.parse().unwrap());
    let rounds: usize = args.next().map_or(1, |a| a.parse().unwrap());
    let rt = match args.next().as_deref() {
        Some("current") => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        _ => Runtime::new().unwrap(),
    };
    let workspace = workspace();
    let provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let engine =
        SessionEngine::builder(Arc::new(MemoryStore::new()), provider.clone(), model()).build();
    let sessions: Vec<SessionInfo> = (0..count)
        .map(|_| {
            rt.block_on(async {
                let session = new_session(&engine, workspace.path()).await;
                for _ in 0..3 {
                    rounds_turn(&engine, &provider, &session.id, rounds).await;
                }
                session
            })
        })
        .collect();
    // `perf record --control fifo:<path> -D -1` profiles the measured part
    // alone when `PERF_CTL` names the same fifo.
    let perf = |command: &str| {
        if let Some(path) = std::env::var_os("PERF_CTL") {
            std::fs::write(path, command).unwrap();
        }
    };
    let region = Region::new(GLOBAL);
    perf("enable\n");
    let started = Instant::now();
    fourth_turns(&rt, &engine, &provider, &sessions, rounds);
    let spent = started.elapsed();
    perf("disable\n");
    let allocated = region.change();
    println!(
        "{count} fourth turns of {rounds} tool round(s): {:?} and {} allocations ({} bytes) a turn",
        spent / u32::try_from(count).unwrap(),
        allocated.allocations / count,
        allocated.bytes_allocated / count,
    );
}
