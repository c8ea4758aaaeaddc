//! `PostgresMirror` against a real PostgreSQL server: threads of a JSONL
//! store mirrored with their runs, tool executions (from the real workspace
//! tools' calls and results) and file mutations; the database stopping in
//! the middle and coming back (nothing lost, nothing twice); a restarted
//! mirror resuming after its last seq; two mirrors at once writing each
//! entry once; new threads discovered.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::{
    AssistantBlock, AssistantMessage, StopReason, ToolCall, ToolResultMessage,
};
use roundtable_test_support::postgres::PostgresServer;
use roundtable_thread_stream::jsonl::FsyncPolicy;
use roundtable_thread_stream::{
    AssistantEntry, EntryBody, Expect, JsonlOptions, JsonlStore, MirrorOptions, NewEntry,
    PostgresMirror, Signal, ThreadId, ThreadStore, ToolResultEntry, TurnEnded, TurnStarted,
};
use roundtable_tools::{ToolContext, ToolRegistry, workspace::Workspace};

fn tid(s: &str) -> ThreadId {
    ThreadId::new(s).unwrap()
}

fn chat(author: &str, text: &str) -> NewEntry {
    NewEntry::new(author, EntryBody::chat(text))
}

async fn jsonl(dir: &std::path::Path) -> Arc<dyn ThreadStore> {
    Arc::new(
        JsonlStore::open_with(
            dir,
            JsonlOptions {
                fsync: FsyncPolicy::Never,
                ..JsonlOptions::default()
            },
        )
        .await
        .unwrap(),
    )
}

fn options() -> MirrorOptions {
    MirrorOptions {
        discover_every: Duration::from_millis(100),
        ..MirrorOptions::default()
    }
}

async fn admin(server: &PostgresServer) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

async fn wait_for(mirror: &PostgresMirror, thread: &ThreadId, seq: u64) {
    if tokio::time::timeout(Duration::from_secs(60), mirror.wait_for(thread, seq))
        .await
        .is_err()
    {
        panic!(
            "{thread} was not mirrored up to {seq}: {:?}",
            mirror.status().await
        );
    }
}

/// The seqs mirrored for `thread`, in order.
async fn mirrored_seqs(db: &tokio_postgres::Client, thread: &str) -> Vec<i64> {
    db.query(
        "SELECT seq FROM roundtable.mirror_entries WHERE thread = $1 ORDER BY seq",
        &[&thread],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn assistant(content: Vec<AssistantBlock>, input: u64, output: u64, cost: f64) -> AssistantMessage {
    let mut m = AssistantMessage::empty("openai-completions", "scripted", "offline", 1);
    m.content = content;
    m.usage.input = input;
    m.usage.output = output;
    m.usage.total_tokens = input + output;
    m.usage.cost.total = cost;
    m.stop_reason = StopReason::ToolUse;
    m
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args.as_object().unwrap().clone())
}

/// Appends one bot run as a runner writes it, the tool calls run by the real
/// workspace tools: a patch that edits one file and creates another, a read
/// of a file that does not exist (an error result), then the answer.
async fn append_run(store: &dyn ThreadStore, thread: &ThreadId, turn: &str, tools: &ToolRegistry) {
    let asked = store
        .append(thread, Expect::Any, vec![chat("alice", "@bot fix it")])
        .await
        .unwrap();
    let t: Arc<str> = turn.into();
    store
        .append(
            thread,
            Expect::Any,
            vec![NewEntry::new(
                "bot",
                EntryBody::TurnStarted(TurnStarted {
                    turn: t.clone(),
                    trigger: Some(asked[0].seq),
                    depth: 1,
                    reason: Some("mention".into()),
                }),
            )],
        )
        .await
        .unwrap();
    let patch = format!(
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,3 @@\n pub fn one() {{}}\n-pub fn two() {{}}\n+pub fn two() {{ 2 }}\n+pub fn {turn}() {{}}\n\
         --- /dev/null\n+++ b/notes/{turn}.md\n@@ -0,0 +1,2 @@\n+# {turn}\n+done\n"
    );
    let calls = [
        call(
            &format!("{turn}-patch"),
            "apply_patch",
            serde_json::json!({ "patch": patch }),
        ),
        call(
            &format!("{turn}-read"),
            "read_file",
            serde_json::json!({"path": "missing.txt"}),
        ),
    ];
    let first = assistant(
        calls
            .iter()
            .cloned()
            .map(AssistantBlock::ToolCall)
            .collect(),
        100,
        20,
        0.01,
    );
    let mut entries = vec![NewEntry::new(
        "bot",
        EntryBody::Assistant(AssistantEntry::new(Some(t.clone()), first)),
    )];
    for c in &calls {
        let result = tools
            .invoke_approved(c, ToolContext::new(c.id.clone()))
            .await
            .unwrap();
        let message: ToolResultMessage = result.into_message(c, 2);
        entries.push(NewEntry::new(
            "bot",
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some(t.clone()),
                message: message.into(),
            }),
        ));
    }
    let mut answer = assistant(vec![AssistantBlock::text("fixed")], 150, 30, 0.02);
    answer.stop_reason = StopReason::Stop;
    entries.push(NewEntry::new(
        "bot",
        EntryBody::Assistant(AssistantEntry::new(Some(t.clone()), answer)),
    ));
    store.append(thread, Expect::Any, entries).await.unwrap();
    let record = serde_json::json!({
        "turn": turn, "finish_reason": "stop", "text": "fixed", "rounds": 2,
        "usage": {"input": 250, "output": 50}, "duration_ms": 1234, "model": "scripted/offline"
    });
    store
        .append(
            thread,
            Expect::Any,
            vec![
                NewEntry::new(
                    "bot",
                    EntryBody::TurnEnded(TurnEnded {
                        turn: t,
                        reason: "stop".into(),
                    }),
                ),
                NewEntry::new(
                    "bot",
                    EntryBody::Signal(Signal {
                        name: "turn_result".into(),
                        data: record.into(),
                    }),
                ),
            ],
        )
        .await
        .unwrap();
}

fn workspace_tools(root: &std::path::Path) -> ToolRegistry {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn one() {}\npub fn two() {}\n",
    )
    .unwrap();
    let mut tools = ToolRegistry::new();
    tools
        .register_all(Workspace::open(root).unwrap().toolset())
        .unwrap();
    tools
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_tool_executions_and_file_mutations_are_derived() {
    let server = PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl(&dir.path().join("threads")).await;
    let tools = workspace_tools(&dir.path().join("ws"));
    let t = tid("work");
    append_run(&*store, &t, "u1", &tools).await;
    let last = store.last_seq(&t).await.unwrap();

    let mirror = PostgresMirror::start(store.clone(), &server.url(), options()).unwrap();
    mirror.follow(&t);
    wait_for(&mirror, &t, last).await;
    let db = admin(&server).await;

    // Entries: the JSONL file's lines, and their bodies as jsonb.
    let file = std::fs::read_to_string(dir.path().join("threads/work.jsonl")).unwrap();
    let stored: Vec<serde_json::Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rows = db
        .query(
            "SELECT seq, line, body ->> 'type', kind, turn FROM roundtable.mirror_entries WHERE thread = 'work' ORDER BY seq",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len() as u64, last);
    for (row, on_disk) in rows.iter().zip(&stored) {
        let line: String = row.get(1);
        let mut expected = on_disk.clone();
        // The file's batch marker is the JSONL store's own.
        expected.as_object_mut().unwrap().remove("more");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap(),
            expected
        );
        assert_eq!(row.get::<_, String>(2), row.get::<_, String>(3));
    }
    let turns: Vec<Option<String>> = rows.iter().map(|r| r.get(4)).collect();
    assert_eq!(turns[0], None, "the human's chat has no turn");
    assert!(
        turns[1..].iter().all(|t| t.as_deref() == Some("u1")),
        "{turns:?}"
    );

    // The run: lifecycle, summed usage, the runner's record.
    let run = db
        .query_one(
            "SELECT status, author, trigger_seq, wake_reason, end_reason, assistant_messages,
                    tool_calls, input_tokens, output_tokens, cost, rounds, duration_ms, model,
                    finish_reason, started_seq, ended_seq
             FROM roundtable.runs WHERE thread = 'work' AND turn = 'u1'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(run.get::<_, String>("status"), "ended");
    assert_eq!(run.get::<_, String>("author"), "bot");
    assert_eq!(run.get::<_, Option<i64>>("trigger_seq"), Some(1));
    assert_eq!(
        run.get::<_, Option<String>>("wake_reason").as_deref(),
        Some("mention")
    );
    assert_eq!(
        run.get::<_, Option<String>>("end_reason").as_deref(),
        Some("stop")
    );
    assert_eq!(run.get::<_, i32>("assistant_messages"), 2);
    assert_eq!(run.get::<_, i32>("tool_calls"), 2);
    assert_eq!(run.get::<_, i64>("input_tokens"), 250);
    assert_eq!(run.get::<_, i64>("output_tokens"), 50);
    assert!((run.get::<_, f64>("cost") - 0.03).abs() < 1e-12);
    assert_eq!(run.get::<_, Option<i32>>("rounds"), Some(2));
    assert_eq!(run.get::<_, Option<i64>>("duration_ms"), Some(1234));
    assert_eq!(
        run.get::<_, Option<String>>("model").as_deref(),
        Some("scripted/offline")
    );
    assert_eq!(
        run.get::<_, Option<String>>("finish_reason").as_deref(),
        Some("stop")
    );
    assert_eq!(run.get::<_, Option<i64>>("started_seq"), Some(2));
    assert_eq!(
        run.get::<_, Option<i64>>("ended_seq"),
        Some(last as i64 - 1)
    );

    // Tool executions: each call paired with its result.
    let tools_rows = db
        .query(
            "SELECT call_id, tool, status, arguments ->> 'path', result_text, call_seq, result_seq
             FROM roundtable.tool_executions WHERE thread = 'work' ORDER BY call_id",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(tools_rows.len(), 2);
    let patch = &tools_rows[0];
    assert_eq!(patch.get::<_, String>(0), "u1-patch");
    assert_eq!(patch.get::<_, String>(2), "ok");
    assert!(patch.get::<_, String>(4).starts_with("Patch applied"));
    let read = &tools_rows[1];
    assert_eq!(
        (read.get::<_, String>(1), read.get::<_, String>(2)),
        ("read_file".to_string(), "error".to_string())
    );
    assert_eq!(
        read.get::<_, Option<String>>(3).as_deref(),
        Some("missing.txt")
    );
    assert!(read.get::<_, i64>(6) > read.get::<_, i64>(5));

    // File mutations: from the patch, applied because its result was ok.
    let files = db
        .query(
            "SELECT path, change, lines_added, lines_removed, applied
             FROM roundtable.file_mutations WHERE thread = 'work' ORDER BY path",
            &[],
        )
        .await
        .unwrap();
    let files: Vec<(String, String, i32, i32, Option<bool>)> = files
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    assert_eq!(
        files,
        vec![
            ("notes/u1.md".into(), "added".into(), 2, 0, Some(true)),
            ("src/lib.rs".into(), "modified".into(), 2, 1, Some(true)),
        ]
    );
    // And the patch really changed the workspace as recorded.
    assert!(dir.path().join("ws/notes/u1.md").is_file());

    // A second run whose patch no longer applies: its changes are not applied.
    append_run(&*store, &t, "u2", &tools).await;
    let last = store.last_seq(&t).await.unwrap();
    wait_for(&mirror, &t, last).await;
    let applied: Vec<Option<bool>> = db
        .query(
            "SELECT applied FROM roundtable.file_mutations WHERE call_id = 'u2-patch' ORDER BY path",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(applied, vec![Some(false), Some(false)]);
    let status = mirror.status().await;
    assert!(status.connected);
    assert_eq!(status.threads.len(), 1);
    assert_eq!(status.threads[0].lag, 0);
    assert_eq!(status.entries_written, last);
    mirror.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_stopping_mid_mirror_loses_nothing_and_writes_nothing_twice() {
    let mut server = PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl(dir.path()).await;
    let mirror = PostgresMirror::start(store.clone(), &server.url(), options()).unwrap();
    let threads = [tid("busy-a"), tid("busy-b")];
    for t in &threads {
        mirror.follow(t);
    }
    let total = 600u64;
    let writer = {
        let store = store.clone();
        let threads = threads.clone();
        tokio::spawn(async move {
            for i in 0..total {
                for t in &threads {
                    store
                        .append(t, Expect::Any, vec![chat("w", &format!("m{i}"))])
                        .await
                        .unwrap();
                }
                if i % 20 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    // Part of it mirrored, then the database goes away under the writer.
    wait_for(&mirror, &threads[0], 50).await;
    server.stop();
    writer.await.unwrap();
    // The store goes on while the database is away.
    let extra = 100u64;
    for i in 0..extra {
        for t in &threads {
            store
                .append(t, Expect::Any, vec![chat("w", &format!("outage {i}"))])
                .await
                .unwrap();
        }
    }
    let total = total + extra;
    let status = mirror.status().await;
    for t in &status.threads {
        assert_eq!(t.source_last, Some(total));
        assert!(t.lag >= extra, "{status:?}");
    }
    server.start_again();
    for t in &threads {
        wait_for(&mirror, t, total).await;
    }
    let db = admin(&server).await;
    for t in &threads {
        assert_eq!(
            mirrored_seqs(&db, t.as_str()).await,
            (1..=total as i64).collect::<Vec<_>>()
        );
    }
    let status = mirror.status().await;
    assert!(status.connected);
    assert!(status.errors > 0, "the outage was seen: {status:?}");
    assert_eq!(status.entries_written, 2 * total, "nothing written twice");
    assert!(status.threads.iter().all(|t| t.lag == 0), "{status:?}");
    mirror.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_mirror_resumes_after_the_last_mirrored_seq() {
    let server = PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl(&dir.path().join("threads")).await;
    let tools = workspace_tools(&dir.path().join("ws"));
    let t = tid("resume");
    append_run(&*store, &t, "u1", &tools).await;
    let first = store.last_seq(&t).await.unwrap();
    let mirror = PostgresMirror::start(store.clone(), &server.url(), options()).unwrap();
    mirror.follow(&t);
    wait_for(&mirror, &t, first).await;
    mirror.shutdown().await;

    append_run(&*store, &t, "u2", &tools).await;
    let last = store.last_seq(&t).await.unwrap();
    let again = PostgresMirror::start(store.clone(), &server.url(), options()).unwrap();
    again.follow(&t);
    wait_for(&again, &t, last).await;
    assert_eq!(again.status().await.entries_written, last - first);
    let db = admin(&server).await;
    assert_eq!(
        mirrored_seqs(&db, "resume").await,
        (1..=last as i64).collect::<Vec<_>>()
    );
    // Each run counted once.
    let tokens: Vec<i64> = db
        .query(
            "SELECT input_tokens FROM roundtable.runs WHERE thread = 'resume' ORDER BY turn",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tokens, vec![250, 250]);
    again.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_mirrors_at_once_write_every_entry_and_sum_once() {
    let server = PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl(&dir.path().join("threads")).await;
    let tools = workspace_tools(&dir.path().join("ws"));
    let t = tid("twice");
    let a = PostgresMirror::start(store.clone(), &server.url(), options()).unwrap();
    let b = PostgresMirror::start(store.clone(), &server.url(), options()).unwrap();
    a.follow(&t);
    b.follow(&t);
    for turn in ["u1", "u2", "u3", "u4"] {
        append_run(&*store, &t, turn, &tools).await;
    }
    let last = store.last_seq(&t).await.unwrap();
    wait_for(&a, &t, last).await;
    wait_for(&b, &t, last).await;
    let written = a.status().await.entries_written + b.status().await.entries_written;
    assert_eq!(written, last, "each entry written by one of them");
    let db = admin(&server).await;
    assert_eq!(
        mirrored_seqs(&db, "twice").await,
        (1..=last as i64).collect::<Vec<_>>()
    );
    let sums: (i64, i64) = {
        let row = db
            .query_one(
                "SELECT sum(input_tokens)::int8, sum(assistant_messages)::int8 FROM roundtable.runs WHERE thread = 'twice'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(sums, (4 * 250, 4 * 2));
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_all_finds_threads_old_and_new() {
    let server = PostgresServer::start();
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl(dir.path()).await;
    store
        .append(&tid("old"), Expect::Any, vec![chat("a", "before")])
        .await
        .unwrap();
    let mirror = PostgresMirror::start(store.clone(), &server.url(), options()).unwrap();
    mirror.follow_all();
    wait_for(&mirror, &tid("old"), 1).await;
    store
        .append(
            &tid("new"),
            Expect::Any,
            vec![chat("b", "later"), chat("b", "more")],
        )
        .await
        .unwrap();
    wait_for(&mirror, &tid("new"), 2).await;
    let status = mirror.status().await;
    let names: Vec<&str> = status.threads.iter().map(|t| t.thread.as_str()).collect();
    assert_eq!(names, ["new", "old"]);
    mirror.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_without_its_database_never_holds_the_store_back() {
    // Nothing listens here: the mirror keeps trying, the store is unaffected.
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        roundtable_test_support::ports::free_port()
    );
    let dir = tempfile::tempdir().unwrap();
    let store = jsonl(dir.path()).await;
    let mirror = PostgresMirror::start(store.clone(), &url, options()).unwrap();
    let t = tid("alone");
    mirror.follow(&t);
    let mut sub = store.subscribe(&t, 1).await.unwrap();
    for i in 1..=200u64 {
        let written = store
            .append(&t, Expect::LastSeq(i - 1), vec![chat("a", "x")])
            .await
            .unwrap();
        assert_eq!(written[0].seq, i);
    }
    use futures::StreamExt;
    assert_eq!(sub.by_ref().take(200).count().await, 200);
    // Wait for the writer to report its failure.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = mirror.status().await;
        if status.errors > 0 || std::time::Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!status.connected);
    assert!(status.errors > 0);
    assert!(status.last_error.is_some());
    assert_eq!(status.threads[0].lag, 200);
    // A malformed URL is the only thing `start` refuses.
    assert!(PostgresMirror::start(store.clone(), "postgres://[", options()).is_err());
    mirror.shutdown().await;
}
