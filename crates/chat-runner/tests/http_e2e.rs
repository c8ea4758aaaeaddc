//! The ChatRunner through the real OpenAI-compatible HTTP adapter, against
//! a loopback server replaying a tool-call conversation in OpenAI's
//! streaming wire format.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use roundtable_chat_runner::{ChatRunner, FinishReason};
use roundtable_providers::{HttpProvider, Model, OPENAI_COMPLETIONS, StreamOptions};
use roundtable_thread_stream::{JsonlStore, ThreadId, ThreadStore};
use roundtable_tools::{ToolKind, ToolRegistry, ToolResult};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

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

/// Serves `replies` in order, one per connection, recording request bodies.
async fn serve(replies: Vec<&'static str>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    tokio::spawn(async move {
        for reply in replies {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let body_start = loop {
                let n = socket.read(&mut chunk).await.unwrap();
                assert!(n > 0, "request ended early");
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..body_start]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            while buf.len() < body_start + length {
                let n = socket.read(&mut chunk).await.unwrap();
                assert!(n > 0, "body ended early");
                buf.extend_from_slice(&chunk[..n]);
            }
            seen.lock()
                .unwrap()
                .push(serde_json::from_slice(&buf[body_start..body_start + length]).unwrap());
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                reply.len(),
                reply
            );
            socket.write_all(response.as_bytes()).await.unwrap();
            socket.shutdown().await.unwrap();
        }
    });
    (base, bodies)
}

#[tokio::test]
async fn a_tool_call_conversation_over_http() {
    let (base, bodies) = serve(vec![TOOL_CALL, ANSWER]).await;
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
        format!("{base}/v1"),
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

    // The second request carried the call and its result in OpenAI's shape.
    let bodies = bodies.lock().unwrap().clone();
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
