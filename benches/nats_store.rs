//! NATS JetStream store throughput against a local `nats-server -js` (started
//! by the bench on a free loopback port, file storage in a temp folder):
//! appends (single entries and batches of 64) and full replays, beside the
//! memory and JSONL figures of the `thread_stream` bench.
//!
//! `cargo bench --bench nats_store --features nats` (needs `nats-server` on
//! PATH or at `/usr/sbin/nats-server`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use roundtable::thread_stream::{Expect, NatsOptions, NatsStore, NewEntry, ThreadId, ThreadStore};
use tokio::runtime::Runtime;

use roundtable_test_support::nats::NatsServer;

use roundtable_test_support::thread::sample_entry;

/// Entries with fresh ids (the stream drops a batch whose first id it saw
/// within its duplicate window, as it should for a retried publish).
fn fresh(entries: &[NewEntry]) -> Vec<NewEntry> {
    entries
        .iter()
        .map(|e| NewEntry::new(e.author.clone(), e.body.clone()).at(e.at))
        .collect()
}

fn rt() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn appends(c: &mut Criterion) {
    let rt = rt();
    let server = NatsServer::start();
    let store = rt
        .block_on(NatsStore::connect(&server.url(), NatsOptions::default()))
        .unwrap();
    let t = ThreadId::new("bench").unwrap();
    let mut group = c.benchmark_group("append");
    for batch in [1usize, 64] {
        group.throughput(Throughput::Elements(batch as u64));
        let entries: Vec<NewEntry> = (0..batch).map(sample_entry).collect();
        group.bench_with_input(BenchmarkId::new("nats", batch), &batch, |b, _| {
            b.to_async(&rt)
                .iter(|| store.append(&t, Expect::Any, fresh(&entries)))
        });
    }
    group.finish();
    rt.block_on(store.close()).unwrap();
}

fn replays(c: &mut Criterion) {
    let rt = rt();
    let server = NatsServer::start();
    let n = 10_000usize;
    let entries: Vec<NewEntry> = (0..n).map(sample_entry).collect();
    let writer = rt
        .block_on(NatsStore::connect(&server.url(), NatsOptions::default()))
        .unwrap();
    // The same 10k entries twice: in batches of 500 (20 messages), and one
    // append (one message) per entry.
    let batched = ThreadId::new("replay-batched").unwrap();
    let single = ThreadId::new("replay-single").unwrap();
    rt.block_on(async {
        for chunk in entries.chunks(500) {
            writer
                .append(&batched, Expect::Any, fresh(chunk))
                .await
                .unwrap();
        }
        for e in &entries {
            writer
                .append(&single, Expect::Any, fresh(std::slice::from_ref(e)))
                .await
                .unwrap();
        }
    });

    let mut group = c.benchmark_group("replay-10k");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    // A reader in another process knows nothing of the thread: a fresh
    // store per read, as after a restart.
    for (name, t) in [
        ("nats-500-per-message", &batched),
        ("nats-1-per-message", &single),
    ] {
        group.bench_function(format!("{name}/read_all"), |b| {
            b.to_async(&rt).iter(|| async {
                let store = NatsStore::connect(&server.url(), NatsOptions::default())
                    .await
                    .unwrap();
                let all = store.read_all(t).await.unwrap();
                assert_eq!(all.len(), n);
            })
        });
        group.bench_function(format!("{name}/subscribe"), |b| {
            b.to_async(&rt).iter(|| async {
                let sub = writer.subscribe(t, 1).await.unwrap();
                let got = sub.take(n).count().await;
                assert_eq!(got, n);
            })
        });
    }
    group.finish();
    rt.block_on(writer.close()).unwrap();
}

criterion_group!(benches, appends, replays);
criterion_main!(benches);
