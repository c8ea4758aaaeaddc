//! The spec's acceptance tests over HTTP: a real server on loopback, a
//! real client, event streams parsed as a browser parses them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use roundtable_providers::ScriptedProvider;
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_a_session_answers_its_id_and_writes_session_json() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let (status, created) = server
        .post(
            "/v1/sessions",
            json!({"workspace_path": fx.workspace(), "system_prompt": "Be brief.", "auto_run": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["session_id"].as_str().unwrap();
    assert!(id.starts_with("sess_"));
    assert_eq!(created["id"], id);
    assert_eq!(created["status"], "active");
    assert_eq!(created["system_prompt"], "Be brief.");
    // The spec's defaults, and the caller as the owner.
    assert_eq!(created["verify_policy"]["commands"], json!(["make test"]));
    assert_eq!(created["patch_review"], "off");
    assert_eq!(created["owner"], "alice");

    let snapshot: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.data().join(id).join("session.json")).unwrap())
            .unwrap();
    assert_eq!(snapshot["id"], id);
    assert_eq!(snapshot["status"], "active");

    let (status, got) = server.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["workspace_path"], created["workspace_path"]);
    let other = server.create(fx.open_session()).await;
    let (status, listed) = server.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<_> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [other.as_str(), id]);

    // Policies given by the client are kept.
    let (status, custom) = server
        .post(
            "/v1/sessions",
            json!({
                "workspace_path": fx.workspace(),
                "approval_policy": {"require_for_kinds": ["exec"], "require_for_tools": ["read_file"]},
                "verify_policy": {"auto_verify": true, "commands": ["true"]},
                "patch_review": {"mode": "request"},
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{custom}");
    assert_eq!(
        custom["approval_policy"]["require_for_tools"],
        json!(["read_file"])
    );
    assert_eq!(custom["verify_policy"]["commands"], json!(["true"]));
    assert_eq!(custom["patch_review"], "request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_limits_are_kept_and_impossible_ones_refused() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let (status, created) = server
        .post(
            "/v1/sessions",
            json!({
                "workspace_path": fx.workspace(),
                "limits": {"max_rounds": 40, "max_cost_usd": 1.5},
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let limits = json!({"max_rounds": 40, "max_cost_usd": 1.5});
    assert_eq!(created["limits"], limits);
    let id = created["session_id"].as_str().unwrap();
    let (_, got) = server.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(got["limits"], limits);
    // A session that chose none shows none: the engine's apply.
    let other = server.create(fx.open_session()).await;
    let (_, got) = server.get(&format!("/v1/sessions/{other}")).await;
    assert!(got.get("limits").is_none(), "{got}");

    let (status, refused) = server
        .post(
            "/v1/sessions",
            json!({"workspace_path": fx.workspace(), "limits": {"max_rounds": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_streams_message_added_turn_started_and_tool_call_events() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "read_file", json!({"path": "README.md"})),
        text("The README says Demo."),
    ]));
    let server = TestServer::start(fx.engine(fx.store().await, provider)).await;
    let session = server.create(fx.open_session()).await;
    let mut events = server.events(&session, None).await;
    assert!(
        events.content_type.starts_with("text/event-stream"),
        "{}",
        events.content_type
    );
    let sent = server.say(&session, "What does the README say?").await;
    assert!(sent["message_id"].as_str().unwrap().starts_with("msg_"));
    assert!(sent["turn_id"].as_str().unwrap().starts_with("turn_"));

    let seen = events.until("session_completed").await;
    let order = kinds(&seen);
    let at = |kind: &str| {
        order
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_else(|| panic!("no {kind} in {order:?}"))
    };
    assert_eq!(at("session_created"), 0);
    assert!(at("message_added") < at("turn_started"));
    assert!(at("turn_started") < at("tool_call_started"));
    assert!(at("tool_call_started") < at("tool_call_completed"));
    assert!(at("tool_call_completed") < at("model_output_delta"));
    assert!(at("model_output_completed") < at("turn_completed"));
    let added = &seen[at("message_added")];
    assert_eq!(added.data["data"]["message_id"], sent["message_id"]);
    assert_eq!(
        added.data["data"]["parts"][0]["text"],
        "What does the README say?"
    );
    assert_eq!(added.data["data"]["author"], "alice");
    assert_eq!(seen[at("turn_started")].data["turn_id"], sent["turn_id"]);
    let tool = &seen[at("tool_call_completed")];
    assert_eq!(tool.data["data"]["tool"], "read_file");
    assert_eq!(tool.data["data"]["tool_call_id"], "c1");
    assert!(
        tool.data["data"]["output"]
            .as_str()
            .unwrap()
            .contains("# Demo")
    );
    // Every SSE message: its id is the event's id, no event name (so
    // `onmessage` sees them all), the spec's envelope as data.
    for message in &seen {
        assert_eq!(message.id, message.data["id"].as_str().unwrap());
        assert_eq!(message.event, "message");
        assert_eq!(message.data["session_id"], session.as_str());
        assert!(message.data["ts"].as_str().unwrap().ends_with('Z'));
    }
    let text: String = seen
        .iter()
        .filter(|m| m.kind() == "model_output_delta")
        .map(|m| m.data["data"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "The README says Demo.");
    let (_, info) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(info["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_gate_execution_and_decisions_are_checked() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "shell", json!({"command": "echo ran > ran.txt"})),
        call(
            "c2",
            "shell",
            json!({"command": "echo denied > denied.txt"}),
        ),
        text("One ran, one was refused."),
    ]));
    let server = TestServer::start(fx.engine(fx.store().await, provider)).await;
    // The default policy gates exec tools.
    let session = server
        .create(json!({"workspace_path": fx.workspace(), "verify_policy": {"auto_verify": false}}))
        .await;
    let mut events = server.events(&session, None).await;
    let sent = server.say(&session, "run it").await;
    let turn = sent["turn_id"].as_str().unwrap();
    let asked = events.until("approval_requested").await.pop().unwrap();
    assert_eq!(asked.data["data"]["tool_call_id"], "c1");
    assert_eq!(asked.data["data"]["input"]["command"], "echo ran > ran.txt");
    let (_, info) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(info["status"], "waiting_approval");
    assert!(
        !fx.workspace().join("ran.txt").exists(),
        "ran before its approval"
    );

    let approve = format!("/v1/sessions/{session}/approve");
    // A call named in another turn is not found, and nothing is decided.
    assert_error(
        &server
            .post(
                &approve,
                json!({"turn_id": "turn_other", "tool_call_id": "c1", "action": "approve"}),
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let (status, decided) = server
        .post(
            &approve,
            json!({"turn_id": turn, "tool_call_id": "c1", "action": "approve", "reason": "ok"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["action"], "approve");
    let granted = events.until("approval_granted").await.pop().unwrap();
    assert_eq!(granted.data["data"]["reason"], "ok");

    events.until("approval_requested").await;
    let (status, _) = server
        .post(
            &approve,
            json!({"turn_id": turn, "tool_call_id": "c2", "action": "deny", "reason": "not that"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let denied = events.until("approval_denied").await.pop().unwrap();
    assert_eq!(denied.data["data"]["reason"], "not that");
    events.until("session_completed").await;
    assert!(fx.workspace().join("ran.txt").exists());
    assert!(!fx.workspace().join("denied.txt").exists());

    // Deciding a decided call conflicts; an unknown call is not found; an
    // unknown action is an invalid field.
    assert_error(
        &server
            .post(&approve, json!({"tool_call_id": "c1", "action": "approve"}))
            .await,
        StatusCode::CONFLICT,
        "conflict",
    );
    assert_error(
        &server
            .post(
                &approve,
                json!({"tool_call_id": "nope", "action": "approve"}),
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &server
            .post(&approve, json!({"tool_call_id": "c1", "action": "maybe"}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_for_the_session_runs_later_calls_of_the_tool() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "shell", json!({"command": "echo 1 >> log.txt"})),
        call("c2", "shell", json!({"command": "echo 2 >> log.txt"})),
        text("Done."),
    ]));
    let server = TestServer::start(fx.engine(fx.store().await, provider)).await;
    let session = server
        .create(json!({"workspace_path": fx.workspace(), "verify_policy": {"auto_verify": false}}))
        .await;
    let mut events = server.events(&session, None).await;
    server.say(&session, "log twice").await;
    events.until("approval_requested").await;
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{session}/approve"),
            json!({"tool_call_id": "c1", "action": "approve_session"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let seen = events.until("session_completed").await;
    // The second call was granted by the first decision: nobody posted one.
    let granted: Vec<_> = seen
        .iter()
        .filter(|m| m.kind() == "approval_granted")
        .map(|m| {
            (
                m.data["data"]["tool_call_id"].clone(),
                m.data["data"]["scope"].clone(),
            )
        })
        .collect();
    assert_eq!(
        granted,
        [
            (json!("c1"), json!("session")),
            (json!("c2"), json!("call"))
        ]
    );
    assert_eq!(
        std::fs::read_to_string(fx.workspace().join("log.txt")).unwrap(),
        "1\n2\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_runs_after_a_write_and_reports_its_commands() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call(
            "c1",
            "apply_patch",
            json!({"patch": status_patch("broken", "fixed")}),
        ),
        text("Fixed."),
    ]));
    let server = TestServer::start(fx.engine(fx.store().await, provider)).await;
    let session = server
        .create(json!({
            "workspace_path": fx.workspace(),
            "approval_policy": {"require_for_kinds": []},
        }))
        .await;
    let mut events = server.events(&session, None).await;
    server.say(&session, "fix status.txt").await;
    let seen = events.until("session_completed").await;
    let order = kinds(&seen);
    let verified = seen
        .iter()
        .find(|m| m.kind() == "verification_completed")
        .unwrap_or_else(|| panic!("no verification in {order:?}"));
    let patched = order
        .iter()
        .position(|k| *k == "tool_call_completed")
        .unwrap();
    let checked = order
        .iter()
        .position(|k| *k == "verification_completed")
        .unwrap();
    assert!(patched < checked, "{order:?}");
    assert_eq!(verified.data["data"]["ok"], true, "{}", verified.data);
    assert!(
        verified.data.to_string().contains("make test"),
        "{}",
        verified.data
    );
    assert_eq!(
        std::fs::read_to_string(fx.workspace().join("status.txt")).unwrap(),
        "fixed\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_running_turn_and_retry_runs_it_again() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "shell", json!({"command": "echo no > no.txt"})),
        text("Answered on retry."),
    ]));
    let server = TestServer::start(fx.engine(fx.store().await, provider)).await;
    let session = server
        .create(json!({"workspace_path": fx.workspace(), "verify_policy": {"auto_verify": false}}))
        .await;
    let cancel = format!("/v1/sessions/{session}/cancel");
    // Nothing runs yet: nothing to cancel.
    assert_error(
        &server.post(&cancel, json!({})).await,
        StatusCode::CONFLICT,
        "conflict",
    );
    let mut events = server.events(&session, None).await;
    let sent = server.say(&session, "go").await;
    let turn = sent["turn_id"].as_str().unwrap().to_string();
    events.until("approval_requested").await;
    // An empty body is a cancel without a reason.
    let answer = send(server.request(reqwest::Method::POST, &cancel)).await;
    assert_eq!(answer.0, StatusCode::ACCEPTED, "{}", answer.1);
    let seen = events.until("session_canceled").await;
    assert!(kinds(&seen).contains(&"cancel_requested"));
    server.engine.idle(&session).await.unwrap();
    assert!(!fx.workspace().join("no.txt").exists());

    let retry = format!("/v1/sessions/{session}/turns/{turn}/retry");
    let (status, retried) = server.post(&retry, json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{retried}");
    let new_turn = retried["turn_id"].as_str().unwrap();
    assert_ne!(new_turn, turn);
    let done = events.until("turn_completed").await.pop().unwrap();
    assert_eq!(done.data["turn_id"], new_turn);
    server.engine.idle(&session).await.unwrap();
    // A turn that did not fail is not retried; an unknown one is not found.
    let again = format!("/v1/sessions/{session}/turns/{new_turn}/retry");
    assert_error(
        &server.post(&again, json!({})).await,
        StatusCode::CONFLICT,
        "conflict",
    );
    let unknown = format!("/v1/sessions/{session}/turns/turn_nope/retry");
    assert_error(
        &server.post(&unknown, json!({})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let not_an_id = format!("/v1/sessions/{session}/turns/nope/retry");
    assert_error(
        &server.post(&not_an_id, json!({})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_makes_a_retried_post_return_the_same_ids() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("once")]));
    let server = TestServer::start(fx.engine(fx.store().await, provider.clone())).await;
    let session = server.create(fx.open_session()).await;
    let path = format!("/v1/sessions/{session}/messages");
    let body = json!({"parts": [{"type": "text", "text": "hello"}]});
    let post = |key: &'static str| {
        send(
            server
                .request(reqwest::Method::POST, &path)
                .header("Idempotency-Key", key)
                .json(&body),
        )
    };
    let first = post("key-1").await;
    let second = post("key-1").await;
    assert_eq!(first.0, StatusCode::ACCEPTED);
    assert_eq!(first.1, second.1);
    server.engine.idle(&session).await.unwrap();
    assert_eq!(post("key-1").await.1, first.1);
    assert_eq!(provider.requests().len(), 1);
    let bad = send(
        server
            .request(reqwest::Method::POST, &path)
            .header("Idempotency-Key", "with space")
            .json(&body),
    )
    .await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_sent_again_with_another_body_is_a_422() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("once")]));
    let server = TestServer::start(fx.engine(fx.store().await, provider.clone())).await;
    let session = server.create(fx.open_session()).await;
    let path = format!("/v1/sessions/{session}/messages");
    let post = |said: &'static str| {
        send(
            server
                .request(reqwest::Method::POST, &path)
                .header("Idempotency-Key", "key-1")
                .json(&json!({"parts": [{"type": "text", "text": said}]})),
        )
    };
    let first = post("hello").await;
    assert_eq!(first.0, StatusCode::ACCEPTED, "{}", first.1);
    server.engine.idle(&session).await.unwrap();
    let thread = roundtable_thread_stream::ThreadId::new(&*session).unwrap();
    let stored = server.engine.store().read_all(&thread).await.unwrap().len();
    let reused = post("goodbye").await;
    assert_error(
        &reused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
    let message = reused.1["error"]["message"].as_str().unwrap();
    assert!(message.contains("key-1"), "{message}");
    // Nothing new is stored, and the same body is still a retry.
    assert_eq!(
        server.engine.store().read_all(&thread).await.unwrap().len(),
        stored
    );
    let again = post("hello").await;
    assert_eq!(again, first);
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_after_every_event_id_gives_exactly_the_rest() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[
            ("c1", "read_file", json!({"path": "README.md"})),
            ("c2", "repo_tree", json!({})),
        ]),
        text("All read."),
    ]));
    let server = TestServer::start_with(
        fx.engine(fx.store().await, provider),
        Options {
            keep_alive: Duration::from_millis(100),
            ..Options::default()
        },
    )
    .await;
    let session = server.create(fx.open_session()).await;
    server.say(&session, "read").await;
    server.engine.idle(&session).await.unwrap();
    let mut stream = server.events(&session, None).await;
    let all = stream.until("settled").await;
    assert!(
        all.iter().any(|m| m.id.contains('.')),
        "some entry gives several events"
    );
    for (i, message) in all.iter().enumerate() {
        let rest: Vec<_> = all[i + 1..]
            .iter()
            .map(|m| (m.id.clone(), m.data.clone()))
            .collect();
        // The header, and the query parameter for clients without headers.
        let by_header = server.events(&session, Some(&message.id)).await;
        let by_query = Events::open(server.request(
            reqwest::Method::GET,
            &format!("/v1/sessions/{session}/events?last_event_id={}", message.id),
        ))
        .await;
        for mut resumed in [by_header, by_query] {
            let got: Vec<_> = resumed
                .take(rest.len())
                .await
                .into_iter()
                .map(|m| (m.id, m.data))
                .collect();
            assert_eq!(got, rest, "after {}", message.id);
        }
    }
    // After the last event, the stream stays open with keep-alive comments
    // only: no event is made up, and none is stored.
    let last = &all.last().unwrap().id;
    let response = server
        .request(
            reqwest::Method::GET,
            &format!("/v1/sessions/{session}/events"),
        )
        .header("Last-Event-ID", last)
        .send()
        .await
        .unwrap();
    let mut bytes = response.bytes_stream();
    let mut seen = String::new();
    while seen.matches(": keep-alive").count() < 2 {
        let chunk = tokio::time::timeout(
            Duration::from_secs(20),
            futures::StreamExt::next(&mut bytes),
        )
        .await
        .expect("no keep-alive in 20 s")
        .unwrap()
        .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!seen.contains("data:"), "{seen}");
    let (_, info) = server.get(&format!("/v1/sessions/{session}")).await;
    let stored = server
        .engine
        .events(&Caller::Host, &session, None)
        .await
        .unwrap();
    assert_eq!(stored.len(), all.len());
    assert_eq!(
        info["last_seq"].as_u64().unwrap(),
        stored.last().unwrap().id.seq
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_stream_does_not_stop_the_run() {
    let fx = Fixture::new();
    let long = "word ".repeat(80);
    let provider = Arc::new(
        ScriptedProvider::new([text(&long)])
            .with_chunk_chars(4)
            .with_pacing(Duration::from_millis(2)),
    );
    let server = TestServer::start(fx.engine(fx.store().await, provider)).await;
    let session = server.create(fx.open_session()).await;
    let mut events = server.events(&session, None).await;
    server.say(&session, "talk").await;
    let seen = events.until("model_output_delta").await;
    let last = seen.last().unwrap().id.clone();
    drop(events);
    // Another connection picks up after the last event the first one got,
    // and the run finishes.
    let mut resumed = server.events(&session, Some(&last)).await;
    let rest = resumed.until("session_completed").await;
    let order = kinds(&rest);
    assert!(order.contains(&"turn_completed"), "{order:?}");
    assert!(!order.contains(&"session_canceled"), "{order:?}");
    let text: String = seen
        .iter()
        .chain(&rest)
        .filter(|m| m.kind() == "model_output_delta")
        .map(|m| m.data["data"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, long);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_resumes_on_a_restarted_server_over_the_same_folder() {
    let fx = Fixture::new();
    let (session, first_part, whole) = {
        let provider = Arc::new(ScriptedProvider::new([
            call("c1", "read_file", json!({"path": "README.md"})),
            text("It says Demo."),
        ]));
        let store = fx.store().await;
        let server = TestServer::start(fx.engine(store.clone(), provider)).await;
        let session = server.create(fx.open_session()).await;
        let mut events = server.events(&session, None).await;
        server.say(&session, "read it").await;
        let whole = events.until("settled").await;
        server.engine.idle(&session).await.unwrap();
        let first_part = whole[..whole.len() / 2].to_vec();
        drop(events);
        server.stop();
        store.close().await.unwrap();
        (session, first_part, whole)
    };
    // A new store, engine and server over the same folder.
    let provider = Arc::new(ScriptedProvider::new([text("Still here.")]));
    let engine = fx.engine(fx.store().await, provider);
    engine.recover().await.unwrap();
    let server = TestServer::start(engine).await;
    let last = &first_part.last().unwrap().id;
    let mut resumed = server.events(&session, Some(last)).await;
    let rest = resumed.take(whole.len() - first_part.len()).await;
    let ids = |ms: &[Message]| {
        ms.iter()
            .map(|m| (m.id.clone(), m.data.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&rest), ids(&whole[first_part.len()..]));
    // And the same stream goes on live.
    let sent = server.say(&session, "still there?").await;
    let live = resumed.until("settled").await;
    assert_eq!(live[0].kind(), "message_added");
    assert_eq!(live[0].data["data"]["message_id"], sent["message_id"]);
}
