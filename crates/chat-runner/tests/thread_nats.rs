//! Two runner processes over one NATS JetStream store: every wake is
//! answered exactly once, whichever process gets it.
//!
//! The test binary runs itself twice as the runners: the ignored test
//! `child_runner` runs a `ThreadRunner` when the parent starts it with
//! `ROUNDTABLE_RUNNER_CHILD` set, until the parent writes `signal.done`.
//! Needs the `nats` feature and the `nats-server` binary.

#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod thread_support;
// The NATS store's own test support starts and stops the servers.
#[path = "../../thread-stream/tests/nats_support/mod.rs"]
mod nats_support;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use nats_support::{connect, test_options};
use roundtable_chat_runner::{RunnerNotice, ThreadRunner};
use roundtable_dispatch::{Policy, Trigger};
use roundtable_test_support::nats::NatsServer;
use roundtable_thread_stream::{EntryBody, Expect, NewEntry, Signal, ThreadStore};
use thread_support::*;

const CHILD_ENV: &str = "ROUNDTABLE_RUNNER_CHILD";
const MESSAGES: usize = 6;

/// In a child process: runs bots `x` (always) and `y` (mention) on thread
/// `shared` until the parent writes `signal.done`; prints the turns it ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by two_runner_processes_over_nats_answer_each_wake_once in a child process"]
async fn child_runner() {
    let url = std::env::var(CHILD_ENV).expect("run by the parent test");
    let store: Arc<dyn ThreadStore> = Arc::new(connect(&url, test_options()).await);
    let people = roster([
        human("alice", "Alice"),
        bot("x", "X", Trigger::Always),
        bot("y", "Y", Trigger::Mention),
    ]);
    let runner = ThreadRunner::builder(store.clone(), people)
        .bot("x", turns(Smart::new("X")))
        .bot("y", turns(Smart::new("Y")))
        .policy(Policy {
            max_depth: 1,
            ..Policy::default()
        })
        // The other process's turns are live: never take them for dead.
        .interrupt_open_turns_after(Duration::from_secs(60))
        .build();
    let mut notices = runner.notices();
    let t = thread("shared");
    runner.follow(&t).await.unwrap();
    let mut entries = store.subscribe(&t, 1).await.unwrap();
    while let Some(entry) = entries.next().await {
        if matches!(entry.unwrap().body, EntryBody::Signal(ref s) if s.name == "done") {
            break;
        }
    }
    runner.idle().await.unwrap();
    runner.shutdown().await;
    let mut turns = 0;
    while let Ok(notice) = notices.try_recv() {
        match notice {
            RunnerNotice::TurnStarted { .. } => turns += 1,
            // Store hiccups are retried; the parent checks the outcome.
            RunnerNotice::Error { message, .. } => eprintln!("runner error: {message}"),
            _ => {}
        }
    }
    println!("turns={turns}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runner_processes_over_nats_answer_each_wake_once() {
    let server = NatsServer::start();
    let store = connect(&server.url(), test_options()).await;
    let t = thread("shared");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            let child = Command::new(&exe)
                .args([
                    "--exact",
                    "child_runner",
                    "--ignored",
                    "--test-threads=1",
                    "--nocapture",
                ])
                .env(CHILD_ENV, server.url())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        })
        .collect();

    // Each message waits for both bots' turns to end before the next.
    let mut humans = Vec::new();
    let mut ends = 0;
    let mut live = store.subscribe(&t, 1).await.unwrap();
    for i in 0..MESSAGES {
        humans.push(say(&store, &t, "alice", &format!("@y message {i}")).await);
        while ends < 2 * (i + 1) {
            let entry = live.next().await.unwrap().unwrap();
            if matches!(
                entry.body,
                EntryBody::TurnEnded(_) | EntryBody::TurnFailed(_)
            ) {
                ends += 1;
            }
        }
    }
    store
        .append(
            &t,
            Expect::Any,
            vec![NewEntry::new(
                "alice",
                EntryBody::Signal(Signal {
                    name: "done".into(),
                    data: serde_json::Value::Null,
                }),
            )],
        )
        .await
        .unwrap();

    let mut total = 0;
    for child in children {
        let out = child.await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a runner process failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in String::from_utf8_lossy(&out.stderr).lines() {
            if line.contains("runner error") {
                eprintln!("child {line}");
            }
        }
        let turns: usize = stdout
            .lines()
            .find_map(|l| l.split("turns=").nth(1))
            .expect("the child printed its turns")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap();
        total += turns;
    }

    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    for bot in ["x", "y"] {
        let triggers: Vec<u64> = entries
            .iter()
            .filter(|e| &*e.author == bot)
            .filter_map(|e| match &e.body {
                EntryBody::TurnStarted(s) => s.trigger,
                _ => None,
            })
            .collect();
        assert_eq!(triggers, humans, "bot {bot}: one turn per message");
    }
    assert_eq!(total, 2 * MESSAGES, "the two processes ran every turn once");
    assert_eq!(answers(&entries).len(), 2 * MESSAGES);
}
