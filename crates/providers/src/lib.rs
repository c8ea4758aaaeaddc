//! The model side of roundtable: the message model every crate speaks, the
//! [`Provider`] trait and its streaming [`AssistantEvent`]s, a
//! [`ScriptedProvider`] for tests and offline runs, and (with the default
//! `http` feature) the OpenAI-compatible, OpenAI Responses, Anthropic and
//! Gemini adapters with retries and a circuit breaker.
//!
//! Messages serialise exactly as pi-ai's JSON (`role: "user" | "assistant" |
//! "toolResult"`, camelCase fields, content blocks tagged by `type`), so a
//! conversation written by roundtable reads back in pi-based tools and can be
//! compared with pi-ai byte for byte.
//!
//! ```
//! use roundtable_providers::{Message, UserMessage};
//!
//! let hello = Message::from(UserMessage::text("hello", 1_700_000_000_000));
//! let json = serde_json::to_string(&hello).unwrap();
//! assert_eq!(json, r#"{"role":"user","content":"hello","timestamp":1700000000000}"#);
//! let back: Message = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, hello);
//! ```

// The message model.
mod content;
mod message;
pub mod serde_shared;
mod tagged;
mod usage;
mod user_message;

// Calling a model: which model, what it is given, what it streams back.
mod context;
mod error;
mod event;
mod model;
mod overflow;
mod provider;
pub mod thinking;

// The wire APIs: the seam (which API a model speaks, what every API
// implements, the table of adapters), one folder per API, and what the
// adapters share: the message transform, SSE framing, the assembler and
// the decoder that ties them together. All pure.
pub mod anthropic;
pub mod assemble;
pub mod decoder;
pub mod google;
pub mod openai;
pub mod openai_responses;
mod sse;
mod transform;
mod wire;

// Checking event streams.
pub mod validate;

// Providers, and what keeps them healthy.
pub mod breaker;
#[cfg(feature = "http")]
mod http;
mod resolve;
pub mod retry;
mod scripted;

pub use content::{
    AssistantBlock, ImageContent, JsonObject, TextContent, ThinkingContent, ToolCall, UserBlock,
};
pub use message::{AssistantMessage, Diagnostic, Message, StopReason, ToolResultMessage};
pub use usage::{Cost, Usage};
pub use user_message::{UserContent, UserMessage};

pub use breaker::BreakerState;
pub use context::{Context, DEFAULT_IDLE_TIMEOUT, ModelTool, StreamOptions};
pub use error::{ErrorKind, ProviderError, is_stalled};
pub use event::AssistantEvent;
#[cfg(feature = "http")]
pub use http::HttpProvider;
pub use model::{InputKind, Model, ModelCost};
pub use overflow::{is_context_overflow, is_overflow_text};
pub use provider::{Completion, EventStream, Provider, complete, now_millis};
pub use resolve::{ModelRef, RoleChoice, RoleModels};
pub use scripted::{ScriptStep, ScriptedProvider, script_events};
pub use thinking::ThinkingLevel;
pub use wire::{
    ANTHROPIC_MESSAGES, GOOGLE_GENERATIVE_AI, OPENAI_COMPLETIONS, OPENAI_RESPONSES, WireApi,
};
