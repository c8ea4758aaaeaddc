//! A client of `/api/chat` written from the chat spec
//! (`chat-api-streaming.md`): it parses only what the spec promises, with
//! its own types, over real HTTP and a real NDJSON reader, and drives a
//! session through a long turn with an approval, a question, a queued
//! follow-up and an abort; then it lists the sessions and changes its
//! settings from an allowed origin.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use roundtable_providers::{AssistantMessage, ScriptedProvider};
use roundtable_server::ChatSettings;
use serde::Deserialize;
use serde_json::{Value, json};
use support::chat::ChatStream;
use support::*;

/// How many tool rounds the long turn takes before its approval.
const ROUNDS: usize = 30;

/// The origin the host allows.
const ORIGIN: &str = "http://localhost:3000";

/// One line of the stream, as the spec's `ChatStreamEvent` types it.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
enum Event {
    Start {
        id: String,
        run_id: String,
        session_id: String,
    },
    Delta {
        text: String,
    },
    Thinking {
        text: String,
    },
    Tool {
        part: ToolPart,
    },
    Plan {
        mode: String,
    },
    State {
        state: Signal,
    },
    Queue {
        steering: Vec<String>,
        follow_up: Vec<String>,
    },
    Compaction {
        phase: String,
    },
    Retry {
        phase: String,
    },
    Done {
        run_id: String,
        message: Message,
        session_id: String,
    },
    Error {
        message: String,
    },
}

/// The spec's `ChatToolPart`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolPart {
    #[serde(rename = "type")]
    kind: String,
    tool_call_id: String,
    tool_name: String,
    state: String,
}

/// The `state` event's signal.
#[derive(Debug, Clone, Deserialize)]
struct Signal {
    name: String,
}

/// The spec's `ChatMessage`: parts are typed by `type`.
#[derive(Debug, Clone, Deserialize)]
struct Message {
    id: String,
    parts: Vec<Value>,
}

/// One session of `GET /api/chat/sessions`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    session_id: String,
    session_file: Option<String>,
    modified_at: String,
}

/// `GET /api/chat/sessions`.
#[derive(Debug, Deserialize)]
struct Sessions {
    sessions: Vec<Listed>,
}

/// An open stream, read as the spec's events.
struct Stream {
    lines: ChatStream,
    seen: Vec<Event>,
}

impl Stream {
    async fn open(server: &TestServer, body: Value) -> Self {
        Self {
            lines: server.chat(body).await,
            seen: Vec::new(),
        }
    }

    fn parse(line: Value) -> Event {
        serde_json::from_value(line.clone())
            .unwrap_or_else(|e| panic!("not a spec event ({e}): {line}"))
    }

    /// Reads until a `tool` event whose part is in `state`; that part.
    async fn until_tool(&mut self, state: &str) -> ToolPart {
        loop {
            let event = Self::parse(self.lines.next().await);
            self.seen.push(event.clone());
            if let Event::Tool { part } = event
                && part.state == state
            {
                return part;
            }
        }
    }

    /// Every event, to the end of the stream.
    async fn rest(mut self) -> Vec<Event> {
        let rest = self.lines.rest().await;
        self.seen.extend(rest.into_iter().map(Self::parse));
        self.seen
    }
}

/// A server whose chat sessions work in the fixture's workspace,
/// answering with `script`, that allows [`ORIGIN`].
async fn spec_server(fx: &Fixture, script: Vec<AssistantMessage>) -> TestServer {
    TestServer::start_with(
        fx.engine(fx.store().await, Arc::new(ScriptedProvider::new(script))),
        Options {
            chat_workspace: Some(fx.workspace()),
            chat_settings: ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            },
            allowed_origin: Some(ORIGIN),
            ..Options::default()
        },
    )
    .await
}

/// The long turn: [`ROUNDS`] reads, a gated command, a question, an
/// answer; then the follow-up's turn, which calls a gated command the
/// client aborts.
fn script() -> Vec<AssistantMessage> {
    let mut script: Vec<AssistantMessage> = (0..ROUNDS)
        .map(|i| call(&format!("r{i}"), "read_file", json!({"path": "README.md"})))
        .collect();
    script.push(call(
        "gate",
        "shell",
        json!({"command": "echo ran > ran.txt"}),
    ));
    script.push(call(
        "ask",
        "ask_user",
        json!({"questions": [{"id": "color", "question": "Which colour?", "options": ["red", "blue"]}]}),
    ));
    script.push(text("Read it all, ran it, painted it blue."));
    script.push(call(
        "later",
        "shell",
        json!({"command": "echo later > later.txt"}),
    ));
    script.push(text("never"));
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_client_drives_a_long_turn_a_follow_up_and_an_abort() {
    let fx = Fixture::new();
    let server = spec_server(&fx, script()).await;
    let mut stream = Stream::open(&server, json!({"message": "read, run, ask"})).await;
    let gate = stream.until_tool("approval-requested").await;
    assert_eq!(
        (gate.kind.as_str(), gate.tool_name.as_str()),
        ("tool-shell", "shell")
    );
    let session = session_of(&stream.seen);
    let decision =
        json!({"sessionId": session, "toolCallId": gate.tool_call_id, "decision": "approve"});
    let (status, answer) = server.post("/api/chat/question", decision).await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    let asked = stream.until_tool("question-requested").await;
    assert_eq!(asked.kind, "tool-ask_user");
    queue_follow_up(&server, &session, "then tidy up").await;
    let answers = json!({"sessionId": session, "toolCallId": asked.tool_call_id, "answers": [{"id": "color", "values": ["blue"]}]});
    let (status, answer) = server.post("/api/chat/question", answers).await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // The follow-up runs as the next turn, in the same stream; its gated
    // call is aborted.
    stream.until_tool("approval-requested").await;
    let abort = json!({"sessionId": session, "reason": "enough"});
    let (status, answer) = server.post("/api/chat/abort", abort).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let events = stream.rest().await;

    check_turns(&events, &session);
    check_tools(&events);
    lists_newest_first(&server, &session).await;
}

/// The session the stream's first `start` names.
fn session_of(events: &[Event]) -> String {
    match events.first() {
        Some(Event::Start { session_id, .. }) => session_id.clone(),
        first => panic!("a stream opens with start, not {first:?}"),
    }
}

/// Queues `text` on the running turn: the answer is one `queue` line
/// whose `followUp` holds it, and the stream ends there.
async fn queue_follow_up(server: &TestServer, session: &str, text: &str) {
    let body = json!({"message": text, "sessionId": session, "streamingBehavior": "followUp"});
    let queued = Stream::open(server, body).await.rest().await;
    let [
        Event::Queue {
            steering,
            follow_up,
        },
    ] = queued.as_slice()
    else {
        panic!("a queued prompt is answered by one queue line: {queued:?}");
    };
    assert!(steering.is_empty(), "{steering:?}");
    assert_eq!(follow_up, &[text.to_string()]);
}

/// Each turn: `start`, `agent_start`, `turn_start`, ..., `turn_end`,
/// `agent_end`, `done`; the stream's last line is the last `done`.
fn check_turns(events: &[Event], session: &str) {
    let names: Vec<String> = events.iter().map(name).collect();
    let turns: Vec<&[String]> = names
        .split_inclusive(|n| n == "done")
        .filter(|t| t.iter().any(|n| n == "start"))
        .collect();
    assert_eq!(turns.len(), 2, "{names:?}");
    for turn in &turns {
        let at = |n: &str| turn.iter().position(|m| m == n);
        let order = [
            "start",
            "state:agent_start",
            "state:turn_start",
            "state:turn_end",
            "state:agent_end",
            "done",
        ]
        .map(|n| at(n).unwrap_or_else(|| panic!("no {n} in {turn:?}")));
        assert!(order.is_sorted(), "{turn:?}");
    }
    assert_eq!(names.last().map(String::as_str), Some("done"), "{names:?}");
    let dones: Vec<(&String, &Message, &String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Done {
                run_id,
                message,
                session_id,
            } => Some((run_id, message, session_id)),
            _ => None,
        })
        .collect();
    for (run, message, id) in &dones {
        assert_eq!((&message.id, id.as_str()), (*run, session));
    }
    let first = dones[0].1;
    let text: Vec<&Value> = first.parts.iter().filter(|p| p["type"] == "text").collect();
    assert_eq!(text[0]["text"], "Read it all, ran it, painted it blue.");
    let tools = first.parts.iter().filter(|p| {
        let kind = p["type"].as_str().unwrap_or("");
        kind.strip_prefix("tool-")
            .is_some_and(|name| Some(name) == p["toolName"].as_str())
    });
    assert_eq!(tools.count(), ROUNDS + 2, "{:?}", first.parts);
}

/// The name of an event, with a `state`'s signal.
fn name(event: &Event) -> String {
    let kind = match event {
        Event::Start { id, run_id, .. } => {
            assert_eq!(id, run_id);
            "start"
        }
        Event::Delta { text } | Event::Thinking { text } => {
            assert!(!text.is_empty());
            "delta"
        }
        Event::Tool { .. } => "tool",
        Event::Plan { mode } => return format!("plan:{mode}"),
        Event::State { state } => return format!("state:{}", state.name),
        Event::Queue { .. } => "queue",
        Event::Compaction { phase } | Event::Retry { phase } => return format!("phase:{phase}"),
        Event::Done { .. } => "done",
        Event::Error { message } => panic!("no error expected: {message}"),
    };
    kind.to_string()
}

/// Every tool call is typed `tool-<toolName>`, starts `pending`, and
/// (but the aborted one) ends `output-available`, through the approval
/// and question states only.
fn check_tools(events: &[Event]) {
    let mut states: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in events {
        if let Event::Tool { part } = event {
            assert_eq!(part.kind, format!("tool-{}", part.tool_name));
            let seen = states.entry(part.tool_call_id.clone()).or_default();
            seen.push(part.state.clone());
        }
    }
    assert_eq!(states.len(), ROUNDS + 3, "{states:?}");
    let between = [
        "approval-requested",
        "approval-responded",
        "question-requested",
        "question-answered",
    ];
    for (call, seen) in &states {
        assert_eq!(seen[0], "pending", "{call}: {seen:?}");
        if call == "later" {
            assert_eq!(seen[1], "approval-requested", "{seen:?}");
            continue;
        }
        assert_eq!(seen.last().unwrap(), "output-available", "{call}: {seen:?}");
        let middle = &seen[1..seen.len() - 1];
        assert!(
            middle.iter().all(|s| between.contains(&s.as_str())),
            "{call}: {seen:?}"
        );
    }
    assert_eq!(
        states["gate"],
        [
            "pending",
            "approval-requested",
            "approval-responded",
            "output-available"
        ]
    );
    assert!(
        states["ask"].contains(&"question-answered".to_string()),
        "{:?}",
        states["ask"]
    );
}

/// `GET /api/chat/sessions` lists the caller's sessions newest first, by
/// `modifiedAt`, with the fields a client continues one by.
async fn lists_newest_first(server: &TestServer, first: &str) {
    // A later millisecond for the new session's times.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (status, created) = server.post("/api/chat/new", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let newest = created["sessionId"].as_str().unwrap();
    let (status, listed) = server.get("/api/chat/sessions").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let Sessions { sessions } = serde_json::from_value(listed.clone()).unwrap();
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, [newest, first], "{listed}");
    assert!(
        sessions[0].modified_at > sessions[1].modified_at,
        "{listed}"
    );
    for listed in &sessions {
        let file = listed.session_file.as_deref().unwrap_or_default();
        assert!(file.contains(&listed.session_id), "{listed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_changes_the_settings_with_put() {
    let fx = Fixture::new();
    let server = spec_server(&fx, Vec::new()).await;
    let preflight = server
        .http
        .request(Method::OPTIONS, server.url("/api/chat/settings"))
        .header("origin", ORIGIN)
        .header("access-control-request-method", "PUT")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    let methods = headers["access-control-allow-methods"].to_str().unwrap();
    assert!(methods.split(',').any(|m| m.trim() == "PUT"), "{methods}");

    let response = server
        .request(Method::PUT, "/api/chat/settings")
        .header("origin", ORIGIN)
        .json(&json!({"streamingBehavior": "followUp"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["access-control-allow-origin"], ORIGIN);
    let updated: Value = response.json().await.unwrap();
    assert_eq!(
        updated["settings"]["streamingBehavior"], "followUp",
        "{updated}"
    );
    let (_, read) = server.get("/api/chat/settings").await;
    assert_eq!(read["settings"]["streamingBehavior"], "followUp", "{read}");
}
