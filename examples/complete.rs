//! Streams one assistant message from an OpenAI-compatible, Anthropic,
//! OpenAI Responses or Gemini server and prints it as one line of
//! pi-ai-shaped JSON.
//!
//! ```text
//! cargo run --example complete -- \
//!     --api openai-completions|anthropic-messages|openai-responses|google-generative-ai \
//!     --base-url URL --model ID --context FILE.json [--thinking LEVEL] [--events]
//! ```
//!
//! The context file is pi-ai's `Context`: `{"systemPrompt", "messages",
//! "tools"}`. The key comes from `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` /
//! `GEMINI_API_KEY` (or `GOOGLE_API_KEY`); a loopback server needs none.
//! Gemini's base URL holds the API version
//! (`https://generativelanguage.googleapis.com/v1beta`). With `--events`, every event goes to stderr
//! as one JSON line. The exit code is 1 when the call ended in `error` or
//! `aborted`, 2 for bad arguments.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use roundtable::providers::{
    ANTHROPIC_MESSAGES, AssistantEvent, Context, GOOGLE_GENERATIVE_AI, HttpProvider, Message,
    Model, OPENAI_COMPLETIONS, OPENAI_RESPONSES, Provider, StreamOptions, ThinkingLevel,
};

struct Args {
    api: String,
    base_url: String,
    model: String,
    context: String,
    thinking: ThinkingLevel,
    events: bool,
    max_tokens: Option<u64>,
}

const USAGE: &str = "usage: complete --api openai-completions|anthropic-messages|openai-responses|google-generative-ai \
--base-url URL --model ID \
--context FILE.json [--thinking off|minimal|low|medium|high|xhigh] [--max-tokens N] [--events]";

fn parse_args() -> Result<Args, String> {
    let mut api = None;
    let mut base_url = None;
    let mut model = None;
    let mut context = None;
    let mut thinking = ThinkingLevel::Off;
    let mut events = false;
    let mut max_tokens = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--api" => api = Some(value()?),
            "--base-url" => base_url = Some(value()?),
            "--model" => model = Some(value()?),
            "--context" => context = Some(value()?),
            "--thinking" => thinking = value()?.parse().map_err(|e| format!("{e}"))?,
            "--max-tokens" => {
                max_tokens = Some(value()?.parse().map_err(|e| format!("--max-tokens: {e}"))?)
            }
            "--events" => events = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let api = api.ok_or("--api is required")?;
    let apis = [
        OPENAI_COMPLETIONS,
        ANTHROPIC_MESSAGES,
        OPENAI_RESPONSES,
        GOOGLE_GENERATIVE_AI,
    ];
    if !apis.contains(&api.as_str()) {
        return Err(format!("--api must be one of {}", apis.join(", ")));
    }
    Ok(Args {
        api,
        base_url: base_url.ok_or("--base-url is required")?,
        model: model.ok_or("--model is required")?,
        context: context.ok_or("--context is required")?,
        thinking,
        events,
        max_tokens,
    })
}

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let text = std::fs::read_to_string(&args.context).unwrap_or_else(|e| {
        eprintln!("{}: {e}", args.context);
        std::process::exit(2);
    });
    let context: Context = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("{}: not a pi-ai context: {e}", args.context);
        std::process::exit(2);
    });
    let provider_name = match args.api.as_str() {
        ANTHROPIC_MESSAGES => "anthropic",
        GOOGLE_GENERATIVE_AI => "google",
        _ => "openai",
    };
    let mut model = Model::new(
        args.api.as_str(),
        provider_name,
        &args.model,
        &args.base_url,
    );
    model.reasoning = args.thinking != ThinkingLevel::Off;
    let options = StreamOptions {
        thinking: args.thinking,
        max_tokens: args.max_tokens,
        ..StreamOptions::default()
    };
    let provider = HttpProvider::new();
    let mut stream = provider.stream(&model, &context, &options);
    let mut last = None;
    while let Some(event) = stream.next().await {
        if args.events {
            eprintln!("{}", serde_json::to_string(&event).unwrap());
        }
        if event.is_terminal() {
            last = Some(event);
        }
    }
    let Some(event) = last else {
        eprintln!("the stream ended without a terminal event");
        std::process::exit(1);
    };
    let failed = matches!(event, AssistantEvent::Error { .. });
    let message = event.final_message().cloned().unwrap();
    println!(
        "{}",
        serde_json::to_string(&Message::from(message)).unwrap()
    );
    if failed {
        std::process::exit(1);
    }
}
