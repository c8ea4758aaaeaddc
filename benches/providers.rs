//! Provider benchmarks: SSE parsing plus message assembly over large
//! recorded streams of each wire API (throughput in MB/s), and tool-call
//! argument accumulation over 1000 deltas.
//!
//! `cargo bench --bench providers`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roundtable::providers::assemble::Assembler;
use roundtable::providers::decoder::decode_recorded;
use roundtable::providers::{
    ANTHROPIC_MESSAGES, GOOGLE_GENERATIVE_AI, Model, OPENAI_COMPLETIONS, OPENAI_RESPONSES,
};

/// An OpenAI chat.completion.chunk stream of `n` text deltas, then the
/// finish, usage and `[DONE]`.
fn openai_stream(n: usize) -> Vec<u8> {
    let head = r#""id":"chatcmpl-bench","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini""#;
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "data: {{{head},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token {i} grüße \"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    out.push_str(&format!("data: {{{head},\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n"));
    out.push_str(&format!(
        "data: {{{head},\"choices\":[],\"usage\":{{\"prompt_tokens\":100,\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
        n + 100
    ));
    out.into_bytes()
}

/// An Anthropic messages stream of `n` text deltas.
fn anthropic_stream(n: usize) -> Vec<u8> {
    let mut out = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n\
         event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    );
    for i in 0..n {
        out.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"token {i} grüße \"}}}}\n\n"
        ));
    }
    out.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
         event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":500}}\n\n\
         event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    out.into_bytes()
}

/// An OpenAI Responses stream of `n` text deltas in one message item, as
/// the API sends them (named events, sequence numbers, obfuscation).
fn responses_stream(n: usize) -> Vec<u8> {
    let mut out = String::from(
        "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_bench\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5-mini\",\"output\":[],\"usage\":null}}\n\n\
         event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_bench\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}}\n\n",
    );
    for i in 0..n {
        out.push_str(&format!(
            "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{},\"item_id\":\"msg_bench\",\"output_index\":0,\"content_index\":0,\"delta\":\"token {i} grüße \",\"logprobs\":[],\"obfuscation\":\"a1B2\"}}\n\n",
            i + 2
        ));
    }
    out.push_str(&format!(
        "event: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{{\"id\":\"msg_bench\",\"type\":\"message\",\"status\":\"completed\",\"content\":[],\"role\":\"assistant\"}}}}\n\n\
         event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"resp_bench\",\"status\":\"completed\",\"usage\":{{\"input_tokens\":100,\"input_tokens_details\":{{\"cached_tokens\":0}},\"output_tokens\":{n},\"total_tokens\":{}}}}}}}\n\n",
        n + 100
    ));
    out.into_bytes()
}

/// A Gemini `streamGenerateContent` stream of `n` chunks of text, each
/// with its usage so far, as the API sends them.
fn gemini_stream(n: usize) -> Vec<u8> {
    let mut out = String::new();
    for i in 0..n {
        let finish = if i + 1 == n {
            ",\"finishReason\":\"STOP\""
        } else {
            ""
        };
        out.push_str(&format!(
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"token {i} grüße \"}}],\"role\":\"model\"}}{finish},\"index\":0}}],\"usageMetadata\":{{\"promptTokenCount\":100,\"candidatesTokenCount\":{i},\"totalTokenCount\":{}}},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"rsp-bench\"}}\r\n\r\n",
            i + 100
        ));
    }
    out.into_bytes()
}

/// An OpenAI stream with one tool call whose arguments come in `n` deltas.
fn tool_call_stream(n: usize) -> Vec<u8> {
    let head = r#""id":"chatcmpl-bench","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini""#;
    let mut out = format!(
        "data: {{{head},\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{{\"name\":\"write_file\",\"arguments\":\"{{\\\"content\\\": \\\"\"}}}}]}},\"finish_reason\":null}}]}}\n\n"
    );
    for i in 0..n {
        out.push_str(&format!(
            "data: {{{head},\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"line {i}\\\\n\"}}}}]}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    out.push_str(&format!(
        "data: {{{head},\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"\\\"}}\"}}}}]}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
    ));
    out.into_bytes()
}

fn model(api: &str) -> Model {
    Model::new(api, "bench", "bench-model", "http://127.0.0.1")
}

fn bench_streams(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode_stream");
    for (name, api, body) in [
        (
            "openai_20k_deltas",
            OPENAI_COMPLETIONS,
            openai_stream(20_000),
        ),
        (
            "anthropic_20k_deltas",
            ANTHROPIC_MESSAGES,
            anthropic_stream(20_000),
        ),
        (
            "openai_responses_20k_deltas",
            OPENAI_RESPONSES,
            responses_stream(20_000),
        ),
        (
            "gemini_20k_chunks",
            GOOGLE_GENERATIVE_AI,
            gemini_stream(20_000),
        ),
    ] {
        let model = model(api);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let events = decode_recorded(&model, 0, body.chunks(16 * 1024)).unwrap();
                assert!(events.last().unwrap().final_message().unwrap().text().len() > 100_000);
                events.len()
            })
        });
    }
    group.finish();
}

fn bench_tool_arguments(c: &mut Criterion) {
    let mut group = c.benchmark_group("tool_call_arguments");
    let body = tool_call_stream(1000);
    let model = model(OPENAI_COMPLETIONS);
    group.throughput(Throughput::Elements(1000));
    group.bench_function("openai_1k_argument_deltas", |b| {
        b.iter(|| {
            let events = decode_recorded(&model, 0, body.chunks(16 * 1024)).unwrap();
            let message = events.last().unwrap().final_message().unwrap().clone();
            assert_eq!(message.tool_calls().count(), 1);
            message
        })
    });
    group.bench_function("assembler_1k_argument_deltas", |b| {
        b.iter(|| {
            let mut asm = Assembler::new(&model, 0);
            let call = asm.open_tool_call(Some("call_1"), Some("write_file"));
            asm.tool_call_delta(call, "{\"content\": \"");
            for i in 0..1000 {
                asm.tool_call_delta(call, &format!("line {i}\\n"));
            }
            asm.tool_call_delta(call, "\"}");
            asm.close(call);
            asm.take_events().len()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_streams, bench_tool_arguments);
criterion_main!(benches);
