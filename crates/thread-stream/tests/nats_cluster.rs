//! The point of the NATS store: a three-node JetStream cluster on loopback
//! with a replicated stream keeps taking appends and feeding subscriptions
//! when the node leading the stream is killed mid-run.

#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod nats_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use conformance::{chat, tid};
use futures::StreamExt;
use nats_support::{connect, test_options};
use roundtable_test_support::nats::NatsServer;
use roundtable_thread_stream::{Entry, EntryStream, Expect, NatsOptions, ThreadStore};

const TOTAL: u64 = 90;

/// The name of the server leading the stream, asked with a plain client.
async fn stream_leader(url: &str, stream: &str) -> String {
    let client = async_nats::connect(url).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut s = js.get_stream(stream).await.unwrap();
    let info = s.info().await.unwrap();
    let cluster = info.cluster.clone().expect("a clustered stream");
    assert_eq!(cluster.replicas.len(), 2, "the stream has three copies");
    cluster.leader.expect("the stream has a leader")
}

/// Collects `n` entries from a subscription in a task.
fn collect(mut sub: EntryStream, n: u64) -> tokio::task::JoinHandle<Vec<Entry>> {
    tokio::spawn(async move {
        let mut out = Vec::new();
        while (out.len() as u64) < n {
            let next = tokio::time::timeout(Duration::from_secs(45), sub.next())
                .await
                .unwrap_or_else(|_| panic!("subscription stalled after {} entries", out.len()));
            out.push(
                next.expect("subscription ended")
                    .expect("subscription failed"),
            );
        }
        out
    })
}

fn assert_dense(entries: &[Entry]) {
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_thread_survives_losing_its_stream_leader() {
    let mut nodes = NatsServer::cluster(3);
    let urls: Vec<String> = nodes.iter().map(NatsServer::url).collect();
    let options = NatsOptions {
        replicas: 3,
        ..test_options()
    };
    let store = connect(&urls.join(","), options.clone()).await;
    let t = tid("replicated");
    let early = collect(store.subscribe(&t, 1).await.unwrap(), TOTAL);

    // One writer appends all along, strictly after what it wrote last;
    // the node leading the stream is killed while it runs.
    let progress = Arc::new(AtomicU64::new(0));
    let writer = {
        let store = store.clone();
        let t = t.clone();
        let progress = progress.clone();
        tokio::spawn(async move {
            let mut appended = 0u64;
            while appended < TOTAL {
                let batch = if appended.is_multiple_of(10) && appended + 2 <= TOTAL {
                    vec![chat("w", "batch a"), chat("w", "batch b")]
                } else {
                    vec![chat("w", &format!("m{}", appended + 1))]
                };
                let n = batch.len() as u64;
                let written = store
                    .append(&t, Expect::LastSeq(appended), batch)
                    .await
                    .unwrap();
                assert_eq!(written[0].seq, appended + 1);
                appended += n;
                progress.store(appended, Ordering::Release);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    while progress.load(Ordering::Acquire) < TOTAL / 3 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // A new leader is elected from the two replicas, and the store carries
    // on through it.
    let leader = stream_leader(&urls[0], &options.stream).await;
    let victim = nodes.iter().position(|n| n.name == leader).unwrap();
    nodes[victim].kill();
    let survivors: Vec<String> = (0..3)
        .filter(|i| *i != victim)
        .map(|i| urls[i].clone())
        .collect();
    // A subscriber that starts after the loss gets the whole history too.
    let late = collect(store.subscribe(&t, 1).await.unwrap(), TOTAL);
    writer.await.unwrap();

    let early = early.await.unwrap();
    let late = late.await.unwrap();
    assert_dense(&early);
    assert_eq!(early, late);
    let stored = store.read_all(&t).await.unwrap();
    assert_eq!(stored, early);
    // Another host, connected to the survivors only, sees the same thread.
    let other = connect(&survivors.join(","), options).await;
    assert_eq!(other.read_all(&t).await.unwrap(), stored);
    assert_ne!(
        stream_leader(&survivors[0], "ROUNDTABLE_THREADS").await,
        leader
    );
}
