//! Reads of one thread by one `NatsStore` while another `NatsStore` (another
//! connection, so another process's cache of batch positions) appends to it:
//! every range read returns exactly the stored entries of its range, and
//! every subscription starts exactly at its first wanted entry, never with a
//! `Corrupt` error, whether the reader's cache is cold, warm from its own
//! earlier appends, or kept current by appends of its own in between.

#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod nats_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;

use conformance::{chat, tid};
use nats_support::{connect, test_options};
use roundtable_test_support::nats::NatsServer;
use roundtable_thread_stream::{Entry, Expect, NatsStore, ThreadId, ThreadStore};

/// Appends done by the writer in one run; the readers read until it is done.
const WRITER_APPENDS: u64 = 250;

/// Subscriptions started while the writer appends.
const SUBSCRIPTIONS: u64 = 150;

/// A small deterministic pseudo-random sequence (xorshift), so a failing run
/// can be replayed with the same ranges.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Checks that `got` holds exactly seqs `from..` (dense, in order) up to at
/// least `at_least` and at most `to`.
fn check_range(what: &str, got: &[Entry], from: u64, to: u64, at_least: u64) {
    let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
    let dense = seqs.iter().zip(from..).all(|(s, want)| *s == want);
    let last = seqs.last().copied().unwrap_or(from - 1);
    assert!(
        dense && last <= to && last >= at_least.min(to),
        "{what} {from}..={to} (thread reached {at_least} before) returned seqs {seqs:?}"
    );
}

/// Appends single entries and batches of up to 4, with `Expect::Any` or an
/// expectation from its own last view (a lost race is fine: it tries again).
async fn write(store: NatsStore, t: ThreadId, seed: u64) {
    let mut rng = Rng(seed);
    let mut last = store.last_seq(&t).await.unwrap();
    for i in 0..WRITER_APPENDS {
        let size = if rng.below(3) == 0 {
            1 + rng.below(4) as usize
        } else {
            1
        };
        let batch = (0..size).map(|k| chat("w", &format!("w{i}.{k}"))).collect();
        let expect = if i.is_multiple_of(2) {
            Expect::Any
        } else {
            Expect::LastSeq(last)
        };
        match store.append(&t, expect, batch).await {
            Ok(written) => last = written.last().unwrap().seq,
            Err(roundtable_thread_stream::StoreError::Conflict { actual, .. }) => last = actual,
            Err(e) => panic!("append failed: {e}"),
        }
    }
}

/// Reads `t` through `reader` (sliding and random ranges, tips, whole reads)
/// until `done`, appending a single entry of its own every `own_append_every`
/// reads (0: never).
async fn read_while_written(
    reader: NatsStore,
    t: ThreadId,
    done: Arc<AtomicBool>,
    seed: u64,
    own_every: u64,
) {
    let mut rng = Rng(seed);
    let mut reads = 0u64;
    let mut upto = 0u64;
    while !done.load(Ordering::Relaxed) || reads < 50 {
        reads += 1;
        let tip = reader.last_seq(&t).await.unwrap();
        if tip == 0 {
            tokio::task::yield_now().await;
            continue;
        }
        // What a follower does: read what it has not seen yet, up to the tip.
        if upto < tip {
            let got = reader.read(&t, upto + 1..=tip).await.unwrap();
            check_range("follow read", &got, upto + 1, tip, tip);
            upto = tip;
        }
        // A random range around the tip and beyond it.
        let from = 1 + rng.below(tip + 2);
        let to = from + rng.below(6);
        let got = reader.read(&t, from..=to).await.unwrap();
        if from <= tip {
            check_range("random read", &got, from, to, tip);
        }
        // A range ending just after the tip: what is appended meanwhile.
        let from = tip.saturating_sub(rng.below(3)).max(1);
        let got = reader.read(&t, from..=tip + 3).await.unwrap();
        check_range("tip read", &got, from, tip + 3, tip);
        if reads.is_multiple_of(10) {
            let all = reader.read_all(&t).await.unwrap();
            check_range("read_all", &all, 1, u64::MAX, tip);
        }
        if own_every > 0 && reads.is_multiple_of(own_every) {
            reader
                .append(&t, Expect::Any, vec![chat("r", &format!("r{reads}"))])
                .await
                .unwrap();
        }
    }
}

/// One run: a writer store appending while `readers` reader stores read.
/// `warm` makes each reader append to the thread first, so it starts with a
/// cached tip and batch positions that the writer then overtakes.
async fn run(warm: bool, seed: u64) {
    let server = NatsServer::start();
    let t = tid("shared");
    let writer = connect(&server.url(), test_options()).await;
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let reader = connect(&server.url(), test_options()).await;
        if warm {
            reader
                .append(&t, Expect::Any, vec![chat("r", "hello")])
                .await
                .unwrap();
            reader.read_all(&t).await.unwrap();
        }
        // The first reader only reads; the second also appends now and then.
        readers.push((reader, seed.wrapping_mul(31).wrapping_add(r), r * 7));
    }
    let done = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = readers
        .into_iter()
        .map(|(reader, seed, own_every)| {
            tokio::spawn(read_while_written(
                reader,
                t.clone(),
                done.clone(),
                seed | 1,
                own_every,
            ))
        })
        .collect();
    write(writer.clone(), t.clone(), seed | 1).await;
    done.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    // The thread is healthy: dense seqs from 1, as every reader saw it.
    let all = writer.read_all(&t).await.unwrap();
    check_range("final read_all", &all, 1, u64::MAX, all.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_from_a_cold_cache_while_another_store_appends() {
    run(false, 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_from_a_stale_warm_cache_while_another_store_appends() {
    run(true, 0x5eed_0002).await;
}

/// What a follower does: reads the thread to its tip, then subscribes from
/// the entry after it while another store appends the next entries. The
/// first entries delivered must be exactly those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_start_at_their_first_entry_while_another_store_appends() {
    let server = NatsServer::start();
    let t = tid("shared");
    let writer = connect(&server.url(), test_options()).await;
    let follower = connect(&server.url(), test_options()).await;
    writer
        .append(&t, Expect::Any, vec![chat("w", "first")])
        .await
        .unwrap();
    let mut rng = Rng(0x5eed_0003);
    for i in 0..SUBSCRIPTIONS {
        let tip = if i.is_multiple_of(5) {
            follower.read_all(&t).await.unwrap().last().unwrap().seq
        } else {
            follower.last_seq(&t).await.unwrap()
        };
        // Mostly right after the tip (the race), sometimes inside the thread.
        let from = if i % 4 == 3 {
            1 + rng.below(tip)
        } else {
            tip + 1
        };
        // The other store appends two entries while the subscription starts.
        let appending = async {
            for k in 0..2 {
                writer
                    .append(&t, Expect::Any, vec![chat("w", &format!("w{i}.{k}"))])
                    .await
                    .unwrap();
            }
        };
        let (sub, ()) = tokio::join!(follower.subscribe(&t, from), appending);
        let mut sub = sub.unwrap();
        for want in from..from + 2 {
            let got = tokio::time::timeout(Duration::from_secs(30), sub.next())
                .await
                .expect("subscription stalled")
                .expect("subscription ended")
                .unwrap_or_else(|e| panic!("subscription from {from} failed: {e}"));
            assert_eq!(got.seq, want, "subscription from {from}");
        }
    }
}
