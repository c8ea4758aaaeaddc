//! The engine turn the sessions bench measures, shared with the
//! `engine_turn` example that runs it alone for profilers: a workspace
//! with a README, a session on it with nothing gated and no auto-verify,
//! and a turn of `rounds` `read_file` rounds and an answer over the
//! scripted provider; and the same turn through the bare turn loop.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use roundtable::chat_runner::{NullSink, TurnLoop, TurnRequest};
use roundtable::providers::{
    AssistantBlock, AssistantMessage, Message, Model, OPENAI_COMPLETIONS, ScriptedProvider,
    StopReason, ToolCall, UserMessage,
};
use roundtable::sessions::{Caller, CreateSession, SessionEngine, SessionInfo, Submit};
use roundtable::thread_stream::{ThreadId, ThreadStore};
use roundtable::tools::{ApprovalPolicy, VerifyPolicy};

/// The scripted model.
pub(crate) fn model() -> Model {
    Model::new(OPENAI_COMPLETIONS, "scripted", "m", "")
}

/// The model's answer.
pub(crate) fn answer(text: &str) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
    m.content.push(AssistantBlock::text(text));
    m
}

/// The model's call of `read_file` on the README, as call `id`.
pub(crate) fn read_call(id: &str) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
    m.content
        .push(AssistantBlock::text("Let me read the README."));
    let args = serde_json::json!({"path": "README.md"});
    m.content.push(AssistantBlock::ToolCall(ToolCall::new(
        id,
        "read_file",
        args.as_object().unwrap().clone(),
    )));
    m.stop_reason = StopReason::ToolUse;
    m
}

/// A workspace holding a README.
pub(crate) fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "# Demo\n\nA small project.\n").unwrap();
    dir
}

/// A session's settings on `workspace`: `approvals`, no auto-verify.
pub(crate) fn create(workspace: &Path, approvals: ApprovalPolicy) -> CreateSession {
    CreateSession {
        approval_policy: Some(approvals),
        verify_policy: Some(VerifyPolicy {
            auto_verify: false,
            ..VerifyPolicy::default()
        }),
        ..CreateSession::new(workspace)
    }
}

/// A new session on `workspace`, nothing gated.
pub(crate) async fn new_session(engine: &SessionEngine, workspace: &Path) -> SessionInfo {
    engine
        .create(&Caller::Host, create(workspace, ApprovalPolicy::none()))
        .await
        .unwrap()
}

/// Queues on `provider` the model's side of a turn of `rounds` tool rounds
/// (a `read_file` call each) and an answer.
pub(crate) fn script_turn(provider: &ScriptedProvider, rounds: usize) {
    for round in 0..rounds {
        provider.push(read_call(&format!("call_{}", round + 1)));
    }
    provider.push(answer("The README says it is a small project."));
}

/// An engine turn of `rounds` tool rounds and an answer, to the session
/// going idle.
pub(crate) async fn rounds_turn(
    engine: &SessionEngine,
    provider: &ScriptedProvider,
    session: &str,
    rounds: usize,
) {
    script_turn(provider, rounds);
    engine
        .submit(&Caller::Host, session, Submit::text("What is this?"))
        .await
        .unwrap();
    engine.idle(session).await.unwrap();
}

/// The bare turn loop with the workspace tools on `workspace` (what the
/// engine's turn is compared with).
pub(crate) fn bare_loop(provider: Arc<ScriptedProvider>, workspace: &Path) -> TurnLoop {
    let mut tools = roundtable::tools::ToolRegistry::new();
    tools
        .register_all(
            roundtable::tools::workspace::Workspace::open(workspace)
                .unwrap()
                .toolset(),
        )
        .unwrap();
    TurnLoop::new(provider, model()).with_tools(Arc::new(tools))
}

/// The engine's turn of `rounds` tool rounds and an answer through the bare
/// turn loop: the same model calls and tools, no session.
pub(crate) async fn bare_turn(bare: &TurnLoop, provider: &ScriptedProvider, rounds: usize) {
    script_turn(provider, rounds);
    let request = TurnRequest::new(vec![Message::from(UserMessage::text("What is this?", 0))]);
    std::hint::black_box(
        bare.run(
            request,
            tokio_util::sync::CancellationToken::new(),
            &NullSink,
        )
        .await,
    );
}

/// A session in `store` of `turns` turns (each a tool round and an
/// answer), run through the engine, followed by `notes` messages that start
/// no turn (`auto_run: false`): every turn's model call carries the whole
/// conversation, so a long history is grown with notes rather than turns.
pub(crate) async fn session_of(
    store: Arc<dyn ThreadStore>,
    workspace: &Path,
    turns: usize,
    notes: usize,
) -> (SessionInfo, u64) {
    let provider = Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new()));
    let engine = SessionEngine::builder(store.clone(), provider.clone(), model()).build();
    let host = Caller::Host;
    let session = engine
        .create(&host, create(workspace, ApprovalPolicy::none()))
        .await
        .unwrap();
    for turn in 0..turns {
        provider.push(read_call(&format!("call_{turn}")));
        provider.push(answer("The README says it is a small project."));
        engine
            .submit(
                &host,
                &session.id,
                Submit::text(format!("What is this? ({turn})")),
            )
            .await
            .unwrap();
        engine.idle(&session.id).await.unwrap();
    }
    for note in 0..notes {
        let text = format!("A note for later ({note}): the build takes about two minutes.");
        engine
            .submit(
                &host,
                &session.id,
                Submit {
                    auto_run: Some(false),
                    ..Submit::text(text)
                },
            )
            .await
            .unwrap();
    }
    let thread = ThreadId::new(&*session.id).unwrap();
    let last = store.last_seq(&thread).await.unwrap();
    (session, last)
}

/// A new session on `workspace` whose first three turns (of `rounds`
/// tool rounds each) are made: ready for its fourth, the turn the benches
/// measure (its setup is kept from the earlier turns, and the history it
/// projects is short, as in a conversation).
pub(crate) async fn three_turns_made(
    engine: &SessionEngine,
    provider: &ScriptedProvider,
    workspace: &Path,
    rounds: usize,
) -> SessionInfo {
    let session = new_session(engine, workspace).await;
    for _ in 0..3 {
        rounds_turn(engine, provider, &session.id, rounds).await;
    }
    session
}
