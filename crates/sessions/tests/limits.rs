//! What bounds a session's turn: no wall clock (a long turn runs to its
//! answer, an approval may take its time), a stall timeout on the model
//! stream (sent again, then the turn fails saying so), and the round cap
//! and budget a session chose at create, held by any engine.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use roundtable_providers::{
    HttpProvider, Model, OPENAI_COMPLETIONS, ScriptedProvider, StreamOptions,
};
use roundtable_sessions::{
    ApprovalAction, Caller, CreateSession, EventType, SessionEngine, SessionEvent, SessionEvents,
    SessionLimits, SessionStatus,
};
use roundtable_test_support::replay::{End, Replay, Reply};
use roundtable_thread_stream::ThreadStore;
use support::*;

/// The stall timeout of the engines over HTTP: short, so that the tests
/// see stalls quickly.
const STALL: Duration = Duration::from_millis(200);

const SHELL_CALL: &str = r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"command\": \"echo yes > yes.txt\"}"}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"#;

const ANSWER: &str = r#"data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},"finish_reason":null}]}

data: {"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

"#;

/// A response that starts, then never sends a byte of its body.
fn silent() -> Reply {
    Reply::Stream {
        chunks: Vec::new(),
        pause: Duration::ZERO,
        end: End::Hang,
    }
}

/// An engine over `store` whose model is served by `server`, with the
/// short stall timeout.
fn http_engine(store: Arc<dyn ThreadStore>, server: &Replay) -> SessionEngine {
    let model = Model::new(
        OPENAI_COMPLETIONS,
        "openai",
        "gpt-4o-mini",
        format!("{}/v1", server.base_url),
    );
    SessionEngine::builder(store, Arc::new(HttpProvider::new()), model)
        .stream_options(StreamOptions {
            api_key: Some("test-key".into()),
            ..StreamOptions::default()
        })
        .stall_timeout(Some(STALL))
        .chunk_interval(Duration::from_millis(5))
        .build()
}

/// The `finish_reason` of the last `turn_completed` among `events`.
fn completed_reason(events: &[SessionEvent]) -> String {
    let done = events
        .iter()
        .rfind(|e| e.kind == EventType::TurnCompleted)
        .unwrap_or_else(|| panic!("no turn_completed in {events:#?}"));
    done.data["finish_reason"].as_str().unwrap().to_string()
}

/// The session's events until it completes or fails.
async fn until_session_ends(events: &mut SessionEvents) -> Vec<SessionEvent> {
    read_until(events, |e| {
        matches!(
            e.kind,
            EventType::SessionCompleted | EventType::SessionFailed
        )
    })
    .await
}

/// How many tool calls among `events` got their result.
fn tool_results(events: &[SessionEvent]) -> usize {
    events
        .iter()
        .filter(|e| e.kind == EventType::ToolCallCompleted)
        .count()
}

fn with_limits(request: CreateSession, limits: SessionLimits) -> CreateSession {
    CreateSession {
        limits: Some(limits),
        ..request
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sixty_round_turn_runs_to_its_answer() {
    let fx = Fixture::new();
    let mut script: Vec<_> = (0..60)
        .map(|i| {
            call(
                &format!("c{i}"),
                "read_file",
                serde_json::json!({"path": "README.md"}),
            )
        })
        .collect();
    script.push(text("Read it sixty times."));
    let provider = Arc::new(ScriptedProvider::new(script));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let mut events = submit_watched(&engine, &session.id, "read a lot").await;
    let seen = until_session_ends(&mut events).await;
    assert_eq!(completed_reason(&seen), "stop");
    assert_eq!(provider.requests().len(), 61);
    let results = tool_results(&seen);
    assert_eq!(results, 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_decided_long_after_the_stall_timeout_lets_the_turn_go_on() {
    let fx = Fixture::new();
    let server = Replay::start(vec![
        Reply::sse(SHELL_CALL.as_bytes().to_vec()),
        Reply::sse(ANSWER.as_bytes().to_vec()),
    ])
    .await;
    let engine = http_engine(fx.store().await, &server);
    // The default policy gates `shell`.
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "run it").await;
    wait_for(&mut events, EventType::ApprovalRequested).await;

    // The person takes five stall timeouts to decide: the turn waits, as
    // it would for minutes (no wall clock counts this time).
    tokio::time::sleep(STALL * 5).await;
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::WaitingApproval);
    engine
        .decide(
            &Caller::Host,
            &session.id,
            "call_1",
            ApprovalAction::Approve,
            None,
        )
        .await
        .unwrap();
    let seen = until_session_ends(&mut events).await;
    assert_eq!(completed_reason(&seen), "stop");
    assert!(fx.workspace().join("yes.txt").exists());
    assert!(
        !seen.iter().any(|e| e.kind == EventType::Retry),
        "{seen:#?}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_model_stream_is_sent_again_then_fails_the_turn() {
    let fx = Fixture::new();
    let server = Replay::start(vec![silent(), silent(), silent()]).await;
    let engine = http_engine(fx.store().await, &server);
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let started = Instant::now();
    let mut events = submit_watched(&engine, &session.id, "hello?").await;
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionFailed).await;
    let took = started.elapsed();

    let failed = seen
        .iter()
        .find(|e| e.kind == EventType::TurnFailed)
        .unwrap();
    assert_eq!(failed.data["finish_reason"], "error");
    assert_eq!(
        failed.data["error"],
        "stream stalled: no data for 0.2 s (3 attempts)"
    );
    // The call was sent three times (twice again), each given up after the
    // stall timeout: the turn ended within a few of them.
    let retries: Vec<_> = seen
        .iter()
        .filter(|e| e.kind == EventType::Retry)
        .map(|e| (e.data["attempt"].clone(), e.data["max_attempts"].clone()))
        .collect();
    assert_eq!(retries, [(1.into(), 2.into()), (2.into(), 2.into())]);
    assert_eq!(server.requests().len(), 3);
    assert!(took >= STALL * 3, "{took:?}");
    assert!(took < STALL * 3 + Duration::from_secs(5), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_cap_chosen_at_create_holds_on_a_new_engine() {
    let fx = Fixture::new();
    let store = fx.store().await;
    let none = Arc::new(ScriptedProvider::new(
        Vec::<roundtable_providers::ScriptStep>::new(),
    ));
    let first = engine(store.clone(), none, &fx.data());
    let limits = SessionLimits {
        max_rounds: Some(3),
        ..SessionLimits::default()
    };
    let session = first
        .create(&Caller::Host, with_limits(fx.unverified_ungated(), limits))
        .await
        .unwrap();
    assert_eq!(session.limits, limits);
    drop(first);

    // Another engine (a restart, or another process) over the same store
    // reads the cap from the session's thread.
    let script: Vec<_> = (0..5)
        .map(|i| {
            call(
                &format!("c{i}"),
                "read_file",
                serde_json::json!({"path": "README.md"}),
            )
        })
        .collect();
    let provider = Arc::new(ScriptedProvider::new(script));
    let second = engine(store, provider.clone(), &fx.data());
    let mut events = submit_watched(&second, &session.id, "loop").await;
    let seen = until_session_ends(&mut events).await;
    assert_eq!(completed_reason(&seen), "max-rounds");
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(provider.remaining(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_chosen_at_create_stops_the_turn() {
    let fx = Fixture::new();
    let script: Vec<_> = (0..10)
        .map(|i| {
            call(
                &format!("c{i}"),
                "read_file",
                serde_json::json!({"path": "README.md"}),
            )
        })
        .collect();
    let provider = Arc::new(ScriptedProvider::new(script));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    // Every scripted round uses 15 tokens: the third passes 40.
    let limits = SessionLimits {
        max_tokens: Some(40),
        ..SessionLimits::default()
    };
    let session = engine
        .create(&Caller::Host, with_limits(fx.unverified_ungated(), limits))
        .await
        .unwrap();
    let mut events = submit_watched(&engine, &session.id, "spend").await;
    let seen = until_session_ends(&mut events).await;
    assert_eq!(completed_reason(&seen), "budget");
    assert_eq!(provider.requests().len(), 3);
    // The last round's call still got its result.
    let results = tool_results(&seen);
    assert_eq!(results, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_no_turn_could_run_under_are_refused_at_create() {
    let fx = Fixture::new();
    let none = Arc::new(ScriptedProvider::new(
        Vec::<roundtable_providers::ScriptStep>::new(),
    ));
    let engine = engine(fx.store().await, none, &fx.data());
    let limits = SessionLimits {
        max_rounds: Some(0),
        ..SessionLimits::default()
    };
    let refused = engine
        .create(&Caller::Host, with_limits(fx.unverified(), limits))
        .await;
    assert!(
        matches!(
            refused,
            Err(roundtable_sessions::SessionError::InvalidField {
                field: "limits.max_rounds",
                ..
            })
        ),
        "{refused:?}"
    );
}
