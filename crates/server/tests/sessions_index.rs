//! Sessions at scale over HTTP: a few hundred sessions of two users paged
//! through with `limit` and `cursor` (each user sees only theirs, each
//! once, newest first; a status filter), bad paging values refused, a
//! session deleted with its files, a busy one refused, and the index
//! rebuilt after it was deleted while the server was stopped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use reqwest::StatusCode;
use roundtable_providers::ScriptedProvider;
use serde_json::{Value, json};
use support::*;

/// How many sessions each user creates.
const ALICE_SESSIONS: usize = 160;
const BOB_SESSIONS: usize = 90;

/// `GET path` as bob.
async fn get_as_bob(server: &TestServer, path: &str) -> (StatusCode, Value) {
    send(server.http.get(server.url(path)).bearer_auth(BOB_TOKEN)).await
}

/// Every page of `GET /v1/sessions?<query>` (as alice, or bob with
/// `as_bob`), `limit` at a time: the sessions in the order listed.
async fn walk(server: &TestServer, as_bob: bool, limit: usize, filter: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/sessions?limit={limit}{filter}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let (status, page) = if as_bob {
            get_as_bob(server, &path).await
        } else {
            server.get(&path).await
        };
        assert_eq!(status, StatusCode::OK, "{page}");
        let sessions = page["sessions"].as_array().unwrap();
        assert!(sessions.len() <= limit);
        seen.extend(sessions.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return seen,
        }
    }
}

fn ids(sessions: &[Value]) -> Vec<String> {
    sessions
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

fn assert_newest_first(sessions: &[Value]) {
    let key = |s: &Value| {
        (
            s["updated_at"].as_str().unwrap().to_string(),
            s["id"].as_str().unwrap().to_string(),
        )
    };
    for pair in sessions.windows(2) {
        assert!(
            key(&pair[0]) > key(&pair[1]),
            "{:?} then {:?}",
            key(&pair[0]),
            key(&pair[1])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_sessions_are_paged_deleted_and_listed_again_after_a_restart() {
    let fx = Fixture::new();
    let mut replies: Vec<roundtable_providers::AssistantMessage> =
        (0..10).map(|i| text(&format!("Reply {i}."))).collect();
    replies.push(call(
        "c1",
        "shell",
        json!({"command": "echo ran > ran.txt"}),
    ));
    replies.push(text("Ran it."));
    let store = fx.store().await;
    let server =
        TestServer::start(fx.engine(store.clone(), Arc::new(ScriptedProvider::new(replies)))).await;

    // The first of alice's sessions gates commands (the default policy).
    let gated = json!({"workspace_path": fx.workspace(), "verify_policy": {"auto_verify": false}});
    let mut alices = HashSet::new();
    let mut bobs = HashSet::new();
    let mut busy = String::new();
    for i in 0..ALICE_SESSIONS.max(BOB_SESSIONS) {
        if i == 0 {
            busy = server.create(gated.clone()).await;
            alices.insert(busy.clone());
        } else if i < ALICE_SESSIONS {
            alices.insert(server.create(fx.open_session()).await);
        }
        if i < BOB_SESSIONS {
            let (status, created) = send(
                server
                    .http
                    .post(server.url("/v1/sessions"))
                    .bearer_auth(BOB_TOKEN)
                    .json(&fx.open_session()),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED, "{created}");
            bobs.insert(created["session_id"].as_str().unwrap().to_string());
        }
    }
    // Ten of alice's sessions run a turn each: completed, and newest.
    let mut ran = Vec::new();
    for session in alices.iter().filter(|s| **s != busy).take(10) {
        let mut events = server.events(session, None).await;
        server.say(session, "hello").await;
        events.until("settled").await;
        ran.push(session.clone());
    }

    // Each user pages through exactly their own sessions, newest first.
    let mine = walk(&server, false, 37, "").await;
    assert_eq!(mine.len(), ALICE_SESSIONS);
    assert_eq!(ids(&mine).into_iter().collect::<HashSet<_>>(), alices);
    assert_newest_first(&mine);
    let theirs = walk(&server, true, 200, "").await;
    assert_eq!(ids(&theirs).into_iter().collect::<HashSet<_>>(), bobs);
    assert_newest_first(&theirs);
    // The default page is 50, with a cursor to the rest.
    let (_, first) = server.get("/v1/sessions").await;
    assert_eq!(first["sessions"].as_array().unwrap().len(), 50);
    assert!(first["next_cursor"].is_string());
    // The sessions that ran a turn, by status: the newest ten.
    let completed = walk(&server, false, 3, "&status=completed").await;
    assert_eq!(ids(&completed), ids(&mine[..10]));
    assert_eq!(
        ids(&completed).into_iter().collect::<HashSet<_>>(),
        ran.iter().cloned().collect::<HashSet<_>>()
    );
    assert!(
        walk(&server, true, 50, "&status=completed")
            .await
            .is_empty()
    );

    // Bad paging values are 400s saying what is wrong.
    for bad in [
        "limit=0",
        "limit=201",
        "limit=ten",
        "limit=-1",
        "cursor=not-a-cursor",
        "status=sleeping",
    ] {
        let answer = server.get(&format!("/v1/sessions?{bad}")).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }

    // A session waiting on an approval is not deleted.
    server.say(&busy, "run it").await;
    let mut events = server.events(&busy, None).await;
    events.until("approval_requested").await;
    let delete =
        |session: &str| server.request(reqwest::Method::DELETE, &format!("/v1/sessions/{session}"));
    assert_error(
        &send(delete(&busy)).await,
        StatusCode::CONFLICT,
        "session_busy",
    );
    let (status, waiting) = server.get(&format!("/v1/sessions/{busy}")).await;
    assert_eq!(
        (status, &waiting["status"]),
        (StatusCode::OK, &json!("waiting_approval"))
    );
    let waiting = walk(&server, false, 50, "&status=waiting_approval").await;
    assert_eq!(ids(&waiting), [busy.clone()]);
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{busy}/approve"),
            json!({"tool_call_id": "c1", "action": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    events.until("settled").await;

    // Deleted: gone from the list, with its folder, its events 404. Bob
    // cannot delete alice's session, nor an unknown one.
    let gone = busy;
    let theirs_one = bobs.iter().next().unwrap().clone();
    assert_error(
        &send(delete(&theirs_one)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let (status, _) = send(
        server
            .http
            .delete(server.url(&format!("/v1/sessions/{gone}")))
            .bearer_auth(BOB_TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(fx.data().join(&gone).join("session.json").exists());
    let (status, body) = send(delete(&gone)).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert!(!fx.data().join(&gone).exists());
    assert!(!fx.data().join(format!("{gone}.jsonl")).exists());
    assert_error(
        &server.get(&format!("/v1/sessions/{gone}/events")).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &send(delete(&gone)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let after = walk(&server, false, 200, "").await;
    assert_eq!(after.len(), ALICE_SESSIONS - 1);
    assert!(!ids(&after).contains(&gone));
    assert_newest_first(&after);

    // Stopped, the index file deleted: rebuilt on start, the same listing.
    server.stop();
    drop(server);
    store.close().await.unwrap();
    drop(store);
    let index = fx.data().join(roundtable_sessions::index::INDEX_FILE);
    std::fs::remove_file(&index).unwrap();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let again = walk(&server, false, 64, "").await;
    assert_eq!(ids(&again), ids(&after));
    assert!(index.exists());
    assert_eq!(ids(&walk(&server, true, 64, "").await), ids(&theirs));
}
