//! A client written from `specs/agentic-sessions.md` alone: it reads the
//! spec's envelope (`ts`, `session_id`, `turn_id`, `type`, `data`) and only
//! the data fields the spec promises (the message object, the tool call and
//! result objects, the approval's tool and call id), over a real server and
//! a real SSE parser. It drives one session through a long turn (30 tool
//! rounds, an approval, a queued follow-up), a cancelled turn after it, and
//! reads its files back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::StatusCode;
use roundtable_providers::{AssistantMessage, ScriptedProvider};
use serde_json::{Value, json};
use support::*;

/// The tool rounds of the long turn.
const ROUNDS: usize = 30;

/// What the verification command prints, so that its log says something.
const VERIFIED: &str = "verification passed";

/// One event as the spec's client reads it: the envelope, and `data`.
#[derive(Debug, Clone)]
struct SpecEvent {
    kind: String,
    turn_id: Option<String>,
    data: Value,
}

impl SpecEvent {
    /// Reads the envelope the spec writes; fails the test on a missing
    /// field.
    fn read(message: &Message, session: &str) -> Self {
        let envelope = &message.data;
        assert_eq!(message.event, "message", "frames are unnamed");
        assert!(envelope["ts"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert_eq!(envelope["session_id"], session, "{envelope}");
        assert!(envelope["data"].is_object(), "{envelope}");
        Self {
            kind: envelope["type"].as_str().unwrap().to_string(),
            turn_id: envelope["turn_id"].as_str().map(str::to_string),
            data: envelope["data"].clone(),
        }
    }

    fn is(&self, kind: &str) -> bool {
        self.kind == kind
    }
}

/// The spec's client of one session's event stream.
struct SpecClient {
    session: String,
    events: Events,
    seen: Vec<SpecEvent>,
}

impl SpecClient {
    /// Reads until an event of `kind`; the events read.
    async fn until(&mut self, kind: &str) -> Vec<SpecEvent> {
        let read: Vec<SpecEvent> = self
            .events
            .until(kind)
            .await
            .iter()
            .map(|m| SpecEvent::read(m, &self.session))
            .collect();
        self.seen.extend(read.iter().cloned());
        read
    }
}

/// The spec's message object, checked: `{id, role, parts, created_at}`.
fn message_of(event: &SpecEvent) -> &Value {
    let message = &event.data["message"];
    assert!(message["id"].is_string(), "{message}");
    assert!(message["parts"].is_array(), "{message}");
    assert!(
        message["created_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{message}"
    );
    message
}

/// The text parts of a parts array, joined.
fn text_of(parts: &Value) -> String {
    parts
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "text")
        .map(|p| p["text"].as_str().unwrap())
        .collect()
}

/// The model's replies: 27 reads, a patch, a gated shell command and a
/// verification, then the answer; the follow-up's answer; and a third
/// turn's gated command, which is cancelled.
fn script() -> Vec<AssistantMessage> {
    let mut replies: Vec<AssistantMessage> = (1..=ROUNDS - 3)
        .map(|i| call(&format!("r{i}"), "read_file", json!({"path": "README.md"})))
        .collect();
    replies.push(call(
        "p28",
        "apply_patch",
        json!({"patch": status_patch("broken", "fixed")}),
    ));
    replies.push(call(
        "s29",
        "shell",
        json!({"command": "echo ran > ran.txt"}),
    ));
    replies.push(call("v30", "verify", json!({})));
    replies.push(text("Turn one is done."));
    replies.push(text("The follow-up is answered."));
    replies.push(call(
        "s31",
        "shell",
        json!({"command": "echo late > late.txt"}),
    ));
    replies
}

/// `POST .../attachments` with JSON: the spec's `{ref, mime_type}`.
async fn upload(server: &TestServer, session: &str, name: &str, mime: &str, bytes: &[u8]) -> Value {
    let (status, body) = server
        .post(
            &format!("/v1/sessions/{session}/attachments"),
            json!({"filename": name, "mime_type": mime, "data_base64": STANDARD.encode(bytes)}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// `GET /v1/sessions/{id}/{ref}`: the status, the content type, the bytes.
async fn fetch(
    server: &TestServer,
    session: &str,
    reference: &str,
) -> (StatusCode, String, Vec<u8>) {
    let response = server
        .request(
            reqwest::Method::GET,
            &format!("/v1/sessions/{session}/{reference}"),
        )
        .send()
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (
        status,
        content_type,
        response.bytes().await.unwrap().to_vec(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_client_sees_a_long_turn_a_follow_up_and_a_cancel_and_gets_its_files() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new(script()));
    let server = TestServer::start(fx.engine(fx.store().await, provider)).await;
    let session = server
        .create(json!({
            "workspace_path": fx.workspace(),
            "approval_policy": {"require_for_kinds": [], "require_for_tools": ["shell"]},
            "verify_policy": {"auto_verify": false, "commands": [format!("make test && echo {VERIFIED}")]},
            "patch_review": {"mode": "auto"},
        }))
        .await;
    let mut client = SpecClient {
        events: server.events(&session, None).await,
        session: session.clone(),
        seen: Vec::new(),
    };
    let notes = upload(&server, &session, "notes.md", "text/markdown", b"# Notes\n").await;
    let reference = notes["ref"].as_str().unwrap().to_string();
    let messages = format!("/v1/sessions/{session}/messages");
    let (status, first) = server
        .post(
            &messages,
            json!({"role": "user", "parts": [
                {"type": "text", "text": "Do the long work."},
                {"type": "file", "ref": reference, "mime_type": "text/markdown"},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    let turn_one = first["turn_id"].as_str().unwrap().to_string();

    // The gated command waits; a follow-up sent meanwhile is queued.
    let asked = client.until("approval_requested").await.pop().unwrap();
    assert_eq!(asked.data["tool"], "shell");
    assert_eq!(asked.data["tool_call_id"], "s29");
    assert_eq!(asked.turn_id.as_deref(), Some(&*turn_one));
    let follow_up = server.say(&session, "And then this.").await;
    assert_eq!(follow_up["queued"], "follow_up", "{follow_up}");
    let turn_two = follow_up["turn_id"].as_str().unwrap().to_string();
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{session}/approve"),
            json!({"turn_id": turn_one, "tool_call_id": "s29", "action": "approve", "reason": "ok"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    client.until("session_completed").await;
    let seen = client.seen.clone();

    check_user_message(&seen, &first, &reference);
    check_tool_events(&seen, &turn_one);
    check_answers_and_one_completion(&seen, &turn_one, &turn_two, &follow_up);
    let verify_log = check_patch_review_and_logs(&server, &session, &seen).await;
    assert!(verify_log.contains(VERIFIED), "{verify_log}");
    check_files_and_typed_404s(&server, &session, &reference, &turn_one).await;

    // A later turn, cancelled while it waits for its approval.
    let third = server.say(&session, "One more thing.").await;
    let turn_three = third["turn_id"].as_str().unwrap().to_string();
    client.until("approval_requested").await;
    let (status, _) = server
        .post(&format!("/v1/sessions/{session}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let rest = client.until("session_canceled").await;
    let canceled = rest.last().unwrap();
    assert_eq!(canceled.turn_id.as_deref(), Some(&*turn_three));
    assert!(!rest.iter().any(|e| e.is("session_completed")));
    server.engine.idle(&session).await.unwrap();
    assert!(!fx.workspace().join("late.txt").exists());
    let (_, info) = server.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(info["status"], "canceled");
}

/// The user's message is the spec's message object, with its file part.
fn check_user_message(seen: &[SpecEvent], sent: &Value, reference: &str) {
    let added = seen
        .iter()
        .find(|e| e.is("message_added") && e.data["message"]["id"] == sent["message_id"])
        .expect("the first message is added");
    let message = message_of(added);
    assert_eq!(message["role"], "user");
    assert_eq!(
        message["parts"],
        json!([
            {"type": "text", "text": "Do the long work."},
            {"type": "file", "ref": reference, "mime_type": "text/markdown"},
        ])
    );
}

/// Every call of the long turn has its `tool_call` when it starts and its
/// `tool_result` (with text parts) when it completes, in order.
fn check_tool_events(seen: &[SpecEvent], turn: &str) {
    let of_turn = |kind: &str| -> Vec<&SpecEvent> {
        seen.iter()
            .filter(|e| e.is(kind) && e.turn_id.as_deref() == Some(turn))
            .collect()
    };
    let started = of_turn("tool_call_started");
    let completed = of_turn("tool_call_completed");
    assert_eq!(started.len(), ROUNDS);
    assert_eq!(completed.len(), ROUNDS);
    for (start, done) in started.iter().zip(&completed) {
        let call = &start.data["tool_call"];
        assert!(call["name"].is_string(), "{call}");
        assert!(call["input"].is_object(), "{call}");
        let result = &done.data["tool_result"];
        assert_eq!(result["id"], call["id"], "{result}");
        assert!(result["ok"].is_boolean(), "{result}");
        assert!(!text_of(&result["parts"]).is_empty(), "{result}");
    }
    assert_eq!(started[0].data["tool_call"]["name"], "read_file");
    assert_eq!(started[0].data["tool_call"]["input"]["path"], "README.md");
    assert!(text_of(&completed[0].data["tool_result"]["parts"]).contains("Demo"));
    let ok: Vec<bool> = completed
        .iter()
        .map(|e| e.data["tool_result"]["ok"].as_bool().unwrap())
        .collect();
    assert!(ok.iter().all(|ok| *ok), "{ok:?}");
}

/// Each turn's answer is an assistant `message_added` before its
/// `turn_completed`; the session completes once, after the follow-up.
fn check_answers_and_one_completion(
    seen: &[SpecEvent],
    turn_one: &str,
    turn_two: &str,
    follow_up: &Value,
) {
    let position = |pred: &dyn Fn(&SpecEvent) -> bool| seen.iter().position(pred).unwrap();
    for (turn, answer) in [
        (turn_one, "Turn one is done."),
        (turn_two, "The follow-up is answered."),
    ] {
        let said = position(&|e| {
            e.is("message_added")
                && e.turn_id.as_deref() == Some(turn)
                && e.data["message"]["role"] == "assistant"
        });
        let message = message_of(&seen[said]);
        assert_eq!(text_of(&message["parts"]), answer);
        let ended = position(&|e| e.is("turn_completed") && e.turn_id.as_deref() == Some(turn));
        assert!(said < ended);
    }
    let queued =
        position(&|e| e.is("message_added") && e.data["message"]["id"] == follow_up["message_id"]);
    assert_eq!(message_of(&seen[queued])["role"], "user");
    let completions: Vec<&SpecEvent> = seen.iter().filter(|e| e.is("session_completed")).collect();
    assert_eq!(
        completions.len(),
        1,
        "one session_completed, after the follow-up"
    );
    assert_eq!(completions[0].turn_id.as_deref(), Some(turn_two));
    let second_end =
        position(&|e| e.is("turn_completed") && e.turn_id.as_deref() == Some(turn_two));
    assert!(position(&|e| e.is("session_completed")) > second_end);
    assert!(
        !seen
            .iter()
            .any(|e| e.is("session_failed") || e.is("session_canceled"))
    );
}

/// The automatic patch review's event and preview; the verification's
/// whole log, fetched from the reference its tool result names (its text).
async fn check_patch_review_and_logs(
    server: &TestServer,
    session: &str,
    seen: &[SpecEvent],
) -> String {
    let review = seen
        .iter()
        .find(|e| e.is("patch_reviewed"))
        .expect("a patch review");
    assert_eq!(review.data["tool_call_id"], "p28");
    assert_eq!(review.data["mode"], "auto");
    assert_eq!(review.data["applied"], true);
    let patch = status_patch("broken", "fixed");
    assert_eq!(review.data["diff"], patch.as_str());
    let preview = review.data["preview"].as_str().unwrap();
    let (status, kind, bytes) = fetch(server, session, preview).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind, "text/x-diff; charset=utf-8");
    assert_eq!(bytes, patch.as_bytes());

    let verified = seen
        .iter()
        .find(|e| e.is("tool_call_completed") && e.data["tool_result"]["id"] == "v30")
        .unwrap();
    let text = text_of(&verified.data["tool_result"]["parts"]);
    let start = text.find("artifacts/").expect("the result names its log");
    let log: String = text[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != ']')
        .collect();
    let (status, kind, bytes) = fetch(server, session, &log).await;
    assert_eq!(status, StatusCode::OK, "{log}");
    assert_eq!(kind, "text/plain; charset=utf-8");
    String::from_utf8(bytes).unwrap()
}

/// Attachments come back with their type; unknown names, `../` and
/// another user's request are typed 404s naming no server path.
async fn check_files_and_typed_404s(
    server: &TestServer,
    session: &str,
    reference: &str,
    turn: &str,
) {
    let (status, kind, bytes) = fetch(server, session, reference).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind, "text/markdown; charset=utf-8");
    assert_eq!(bytes, b"# Notes\n");
    let png = [
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R',
    ];
    let image = upload(server, session, "shot.png", "image/png", &png).await;
    let (status, kind, bytes) = fetch(server, session, image["ref"].as_str().unwrap()).await;
    assert_eq!((status, kind.as_str()), (StatusCode::OK, "image/png"));
    assert_eq!(bytes, png);

    let base = format!("/v1/sessions/{session}");
    for path in [
        "attachments/nope.txt".to_string(),
        "attachments/..%2Fevents.ndjson".to_string(),
        "attachments/..%2F..%2F..%2Fetc%2Fpasswd".to_string(),
        "attachments/.hidden".to_string(),
        format!("artifacts/{turn}/..%2F..%2Fsession.json"),
        format!("artifacts/{turn}/%2E%2E/%2E%2E/session.json"),
        format!("artifacts/{turn}/nope.log"),
        "artifacts/turn_nope/x.log".to_string(),
        "artifacts/..%2F..%2Fx/y.log".to_string(),
    ] {
        let answer = server.get(&format!("{base}/{path}")).await;
        assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
    }
    // Another user's request for a real file finds no session.
    let other = send(
        server
            .http
            .get(server.url(&format!("{base}/{reference}")))
            .bearer_auth(BOB_TOKEN),
    )
    .await;
    assert_error(&other, StatusCode::NOT_FOUND, "not_found");
    // `../` sent as is (no client normalises it away) reaches no file.
    let answer = raw(
        server.addr,
        format!(
            "GET {base}/attachments/../../../etc/passwd HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n",
            server.addr
        )
        .as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("\"not_found\""), "{answer}");
    assert!(!answer.contains("root:"), "{answer}");
}
