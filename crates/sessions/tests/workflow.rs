//! Workflows run as turns of a session: a git workspace, the JSONL store in
//! a temp folder, real skill folders, the scripted provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roundtable_providers::{
    ErrorKind, Message, ScriptStep, ScriptedProvider, UserBlock, UserContent,
};
use roundtable_sessions::records::PHASE_GATE_TOOL;
use roundtable_sessions::{
    ApprovalAction, Caller, EventType, SessionEngine, SessionEvent, SessionInfo, WorkflowRunner,
};
use roundtable_skills::{SkillLibrary, Workflow};
use support::*;

/// A folder holding a workflow's files: `skills/`, `prompts/`,
/// `agent-context/` and the workflow YAML.
struct Flow {
    dir: PathBuf,
}

impl Flow {
    fn new(root: &Path, yaml: &str) -> Self {
        let dir = root.join("flow");
        for (name, description) in [
            ("issue-triage", "Triage issues."),
            ("pr-review", "Review pull requests."),
        ] {
            let skill = dir.join("skills").join(name);
            std::fs::create_dir_all(skill.join("scripts")).unwrap();
            std::fs::create_dir_all(skill.join("references")).unwrap();
            std::fs::write(
                skill.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n"),
            )
            .unwrap();
            std::fs::write(skill.join("scripts/count.sh"), "echo 3\n").unwrap();
            std::fs::write(
                skill.join("references/guide.md"),
                format!("The {name} guide: be thorough.\n"),
            )
            .unwrap();
        }
        std::fs::create_dir_all(dir.join("prompts")).unwrap();
        std::fs::write(
            dir.join("prompts/fix.md"),
            "Phase {{phase}}: fix issue {{issue}} in {{repo}}; see the pr-review skill.",
        )
        .unwrap();
        std::fs::write(dir.join("prompts/typo.md"), "Fix {{isue}}.").unwrap();
        std::fs::create_dir_all(dir.join("agent-context")).unwrap();
        std::fs::write(
            dir.join("agent-context/rules.md"),
            "Rule one: say what you did.\n",
        )
        .unwrap();
        std::fs::write(dir.join("wf.yaml"), yaml).unwrap();
        Self { dir }
    }

    fn workflow(&self) -> Workflow {
        Workflow::load(self.dir.join("wf.yaml"), &SkillLibrary::new(&self.dir)).unwrap()
    }

    fn runner(&self, engine: &SessionEngine) -> WorkflowRunner {
        let context = serde_json::json!({"issue": 42, "repo": "acme/web"});
        WorkflowRunner::new(engine.clone(), self.workflow())
            .agent_context(self.dir.join("agent-context"))
            .context(context.as_object().cloned().unwrap())
    }
}

const THREE_PHASES: &str = "\
name: triage-and-fix
phases:
  - name: triage
    skills: [issue-triage, pr-review]
  - name: survey
    prompt: prompts/fix.md
  - name: fix
    prompt: prompts/fix.md
    skill: pr-review
";

/// The text of the last user message of a model request, without the
/// author's label the multi-party projection puts in front.
fn last_user_text(request: &roundtable_providers::Context) -> String {
    let text = request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User(user) => Some(match &user.content {
                UserContent::Text(text) => text.to_string(),
                UserContent::Blocks(blocks) => blocks
                    .iter()
                    .filter_map(|b| match b {
                        UserBlock::Text(t) => Some(t.text.to_string()),
                        UserBlock::Image(_) => None,
                    })
                    .collect::<Vec<_>>()
                    .join(""),
            }),
            _ => None,
        })
        .unwrap_or_default();
    text.strip_prefix("[user]: ").unwrap_or(&text).to_owned()
}

fn of_kind(events: &[SessionEvent], kind: EventType) -> Vec<&SessionEvent> {
    events.iter().filter(|e| e.kind == kind).collect()
}

async fn session(engine: &SessionEngine, fx: &Fixture) -> SessionInfo {
    engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_phases_run_end_to_end_and_replay_after_a_restart() {
    let fx = Fixture::new();
    let flow = Flow::new(fx.dir.path(), THREE_PHASES);
    let provider = Arc::new(ScriptedProvider::new([
        // triage: the staged skill's whole folder is there.
        call(
            "c1",
            "read_file",
            serde_json::json!({"path": ".agents/skills/issue-triage/references/guide.md"}),
        ),
        text("Triaged."),
        // survey: no skills staged any more.
        call(
            "c2",
            "read_file",
            serde_json::json!({"path": ".agents/skills/issue-triage/SKILL.md"}),
        ),
        text("Surveyed."),
        text("Fixed."),
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = session(&engine, &fx).await;

    let run = flow
        .runner(&engine)
        .run(&Caller::Host, &session.id)
        .await
        .unwrap();
    assert!(run.is_complete(), "{run:?}");
    assert_eq!(run.workflow, "triage-and-fix");
    assert_eq!(run.completed, ["triage", "survey", "fix"]);
    assert!(run.already_completed.is_empty());

    let requests = provider.requests();
    assert_eq!(requests.len(), 5);
    // Phase 1: the nudge, both skills in the catalogue, AGENTS.md read.
    let nudge = last_user_text(&requests[0]);
    assert!(
        nudge.starts_with("Use the **issue-triage** skill to handle this request."),
        "{nudge}"
    );
    assert!(nudge.contains("Other skills available if you need them: pr-review."));
    assert!(nudge.contains("issue: 42"));
    let system = requests[0].system_prompt.as_deref().unwrap();
    assert!(system.contains("<name>issue-triage</name>"));
    assert!(system.contains("<name>pr-review</name>"));
    assert!(system.contains("Rule one: say what you did."));
    // Phase 2: a template and no skills: no catalogue, nothing staged.
    assert_eq!(
        last_user_text(&requests[2]),
        "Phase survey: fix issue 42 in acme/web; see the pr-review skill."
    );
    let system = requests[2].system_prompt.as_deref().unwrap();
    assert!(!system.contains("<available_skills>"), "{system}");
    assert!(system.contains("Rule one"), "AGENTS.md stays");
    // Phase 3: template and one skill.
    assert_eq!(
        last_user_text(&requests[4]),
        "Phase fix: fix issue 42 in acme/web; see the pr-review skill."
    );
    let system = requests[4].system_prompt.as_deref().unwrap();
    assert!(system.contains("<name>pr-review</name>"));
    assert!(!system.contains("<name>issue-triage</name>"));
    let ws = fx.workspace();
    assert!(
        ws.join(".agents/skills/pr-review/scripts/count.sh")
            .exists()
    );
    assert!(!ws.join(".agents/skills/issue-triage").exists());

    // The driver says `settled` after the last turn: wait for it, so the
    // events below are all there will be.
    engine.idle(&session.id).await.unwrap();
    let events = all_events(&engine, &session).await;
    // The tool calls saw what each phase staged.
    let results = of_kind(&events, EventType::ToolCallCompleted);
    assert_eq!(results[0].data["ok"], true, "{}", results[0].data);
    assert!(
        results[0].data["output"]
            .as_str()
            .unwrap()
            .contains("The issue-triage guide")
    );
    assert_eq!(results[1].data["ok"], false, "{}", results[1].data);
    // Each phase: started, its message and turn, completed, in order.
    let started = of_kind(&events, EventType::PhaseStarted);
    let completed = of_kind(&events, EventType::PhaseCompleted);
    assert_eq!(started.len(), 3);
    assert_eq!(completed.len(), 3);
    for (i, name) in ["triage", "survey", "fix"].iter().enumerate() {
        let (start, done) = (started[i], completed[i]);
        assert_eq!(start.data["phase"], *name);
        assert_eq!(start.data["index"], i);
        assert_eq!(start.data["attempt"], 1);
        assert_eq!(done.data["finish_reason"], "stop");
        assert_eq!(start.turn_id, done.turn_id);
        let turn_end = events
            .iter()
            .find(|e| e.kind == EventType::TurnCompleted && e.turn_id == start.turn_id)
            .unwrap();
        let message = events
            .iter()
            .find(|e| {
                e.kind == EventType::MessageAdded
                    && e.data["message_id"] == start.data["message_id"]
            })
            .unwrap();
        assert!(start.id < message.id && message.id < turn_end.id && turn_end.id < done.id);
        if i > 0 {
            assert!(completed[i - 1].id < start.id);
        }
    }
    assert_eq!(
        started[0].data["skills"],
        serde_json::json!(["issue-triage", "pr-review"])
    );
    engine.idle(&session.id).await.unwrap();
    let tip = engine
        .store()
        .last_seq(&session_thread(&session))
        .await
        .unwrap();
    engine.store().close().await.unwrap();
    drop(engine);

    // A new engine over the same folder: the same events, and running the
    // workflow again does nothing.
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new()));
    let restarted = support::engine(reopen(&fx).await, provider.clone(), &fx.data());
    let replayed = all_events(&restarted, &session).await;
    assert_eq!(replayed, events);
    let again = flow
        .runner(&restarted)
        .run(&Caller::Host, &session.id)
        .await
        .unwrap();
    assert!(again.is_complete());
    assert_eq!(again.already_completed, ["triage", "survey", "fix"]);
    assert!(again.completed.is_empty());
    assert!(provider.requests().is_empty());
    assert_eq!(
        restarted
            .store()
            .last_seq(&session_thread(&session))
            .await
            .unwrap(),
        tip
    );
}

/// The fixture's JSONL store, opened again after the previous one closed.
async fn reopen(fx: &Fixture) -> Arc<dyn roundtable_thread_stream::ThreadStore> {
    Arc::new(
        roundtable_thread_stream::JsonlStore::open(fx.data())
            .await
            .unwrap(),
    )
}

fn session_thread(session: &SessionInfo) -> roundtable_thread_stream::ThreadId {
    roundtable_thread_stream::ThreadId::new(&*session.id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_phase_stops_the_workflow_and_a_new_run_resumes_it() {
    let fx = Fixture::new();
    let flow = Flow::new(fx.dir.path(), THREE_PHASES);
    let provider = Arc::new(ScriptedProvider::new([
        ScriptStep::Reply(text("Triaged.")),
        ScriptStep::Fail {
            kind: ErrorKind::Server,
            message: text("I was about to"),
        },
    ]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = session(&engine, &fx).await;
    let run = flow
        .runner(&engine)
        .run(&Caller::Host, &session.id)
        .await
        .unwrap();
    assert_eq!(run.completed, ["triage"]);
    let stop = run.stopped.clone().unwrap();
    assert_eq!((stop.phase.as_str(), stop.attempt), ("survey", 1));
    assert!(!stop.reason.is_empty());
    let events = all_events(&engine, &session).await;
    let failed = of_kind(&events, EventType::PhaseFailed);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].data["phase"], "survey");
    assert_eq!(failed[0].data["reason"], stop.reason.as_str());
    assert_eq!(failed[0].data["interrupted"], false);
    // The third phase never started.
    assert_eq!(of_kind(&events, EventType::PhaseStarted).len(), 2);
    assert_eq!(provider.requests().len(), 2);

    // Run again: the failed phase runs as attempt 2, then the last one.
    provider.push(text("Surveyed."));
    provider.push(text("Fixed."));
    engine.idle(&session.id).await.unwrap();
    let run = flow
        .runner(&engine)
        .run(&Caller::Host, &session.id)
        .await
        .unwrap();
    assert!(run.is_complete(), "{run:?}");
    assert_eq!(run.already_completed, ["triage"]);
    assert_eq!(run.completed, ["survey", "fix"]);
    let events = all_events(&engine, &session).await;
    let started = of_kind(&events, EventType::PhaseStarted);
    let attempts: Vec<_> = started
        .iter()
        .map(|e| {
            (
                e.data["phase"].as_str().unwrap(),
                e.data["attempt"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [("triage", 1), ("survey", 1), ("survey", 2), ("fix", 1)]
    );
    assert_ne!(started[1].turn_id, started[2].turn_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_placeholder_fails_its_phase_before_any_turn() {
    let fx = Fixture::new();
    let flow = Flow::new(
        fx.dir.path(),
        "phases:\n  - name: typo\n    prompt: prompts/typo.md\n",
    );
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptStep>::new()));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = session(&engine, &fx).await;
    let run = flow
        .runner(&engine)
        .run(&Caller::Host, &session.id)
        .await
        .unwrap();
    let stop = run.stopped.unwrap();
    assert!(stop.reason.contains("{{isue}}"), "{}", stop.reason);
    assert!(provider.requests().is_empty());
    let events = all_events(&engine, &session).await;
    assert_eq!(of_kind(&events, EventType::PhaseFailed).len(), 1);
    assert!(of_kind(&events, EventType::TurnStarted).is_empty());
}

const GATED: &str = "\
phases:
  - name: triage
    skill: issue-triage
  - name: fix
    prompt: prompts/fix.md
    skill: pr-review
    gate: approval
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_holds_its_phase_until_approved() {
    let fx = Fixture::new();
    let flow = Flow::new(fx.dir.path(), GATED);
    let provider = Arc::new(ScriptedProvider::new([text("Triaged."), text("Fixed.")]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = session(&engine, &fx).await;
    let mut events = engine
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let runner = flow.runner(&engine);
    let id = session.id.clone();
    let running = tokio::spawn(async move { runner.run(&Caller::Host, &id).await });

    let asked = wait_for(&mut events, EventType::ApprovalRequested).await;
    assert_eq!(asked.data["tool"], PHASE_GATE_TOOL);
    assert_eq!(asked.data["input"]["phase"], "fix");
    // Held: the first phase ran, the gated one has not started.
    let so_far = all_events(&engine, &session).await;
    assert_eq!(of_kind(&so_far, EventType::PhaseStarted).len(), 1);
    assert_eq!(of_kind(&so_far, EventType::PhaseCompleted).len(), 1);
    assert_eq!(provider.requests().len(), 1);
    assert!(!running.is_finished());
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert!(
        info.pending_approvals
            .iter()
            .any(|p| p.tool_call_id == asked.data["tool_call_id"].as_str().unwrap().into())
    );

    let call_id = asked.data["tool_call_id"].as_str().unwrap().to_owned();
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
    let run = running.await.unwrap().unwrap();
    assert!(run.is_complete(), "{run:?}");
    assert_eq!(run.completed, ["triage", "fix"]);
    let all = all_events(&engine, &session).await;
    let granted = of_kind(&all, EventType::ApprovalGranted)[0];
    let started = of_kind(&all, EventType::PhaseStarted)[1];
    assert!(granted.id < started.id);
    assert_eq!(
        granted.turn_id, started.turn_id,
        "the gate names the phase's turn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_gate_stops_the_workflow() {
    let fx = Fixture::new();
    let flow = Flow::new(fx.dir.path(), GATED);
    let provider = Arc::new(ScriptedProvider::new([text("Triaged.")]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = session(&engine, &fx).await;
    let mut events = engine
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let runner = flow.runner(&engine);
    let id = session.id.clone();
    let running = tokio::spawn(async move { runner.run(&Caller::Host, &id).await });
    let asked = wait_for(&mut events, EventType::ApprovalRequested).await;
    let call_id = asked.data["tool_call_id"].as_str().unwrap().to_owned();
    engine
        .decide(
            &Caller::Host,
            &session.id,
            &call_id,
            ApprovalAction::Deny,
            Some("not today".into()),
        )
        .await
        .unwrap();
    let run = running.await.unwrap().unwrap();
    let stop = run.stopped.unwrap();
    assert_eq!(stop.phase, "fix");
    assert_eq!(stop.reason, "the phase's gate was denied: not today");
    let all = all_events(&engine, &session).await;
    assert_eq!(of_kind(&all, EventType::PhaseStarted).len(), 1);
    let failed = of_kind(&all, EventType::PhaseFailed);
    assert_eq!(failed[0].data["phase"], "fix");
    assert_eq!(provider.requests().len(), 1);
    // The gated phase's skills were never staged.
    assert!(!fx.workspace().join(".agents/skills/pr-review").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_gate_survives_a_restart_and_is_not_asked_again() {
    let fx = Fixture::new();
    let flow = Flow::new(fx.dir.path(), GATED);
    let provider = Arc::new(ScriptedProvider::new([text("Triaged.")]));
    let engine = engine(fx.store().await, provider.clone(), &fx.data());
    let session = session(&engine, &fx).await;
    let mut events = engine
        .subscribe(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    let runner = flow.runner(&engine);
    let id = session.id.clone();
    let running = tokio::spawn(async move { runner.run(&Caller::Host, &id).await });
    let asked = wait_for(&mut events, EventType::ApprovalRequested).await;
    // The process stops while the gate waits.
    running.abort();
    let _ = running.await;
    drop(events);
    engine.idle(&session.id).await.unwrap();
    engine.store().close().await.unwrap();
    drop(engine);

    // Another engine over the same folder: the decision is made there,
    // before any runner runs, and the workflow resumes past the gate.
    let provider = Arc::new(ScriptedProvider::new([text("Fixed.")]));
    let restarted = support::engine(reopen(&fx).await, provider.clone(), &fx.data());
    restarted.recover().await.unwrap();
    let call_id = asked.data["tool_call_id"].as_str().unwrap();
    restarted
        .decide(
            &Caller::Host,
            &session.id,
            call_id,
            ApprovalAction::Approve,
            None,
        )
        .await
        .unwrap();
    let run = flow
        .runner(&restarted)
        .run(&Caller::Host, &session.id)
        .await
        .unwrap();
    assert!(run.is_complete(), "{run:?}");
    assert_eq!(run.already_completed, ["triage"]);
    assert_eq!(run.completed, ["fix"]);
    let all = all_events(&restarted, &session).await;
    assert_eq!(of_kind(&all, EventType::ApprovalRequested).len(), 1);
    assert_eq!(provider.requests().len(), 1);
}

#[test]
fn a_phase_a_crash_interrupted_runs_again_when_the_workflow_resumes() {
    let fx = Fixture::new();
    let flow = Flow::new(fx.dir.path(), THREE_PHASES);
    // The first process: the second phase's turn waits for approval of a
    // command, and the process dies there.
    let session = {
        let data = fx.data();
        let request = fx.unverified();
        let runner_flow = Flow {
            dir: flow.dir.clone(),
        };
        // Every task stops where it is, as in a crash.
        live_then_crash(fx.data(), move |store| async move {
            let provider = Arc::new(ScriptedProvider::new([
                text("Triaged."),
                call(
                    "c1",
                    "shell",
                    serde_json::json!({"command": "echo ran > ran.txt"}),
                ),
            ]));
            let engine = engine(store, provider, &data);
            let session = engine.create(&Caller::Host, request).await.unwrap();
            let mut events = engine
                .subscribe(&Caller::Host, &session.id, None)
                .await
                .unwrap();
            let runner = runner_flow.runner(&engine);
            let id = session.id.clone();
            tokio::spawn(async move { runner.run(&Caller::Host, &id).await });
            wait_for(&mut events, EventType::ApprovalRequested).await;
            session.id
        })
    };

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // The JSONL folder is free: the first "process" is gone.
        let store = reopen(&fx).await;
        let provider = Arc::new(ScriptedProvider::new([text("Surveyed."), text("Fixed.")]));
        let engine = engine(store, provider.clone(), &fx.data());
        engine.recover().await.unwrap();
        let run = flow
            .runner(&engine)
            .run(&Caller::Host, &session)
            .await
            .unwrap();
        assert!(run.is_complete(), "{run:?}");
        assert_eq!(run.already_completed, ["triage"]);
        assert_eq!(run.completed, ["survey", "fix"]);
        let events = engine.events(&Caller::Host, &session, None).await.unwrap();
        let failed = of_kind(&events, EventType::PhaseFailed);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].data["phase"], "survey");
        assert_eq!(failed[0].data["interrupted"], true);
        let attempts: Vec<_> = of_kind(&events, EventType::PhaseStarted)
            .iter()
            .map(|e| {
                (
                    e.data["phase"].as_str().unwrap(),
                    e.data["attempt"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            attempts,
            [("triage", 1), ("survey", 1), ("survey", 2), ("fix", 1)]
        );
        assert!(!fx.workspace().join("ran.txt").exists());
        assert_eq!(provider.requests().len(), 2);
    });
}
