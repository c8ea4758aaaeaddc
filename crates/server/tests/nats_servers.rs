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
use roundtable_sessions::index::NatsKvTable;
use roundtable_test_support::nats::NatsServer;
use roundtable_thread_stream::ThreadStore;
use serde_json::json;
use support::*;

async fn engine(fx: &Fixture, url: &str, provider: Arc<dyn Provider>) -> SessionEngine {
    let store: Arc<dyn ThreadStore> = Arc::new(connect(url, test_options()).await);
    let timeout = Duration::from_secs(5);
    let client = roundtable_thread_stream::connect_nats(url, timeout, timeout)
        .await
        .unwrap();
    // The servers share the session index too.
    let index = NatsKvTable::open(client, "SESSIONS_INDEX", timeout)
        .await
        .unwrap();
    SessionEngine::builder(store, provider, model())
        .snapshot_dir(fx.data())
        .index_table(Arc::new(index))
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

/// Every page of alice's (or bob's) sessions on `server`, `limit` at a time.
async fn walk(server: &TestServer, as_bob: bool, limit: usize) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/sessions?limit={limit}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let token = if as_bob { BOB_TOKEN } else { TOKEN };
        let (status, page) = send(server.http.get(server.url(&path)).bearer_auth(token)).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for session in page["sessions"].as_array().unwrap() {
            seen.push((
                session["updated_at"].as_str().unwrap().to_string(),
                session["id"].as_str().unwrap().to_string(),
            ));
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest first");
    seen.into_iter().map(|(_, id)| id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_over_one_nats_store_page_through_the_same_shared_index() {
    let nats = NatsServer::start();
    let fx = Fixture::new();
    let first = TestServer::start(engine(&fx, &nats.url(), silent()).await).await;
    let mut alices = Vec::new();
    let mut bobs = Vec::new();
    for i in 0..60 {
        if i % 3 == 0 {
            let (status, created) = send(
                first
                    .http
                    .post(first.url("/v1/sessions"))
                    .bearer_auth(BOB_TOKEN)
                    .json(&fx.open_session()),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED, "{created}");
            bobs.push(created["session_id"].as_str().unwrap().to_string());
        } else {
            alices.push(first.create(fx.open_session()).await);
        }
    }
    let mine = walk(&first, false, 7).await;
    assert_eq!(mine.len(), alices.len());
    assert_eq!(
        mine.iter().collect::<std::collections::HashSet<_>>(),
        alices.iter().collect()
    );
    // A second server loads the index from the bucket: the same pages.
    let second = TestServer::start(engine(&fx, &nats.url(), silent()).await).await;
    assert_eq!(walk(&second, false, 9).await, mine);
    let theirs = walk(&second, true, 200).await;
    assert_eq!(theirs.len(), bobs.len());
    assert_eq!(
        theirs.iter().collect::<std::collections::HashSet<_>>(),
        bobs.iter().collect()
    );
    // Deleted on the second server: gone there at once, and from the first
    // server's listing once it sees the bucket's change.
    let gone = mine[0].clone();
    let (status, body) = send(
        second
            .http
            .delete(second.url(&format!("/v1/sessions/{gone}")))
            .bearer_auth(TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(walk(&second, false, 50).await, mine[1..]);
    let (status, _) = first.get(&format!("/v1/sessions/{gone}/events")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let listed = walk(&first, false, 50).await;
            if listed.len() == mine.len() - 1 {
                return listed;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the first server never saw the deletion");
    assert_eq!(seen, mine[1..]);
}
