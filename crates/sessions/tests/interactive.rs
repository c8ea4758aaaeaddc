//! Interactive sessions: steering and follow-up queues, abort, questions,
//! plan mode, the runtime cache, per-user isolation, provenance.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::{Message, ScriptStep, ScriptedProvider, UserBlock, UserContent};
use roundtable_sessions::{
    Caller, CreateSession, EventType, PlanAction, QuestionReply, QueueMode, SessionError,
    SessionMode, SessionStatus, Submit,
};
use support::*;

/// A shell call that waits until `file` exists in the workspace.
fn wait_for_file(id: &str, file: &str) -> roundtable_providers::AssistantMessage {
    call(
        id,
        "shell",
        serde_json::json!({"command": format!("while [ ! -f {file} ]; do sleep 0.01; done; echo go")}),
    )
}

fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User(u) => Some(match &u.content {
                UserContent::Text(t) => t.to_string(),
                UserContent::Blocks(b) => b
                    .iter()
                    .filter_map(|b| match b {
                        UserBlock::Text(t) => Some(t.text.to_string()),
                        UserBlock::Image(_) => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            }),
            _ => None,
        })
        .collect()
}

fn steer(text: &str) -> Submit {
    Submit {
        queue: Some(QueueMode::Steer),
        ..Submit::text(text)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_lands_between_two_tool_rounds_and_a_follow_up_runs_after() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let provider = Arc::new(ScriptedProvider::new([
        wait_for_file("c1", "go"),
        text("Steered."),
        text("Followed up."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&host, fx.unverified_ungated()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "start").await;
    wait_for(&mut events, EventType::ToolCallStarted).await;

    let steered = engine
        .submit(&host, &session.id, steer("use the staging server"))
        .await
        .unwrap();
    assert_eq!(steered.queued, Some(QueueMode::Steer));
    assert_eq!(steered.turn_id, None, "the running turn answers a steer");
    let follow = engine
        .submit(&host, &session.id, Submit::text("then tidy up"))
        .await
        .unwrap();
    assert_eq!(follow.queued, Some(QueueMode::FollowUp));
    let update = read_until(&mut events, |e| {
        e.kind == EventType::QueueUpdated
            && e.data["follow_up"]
                .as_array()
                .is_some_and(|f| !f.is_empty())
    })
    .await
    .pop()
    .unwrap();
    assert_eq!(update.data["steering"][0]["text"], "use the staging server");
    assert_eq!(update.data["follow_up"][0]["text"], "then tidy up");
    let info = engine.get(&host, &session.id).await.unwrap();
    assert_eq!(info.queued_messages.len(), 2);

    std::fs::write(fx.workspace().join("go"), "").unwrap();
    read_until(&mut events, |e| e.kind == EventType::Settled).await;
    engine.idle(&session.id).await.unwrap();

    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    // The steer came after the tool result, before the second model call.
    let second = &requests[1].messages;
    assert!(matches!(second[second.len() - 2], Message::ToolResult(_)));
    assert_eq!(
        user_texts(second).last().unwrap(),
        "[user]: use the staging server"
    );
    // The follow-up ran as the next turn, under the id submit gave.
    assert_eq!(
        user_texts(&requests[2].messages).last().unwrap(),
        "[user]: then tidy up"
    );
    let all = engine.events(&host, &session.id, None).await.unwrap();
    let turns: Vec<_> = all
        .iter()
        .filter(|e| e.kind == EventType::TurnStarted)
        .map(|e| e.turn_id.clone().unwrap())
        .collect();
    assert_eq!(turns.len(), 2);
    assert_eq!(&*turns[1], follow.turn_id.unwrap().as_str());
    assert!(
        engine
            .get(&host, &session.id)
            .await
            .unwrap()
            .queued_messages
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_after_the_last_model_round_becomes_a_follow_up() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let provider = Arc::new(
        ScriptedProvider::new([
            text("a long final answer, streamed slowly"),
            text("Got the late one."),
        ])
        .with_chunk_chars(2)
        .with_pacing(Duration::from_millis(15)),
    );
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&host, fx.unverified_ungated()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "go").await;
    // The final round is streaming: no model call follows it.
    wait_for(&mut events, EventType::ModelOutputDelta).await;
    let late = engine
        .submit(&host, &session.id, steer("one more thing"))
        .await
        .unwrap();
    assert_eq!(late.queued, Some(QueueMode::Steer));
    let seen = read_until(&mut events, |e| e.kind == EventType::Settled).await;
    // It moved to the follow-up queue, then ran as its own turn.
    assert!(seen.iter().any(|e| e.kind == EventType::QueueUpdated
        && e.data["follow_up"].as_array().is_some_and(|f| f.len() == 1)));
    engine.idle(&session.id).await.unwrap();
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        user_texts(&requests[1].messages).last().unwrap(),
        "[user]: one more thing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_keeps_the_queue_and_unqueue_clears_it() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let provider = Arc::new(ScriptedProvider::new([
        wait_for_file("c1", "never"),
        text("Resumed."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&host, fx.unverified_ungated()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "start").await;
    wait_for(&mut events, EventType::ToolCallStarted).await;
    let a = engine
        .submit(&host, &session.id, Submit::text("a"))
        .await
        .unwrap();
    let b = engine
        .submit(&host, &session.id, Submit::text("b"))
        .await
        .unwrap();
    let c = engine
        .submit(&host, &session.id, Submit::text("c"))
        .await
        .unwrap();
    engine.cancel(&host, &session.id, None).await.unwrap();
    wait_for(&mut events, EventType::SessionCanceled).await;
    engine.idle(&session.id).await.unwrap();
    // Nothing ran after the abort, and the queue is intact.
    let info = engine.get(&host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::Canceled);
    let queued: Vec<_> = info
        .queued_messages
        .iter()
        .map(|q| q.message_id.to_string())
        .collect();
    assert_eq!(
        queued,
        [
            a.message_id.to_string(),
            b.message_id.to_string(),
            c.message_id.to_string()
        ]
    );
    assert_eq!(provider.requests().len(), 1);
    // One removed, then the rest cleared.
    engine
        .unqueue(&host, &session.id, Some(b.message_id.as_str()))
        .await
        .unwrap();
    let removed = wait_for(&mut events, EventType::QueueUpdated).await;
    assert_eq!(removed.data["change"], "removed");
    assert_eq!(removed.data["follow_up"].as_array().unwrap().len(), 2);
    let missing = engine
        .unqueue(&host, &session.id, Some(b.message_id.as_str()))
        .await;
    assert!(
        matches!(missing, Err(SessionError::NotFound(_))),
        "{missing:?}"
    );
    engine.unqueue(&host, &session.id, None).await.unwrap();
    let cleared = read_until(&mut events, |e| {
        e.kind == EventType::QueueUpdated
            && e.data["follow_up"].as_array().is_some_and(|f| f.is_empty())
    })
    .await
    .pop()
    .unwrap();
    assert_eq!(cleared.data["change"], "cleared");
    assert!(
        engine
            .get(&host, &session.id)
            .await
            .unwrap()
            .queued_messages
            .is_empty()
    );
}

#[test]
fn the_queue_survives_a_restart_and_runs_after_recovery() {
    let fx = Fixture::new();
    let (session, queued) = {
        let data = fx.data();
        let request = fx.unverified_ungated();
        live_then_crash(fx.data(), move |store| async move {
            let provider = Arc::new(ScriptedProvider::new([wait_for_file("c1", "never")]));
            let engine = engine(store, provider, &data);
            let session = engine.create(&Caller::Host, request).await.unwrap();
            let mut events = submit_watched(&engine, &session.id, "start").await;
            wait_for(&mut events, EventType::ToolCallStarted).await;
            let queued = engine
                .submit(
                    &Caller::Host,
                    &session.id,
                    Submit::text("after the restart"),
                )
                .await
                .unwrap();
            (session.id, queued)
        })
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = roundtable_thread_stream::JsonlStore::open(fx.data())
            .await
            .unwrap();
        let provider = Arc::new(ScriptedProvider::new([text("Ran after the restart.")]));
        let engine = engine(Arc::new(store), provider.clone(), &fx.data());
        let info = engine.get(&Caller::Host, &session).await.unwrap();
        assert_eq!(info.queued_messages.len(), 1);
        assert_eq!(
            &*info.queued_messages[0].message_id,
            queued.message_id.as_str()
        );
        engine.recover().await.unwrap();
        engine.idle(&session).await.unwrap();
        let info = engine.get(&Caller::Host, &session).await.unwrap();
        assert!(info.queued_messages.is_empty());
        assert_eq!(info.status, SessionStatus::Completed);
        assert_eq!(
            user_texts(&provider.requests()[0].messages).last().unwrap(),
            "[user]: after the restart"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_user_waits_for_the_answer_and_the_model_reads_it() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let provider = Arc::new(ScriptedProvider::new([
        call(
            "q1",
            "ask_user",
            serde_json::json!({"questions": [
                {"id": "target", "question": "Which server?", "options": ["staging", "production"]},
                {"id": "note", "question": "Anything else?"}
            ]}),
        ),
        text("Deploying to staging."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&host, fx.unverified()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "deploy").await;
    let asked = wait_for(&mut events, EventType::QuestionAsked).await;
    assert_eq!(asked.data["tool_call_id"], "q1");
    assert_eq!(asked.data["questions"][0]["options"][1], "production");
    // Answers must fit the questions.
    let wrong = engine
        .answer(
            &host,
            &session.id,
            "q1",
            vec![QuestionReply {
                id: "target".into(),
                values: vec!["moon".into()],
            }],
        )
        .await;
    assert!(
        matches!(wrong, Err(SessionError::InvalidField { .. })),
        "{wrong:?}"
    );
    engine
        .answer(
            &host,
            &session.id,
            "q1",
            vec![
                QuestionReply {
                    id: "target".into(),
                    values: vec!["staging".into()],
                },
                QuestionReply {
                    id: "note".into(),
                    values: vec!["be quick".into()],
                },
            ],
        )
        .await
        .unwrap();
    wait_for(&mut events, EventType::QuestionAnswered).await;
    wait_for(&mut events, EventType::SessionCompleted).await;
    let last = provider.requests().pop().unwrap();
    let Message::ToolResult(result) = last.messages.last().unwrap() else {
        panic!("the answers are the tool's result")
    };
    let text = result
        .content
        .iter()
        .map(|b| match b {
            UserBlock::Text(t) => t.text.to_string(),
            UserBlock::Image(_) => String::new(),
        })
        .collect::<String>();
    assert!(
        text.contains("target: staging") && text.contains("note: be quick"),
        "{text}"
    );
    let again = engine.answer(&host, &session.id, "q1", Vec::new()).await;
    assert!(matches!(again, Err(SessionError::Conflict(_))), "{again:?}");
    let unknown = engine.answer(&host, &session.id, "nope", Vec::new()).await;
    assert!(
        matches!(unknown, Err(SessionError::NotFound(_))),
        "{unknown:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_a_question_waits_ends_the_turn() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let provider = Arc::new(ScriptedProvider::new([call(
        "q1",
        "ask_user",
        serde_json::json!({"questions": [{"id": "x", "question": "Sure?"}]}),
    )]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&host, fx.unverified()).await.unwrap();
    let mut events = submit_watched(&engine, &session.id, "go").await;
    wait_for(&mut events, EventType::QuestionAsked).await;
    engine.cancel(&host, &session.id, None).await.unwrap();
    wait_for(&mut events, EventType::SessionCanceled).await;
    engine.idle(&session.id).await.unwrap();
    let late = engine.answer(&host, &session.id, "q1", Vec::new()).await;
    assert!(late.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_refine_execute_tracks_the_steps() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let plan = |statuses: [&str; 2]| {
        call(
            "p",
            "update_plan",
            serde_json::json!({"steps": [
                {"title": "read the code", "status": statuses[0]},
                {"title": "fix the bug", "status": statuses[1]}
            ]}),
        )
    };
    let provider = Arc::new(ScriptedProvider::new([
        plan(["pending", "pending"]),
        text("Here is the plan."),
        plan(["pending", "pending"]),
        text("Revised."),
        plan(["completed", "in_progress"]),
        plan(["completed", "completed"]),
        text("Done."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine
        .create(
            &host,
            CreateSession {
                mode: Some(SessionMode::Plan),
                ..fx.unverified_ungated()
            },
        )
        .await
        .unwrap();
    let mut events = submit_watched(&engine, &session.id, "plan the fix").await;
    wait_for(&mut events, EventType::SessionCompleted).await;
    engine.idle(&session.id).await.unwrap();
    // Plan mode offers read tools, ask_user and update_plan only.
    let mut offered: Vec<String> = provider.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    offered.sort();
    assert_eq!(
        offered,
        [
            "ask_user",
            "git_status",
            "read_file",
            "repo_map",
            "repo_tree",
            "search",
            "update_plan"
        ]
    );
    let refine = Submit {
        plan_action: Some(PlanAction::Refine),
        ..Submit::text("fewer steps")
    };
    engine.submit(&host, &session.id, refine).await.unwrap();
    wait_for(&mut events, EventType::SessionCompleted).await;
    engine.idle(&session.id).await.unwrap();
    assert_eq!(
        user_texts(&provider.requests()[2].messages).last().unwrap(),
        "[user]: Revise the plan: fewer steps"
    );

    let execute = Submit {
        plan_action: Some(PlanAction::Execute),
        ..Submit::default()
    };
    engine.submit(&host, &session.id, execute).await.unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCompleted).await;
    engine.idle(&session.id).await.unwrap();
    let mode = seen
        .iter()
        .find(|e| e.kind == EventType::ModeChanged)
        .unwrap();
    assert_eq!(mode.data["mode"], "agent");
    assert_eq!(mode.data["executing"], true);
    let counts: Vec<_> = seen
        .iter()
        .filter(|e| e.kind == EventType::PlanUpdated)
        .map(|e| {
            (
                e.data["completed"].as_u64().unwrap(),
                e.data["total"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, [(1, 2), (2, 2)]);
    // Executing offers every tool again.
    assert!(
        provider.requests()[4]
            .tools
            .iter()
            .any(|t| t.name == "apply_patch")
    );
    let info = engine.get(&host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtimes_are_evicted_by_idle_time_and_count_and_rebuilt_from_the_thread() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let provider = Arc::new(ScriptedProvider::new([
        text("one"),
        text("two"),
        text("three"),
    ]));
    let engine =
        roundtable_sessions::SessionEngine::builder(fx.store().await, provider.clone(), model())
            .runtime_ttl(Duration::from_millis(100))
            .max_runtimes(1)
            .build();
    let first = engine.create(&host, fx.unverified_ungated()).await.unwrap();
    let second = engine.create(&host, fx.unverified_ungated()).await.unwrap();
    // At most one idle runtime is kept.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while engine.cached_runtimes().await > 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never evicted by count"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // And none once unused for the idle time.
    while engine.cached_runtimes().await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never evicted by idle time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Messages still work: the runtimes are rebuilt from their threads.
    for session in [&first, &second] {
        engine
            .submit(&host, &session.id, Submit::text("hi"))
            .await
            .unwrap();
        engine.idle(&session.id).await.unwrap();
        assert_eq!(
            engine.get(&host, &session.id).await.unwrap().status,
            SessionStatus::Completed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_cannot_see_or_touch_another_users_session() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("hello alice")]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let alice = Caller::user("alice");
    let bob = Caller::user("bob");
    let session = engine
        .create(&alice, fx.unverified_ungated())
        .await
        .unwrap();
    assert_eq!(session.owner.as_deref(), Some("alice"));
    let unknown = |r: Result<(), SessionError>| matches!(r, Err(SessionError::UnknownSession(_)));
    assert!(unknown(engine.get(&bob, &session.id).await.map(|_| ())));
    assert!(unknown(
        engine
            .submit(&bob, &session.id, Submit::text("x"))
            .await
            .map(|_| ())
    ));
    assert!(unknown(
        engine.subscribe(&bob, &session.id, None).await.map(|_| ())
    ));
    assert!(unknown(engine.cancel(&bob, &session.id, None).await));
    assert!(unknown(engine.unqueue(&bob, &session.id, None).await));
    assert!(engine.list(&bob).await.unwrap().is_empty());
    assert!(unknown(
        engine
            .get(&Caller::Anonymous, &session.id)
            .await
            .map(|_| ())
    ));
    // Alice sees it; a user cannot create a session for someone else.
    assert_eq!(engine.list(&alice).await.unwrap().len(), 1);
    let forged = CreateSession {
        owner: Some("alice".into()),
        ..fx.unverified_ungated()
    };
    assert!(engine.create(&bob, forged).await.is_err());
    // Sessions of nobody are the host's, unless the host says anyone may use them.
    let unowned = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    assert!(engine.get(&bob, &unowned.id).await.is_err());
    let open = roundtable_sessions::SessionEngine::builder(
        engine.store().clone(),
        Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new())),
        model(),
    )
    .unowned_sessions(roundtable_sessions::UnownedSessions::Anyone)
    .build();
    assert!(open.get(&bob, &unowned.id).await.is_ok());
    assert!(open.get(&bob, &session.id).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_provenance_names_its_tools_files_and_verification() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let patch = "--- a/status.txt\n+++ b/status.txt\n@@ -1 +1 @@\n-broken\n+fixed\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n";
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "apply_patch", serde_json::json!({"patch": patch})),
        text("Fixed, and noted."),
    ]));
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine.create(&host, fx.ungated()).await.unwrap();
    let sent = engine
        .submit(&host, &session.id, Submit::text("fix"))
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();
    let runs = engine.runs(&host, &session.id).await.unwrap();
    assert_eq!(runs.len(), 1);
    let run = engine
        .provenance(&host, &session.id, &runs[0].run_id)
        .await
        .unwrap();
    assert_eq!(run, runs[0]);
    assert_eq!(run.message_id.as_deref(), Some(sent.message_id.as_str()));
    assert_eq!(run.outcome, "stop");
    assert_eq!(run.tools.len(), 1);
    assert_eq!(&*run.tools[0].tool, "apply_patch");
    assert!(run.tools[0].ok);
    assert_eq!(run.tools[0].arguments_digest.len(), 64);
    let files: Vec<_> = run
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.added, f.removed))
        .collect();
    assert_eq!(files, [("notes.txt", 2, 0), ("status.txt", 1, 1)]);
    assert_eq!(run.verification.len(), 1);
    assert!(run.verification[0].ok);
    assert_eq!(run.verification[0].command, "make test");
    assert!(run.usage.total_tokens > 0);
    assert!(
        run.git_after
            .as_deref()
            .unwrap_or_default()
            .contains("notes.txt")
    );
    let missing = engine.provenance(&host, &session.id, "turn_nope").await;
    assert!(
        matches!(missing, Err(SessionError::NotFound(_))),
        "{missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_tree_is_looked_at_only_around_tools_that_may_change_it() {
    let fx = Fixture::new();
    let host = Caller::Host;
    let provider = Arc::new(ScriptedProvider::new([
        // A run that only reads: no git status, no working-tree state.
        call("c1", "read_file", serde_json::json!({"path": "README.md"})),
        text("It is a demo."),
        // A run whose command adds a file: before and after are recorded,
        // and the next run's repository listing shows the file.
        call(
            "c2",
            "shell",
            serde_json::json!({"command": "echo new > added.txt"}),
        ),
        text("Added."),
        text("Seen."),
        text("Read again."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = engine.create(&host, fx.unverified_ungated()).await.unwrap();
    for prompt in ["What is this?", "Add a file.", "And now?"] {
        engine
            .submit(&host, &session.id, Submit::text(prompt))
            .await
            .unwrap();
        engine.idle(&session.id).await.unwrap();
    }
    let runs = engine.runs(&host, &session.id).await.unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[0].git_before, None);
    assert_eq!(runs[0].git_after, None);
    assert!(runs[0].files.is_empty());
    let before = runs[1].git_before.as_deref().unwrap();
    assert!(!before.contains("added.txt"), "{before}");
    assert!(runs[1].git_after.as_deref().unwrap().contains("added.txt"));
    let files: Vec<_> = runs[1].files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["added.txt"]);
    assert_eq!(runs[2].git_before, None);
    // The kept setup was dropped after the command ran: the third run's
    // prompt lists the new file.
    let prompt = |i: usize| provider.requests()[i].system_prompt.clone().unwrap();
    assert!(!prompt(0).contains("added.txt"));
    assert!(prompt(4).contains("added.txt"), "{}", prompt(4));
    // An AGENTS.md written outside the session's turns is seen by the
    // next one.
    std::fs::write(fx.workspace().join("AGENTS.md"), "Always answer in verse.").unwrap();
    engine
        .submit(&host, &session.id, Submit::text("Once more."))
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();
    assert!(
        prompt(5).contains("Always answer in verse."),
        "{}",
        prompt(5)
    );
}
