//! The HTTP adapters against a loopback server that replays recorded wire
//! captures (`roundtable_test_support::replay::Replay`). Every request the
//! server receives is checked against the request invariants (no tool
//! result without its call and the reverse, valid roles).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(feature = "http")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use roundtable_providers::breaker::BreakerConfig;
use roundtable_providers::openai::{MaxTokensField, OpenAiCompat};
use roundtable_providers::retry::{RetryObserver, RetryPolicy};
use roundtable_providers::validate::validate_events;
use roundtable_providers::{
    ANTHROPIC_MESSAGES, AssistantEvent, Context, ErrorKind, HttpProvider, Message, Model,
    OPENAI_COMPLETIONS, Provider, StopReason, StreamOptions, ThinkingLevel, complete,
};
use roundtable_test_support::replay::{End, Replay, Reply};
use serde_json::{Value, json};
use support::fixture;

fn openai_model(replay: &Replay) -> Model {
    Model::new(
        OPENAI_COMPLETIONS,
        "openai",
        "gpt-4o-mini",
        format!("{}/v1", replay.base_url),
    )
}

fn anthropic_model(replay: &Replay) -> Model {
    Model::new(
        ANTHROPIC_MESSAGES,
        "anthropic",
        "claude-sonnet-4-5",
        replay.base_url.clone(),
    )
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        initial_delay: Duration::from_millis(1),
        ..RetryPolicy::default()
    }
}

fn provider() -> HttpProvider {
    HttpProvider::new().with_retry(fast_retries())
}

fn context() -> Context {
    serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/pi/context.json"
        ))
        .unwrap(),
    )
    .unwrap()
}

fn options() -> StreamOptions {
    StreamOptions {
        api_key: Some("test-key".into()),
        ..StreamOptions::default()
    }
}

async fn collect(
    provider: &HttpProvider,
    model: &Model,
    options: &StreamOptions,
) -> Vec<AssistantEvent> {
    let events: Vec<AssistantEvent> = provider.stream(model, &context(), options).collect().await;
    let problems = validate_events(&events);
    assert!(problems.is_empty(), "{problems:#?}\n{events:#?}");
    events
}

fn final_of(
    events: &[AssistantEvent],
) -> (&roundtable_providers::AssistantMessage, Option<ErrorKind>) {
    match events.last().unwrap() {
        AssistantEvent::Done { message, .. } => (&**message, None),
        AssistantEvent::Error { error, kind, .. } => (&**error, Some(*kind)),
        other => panic!("not terminal: {other:?}"),
    }
}

#[tokio::test]
async fn utf8_split_across_network_chunks() {
    let body = fixture("openai/text_usage.sse");
    let replay = Replay::start(vec![Reply::sse_chunked(
        &body,
        5,
        Duration::from_millis(1),
        End::Clean,
    )])
    .await;
    let events = collect(&provider(), &openai_model(&replay), &options()).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, None);
    assert_eq!(message.text(), "Grüße aus Köln 🌧!");
    assert_eq!(message.usage.cache_read, 1024);
    let requests = replay.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].headers["authorization"], "Bearer test-key");
}

#[tokio::test]
async fn end_markers_end_the_stream_while_the_connection_stays_open() {
    let openai = Replay::start(vec![Reply::Stream {
        chunks: vec![fixture("openai/text_usage.sse")],
        pause: Duration::ZERO,
        end: End::Hang,
    }])
    .await;
    let events = collect(&provider(), &openai_model(&openai), &options()).await;
    assert_eq!(final_of(&events).1, None, "[DONE] ends the stream");
    let anthropic = Replay::start(vec![Reply::Stream {
        chunks: vec![fixture("anthropic/text.sse")],
        pause: Duration::ZERO,
        end: End::Hang,
    }])
    .await;
    let events = collect(&provider(), &anthropic_model(&anthropic), &options()).await;
    assert_eq!(final_of(&events).1, None, "message_stop ends the stream");
    let requests = anthropic.requests();
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].headers["x-api-key"], "test-key");
    assert_eq!(requests[0].headers["anthropic-version"], "2023-06-01");
}

/// The capture's bytes up to and including its end marker, and the rest.
fn split_after_the_end_marker<'a>(api: &str, bytes: &'a [u8]) -> (&'a [u8], &'a [u8]) {
    let marker: &[u8] = if api == ANTHROPIC_MESSAGES {
        b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    } else {
        b"data: [DONE]\n\n"
    };
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .unwrap();
    bytes.split_at(at + marker.len())
}

#[tokio::test]
async fn bytes_after_the_end_marker_are_ignored_however_they_arrive() {
    for (api, dir, call_id) in [
        (ANTHROPIC_MESSAGES, "anthropic", "toolu_01End"),
        (OPENAI_COMPLETIONS, "openai", "call_End"),
    ] {
        for fixture_name in ["trailing_content", "trailing_malformed", "trailing_error"] {
            let body = fixture(&format!("{dir}/{fixture_name}.sse"));
            let (head, tail) = split_after_the_end_marker(api, &body);
            // The whole body in one write, the end marker and the rest in
            // two, and small pieces; the server then keeps the connection
            // open, so only the end marker can end the stream.
            let chunkings = [
                vec![body.clone()],
                vec![head.to_vec(), tail.to_vec()],
                body.chunks(64).map(<[u8]>::to_vec).collect(),
            ];
            let replies = chunkings
                .iter()
                .map(|chunks| Reply::Stream {
                    chunks: chunks.clone(),
                    pause: Duration::ZERO,
                    end: End::Hang,
                })
                .collect();
            let replay = Replay::start(replies).await;
            let model = if api == ANTHROPIC_MESSAGES {
                anthropic_model(&replay)
            } else {
                openai_model(&replay)
            };
            let mut finals = Vec::new();
            for _ in &chunkings {
                let events = collect(&provider(), &model, &options()).await;
                let (message, kind) = final_of(&events);
                let context = format!("{fixture_name} ({api})");
                assert_eq!(kind, None, "{context}: {:?}", message.error_message);
                assert_eq!(message.stop_reason, StopReason::ToolUse, "{context}");
                assert_eq!(message.text(), "Reading it.", "{context}");
                let calls: Vec<(&str, &str)> =
                    message.tool_calls().map(|c| (&*c.id, &*c.name)).collect();
                assert_eq!(calls, [(call_id, "read_file")], "{context}");
                assert_eq!(message.usage.output, 31, "{context}");
                let mut message = message.clone();
                message.timestamp = 0;
                finals.push(message);
            }
            assert!(
                finals.windows(2).all(|w| w[0] == w[1]),
                "{fixture_name} ({api}): the chunking changed the message"
            );
        }
    }
}

#[tokio::test]
async fn a_transport_error_after_a_tool_call_keeps_the_call_and_reports_network() {
    let body = String::from_utf8(fixture("anthropic/thinking_tools.sse")).unwrap();
    let cut = body.find("event: future_event_type").unwrap();
    let replay = Replay::start(vec![Reply::sse_chunked(
        &body.as_bytes()[..cut],
        64,
        Duration::ZERO,
        End::Broken,
    )])
    .await;
    let events = collect(&provider(), &anthropic_model(&replay), &options()).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, Some(ErrorKind::Network));
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.tool_calls().count(), 1);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AssistantEvent::ToolCallEnd { .. }))
    );
    // Content had streamed: no retry.
    assert_eq!(replay.requests().len(), 1);

    let body = String::from_utf8(fixture("openai/parallel_tools.sse")).unwrap();
    let cut = body.find("data: {\"id\":\"chatcmpl-p1\",\"object\":\"chat.completion.chunk\",\"created\":1731000002,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\"").unwrap();
    let replay = Replay::start(vec![Reply::sse_chunked(
        &body.as_bytes()[..cut],
        100,
        Duration::ZERO,
        End::Broken,
    )])
    .await;
    let events = collect(&provider(), &openai_model(&replay), &options()).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, Some(ErrorKind::Network));
    assert_eq!(message.tool_calls().count(), 2);
    // The calls never finished: no toolcall_end, so nobody runs them.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AssistantEvent::ToolCallEnd { .. }))
    );
}

#[tokio::test]
async fn rate_limited_with_retry_after_then_success() {
    let replay = Replay::start(vec![
        Reply::status(
            429,
            &[("retry-after", "1")],
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        ),
        Reply::sse(fixture("openai/text_usage.sse")),
    ])
    .await;
    let started = Instant::now();
    let events = collect(&provider(), &openai_model(&replay), &options()).await;
    assert_eq!(final_of(&events).1, None);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After: 1 was honoured"
    );
    assert_eq!(replay.requests().len(), 2);
}

#[tokio::test]
async fn rate_limited_with_an_http_date_then_success() {
    let replay = Replay::start(vec![
        // A date already past: nothing more to wait for than the backoff.
        Reply::status(
            429,
            &[("retry-after", "Fri, 31 Dec 1999 23:59:59 GMT")],
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        ),
        // A date two seconds ahead of the moment the server answers. An
        // IMF-fixdate has whole seconds, so it is more than one second away.
        Reply::Later(|| {
            let until = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
            Reply::status(
                429,
                &[("retry-after", until.as_str())],
                r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
            )
        }),
        Reply::sse(fixture("openai/text_usage.sse")),
    ])
    .await;
    let events = collect(&provider(), &openai_model(&replay), &options()).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, None);
    assert_eq!(message.text(), "Grüße aus Köln 🌧!");
    let requests = replay.requests();
    assert_eq!(requests.len(), 3, "two retries");
    // The backoff of these tests is a millisecond: only the date can make
    // the last retry wait this long.
    let waited = requests[2].at.duration_since(requests[1].at);
    assert!(
        waited >= Duration::from_millis(500),
        "the Retry-After date was honoured (waited {waited:?})"
    );
}

#[tokio::test]
async fn a_retry_after_beyond_any_duration_is_not_waited_for() {
    // 2^64 ms and a little more (18446744073709552 s): counted in a u64 it
    // wrapped to 384 ms. 1e20 s does not fit a Duration at all.
    for huge in ["18446744073709552", "1e20"] {
        let replay = Replay::start(vec![
            Reply::status(
                429,
                &[("retry-after", huge)],
                r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
            ),
            Reply::sse(fixture("openai/text_usage.sse")),
        ])
        .await;
        let events = collect(&provider(), &openai_model(&replay), &options()).await;
        let (message, kind) = final_of(&events);
        assert_eq!(kind, Some(ErrorKind::RateLimit), "Retry-After: {huge}");
        assert_eq!(message.stop_reason, StopReason::Error);
        assert_eq!(
            replay.requests().len(),
            1,
            "Retry-After: {huge} is longer than the policy waits"
        );
    }
}

#[tokio::test]
async fn server_errors_exhaust_the_retries() {
    let replay = Replay::start(vec![
        Reply::status(500, &[], r#"{"error":{"message":"boom"}}"#),
        Reply::status(502, &[], "bad gateway"),
        Reply::status(500, &[], r#"{"error":{"message":"boom again"}}"#),
        Reply::sse(fixture("openai/text_usage.sse")),
    ])
    .await;
    let events = collect(&provider(), &openai_model(&replay), &options()).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, Some(ErrorKind::Server));
    assert!(
        message
            .error_message
            .as_deref()
            .unwrap()
            .contains("boom again")
    );
    assert!(!events.iter().any(|e| matches!(e, AssistantEvent::Start)));
    assert_eq!(replay.requests().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn every_retry_is_announced_before_its_wait() {
    let replay = Replay::start(vec![
        Reply::status(503, &[], r#"{"error":{"message":"overloaded"}}"#),
        Reply::status(500, &[], r#"{"error":{"message":"boom"}}"#),
        Reply::sse(fixture("openai/text_usage.sse")),
    ])
    .await;
    let notices = Arc::new(Mutex::new(Vec::new()));
    let seen = notices.clone();
    let options = StreamOptions {
        on_retry: Some(RetryObserver::new(move |notice| {
            seen.lock().unwrap().push(notice.clone());
        })),
        ..options()
    };
    let events = collect(&provider(), &openai_model(&replay), &options).await;
    assert_eq!(final_of(&events).1, None);
    let notices = notices.lock().unwrap().clone();
    let numbers: Vec<(u32, u32)> = notices.iter().map(|n| (n.retry, n.max_retries)).collect();
    assert_eq!(numbers, [(1, 2), (2, 2)]);
    assert!(notices[0].error.contains("overloaded"), "{:?}", notices[0]);
    assert!(notices[1].error.contains("boom"), "{:?}", notices[1]);
    assert!(notices.iter().all(|n| n.delay <= Duration::from_secs(60)));
}

#[tokio::test]
async fn client_errors_are_typed_and_not_retried() {
    let replay = Replay::start(vec![
        Reply::status(401, &[], r#"{"error":{"message":"invalid x-api-key"}}"#),
        Reply::status(400, &[], r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#),
    ])
    .await;
    let p = provider();
    let model = anthropic_model(&replay);
    let done = complete(&p, &model, &context(), &options()).await;
    assert_eq!(done.error, Some(ErrorKind::Auth));
    let done = complete(&p, &model, &context(), &options()).await;
    assert_eq!(done.error, Some(ErrorKind::ContextOverflow));
    assert_eq!(done.message.stop_reason, StopReason::Error);
    assert_eq!(replay.requests().len(), 2);
}

#[tokio::test]
async fn cancellation_mid_stream_ends_aborted() {
    let body = fixture("anthropic/text.sse");
    let replay = Replay::start(vec![Reply::sse_chunked(
        &body,
        200,
        Duration::from_millis(30),
        End::Hang,
    )])
    .await;
    let opts = options();
    let p = provider();
    let model = anthropic_model(&replay);
    let mut stream = p.stream(&model, &context(), &opts);
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        if matches!(e, AssistantEvent::TextStart { .. }) {
            opts.cancel.cancel();
        }
        events.push(e);
    }
    assert!(validate_events(&events).is_empty());
    let (message, kind) = final_of(&events);
    assert_eq!(kind, Some(ErrorKind::Aborted));
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert!(
        !message.text().contains('!'),
        "the stream stopped before its end"
    );
}

#[tokio::test]
async fn a_stream_that_stalls_mid_response_ends_with_a_timeout_error() {
    let opts = StreamOptions {
        idle_timeout: Some(Duration::from_millis(200)),
        ..options()
    };
    // Anthropic: the first text delta arrives, then the server goes silent
    // with the connection open.
    let body = String::from_utf8(fixture("anthropic/text.sse")).unwrap();
    let cut = body.find("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" aus").unwrap();
    let replay = Replay::start(vec![
        Reply::sse_chunked(&body.as_bytes()[..cut], 100, Duration::ZERO, End::Hang),
        Reply::sse(fixture("anthropic/text.sse")),
    ])
    .await;
    let events = collect(&provider(), &anthropic_model(&replay), &opts).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, Some(ErrorKind::Timeout));
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(
        message.error_message.as_deref(),
        Some("stream stalled: no data for 0.2 s")
    );
    assert_eq!(message.text(), "Grüße", "what arrived is kept");
    assert_eq!(message.usage.cache_read, 2000);
    assert_eq!(
        replay.requests().len(),
        1,
        "a stalled stream is not retried"
    );

    // OpenAI: two tool calls half streamed, then silence.
    let body = String::from_utf8(fixture("openai/parallel_tools.sse")).unwrap();
    let cut = body.find("data: {\"id\":\"chatcmpl-p1\",\"object\":\"chat.completion.chunk\",\"created\":1731000002,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\"").unwrap();
    let replay = Replay::start(vec![Reply::sse_chunked(
        &body.as_bytes()[..cut],
        100,
        Duration::ZERO,
        End::Hang,
    )])
    .await;
    let events = collect(&provider(), &openai_model(&replay), &opts).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, Some(ErrorKind::Timeout));
    assert_eq!(message.stop_reason, StopReason::Error);
    assert_eq!(message.tool_calls().count(), 2, "the calls are kept");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AssistantEvent::ToolCallEnd { .. })),
        "unfinished calls are never completed, so nobody runs them"
    );
    assert_eq!(replay.requests().len(), 1);
}

#[tokio::test]
async fn a_slow_but_steady_stream_is_not_a_stall() {
    // Each gap (20 ms) is well below the idle timeout; the whole stream
    // takes longer than it.
    let body = fixture("openai/text_usage.sse");
    let replay = Replay::start(vec![Reply::sse_chunked(
        &body,
        60,
        Duration::from_millis(20),
        End::Clean,
    )])
    .await;
    let opts = StreamOptions {
        idle_timeout: Some(Duration::from_millis(400)),
        ..options()
    };
    let events = collect(&provider(), &openai_model(&replay), &opts).await;
    let (message, kind) = final_of(&events);
    assert_eq!(kind, None);
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.text(), "Grüße aus Köln 🌧!");
    assert!(
        body.len().div_ceil(60) * 20 > 400,
        "longer than the timeout in all"
    );
}

#[tokio::test]
async fn cancellation_still_ends_a_stalled_stream_as_aborted() {
    let body = String::from_utf8(fixture("anthropic/text.sse")).unwrap();
    let cut = body.find("event: content_block_stop").unwrap();
    let replay = Replay::start(vec![Reply::Stream {
        chunks: vec![body.as_bytes()[..cut].to_vec()],
        pause: Duration::ZERO,
        end: End::Hang,
    }])
    .await;
    // The stall guard is far away; the host cancels once text arrives.
    let opts = StreamOptions {
        idle_timeout: Some(Duration::from_secs(30)),
        ..options()
    };
    let p = provider();
    let model = anthropic_model(&replay);
    let mut stream = p.stream(&model, &context(), &opts);
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        if matches!(e, AssistantEvent::TextDelta { .. }) {
            opts.cancel.cancel();
        }
        events.push(e);
    }
    assert!(validate_events(&events).is_empty(), "{events:#?}");
    let (message, kind) = final_of(&events);
    assert_eq!(kind, Some(ErrorKind::Aborted));
    assert_eq!(message.stop_reason, StopReason::Aborted);
    assert!(message.text().starts_with("Grüße"), "what arrived is kept");
}

#[tokio::test]
async fn the_circuit_breaker_opens_after_failures() {
    let replay = Replay::start(vec![
        Reply::status(500, &[], "down"),
        Reply::status(500, &[], "down"),
        Reply::sse(fixture("openai/text_usage.sse")),
    ])
    .await;
    let p = HttpProvider::new()
        .with_retry(RetryPolicy::none())
        .with_breaker(BreakerConfig {
            min_calls: 2,
            ..BreakerConfig::default()
        });
    let model = openai_model(&replay);
    for _ in 0..2 {
        assert_eq!(
            complete(&p, &model, &context(), &options()).await.error,
            Some(ErrorKind::Server)
        );
    }
    let done = complete(&p, &model, &context(), &options()).await;
    assert_eq!(done.error, Some(ErrorKind::CircuitOpen));
    assert_eq!(replay.requests().len(), 2, "an open breaker sends nothing");
}

/// A conversation with reasoning to replay and a tool round, for the
/// request-body checks.
fn reasoning_context() -> Context {
    let mut ctx = context();
    // The assistant turn came from this very model, so its reasoning is
    // replayed in the field it arrived in.
    if let Message::Assistant(a) = &mut ctx.messages[1] {
        let a = std::sync::Arc::make_mut(a);
        a.model = "qwen3".into();
        a.provider = "vllm".into();
    }
    ctx
}

#[tokio::test]
async fn openai_request_body_roles_tools_reasoning_and_max_tokens() {
    let replay = Replay::start(vec![Reply::sse(fixture("openai/reasoning.sse"))]).await;
    let mut model = Model::new(
        OPENAI_COMPLETIONS,
        "vllm",
        "qwen3",
        format!("{}/v1", replay.base_url),
    );
    model.reasoning = true;
    model.compat = Some(OpenAiCompat {
        max_tokens_field: Some(MaxTokensField::MaxTokens),
        ..OpenAiCompat::default()
    });
    let opts = StreamOptions {
        thinking: ThinkingLevel::High,
        max_tokens: Some(2048),
        ..StreamOptions::default()
    };
    let events: Vec<AssistantEvent> = provider()
        .stream(&model, &reasoning_context(), &opts)
        .collect()
        .await;
    assert_eq!(final_of(&events).1, None);
    let body = replay.requests().remove(0).body;
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["developer", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(messages[2]["reasoning_content"], "Two reads.");
    assert_eq!(messages[2]["content"], "Reading.");
    assert_eq!(messages[4]["content"], "No result provided");
    assert_eq!(body["max_tokens"], 2048);
    assert!(body.get("max_completion_tokens").is_none());
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["path"])
    );
    assert_eq!(body["tools"][0]["function"]["strict"], false);
}

#[tokio::test]
async fn anthropic_request_body_thinking_budget_and_tool_results() {
    let replay = Replay::start(vec![Reply::sse(fixture("anthropic/thinking_tools.sse"))]).await;
    let mut model = anthropic_model(&replay);
    model.reasoning = true;
    model.max_tokens = 64_000;
    let opts = StreamOptions {
        thinking: ThinkingLevel::Medium,
        temperature: Some(0.2),
        ..StreamOptions::default()
    };
    let events: Vec<AssistantEvent> = provider().stream(&model, &context(), &opts).collect().await;
    assert_eq!(final_of(&events).1, None);
    let request = replay.requests().remove(0);
    let body = request.body;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192, "display": "summarized"})
    );
    assert_eq!(body["max_tokens"], 32_000 + 8192);
    assert!(
        body.get("temperature").is_none(),
        "no temperature with thinking"
    );
    let results = &body["messages"][2]["content"];
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "call_1");
    assert_eq!(results[1]["is_error"], true);
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(
        request.headers["anthropic-beta"],
        "interleaved-thinking-2025-05-14"
    );

    // Adaptive models take an effort instead of a budget.
    let replay = Replay::start(vec![Reply::sse(fixture("anthropic/text.sse"))]).await;
    let mut model = anthropic_model(&replay);
    model.id = "claude-opus-4-6".into();
    model.reasoning = true;
    let _: Vec<AssistantEvent> = provider().stream(&model, &context(), &opts).collect().await;
    let body: Value = replay.requests().remove(0).body;
    assert_eq!(body["thinking"]["type"], "adaptive");
    assert_eq!(body["output_config"], json!({"effort": "medium"}));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let replay = Replay::start(vec![Reply::Stall, Reply::Stall]).await;
    let opts = StreamOptions {
        timeout: Some(Duration::from_millis(100)),
        max_retries: Some(1),
        ..options()
    };
    let done = complete(&provider(), &openai_model(&replay), &context(), &opts).await;
    assert_eq!(done.error, Some(ErrorKind::Timeout));
    assert_eq!(
        done.message.error_message.as_deref(),
        Some("timed out after 100 ms")
    );
    assert_eq!(replay.requests().len(), 2, "a timeout is retried");
}

#[tokio::test]
async fn a_json_error_instead_of_a_stream_is_reported() {
    let replay = Replay::start(vec![Reply::Json(
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#.into(),
    )])
    .await;
    let done = complete(&provider(), &openai_model(&replay), &context(), &options()).await;
    assert_eq!(done.error, Some(ErrorKind::ContextOverflow));
    assert_eq!(
        done.message.error_message.as_deref(),
        Some("This model's maximum context length is 8192 tokens")
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_network_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = Model::new(
        OPENAI_COMPLETIONS,
        "openai",
        "gpt-4o-mini",
        format!("http://{addr}/v1"),
    );
    let done = complete(&provider(), &model, &context(), &options()).await;
    assert_eq!(done.error, Some(ErrorKind::Network));
    assert_eq!(done.message.stop_reason, StopReason::Error);
    assert!(done.message.content.is_empty());
}

/// The OpenAI Responses API and Gemini end to end: retried after a 503,
/// their captures in 5-byte pieces, the Responses stream ended by its
/// `response.completed` while the connection stays open, Gemini's by the
/// end of the body.
#[tokio::test]
async fn later_apis_retry_and_stream_over_http() {
    use roundtable_providers::{GOOGLE_GENERATIVE_AI, OPENAI_RESPONSES};
    for (api, id, capture, end, path, key_header, key) in [
        (
            OPENAI_RESPONSES,
            "gpt-5-mini",
            "openai_responses/text_usage.sse",
            End::Hang,
            "/v1/responses",
            "authorization",
            "Bearer test-key",
        ),
        (
            GOOGLE_GENERATIVE_AI,
            "gemini-2.5-flash",
            "google/text_usage.sse",
            End::Clean,
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "x-goog-api-key",
            "test-key",
        ),
    ] {
        let replay = Replay::start(vec![
            Reply::status(503, &[], r#"{"error":{"message":"overloaded"}}"#),
            Reply::sse_chunked(&fixture(capture), 5, Duration::ZERO, end),
        ])
        .await;
        let base = if api == OPENAI_RESPONSES {
            "v1"
        } else {
            "v1beta"
        };
        let model = Model::new(api, "p", id, format!("{}/{base}", replay.base_url));
        let events = collect(&provider(), &model, &options()).await;
        let (message, kind) = final_of(&events);
        assert_eq!(kind, None, "{api}: {:?}", message.error_message);
        assert_eq!(message.text(), "Grüße aus Köln 🌧!");
        assert_eq!(message.usage.cache_read, 1024);
        let requests = replay.requests();
        assert_eq!(requests.len(), 2, "{api}: retried once");
        assert_eq!(requests[1].path, path);
        assert_eq!(requests[1].headers[key_header], key);
    }
}
