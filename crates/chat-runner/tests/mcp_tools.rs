//! The turn loop with tools of a real MCP server (the fixture of
//! `roundtable-test-support`): the scripted model calls them and reads
//! their results; a cancelled turn cancels the request on the server. The
//! runners take the toolset as a tool source: a tool the server adds
//! reaches the next turn, announced once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use roundtable_chat_runner::{
    ApproveAll, ChatRunner, FinishReason, RunnerNotice, ThreadRunner, TurnEvent, TurnLoop,
    TurnOptions, TurnRequest,
};
use roundtable_dispatch::Trigger;
use roundtable_providers::{Message, ScriptedProvider, UserBlock, UserMessage};
use roundtable_test_support::mcp_fixture::{FixtureOptions, HttpFixture, stdio_entry};
use roundtable_test_support::messages::*;
use roundtable_test_support::roster::{bot, human, roster};
use roundtable_test_support::runner::{Recorder, settle};
use roundtable_test_support::scripted::*;
use roundtable_test_support::thread::{say, thread};
use roundtable_thread_stream::{MemoryStore, ThreadStore};
use roundtable_tools::mcp::{McpConfig, McpToolset};
use roundtable_tools::{ToolKind, ToolRegistry, ToolsChange};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(20);

fn request(prompt: &str) -> TurnRequest {
    TurnRequest::new(vec![Message::from(UserMessage::text(prompt, 1))]).with_system_prompt("sys")
}

async fn toolset(entry: serde_json::Value) -> McpToolset {
    let text = json!({"mcpServers": {"fix": entry}}).to_string();
    let toolset = McpToolset::start(McpConfig::from_json(&text).unwrap()).await;
    let status = &toolset.servers()[0];
    assert_eq!(
        status.state,
        roundtable_tools::mcp::McpServerState::Running,
        "{status:?}"
    );
    toolset
}

fn registry(toolset: &McpToolset) -> Arc<ToolRegistry> {
    let mut registry = ToolRegistry::new(); // the default policy: write and exec ask
    registry.register_all(toolset.tools()).unwrap();
    Arc::new(registry)
}

#[tokio::test]
async fn the_model_calls_an_mcp_tool_and_reads_its_result() {
    let mut entry = stdio_entry(&FixtureOptions::default()).unwrap();
    entry["trust"] = json!("trust_annotations");
    let toolset = toolset(entry).await;
    let tools = registry(&toolset);
    assert_eq!(
        tools.definition("fix__lookup").unwrap().kind,
        ToolKind::Read
    );

    let provider = Arc::new(ScriptedProvider::new([
        calls(&[("c1", "fix__lookup", json!({"name": "answer"}))]),
        text("The answer is 42."),
    ]));
    let turns = TurnLoop::new(provider.clone(), model()).with_tools(tools);
    let sink = Recorder::default();
    let out = turns
        .run(
            request("what is the answer?"),
            CancellationToken::new(),
            &sink,
        )
        .await;

    assert_eq!(out.finish_reason, FinishReason::Stop, "{:?}", out.error);
    assert_eq!(out.text, "The answer is 42.");
    assert_history_valid(&out.messages);
    let results = tool_results(&out.messages);
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error);
    assert_eq!(&*results[0].tool_name, "fix__lookup");
    assert_eq!(result_text(results[0]), "answer = 42");
    let details = results[0].details.as_ref().unwrap();
    assert_eq!(details["server"], "fix");
    assert_eq!(details["tool"], "lookup");

    // The model was offered the MCP tools, with schemas both APIs accept,
    // and read the result on its second call.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let lookup = requests[0]
        .tools
        .iter()
        .find(|t| t.name == "fix__lookup")
        .unwrap();
    assert_eq!(lookup.parameters["type"], "object");
    assert!(lookup.parameters.get("$schema").is_none());
    let Message::ToolResult(fed_back) = &requests[1].messages[2] else {
        panic!("{:?}", requests[1].messages)
    };
    assert_eq!(result_text(fed_back), "answer = 42");
    assert!(
        sink.types()
            .windows(2)
            .any(|w| w == ["tool_call_started", "tool_call_completed"])
    );
}

#[tokio::test]
async fn an_untrusted_mcp_tool_waits_for_approval_and_returns_an_image() {
    let toolset = toolset(stdio_entry(&FixtureOptions::default()).unwrap()).await;
    let tools = registry(&toolset);
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[("c1", "fix__image", json!({}))]),
        text("A red pixel."),
    ]));
    let turns = TurnLoop::new(provider.clone(), model())
        .with_tools(tools)
        .with_approver(Arc::new(ApproveAll));
    let sink = Recorder::default();
    let out = turns
        .run(request("show me"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop, "{:?}", out.error);
    let types = sink.types();
    let asked = types
        .iter()
        .position(|t| t == "approval_requested")
        .unwrap();
    let started = types.iter().position(|t| t == "tool_call_started").unwrap();
    assert!(asked < started, "{types:?}");
    let results = tool_results(&out.messages);
    assert_eq!(result_text(results[0]), "a red pixel");
    assert!(matches!(results[0].content[1], UserBlock::Image(_)));
}

#[tokio::test]
async fn cancelling_the_turn_cancels_the_mcp_request() {
    let http = HttpFixture::start(FixtureOptions::default()).await.unwrap();
    let toolset = toolset(json!({"url": http.url, "tools": {"wait": {"kind": "read"}}})).await;
    let tools = registry(&toolset);
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[("c1", "fix__wait", json!({}))]),
        text("never"),
    ]));
    let turns = TurnLoop::new(provider, model()).with_tools(tools);
    let cancel = CancellationToken::new();
    let turn = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let sink = Recorder::default();
            let out = turns.run(request("wait"), cancel, &sink).await;
            (out, sink.events())
        })
    };
    // Once the server is handling the call, the turn is cancelled.
    assert_eq!(http.state.wait_for_waiting_calls(1, PATIENCE).await, 1);
    cancel.cancel();
    let (out, events) = turn.await.unwrap();
    assert_eq!(out.finish_reason, FinishReason::Aborted);
    assert_history_valid(&out.messages);
    let results = tool_results(&out.messages);
    assert!(results[0].is_error);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, TurnEvent::TurnFailed { .. }))
    );
    assert_eq!(http.state.wait_for_cancelled_calls(1, PATIENCE).await, 1);
}

/// The names of the tools the model was offered in request `i`.
fn offered(provider: &ScriptedProvider, i: usize) -> Vec<String> {
    provider.requests()[i]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

fn added(names: &[&str]) -> ToolsChange {
    ToolsChange {
        added: names.iter().map(|n| Arc::from(*n)).collect(),
        ..ToolsChange::default()
    }
}

#[tokio::test]
async fn a_tool_the_server_adds_reaches_the_chat_runners_next_turn_announced_once() {
    let toolset = Arc::new(toolset(stdio_entry(&FixtureOptions::default()).unwrap()).await);
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[("c1", "fix__add_tool", json!({"name": "late"}))]),
        text("Added."),
        calls(&[("c2", "fix__late", json!({}))]),
        text("It ran."),
        text("Nothing new."),
    ]));
    let runner = ChatRunner::builder(provider.clone(), Arc::new(MemoryStore::new()))
        .model(model())
        .system_prompt("sys")
        .approver(Arc::new(ApproveAll))
        .tool_source(toolset.clone())
        .build()
        .await
        .unwrap();
    let turn = |prompt: &'static str| {
        let runner = runner.clone();
        async move {
            let sink = Arc::new(Recorder::default());
            let options = TurnOptions {
                sink: Some(sink.clone()),
                ..TurnOptions::default()
            };
            let out = runner.turn_with("key", prompt, options).await.unwrap();
            assert_eq!(
                out.outcome.finish_reason,
                FinishReason::Stop,
                "{:?}",
                out.outcome.error
            );
            (out, sink.events())
        }
    };

    let (first, events) = turn("add a tool").await;
    assert_eq!(
        result_text(tool_results(&first.outcome.messages)[0]),
        "added late"
    );
    assert!(offered(&provider, 0).contains(&"fix__add_tool".to_string()));
    assert!(!offered(&provider, 0).contains(&"fix__late".to_string()));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TurnEvent::ToolsChanged { .. }))
    );

    // The server's notification arrives on its own time; the next turn
    // starting after it sees the new tool.
    tokio::time::timeout(PATIENCE, toolset.list_changed())
        .await
        .unwrap();
    let (second, events) = turn("use it").await;
    let changes: Vec<&TurnEvent> = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::ToolsChanged { .. }))
        .collect();
    assert_eq!(
        changes,
        [&TurnEvent::ToolsChanged {
            turn: second.outcome.turn_id.clone(),
            change: added(&["fix__late"]),
        }]
    );
    assert!(
        matches!(events[1], TurnEvent::TurnStarted { .. }),
        "{events:?}"
    );
    assert!(offered(&provider, 2).contains(&"fix__late".to_string()));
    assert_eq!(
        result_text(tool_results(&second.outcome.messages)[0]),
        "late ran"
    );
    assert!(runner.turn_loop().tools().definition("fix__late").is_some());

    let (_, events) = turn("again").await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, TurnEvent::ToolsChanged { .. }))
    );
    assert!(offered(&provider, 4).contains(&"fix__late".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_a_streamable_http_server_adds_reaches_the_bots_next_turn_announced_once() {
    let http = HttpFixture::start(FixtureOptions::default()).await.unwrap();
    let toolset = Arc::new(toolset(json!({"url": http.url})).await);
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[("c1", "fix__add_tool", json!({"name": "late"}))]),
        text("Added."),
        calls(&[("c2", "fix__late", json!({}))]),
        text("It ran."),
    ]));
    let store = Arc::new(MemoryStore::new());
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("archivist", "Archivist", Trigger::Mention),
        ]),
    )
    .bot(
        "archivist",
        TurnLoop::new(provider.clone(), model()).with_approver(Arc::new(ApproveAll)),
    )
    .tool_source("archivist", toolset.clone())
    .unwrap()
    .build();
    let mut notices = runner.notices();
    let t = thread("mcp-1");
    runner.follow(&t).await.unwrap();

    say(&*store, &t, "alice", "@archivist add a tool").await;
    settle(&[&runner], &*store, &t).await;
    assert!(!offered(&provider, 0).contains(&"fix__late".to_string()));
    tokio::time::timeout(PATIENCE, toolset.list_changed())
        .await
        .unwrap();
    say(&*store, &t, "alice", "@archivist use it").await;
    settle(&[&runner], &*store, &t).await;
    assert!(offered(&provider, 2).contains(&"fix__late".to_string()));
    let entries = store.read_all(&t).await.unwrap();
    let results: Vec<String> = entries
        .iter()
        .filter_map(|e| match &e.body {
            roundtable_thread_stream::EntryBody::ToolResult(r) => Some(result_text(&r.message)),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["added late", "late ran"]);

    let mut changes = Vec::new();
    while let Ok(notice) = notices.try_recv() {
        if let RunnerNotice::ToolsChanged { bot, change, .. } = notice {
            changes.push((bot, change));
        }
    }
    assert_eq!(changes, [(Arc::from("archivist"), added(&["fix__late"]))]);
    runner.shutdown().await;
}

#[tokio::test]
async fn a_source_tool_taking_a_fixed_tools_name_is_refused_at_build() {
    let toolset = Arc::new(toolset(stdio_entry(&FixtureOptions::default()).unwrap()).await);
    let mut fixed = ToolRegistry::new();
    // A host tool under the name the server's tool takes.
    fixed.register_all(toolset.tools()[..1].to_vec()).unwrap();
    let err = ChatRunner::builder(
        Arc::new(ScriptedProvider::new([text("unused")])),
        Arc::new(MemoryStore::new()),
    )
    .model(model())
    .tools(fixed)
    .tool_source(toolset.clone())
    .build()
    .await
    .unwrap_err();
    assert!(
        matches!(&err, roundtable_chat_runner::ChatError::Tools(roundtable_tools::SetupError::DuplicateTool { name }) if name.starts_with("fix__")),
        "{err:?}"
    );
}
