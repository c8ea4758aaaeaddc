//! What only the OpenAI Responses API and Gemini have, over their recorded
//! captures (`tests/fixtures/{openai_responses,google}/*.sse`): reasoning
//! items and thought signatures kept and sent back, the ways each ends
//! (incomplete, failed, a safety stop, usage after the finish), call ids
//! made as pi-ai makes them, images in. The scenarios every adapter shares
//! are in `conformance.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use roundtable_providers::{
    AssistantBlock, AssistantEvent, AssistantMessage, Context, ErrorKind, GOOGLE_GENERATIVE_AI,
    ImageContent, InputKind, Message, Model, OPENAI_RESPONSES, StopReason, StreamOptions,
    ThinkingLevel, UserBlock, UserMessage, google, openai_responses,
};
use roundtable_providers::{decoder::decode_recorded, validate::validate_events};
use serde_json::{Value, json};

/// The model of the captures and of pi's (see `tests/pi/capture.mjs`).
fn model(api: &str) -> Model {
    let (id, provider, base) = if api == OPENAI_RESPONSES {
        ("gpt-5-mini", "openai", "http://127.0.0.1:1/v1")
    } else {
        ("gemini-2.5-flash", "google", "http://127.0.0.1:1/v1beta")
    };
    let mut m = Model::new(api, provider, id, base);
    m.cost.input = 3.0;
    m.cost.output = 15.0;
    m.cost.cache_read = 0.3;
    m.cost.cache_write = 3.75;
    m.context_window = 200_000;
    m.max_tokens = 64_000;
    m
}

/// Decodes a capture whole and byte by byte (every UTF-8 character split),
/// checks both agree and follow the event grammar, and returns the events.
fn events(api: &str, fixture: &str) -> Vec<AssistantEvent> {
    let bytes = support::fixture(fixture);
    let model = model(api);
    let whole = decode_recorded(&model, 0, [bytes.as_slice()]).unwrap();
    assert_eq!(decode_recorded(&model, 0, bytes.chunks(1)).unwrap(), whole);
    let problems = validate_events(&whole);
    assert!(problems.is_empty(), "{fixture}: {problems:#?}");
    whole
}

fn message(api: &str, fixture: &str) -> (AssistantMessage, Option<ErrorKind>) {
    match events(api, fixture).pop().unwrap() {
        AssistantEvent::Done { message, .. } => (AssistantMessage::clone(&message), None),
        AssistantEvent::Error { error, kind, .. } => (AssistantMessage::clone(&error), Some(kind)),
        other => panic!("{other:?}"),
    }
}

/// The `item` of the capture's `response.output_item.done` event of
/// `item_id`, as its text.
fn raw_item(fixture: &str, item_id: &str) -> String {
    let text = String::from_utf8(support::fixture(fixture)).unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| d.contains("output_item.done") && d.contains(item_id))
        .unwrap();
    let at = data.find("\"item\":").unwrap() + "\"item\":".len();
    // The item runs to the event's closing brace.
    data[at..data.len() - 1].to_string()
}

#[test]
fn responses_reasoning_summaries_are_thinking_signed_with_the_item_as_received() {
    let fixture = "openai_responses/reasoning.sse";
    let (m, kind) = message(OPENAI_RESPONSES, fixture);
    assert!(kind.is_none());
    let AssistantBlock::Thinking(t) = &m.content[0] else {
        panic!("{m:?}")
    };
    // The two summary parts, a blank line between them.
    assert_eq!(
        &*t.thinking,
        "**Counting**\n\nThe user wants a number.\n\nAnswer 42."
    );
    assert_eq!(
        t.thinking_signature.as_deref(),
        Some(raw_item(fixture, "rs_reason1").as_str())
    );
    let AssistantBlock::Text(text) = &m.content[1] else {
        panic!()
    };
    assert_eq!(&*text.text, "42.");
    assert_eq!(
        text.text_signature.as_deref(),
        Some(r#"{"v":1,"id":"msg_reason1","phase":"final_answer"}"#)
    );
    // Reasoning tokens are part of the output.
    assert_eq!((m.usage.input, m.usage.output), (30, 12));
}

#[test]
fn responses_reasoning_goes_back_in_the_next_request_exactly_as_received() {
    let fixture = "openai_responses/reasoning.sse";
    let (answer, _) = message(OPENAI_RESPONSES, fixture);
    let context = Context {
        system_prompt: None,
        messages: vec![
            Message::from(UserMessage::text("How many?", 0)),
            Message::from(answer),
            Message::from(UserMessage::text("Why?", 1)),
        ],
        tools: Default::default(),
    };
    let mut model = model(OPENAI_RESPONSES);
    model.reasoning = true;
    let body = openai_responses::build_request(&model, &context, &StreamOptions::default());
    let item: Value = serde_json::from_str(&raw_item(fixture, "rs_reason1")).unwrap();
    assert_eq!(body["input"][1], item);
    assert_eq!(
        body["input"][1].to_string(),
        raw_item(fixture, "rs_reason1")
    );
    assert_eq!(body["input"][2]["id"], "msg_reason1");
    assert_eq!(body["input"][2]["phase"], "final_answer");
}

#[test]
fn responses_cut_at_max_output_tokens_is_length_with_its_usage() {
    let (m, kind) = message(OPENAI_RESPONSES, "openai_responses/incomplete.sse");
    assert!(kind.is_none());
    assert_eq!(m.stop_reason, StopReason::Length);
    assert_eq!(m.text(), "The first part of a long ans");
    assert_eq!((m.usage.input, m.usage.output), (40, 64));
}

#[test]
fn responses_failed_is_a_typed_error_that_keeps_the_content() {
    let (m, kind) = message(OPENAI_RESPONSES, "openai_responses/failed.sse");
    assert_eq!(kind, Some(ErrorKind::Server));
    assert_eq!(m.text(), "Partial answ");
    assert_eq!(
        m.error_message.as_deref(),
        Some("server_error: The server had an error while processing your request.")
    );
}

#[test]
fn gemini_thoughts_are_thinking_and_signatures_are_kept() {
    let (m, kind) = message(GOOGLE_GENERATIVE_AI, "google/thinking.sse");
    assert!(kind.is_none());
    let AssistantBlock::Thinking(t) = &m.content[0] else {
        panic!()
    };
    assert_eq!(&*t.thinking, "**Counting**\n\nThe user wants a number.");
    let AssistantBlock::Text(text) = &m.content[1] else {
        panic!()
    };
    assert_eq!(&*text.text, "42.");
    // The signature came on the last, empty, part of the text.
    assert_eq!(
        text.text_signature.as_deref(),
        Some("CiQBcsjafQ5k0lC7Z3x+u/a9bTHKzB4wAA==")
    );
    // Thoughts tokens count as output.
    assert_eq!((m.usage.input, m.usage.output), (30, 12));
}

#[test]
fn gemini_calls_get_ids_as_pi_makes_them_and_keep_their_signature() {
    let (m, _) = message(GOOGLE_GENERATIVE_AI, "google/parallel_tools.sse");
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(
        calls[0].thought_signature.as_deref(),
        Some("EtgBCtUBAdHtim9tools+sig/A==")
    );
    assert!(calls[1].thought_signature.is_none());
    let (m, _) = message(GOOGLE_GENERATIVE_AI, "google/repeated_call_id.sse");
    let ids: Vec<&str> = m.tool_calls().map(|c| &*c.id).collect();
    assert_eq!(ids, ["call_same", "get_weather_0_1"]);
    // The text ends when the first call comes.
    let kinds: Vec<bool> = events(GOOGLE_GENERATIVE_AI, "google/parallel_tools.sse")
        .iter()
        .map(|e| matches!(e, AssistantEvent::TextEnd { .. }))
        .collect();
    assert_eq!(kinds.iter().position(|k| *k), Some(3));
}

#[test]
fn gemini_finish_reasons_and_usage_after_the_finish() {
    let (m, kind) = message(GOOGLE_GENERATIVE_AI, "google/length.sse");
    assert!(kind.is_none());
    assert_eq!(m.stop_reason, StopReason::Length);
    let (m, kind) = message(GOOGLE_GENERATIVE_AI, "google/safety.sse");
    assert_eq!(kind, Some(ErrorKind::Refused));
    assert_eq!(
        m.error_message.as_deref(),
        Some("Provider finishReason: SAFETY")
    );
    assert_eq!(m.text(), "I can tell you how to");
    let (m, _) = message(GOOGLE_GENERATIVE_AI, "google/usage_only.sse");
    assert_eq!(m.text(), "Done.");
    // The chunk of usage alone, after the finish, counts.
    assert_eq!(
        (m.usage.input, m.usage.output, m.usage.cache_read),
        (18, 5, 32)
    );
}

#[test]
fn gemini_prompt_blocked_and_error_statuses_are_typed() {
    let model = model(GOOGLE_GENERATIVE_AI);
    let decode = |body: &str| {
        let events = decode_recorded(&model, 0, [body.as_bytes()]).unwrap();
        assert!(validate_events(&events).is_empty());
        match events.last().unwrap() {
            AssistantEvent::Error { kind, error, .. } => (*kind, error.error_message.clone()),
            other => panic!("{other:?}"),
        }
    };
    let (kind, message) =
        decode("data: {\"promptFeedback\":{\"blockReason\":\"PROHIBITED_CONTENT\"}}\n\n");
    assert_eq!(kind, ErrorKind::Refused);
    assert!(message.unwrap().contains("PROHIBITED_CONTENT"));
    for (status, code, expected) in [
        ("RESOURCE_EXHAUSTED", 429, ErrorKind::RateLimit),
        ("UNAUTHENTICATED", 401, ErrorKind::Auth),
        ("INTERNAL", 500, ErrorKind::Server),
        ("INVALID_ARGUMENT", 400, ErrorKind::InvalidRequest),
    ] {
        let body = format!(
            "data: {{\"error\":{{\"code\":{code},\"message\":\"no\",\"status\":\"{status}\"}}}}\n\n"
        );
        assert_eq!(decode(&body).0, expected, "{status}");
    }
    let overflow = "data: {\"error\":{\"code\":400,\"message\":\"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).\",\"status\":\"INVALID_ARGUMENT\"}}\n\n";
    assert_eq!(decode(overflow).0, ErrorKind::ContextOverflow);
}

fn pi_request(file: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi");
    serde_json::from_slice(&std::fs::read(path.join(file)).unwrap()).unwrap()
}

fn pi_context(file: &str) -> Context {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pi");
    serde_json::from_slice(&std::fs::read(path.join(file)).unwrap()).unwrap()
}

/// A history of the API's own messages (signatures, item ids, another
/// model of the same API, another API's calls), sent as pi-ai sends it.
#[test]
fn request_bodies_with_their_own_history_match_pi_ai() {
    let options = StreamOptions {
        thinking: ThinkingLevel::High,
        ..StreamOptions::default()
    };
    for (api, context, file) in [
        (
            OPENAI_RESPONSES,
            "context_responses.json",
            "responses_request_history.json",
        ),
        (
            GOOGLE_GENERATIVE_AI,
            "context_google.json",
            "google_request_history.json",
        ),
    ] {
        let mut model = model(api);
        model.reasoning = true;
        let context = pi_context(context);
        let ours = if api == OPENAI_RESPONSES {
            openai_responses::build_request(&model, &context, &options)
        } else {
            google::build_request(&model, &context, &options)
        };
        assert_eq!(ours, pi_request(file), "{file}");
    }
}

#[test]
fn images_go_in_as_each_api_takes_them() {
    let image = UserBlock::Image(ImageContent {
        data: "iVBORw0KGgo=".into(),
        mime_type: "image/png".into(),
    });
    let context = Context {
        system_prompt: None,
        messages: vec![Message::from(UserMessage::blocks(
            vec![UserBlock::text("what is this?"), image],
            0,
        ))],
        tools: Default::default(),
    };
    let options = StreamOptions::default();
    let mut responses = model(OPENAI_RESPONSES);
    responses.input.push(InputKind::Image);
    let body = openai_responses::build_request(&responses, &context, &options);
    assert_eq!(
        body["input"][0]["content"][1],
        json!({"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBORw0KGgo="})
    );
    let mut gemini = model(GOOGLE_GENERATIVE_AI);
    gemini.input.push(InputKind::Image);
    let body = google::build_request(&gemini, &context, &options);
    assert_eq!(
        body["contents"][0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
    );
}

#[test]
fn responses_items_whose_text_came_only_whole_are_kept() {
    // A server that sends no deltas: the items' text arrives with their end.
    let body = concat!(
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}}\n\n",
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"A\"},{\"type\":\"summary_text\",\"text\":\"B\"}]}}\n\n",
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[]}}\n\n",
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi \"},{\"type\":\"refusal\",\"refusal\":\"no\"}]}}\n\n",
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n",
    );
    let events = decode_recorded(&model(OPENAI_RESPONSES), 0, [body.as_bytes()]).unwrap();
    assert!(validate_events(&events).is_empty(), "{events:#?}");
    let m = events.last().unwrap().final_message().unwrap();
    assert!(matches!(&m.content[0], AssistantBlock::Thinking(t) if &*t.thinking == "A\n\nB"));
    assert_eq!(m.text(), "Hi no");
    let call = m.tool_calls().next().unwrap();
    assert_eq!(
        (&*call.id, call.arguments["a"].clone()),
        ("call_1|fc_1", json!(1))
    );
    assert_eq!(m.stop_reason, StopReason::ToolUse);
}
