//! Two runner processes over one PostgreSQL store: every wake is answered
//! exactly once, whichever process gets it; then the thread, mirrored into
//! the dashboard tables, shows one finished run per wake.
//!
//! The test binary runs itself twice as the runners: the ignored test
//! `child_runner` runs a `ThreadRunner` when the parent starts it with
//! `ROUNDTABLE_RUNNER_CHILD` set, until the parent writes `signal.done`
//! (`roundtable_test_support::runner_processes`).
//! Needs the `postgres` feature and PostgreSQL's server binaries (the test
//! starts its own server).

#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use roundtable_test_support::postgres::PostgresServer;
use roundtable_test_support::runner_processes::{
    RUNNER_CHILD_ENV, TwoProcessRun, drive_two_runner_processes, run_child_runner,
};
use roundtable_test_support::thread::thread;
use roundtable_thread_stream::{
    MirrorOptions, PostgresMirror, PostgresOptions, PostgresStore, ThreadStore,
};

async fn connect(url: &str) -> PostgresStore {
    PostgresStore::connect(url, PostgresOptions::default())
        .await
        .unwrap()
}

/// In a child process: one of the two runners.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by two_runner_processes_over_postgres_answer_each_wake_once in a child process"]
async fn child_runner() {
    let url = std::env::var(RUNNER_CHILD_ENV).expect("run by the parent test");
    run_child_runner(Arc::new(connect(&url).await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runner_processes_over_postgres_answer_each_wake_once() {
    let server = PostgresServer::start();
    let store: Arc<dyn ThreadStore> = Arc::new(connect(&server.url()).await);
    let t = thread("shared");
    let TwoProcessRun { entries, humans } =
        drive_two_runner_processes(&*store, "child_runner", &server.url()).await;

    // The same thread in the dashboard tables: one ended run per wake.
    let mirror = PostgresMirror::start(
        store.clone(),
        &server.url(),
        MirrorOptions {
            schema: "dashboard".into(),
            ..MirrorOptions::default()
        },
    )
    .unwrap();
    mirror.follow(&t);
    let last = entries.last().map_or(0, |e| e.seq);
    tokio::time::timeout(Duration::from_secs(60), mirror.wait_for(&t, last))
        .await
        .expect("the thread was not mirrored");
    mirror.shutdown().await;
    let (db, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let runs: Vec<(String, String, i64)> = db
        .query(
            "SELECT author, status, trigger_seq FROM dashboard.runs WHERE thread = 'shared'
             ORDER BY trigger_seq, author",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let expected: Vec<(String, String, i64)> = humans
        .iter()
        .flat_map(|seq| ["x", "y"].map(|bot| (bot.to_string(), "ended".to_string(), *seq as i64)))
        .collect();
    assert_eq!(runs, expected);
}
