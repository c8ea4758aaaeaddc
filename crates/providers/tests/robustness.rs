//! Bad input never panics and never hangs: any bytes, cut anywhere, give
//! one well-formed event stream ending in exactly one terminal event; every
//! recorded capture gives the same events however the network splits it;
//! and whatever follows a capture's end marker changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use proptest::prelude::*;
use roundtable_providers::{
    ANTHROPIC_MESSAGES, GOOGLE_GENERATIVE_AI, Model, OPENAI_COMPLETIONS, OPENAI_RESPONSES,
};
use roundtable_providers::{decoder::decode_recorded, validate::validate_events};

const CAPTURES: [(&str, &str); 12] = [
    (OPENAI_COMPLETIONS, "openai/text_usage.sse"),
    (OPENAI_COMPLETIONS, "openai/parallel_tools.sse"),
    (OPENAI_COMPLETIONS, "openai/args_before_id.sse"),
    (OPENAI_COMPLETIONS, "openai/reasoning.sse"),
    (ANTHROPIC_MESSAGES, "anthropic/text.sse"),
    (ANTHROPIC_MESSAGES, "anthropic/thinking_tools.sse"),
    (ANTHROPIC_MESSAGES, "anthropic/redacted.sse"),
    (ANTHROPIC_MESSAGES, "anthropic/invalid_args.sse"),
    (OPENAI_RESPONSES, "openai_responses/reasoning.sse"),
    (OPENAI_RESPONSES, "openai_responses/parallel_tools.sse"),
    (GOOGLE_GENERATIVE_AI, "google/thinking.sse"),
    (GOOGLE_GENERATIVE_AI, "google/parallel_tools.sse"),
];

/// Every wire API.
const APIS: [&str; 4] = [
    OPENAI_COMPLETIONS,
    ANTHROPIC_MESSAGES,
    OPENAI_RESPONSES,
    GOOGLE_GENERATIVE_AI,
];

/// SSE frames of the wire formats, well-formed or not: text, tool calls,
/// end markers, errors, token counts no integer holds, garbage.
const FRAMES: [&str; 24] = [
    "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\"}}]}}]}",
    "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":\"f\"}}]}}]}",
    "data: {\"choices\":[{\"finish_reason\":\"tool_calls\"}]}",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":18446744073709551615,\"completion_tokens\":1e300}}",
    "data: {\"error\":{\"message\":\"overloaded\",\"code\":529}}",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\"}}",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\"}}",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":18446744073709551615,\"input_tokens\":-1}}",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}",
    "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
    "data: [DONE]",
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\",\"id\":\"fc\",\"call_id\":\"c\",\"name\":\"f\"}}",
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\\\"a\"}",
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"reasoning\",\"id\":\"rs\"}}",
    "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"hm\"}",
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\",\"id\":\"rs\",\"summary\":[7]}}",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":1e300,\"output_tokens\":-1}}}",
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\",\"thought\":true},{\"functionCall\":{\"name\":\"f\",\"args\":[1]}}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":18446744073709551615,\"thoughtsTokenCount\":18446744073709551615,\"candidatesTokenCount\":1}}",
    "data: {\"error\":{\"code\":503,\"status\":\"UNAVAILABLE\"}}",
    "data: {not json",
    ": comment",
    "",
];

/// What a server might send after its end marker: any bytes, or frames.
fn trailing_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        prop::collection::vec(prop::sample::select(FRAMES.to_vec()), 0..16)
            .prop_map(|frames| (frames.join("\n") + "\n\n").into_bytes()),
    ]
}

fn model(api: &str) -> Model {
    Model::new(api, "p", "m", "http://127.0.0.1:1")
}

/// Splits `bytes` at the given fractions of its length.
fn split_at<'a>(bytes: &'a [u8], cuts: &[f64]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|f| (f * bytes.len() as f64) as usize)
        .collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut last = 0;
    for p in points {
        out.push(&bytes[last..p.max(last)]);
        last = p.max(last);
    }
    out.push(&bytes[last..]);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_split_gives_the_same_events(which in 0..CAPTURES.len(), cuts in prop::collection::vec(0.0f64..1.0, 0..12)) {
        let (api, path) = CAPTURES[which];
        let bytes = support::fixture(path);
        let whole = decode_recorded(&model(api), 0, [bytes.as_slice()]).unwrap();
        let split = decode_recorded(&model(api), 0, split_at(&bytes, &cuts)).unwrap();
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn a_capture_cut_anywhere_still_ends_once(which in 0..CAPTURES.len(), cut in 0.0f64..1.0) {
        let (api, path) = CAPTURES[which];
        let bytes = support::fixture(path);
        let cut = (cut * bytes.len() as f64) as usize;
        let events = decode_recorded(&model(api), 0, [&bytes[..cut]]).unwrap();
        let problems = validate_events(&events);
        prop_assert!(problems.is_empty(), "{:?}", problems);
    }

    #[test]
    fn bytes_after_the_end_marker_never_change_the_result(
        which in 0..CAPTURES.len(),
        tail in trailing_bytes(),
        cuts in prop::collection::vec(0.0f64..1.0, 0..12),
    ) {
        let (api, path) = CAPTURES[which];
        // Gemini has no end marker: what follows its last chunk is part of
        // the message.
        prop_assume!(api != GOOGLE_GENERATIVE_AI);
        let bytes = support::fixture(path);
        let clean = decode_recorded(&model(api), 0, [bytes.as_slice()]).unwrap();
        let mut longer = bytes.clone();
        longer.extend_from_slice(&tail);
        let events = decode_recorded(&model(api), 0, split_at(&longer, &cuts)).unwrap();
        prop_assert_eq!(events, clean);
    }

    #[test]
    fn token_counts_saturate_whatever_their_size(counts in [any::<u64>(); 4]) {
        let [a, b, c, d] = counts;
        let expected_total = a.saturating_add(b).saturating_add(c).saturating_add(d);
        let anthropic = format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"m\",\"usage\":{{\"input_tokens\":{a},\"output_tokens\":{b},\"cache_read_input_tokens\":{c},\"cache_creation_input_tokens\":{d}}}}}}}\n\n\
             event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}},\"usage\":{{\"output_tokens\":{b}}}}}\n\n\
             event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        );
        // prompt_tokens counts the cached ones: `a` of them are cached here.
        let openai = format!(
            "data: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{c},\"completion_tokens\":{b},\"prompt_tokens_details\":{{\"cached_tokens\":{a},\"cache_write_tokens\":{d}}}}}}}\n\n\
             data: [DONE]\n\n"
        );
        for (api, body) in [(ANTHROPIC_MESSAGES, anthropic), (OPENAI_COMPLETIONS, openai)] {
            let events = decode_recorded(&model(api), 0, [body.as_bytes()]).unwrap();
            let usage = events.last().unwrap().final_message().unwrap().usage;
            prop_assert!(events.last().unwrap().final_message().unwrap().error_message.is_none());
            if api == ANTHROPIC_MESSAGES {
                prop_assert_eq!(usage.total_tokens, expected_total);
            } else {
                let parts = usage.input.saturating_add(usage.output).saturating_add(usage.cache_read).saturating_add(usage.cache_write);
                prop_assert_eq!(usage.total_tokens, parts);
                prop_assert_eq!(usage.output, b);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(api in prop::sample::select(APIS.to_vec()), bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let events = decode_recorded(&model(api), 0, bytes.chunks(13)).unwrap();
        prop_assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
    }

    #[test]
    fn sse_shaped_garbage_never_panics(lines in prop::collection::vec(
        prop::sample::select(FRAMES.to_vec()),
        0..40,
    )) {
        let text = lines.join("\n") + "\n\n";
        for api in APIS {
            let events = decode_recorded(&model(api), 0, text.as_bytes().chunks(5)).unwrap();
            let problems = validate_events(&events);
            prop_assert!(problems.is_empty(), "{:?}\n{}", problems, text);
        }
    }
}
