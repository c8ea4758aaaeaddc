//! Runs the sessions bench's measured turn alone, many times, for a
//! profiler: the fourth turn of a session (the session and its first three
//! turns are made beforehand, outside [`fourth_turns`]), over a
//! `MemoryStore`, the workspace tools on a temp folder and the scripted
//! provider with zero latency; or the same turn through the bare turn loop.
//!
//! ```text
//! cargo run --release --example engine_turn --all-features -- [sessions] [rounds] [how]
//! valgrind --tool=callgrind --toggle-collect='engine_turn::fourth_turns' \
//!     target/release/examples/engine_turn 200 3 current
//! ```
//!
//! `taskset -c 0` in front of the first command runs it on one CPU,
//! without the wake-ups that cross to another CPU (steadier figures for
//! comparing two builds).
//!
//! Callgrind's call counts under `--toggle-collect` include the calls made
//! outside the function; `--zero-before=engine_turn::fourth_turns
//! --dump-after=engine_turn::fourth_turns` instead writes a dump of the
//! measured part alone (every thread's), whose call counts are its own.
//!
//! `perf record --control fifo:/tmp/ctl -D -1` with `PERF_CTL=/tmp/ctl`
//! records the measured part alone (and `strace` sees the two writes to
//! that path around it).
//!
//! Its allocator counts allocations (it prints them per turn), which
//! costs every allocation and free two locked increments: the times it
//! prints are for comparing its own runs; `cargo bench --bench sessions`
//! times the turn on the system allocator as it is.
//!
//! `rounds` is the number of tool rounds (a `read_file` call each) before
//! the answer (1 unless given). `how` says where the turn runs:
//!
//! - `multi` (the default): called with `block_on` on the main thread, the
//!   engine on a multi-thread runtime (as the bench measures it);
//! - `current`: everything on a current-thread runtime, so that a profiler
//!   that follows one thread sees the whole turn;
//! - `task`: each turn called from a task on the multi-thread runtime, as a
//!   server's request handler calls the engine;
//! - `bare` and `bare-task`: the same turn through the bare turn loop,
//!   called with `block_on` or from a task on the runtime.

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

use engine_turn::{bare_loop, bare_turn, model, new_session, rounds_turn, workspace};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Where the measured turns run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Multi,
    Current,
    Task,
    Bare,
    BareTask,
}

/// The measured part: one fourth turn in each of `sessions` (or as many
/// bare-loop turns).
#[inline(never)]
fn fourth_turns(
    rt: &Runtime,
    engine: &Arc<SessionEngine>,
    provider: &Arc<ScriptedProvider>,
    sessions: &[SessionInfo],
    rounds: usize,
    how: How,
    workspace: &std::path::Path,
) {
    match how {
        How::Multi | How::Current => {
            for session in sessions {
                rt.block_on(rounds_turn(engine, provider, &session.id, rounds));
            }
        }
        How::Task => {
            for session in sessions {
                let (engine, provider, id) = (engine.clone(), provider.clone(), session.id.clone());
                rt.block_on(rt.spawn(async move {
                    rounds_turn(&engine, &provider, &id, rounds).await;
                }))
                .unwrap();
            }
        }
        How::Bare | How::BareTask => {
            let bare = Arc::new(bare_loop(provider.clone(), workspace));
            for _ in sessions {
                if how == How::Bare {
                    rt.block_on(bare_turn(&bare, provider, rounds));
                } else {
                    let (bare, provider) = (bare.clone(), provider.clone());
                    rt.block_on(rt.spawn(async move {
                        bare_turn(&bare, &provider, rounds).await;
                    }))
                    .unwrap();
                }
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map_or(200, |a| a.parse().unwrap());
    let rounds: usize = args.next().map_or(1, |a| a.parse().unwrap());
    let how = match args.next().as_deref() {
        None | Some("multi") => How::Multi,
        Some("current") => How::Current,
        Some("task") => How::Task,
        Some("bare") => How::Bare,
        Some("bare-task") => How::BareTask,
        Some(other) => {
            eprintln!("unknown mode {other}: multi, current, task, bare or bare-task");
            std::process::exit(2);
        }
    };
    let rt = match how {
        How::Current => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        _ => Runtime::new().unwrap(),
    };
    let workspace = workspace();
    let provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let engine = Arc::new(
        SessionEngine::builder(Arc::new(MemoryStore::new()), provider.clone(), model()).build(),
    );
    let bare = matches!(how, How::Bare | How::BareTask);
    let sessions: Vec<SessionInfo> = (0..count)
        .map(|_| {
            rt.block_on(async {
                let session = new_session(&engine, workspace.path()).await;
                for _ in 0..if bare { 0 } else { 3 } {
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
    fourth_turns(
        &rt,
        &engine,
        &provider,
        &sessions,
        rounds,
        how,
        workspace.path(),
    );
    let spent = started.elapsed();
    perf("disable\n");
    let allocated = region.change();
    println!(
        "{count} {} of {rounds} tool round(s): {:?} and {} allocations ({} bytes) a turn",
        if bare {
            "bare-loop turns"
        } else {
            "fourth turns"
        },
        spent / u32::try_from(count).unwrap(),
        allocated.allocations / count,
        allocated.bytes_allocated / count,
    );
}
