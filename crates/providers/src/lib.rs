//! The model side of roundtable: the message model every crate speaks, and
//! (with the default `http` feature) the providers that stream it.
//!
//! Messages serialise exactly as pi-ai's JSON (`role: "user" | "assistant" |
//! "toolResult"`, camelCase fields, content blocks tagged by `type`), so a
//! conversation written by roundtable reads back in pi-based tools and can be
//! compared with pi-ai byte for byte.
//!
//! ```
//! use roundtable_providers::{Message, UserMessage};
//!
//! let hello = Message::User(UserMessage::text("hello", 1_700_000_000_000));
//! let json = serde_json::to_string(&hello).unwrap();
//! assert_eq!(json, r#"{"role":"user","content":"hello","timestamp":1700000000000}"#);
//! let back: Message = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, hello);
//! ```

mod content;
mod message;
mod usage;

pub use content::{
    AssistantBlock, ImageContent, JsonObject, TextContent, ThinkingContent, ToolCall, UserBlock,
};
pub use message::{
    AssistantMessage, Diagnostic, Message, StopReason, ToolResultMessage, UserContent, UserMessage,
};
pub use usage::{Cost, Usage};
