//! The session index through the engine: pages of each user's sessions,
//! newest first, over a JSONL store; the index file rebuilt from the
//! threads when it is gone; deleting a session with its files; a deletion
//! a crash cut short finished by `recover`; retention; and the PostgreSQL
//! record table: shared by its name, its changes followed by other daemons
//! through `NOTIFY`, across a lost connection.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::ScriptedProvider;
use roundtable_sessions::index::INDEX_FILE;
use roundtable_sessions::records::{SessionDeleted, SessionRecord};
use roundtable_sessions::{
    Caller, FolderBlobStore, ListSessions, SessionEngine, SessionError, SessionInfo, SessionStatus,
    Submit,
};
use roundtable_thread_stream::{Expect, MemoryStore, NewEntry, ThreadStore};
use support::*;

fn provider(replies: usize) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(
        (0..replies)
            .map(|i| text(&format!("Reply {i}.")))
            .collect::<Vec<_>>(),
    ))
}

/// Every page of `caller`'s sessions, `limit` at a time.
async fn walk(
    engine: &SessionEngine,
    caller: &Caller,
    limit: usize,
    status: Option<SessionStatus>,
) -> Vec<SessionInfo> {
    let mut query = ListSessions {
        limit,
        cursor: None,
        status,
    };
    let mut seen = Vec::new();
    loop {
        let page = engine.list_page(caller, &query).await.unwrap();
        assert!(page.sessions.len() <= limit);
        seen.extend(page.sessions);
        match page.next_cursor {
            Some(next) => query.cursor = Some(next),
            None => return seen,
        }
    }
}

fn ids(sessions: &[SessionInfo]) -> Vec<String> {
    sessions.iter().map(|s| s.id.to_string()).collect()
}

fn assert_newest_first(sessions: &[SessionInfo]) {
    for pair in sessions.windows(2) {
        let key = |s: &SessionInfo| (s.updated_at.clone(), s.id.clone());
        assert!(
            key(&pair[0]) > key(&pair[1]),
            "{:?} before {:?}",
            key(&pair[0]),
            key(&pair[1])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_hold_each_users_sessions_once_and_the_index_is_rebuilt_when_gone() {
    let fx = Fixture::new();
    let store = fx.store().await;
    let engine = engine(store.clone(), provider(6), &fx.data());
    let (alice, bob) = (Caller::user("alice"), Caller::user("bob"));
    let mut created = Vec::new();
    for i in 0..24 {
        let caller = if i % 3 == 0 { &bob } else { &alice };
        let session = engine
            .create(caller, fx.unverified_ungated())
            .await
            .unwrap();
        created.push((caller.clone(), session.id.to_string()));
    }
    // A few of them run a turn: they move to the front, completed.
    for (caller, id) in created.iter().filter(|(c, _)| *c == alice).take(6) {
        engine
            .submit(caller, id, Submit::text("hello"))
            .await
            .unwrap();
        engine.idle(id).await.unwrap();
    }
    let mine = walk(&engine, &alice, 5, None).await;
    assert_eq!(mine.len(), 16);
    assert_newest_first(&mine);
    let expected: HashSet<&str> = created
        .iter()
        .filter(|(c, _)| *c == alice)
        .map(|(_, id)| id.as_str())
        .collect();
    assert_eq!(
        ids(&mine)
            .iter()
            .map(String::as_str)
            .collect::<HashSet<_>>(),
        expected
    );
    assert!(mine.iter().all(|s| s.owner.as_deref() == Some("alice")));
    let done = walk(&engine, &alice, 4, Some(SessionStatus::Completed)).await;
    assert_eq!(done.len(), 6);
    assert!(done.iter().all(|s| s.status == SessionStatus::Completed));
    assert_eq!(ids(&done), ids(&mine[..6]));
    assert_eq!(walk(&engine, &bob, 200, None).await.len(), 8);
    assert_eq!(walk(&engine, &Caller::Host, 7, None).await.len(), 24);
    // `list` is every page.
    assert_eq!(ids(&engine.list(&alice).await.unwrap()), ids(&mine));

    // Stopped, and the index deleted: the next engine rebuilds it.
    drop(engine);
    store.close().await.unwrap();
    drop(store);
    let index = fx.data().join(INDEX_FILE);
    assert!(index.exists());
    std::fs::remove_file(&index).unwrap();
    let store = fx.store().await;
    let again = support::engine(store.clone(), provider(0), &fx.data());
    assert_eq!(ids(&walk(&again, &alice, 3, None).await), ids(&mine));
    assert!(index.exists());
    // A damaged index is rebuilt too.
    drop(again);
    store.close().await.unwrap();
    drop(store);
    std::fs::write(&index, b"{\"k\":").unwrap();
    let store = fx.store().await;
    let again = support::engine(store, provider(0), &fx.data());
    assert_eq!(ids(&walk(&again, &alice, 50, None).await), ids(&mine));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_is_gone_with_its_files() {
    let fx = Fixture::new();
    let store = fx.store().await;
    let engine = SessionEngine::builder(store.clone(), provider(1), model())
        .snapshot_dir(fx.data())
        .blob_store(Arc::new(FolderBlobStore::new(fx.data())))
        .build();
    let alice = Caller::user("alice");
    let kept = engine
        .create(&alice, fx.unverified_ungated())
        .await
        .unwrap();
    let gone = engine
        .create(&alice, fx.unverified_ungated())
        .await
        .unwrap();
    let id = gone.id.to_string();
    engine
        .upload_attachment(
            &alice,
            &id,
            Some("a.txt"),
            "text/plain",
            bytes::Bytes::from_static(b"hi"),
        )
        .await
        .unwrap();
    engine
        .submit(&alice, &id, Submit::text("hello"))
        .await
        .unwrap();
    engine.idle(&id).await.unwrap();
    assert!(fx.data().join(&id).join("session.json").exists());
    assert!(fx.data().join(&id).join("attachments").exists());

    // Another user's session is unknown to them.
    let bob = engine.delete(&Caller::user("bob"), &id).await.unwrap_err();
    assert!(matches!(bob, SessionError::UnknownSession(_)), "{bob}");
    engine.delete(&alice, &id).await.unwrap();
    assert!(!fx.data().join(&id).exists());
    assert!(!fx.data().join(format!("{id}.jsonl")).exists());
    assert!(matches!(
        engine.get(&alice, &id).await,
        Err(SessionError::UnknownSession(_))
    ));
    assert!(matches!(
        engine.delete(&alice, &id).await,
        Err(SessionError::UnknownSession(_))
    ));
    assert_eq!(
        ids(&engine.list(&alice).await.unwrap()),
        [kept.id.to_string()]
    );
    let threads = store.list_threads().await.unwrap();
    assert!(threads.iter().all(|t| t.as_str() != id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_finishes_a_deletion_a_crash_cut_short() {
    let fx = Fixture::new();
    let store = fx.store().await;
    let engine = engine(store.clone(), provider(0), &fx.data());
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let thread = roundtable_sessions::SessionId::parse(&session.id)
        .unwrap()
        .thread()
        .unwrap();
    // The deletion's first step, as a crashed process left it.
    let deleted = NewEntry::new("agent", SessionDeleted {}.to_body().unwrap());
    store
        .append(&thread, Expect::Any, vec![deleted])
        .await
        .unwrap();
    drop(engine);
    store.close().await.unwrap();
    drop(store);
    let store = fx.store().await;
    let engine = support::engine(store.clone(), provider(0), &fx.data());
    engine.recover().await.unwrap();
    assert!(store.list_threads().await.unwrap().is_empty());
    assert!(!fx.data().join(&*session.id).exists());
    assert!(engine.list(&Caller::Host).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_the_sessions_idle_too_long() {
    let fx = Fixture::new();
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let engine = SessionEngine::builder(store, provider(0), model())
        .retention(Duration::from_millis(1))
        .build();
    let first = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let second = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    // Past the retention: both idle longer than a millisecond.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut deleted: Vec<String> = engine
        .delete_idle_sessions()
        .await
        .unwrap()
        .iter()
        .map(|id| id.to_string())
        .collect();
    deleted.sort();
    let mut expected = vec![first.id.to_string(), second.id.to_string()];
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(engine.list(&Caller::Host).await.unwrap().is_empty());
    // Without a retention, nothing goes.
    let keeping =
        SessionEngine::builder(Arc::new(MemoryStore::new()), provider(0), model()).build();
    keeping
        .create(&Caller::Host, fx.unverified())
        .await
        .unwrap();
    assert!(keeping.delete_idle_sessions().await.unwrap().is_empty());
    assert_eq!(keeping.list(&Caller::Host).await.unwrap().len(), 1);
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::time::Instant;

    use futures::StreamExt;
    use futures::stream::BoxStream;
    use roundtable_sessions::RecordTable;
    use roundtable_sessions::index::{PostgresTable, TableChange, TableError};
    use roundtable_test_support::postgres::PostgresServer;
    use roundtable_thread_stream::PostgresOptions;

    use super::*;

    /// A poll interval long enough that only a notification (or a
    /// reconnection) wakes a follower within a test's patience.
    fn options(schema: &str) -> PostgresOptions {
        PostgresOptions {
            schema: schema.into(),
            poll_interval: Duration::from_secs(600),
            ..PostgresOptions::default()
        }
    }

    async fn open(server: &PostgresServer, schema: &str, name: &str) -> PostgresTable {
        PostgresTable::connect(&server.url(), options(schema), name)
            .await
            .unwrap_or_else(|e| panic!("cannot open the table: {e}\n{}", server.log()))
    }

    async fn next(changes: &mut BoxStream<'static, TableChange>) -> TableChange {
        tokio::time::timeout(Duration::from_secs(30), changes.next())
            .await
            .expect("no change came")
            .expect("the changes ended")
    }

    fn records(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    async fn sorted(table: &PostgresTable) -> Option<Vec<(String, String)>> {
        let mut loaded = table.load().await.unwrap()?;
        loaded.sort();
        Some(loaded)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_table_is_complete_once_rebuilt_and_shared_by_its_name() {
        let server = PostgresServer::start();
        let a = open(&server, "roundtable", "sessions").await;
        let b = open(&server, "roundtable", "sessions").await;
        let other = open(&server, "roundtable", "other").await;
        let apart = open(&server, "elsewhere", "sessions").await;
        assert_eq!(a.load().await.unwrap(), None, "no copy before a rebuild");
        a.replace_all(records(&[("s1", "one"), ("s2", "two"), ("s1", "uno")]))
            .await
            .unwrap();
        assert_eq!(
            sorted(&b).await,
            Some(records(&[("s1", "uno"), ("s2", "two")]))
        );
        b.put("s3", "three".into()).await.unwrap();
        b.put("s2", "dos".into()).await.unwrap();
        a.remove("s1").await.unwrap();
        a.remove("never").await.unwrap();
        assert_eq!(
            sorted(&a).await,
            Some(records(&[("s2", "dos"), ("s3", "three")]))
        );
        a.replace_all(records(&[("s4", "four")])).await.unwrap();
        assert_eq!(sorted(&b).await, Some(records(&[("s4", "four")])));
        // Another name and another schema are other tables.
        assert_eq!(other.load().await.unwrap(), None);
        assert_eq!(apart.load().await.unwrap(), None);
        // A key PostgreSQL text cannot hold is an error, not a panic.
        let err = a.put("bad\0key", "x".into()).await.unwrap_err();
        assert!(matches!(err, TableError::Backend(_)), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_daemons_changes_reach_anothers_follower() {
        let server = PostgresServer::start();
        let mine = open(&server, "roundtable", "sessions").await;
        let theirs = open(&server, "roundtable", "sessions").await;
        mine.replace_all(records(&[("old", "1")])).await.unwrap();
        let mut changes = mine.changes().await.unwrap().expect("a shared table");

        theirs.put("s1", "a".into()).await.unwrap();
        assert_eq!(
            next(&mut changes).await,
            TableChange::Put("s1".into(), "a".into())
        );
        theirs.remove("old").await.unwrap();
        assert_eq!(next(&mut changes).await, TableChange::Removed("old".into()));
        // A key removed and another written between two reads: both seen.
        theirs.put("s2", "b".into()).await.unwrap();
        assert_eq!(
            next(&mut changes).await,
            TableChange::Put("s2".into(), "b".into())
        );
        theirs
            .replace_all(records(&[("s2", "b2"), ("s3", "c")]))
            .await
            .unwrap();
        let mut got = vec![next(&mut changes).await, next(&mut changes).await];
        got.push(next(&mut changes).await);
        got.sort_by_key(|c| format!("{c:?}"));
        assert_eq!(
            got,
            [
                TableChange::Put("s2".into(), "b2".into()),
                TableChange::Put("s3".into(), "c".into()),
                TableChange::Removed("s1".into()),
            ]
        );
    }

    /// Ends every connection to the server but the caller's, as a failover
    /// or an administrator would.
    async fn terminate_others(server: &PostgresServer) {
        let (admin, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
                &[],
            )
            .await
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_follower_whose_connection_is_ended_catches_up() {
        let server = PostgresServer::start();
        let mine = open(&server, "roundtable", "sessions").await;
        let theirs = open(&server, "roundtable", "sessions").await;
        let mut changes = mine.changes().await.unwrap().expect("a shared table");
        terminate_others(&server).await;
        // Written while the follower may not listen yet: read when it is
        // back, not lost.
        let started = Instant::now();
        theirs.put("s1", "a".into()).await.unwrap();
        assert_eq!(
            next(&mut changes).await,
            TableChange::Put("s1".into(), "a".into())
        );
        assert!(started.elapsed() < Duration::from_secs(30));
        theirs.put("s2", "b".into()).await.unwrap();
        assert_eq!(
            next(&mut changes).await,
            TableChange::Put("s2".into(), "b".into())
        );
    }
}
