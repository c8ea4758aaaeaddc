//! Thread-store throughput: appends (single entries and batches) and full
//! replays, for the memory and JSONL stores.
//!
//! `cargo bench --bench thread_stream`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use roundtable::thread_stream::jsonl::FsyncPolicy;
use roundtable::thread_stream::{
    Expect, JsonlOptions, JsonlStore, MemoryStore, NewEntry, ThreadId, ThreadStore,
};
use tokio::runtime::Runtime;

use roundtable_test_support::thread::sample_entry;

fn rt() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn jsonl(dir: &std::path::Path, fsync: FsyncPolicy) -> JsonlStore {
    JsonlStore::open_with(
        dir,
        JsonlOptions {
            fsync,
            ..JsonlOptions::default()
        },
    )
    .await
    .unwrap()
}

fn appends(c: &mut Criterion) {
    let rt = rt();
    let mut group = c.benchmark_group("append");
    for batch in [1usize, 64] {
        group.throughput(Throughput::Elements(batch as u64));
        let entries: Vec<NewEntry> = (0..batch).map(sample_entry).collect();

        let memory = MemoryStore::new();
        let t = ThreadId::new("bench").unwrap();
        group.bench_with_input(BenchmarkId::new("memory", batch), &batch, |b, _| {
            b.to_async(&rt)
                .iter(|| memory.append(&t, Expect::Any, entries.clone()))
        });

        for (name, fsync) in [
            ("jsonl-fsync-never", FsyncPolicy::Never),
            ("jsonl-fsync-batched", FsyncPolicy::default()),
            ("jsonl-fsync-always", FsyncPolicy::Always),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let store = rt.block_on(jsonl(dir.path(), fsync));
            group.bench_with_input(BenchmarkId::new(name, batch), &batch, |b, _| {
                b.to_async(&rt)
                    .iter(|| store.append(&t, Expect::Any, entries.clone()))
            });
            rt.block_on(store.close()).unwrap();
        }
    }
    group.finish();
}

fn replays(c: &mut Criterion) {
    let rt = rt();
    let n = 10_000usize;
    let t = ThreadId::new("replay").unwrap();
    let entries: Vec<NewEntry> = (0..n).map(sample_entry).collect();

    let dir = tempfile::tempdir().unwrap();
    let bytes = rt.block_on(async {
        let store = jsonl(dir.path(), FsyncPolicy::Never).await;
        for chunk in entries.chunks(500) {
            store.append(&t, Expect::Any, chunk.to_vec()).await.unwrap();
        }
        store.close().await.unwrap();
        std::fs::metadata(dir.path().join("replay.jsonl"))
            .unwrap()
            .len()
    });

    let mut group = c.benchmark_group("replay-10k");
    group.sample_size(20);

    // Entries per second.
    group.throughput(Throughput::Elements(n as u64));
    let memory = MemoryStore::new();
    rt.block_on(memory.append(&t, Expect::Any, entries.clone()))
        .unwrap();
    group.bench_function("memory/read_all", |b| {
        b.to_async(&rt).iter(|| memory.read_all(&t))
    });

    let store = Arc::new(rt.block_on(jsonl(dir.path(), FsyncPolicy::Never)));
    rt.block_on(store.last_seq(&t)).unwrap();
    group.bench_function("jsonl/read_all", |b| {
        b.to_async(&rt).iter(|| store.read_all(&t))
    });
    rt.block_on(store.close()).unwrap();

    // Bytes per second: opening the folder after a restart checks the whole
    // file (the recovery scan), then reads it back.
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("jsonl/open+scan+read_all", |b| {
        b.to_async(&rt).iter(|| async {
            let store = jsonl(dir.path(), FsyncPolicy::Never).await;
            let all = store.read_all(&t).await.unwrap();
            assert_eq!(all.len(), n);
            store.close().await.unwrap();
        })
    });
    group.finish();
}

fn entry_json(c: &mut Criterion) {
    let t = ThreadId::new("json").unwrap();
    let mut group = c.benchmark_group("entry-json");
    for (name, i) in [("chat", 0usize), ("assistant", 3)] {
        let e = sample_entry(i).into_entry(t.clone(), 1);
        let line = serde_json::to_vec(&e).unwrap();
        group.throughput(Throughput::Bytes(line.len() as u64));
        group.bench_function(format!("parse/{name}"), |b| {
            b.iter(|| serde_json::from_slice::<roundtable::thread_stream::Entry>(&line).unwrap())
        });
        group.bench_function(format!("write/{name}"), |b| {
            b.iter(|| serde_json::to_vec(&e).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, appends, replays, entry_json);
criterion_main!(benches);
