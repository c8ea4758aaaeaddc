//! Two servers, each with its own engine and its own connection to one
//! NATS JetStream store: a client of either sees the same events with the
//! same ids, resumes on one where it left the other, and decides an
//! approval on one for a turn that runs on the other.
//!
//! Needs the `nats` feature and the `nats-server` binary.
#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The NATS store's tests connect their stores this way.
#[path = "../../thread-stream/tests/nats_support/mod.rs"]
mod nats_support;
mod support;

use std::sync::Arc;
use std::time::Duration;

use nats_support::{connect, test_options};
use reqwest::StatusCode;
use roundtable_providers::{Provider, ScriptedProvider};
use roundtable_sessions::SessionEngine;
use roundtable_test_support::nats::NatsServer;
use roundtable_thread_stream::ThreadStore;
use serde_json::json;
use support::*;

async fn engine(fx: &Fixture, url: &str, provider: Arc<dyn Provider>) -> SessionEngine {
    let store: Arc<dyn ThreadStore> = Arc::new(connect(url, test_options()).await);
    SessionEngine::builder(store, provider, model())
        .snapshot_dir(fx.data())
        .chunk_interval(Duration::from_millis(5))
        // The other server's turns are live: never take them for dead.
        .interrupt_open_turns_after(Duration::from_secs(60))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_resumes_on_another_server_over_the_same_nats_store() {
    let nats = NatsServer::start();
    let fx = Fixture::new();
    let runner_provider = Arc::new(ScriptedProvider::new([
        call("c1", "shell", json!({"command": "echo yes > yes.txt"})),
        text("Done."),
    ]));
    let runner = TestServer::start(engine(&fx, &nats.url(), runner_provider).await).await;
    let other = TestServer::start(engine(&fx, &nats.url(), silent()).await).await;

    let session = runner
        .create(json!({"workspace_path": fx.workspace(), "verify_policy": {"auto_verify": false}}))
        .await;
    // The other server knows the session at once.
    let (status, info) = other.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(status, StatusCode::OK, "{info}");
    let mut on_runner = runner.events(&session, None).await;
    let mut on_other = other.events(&session, None).await;
    runner.say(&session, "go").await;
    let mut seen_other = on_other.until("approval_requested").await;
    // Approved through the other server; the turn runs on the first.
    let (status, answer) = other
        .post(
            &format!("/v1/sessions/{session}/approve"),
            json!({"tool_call_id": "c1", "action": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let seen_runner = on_runner.until("settled").await;
    seen_other.extend(on_other.until("settled").await);
    let pairs = |ms: &[Message]| {
        ms.iter()
            .map(|m| (m.id.clone(), m.data.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(pairs(&seen_runner), pairs(&seen_other));
    assert!(fx.workspace().join("yes.txt").exists());

    // A client that read part of the stream on one server resumes on the
    // other with exactly the rest.
    for cut in [1, seen_runner.len() / 2, seen_runner.len() - 1] {
        let last = &seen_runner[cut - 1].id;
        let mut resumed = other.events(&session, Some(last)).await;
        let rest = resumed.take(seen_runner.len() - cut).await;
        assert_eq!(pairs(&rest), pairs(&seen_runner[cut..]), "after {last}");
    }
}
