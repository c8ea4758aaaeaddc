//! Two runner processes over one NATS JetStream store: every wake is
//! answered exactly once, whichever process gets it.
//!
//! The test binary runs itself twice as the runners: the ignored test
//! `child_runner` runs a `ThreadRunner` when the parent starts it with
//! `ROUNDTABLE_RUNNER_CHILD` set, until the parent writes `signal.done`
//! (`roundtable_test_support::runner_processes`).
//! Needs the `nats` feature and the `nats-server` binary.

#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use roundtable_test_support::nats::{NatsServer, connect_when_up};
use roundtable_test_support::runner_processes::{
    RUNNER_CHILD_ENV, drive_two_runner_processes, run_child_runner,
};
use roundtable_thread_stream::{NatsOptions, NatsStore};

/// Connects to the server the parent started, once it is up.
async fn connect(url: &str) -> NatsStore {
    let options = NatsOptions {
        request_timeout: Duration::from_secs(2),
        retry_for: Duration::from_secs(30),
        ..NatsOptions::default()
    };
    connect_when_up(url, || NatsStore::connect(url, options.clone())).await
}

/// In a child process: one of the two runners.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by two_runner_processes_over_nats_answer_each_wake_once in a child process"]
async fn child_runner() {
    let url = std::env::var(RUNNER_CHILD_ENV).expect("run by the parent test");
    run_child_runner(Arc::new(connect(&url).await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runner_processes_over_nats_answer_each_wake_once() {
    let server = NatsServer::start();
    let store = connect(&server.url()).await;
    drive_two_runner_processes(&store, "child_runner", &server.url()).await;
}
