//! The ChatRunner through the real OpenAI-compatible HTTP adapter, against
//! the loopback replay server (which checks every request) replaying a
//! tool-call conversation in OpenAI's streaming wire format.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use roundtable_chat_runner::{ChatRunner, FinishReason};
use roundtable_providers::{HttpProvider, Model, OPENAI_COMPLETIONS, StreamOptions};
use roundtable_test_support::messages::*;
use roundtable_test_support::replay::{Replay, Reply};
use roundtable_test_support::tools::*;
use roundtable_thread_stream::{JsonlStore, ThreadId, ThreadStore};
use roundtable_tools::{ToolKind, ToolRegistry, ToolResult};
use serde_json::Value;

const TOOL_CALL: &str = r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1731000002,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1731000002,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\": \"sta"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1731000002,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"rs\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1731000002,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1731000002,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}}

data: [DONE]

"#;

const ANSWER: &str = r#"data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1731000003,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1731000003,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"The repo has "},"finish_reason":null}]}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1731000003,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"1234 stars."},"finish_reason":null}]}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1731000003,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1731000003,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":150,"completion_tokens":8,"total_tokens":158}}

data: [DONE]

"#;

#[tokio::test]
async fn a_tool_call_conversation_over_http() {
    let server = Replay::start(vec![
        Reply::sse(TOOL_CALL.as_bytes().to_vec()),
        Reply::sse(ANSWER.as_bytes().to_vec()),
    ])
    .await;
    let mut tools = ToolRegistry::new();
    tools
        .register(tool("lookup", ToolKind::Network, |_, args| async move {
            assert_eq!(args.get("q").and_then(Value::as_str), Some("stars"));
            Ok(ToolResult::text("stars: 1234"))
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(JsonlStore::open(dir.path()).await.unwrap());
    let model = Model::new(
        OPENAI_COMPLETIONS,
        "openai",
        "gpt-4o-mini",
        format!("{}/v1", server.base_url),
    );
    let runner = ChatRunner::builder(Arc::new(HttpProvider::new()), store.clone())
        .model(model)
        .system_prompt("You are terse.")
        .stream_options(StreamOptions {
            api_key: Some("test-key".into()),
            ..StreamOptions::default()
        })
        .tools(tools)
        .build()
        .await
        .unwrap();

    let turn = runner.turn("C1-17.1", "how many stars?").await.unwrap();
    assert_eq!(
        turn.outcome.finish_reason,
        FinishReason::Stop,
        "{:?}",
        turn.outcome.error
    );
    assert_eq!(turn.outcome.text, "The repo has 1234 stars.");
    assert_eq!(turn.outcome.rounds, 2);
    assert_eq!(turn.outcome.usage.input, 250);
    assert_eq!(turn.outcome.usage.output, 28);
    assert_history_valid(&turn.outcome.messages);

    // The second request carried the call and its result in OpenAI's shape
    // (and both kept the request invariants the server checks).
    let bodies: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["tools"][0]["function"]["name"], "lookup");
    assert_eq!(bodies[0]["stream"], true);
    let messages = bodies[1]["messages"].as_array().unwrap();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles[roles.len() - 3..], ["user", "assistant", "tool"]);
    let assistant = &messages[messages.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    let tool_message = &messages[messages.len() - 1];
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert!(tool_message["content"].to_string().contains("stars: 1234"));

    // And the whole trace is in the session's JSONL file.
    let entries = store
        .read_all(&ThreadId::new(&*turn.session_id).unwrap())
        .await
        .unwrap();
    assert_eq!(entries.len(), 7);
    assert!(
        dir.path()
            .join(format!("{}.jsonl", turn.session_id))
            .exists()
    );
}
