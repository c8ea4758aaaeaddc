//! `PostgresStore` against a real PostgreSQL server (a fresh cluster per
//! test, started by the test support): the store conformance suite, then
//! what only a database store must do: store the lines the JSONL store
//! writes, wake subscribers in other processes through `NOTIFY`, survive
//! dropped connections and a server restart, and fail clearly when nothing
//! listens.

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;

use std::sync::Arc;
use std::time::{Duration, Instant};

use conformance::{chat, tid};
use futures::StreamExt;
use roundtable_test_support::ports::free_port;
use roundtable_test_support::postgres::PostgresServer;
use roundtable_thread_stream::jsonl::FsyncPolicy;
use roundtable_thread_stream::{
    Entry, EntryStream, Expect, JsonlOptions, JsonlStore, NewEntry, PostgresOptions, PostgresStore,
    StoreError, ThreadStore,
};

/// Short budgets, and a poll interval long enough that only a notification
/// can wake a subscriber within a test's patience.
fn options() -> PostgresOptions {
    PostgresOptions {
        retry_for: Duration::from_secs(30),
        poll_interval: Duration::from_secs(600),
        ..PostgresOptions::default()
    }
}

async fn open(server: &PostgresServer) -> PostgresStore {
    PostgresStore::connect(&server.url(), options())
        .await
        .unwrap_or_else(|e| panic!("cannot open the store: {e}\n{}", server.log()))
}

conformance_suite!(async {
    let server = PostgresServer::start();
    let store = open(&server).await;
    (Arc::new(store) as Arc<dyn ThreadStore>, server)
});

async fn next(sub: &mut EntryStream) -> Entry {
    tokio::time::timeout(Duration::from_secs(30), sub.next())
        .await
        .expect("subscription stalled")
        .expect("subscription ended")
        .expect("subscription failed")
}

/// A plain connection for looking at the tables and ending connections.
async fn admin(server: &PostgresServer) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Ends every connection to the server but the caller's, as a failover or
/// an administrator would: `pg_terminate_backend`. Returns how many.
async fn terminate_others(admin: &tokio_postgres::Client) -> i64 {
    admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Waits until `n` connections listen for appends (the stores' listeners,
/// which reconnect in the background after being ended).
async fn listeners_up(admin: &tokio_postgres::Client, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listening: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if listening >= n {
            return;
        }
        assert!(Instant::now() < deadline, "the listeners did not come back");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A realistic mix of entries: chat, a tool round, a chunk, a signal.
fn mixed_entries() -> Vec<NewEntry> {
    use roundtable_providers::{AssistantBlock, AssistantMessage, ToolCall, ToolResultMessage};
    use roundtable_thread_stream::{AssistantEntry, Chunk, EntryBody, Signal, ToolResultEntry};
    let mut message = AssistantMessage::empty("anthropic-messages", "anthropic", "claude", 1);
    let mut args = serde_json::Map::new();
    args.insert("path".into(), "src/ü.rs".into());
    let call = ToolCall::new("call-1", "read_file", args);
    message.content.push(AssistantBlock::text(
        "quote \" backslash \\ tab \t nul \u{0} ✓",
    ));
    message.content.push(AssistantBlock::ToolCall(call.clone()));
    message.usage.cost.total = 0.1 + 0.2;
    vec![
        chat("alice", "hi @bot, 'single' and \"double\" quotes"),
        NewEntry::new(
            "bot",
            EntryBody::Assistant(AssistantEntry::new(Some("t1".into()), message)),
        ),
        NewEntry::new(
            "bot",
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some("t1".into()),
                message: ToolResultMessage::text(&call, "fn main() {}\n", false, 2).into(),
            }),
        ),
        NewEntry::new("bot", EntryBody::Chunk(Chunk::text("t1", "🎉"))),
        NewEntry::new(
            "nul\u{0}author",
            EntryBody::Signal(Signal {
                name: "typing".into(),
                data: serde_json::json!({"big": 1e300, "neg": -0.0, "n": 12345678901234567u64})
                    .into(),
            }),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_lines_are_the_jsonl_stores_lines_byte_for_byte() {
    let server = PostgresServer::start();
    let store = open(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let jsonl = JsonlStore::open_with(
        dir.path(),
        JsonlOptions {
            fsync: FsyncPolicy::Never,
            ..JsonlOptions::default()
        },
    )
    .await
    .unwrap();
    let t = tid("same-bytes");
    // One entry per append, so the JSONL lines carry no batch marker.
    for entry in mixed_entries() {
        jsonl
            .append(&t, Expect::Any, vec![entry.clone()])
            .await
            .unwrap();
        store.append(&t, Expect::Any, vec![entry]).await.unwrap();
    }
    let file = std::fs::read_to_string(dir.path().join("same-bytes.jsonl")).unwrap();
    let rows = admin(&server)
        .await
        .query(
            "SELECT line FROM roundtable.entries WHERE thread = $1 ORDER BY seq",
            &[&"same-bytes"],
        )
        .await
        .unwrap();
    let lines: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        lines.join("\n") + "\n",
        file,
        "the stored lines are the file's"
    );
    let from_pg = store.read_all(&t).await.unwrap();
    let from_file = jsonl.read_all(&t).await.unwrap();
    assert_eq!(from_pg, from_file);
    for (a, b) in from_pg.iter().zip(&from_file) {
        assert_eq!(
            serde_json::to_string(a).unwrap(),
            serde_json::to_string(b).unwrap()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_store_on_the_database_is_woken_by_notifications() {
    let server = PostgresServer::start();
    let reader = open(&server).await;
    let writer = open(&server).await;
    let t = tid("notify");
    let mut sub = reader.subscribe(&t, 1).await.unwrap();
    for i in 1..=5u64 {
        let started = Instant::now();
        writer
            .append(
                &t,
                Expect::LastSeq(i - 1),
                vec![chat("w", &format!("m{i}"))],
            )
            .await
            .unwrap();
        assert_eq!(next(&mut sub).await.seq, i);
        // The poll interval is 10 minutes: only the notification woke it.
        assert!(started.elapsed() < Duration::from_secs(30));
    }
    // Optimistic concurrency holds across connections too.
    let (a, b) = tokio::join!(
        reader.append(&t, Expect::LastSeq(5), vec![chat("r", "r6")]),
        writer.append(&t, Expect::LastSeq(5), vec![chat("w", "w6")]),
    );
    assert!(a.is_ok() != b.is_ok(), "exactly one writer wins");
    assert_eq!(next(&mut sub).await.seq, 6);
    assert_eq!(reader.read_all(&t).await.unwrap().len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_and_appends_survive_terminated_connections() {
    let server = PostgresServer::start();
    let store = open(&server).await;
    let other = open(&server).await;
    let admin = admin(&server).await;
    let t = tid("terminated");
    let first: Vec<NewEntry> = (1..=3).map(|i| chat("a", &format!("m{i}"))).collect();
    store.append(&t, Expect::Any, first).await.unwrap();
    let mut sub = store.subscribe(&t, 1).await.unwrap();
    for seq in 1..=3 {
        assert_eq!(next(&mut sub).await.seq, seq);
    }
    for round in 0..3u64 {
        // Both stores' connections, their listeners included.
        listeners_up(&admin, 2).await;
        assert!(terminate_others(&admin).await >= 2);
        // Another process writes: only a new listener can hear it.
        let seq = 4 + 2 * round;
        other
            .append(&t, Expect::LastSeq(seq - 1), vec![chat("b", "from other")])
            .await
            .unwrap();
        assert_eq!(next(&mut sub).await.seq, seq);
        // This store writes through a new connection.
        store
            .append(&t, Expect::LastSeq(seq), vec![chat("a", "from store")])
            .await
            .unwrap();
        assert_eq!(next(&mut sub).await.seq, seq + 1);
    }
    let all = store.read_all(&t).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=9).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_and_subscriptions_ride_out_a_server_restart() {
    let mut server = PostgresServer::start();
    let store = open(&server).await;
    let t = tid("restart");
    for i in 1..=3 {
        store
            .append(&t, Expect::Any, vec![chat("a", &format!("before {i}"))])
            .await
            .unwrap();
    }
    let mut sub = store.subscribe(&t, 1).await.unwrap();
    for seq in 1..=3 {
        assert_eq!(next(&mut sub).await.seq, seq);
    }
    server.stop();
    // An append while the server is down waits for it (within retry_for).
    let pending = {
        let store = store.clone();
        let t = t.clone();
        tokio::spawn(async move {
            store
                .append(&t, Expect::LastSeq(3), vec![chat("a", "during")])
                .await
        })
    };
    // Started again once the append has begun retrying.
    let server = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(300));
        server.start_again();
        server
    })
    .await
    .unwrap();
    let written = pending.await.unwrap().unwrap();
    assert_eq!(written[0].seq, 4);
    store
        .append(&t, Expect::LastSeq(4), vec![chat("a", "after")])
        .await
        .unwrap();
    assert_eq!(next(&mut sub).await.seq, 4);
    assert_eq!(next(&mut sub).await.seq, 5);
    assert_eq!(store.read_all(&t).await.unwrap().len(), 5);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_keep_stores_apart() {
    let server = PostgresServer::start();
    let a = open(&server).await;
    let b = PostgresStore::connect(
        &server.url(),
        PostgresOptions {
            schema: "tenant_b".into(),
            ..options()
        },
    )
    .await
    .unwrap();
    let t = tid("shared-name");
    a.append(&t, Expect::LastSeq(0), vec![chat("a", "in a")])
        .await
        .unwrap();
    b.append(&t, Expect::LastSeq(0), vec![chat("b", "in b")])
        .await
        .unwrap();
    assert_eq!(a.read_all(&t).await.unwrap()[0].author.as_ref(), "a");
    assert_eq!(b.read_all(&t).await.unwrap()[0].author.as_ref(), "b");
    // A bad schema name never reaches SQL.
    let bad = PostgresStore::connect(
        &server.url(),
        PostgresOptions {
            schema: "x\"; DROP TABLE y; --".into(),
            ..options()
        },
    )
    .await;
    assert!(matches!(bad, Err(StoreError::Backend(m)) if m.contains("invalid PostgreSQL schema")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_from_a_newer_build_is_refused_and_nothing_is_applied_twice() {
    let server = PostgresServer::start();
    let store = open(&server).await;
    let t = tid("kept");
    store
        .append(&t, Expect::LastSeq(0), vec![chat("a", "kept")])
        .await
        .unwrap();
    let admin = admin(&server).await;
    let versions = || async {
        let rows = admin
            .query(
                "SELECT version FROM roundtable.schema_migrations ORDER BY version",
                &[],
            )
            .await
            .unwrap();
        rows.iter().map(|r| r.get(0)).collect::<Vec<i32>>()
    };
    let applied = versions().await;
    // Opened again: every migration is there already, none runs again.
    let again = open(&server).await;
    assert_eq!(versions().await, applied);
    assert_eq!(again.read_all(&t).await.unwrap().len(), 1);
    // A newer build migrated the schema: this one refuses it by name.
    admin
        .execute(
            "INSERT INTO roundtable.schema_migrations (version, name) VALUES (999, 'future')",
            &[],
        )
        .await
        .unwrap();
    let refused = PostgresStore::connect(&server.url(), options()).await;
    assert!(
        matches!(&refused, Err(StoreError::Backend(m)) if m.contains("migration 999") && m.contains("upgrade roundtable")),
        "{:?}",
        refused.err()
    );
    assert_eq!(again.read_all(&t).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_clear_error() {
    let port = free_port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let started = Instant::now();
    let err = PostgresStore::connect(&url, options())
        .await
        .err()
        .expect("connected to a port nobody listens on");
    assert!(started.elapsed() < Duration::from_secs(10));
    match err {
        StoreError::Backend(message) => {
            assert!(
                message.contains("cannot connect to PostgreSQL"),
                "{message}"
            );
            assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
        }
        other => panic!("expected a backend error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_row_is_a_corrupt_error_not_a_panic() {
    let server = PostgresServer::start();
    let store = open(&server).await;
    let t = tid("damaged");
    store
        .append(&t, Expect::Any, vec![chat("a", "one"), chat("a", "two")])
        .await
        .unwrap();
    admin(&server)
        .await
        .execute(
            "UPDATE roundtable.entries SET line = '{not json' WHERE thread = 'damaged' AND seq = 2",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(store.read(&t, 1..=1).await.unwrap().len(), 1);
    let err = store.read_all(&t).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { location, .. } if location == "entry 2"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_under_killed_connections_land_once_each() {
    let server = PostgresServer::start();
    let store = open(&server).await;
    let admin = admin(&server).await;
    let t = tid("killed");
    let total = 200usize;
    let appended = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let store = store.clone();
        let t = t.clone();
        let appended = appended.clone();
        tokio::spawn(async move {
            for i in 0..total {
                // Every append must succeed: a lost connection is retried,
                // and a batch whose answer was lost is found, not repeated.
                store
                    .append(&t, Expect::Any, vec![chat("w", &format!("{i}"))])
                    .await
                    .unwrap();
                appended.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        })
    };
    let mut kills = 0;
    while !writer.is_finished() {
        // Connections are ended at any point of an append, but never again
        // before an append landed since the last time: on a busy machine,
        // where reconnecting takes longer than the pace of the kills, the
        // writer would otherwise never get an append through.
        let before = appended.load(std::sync::atomic::Ordering::SeqCst);
        kills += terminate_others(&admin).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
        while appended.load(std::sync::atomic::Ordering::SeqCst) == before && !writer.is_finished()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    writer.await.unwrap();
    assert!(kills > 0, "no connection was ended");
    let all = store.read_all(&t).await.unwrap();
    let texts: Vec<String> = all
        .iter()
        .map(|e| match &e.body {
            roundtable_thread_stream::EntryBody::Chat(c) => c.text.to_string(),
            _ => String::new(),
        })
        .collect();
    assert_eq!(
        texts,
        (0..total).map(|i| i.to_string()).collect::<Vec<_>>(),
        "every append landed once, in order"
    );
}

/// A loopback proxy in front of the server that, once armed with a needle,
/// lets the next request holding those bytes through and drops the
/// connection that sent it as soon as the server answers: the statement ran
/// (and committed), its answer is lost. The needle picks the connection: the
/// store's listener connects and speaks on its own schedule, and dooming
/// whichever connection spoke first after arming would sometimes pick it.
struct AnswerDropper {
    port: u16,
    armed: Arc<std::sync::Mutex<Option<&'static [u8]>>>,
    dropped: Arc<std::sync::atomic::AtomicUsize>,
}

impl AnswerDropper {
    async fn start(upstream: u16) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(std::sync::Mutex::new(None::<&'static [u8]>));
        let dropped = Arc::new(AtomicUsize::new(0));
        let (armed_in, dropped_in) = (armed.clone(), dropped.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = tokio::net::TcpStream::connect(("127.0.0.1", upstream))
                    .await
                    .unwrap();
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let doomed = Arc::new(AtomicBool::new(false));
                let (armed, doomed_up) = (armed_in.clone(), doomed.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    // The last bytes this connection sent, kept so a needle
                    // (under 64 bytes) split across two reads is still found.
                    let mut sent = Vec::new();
                    while let Ok(n @ 1..) = client_read.read(&mut buf).await {
                        sent.extend_from_slice(&buf[..n]);
                        {
                            let mut needle = armed.lock().unwrap();
                            if needle.is_some_and(|needle| {
                                sent.windows(needle.len()).any(|w| w == needle)
                            }) {
                                *needle = None;
                                doomed_up.store(true, Ordering::SeqCst);
                            }
                        }
                        let keep = sent.len().saturating_sub(64);
                        sent.drain(..keep);
                        if server_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                let dropped = dropped_in.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = server_read.read(&mut buf).await {
                        if doomed.load(Ordering::SeqCst) {
                            // The answer never reaches the client.
                            dropped.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        if client_write.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    // Dropping both halves closes the client's connection.
                });
            }
        });
        Self {
            port,
            armed,
            dropped,
        }
    }

    /// Dooms the next request that holds `needle` (armed before it is sent).
    fn arm(&self, needle: &'static [u8]) {
        *self.armed.lock().unwrap() = Some(needle);
    }

    fn dropped(&self) -> usize {
        self.dropped.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_whose_answer_is_lost_is_found_not_written_again() {
    let server = PostgresServer::start();
    let proxy = AnswerDropper::start(server.port()).await;
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port);
    let store = PostgresStore::connect(&url, options()).await.unwrap();
    let t = tid("lost-answer");
    store
        .append(&t, Expect::Any, vec![chat("a", "first")])
        .await
        .unwrap();
    // Expect::Any: a blind retry would write the batch a second time.
    proxy.arm(b"any 1");
    let written = store
        .append(
            &t,
            Expect::Any,
            vec![chat("a", "any 1"), chat("a", "any 2")],
        )
        .await
        .unwrap();
    assert_eq!(proxy.dropped(), 1, "the answer was dropped");
    assert_eq!(written.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    // Expect::LastSeq: a blind retry would report a conflict with itself.
    proxy.arm(b"guarded");
    let written = store
        .append(&t, Expect::LastSeq(3), vec![chat("a", "guarded")])
        .await
        .unwrap();
    assert_eq!(proxy.dropped(), 2);
    assert_eq!(written[0].seq, 4);
    let all = store.read_all(&t).await.unwrap();
    let texts: Vec<String> = all
        .iter()
        .map(|e| match &e.body {
            roundtable_thread_stream::EntryBody::Chat(c) => c.text.to_string(),
            _ => String::new(),
        })
        .collect();
    assert_eq!(texts, ["first", "any 1", "any 2", "guarded"]);
}
