//! The sessions engine over its real parts (the engine, the thread store,
//! the turn loop, the workspace tools; the scripted provider with zero
//! latency, so what is measured is the engine):
//!
//! - rebuilding a session's runtime from a 10k-entry thread (a cold
//!   `get`: read the thread, fold its state);
//! - the event view: all events of a 10k-entry session, and resuming from
//!   an event id near the end of a 100k-entry session (time to the rest);
//! - queue operations on a session whose turn is running (queue a
//!   follow-up, remove it);
//! - one turn through the engine (on a session that grows a turn per
//!   iteration, as the first turn of a new session, and as the fourth)
//!   against the same turn through the bare turn loop, for a turn of one
//!   tool round and for a turn of three; the fourth turn and the bare loop
//!   are also called from a task on the runtime, as a server's request
//!   handler calls them, and timed inside that task.
//!
//! The allocations of the turns and the memory an idle cached runtime holds
//! are counted by `benches/allocations.rs` (this bench times the system
//! allocator as it is).
//!
//! ```text
//! cargo bench --bench sessions
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use roundtable::providers::{AssistantMessage, ScriptedProvider};
use roundtable::sessions::{Caller, EventId, QueueMode, SessionEngine, Submit};
use roundtable::thread_stream::{MemoryStore, ThreadStore};
use roundtable::tools::{ApprovalPolicy, ToolKind};
use tokio::runtime::Runtime;

#[path = "support/engine_turn.rs"]
mod engine_turn;

use engine_turn::{
    bare_loop, create, model, new_session, read_call, rounds_turn, session_of, three_turns_made,
    workspace,
};

/// The engine turn the benches measure: a `read_file` round and an
/// answer, to the session going idle.
async fn one_turn(engine: &SessionEngine, provider: &ScriptedProvider, session: &str) {
    rounds_turn(engine, provider, session, 1).await;
}

/// The context switches (voluntary and not) of every thread of this
/// process so far (Linux; 0 elsewhere).
fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

fn bench_sessions(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let ws = workspace();
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());

    // A 10k-entry session: 200 turns, then notes.
    let started = Instant::now();
    let (session, entries) = rt.block_on(session_of(store.clone(), ws.path(), 200, 8000));
    println!(
        "sessions: a session of 200 turns and 8000 notes has {entries} entries ({:?} to build)",
        started.elapsed()
    );

    let idle_provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let mut group = c.benchmark_group("sessions");
    group.bench_function(format!("runtime rebuild, {entries} entries"), |b| {
        b.iter_batched(
            || SessionEngine::builder(store.clone(), idle_provider.clone(), model()).build(),
            |engine| {
                rt.block_on(async {
                    black_box(engine.get(&Caller::Host, &session.id).await.unwrap())
                })
            },
            BatchSize::SmallInput,
        )
    });

    let engine = SessionEngine::builder(store.clone(), idle_provider.clone(), model()).build();
    let events = rt
        .block_on(engine.events(&Caller::Host, &session.id, None))
        .unwrap();
    println!(
        "sessions: the {entries}-entry session has {} events",
        events.len()
    );
    group.bench_function(format!("all events, {entries} entries"), |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(
                    engine
                        .events(&Caller::Host, &session.id, None)
                        .await
                        .unwrap(),
                )
            })
        })
    });

    // Queue operations while a turn runs (it waits for an approval).
    let provider = Arc::new(ScriptedProvider::new([read_call("gated")]));
    let queue_engine = SessionEngine::builder(store.clone(), provider, model()).build();
    let gated = ApprovalPolicy {
        require_for_kinds: vec![ToolKind::Read],
        ..ApprovalPolicy::none()
    };
    let running = rt.block_on(async {
        let running = queue_engine
            .create(&Caller::Host, create(ws.path(), gated))
            .await
            .unwrap();
        let mut events = queue_engine
            .subscribe(&Caller::Host, &running.id, None)
            .await
            .unwrap();
        queue_engine
            .submit(&Caller::Host, &running.id, Submit::text("read it"))
            .await
            .unwrap();
        while let Some(event) = events.next().await {
            if event.unwrap().kind == roundtable::sessions::EventType::ApprovalRequested {
                break;
            }
        }
        running
    });
    group.bench_function("queue a follow-up and remove it, turn running", |b| {
        b.iter(|| {
            rt.block_on(async {
                let queued = queue_engine
                    .submit(
                        &Caller::Host,
                        &running.id,
                        Submit {
                            queue: Some(QueueMode::FollowUp),
                            ..Submit::text("and then this")
                        },
                    )
                    .await
                    .unwrap();
                queue_engine
                    .unqueue(&Caller::Host, &running.id, Some(queued.message_id.as_str()))
                    .await
                    .unwrap();
            })
        })
    });

    // One turn (a tool round and an answer) through the engine, and
    // through the bare turn loop with the same tools.
    let turn_engine_provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let turn_store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let turn_engine =
        SessionEngine::builder(turn_store, turn_engine_provider.clone(), model()).build();
    let turn_session = rt
        .block_on(turn_engine.create(&Caller::Host, create(ws.path(), ApprovalPolicy::none())))
        .unwrap();
    group.bench_function("one turn through the engine", |b| {
        b.iter(|| {
            rt.block_on(one_turn(
                &turn_engine,
                &turn_engine_provider,
                &turn_session.id,
            ))
        })
    });
    // The same turn as the first of a new session (the session's creation
    // is not measured; its first turn builds the agent setup and projects
    // the conversation from the thread). The figure above is of a session
    // that grows a turn per iteration: a turn reads only what was written
    // since the last one, so it stays flat as the session grows.
    group.bench_function("one turn through the engine, first of a new session", |b| {
        b.iter_batched(
            || rt.block_on(new_session(&turn_engine, ws.path())),
            |session| rt.block_on(one_turn(&turn_engine, &turn_engine_provider, &session.id)),
            BatchSize::SmallInput,
        )
    });
    let bare_provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let bare = bare_loop(bare_provider.clone(), ws.path());
    let bare_turn =
        |rounds: usize| rt.block_on(engine_turn::bare_turn(&bare, &bare_provider, rounds));
    // A session whose three turns (of `rounds` tool rounds each) are made,
    // on the runtime `on`, ready for its fourth.
    let three_turns_in = |on: &Runtime, rounds: usize| {
        on.block_on(three_turns_made(
            &turn_engine,
            &turn_engine_provider,
            ws.path(),
            rounds,
        ))
    };
    let alone = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The turn as the fourth of a session: its setup is kept from the
    // earlier turns, and the history it projects is short, as in a
    // conversation (the three turns before it are made, not measured).
    // Measured for a turn of one tool round and for the goal's own
    // workload, a turn of three tool rounds (a `read_file` call each), each
    // against the same turn through the bare turn loop.
    for (rounds, name) in [(1, "one turn"), (3, "three-round turn")] {
        group.bench_function(
            format!("{name} through the engine, fourth of a session"),
            |b| {
                b.iter_batched(
                    || three_turns_in(&rt, rounds),
                    |session| {
                        rt.block_on(rounds_turn(
                            &turn_engine,
                            &turn_engine_provider,
                            &session.id,
                            rounds,
                        ))
                    },
                    BatchSize::SmallInput,
                )
            },
        );
        // The context switches of the process's threads per fourth turn on
        // the multi-thread runtime: every hand-off between the caller, the
        // turn's task and whatever it wakes that parks or wakes a thread.
        let samples: u32 = 200;
        let mut switches = 0;
        for _ in 0..samples {
            let session = three_turns_in(&rt, rounds);
            let before = context_switches();
            rt.block_on(rounds_turn(
                &turn_engine,
                &turn_engine_provider,
                &session.id,
                rounds,
            ));
            switches += context_switches().saturating_sub(before);
        }
        println!(
            "sessions: {name} through the engine, fourth of a session: {:.1} context switches (mean of {samples})",
            switches as f64 / f64::from(samples)
        );
        // For information: the same fourth turn on a current-thread
        // runtime, where no hand-off wakes another thread (the benches run
        // on the multi-thread runtime, as a server does).
        let mut spent = Duration::ZERO;
        for _ in 0..samples {
            let session = three_turns_in(&alone, rounds);
            let started = Instant::now();
            alone.block_on(rounds_turn(
                &turn_engine,
                &turn_engine_provider,
                &session.id,
                rounds,
            ));
            spent += started.elapsed();
        }
        println!(
            "sessions: {name} through the engine, fourth of a session, on a current-thread runtime: {:?} (mean of {samples})",
            spent / samples
        );
        group.bench_function(format!("{name} through the bare turn loop"), |b| {
            b.iter(|| bare_turn(rounds))
        });
        // The same two turns called from a task on the runtime, as a
        // server's request handler calls the engine, timed inside that task
        // (the bench's own hop from `block_on` to the task and back is not
        // the turn's). Called with `block_on` from a thread outside the
        // runtime, as above, every hand-off to the engine's driver task
        // crosses threads; from a task, the driver is spawned on the
        // caller's worker and the caller is woken there.
        group.bench_function(
            format!("{name} through the engine from a task, fourth of a session"),
            |b| {
                b.iter_custom(|iterations| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iterations {
                        let session = three_turns_in(&rt, rounds);
                        let (engine, provider) =
                            (turn_engine.clone(), turn_engine_provider.clone());
                        spent += rt
                            .block_on(rt.spawn(async move {
                                let started = Instant::now();
                                rounds_turn(&engine, &provider, &session.id, rounds).await;
                                started.elapsed()
                            }))
                            .unwrap();
                    }
                    spent
                })
            },
        );
        group.bench_function(
            format!("{name} through the bare turn loop from a task"),
            |b| {
                b.iter_custom(|iterations| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iterations {
                        let (bare, provider) = (bare.clone(), bare_provider.clone());
                        spent += rt
                            .block_on(rt.spawn(async move {
                                let started = Instant::now();
                                engine_turn::bare_turn(&bare, &provider, rounds).await;
                                started.elapsed()
                            }))
                            .unwrap();
                    }
                    spent
                })
            },
        );
    }
    group.finish();

    // Resuming from an event id near the end of a 100k-entry session.
    let big_store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let (big, big_entries) = rt.block_on(session_of(big_store.clone(), ws.path(), 100, 98_000));
    let big_engine = SessionEngine::builder(big_store, idle_provider.clone(), model()).build();
    let from = EventId {
        seq: big_entries - 10,
        sub: 0,
    };
    // Once cold (the runtime is rebuilt from the thread first).
    let cold = Instant::now();
    rt.block_on(async {
        let mut events = big_engine
            .subscribe(&Caller::Host, &big.id, Some(from))
            .await
            .unwrap();
        events.next().await.unwrap().unwrap();
    });
    println!(
        "sessions: resume near the end of {big_entries} entries, cold runtime: {:?}",
        cold.elapsed()
    );
    let mut group = c.benchmark_group("sessions");
    group.sample_size(20);
    group.bench_function(
        format!("resume 10 entries before the end, {big_entries} entries"),
        |b| {
            b.iter(|| {
                rt.block_on(async {
                    let mut events = big_engine
                        .subscribe(&Caller::Host, &big.id, Some(from))
                        .await
                        .unwrap();
                    // The first event after the id: the stream is caught up.
                    black_box(
                        tokio::time::timeout(Duration::from_secs(10), events.next())
                            .await
                            .unwrap(),
                    )
                })
            })
        },
    );
    group.finish();
}

criterion_group!(benches, bench_sessions);
criterion_main!(benches);
