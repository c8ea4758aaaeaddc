//! The compare-and-set of every record table: a write lands only on the
//! revision it read, a lost race writes nothing, and writers racing on one
//! record from several processes (connections) never lose an update.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use roundtable_sessions::table::{FileTable, MemoryTable, RecordTable};

/// Writers racing on one counter, and the increments each makes.
const WRITERS: usize = 4;
const INCREMENTS: usize = 10;

/// The single-table checks: read your revision, win once, lose on a
/// stale or absent revision, and keys of any characters.
async fn compare_and_set(table: &dyn RecordTable) {
    assert_eq!(table.get("user:alice@example.com").await.unwrap(), None);
    let first = table
        .put_if("user:alice@example.com", "one".into(), None)
        .await
        .unwrap()
        .expect("an absent key is created");
    // Created once: a second create loses.
    assert_eq!(
        table
            .put_if("user:alice@example.com", "two".into(), None)
            .await
            .unwrap(),
        None
    );
    let read = table.get("user:alice@example.com").await.unwrap().unwrap();
    assert_eq!((read.value.as_str(), read.revision), ("one", first));
    let second = table
        .put_if("user:alice@example.com", "two".into(), Some(first))
        .await
        .unwrap()
        .expect("the revision read wins");
    assert_ne!(second, first);
    // The stale revision loses and writes nothing.
    assert_eq!(
        table
            .put_if("user:alice@example.com", "three".into(), Some(first))
            .await
            .unwrap(),
        None
    );
    let read = table.get("user:alice@example.com").await.unwrap().unwrap();
    assert_eq!((read.value.as_str(), read.revision), ("two", second));
    // A plain put moves the revision too.
    table
        .put("user:alice@example.com", "four".into())
        .await
        .unwrap();
    let read = table.get("user:alice@example.com").await.unwrap().unwrap();
    assert_ne!(read.revision, second);
    // A removed key can be created again, and reads as absent meanwhile.
    table.remove("user:alice@example.com").await.unwrap();
    assert_eq!(table.get("user:alice@example.com").await.unwrap(), None);
    assert!(
        table
            .put_if("user:alice@example.com", "five".into(), None)
            .await
            .unwrap()
            .is_some()
    );
    let records = table.records().await.unwrap();
    assert!(
        records.contains(&("user:alice@example.com".into(), "five".into())),
        "{records:?}"
    );
}

/// `tables` (one per process, on one shared table) each increment one
/// counter, read-modify-write with compare-and-set: every increment counts.
async fn no_lost_update(tables: Vec<Arc<dyn RecordTable>>) {
    let writers: Vec<_> = tables
        .iter()
        .cycle()
        .take(WRITERS)
        .cloned()
        .map(|table| tokio::spawn(async move { increment(&*table, INCREMENTS).await }))
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let total = tables[0].get("counter").await.unwrap().unwrap().value;
    assert_eq!(total, (WRITERS * INCREMENTS).to_string());
}

async fn increment(table: &dyn RecordTable, times: usize) {
    for _ in 0..times {
        loop {
            let read = table.get("counter").await.unwrap();
            let (count, revision) = match &read {
                Some(r) => (r.value.parse::<usize>().unwrap(), Some(r.revision)),
                None => (0, None),
            };
            let next = (count + 1).to_string();
            if table
                .put_if("counter", next, revision)
                .await
                .unwrap()
                .is_some()
            {
                break;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_memory_table_compares_and_sets() {
    compare_and_set(&MemoryTable::new()).await;
    no_lost_update(vec![Arc::new(MemoryTable::new())]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_file_table_compares_and_sets_and_keeps_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state");
    compare_and_set(&FileTable::new(&path)).await;
    // A new process reads the file (without a load first).
    let again = FileTable::new(&path);
    let read = again.get("user:alice@example.com").await.unwrap().unwrap();
    assert_eq!(read.value, "five");
    assert!(
        again
            .put_if("user:alice@example.com", "six".into(), Some(read.revision))
            .await
            .unwrap()
            .is_some()
    );
    no_lost_update(vec![Arc::new(FileTable::new(dir.path().join("counter")))]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_file_reads_as_empty_and_the_first_change_rewrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state");
    std::fs::write(&path, b"{\"user:alice\": {\"mode\": \"plan\"}}\n").unwrap();
    let table = FileTable::new(&path);
    assert_eq!(table.get("user:alice").await.unwrap(), None);
    table.put_if("k", "v".into(), None).await.unwrap().unwrap();
    let again = FileTable::new(&path);
    assert_eq!(
        again.load().await.unwrap(),
        Some(vec![("k".into(), "v".into())])
    );
}

#[cfg(feature = "nats")]
mod nats {
    use std::time::Duration;

    use roundtable_sessions::table::NatsKvTable;
    use roundtable_test_support::nats::{NatsServer, connect_when_up};

    use super::*;

    async fn open(url: &str, bucket: &str) -> NatsKvTable {
        connect_when_up(url, || async {
            let client = async_nats::connect(url).await.map_err(|e| e.to_string())?;
            NatsKvTable::open(client, bucket, Duration::from_secs(5))
                .await
                .map_err(|e| e.to_string())
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_nats_table_compares_and_sets_across_connections() {
        let server = NatsServer::start();
        let url = server.url();
        compare_and_set(&open(&url, "STATE").await).await;
        let mut tables: Vec<Arc<dyn RecordTable>> = Vec::new();
        for _ in 0..2 {
            tables.push(Arc::new(open(&url, "RACE").await));
        }
        no_lost_update(tables).await;
        // A key of other characters comes back as itself from a watch.
        let watched = open(&url, "STATE").await;
        let mut changes = watched.changes().await.unwrap().unwrap();
        watched
            .put("user:bob@example.com", "x".into())
            .await
            .unwrap();
        let change = loop {
            let next = tokio::time::timeout(
                Duration::from_secs(10),
                futures::StreamExt::next(&mut changes),
            )
            .await
            .unwrap()
            .unwrap();
            if matches!(&next, roundtable_sessions::table::TableChange::Put(k, _) if k.starts_with("user:bob"))
            {
                break next;
            }
        };
        assert_eq!(
            change,
            roundtable_sessions::table::TableChange::Put("user:bob@example.com".into(), "x".into())
        );
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use roundtable_sessions::table::PostgresTable;
    use roundtable_test_support::postgres::PostgresServer;
    use roundtable_thread_stream::PostgresOptions;

    use super::*;

    async fn open(server: &PostgresServer, name: &str) -> PostgresTable {
        PostgresTable::connect(&server.url(), PostgresOptions::default(), name)
            .await
            .unwrap_or_else(|e| panic!("cannot open the table: {e}\n{}", server.log()))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_postgres_table_compares_and_sets_across_connections() {
        let server = PostgresServer::start();
        let table = open(&server, "state").await;
        compare_and_set(&table).await;
        // Written without a rebuild, the table still reads its records.
        assert_eq!(table.load().await.unwrap(), None);
        let mut tables: Vec<Arc<dyn RecordTable>> = Vec::new();
        for _ in 0..2 {
            tables.push(Arc::new(open(&server, "race").await));
        }
        no_lost_update(tables).await;
    }
}
