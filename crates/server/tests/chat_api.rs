//! `/api/chat` over HTTP: a real server on loopback, a real client, the
//! NDJSON answer parsed line by line as it arrives.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use reqwest::StatusCode;
use roundtable_providers::{AssistantBlock, ScriptedProvider, ThinkingContent};
use roundtable_server::ChatSettings;
use serde_json::{Value, json};
use support::chat::{ChatStream, streamed_text, types};
use support::*;

/// A server whose new chat sessions work in the fixture's workspace and
/// verify nothing, answering with `provider`.
async fn chat_server(fx: &Fixture, provider: Arc<ScriptedProvider>) -> TestServer {
    TestServer::start_with(
        fx.engine(fx.store().await, provider),
        Options {
            chat_workspace: Some(fx.workspace()),
            chat_settings: ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            },
            ..Options::default()
        },
    )
    .await
}

/// An answer that reasons first.
fn thought(thinking: &str, answer: &str) -> roundtable_providers::AssistantMessage {
    let mut message = text(answer);
    message
        .content
        .insert(0, AssistantBlock::Thinking(ThinkingContent::new(thinking)));
    message
}

fn only<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_turn_streams_start_deltas_thinking_and_done_then_ends() {
    let fx = Fixture::new();
    let provider = Arc::new(
        ScriptedProvider::new([thought("They greet me.", "Hello there, how can I help?")])
            .with_chunk_chars(4),
    );
    let server = chat_server(&fx, provider).await;
    let response = server
        .request(reqwest::Method::POST, "/api/chat")
        .header("Accept-Encoding", "gzip")
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    let mut stream = support::chat::ChatStream::of(response);
    assert_eq!(stream.headers["content-type"], "application/x-ndjson");
    assert_eq!(stream.headers["x-accel-buffering"], "no");
    assert!(
        stream.headers.get("content-encoding").is_none(),
        "an NDJSON stream is never compressed"
    );
    let lines = stream.rest().await;
    let kinds = types(&lines);
    assert_eq!(kinds[0], "start", "{kinds:?}");
    assert_eq!(
        kinds.last().unwrap(),
        "done",
        "the stream ends when the session settles, its turn's done last: {kinds:?}"
    );
    assert!(kinds.contains(&"state:settled".to_string()), "{kinds:?}");
    let start = &lines[0];
    let session = start["sessionId"].as_str().unwrap();
    assert!(session.starts_with("sess_"));
    assert_eq!(start["runId"], start["id"]);
    // A workspace with nothing wrong gives no diagnostics; a session named
    // by no request is no reset.
    assert!(start.get("diagnostics").is_none(), "{start}");
    assert!(start.get("sessionReset").is_none(), "{start}");
    assert!(!only(&lines, "delta").is_empty(), "{kinds:?}");
    assert_eq!(streamed_text(&lines), "Hello there, how can I help?");
    // The reasoning streams too, before the answer's text.
    let thinking: String = only(&lines, "thinking")
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(thinking, "They greet me.");
    let first = |kind: &str| kinds.iter().position(|k| k == kind).unwrap();
    assert!(first("thinking") < first("delta"), "{kinds:?}");
    let done = only(&lines, "done").pop().unwrap();
    assert_eq!(done["sessionId"], session);
    assert_eq!(done["runId"], start["runId"]);
    assert_eq!(done["finishReason"], "stop");
    assert_eq!(
        done["message"]["parts"],
        json!([
            {"type": "thinking", "text": "They greet me."},
            {"type": "text", "text": "Hello there, how can I help?"}
        ])
    );
    assert_eq!(done["message"]["role"], "assistant");
    // Every delta belongs to the turn's message.
    for delta in only(&lines, "delta") {
        assert_eq!(delta["messageId"], start["id"]);
    }

    // The session is the caller's, in the chat workspace.
    let (status, info) = server
        .get(&format!("/api/chat/session?sessionId={session}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["session"]["owner"], "alice");
    assert_eq!(info["session"]["status"], "completed");
    assert_eq!(
        info["session"]["workspace_path"],
        json!(fx.workspace().canonicalize().unwrap())
    );
    // The page's other responses are compressed when the client asks.
    let page = server
        .request(reqwest::Method::GET, "/")
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["content-encoding"], "gzip");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_turn_streams_the_call_s_states_and_the_answer_after_it() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "read_file", json!({"path": "README.md"})),
        text("The README says Demo."),
    ]));
    let server = chat_server(&fx, provider).await;
    let lines = server
        .chat(json!({"message": "What does the README say?"}))
        .await
        .rest()
        .await;
    let kinds = types(&lines);
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| k == kind)
            .unwrap_or_else(|| panic!("no {kind} in {kinds:?}"))
    };
    assert!(at("start") < at("tool:pending"));
    assert!(at("tool:pending") < at("tool:output-available"));
    assert!(at("tool:output-available") < at("delta"));
    assert!(at("delta") < at("done"));
    let tool = &lines[at("tool:output-available")];
    assert_eq!(tool["part"]["toolName"], "read_file");
    assert_eq!(tool["part"]["toolCallId"], "c1");
    assert_eq!(tool["part"]["input"], json!({"path": "README.md"}));
    assert!(tool["part"]["output"].as_str().unwrap().contains("# Demo"));
    let done = only(&lines, "done").pop().unwrap();
    let parts = done["message"]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[0]["type"], "tool-read_file");
    assert_eq!(parts[0]["state"], "output-available");
    assert_eq!(
        parts[1],
        json!({"type": "text", "text": "The README says Demo."})
    );
}

/// A turn that asks to run a shell command (gated by the default policy)
/// and, once it ran, answers `after`.
fn gated_turn(after: &str) -> [roundtable_providers::AssistantMessage; 2] {
    [
        call("c1", "shell", json!({"command": "echo ran > ran.txt"})),
        text(after),
    ]
}

async fn approve(server: &TestServer, session: &str, call: &str) {
    let (status, answer) = server
        .post(
            "/api/chat/question",
            json!({"sessionId": session, "toolCallId": call, "decision": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["answered"], "approval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_is_queued_at_once_and_the_open_stream_shows_its_turn() {
    let fx = Fixture::new();
    let [first, after] = gated_turn("Ran it.");
    let provider = Arc::new(ScriptedProvider::new([first, after, text("Followed up.")]));
    let server = chat_server(&fx, provider).await;
    let mut stream = server.chat(json!({"message": "run it"})).await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();

    // Without streamingBehavior, a prompt to a running session is refused.
    let (status, body) = send(
        server
            .request(reqwest::Method::POST, "/api/chat")
            .json(&json!({"message": "and then?", "sessionId": session})),
    )
    .await;
    assert_error(&(status, body), StatusCode::CONFLICT, "conflict");

    let queued = server
        .chat(json!({"message": "then tidy up", "sessionId": session, "streamingBehavior": "followUp"}))
        .await
        .rest()
        .await;
    assert_eq!(types(&queued), ["queue"], "{queued:?}");
    assert_eq!(queued[0]["followUp"][0], "then tidy up");
    assert_eq!(queued[0]["steering"], json!([]));
    assert_eq!(queued[0]["change"], "added");

    approve(&server, &session, "c1").await;
    let lines = stream.rest().await;
    let kinds = types(&lines);
    // The first turn ends, the follow-up is delivered and runs as the next
    // turn, in the same stream.
    let dones = only(&lines, "done");
    assert_eq!(dones.len(), 2, "{kinds:?}");
    assert_eq!(dones[0]["message"]["parts"][1]["text"], "Ran it.");
    assert_eq!(dones[1]["message"]["parts"][0]["text"], "Followed up.");
    let starts = only(&lines, "start");
    assert_eq!(starts.len(), 1, "the second turn's start: {kinds:?}");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "queue" && l["change"] == "delivered"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().unwrap(), "done");
    assert!(fx.workspace().join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_prompts_racing_on_an_idle_session_one_streams_its_turn_the_others_get_409() {
    const ROUNDS: usize = 20;
    const RACERS: usize = 5;
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("Hello.")]));
    let server = chat_server(&fx, provider.clone()).await;
    let lines = server.chat(json!({"message": "hi"})).await.rest().await;
    let session = lines[0]["sessionId"].as_str().unwrap().to_string();
    provider.take_requests();
    for round in 0..ROUNDS {
        // The turn that gets in waits for its call's approval: it runs
        // while the racers are answered.
        let call_id = format!("c{round}");
        provider.push(call(&call_id, "shell", json!({"command": "true"})));
        provider.push(text(&format!("Round {round} ran.")));
        let prompt = |i: usize| format!("round {round}, racer {i}");
        let racers = (0..RACERS).map(|i| {
            server
                .request(reqwest::Method::POST, "/api/chat")
                .json(&json!({"message": prompt(i), "sessionId": session}))
                .send()
        });
        let mut streams = Vec::new();
        for (i, response) in futures::future::join_all(racers)
            .await
            .into_iter()
            .enumerate()
        {
            let response = response.unwrap();
            match response.status() {
                StatusCode::OK => streams.push((i, ChatStream::of(response))),
                StatusCode::CONFLICT => {
                    let body: Value = response.json().await.unwrap();
                    assert_eq!(body["error"]["code"], "conflict", "{body}");
                }
                status => panic!("round {round}: {status}"),
            }
        }
        let won: Vec<usize> = streams.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: the prompts that got a stream: {won:?}"
        );
        let (winner, mut stream) = streams.pop().unwrap();
        let mut lines = stream
            .until_where("tool", |l| l["part"]["state"] == "approval-requested")
            .await;
        approve(&server, &session, &call_id).await;
        lines.extend(stream.rest().await);
        let kinds = types(&lines);
        // The stream shows its own turn only, from its start.
        assert_eq!(kinds[0], "start", "round {round}: {kinds:?}");
        let (starts, dones) = (only(&lines, "start"), only(&lines, "done"));
        assert_eq!(
            (starts.len(), dones.len()),
            (1, 1),
            "round {round}: {kinds:?}"
        );
        assert_eq!(starts[0]["runId"], dones[0]["runId"]);
        assert_eq!(streamed_text(&lines), format!("Round {round} ran."));
        // That turn answers the winner's prompt, and no loser's is stored.
        let asked = provider.take_requests();
        let said = serde_json::to_string(&asked[0].messages).unwrap();
        for i in 0..RACERS {
            assert_eq!(
                said.contains(&prompt(i)),
                i == winner,
                "round {round}: {said}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_joins_the_running_turn_at_its_next_model_call() {
    let fx = Fixture::new();
    let [first, after] = gated_turn("Steered.");
    let provider = Arc::new(ScriptedProvider::new([first, after]));
    let server = chat_server(&fx, provider.clone()).await;
    let mut stream = server.chat(json!({"message": "run it"})).await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();
    let queued = server
        .chat(json!({"message": "use the staging server", "sessionId": session, "streamingBehavior": "steer"}))
        .await
        .rest()
        .await;
    assert_eq!(types(&queued), ["queue"]);
    assert_eq!(queued[0]["steering"][0], "use the staging server");

    approve(&server, &session, "c1").await;
    let lines = stream.rest().await;
    assert_eq!(
        only(&lines, "done").len(),
        1,
        "one turn: {:?}",
        types(&lines)
    );
    assert_eq!(streamed_text(&lines), "Steered.");
    let second = &provider.requests()[1];
    let said = serde_json::to_string(&second.messages).unwrap();
    assert!(said.contains("use the staging server"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_ends_the_turn_and_the_stream() {
    let fx = Fixture::new();
    let [first, after] = gated_turn("never");
    let server = chat_server(&fx, Arc::new(ScriptedProvider::new([first, after]))).await;
    let mut stream = server.chat(json!({"message": "run it"})).await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();
    let (status, answer) = server
        .post(
            "/api/chat/abort",
            json!({"sessionId": session, "reason": "changed my mind"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let lines = stream.rest().await;
    let kinds = types(&lines);
    assert!(
        kinds.contains(&"state:abort_requested".to_string()),
        "{kinds:?}"
    );
    let done = only(&lines, "done").pop().unwrap();
    assert_eq!(done["finishReason"], "aborted");
    assert!(
        only(&lines, "error").is_empty(),
        "an abort is no error: {kinds:?}"
    );
    assert_eq!(kinds.last().unwrap(), "done", "{kinds:?}");
    assert!(!fx.workspace().join("ran.txt").exists());
    // Nothing runs any more.
    assert_error(
        &server
            .post("/api/chat/abort", json!({"sessionId": session}))
            .await,
        StatusCode::CONFLICT,
        "conflict",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_shown_answered_and_read_by_the_model() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call(
            "q1",
            "ask_user",
            json!({"questions": [{"id": "color", "question": "Which colour?", "options": ["red", "blue"]}]}),
        ),
        text("Blue it is."),
    ]));
    let server = chat_server(&fx, provider.clone()).await;
    let mut stream = server.chat(json!({"message": "paint it"})).await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "question-requested")
        .await;
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();
    let asked = seen.last().unwrap();
    assert_eq!(asked["part"]["toolName"], "ask_user");
    assert_eq!(
        asked["part"]["questions"][0]["options"],
        json!(["red", "blue"])
    );

    let question = json!({"sessionId": session, "toolCallId": "q1", "answers": [{"id": "color", "values": ["blue"]}]});
    let (status, answer) = server.post("/api/chat/question", question.clone()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let lines = stream.rest().await;
    let kinds = types(&lines);
    assert!(
        kinds.contains(&"tool:question-answered".to_string()),
        "{kinds:?}"
    );
    let answered = lines
        .iter()
        .find(|l| l["type"] == "tool" && l["part"]["state"] == "question-answered")
        .unwrap();
    assert_eq!(answered["part"]["answers"][0]["values"], json!(["blue"]));
    assert_eq!(streamed_text(&lines), "Blue it is.");
    let said = serde_json::to_string(&provider.requests()[1].messages).unwrap();
    assert!(said.contains("color: blue"), "{said}");
    // Answered once only; an answer needs exactly one kind.
    assert_error(
        &server.post("/api/chat/question", question).await,
        StatusCode::CONFLICT,
        "conflict",
    );
    assert_error(
        &server
            .post(
                "/api/chat/question",
                json!({"sessionId": session, "toolCallId": "q1"}),
            )
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_writes_a_plan_and_execute_carries_it_out() {
    let fx = Fixture::new();
    let plan = |statuses: [&str; 2]| {
        call(
            "p",
            "update_plan",
            json!({"steps": [
                {"title": "read the code", "status": statuses[0]},
                {"title": "fix the bug", "status": statuses[1]}
            ]}),
        )
    };
    let provider = Arc::new(ScriptedProvider::new([
        plan(["pending", "pending"]),
        text("Plan written."),
        plan(["completed", "completed"]),
        text("Executed."),
    ]));
    let server = chat_server(&fx, provider.clone()).await;
    let lines = server
        .chat(json!({"message": "plan the fix", "mode": "plan"}))
        .await
        .rest()
        .await;
    let session = lines[0]["sessionId"].as_str().unwrap().to_string();
    let plans = only(&lines, "plan");
    let last = plans.last().unwrap();
    assert_eq!(last["mode"], "plan");
    assert_eq!(last["executing"], false);
    assert_eq!(last["total"], 2);
    assert_eq!(last["completed"], 0);
    assert_eq!(last["state"]["steps"][1]["title"], "fix the bug");
    assert_eq!(streamed_text(&lines), "Plan written.");

    let lines = server
        .chat(json!({"message": "", "sessionId": session, "planAction": "execute"}))
        .await
        .rest()
        .await;
    let kinds = types(&lines);
    // The stream starts where the request found the session: nothing of
    // the first turn again.
    assert_eq!(streamed_text(&lines), "Executed.", "{kinds:?}");
    assert_eq!(only(&lines, "done").len(), 1);
    let plans = only(&lines, "plan");
    assert_eq!(plans[0]["mode"], "agent");
    assert_eq!(plans[0]["executing"], true);
    let last = plans.last().unwrap();
    assert_eq!(last["completed"], 2);
    let said = serde_json::to_string(&provider.requests()[2].messages).unwrap();
    assert!(said.contains("Execute the plan."), "{said}");
    let (_, info) = server
        .get(&format!("/api/chat/session?sessionId={session}"))
        .await;
    assert_eq!(info["session"]["mode"], "agent");
    assert_eq!(info["session"]["plan"]["completed"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_stream_mid_turn_does_not_abort_the_run() {
    let fx = Fixture::new();
    let [first, after] = gated_turn("Finished without you.");
    let server = chat_server(&fx, Arc::new(ScriptedProvider::new([first, after]))).await;
    let mut stream = server.chat(json!({"message": "run it"})).await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();
    // The client goes away mid-turn.
    drop(stream);
    approve(&server, &session, "c1").await;
    server.engine.idle(&session).await.unwrap();
    let (_, transcript) = server
        .get(&format!("/api/chat/session?sessionId={session}"))
        .await;
    assert_eq!(transcript["session"]["status"], "completed", "{transcript}");
    let messages = transcript["messages"].as_array().unwrap();
    let answer = messages.last().unwrap();
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["parts"][1]["text"], "Finished without you.");
    assert!(fx.workspace().join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_supporting_routes_answer_json() {
    let fx = Fixture::new();
    let skills = fx.dir.path().join("skills");
    std::fs::create_dir_all(skills.join("review")).unwrap();
    std::fs::write(
        skills.join("review").join("SKILL.md"),
        "---\nname: review\ndescription: Review a change.\n---\n# Review\n",
    )
    .unwrap();
    std::fs::create_dir_all(skills.join("broken")).unwrap();
    std::fs::write(
        skills.join("broken").join("SKILL.md"),
        "---\nname: broken\n---\n",
    )
    .unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "read_file", json!({"path": "README.md"})),
        text("Read."),
    ]));
    let server = TestServer::start_with(
        fx.engine(fx.store().await, provider),
        Options {
            chat_workspace: Some(fx.workspace()),
            chat_settings: ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            },
            skill_dirs: vec![skills],
            ..Options::default()
        },
    )
    .await;

    // new: an empty session in the chat workspace.
    let (status, created) = server.post("/api/chat/new", json!({"mode": "plan"})).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let empty = created["sessionId"].as_str().unwrap().to_string();
    assert_eq!(created["session"]["mode"], "plan");
    let (status, _) = send(server.request(reqwest::Method::POST, "/api/chat/new")).await;
    assert_eq!(status, StatusCode::CREATED, "the body is optional");

    // A turn, then its transcript, by GET and by resume.
    let lines = server
        .chat(json!({"message": "read it"}))
        .await
        .rest()
        .await;
    let session = lines[0]["sessionId"].as_str().unwrap().to_string();
    let run = lines[0]["runId"].as_str().unwrap().to_string();
    let (status, transcript) = server
        .get(&format!("/api/chat/session?sessionId={session}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(transcript["sessionId"], session.as_str());
    let messages = transcript["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["parts"][0]["text"], "read it");
    assert_eq!(messages[0]["author"], "alice");
    // The transcript's message is the one the stream's `done` carried.
    assert_eq!(messages[1], only(&lines, "done")[0]["message"]);
    let (status, resumed) = server
        .post("/api/chat/resume", json!({"sessionId": session}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(resumed["messages"], transcript["messages"]);

    // sessions: the caller's, most recent first.
    let (_, listed) = server.get("/api/chat/sessions").await;
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], session);
    assert!(ids.contains(&empty.as_str()));

    // models: the engine's, and nothing else is selectable.
    let (_, models) = server.get("/api/chat/models").await;
    assert_eq!(models["selected"], "scripted/m");
    assert_eq!(models["models"][0]["id"], "m");
    let (status, wrong) = send(
        server
            .request(reqwest::Method::POST, "/api/chat")
            .json(&json!({"message": "hi", "model": "openai/gpt-5"})),
    )
    .await;
    assert_error(&(status, wrong), StatusCode::BAD_REQUEST, "invalid_request");

    // resources: the host's skills, with what is wrong with them.
    let (_, resources) = server.get("/api/chat/resources").await;
    assert_eq!(resources["skills"][0]["name"], "review");
    assert_eq!(resources["diagnostics"][0]["kind"], "dropped");

    // settings: the host's defaults under the caller's own overrides.
    let (_, settings) = server.get("/api/chat/settings").await;
    assert_eq!(settings["settings"]["autoVerify"], false);
    assert_eq!(settings["overrides"], json!({}));
    let (status, updated) = send(
        server
            .request(reqwest::Method::PUT, "/api/chat/settings")
            .json(&json!({"streamingBehavior": "followUp", "systemPrompt": "Be brief."})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["settings"]["streamingBehavior"], "followUp");
    assert_eq!(updated["settings"]["autoVerify"], false);
    let (status, bad) = send(
        server
            .request(reqwest::Method::PUT, "/api/chat/settings")
            .json(&json!({"colour": "red"})),
    )
    .await;
    assert_error(
        &(status, bad),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    let bob = send(
        server
            .http
            .get(server.url("/api/chat/settings"))
            .bearer_auth(BOB_TOKEN),
    )
    .await;
    assert_eq!(bob.1["overrides"], json!({}), "overrides are per caller");
    // A new session takes the caller's settings.
    let (_, created) = server.post("/api/chat/new", json!({})).await;
    assert_eq!(created["session"]["system_prompt"], "Be brief.");

    // provenance: the session's runs, or one.
    let (status, runs) = server
        .get(&format!("/api/chat/provenance?sessionId={session}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert_eq!(runs["runs"][0]["run_id"], run.as_str());
    assert_eq!(runs["runs"][0]["tools"][0]["tool"], "read_file");
    let (status, one) = server
        .get(&format!(
            "/api/chat/provenance?sessionId={session}&runId={run}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["run"]["outcome"], runs["runs"][0]["outcome"]);
    assert_error(
        &server
            .get(&format!(
                "/api/chat/provenance?sessionId={session}&runId=turn_nope"
            ))
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_json_with_their_status() {
    let fx = Fixture::new();
    let [first, after] = gated_turn("done");
    let server = chat_server(&fx, Arc::new(ScriptedProvider::new([first, after]))).await;
    let post_raw = |body: &'static str| {
        server
            .request(reqwest::Method::POST, "/api/chat")
            .header("Content-Type", "application/json")
            .body(body)
    };
    // 400: not JSON.
    assert_error(
        &send(post_raw("{\"message\": ")).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    // 422: JSON, but no prompt, or a mode the server does not have.
    assert_error(
        &send(post_raw("{}")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    assert_error(
        &send(post_raw("{\"message\": \"hi\", \"mode\": \"harness\"}")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    // 401: no token, or another.
    assert_error(
        &send(
            server
                .http
                .post(server.url("/api/chat"))
                .json(&json!({"message": "hi"})),
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    assert_error(
        &send(
            server
                .http
                .get(server.url("/api/chat/sessions"))
                .bearer_auth("wrong-token-0123456789"),
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    );
    // 413: a body over the limit.
    let huge =
        json!({"message": "x".repeat(roundtable_server::sessions::DEFAULT_MESSAGE_BODY_LIMIT)});
    assert_error(
        &send(
            server
                .http
                .post(server.url("/api/chat"))
                .bearer_auth(TOKEN)
                .json(&huge),
        )
        .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
    );
    // 404: another user's session, on every route that names one.
    let mut stream = server.chat(json!({"message": "run it"})).await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();
    let as_bob = |method: reqwest::Method, path: &str| {
        server
            .http
            .request(method, server.url(path))
            .bearer_auth(BOB_TOKEN)
    };
    // (A prompt naming it starts a new session: see
    // `a_session_the_caller_cannot_continue_is_replaced_by_a_new_one`.)
    for request in [
        as_bob(
            reqwest::Method::GET,
            &format!("/api/chat/session?sessionId={session}"),
        ),
        as_bob(reqwest::Method::POST, "/api/chat/resume").json(&json!({"sessionId": session})),
        as_bob(reqwest::Method::POST, "/api/chat/abort").json(&json!({"sessionId": session})),
        as_bob(reqwest::Method::POST, "/api/chat/question")
            .json(&json!({"sessionId": session, "toolCallId": "c1", "decision": "approve"})),
        as_bob(
            reqwest::Method::GET,
            &format!("/api/chat/provenance?sessionId={session}"),
        ),
    ] {
        assert_error(&send(request).await, StatusCode::NOT_FOUND, "not_found");
    }
    let (_, bobs) = send(as_bob(reqwest::Method::GET, "/api/chat/sessions")).await;
    assert_eq!(bobs["sessions"], json!([]));
    assert_error(
        &server.get("/api/chat/session?sessionId=sess_nope").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    // 409: a prompt to a running session that says neither steer nor
    // follow up; a decision already made.
    assert_error(
        &server
            .post(
                "/api/chat",
                json!({"message": "again", "sessionId": session}),
            )
            .await,
        StatusCode::CONFLICT,
        "conflict",
    );
    approve(&server, &session, "c1").await;
    assert_error(
        &server
            .post(
                "/api/chat/question",
                json!({"sessionId": session, "toolCallId": "c1", "decision": "deny"}),
            )
            .await,
        StatusCode::CONFLICT,
        "conflict",
    );
    stream.rest().await;
    // 400: a query that does not read; 404 and 405 for routes.
    assert_error(
        &server.get("/api/chat/session").await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    assert_error(
        &server.get("/api/chat/nothing").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &server.get("/api/chat").await,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
    assert_error(
        &server.get("/nothing/here").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    // Nothing bob tried reached the session.
    let (_, transcript) = server
        .get(&format!("/api/chat/session?sessionId={session}"))
        .await;
    let said = transcript["messages"].to_string();
    assert!(!said.contains("\"hi\""), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_chooses_another_of_the_engine_s_models_for_the_session() {
    let fx = Fixture::new();
    let own = Arc::new(ScriptedProvider::new([text("From the small one.")]));
    let big = Arc::new(ScriptedProvider::new([
        text("From the big one."),
        text("Still the big one."),
    ]));
    let big_model = roundtable_providers::Model::new(
        roundtable_providers::OPENAI_COMPLETIONS,
        "scripted",
        "big",
        "",
    );
    let engine = fx
        .engine_builder(fx.store().await, own.clone())
        .offer_model(big_model, big.clone())
        .build();
    let server = TestServer::start_with(
        engine,
        Options {
            chat_workspace: Some(fx.workspace()),
            chat_settings: ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            },
            ..Options::default()
        },
    )
    .await;
    // Both are listed, the engine's own selected.
    let (_, models) = server.get("/api/chat/models").await;
    assert_eq!(models["selected"], "scripted/m");
    let keys: Vec<&str> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["scripted/m", "scripted/big"]);

    // A prompt that names the other model runs on it...
    let lines = server
        .chat(json!({"message": "hi", "model": {"provider": "scripted", "id": "big"}}))
        .await
        .rest()
        .await;
    assert_eq!(streamed_text(&lines), "From the big one.");
    let session = lines[0]["sessionId"].as_str().unwrap().to_string();
    // ...and so does the session's next prompt, which names none.
    let lines = server
        .chat(json!({"message": "again", "sessionId": session}))
        .await
        .rest()
        .await;
    assert_eq!(streamed_text(&lines), "Still the big one.");
    assert!(own.take_requests().is_empty());
    assert_eq!(big.take_requests().len(), 2);
    let (_, info) = server
        .get(&format!("/api/chat/session?sessionId={session}"))
        .await;
    assert_eq!(info["session"]["model"], "scripted/big");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_chat_workspace_needs_a_session() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    assert_error(
        &server.post("/api/chat", json!({"message": "hi"})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
}

/// `n` characters of text starting with `tag`.
fn sized(tag: &str, n: usize) -> String {
    let mut s = format!("{tag} ");
    while s.len() < n {
        s.push_str("lorem ");
    }
    s.truncate(n);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_in_the_turn_is_streamed_before_its_answer() {
    use roundtable_chat_runner::compaction::CompactionConfig;
    use roundtable_sessions::{Caller, CreateSession, SessionEngine, Submit};
    use roundtable_tools::VerifyPolicy;

    let fx = Fixture::new();
    let store = fx.store().await;
    // The scripted replies report no usage: requests are estimated by
    // characters (about four a token).
    let say = |t: &str| roundtable_providers::AssistantMessage {
        usage: Default::default(),
        ..text(t)
    };
    let provider = Arc::new(ScriptedProvider::new([
        say("R1"),
        say("SUMMARY"),
        say("R2"),
    ]));
    // A first turn, by an engine that compacts only on demand, shows what
    // every request carries besides the conversation.
    let first = SessionEngine::builder(store.clone(), provider.clone(), model())
        .compaction(CompactionConfig::manual_only())
        .build();
    let alice = Caller::user("alice");
    let session = first
        .create(
            &alice,
            CreateSession {
                verify_policy: Some(VerifyPolicy {
                    auto_verify: false,
                    ..VerifyPolicy::default()
                }),
                ..CreateSession::new(fx.workspace())
            },
        )
        .await
        .unwrap();
    first
        .submit(&alice, &session.id, Submit::text(sized("P1", 3_200)))
        .await
        .unwrap();
    first.idle(&session.id).await.unwrap();
    let request = &provider.requests()[0];
    let overhead =
        roundtable_dispatch::overhead_tokens(request.system_prompt.as_deref(), &request.tools);

    // The server's engine compacts above `overhead + 1,000` tokens: the
    // second prompt's request (about `overhead + 1,200`) is compacted
    // first, down to the summary and the second prompt.
    let engine = SessionEngine::builder(store, provider.clone(), model())
        .chunk_interval(std::time::Duration::from_millis(5))
        .compaction(
            CompactionConfig::default()
                .with_context_window(overhead + 1_100)
                .with_reserve_tokens(100)
                .with_keep_recent_tokens(300),
        )
        .build();
    let server = TestServer::start(engine).await;
    let lines = server
        .chat(json!({"message": sized("P2", 1_600), "sessionId": &*session.id}))
        .await
        .rest()
        .await;
    let kinds = types(&lines);
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| k == kind)
            .unwrap_or_else(|| panic!("no {kind} in {kinds:?}"))
    };
    assert_eq!(kinds[0], "start", "{kinds:?}");
    let compactions = only(&lines, "compaction");
    assert_eq!(compactions.len(), 2, "{kinds:?}");
    assert_eq!(compactions[0]["phase"], "start");
    assert_eq!(compactions[0]["reason"], "threshold");
    let before = compactions[0]["tokensBefore"].as_u64().unwrap();
    assert!(before > overhead + 1_000, "{before}");
    assert_eq!(compactions[1]["phase"], "end");
    assert!(
        compactions[1].get("errorMessage").is_none(),
        "{:?}",
        compactions[1]
    );
    assert!(at("compaction") < at("delta"));
    assert_eq!(streamed_text(&lines), "R2");
    let said = serde_json::to_string(&provider.requests().last().unwrap().messages).unwrap();
    assert!(said.contains("SUMMARY"), "{said}");
}

/// The path of `session`'s thread in the fixture's JSONL store, as the
/// file system resolves it.
fn thread_file(fx: &Fixture, session: &str) -> std::path::PathBuf {
    fx.data()
        .canonicalize()
        .unwrap()
        .join(format!("{session}.jsonl"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_named_by_its_thread_file_and_the_stream_gives_it() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("First."), text("Second.")]));
    let server = chat_server(&fx, provider).await;
    let lines = server.chat(json!({"message": "hi"})).await.rest().await;
    let start = &lines[0];
    let session = start["sessionId"].as_str().unwrap().to_string();
    let file = thread_file(&fx, &session);
    assert!(file.is_file());
    assert_eq!(start["sessionFile"], json!(file));
    assert!(start.get("sessionReset").is_none(), "{start}");
    let done = only(&lines, "done").pop().unwrap();
    assert_eq!(done["sessionFile"], json!(file));

    // The file continues the session, spelled with `..` too.
    let spelled = fx
        .data()
        .join("..")
        .join("data")
        .join(format!("{session}.jsonl"));
    let lines = server
        .chat(json!({"message": "again", "sessionFile": spelled}))
        .await
        .rest()
        .await;
    assert_eq!(lines[0]["sessionId"], session.as_str());
    assert!(lines[0].get("sessionReset").is_none(), "{}", lines[0]);
    assert_eq!(streamed_text(&lines), "Second.");
    // Both names of the one session are fine; of two sessions, 400.
    let (status, transcript) = server
        .post(
            "/api/chat/resume",
            json!({"sessionId": session, "sessionFile": file}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{transcript}");
    assert_eq!(transcript["sessionFile"], json!(file));
    assert_eq!(transcript["messages"].as_array().unwrap().len(), 4);
    let other = server.chat(json!({"message": "x"})).await.rest().await;
    let other_file = other[0]["sessionFile"].as_str().unwrap().to_string();
    assert_error(
        &server
            .post(
                "/api/chat",
                json!({"message": "x", "sessionId": session, "sessionFile": other_file}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    assert_error(
        &server
            .post(
                "/api/chat/resume",
                json!({"sessionId": session, "sessionFile": "/etc/passwd"}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    // The transcript by file, over GET.
    let url = reqwest::Url::parse_with_params(
        &server.url("/api/chat/session"),
        [("sessionFile", file.to_str().unwrap())],
    )
    .unwrap();
    let (status, by_file) = send(server.http.get(url).bearer_auth(TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{by_file}");
    assert_eq!(by_file["sessionId"], session.as_str());
    assert_eq!(by_file["messages"], transcript["messages"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_file_outside_the_store_or_not_the_caller_s_names_no_session() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        text("Alice's."),
        text("Bob's new one."),
        text("Unknown file."),
    ]));
    let server = chat_server(&fx, provider).await;
    let lines = server.chat(json!({"message": "mine"})).await.rest().await;
    let session = lines[0]["sessionId"].as_str().unwrap().to_string();
    let file = thread_file(&fx, &session);

    // A copy of the file in the workspace (the right name, the wrong
    // place), one in a folder of the store, a link in the store's folder
    // to a file outside it, a traversal that leaves the folder, a relative
    // path, a path to nothing, the store's folder itself.
    let copy = fx.workspace().join(format!("{session}.jsonl"));
    std::fs::copy(&file, &copy).unwrap();
    let nested = fx.data().join("nested");
    std::fs::create_dir(&nested).unwrap();
    std::fs::copy(&file, nested.join(format!("{session}.jsonl"))).unwrap();
    let linked = fx.data().join("sess_linked.jsonl");
    std::os::unix::fs::symlink(&copy, &linked).unwrap();
    let not_paths = [
        copy.clone(),
        nested.join(format!("{session}.jsonl")),
        linked,
        fx.data()
            .join("..")
            .join("ws")
            .join(format!("{session}.jsonl")),
        std::path::PathBuf::from(format!("data/{session}.jsonl")),
        fx.data().join("sess_none.jsonl"),
        fx.data(),
    ];
    let as_bob = |method: reqwest::Method, path: &str| {
        server
            .http
            .request(method, server.url(path))
            .bearer_auth(BOB_TOKEN)
    };
    let mut answers = Vec::new();
    for path in &not_paths {
        let url = reqwest::Url::parse_with_params(
            &server.url("/api/chat/session"),
            [("sessionFile", path.to_str().unwrap())],
        )
        .unwrap();
        let answer = send(server.http.get(url).bearer_auth(TOKEN)).await;
        assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
        answers.push(answer.1);
        let answer = server
            .post("/api/chat/resume", json!({"sessionFile": path}))
            .await;
        assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
    }
    // Another user's session file: the same answer, word for word, as a
    // path to nothing.
    let url = reqwest::Url::parse_with_params(
        &server.url("/api/chat/session"),
        [("sessionFile", file.to_str().unwrap())],
    )
    .unwrap();
    let bobs = send(server.http.get(url).bearer_auth(BOB_TOKEN)).await;
    assert_error(&bobs, StatusCode::NOT_FOUND, "not_found");
    assert!(
        answers.iter().all(|a| *a == bobs.1),
        "{answers:?} {}",
        bobs.1
    );
    assert_error(
        &send(
            as_bob(reqwest::Method::POST, "/api/chat/resume").json(&json!({"sessionFile": file})),
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    // A prompt naming it starts bob a session of his own.
    let response = as_bob(reqwest::Method::POST, "/api/chat")
        .json(&json!({"message": "let me in", "sessionFile": file}))
        .send()
        .await
        .unwrap();
    let lines = support::chat::ChatStream::of(response).rest().await;
    assert_eq!(lines[0]["sessionReset"], true, "{}", lines[0]);
    assert_ne!(lines[0]["sessionId"], session.as_str());
    assert_ne!(lines[0]["sessionFile"], json!(file));
    // And a prompt naming a path outside does the same for alice.
    let lines = server
        .chat(json!({"message": "hi", "sessionFile": copy}))
        .await
        .rest()
        .await;
    assert_eq!(lines[0]["sessionReset"], true);
    assert_ne!(lines[0]["sessionId"], session.as_str());
    // Alice's session holds her one exchange, nothing of bob's; the files
    // named were never written.
    let (_, transcript) = server
        .get(&format!("/api/chat/session?sessionId={session}"))
        .await;
    assert_eq!(transcript["messages"].as_array().unwrap().len(), 2);
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(nested.join(format!("{session}.jsonl"))).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_caller_cannot_continue_is_replaced_by_a_new_one() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        text("Alice's."),
        text("New for an unknown one."),
        text("New for bob."),
    ]));
    let server = chat_server(&fx, provider).await;
    let lines = server.chat(json!({"message": "mine"})).await.rest().await;
    let alices = lines[0]["sessionId"].as_str().unwrap().to_string();

    // An unknown session: a new one, flagged on start and done.
    let lines = server
        .chat(json!({"message": "hello?", "sessionId": "sess_gone"}))
        .await
        .rest()
        .await;
    let unknown_kinds = types(&lines);
    let start = &lines[0];
    assert_eq!(start["type"], "start");
    assert_eq!(start["sessionReset"], true);
    let fresh = start["sessionId"].as_str().unwrap();
    assert!(fresh.starts_with("sess_") && fresh != "sess_gone");
    let done = only(&lines, "done").pop().unwrap();
    assert_eq!(done["sessionReset"], true);
    assert_eq!(done["sessionId"], fresh);
    assert_eq!(streamed_text(&lines), "New for an unknown one.");
    // Continuing the new one is no reset.
    let (status, info) = server
        .get(&format!("/api/chat/session?sessionId={fresh}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{info}");

    // Another user's session is the same to bob as an unknown one.
    let response = server
        .http
        .post(server.url("/api/chat"))
        .bearer_auth(BOB_TOKEN)
        .json(&json!({"message": "let me in", "sessionId": alices}))
        .send()
        .await
        .unwrap();
    let lines = support::chat::ChatStream::of(response).rest().await;
    assert_eq!(lines[0]["sessionReset"], true);
    let bobs = lines[0]["sessionId"].as_str().unwrap();
    assert_ne!(bobs, alices);
    assert_eq!(types(&lines), unknown_kinds);
    assert_eq!(only(&lines, "done")[0]["sessionReset"], true);
    let (status, info) = send(
        server
            .http
            .get(server.url(&format!("/api/chat/session?sessionId={bobs}")))
            .bearer_auth(BOB_TOKEN),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["session"]["owner"], "bob");
    let (_, transcript) = server
        .get(&format!("/api/chat/session?sessionId={alices}"))
        .await;
    assert_eq!(transcript["messages"].as_array().unwrap().len(), 2);
    assert!(!transcript["messages"].to_string().contains("let me in"));

    // A malformed id is still an error, and the other routes keep their
    // 404 for an unknown session.
    assert_error(
        &server
            .post(
                "/api/chat",
                json!({"message": "x", "sessionId": "not an id"}),
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &server
            .post("/api/chat/abort", json!({"sessionId": "sess_gone"}))
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &server
            .post("/api/chat/resume", json!({"sessionId": "sess_gone"}))
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_start_carries_what_the_agent_setup_found_wrong() {
    let fx = Fixture::new();
    let skills = fx.workspace().join(".agents").join("skills");
    let broken = skills.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("SKILL.md"), "---\nname: broken\n---\n").unwrap();
    let good = skills.join("review");
    std::fs::create_dir_all(&good).unwrap();
    std::fs::write(
        good.join("SKILL.md"),
        "---\nname: review\ndescription: Review code.\n---\n# Review\n",
    )
    .unwrap();
    let [first, after] = gated_turn("Ran it.");
    let provider = Arc::new(ScriptedProvider::new([
        first,
        after,
        text("Followed up."),
        text("More."),
    ]));
    let server = TestServer::start_with(
        fx.engine(fx.store().await, provider),
        Options {
            chat_workspace: Some(fx.workspace()),
            chat_settings: ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            },
            skill_dirs: vec![skills.clone()],
            ..Options::default()
        },
    )
    .await;
    let mut stream = server.chat(json!({"message": "run it"})).await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    let start = &seen[0];
    assert_eq!(start["type"], "start");
    let diagnostics = start["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["kind"], "dropped");
    assert!(
        diagnostics[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("broken/SKILL.md"),
        "{diagnostics:?}"
    );
    // The shape is the one `/api/chat/resources` gives.
    let (_, resources) = server.get("/api/chat/resources").await;
    assert_eq!(resources["diagnostics"][0]["kind"], diagnostics[0]["kind"]);
    assert_eq!(
        resources["diagnostics"][0]["message"],
        diagnostics[0]["message"]
    );
    // A second turn of the same stream does not repeat them.
    let session = start["sessionId"].as_str().unwrap().to_string();
    server
        .chat(json!({"message": "then tidy up", "sessionId": session, "streamingBehavior": "followUp"}))
        .await
        .rest()
        .await;
    approve(&server, &session, "c1").await;
    let lines = stream.rest().await;
    assert_eq!(only(&lines, "done").len(), 2, "{:?}", types(&lines));
    assert!(
        only(&lines, "start")
            .iter()
            .all(|s| s.get("diagnostics").is_none())
    );

    // Once the skill is mended, and with AGENTS.md cut for its size, the
    // next stream says so instead.
    std::fs::remove_dir_all(&broken).unwrap();
    std::fs::write(fx.workspace().join("AGENTS.md"), "x".repeat(40 * 1024)).unwrap();
    let lines = server
        .chat(json!({"message": "more", "sessionId": session}))
        .await
        .rest()
        .await;
    let diagnostics = lines[0]["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["kind"], "warning");
    assert!(
        diagnostics[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("AGENTS.md"),
        "{diagnostics:?}"
    );
    assert_eq!(only(&lines, "done").len(), 1);
}

/// A server whose `mode: "harness"` runs a two-phase workflow: `triage`,
/// then `fix` behind a gate, each prompt a template over the message.
async fn harness_server(fx: &Fixture, provider: Arc<ScriptedProvider>) -> TestServer {
    let dir = fx.dir.path().join("workflow");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("triage.md"), "Triage this in {{repo}}: {{input}}").unwrap();
    std::fs::write(dir.join("fix.md"), "Fix this: {{input}}").unwrap();
    let file = dir.join("harness.yaml");
    std::fs::write(
        &file,
        "name: harness\nphases:\n  - name: triage\n    prompt: triage.md\n  - name: fix\n    prompt: fix.md\n    gate: approval\n",
    )
    .unwrap();
    let workflow =
        roundtable_skills::Workflow::load(&file, &roundtable_skills::SkillLibrary::new(&dir))
            .unwrap();
    TestServer::start_with(
        fx.engine(fx.store().await, provider),
        Options {
            chat_workspace: Some(fx.workspace()),
            chat_settings: ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            },
            workflow: Some(workflow),
            workflow_context: [("repo".to_string(), json!("demo"))].into_iter().collect(),
            ..Options::default()
        },
    )
    .await
}

/// The `state` lines' names and phases, in order.
fn phases(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["type"] == "state")
        .filter_map(|l| {
            let name = l["state"]["name"].as_str()?;
            name.starts_with("phase_")
                .then(|| format!("{name}:{}", l["state"]["phase"].as_str().unwrap_or("?")))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harness_mode_runs_the_workflow_s_phases_in_one_stream() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        text("Triaged: the greeting."),
        text("Fixed the greeting."),
    ]));
    let server = harness_server(&fx, provider.clone()).await;
    let mut stream = server
        .chat(json!({"message": "the greeting is wrong", "mode": "harness"}))
        .await;
    // The first phase runs, then the second waits at its gate.
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    assert_eq!(seen[0]["type"], "start", "{:?}", types(&seen));
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();
    assert_eq!(phases(&seen), ["phase_start:triage", "phase_end:triage"]);
    assert_eq!(streamed_text(&seen), "Triaged: the greeting.");
    let gate = seen.last().unwrap();
    assert_eq!(
        gate["part"]["toolName"],
        roundtable_sessions::records::PHASE_GATE_TOOL
    );
    let call = gate["part"]["toolCallId"].as_str().unwrap().to_string();
    // Decided like any approval.
    approve(&server, &session, &call).await;
    let rest = stream.rest().await;
    let kinds = types(&rest);
    assert_eq!(
        phases(&rest),
        ["phase_start:fix", "phase_end:fix"],
        "{kinds:?}"
    );
    assert_eq!(streamed_text(&rest), "Fixed the greeting.");
    assert_eq!(only(&rest, "done").len(), 1, "{kinds:?}");
    assert_eq!(rest.last().unwrap()["type"], "done", "{kinds:?}");
    let last = &rest[rest.len() - 2];
    assert_eq!(last["state"]["name"], "workflow_end", "{kinds:?}");
    assert_eq!(
        last["state"]["detail"]["completed"],
        json!(["triage", "fix"])
    );
    assert!(only(&rest, "error").is_empty(), "{kinds:?}");
    // Each phase's prompt carried the message (and the host's values).
    let asked: Vec<String> = provider
        .take_requests()
        .iter()
        .map(|r| r.last_user_text())
        .collect();
    assert_eq!(
        asked,
        [
            "[alice]: Triage this in demo: the greeting is wrong",
            "[alice]: Fix this: the greeting is wrong"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_gate_ends_the_harness_stream_with_an_error() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("Triaged.")]));
    let server = harness_server(&fx, provider).await;
    let mut stream = server
        .chat(json!({"message": "look", "mode": "harness"}))
        .await;
    let seen = stream
        .until_where("tool", |l| l["part"]["state"] == "approval-requested")
        .await;
    let session = seen[0]["sessionId"].as_str().unwrap().to_string();
    let call = seen.last().unwrap()["part"]["toolCallId"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, answer) = server
        .post(
            "/api/chat/question",
            json!({"sessionId": session, "toolCallId": call, "decision": "deny", "reason": "not now"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let rest = stream.rest().await;
    let kinds = types(&rest);
    assert_eq!(phases(&rest), ["phase_failed:fix"], "{kinds:?}");
    let last = rest.last().unwrap();
    assert_eq!(last["type"], "error", "{kinds:?}");
    let message = last["message"].as_str().unwrap();
    assert!(
        message.contains("fix") && message.contains("not now"),
        "{message}"
    );

    // Harness mode takes no model and no plan action; a server without a
    // workflow refuses it, saying what is missing.
    for body in [
        json!({"message": "x", "mode": "harness", "model": "scripted/m"}),
        json!({"message": "x", "mode": "harness", "planAction": "execute"}),
    ] {
        assert_error(
            &server.post("/api/chat", body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
        );
    }
    let other = Fixture::new();
    let bare = chat_server(&other, silent()).await;
    let answer = bare
        .post("/api/chat", json!({"message": "x", "mode": "harness"}))
        .await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("workflow"),
        "{}",
        answer.1
    );
}
