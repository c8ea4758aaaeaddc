//! Tools: registry dispatch of `read_file` on a small file (argument check,
//! panic guard, blocking read, output bound), path confinement, a regex
//! search over a 200-file tree, applying a three-hunk patch, and cutting
//! 1 MiB of output.
//!
//! `cargo bench --bench tools`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use roundtable::providers::ToolCall;
use roundtable::tools::workspace::Workspace;
use roundtable::tools::{ApprovalPolicy, OutputLimit, ToolContext, ToolRegistry, ToolResult};

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new("call_1", name, args.as_object().unwrap().clone())
}

fn source_file(i: usize) -> String {
    (0..200)
        .map(|l| format!("pub fn function_{i}_{l}(x: u32) -> u32 {{ x + {l} }}\n"))
        .collect()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for i in 0..200 {
        let sub = dir.path().join(format!("src/mod_{:02}", i / 20));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("file_{i}.rs")), source_file(i)).unwrap();
    }
    let ws = Workspace::open(dir.path()).unwrap();
    let mut registry = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    registry.register_all(ws.toolset()).unwrap();

    std::fs::write(dir.path().join("small.txt"), "hello\n").unwrap();
    let read = call("read_file", serde_json::json!({"path": "small.txt"}));
    c.bench_function("registry_invoke_read_file_small", |b| {
        b.to_async(&rt).iter(|| async {
            registry
                .invoke(&read, ToolContext::new("call_1"))
                .await
                .unwrap()
        })
    });

    c.bench_function("workspace_resolve_nested_path", |b| {
        b.iter(|| ws.root().resolve("src/mod_03/file_61.rs").unwrap())
    });

    let search = call(
        "search",
        serde_json::json!({"pattern": "function_123_19[0-9]"}),
    );
    let mut group = c.benchmark_group("search");
    group.throughput(Throughput::Bytes((200 * source_file(0).len()) as u64));
    group.sample_size(20);
    group.bench_function("regex_200_files", |b| {
        b.to_async(&rt).iter(|| async {
            let r = registry
                .invoke(&search, ToolContext::new("call_1"))
                .await
                .unwrap();
            assert!(r.ok);
            r
        })
    });
    group.finish();

    let target = dir.path().join("src/mod_00/file_0.rs");
    let original = source_file(0);
    let patch = "--- a/src/mod_00/file_0.rs\n+++ b/src/mod_00/file_0.rs\n\
        @@ -10,3 +10,3 @@\n pub fn function_0_9(x: u32) -> u32 { x + 9 }\n-pub fn function_0_10(x: u32) -> u32 { x + 10 }\n+pub fn function_0_10(x: u32) -> u32 { x + 100 }\n pub fn function_0_11(x: u32) -> u32 { x + 11 }\n\
        @@ -100,3 +100,3 @@\n pub fn function_0_99(x: u32) -> u32 { x + 99 }\n-pub fn function_0_100(x: u32) -> u32 { x + 100 }\n+pub fn function_0_100(x: u32) -> u32 { x + 1000 }\n pub fn function_0_101(x: u32) -> u32 { x + 101 }\n\
        @@ -190,3 +190,3 @@\n pub fn function_0_189(x: u32) -> u32 { x + 189 }\n-pub fn function_0_190(x: u32) -> u32 { x + 190 }\n+pub fn function_0_190(x: u32) -> u32 { x + 1900 }\n pub fn function_0_191(x: u32) -> u32 { x + 191 }\n";
    let apply = call("apply_patch", serde_json::json!({"patch": patch}));
    c.bench_function("apply_patch_three_hunks", |b| {
        b.to_async(&rt).iter_batched(
            || std::fs::write(&target, &original).unwrap(),
            |()| async {
                let r = registry
                    .invoke(&apply, ToolContext::new("call_1"))
                    .await
                    .unwrap();
                assert!(r.ok, "{}", r.text_content());
                r
            },
            BatchSize::PerIteration,
        )
    });

    let big = "x".repeat(99) + "\n";
    let big = big.repeat(10 * 1024);
    let mut group = c.benchmark_group("output_limit");
    group.throughput(Throughput::Bytes(big.len() as u64));
    group.bench_function("cut_1mib", |b| {
        b.iter_batched(
            || ToolResult::text(big.clone()),
            |mut r| {
                OutputLimit::default().apply(&mut r);
                r
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
