//! PostgreSQL store and mirror throughput against a local PostgreSQL server
//! (a fresh cluster started by the bench on a free loopback port): appends
//! (single entries and batches of 64), full replays of 10k entries, and how
//! many entries a second the mirror writes, beside the memory, JSONL and
//! NATS figures of the `thread_stream` and `nats_store` benches.
//!
//! `cargo bench --bench postgres_store --features postgres` (needs
//! PostgreSQL's server binaries: Debian's `postgresql` package).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use roundtable::thread_stream::{
    Expect, MemoryStore, MirrorOptions, NewEntry, PostgresMirror, PostgresOptions, PostgresStore,
    ThreadId, ThreadStore,
};
use roundtable_test_support::postgres::PostgresServer;
use tokio::runtime::Runtime;

use roundtable_test_support::thread::sample_entry;

fn rt() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn open(server: &PostgresServer) -> PostgresStore {
    PostgresStore::connect(&server.url(), PostgresOptions::default())
        .await
        .unwrap()
}

fn appends(c: &mut Criterion) {
    let rt = rt();
    let mut group = c.benchmark_group("append");
    // PostgreSQL's own durability (fsync at commit), and without fsync.
    for (name, server) in [
        ("postgres", PostgresServer::start_durable()),
        ("postgres-fsync-off", PostgresServer::start()),
    ] {
        let store = rt.block_on(open(&server));
        let t = ThreadId::new("bench").unwrap();
        for batch in [1usize, 64] {
            group.throughput(Throughput::Elements(batch as u64));
            let entries: Vec<NewEntry> = (0..batch).map(sample_entry).collect();
            group.bench_with_input(BenchmarkId::new(name, batch), &batch, |b, _| {
                b.to_async(&rt)
                    .iter(|| store.append(&t, Expect::Any, entries.clone()))
            });
        }
        rt.block_on(store.close()).unwrap();
    }
    group.finish();
}

fn replays(c: &mut Criterion) {
    let rt = rt();
    let server = PostgresServer::start_durable();
    let n = 10_000usize;
    let entries: Vec<NewEntry> = (0..n).map(sample_entry).collect();
    let writer = rt.block_on(open(&server));
    let t = ThreadId::new("replay").unwrap();
    rt.block_on(async {
        for chunk in entries.chunks(500) {
            writer
                .append(&t, Expect::Any, chunk.to_vec())
                .await
                .unwrap();
        }
    });
    let mut group = c.benchmark_group("replay-10k");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("postgres/read_all", |b| {
        b.to_async(&rt).iter(|| async {
            let all = writer.read_all(&t).await.unwrap();
            assert_eq!(all.len(), n);
        })
    });
    group.bench_function("postgres/subscribe", |b| {
        b.to_async(&rt).iter(|| async {
            let sub = writer.subscribe(&t, 1).await.unwrap();
            assert_eq!(sub.take(n).count().await, n);
        })
    });
    group.finish();
    rt.block_on(writer.close()).unwrap();
}

/// The mirror copying a 10k-entry thread of a memory store: from following
/// the thread to its last entry committed, a fresh thread each time.
fn mirror(c: &mut Criterion) {
    let rt = rt();
    let server = PostgresServer::start_durable();
    let n = 10_000usize;
    let entries: Vec<NewEntry> = (0..n).map(sample_entry).collect();
    let source = Arc::new(MemoryStore::new());
    let mirror = rt.block_on(async {
        PostgresMirror::start(
            source.clone() as Arc<dyn ThreadStore>,
            &server.url(),
            MirrorOptions::default(),
        )
        .unwrap()
    });
    // Connected and migrated before timing starts.
    let warm = ThreadId::new("warm").unwrap();
    rt.block_on(async {
        source
            .append(&warm, Expect::Any, entries[..1].to_vec())
            .await
            .unwrap();
        mirror.follow(&warm);
        mirror.wait_for(&warm, 1).await;
    });
    let mut group = c.benchmark_group("mirror-10k");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    let mut round = 0u64;
    group.bench_function("postgres", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let mut threads = Vec::new();
            for _ in 0..iters {
                round += 1;
                threads.push(ThreadId::new(format!("mirror-{round}")).unwrap());
            }
            let source = source.clone();
            let entries = entries.clone();
            let mirror = &mirror;
            async move {
                let mut total = Duration::ZERO;
                for t in threads {
                    for chunk in entries.chunks(1000) {
                        source
                            .append(&t, Expect::Any, chunk.to_vec())
                            .await
                            .unwrap();
                    }
                    let started = Instant::now();
                    mirror.follow(&t);
                    mirror.wait_for(&t, n as u64).await;
                    total += started.elapsed();
                }
                total
            }
        })
    });
    group.finish();
    rt.block_on(mirror.shutdown());
}

criterion_group!(benches, appends, replays, mirror);
criterion_main!(benches);
