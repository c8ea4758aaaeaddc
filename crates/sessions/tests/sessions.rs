//! The spec's acceptance tests through the library: a git workspace with a
//! Makefile, the JSONL store in a temp folder, the scripted provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use roundtable_providers::{ErrorKind, Message, ScriptStep, ScriptedProvider, UserContent};
use roundtable_sessions::{
    ApprovalAction, Caller, CreateSession, EventId, EventType, SessionError, SessionMode,
    SessionStatus, Submit,
};
use roundtable_test_support::messages::{assert_history_valid, message_text};
use roundtable_thread_stream::EntryBody;
use support::*;

fn patch(from: &str, to: &str) -> serde_json::Value {
    serde_json::json!({ "patch": status_patch(from, to) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_a_session_writes_session_json_and_its_first_event() {
    let fx = Fixture::new();
    let engine = engine(
        fx.store().await,
        Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new())),
        &fx.data(),
    );
    let session = engine
        .create(&Caller::Host, CreateSession::new(fx.workspace()))
        .await
        .unwrap();
    assert!(session.id.starts_with("sess_"));
    assert_eq!(session.status, SessionStatus::Active);
    assert_eq!(
        session.workspace_path,
        fx.workspace().canonicalize().unwrap()
    );
    // Defaults of the spec.
    assert!(session.auto_run);
    assert!(session.verify_policy.auto_verify);
    assert_eq!(session.verify_policy.commands, ["make test"]);
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fx.data().join(&*session.id).join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["id"], *session.id);
    assert_eq!(json["status"], "active");
    let events = all_events(&engine, &session).await;
    assert_eq!(kinds(&events), [EventType::SessionCreated]);
    assert_eq!(events[0].id, EventId::of_entry(1));
    // Listed, most recent first.
    let other = engine
        .create(&Caller::Host, CreateSession::new(fx.workspace()))
        .await
        .unwrap();
    let listed: Vec<_> = engine
        .list(&Caller::Host)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [other.id, session.id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_emits_message_added_and_turn_started_and_tool_calls_their_events() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "read_file", serde_json::json!({"path": "README.md"})),
        text("The README says Demo."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let mut events = engine
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let sent = engine
        .submit(
            &Caller::Host,
            &session.id,
            Submit::text("What does the README say?"),
        )
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCompleted).await;
    let order = kinds(&seen);
    let at = |kind| order.iter().position(|k| *k == kind).unwrap();
    assert!(at(EventType::SessionCreated) < at(EventType::MessageAdded));
    assert!(at(EventType::MessageAdded) < at(EventType::TurnStarted));
    assert!(at(EventType::TurnStarted) < at(EventType::ToolCallStarted));
    assert!(at(EventType::ToolCallStarted) < at(EventType::ToolCallCompleted));
    assert!(at(EventType::ToolCallCompleted) < at(EventType::TurnCompleted));
    let added = &seen[at(EventType::MessageAdded)];
    assert_eq!(added.data["message_id"], sent.message_id.as_str());
    assert_eq!(added.data["parts"][0]["text"], "What does the README say?");
    let started = &seen[at(EventType::TurnStarted)];
    assert_eq!(
        started.turn_id.as_deref(),
        sent.turn_id.as_ref().map(|t| t.as_str())
    );
    let tool = &seen[at(EventType::ToolCallCompleted)];
    assert_eq!(tool.data["tool"], "read_file");
    assert_eq!(tool.data["tool_call_id"], "c1");
    assert_eq!(tool.data["ok"], true);
    assert!(tool.data["output"].as_str().unwrap().contains("# Demo"));
    assert!(order.contains(&EventType::ModelOutputDelta));
    // The model saw the workspace's context and the tools.
    let request = &provider.requests()[0];
    assert!(
        request
            .system_prompt
            .as_deref()
            .unwrap()
            .contains("README.md")
    );
    assert!(request.tools.iter().any(|t| t.name == "apply_patch"));
    assert!(request.tools.iter().any(|t| t.name == "diagram"));
    engine.idle(&session.id).await.unwrap();
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::Completed);
    // Named by its first message, in the snapshot too (none before one).
    assert_eq!(session.title, None);
    assert_eq!(info.title.as_deref(), Some("What does the README say?"));
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fx.data().join(&*session.id).join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["title"], "What does the README say?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_call_runs_only_once_approved_and_a_denied_one_never() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call(
            "c1",
            "shell",
            serde_json::json!({"command": "echo ran > ran.txt"}),
        ),
        call(
            "c2",
            "shell",
            serde_json::json!({"command": "echo denied > denied.txt"}),
        ),
        text("One ran, one was refused."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    // The default policy gates exec tools.
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "run it").await;

    let asked = wait_for(&mut events, EventType::ApprovalRequested).await;
    assert_eq!(asked.data["tool_call_id"], "c1");
    assert_eq!(asked.data["input"]["command"], "echo ran > ran.txt");
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::WaitingApproval);
    assert_eq!(&*info.pending_approvals[0].tool_call_id, "c1");
    assert!(
        !fx.workspace().join("ran.txt").exists(),
        "ran before its approval"
    );
    engine
        .decide(
            &Caller::Host,
            &session.id,
            "c1",
            ApprovalAction::Approve,
            None,
        )
        .await
        .unwrap();
    let granted = wait_for(&mut events, EventType::ApprovalGranted).await;
    assert_eq!(granted.data["tool_call_id"], "c1");

    wait_for(&mut events, EventType::ApprovalRequested).await;
    engine
        .decide(
            &Caller::Host,
            &session.id,
            "c2",
            ApprovalAction::Deny,
            Some("not that".into()),
        )
        .await
        .unwrap();
    let denied = wait_for(&mut events, EventType::ApprovalDenied).await;
    assert_eq!(denied.data["reason"], "not that");
    wait_for(&mut events, EventType::SessionCompleted).await;
    assert!(fx.workspace().join("ran.txt").exists());
    assert!(!fx.workspace().join("denied.txt").exists());
    // The model read why its call was refused.
    let last = provider.requests().pop().unwrap();
    let Message::ToolResult(refused) = last.messages.last().unwrap() else {
        panic!("the refusal is the last message")
    };
    assert!(refused.is_error);

    // Deciding again, or deciding an unknown call, is an error and stores
    // nothing. (The session's last entry, `settled`, follows the turn's
    // end: wait for it first.)
    engine.idle(&session.id).await.unwrap();
    let before = engine
        .get(&Caller::Host, &session.id)
        .await
        .unwrap()
        .last_seq;
    let again = engine
        .decide(
            &Caller::Host,
            &session.id,
            "c1",
            ApprovalAction::Approve,
            None,
        )
        .await;
    assert!(matches!(again, Err(SessionError::Conflict(_))), "{again:?}");
    let unknown = engine
        .decide(
            &Caller::Host,
            &session.id,
            "nope",
            ApprovalAction::Approve,
            None,
        )
        .await;
    assert!(
        matches!(unknown, Err(SessionError::NotFound(_))),
        "{unknown:?}"
    );
    assert_eq!(
        engine
            .get(&Caller::Host, &session.id)
            .await
            .unwrap()
            .last_seq,
        before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_for_the_session_approves_later_calls_of_the_tool() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call(
            "c1",
            "shell",
            serde_json::json!({"command": "echo 1 >> log.txt"}),
        ),
        call(
            "c2",
            "shell",
            serde_json::json!({"command": "echo 2 >> log.txt"}),
        ),
        text("Done."),
    ]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "log twice").await;
    wait_for(&mut events, EventType::ApprovalRequested).await;
    engine
        .decide(
            &Caller::Host,
            &session.id,
            "c1",
            ApprovalAction::ApproveSession,
            None,
        )
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCompleted).await;
    let granted: Vec<_> = seen
        .iter()
        .filter(|e| e.kind == EventType::ApprovalGranted)
        .map(|e| (e.data["tool_call_id"].clone(), e.data["scope"].clone()))
        .collect();
    assert_eq!(
        granted,
        [
            (serde_json::json!("c1"), serde_json::json!("session")),
            (serde_json::json!("c2"), serde_json::json!("call")),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(fx.workspace().join("log.txt")).unwrap(),
        "1\n2\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_waiting_for_approval_ends_the_turn_canceled() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([call(
        "c1",
        "shell",
        serde_json::json!({"command": "echo no > no.txt"}),
    )]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "go").await;
    wait_for(&mut events, EventType::ApprovalRequested).await;
    engine
        .cancel(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCanceled).await;
    assert!(kinds(&seen).contains(&EventType::CancelRequested));
    engine.idle(&session.id).await.unwrap();
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::Canceled);
    assert!(info.pending_approvals.is_empty());
    assert!(!fx.workspace().join("no.txt").exists());
    // Nothing runs now: cancelling again is a conflict.
    let again = engine.cancel(&Caller::Host, &session.id, None).await;
    assert!(matches!(again, Err(SessionError::Conflict(_))), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_runs_after_a_write_and_a_failure_goes_back_to_the_model() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "apply_patch", patch("broken", "still broken")),
        text("Done."),
        call("c2", "apply_patch", patch("still broken", "fixed")),
        text("Fixed for real."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "fix status.txt").await;
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCompleted).await;
    let checks: Vec<_> = seen
        .iter()
        .filter(|e| e.kind == EventType::VerificationCompleted)
        .map(|e| {
            (
                e.data["attempt"].clone(),
                e.data["command"].clone(),
                e.data["ok"].clone(),
            )
        })
        .collect();
    assert_eq!(
        checks,
        [
            (
                serde_json::json!(1),
                serde_json::json!("make test"),
                serde_json::json!(false)
            ),
            (
                serde_json::json!(2),
                serde_json::json!("make test"),
                serde_json::json!(true)
            ),
        ]
    );
    let failed = seen
        .iter()
        .find(|e| e.kind == EventType::VerificationCompleted)
        .unwrap();
    assert!(
        failed.data["output"]
            .as_str()
            .unwrap()
            .contains("status.txt is not fixed")
    );
    // The failure went back to the model as a message from `verify`.
    let third = &provider.requests()[2];
    let Message::User(report) = third.messages.last().unwrap() else {
        panic!("the report is a user message")
    };
    let UserContent::Text(report) = &report.content else {
        panic!("plain text")
    };
    assert!(
        report.starts_with("[verify]: Verification failed"),
        "{report}"
    );
    assert!(report.contains("status.txt is not fixed"));
    assert_eq!(
        std::fs::read_to_string(fx.workspace().join("status.txt")).unwrap(),
        "fixed\n"
    );
    engine.idle(&session.id).await.unwrap();
    assert_eq!(
        engine.get(&Caller::Host, &session.id).await.unwrap().status,
        SessionStatus::Completed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_that_keeps_failing_ends_the_turn_failed() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "apply_patch", patch("broken", "b1")),
        text("Done."),
        call("c2", "apply_patch", patch("b1", "b2")),
        text("Done again."),
        call("c3", "apply_patch", patch("b2", "b3")),
        text("Surely done."),
    ]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "fix").await;
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionFailed).await;
    let checks = seen
        .iter()
        .filter(|e| e.kind == EventType::VerificationCompleted)
        .count();
    assert_eq!(checks, 3);
    let failed = seen
        .iter()
        .find(|e| e.kind == EventType::TurnFailed)
        .unwrap();
    assert!(
        failed.data["error"]
            .as_str()
            .unwrap()
            .contains("verification still fails"),
        "{:?}",
        failed.data
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_long_command_kills_it_before_the_turn_ends() {
    let fx = Fixture::new();
    let pid_file = fx.workspace().join("sleep.pid");
    let provider = Arc::new(ScriptedProvider::new([call(
        "c1",
        "shell",
        serde_json::json!({"command": "sleep 30 & echo $! > sleep.pid; wait"}),
    )]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "wait").await;
    wait_for(&mut events, EventType::ToolCallStarted).await;
    let pid = pid_written_to(&pid_file).await;
    assert!(alive(pid), "sleep is running");
    engine
        .cancel(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    wait_for(&mut events, EventType::SessionCanceled).await;
    // By the time the turn is closed, its command's group was sent SIGKILL;
    // a grandchild such as this `sleep` ends when the kernel next runs it,
    // which on a loaded machine can be a moment after the signal.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "sleep {pid} outlived its cancelled turn"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// A process that stops while a turn's command runs (its runtime shut down
/// where it stands, as when a daemon's main returns on SIGTERM) takes the
/// command's whole process group with it: nothing the turn started outlives
/// the process that ran it.
#[test]
fn a_process_that_stops_mid_command_leaves_no_command_running() {
    let fx = Fixture::new();
    let pid_file = fx.workspace().join("sleep.pid");
    let pid = {
        let data = fx.data();
        let workspace = fx.unverified_ungated();
        let pid_file = pid_file.clone();
        live_then_crash(fx.data(), move |store| async move {
            let provider = Arc::new(ScriptedProvider::new([call(
                "c1",
                "shell",
                serde_json::json!({"command": "sleep 30 & echo $! > sleep.pid; wait"}),
            )]));
            let engine = engine(store, provider, &data);
            let session = engine.create(&Caller::Host, workspace).await.unwrap();
            let mut events = submit_watched(&engine, &session.id, "wait").await;
            wait_for(&mut events, EventType::ToolCallStarted).await;
            let pid = pid_written_to(&pid_file).await;
            assert!(alive(pid), "sleep is running");
            pid
        })
    };
    // The process's tasks are gone (the store is free again); the group was
    // sent SIGKILL as the command's task was dropped, and the kernel takes
    // a moment to end it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "sleep {pid} outlived the process whose turn started it"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The pid a command wrote to `file`, once it has (fails the test after
/// 20 s).
async fn pid_written_to(file: &std::path::Path) -> i32 {
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if let Ok(text) = std::fs::read_to_string(file)
                && let Ok(pid) = text.trim().parse::<i32>()
            {
                return pid;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap()
}

/// True while `pid` runs (a zombie waiting to be reaped does not run).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_retried_without_its_partial_output() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptStep::Fail {
            kind: ErrorKind::Server,
            message: text("I was about to"),
        },
        ScriptStep::Reply(text("Here it is.")),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let mut events = engine
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let sent = engine
        .submit(&Caller::Host, &session.id, Submit::text("answer"))
        .await
        .unwrap();
    wait_for(&mut events, EventType::SessionFailed).await;
    engine.idle(&session.id).await.unwrap();
    let failed = sent.turn_id.unwrap();
    // Only a failed turn is retried.
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::Failed);
    let retried = engine
        .retry(&Caller::Host, &session.id, failed.as_str())
        .await
        .unwrap();
    assert_ne!(retried, failed);
    let done = wait_for(&mut events, EventType::TurnCompleted).await;
    assert_eq!(done.turn_id.as_deref(), Some(retried.as_str()));
    // The retry saw the message, not the failed turn's output.
    let second = &provider.requests()[1];
    assert_eq!(second.messages.len(), 1, "{:?}", second.messages);
    engine.idle(&session.id).await.unwrap();
    let again = engine
        .retry(&Caller::Host, &session.id, retried.as_str())
        .await;
    assert!(matches!(again, Err(SessionError::Conflict(_))), "{again:?}");
    let unknown = engine.retry(&Caller::Host, &session.id, "turn_nope").await;
    assert!(
        matches!(unknown, Err(SessionError::NotFound(_))),
        "{unknown:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_submit_with_the_same_key_returns_the_same_ids_and_runs_once() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("once")]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let message = Submit {
        idempotency_key: Some("key-1".into()),
        ..Submit::text("hello")
    };
    let first = engine
        .submit(&Caller::Host, &session.id, message.clone())
        .await
        .unwrap();
    let second = engine
        .submit(&Caller::Host, &session.id, message.clone())
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();
    let third = engine
        .submit(&Caller::Host, &session.id, message)
        .await
        .unwrap();
    assert_eq!(first, second);
    assert_eq!(first, third);
    assert_eq!(provider.requests().len(), 1);
    let chats = engine
        .store()
        .read_all(&roundtable_thread_stream::ThreadId::new(&*session.id).unwrap())
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.body, EntryBody::Chat(_)))
        .count();
    assert_eq!(chats, 1);
    // Another key is another message.
    let other = engine
        .submit(
            &Caller::Host,
            &session.id,
            Submit {
                idempotency_key: Some("key-2".into()),
                auto_run: Some(false),
                ..Submit::text("hello")
            },
        )
        .await
        .unwrap();
    assert_ne!(other.message_id, first.message_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_sent_again_with_another_message_is_refused_and_stores_nothing() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("once")]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let message = Submit {
        idempotency_key: Some("key-1".into()),
        ..Submit::text("hello")
    };
    let first = engine
        .submit(&Caller::Host, &session.id, message.clone())
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();
    let stored = thread_entries(&engine, &session.id).await.len();
    let others = [
        Submit {
            text: "goodbye".into(),
            ..message.clone()
        },
        Submit {
            mode: Some(roundtable_sessions::SessionMode::Plan),
            ..message.clone()
        },
        Submit {
            auto_run: Some(false),
            ..message.clone()
        },
    ];
    for other in others {
        let refused = engine.submit(&Caller::Host, &session.id, other).await;
        assert!(
            matches!(&refused, Err(SessionError::KeyReused { key }) if key == "key-1"),
            "{refused:?}"
        );
        assert_eq!(
            refused.unwrap_err().kind(),
            roundtable_sessions::SessionErrorKind::KeyReused
        );
    }
    assert_eq!(thread_entries(&engine, &session.id).await.len(), stored);
    // The same message with the key is still a retry.
    let again = engine
        .submit(&Caller::Host, &session.id, message)
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(thread_entries(&engine, &session.id).await.len(), stored);
    assert_eq!(provider.requests().len(), 1);
}

/// The entries of `session`'s thread.
async fn thread_entries(
    engine: &roundtable_sessions::SessionEngine,
    session: &str,
) -> Vec<roundtable_thread_stream::Entry> {
    engine
        .store()
        .read_all(&roundtable_thread_stream::ThreadId::new(session).unwrap())
        .await
        .unwrap()
}

/// The `chat` entries of `session`'s thread.
async fn chat_entries(engine: &roundtable_sessions::SessionEngine, session: &str) -> usize {
    thread_entries(engine, session)
        .await
        .iter()
        .filter(|e| matches!(e.body, EntryBody::Chat(_)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_racing_if_idle_submits_one_starts_its_turn_and_the_others_are_refused() {
    const ROUNDS: usize = 20;
    const RACERS: usize = 5;
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new()));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    // The default policy gates exec tools: each round's turn waits for its
    // call's approval, so it runs while the racers are decided on.
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    for round in 0..ROUNDS {
        let call_id = format!("c{round}");
        provider.push(call(
            &call_id,
            "shell",
            serde_json::json!({"command": "true"}),
        ));
        provider.push(text("ran"));
        let last_seq = engine
            .get(&Caller::Host, &session.id)
            .await
            .unwrap()
            .last_seq;
        let after = EventId {
            seq: last_seq,
            sub: u32::MAX,
        };
        let mut events = engine
            .subscribe(&Caller::Host, &session.id, Some(after))
            .await
            .unwrap();
        let racers: Vec<_> = (0..RACERS)
            .map(|i| {
                let engine = engine.clone();
                let id = session.id.clone();
                tokio::spawn(async move {
                    let message = Submit {
                        if_idle: true,
                        ..Submit::text(format!("round {round}, racer {i}"))
                    };
                    engine.submit(&Caller::Host, &id, message).await
                })
            })
            .collect();
        let mut started = Vec::new();
        for racer in racers {
            match racer.await.unwrap() {
                Ok(submitted) => started.push(submitted),
                Err(SessionError::Busy(_)) => {}
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        assert_eq!(started.len(), 1, "round {round}: {started:?}");
        assert!(started[0].turn_id.is_some() && started[0].queued.is_none());
        // Only the message that got in is stored.
        assert_eq!(chat_entries(&engine, &session.id).await, round + 1);
        let asked = wait_for(&mut events, EventType::ApprovalRequested).await;
        assert_eq!(
            asked.turn_id,
            started[0].turn_id.as_ref().map(|t| t.as_str().into())
        );
        engine
            .decide(
                &Caller::Host,
                &session.id,
                &call_id,
                ApprovalAction::Approve,
                None,
            )
            .await
            .unwrap();
        engine.idle(&session.id).await.unwrap();
    }
    assert_eq!(provider.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_if_idle_submit_is_refused_while_a_turn_runs_and_queued_otherwise_not() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "shell", serde_json::json!({"command": "true"})),
        text("ran"),
    ]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "run it").await;
    wait_for(&mut events, EventType::ApprovalRequested).await;
    let before = thread_entries(&engine, &session.id).await.len();
    let refused = engine
        .submit(
            &Caller::Host,
            &session.id,
            Submit {
                if_idle: true,
                ..Submit::text("and then?")
            },
        )
        .await;
    assert!(matches!(refused, Err(SessionError::Busy(_))), "{refused:?}");
    assert_eq!(thread_entries(&engine, &session.id).await.len(), before);
    // Without it, the message waits as a follow-up.
    let queued = engine
        .submit(&Caller::Host, &session.id, Submit::text("and then?"))
        .await
        .unwrap();
    assert!(queued.queued.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_after_any_event_id_gives_exactly_the_rest() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[
            ("c1", "read_file", serde_json::json!({"path": "README.md"})),
            ("c2", "repo_tree", serde_json::json!({})),
        ]),
        text("All read."),
    ]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    engine
        .submit(&Caller::Host, &session.id, Submit::text("read"))
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();
    let all = all_events(&engine, &session).await;
    assert!(
        all.iter().any(|e| e.id.sub > 0),
        "some entry gives several events"
    );
    let ids: Vec<EventId> = all.iter().map(|e| e.id).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ids, sorted, "ids are unique and increasing");
    for (i, id) in ids.iter().enumerate() {
        let rest = &all[i + 1..];
        assert_eq!(
            engine
                .events(&Caller::Host, &session.id, Some(*id))
                .await
                .unwrap(),
            rest,
            "after {id}"
        );
        let mut live = engine
            .subscribe(&Caller::Host, &session.id, Some(*id))
            .await
            .unwrap();
        let mut got = Vec::new();
        for _ in 0..rest.len() {
            got.push(futures::StreamExt::next(&mut live).await.unwrap().unwrap());
        }
        assert_eq!(got, rest, "after {id}, live");
    }
    // An id past the end gives nothing, and the stream waits for more.
    let past = EventId::of_entry(10_000);
    assert!(
        engine
            .events(&Caller::Host, &session.id, Some(past))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_and_stores_nothing() {
    let fx = Fixture::new();
    let engine = engine(
        fx.store().await,
        Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new())),
        &fx.data(),
    );
    let session = engine.create(&Caller::Host, fx.ungated()).await.unwrap();
    let threads = engine.store().list_threads().await.unwrap();
    // Unknown sessions, and ids that are not session ids.
    for id in ["sess_unknown", "nope", "sess_../x", ""] {
        let err = engine.get(&Caller::Host, id).await.unwrap_err();
        assert!(
            matches!(
                err,
                SessionError::UnknownSession(_) | SessionError::InvalidId(_)
            ),
            "{id}: {err}"
        );
        assert!(
            engine
                .submit(&Caller::Host, id, Submit::text("x"))
                .await
                .is_err()
        );
        assert!(engine.cancel(&Caller::Host, id, None).await.is_err());
    }
    // A workspace that is missing, relative, or a file.
    let file = fx.workspace().join("README.md");
    for path in [fx.dir.path().join("missing"), "relative".into(), file] {
        let err = engine
            .create(&Caller::Host, CreateSession::new(&path))
            .await
            .unwrap_err();
        assert!(
            matches!(err, SessionError::InvalidWorkspace { .. }),
            "{path:?}: {err}"
        );
        assert_eq!(err.kind(), roundtable_sessions::SessionErrorKind::Invalid);
    }
    // An unknown call id.
    let err = engine
        .decide(
            &Caller::Host,
            &session.id,
            "call_x",
            ApprovalAction::Approve,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), roundtable_sessions::SessionErrorKind::NotFound);
    // Nothing was stored by any of it.
    assert_eq!(engine.store().list_threads().await.unwrap(), threads);
    assert_eq!(all_events(&engine, &session).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_decided_by_another_engine_over_the_same_store_lets_the_turn_run() {
    let fx = Fixture::new();
    let store = fx.store().await;
    let provider = Arc::new(ScriptedProvider::new([
        call(
            "c1",
            "shell",
            serde_json::json!({"command": "echo yes > yes.txt"}),
        ),
        text("Done."),
    ]));
    let runner = engine(store.clone(), provider, &fx.data());
    // A second engine: its own runtimes, nothing shared but the store.
    let other = engine(
        store,
        Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new())),
        &fx.data(),
    );
    let session = runner.create(&Caller::Host, fx.unverified()).await.unwrap();
    let mut events = other
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    runner
        .submit(&Caller::Host, &session.id, Submit::text("go"))
        .await
        .unwrap();
    wait_for(&mut events, EventType::ApprovalRequested).await;
    assert_eq!(
        other.get(&Caller::Host, &session.id).await.unwrap().status,
        SessionStatus::WaitingApproval
    );
    other
        .decide(
            &Caller::Host,
            &session.id,
            "c1",
            ApprovalAction::Approve,
            None,
        )
        .await
        .unwrap();
    wait_for(&mut events, EventType::SessionCompleted).await;
    assert!(fx.workspace().join("yes.txt").exists());
}

#[test]
fn a_restart_while_waiting_closes_the_turn_expires_the_approval_and_retry_runs_it() {
    let fx = Fixture::new();
    // The first process: asks for approval, then dies with the turn open.
    let (session, turn) = {
        let data = fx.data();
        let workspace = fx.unverified();
        // Every task of the process stops where it is: nothing more is
        // written, as in a crash.
        live_then_crash(fx.data(), move |store| async move {
            let provider = Arc::new(ScriptedProvider::new([call(
                "c1",
                "shell",
                serde_json::json!({"command": "echo ran > ran.txt"}),
            )]));
            let engine = engine(store, provider, &data);
            let session = engine.create(&Caller::Host, workspace).await.unwrap();
            let mut events = engine
                .subscribe(&Caller::Host, &session.id, None)
                .await
                .unwrap();
            let sent = engine
                .submit(&Caller::Host, &session.id, Submit::text("go"))
                .await
                .unwrap();
            wait_for(&mut events, EventType::ApprovalRequested).await;
            (session.id, sent.turn_id.unwrap())
        })
    };

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // The JSONL folder is free once the first process is gone.
        let store = roundtable_thread_stream::JsonlStore::open(fx.data())
            .await
            .unwrap();
        let provider = Arc::new(ScriptedProvider::new([
            call(
                "c2",
                "shell",
                serde_json::json!({"command": "echo ran > ran.txt"}),
            ),
            text("Ran it."),
        ]));
        let engine = engine(Arc::new(store), provider, &fx.data());
        let before = engine.get(&Caller::Host, &session).await.unwrap();
        assert_eq!(before.status, SessionStatus::WaitingApproval);
        let recovery = engine.recover().await.unwrap();
        assert_eq!(recovery.touched.len(), 1);
        let after = engine.get(&Caller::Host, &session).await.unwrap();
        assert_eq!(after.status, SessionStatus::Failed);
        assert!(after.pending_approvals.is_empty());
        let events = engine.events(&Caller::Host, &session, None).await.unwrap();
        let expired = events
            .iter()
            .find(|e| e.kind == EventType::ApprovalDenied)
            .unwrap();
        assert_eq!(expired.data["verdict"], "expired");
        let failed = events
            .iter()
            .find(|e| e.kind == EventType::TurnFailed)
            .unwrap();
        assert_eq!(failed.data["interrupted"], true);
        // A decision for the expired call is refused.
        let late = engine
            .decide(&Caller::Host, &session, "c1", ApprovalAction::Approve, None)
            .await;
        assert!(matches!(late, Err(SessionError::Conflict(_))), "{late:?}");
        assert!(!fx.workspace().join("ran.txt").exists());

        // Retry runs the message again; this time it is approved.
        let mut live = engine
            .subscribe(&Caller::Host, &session, Some(events.last().unwrap().id))
            .await
            .unwrap();
        let retried = engine
            .retry(&Caller::Host, &session, turn.as_str())
            .await
            .unwrap();
        wait_for(&mut live, EventType::ApprovalRequested).await;
        engine
            .decide(&Caller::Host, &session, "c2", ApprovalAction::Approve, None)
            .await
            .unwrap();
        let done = wait_for(&mut live, EventType::TurnCompleted).await;
        assert_eq!(done.turn_id.as_deref(), Some(retried.as_str()));
        assert!(fx.workspace().join("ran.txt").exists());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_canceled_mid_stream_leaves_the_next_request_no_half_message_or_unanswered_call() {
    let fx = Fixture::new();
    // The model writes a long text (about three seconds at this pace),
    // then calls a tool: canceled while the text streams, the call has not
    // been made yet.
    let mut half = text(&"Let me read the whole README before I answer. ".repeat(9));
    half.content
        .extend(call("c1", "read_file", serde_json::json!({"path": "README.md"})).content);
    half.stop_reason = roundtable_providers::StopReason::ToolUse;
    let provider = Arc::new(
        ScriptedProvider::new([half, text("Here is my answer.")])
            .with_chunk_chars(2)
            .with_pacing(std::time::Duration::from_millis(15)),
    );
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let mut events = submit_watched(&engine, &session.id, "what is this?").await;
    wait_for(&mut events, EventType::ModelOutputDelta).await;
    engine
        .cancel(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCanceled).await;
    assert!(
        !seen.iter().any(|e| e.kind == EventType::ToolCallStarted),
        "the canceled turn ran its tool"
    );
    engine.idle(&session.id).await.unwrap();

    // The next message's request: the question and the next one, nothing
    // of the half-written message (so no call without its result).
    engine
        .submit(&Caller::Host, &session.id, Submit::text("go on"))
        .await
        .unwrap();
    wait_for(&mut events, EventType::TurnCompleted).await;
    engine.idle(&session.id).await.unwrap();
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let next = &requests[1].messages;
    assert_history_valid(next);
    assert!(
        next.iter().all(|m| !matches!(m, Message::Assistant(_))),
        "{next:?}"
    );
    // Both questions, one after the other, in one user turn.
    let said: Vec<String> = next.iter().map(message_text).collect();
    assert_eq!(said, ["[user]: what is this?\n[user]: go on"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_at_once_to_two_engines_over_one_store_all_run_one_turn_at_a_time() {
    let fx = Fixture::new();
    let store = fx.store().await;
    // One model behind both engines, so its requests show every turn.
    let provider = Arc::new(ScriptedProvider::new(
        (0..12).map(|n| text(&format!("answer {n}"))),
    ));
    let first = engine(store.clone(), provider.clone(), &fx.data());
    let second = engine(store, provider.clone(), &fx.data());
    let session = first
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let mut events = first
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let send = |engine: &roundtable_sessions::SessionEngine, text: String| {
        let engine = engine.clone();
        let session = session.id.clone();
        tokio::spawn(async move {
            engine
                .submit(&Caller::Host, &session, Submit::text(text))
                .await
                .unwrap()
        })
    };
    let sent: Vec<_> = (0..3)
        .flat_map(|n| {
            [
                send(&first, format!("first engine's {n}")),
                send(&second, format!("second engine's {n}")),
            ]
        })
        .collect();
    let mut ids = Vec::new();
    for s in sent {
        ids.push(s.await.unwrap().message_id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 6, "a message id given twice");

    // Wait until both engines run nothing, nothing is queued, and the
    // model has read every message.
    let read_all = |provider: &ScriptedProvider| {
        let last = provider
            .requests()
            .last()
            .map(|r| r.messages.iter().map(message_text).collect::<String>())
            .unwrap_or_default();
        (0..3).all(|n| {
            last.contains(&format!("first engine's {n}"))
                && last.contains(&format!("second engine's {n}"))
        })
    };
    let info = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            first.idle(&session.id).await.unwrap();
            second.idle(&session.id).await.unwrap();
            let info = first.get(&Caller::Host, &session.id).await.unwrap();
            if info.running_turn_id.is_none()
                && info.queued_messages.is_empty()
                && read_all(&provider)
            {
                return info;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the messages were not all answered in 20 s");
    assert_eq!(info.status, SessionStatus::Completed, "{info:?}");

    // The turns, in the order stored, never overlap, and each made one
    // model request.
    let mut open: Option<Arc<str>> = None;
    let mut turns = 0;
    let seen = read_until(&mut events, |e| e.id.seq >= info.last_seq).await;
    for e in &seen {
        match e.kind {
            EventType::TurnStarted => {
                assert_eq!(open, None, "a turn started while another ran");
                open = e.turn_id.clone();
                turns += 1;
            }
            EventType::TurnCompleted | EventType::TurnFailed => {
                assert_eq!(open, e.turn_id, "a turn ended that was not running");
                open = None;
            }
            _ => {}
        }
    }
    assert_eq!(open, None);
    assert!((1..=6).contains(&turns), "{turns} turns");
    assert_eq!(provider.requests().len(), turns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_another_engine_kills_the_command_before_the_turn_ends() {
    let fx = Fixture::new();
    let store = fx.store().await;
    let pid_file = fx.workspace().join("sleep.pid");
    let provider = Arc::new(ScriptedProvider::new([call(
        "c1",
        "shell",
        serde_json::json!({"command": "sleep 30 & echo $! > sleep.pid; wait"}),
    )]));
    // Two engines over one store, as two servers over one NATS store are
    // set up: neither closes a turn the other may still run.
    let several = |provider: Arc<ScriptedProvider>| {
        roundtable_sessions::SessionEngine::builder(store.clone(), provider, model())
            .snapshot_dir(fx.data())
            .interrupt_open_turns_after(std::time::Duration::from_secs(600))
            .build()
    };
    let runner = several(provider);
    let other = several(Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new())));
    let session = runner.create(&Caller::Host, fx.ungated()).await.unwrap();
    let mut events = submit_watched(&runner, &session.id, "wait").await;
    wait_for(&mut events, EventType::ToolCallStarted).await;
    let pid = pid_written_to(&pid_file).await;
    assert!(alive(pid), "sleep is running");
    other
        .cancel(&Caller::Host, &session.id, Some("from elsewhere".into()))
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCanceled).await;
    // The turn was closed by the engine that ran it, after its command
    // was gone.
    assert!(!alive(pid), "sleep {pid} outlived its cancelled turn");
    let kinds: Vec<EventType> = seen.iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&EventType::CancelRequested), "{kinds:?}");
    assert!(kinds.contains(&EventType::ToolCallCompleted), "{kinds:?}");
    runner.idle(&session.id).await.unwrap();
    let info = other.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::Canceled);
    assert!(info.running_turn_id.is_none());
}

/// The thread file of `session` in the JSONL store under `data`.
fn thread_file(data: &std::path::Path, session: &str) -> std::path::PathBuf {
    let mut folders = vec![data.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.to_string_lossy().contains(session)
                && path.file_name().is_some_and(|n| n != "session.json")
            {
                return path;
            }
        }
    }
    panic!("no thread file of {session} under {}", data.display());
}

/// Cuts line `line` (from 1) of `file` in half, the lines after it kept.
fn cut_line(file: &std::path::Path, line: usize) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(
        lines.len() > line,
        "{} holds {} lines",
        file.display(),
        lines.len()
    );
    let cut = &lines[line - 1];
    lines[line - 1] = cut[..cut.len() / 2].to_string();
    std::fs::write(file, lines.join("\n") + "\n").unwrap();
}

/// Ends `file` with half of a copy of its last line: a write torn by a
/// crash.
fn tear_end(file: &std::path::Path) {
    let text = std::fs::read_to_string(file).unwrap();
    let last = text.lines().last().unwrap();
    let torn = format!("{text}{}", &last[..last.len() / 2]);
    std::fs::write(file, torn).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_session_is_reported_and_the_others_are_served() {
    let fx = Fixture::new();
    let ids: Vec<String> = {
        let engine = engine(
            fx.store().await,
            Arc::new(ScriptedProvider::new([text("unused")])),
            &fx.data(),
        );
        let mut ids = Vec::new();
        for _ in 0..4 {
            let request = CreateSession {
                mode: Some(SessionMode::Plan),
                ..fx.unverified()
            };
            ids.push(
                engine
                    .create(&Caller::Host, request)
                    .await
                    .unwrap()
                    .id
                    .to_string(),
            );
        }
        ids
    };
    // The third's first line is cut in half (a line follows it); the
    // fourth ends in a torn line, as a crash mid-write leaves it.
    cut_line(&thread_file(&fx.data(), &ids[2]), 1);
    tear_end(&thread_file(&fx.data(), &ids[3]));

    let engine = engine(
        fx.store().await,
        Arc::new(ScriptedProvider::new([text("unused")])),
        &fx.data(),
    );
    let recovery = engine.recover().await.unwrap();
    assert_eq!(recovery.unreadable.len(), 1, "{recovery:?}");
    assert_eq!(recovery.unreadable[0].id, ids[2]);
    let reason = &recovery.unreadable[0].reason;
    assert!(
        !reason.contains(&*fx.dir.path().to_string_lossy()),
        "{reason}"
    );

    for served in [&ids[0], &ids[1], &ids[3]] {
        let info = engine.get(&Caller::Host, served).await.unwrap();
        assert_eq!(info.status, SessionStatus::Active, "{served}");
    }
    let err = engine.get(&Caller::Host, &ids[2]).await.unwrap_err();
    assert!(matches!(err, SessionError::Unreadable { .. }), "{err}");
    assert_eq!(
        err.kind(),
        roundtable_sessions::SessionErrorKind::Unreadable
    );
    assert!(
        !err.to_string().contains(&*fx.dir.path().to_string_lossy()),
        "{err}"
    );
    let err = engine
        .submit(&Caller::Host, &ids[2], Submit::text("hello?"))
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        roundtable_sessions::SessionErrorKind::Unreadable,
        "{err}"
    );

    let listed = engine.list(&Caller::Host).await.unwrap();
    assert_eq!(listed.len(), 4, "{listed:?}");
    let damaged = listed.iter().find(|s| *s.id == *ids[2]).unwrap();
    assert_eq!(damaged.status, SessionStatus::Unreadable);
    // Its owner is in the thread that cannot be read: a user is not told
    // of it.
    let err = engine
        .get(&Caller::user("alice"), &ids[2])
        .await
        .unwrap_err();
    assert!(matches!(err, SessionError::UnknownSession(_)), "{err}");
}
