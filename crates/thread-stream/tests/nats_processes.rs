//! Two OS processes append to one thread of one NATS stream at the same time:
//! the server's expected-last-subject-sequence check serialises them, so
//! nothing is lost, nothing is doubled and the seqs have no gap.
//!
//! The test binary runs itself twice as the writers: the ignored test
//! `child_writer` does the appending when the parent starts it with
//! `ROUNDTABLE_NATS_CHILD` set.

#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod nats_support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use conformance::{chat, tid};
use nats_support::{connect, test_options};
use roundtable_test_support::nats::NatsServer;
use roundtable_thread_stream::{EntryBody, Expect, ThreadStore};

const CHILD_ENV: &str = "ROUNDTABLE_NATS_CHILD";
const PER_WRITER: usize = 150;

/// In a child process: appends `PER_WRITER` entries as writer `w`, mostly one
/// at a time, every fifth append a batch of three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by two_processes_appending_to_one_thread_lose_nothing in a child process"]
async fn child_writer() {
    let spec = std::env::var(CHILD_ENV).expect("run by the parent test");
    let (url, writer) = spec.split_once('|').unwrap();
    let store = connect(url, test_options()).await;
    // Both writers start together: connected, say so, wait for the go.
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let t = tid("shared");
    let mut i = 0;
    let mut waited_for_the_other = false;
    while i < PER_WRITER {
        // Halfway, wait until the other writer has appended something: one
        // process can be descheduled long enough for the other to finish,
        // and then the test would prove nothing. This guarantees the two
        // really interleave, whatever the scheduler does.
        if i >= PER_WRITER / 2 && !waited_for_the_other {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !store
                .read_all(&t)
                .await
                .unwrap()
                .iter()
                .any(|e| &*e.author != writer)
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the other writer never appended"
                );
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            waited_for_the_other = true;
        }
        let n = if i % 5 == 0 { 3.min(PER_WRITER - i) } else { 1 };
        let batch = (i..i + n)
            .map(|k| chat(writer, &format!("{writer}-{k}")))
            .collect();
        store.append(&t, Expect::Any, batch).await.unwrap();
        i += n;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_appending_to_one_thread_lose_nothing() {
    let server = NatsServer::start();
    // Create the stream before the writers race to.
    let store = connect(&server.url(), test_options()).await;
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = ["p1", "p2"]
        .into_iter()
        .map(|w| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_writer",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, format!("{}|{w}", server.url()))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Wait until both are connected, then let them go at once, so that they
    // really append side by side.
    let mut outputs = Vec::new();
    for child in &mut children {
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        while !seen.contains("ready") {
            let mut line = String::new();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "a writer exited early: {seen}"
            );
            seen.push_str(&line);
        }
        outputs.push((out, seen));
    }
    for child in &mut children {
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    let finished: Vec<_> = children
        .into_iter()
        .zip(outputs)
        .map(|(child, (mut out, mut seen))| {
            tokio::task::spawn_blocking(move || {
                out.read_to_string(&mut seen).unwrap();
                (child.wait_with_output().unwrap(), seen)
            })
        })
        .collect();
    for child in finished {
        let (out, stdout) = child.await.unwrap();
        assert!(
            out.status.success(),
            "a writer process failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("1 passed"),
            "the writer did not run: {stdout}"
        );
    }
    let all = store.read_all(&tid("shared")).await.unwrap();
    assert_eq!(all.len(), 2 * PER_WRITER);
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "gap or duplicate seq");
    }
    let texts: Vec<String> = all
        .iter()
        .map(|e| match &e.body {
            EntryBody::Chat(c) => c.text.to_string(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let unique: HashSet<&String> = texts.iter().collect();
    assert_eq!(unique.len(), 2 * PER_WRITER, "an entry was doubled");
    for w in ["p1", "p2"] {
        let mine: Vec<String> = texts
            .iter()
            .filter(|t| t.starts_with(&format!("{w}-")))
            .cloned()
            .collect();
        let want: Vec<String> = (0..PER_WRITER).map(|k| format!("{w}-{k}")).collect();
        assert_eq!(mine, want, "writer {w}'s entries lost or out of order");
    }
    // Both writers really interleaved (each waits for the other halfway, so
    // the log reads A..B..A at least: two switches).
    let switches = all
        .windows(2)
        .filter(|p| p[0].author != p[1].author)
        .count();
    assert!(switches > 1, "the writers never overlapped");
}
