//! Two thread-runner processes over one shared store (NATS, PostgreSQL):
//! every wake must be answered exactly once, whichever process gets it.
//!
//! The test binary runs itself twice as the runners: its ignored test (named
//! by the parent) calls [`run_child_runner`] when the parent starts it with
//! [`RUNNER_CHILD_ENV`] set to the store's URL, until the parent writes
//! `signal.done`; the parent's test calls [`drive_two_runner_processes`].

// A child that fails, or a run that breaks the promise, must fail the test.
#![allow(clippy::panic)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use roundtable_chat_runner::{RunnerNotice, ThreadRunner};
use roundtable_dispatch::{Policy, Trigger};
use roundtable_thread_stream::{Entry, EntryBody, Expect, NewEntry, Signal, ThreadId, ThreadStore};

use crate::echo_provider::EchoProvider;
use crate::roster::{bot, human, roster};
use crate::runner::{answers, turns};
use crate::thread::{check_turns, say, thread};

/// The variable that makes the ignored child test run, holding the store's
/// URL.
pub const RUNNER_CHILD_ENV: &str = "ROUNDTABLE_RUNNER_CHILD";

/// How many messages the parent writes.
pub const PROCESS_MESSAGES: usize = 6;

/// What the parent saw: the whole thread and the seqs of the humans'
/// messages.
pub struct TwoProcessRun {
    /// Every entry of the thread.
    pub entries: Vec<Entry>,
    /// The seqs of the messages the parent wrote.
    pub humans: Vec<u64>,
}

/// In a child process: runs bots `x` (always) and `y` (mention) on thread
/// `shared` of `store` until the parent writes `signal.done`; prints the
/// turns it ran (`turns=<n>`).
///
/// # Panics
///
/// When the store or the runner fails.
pub async fn run_child_runner(store: Arc<dyn ThreadStore>) {
    let people = roster([
        human("alice", "Alice"),
        bot("x", "X", Trigger::Always),
        bot("y", "Y", Trigger::Mention),
    ]);
    let runner = ThreadRunner::builder(store.clone(), people)
        .bot("x", turns(EchoProvider::new("X")))
        .bot("y", turns(EchoProvider::new("Y")))
        .policy(Policy {
            max_depth: 1,
            ..Policy::default()
        })
        // The other process's turns are live: never take them for dead.
        .interrupt_open_turns_after(Duration::from_secs(60))
        .build();
    let mut notices = runner.notices();
    let t = thread("shared");
    runner
        .follow(&t)
        .await
        .unwrap_or_else(|e| panic!("following the thread: {e}"));
    let mut entries = store
        .subscribe(&t, 1)
        .await
        .unwrap_or_else(|e| panic!("subscribing: {e}"));
    while let Some(entry) = entries.next().await {
        let entry = entry.unwrap_or_else(|e| panic!("reading the thread: {e}"));
        if matches!(entry.body, EntryBody::Signal(ref s) if s.name == "done") {
            break;
        }
    }
    runner
        .idle()
        .await
        .unwrap_or_else(|e| panic!("waiting for the runner: {e}"));
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

/// In the parent: starts this test binary twice running the ignored test
/// `child_test` with [`RUNNER_CHILD_ENV`] set to `url`, writes
/// [`PROCESS_MESSAGES`] messages mentioning `y` to thread `shared` (each
/// once both bots' turns on the one before ended), then `signal.done`, and
/// checks that the two processes ran every turn once between them: one turn
/// per message and bot, every turn's lifecycle whole, every turn answered.
///
/// # Panics
///
/// When a child fails or the promise is broken.
pub async fn drive_two_runner_processes(
    store: &dyn ThreadStore,
    child_test: &str,
    url: &str,
) -> TwoProcessRun {
    let t = thread("shared");
    let children: Vec<_> = (0..2)
        .map(|_| {
            let child = spawn_child(child_test, url);
            tokio::task::spawn_blocking(move || child.wait_with_output())
        })
        .collect();
    let humans = write_messages(store, &t).await;
    store
        .append(
            &t,
            Expect::Any,
            vec![NewEntry::new(
                "alice",
                EntryBody::Signal(Signal {
                    name: "done".into(),
                    data: serde_json::Value::Null.into(),
                }),
            )],
        )
        .await
        .unwrap_or_else(|e| panic!("writing signal.done: {e}"));

    let mut total = 0;
    for child in children {
        let out = match child.await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => panic!("waiting for a runner process: {e}"),
            Err(e) => panic!("waiting for a runner process: {e}"),
        };
        total += child_turns(&out);
    }

    let entries = store
        .read_all(&t)
        .await
        .unwrap_or_else(|e| panic!("reading the thread: {e}"));
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
    assert_eq!(
        total,
        2 * PROCESS_MESSAGES,
        "the two processes ran every turn once"
    );
    assert_eq!(answers(&entries).len(), 2 * PROCESS_MESSAGES);
    TwoProcessRun { entries, humans }
}

/// Starts this test binary running the ignored test `child_test` as a
/// runner over the store at `url`.
fn spawn_child(child_test: &str, url: &str) -> std::process::Child {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test binary: {e}"));
    Command::new(&exe)
        .args([
            "--exact",
            child_test,
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(RUNNER_CHILD_ENV, url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start a runner process: {e}"))
}

/// Writes [`PROCESS_MESSAGES`] messages mentioning `y` to `t`, each once
/// both bots' turns on the one before ended; their seqs.
async fn write_messages(store: &dyn ThreadStore, t: &ThreadId) -> Vec<u64> {
    let mut humans = Vec::new();
    let mut ends = 0;
    let mut live = store
        .subscribe(t, 1)
        .await
        .unwrap_or_else(|e| panic!("subscribing: {e}"));
    for i in 0..PROCESS_MESSAGES {
        humans.push(say(store, t, "alice", &format!("@y message {i}")).await);
        while ends < 2 * (i + 1) {
            let Some(Ok(entry)) = live.next().await else {
                panic!("the thread's subscription ended");
            };
            if matches!(
                entry.body,
                EntryBody::TurnEnded(_) | EntryBody::TurnFailed(_)
            ) {
                ends += 1;
            }
        }
    }
    humans
}

/// The turns a finished child process says it ran; a failed child fails
/// the test.
fn child_turns(out: &std::process::Output) -> usize {
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
    let turns: Option<usize> = stdout
        .lines()
        .find_map(|l| l.split("turns=").nth(1))
        .and_then(|n| {
            n.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        });
    let Some(turns) = turns else {
        panic!("the child did not print its turns:\n{stdout}");
    };
    turns
}
