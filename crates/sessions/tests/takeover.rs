//! Turns that outlive their process: engines sharing a store and leases,
//! one of which stops (its runtime dropped where it stands, as in a crash,
//! or shut down past its grace), while another carries its turn on.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roundtable_providers::{AssistantMessage, Message, ScriptedProvider};
use roundtable_sessions::{
    ApprovalAction, Caller, EventType, QuestionReply, SessionEngine, SessionStatus, Submit,
};
use roundtable_thread_stream::lease::{Leases, MemoryLeases};
use roundtable_thread_stream::{MemoryStore, ThreadStore};
use support::{Fixture, call, crash, kinds, model, read_until, text, wait_for};

/// How long a turn lease lasts in these tests, and how often it is renewed.
const TTL: Duration = Duration::from_millis(600);
const RENEW: Duration = Duration::from_millis(100);

/// An engine over `store` holding its turns by `leases`, looking for
/// lapsed ones every [`RENEW`].
fn leased(
    store: &Arc<dyn ThreadStore>,
    leases: &Arc<dyn Leases>,
    script: Vec<AssistantMessage>,
    ttl: Duration,
) -> SessionEngine {
    let engine = SessionEngine::builder(
        store.clone(),
        Arc::new(ScriptedProvider::new(script)),
        model(),
    )
    .chunk_interval(Duration::from_millis(5))
    .leases(leases.clone())
    .lease_timing(ttl, RENEW)
    .build();
    tokio::spawn(engine.take_over_turns());
    engine
}

/// A leased engine answering with `provider`, looking for lapsed leases
/// every [`RENEW`] (the engine that carries a crashed one's turn on).
fn carrier(
    store: &Arc<dyn ThreadStore>,
    leases: &Arc<dyn Leases>,
    provider: &Arc<ScriptedProvider>,
) -> SessionEngine {
    let engine = SessionEngine::builder(store.clone(), provider.clone(), model())
        .leases(leases.clone())
        .lease_timing(TTL, RENEW)
        .build();
    tokio::spawn(engine.take_over_turns());
    engine
}

/// Runs `life` with an engine of its own on a runtime of its own, then
/// [`crash`]es that runtime (nothing more is written, no lease renewed).
fn crash_after<T: Send + 'static>(
    store: &Arc<dyn ThreadStore>,
    leases: &Arc<dyn Leases>,
    script: Vec<AssistantMessage>,
    life: impl AsyncFnOnce(SessionEngine) -> T + Send + 'static,
) -> T {
    let (store, leases) = (store.clone(), leases.clone());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let result = runtime.block_on(async move {
            let engine = leased(&store, &leases, script, TTL);
            life(engine).await
        });
        crash(runtime);
        result
    })
    .join()
    .unwrap()
}

fn shared() -> (Arc<dyn ThreadStore>, Arc<dyn Leases>) {
    (Arc::new(MemoryStore::new()), Arc::new(MemoryLeases::new()))
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The text of every tool result the model read in its last request.
fn results_read(engine_script: &ScriptedProvider) -> Vec<String> {
    let requests = engine_script.requests();
    let last = requests.last().expect("the model was called");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(format!("{:?}", r.content)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_turn_of_a_crashed_engine_is_carried_on_and_approved_elsewhere() {
    let fx = Fixture::new();
    let (store, leases) = shared();
    let request = fx.unverified();
    let session = crash_after(
        &store,
        &leases,
        vec![call(
            "c1",
            "shell",
            serde_json::json!({"command": "echo ran >> side.txt"}),
        )],
        async move |engine| {
            let session = engine.create(&Caller::Host, request).await.unwrap();
            let mut events = engine
                .subscribe(&Caller::Host, &session.id, None)
                .await
                .unwrap();
            engine
                .submit(&Caller::Host, &session.id, Submit::text("go"))
                .await
                .unwrap();
            wait_for(&mut events, EventType::ApprovalRequested).await;
            session.id
        },
    );

    let provider = Arc::new(ScriptedProvider::new([text("It ran.")]));
    let carrier = carrier(&store, &leases, &provider);
    // A third engine, which runs no turns, takes the decision: any process
    // may.
    let decider = SessionEngine::builder(
        store.clone(),
        Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new())),
        model(),
    )
    .build();
    let mut events = carrier
        .subscribe(&Caller::Host, &session, None)
        .await
        .unwrap();
    let info = decider.get(&Caller::Host, &session).await.unwrap();
    assert_eq!(info.status, SessionStatus::WaitingApproval);
    decider
        .decide(&Caller::Host, &session, "c1", ApprovalAction::Approve, None)
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCompleted).await;
    let seen = kinds(&seen);
    let asked = seen
        .iter()
        .filter(|k| **k == EventType::ApprovalRequested)
        .count();
    assert_eq!(asked, 1, "the request is not made again: {seen:?}");
    assert_eq!(lines(&fx.workspace().join("side.txt")), ["ran"]);
    let read = results_read(&provider);
    assert_eq!(read.len(), 1, "{read:?}");
    assert!(!read[0].contains("stopped"), "{read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_running_when_its_engine_crashed_is_answered_as_stopped_not_run_again() {
    let fx = Fixture::new();
    let (store, leases) = shared();
    let request = fx.unverified_ungated();
    let side = fx.workspace().join("side.txt");
    let watched = side.clone();
    let session = crash_after(
        &store,
        &leases,
        vec![call(
            "c1",
            "shell",
            serde_json::json!({"command": "echo started >> side.txt; sleep 30"}),
        )],
        async move |engine| {
            let session = engine.create(&Caller::Host, request).await.unwrap();
            engine
                .submit(&Caller::Host, &session.id, Submit::text("go"))
                .await
                .unwrap();
            while lines(&watched).is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            session.id
        },
    );
    let provider = Arc::new(ScriptedProvider::new([text("It may have run.")]));
    let carrier = carrier(&store, &leases, &provider);
    let mut events = carrier
        .subscribe(&Caller::Host, &session, None)
        .await
        .unwrap();
    wait_for(&mut events, EventType::SessionCompleted).await;
    assert_eq!(lines(&side), ["started"], "the call did not run again");
    let read = results_read(&provider);
    assert_eq!(read.len(), 1, "{read:?}");
    assert!(
        read[0].contains("process running this call stopped"),
        "{read:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_goes_on_where_the_crash_left_it() {
    let fx = Fixture::new();
    let (store, leases) = shared();
    let request = fx.unverified_ungated();
    let side = fx.workspace().join("side.txt");
    let step = |i: usize| {
        call(
            &format!("c{i}"),
            "shell",
            serde_json::json!({"command": format!("echo {i} >> side.txt")}),
        )
    };
    // The first engine runs ten rounds, then hangs in the eleventh's call.
    let mut first: Vec<AssistantMessage> = (1..=10).map(step).collect();
    first.push(call(
        "hang",
        "shell",
        serde_json::json!({"command": "echo hang >> side.txt; sleep 30"}),
    ));
    let watched = side.clone();
    let session = crash_after(&store, &leases, first, async move |engine| {
        let session = engine.create(&Caller::Host, request).await.unwrap();
        engine
            .submit(&Caller::Host, &session.id, Submit::text("go"))
            .await
            .unwrap();
        while !lines(&watched).contains(&"hang".to_string()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        session.id
    });
    let mut rest: Vec<AssistantMessage> = (11..=30).map(step).collect();
    rest.push(text("All thirty."));
    let provider = Arc::new(ScriptedProvider::new(rest));
    let carrier = carrier(&store, &leases, &provider);
    let mut events = carrier
        .subscribe(&Caller::Host, &session, None)
        .await
        .unwrap();
    wait_for(&mut events, EventType::SessionCompleted).await;
    let mut expected: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
    expected.push("hang".into());
    expected.extend((11..=30).map(|i| i.to_string()));
    assert_eq!(lines(&side), expected, "every call ran once, in order");
    // The carrier's first request held the whole turn so far.
    let first_request = &provider.requests()[0];
    let results = first_request
        .messages
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(_)))
        .count();
    assert_eq!(results, 11);
    let info = carrier.get(&Caller::Host, &session).await.unwrap();
    assert_eq!(info.status, SessionStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_past_its_grace_hands_the_turn_over_at_once() {
    let fx = Fixture::new();
    let (store, leases) = shared();
    // Leases long enough that only a hand-over explains a quick takeover.
    let long = Duration::from_secs(30);
    let stopping = leased(
        &store,
        &leases,
        vec![call(
            "c1",
            "shell",
            serde_json::json!({"command": "echo ran >> side.txt"}),
        )],
        long,
    );
    let session = stopping
        .create(&Caller::Host, fx.unverified())
        .await
        .unwrap();
    let mut events = stopping
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    stopping
        .submit(&Caller::Host, &session.id, Submit::text("go"))
        .await
        .unwrap();
    wait_for(&mut events, EventType::ApprovalRequested).await;
    let carrier = leased(&store, &leases, vec![text("It ran.")], long);
    let stopped = stopping.shutdown(Duration::ZERO).await;
    assert_eq!(stopped.interrupted.len(), 1);
    let handed = Instant::now();
    // The carrier serves the approval the stopped engine asked for.
    let mut events = carrier
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    loop {
        let taken = carrier
            .decide(
                &Caller::Host,
                &session.id,
                "c1",
                ApprovalAction::Approve,
                None,
            )
            .await;
        if taken.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for(&mut events, EventType::SessionCompleted).await;
    assert!(
        handed.elapsed() < Duration::from_secs(10),
        "{:?}",
        handed.elapsed()
    );
    assert_eq!(lines(&fx.workspace().join("side.txt")), ["ran"]);
}

#[test]
fn with_leases_a_restart_carries_the_waiting_turn_on() {
    let fx = Fixture::new();
    let data = fx.data();
    let request = fx.unverified();
    let session = support::live_then_crash(fx.data(), move |store| async move {
        let leases: Arc<dyn Leases> = Arc::new(MemoryLeases::new());
        let engine = SessionEngine::builder(
            store,
            Arc::new(ScriptedProvider::new([call(
                "c1",
                "shell",
                serde_json::json!({"command": "echo ran >> side.txt"}),
            )])),
            model(),
        )
        .snapshot_dir(&data)
        .leases(leases)
        .build();
        let session = engine.create(&Caller::Host, request).await.unwrap();
        let mut events = engine
            .subscribe(&Caller::Host, &session.id, None)
            .await
            .unwrap();
        engine
            .submit(&Caller::Host, &session.id, Submit::text("go"))
            .await
            .unwrap();
        wait_for(&mut events, EventType::ApprovalRequested).await;
        session.id
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // A new process: its leases start empty, so every open turn is
        // carried on by its recovery.
        let store = fx.store().await;
        let engine = SessionEngine::builder(
            store,
            Arc::new(ScriptedProvider::new([text("It ran.")])),
            model(),
        )
        .snapshot_dir(fx.data())
        .leases(Arc::new(MemoryLeases::new()))
        .build();
        let recovery = engine.recover().await.unwrap();
        assert_eq!(recovery.touched.len(), 1);
        let info = engine.get(&Caller::Host, &session).await.unwrap();
        assert_eq!(info.status, SessionStatus::WaitingApproval);
        assert_eq!(info.pending_approvals.len(), 1);
        let mut events = engine
            .subscribe(&Caller::Host, &session, None)
            .await
            .unwrap();
        engine
            .decide(&Caller::Host, &session, "c1", ApprovalAction::Approve, None)
            .await
            .unwrap();
        wait_for(&mut events, EventType::SessionCompleted).await;
        assert_eq!(lines(&fx.workspace().join("side.txt")), ["ran"]);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_before_a_crash_stays_asked_and_its_answer_is_read() {
    let fx = Fixture::new();
    let (store, leases) = shared();
    let request = fx.unverified();
    let question =
        serde_json::json!({"questions": [{"id": "target", "question": "Which server?"}]});
    let session = crash_after(
        &store,
        &leases,
        vec![call("q1", "ask_user", question)],
        async move |engine| {
            let session = engine.create(&Caller::Host, request).await.unwrap();
            let mut events = engine
                .subscribe(&Caller::Host, &session.id, None)
                .await
                .unwrap();
            engine
                .submit(&Caller::Host, &session.id, Submit::text("deploy"))
                .await
                .unwrap();
            wait_for(&mut events, EventType::QuestionAsked).await;
            session.id
        },
    );
    let provider = Arc::new(ScriptedProvider::new([text("Deploying to staging.")]));
    let carrier = carrier(&store, &leases, &provider);
    let mut events = carrier
        .subscribe(&Caller::Host, &session, None)
        .await
        .unwrap();
    let answer = vec![QuestionReply {
        id: "target".into(),
        values: vec!["staging".into()],
    }];
    carrier
        .answer(&Caller::Host, &session, "q1", answer)
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCompleted).await;
    let asked = kinds(&seen)
        .iter()
        .filter(|k| **k == EventType::QuestionAsked)
        .count();
    assert_eq!(asked, 1, "the question is not asked again");
    let read = results_read(&provider);
    assert_eq!(read.len(), 1, "{read:?}");
    assert!(read[0].contains("target: staging"), "{read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_on_a_model_this_engine_lacks_fails_saying_so() {
    let fx = Fixture::new();
    let (store, leases) = shared();
    let request = fx.unverified();
    let other = roundtable_providers::Model::new(
        roundtable_providers::OPENAI_COMPLETIONS,
        "elsewhere",
        "big",
        "",
    );
    // The first engine offers `elsewhere/big` and runs the turn on it.
    let (store2, leases2) = (store.clone(), leases.clone());
    let session = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let id = runtime.block_on(async move {
            let provider = Arc::new(ScriptedProvider::new([call(
                "c1",
                "shell",
                serde_json::json!({"command": "echo ran >> side.txt"}),
            )]));
            let engine = SessionEngine::builder(store2, provider.clone(), model())
                .offer_model(other, provider)
                .leases(leases2)
                .lease_timing(TTL, RENEW)
                .build();
            let session = engine.create(&Caller::Host, request).await.unwrap();
            let mut events = engine
                .subscribe(&Caller::Host, &session.id, None)
                .await
                .unwrap();
            let message = Submit {
                model: Some("elsewhere/big".into()),
                ..Submit::text("go")
            };
            engine
                .submit(&Caller::Host, &session.id, message)
                .await
                .unwrap();
            wait_for(&mut events, EventType::ApprovalRequested).await;
            session.id
        });
        crash(runtime);
        id
    })
    .join()
    .unwrap();
    let carrier = leased(&store, &leases, vec![text("unused")], TTL);
    let mut events = carrier
        .subscribe(&Caller::Host, &session, None)
        .await
        .unwrap();
    let failed = wait_for(&mut events, EventType::TurnFailed).await;
    let error = failed.data["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("elsewhere/big"), "{}", failed.data);
}
