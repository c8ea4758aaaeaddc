//! The turn loop with tools of a real MCP server (the fixture of
//! `roundtable-test-support`): the scripted model calls them and reads
//! their results; a cancelled turn cancels the request on the server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use roundtable_chat_runner::{ApproveAll, FinishReason, TurnEvent, TurnLoop, TurnRequest};
use roundtable_providers::{Message, ScriptedProvider, UserBlock, UserMessage};
use roundtable_test_support::mcp_fixture::{FixtureOptions, HttpFixture, stdio_entry};
use roundtable_test_support::messages::*;
use roundtable_test_support::runner::Recorder;
use roundtable_test_support::scripted::*;
use roundtable_tools::mcp::{McpConfig, McpToolset};
use roundtable_tools::{ToolKind, ToolRegistry};
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
