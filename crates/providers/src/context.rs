//! What a model call is given: the conversation (`Context`) and how to run it
//! (`StreamOptions`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::message::Message;
use crate::retry::RetryObserver;
use crate::thinking::ThinkingLevel;

/// The conversation for one model call, shaped as pi-ai's `Context`
/// (`{"systemPrompt", "messages", "tools"}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The messages so far, oldest first.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The tools the model may call, shared: a tool loop sends the same
    /// tools every round, and their schemas are the largest part of a
    /// request, so each round's context shares them instead of copying them
    /// (`Arc::from(vec)` or `vec.into()` makes one from a list).
    #[serde(default, skip_serializing_if = "no_tools")]
    pub tools: Arc<[ModelTool]>,
}

fn no_tools(tools: &Arc<[ModelTool]>) -> bool {
    tools.is_empty()
}

impl Context {
    /// The text of the last user message (empty when there is none): what
    /// an offline or test model answers to.
    pub fn last_user_text(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User(user) => Some(user.content.to_text()),
                _ => None,
            })
            .unwrap_or_default()
    }
}

/// A tool as the model sees it: a name, what it does, and the JSON schema of
/// its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: serde_json::Value,
}

/// The default [`StreamOptions::idle_timeout`]: how long a response body
/// may go silent before the stream is given up as stalled.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How to run one model call.
///
/// Build it from the default and change what you need, so new options keep
/// their defaults:
///
/// ```
/// use roundtable_providers::{DEFAULT_IDLE_TIMEOUT, StreamOptions};
///
/// let options = StreamOptions {
///     max_tokens: Some(1024),
///     ..StreamOptions::default()
/// };
/// assert_eq!(options.idle_timeout, Some(DEFAULT_IDLE_TIMEOUT));
///
/// // A model that thinks silently for minutes: no stall guard.
/// let patient = StreamOptions {
///     idle_timeout: None,
///     ..StreamOptions::default()
/// };
/// assert!(patient.idle_timeout.is_none());
/// ```
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Output limit in tokens; `None` lets the adapter choose (pi-ai's
    /// default: the model's limit, at most 32k).
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Thinking level, clamped to what the model supports.
    pub thinking: ThinkingLevel,
    /// API key; `None` uses the provider's environment variable.
    pub api_key: Option<String>,
    /// Extra headers, applied after the model's.
    pub headers: BTreeMap<String, String>,
    /// How long to wait for the response to start; `None` uses the
    /// provider's call timeout.
    pub timeout: Option<Duration>,
    /// How long the response body may go silent once it has started: the
    /// longest wait for the next chunk of bytes (SSE comments and pings
    /// count). When it passes, the stream ends with an `error` event
    /// (`ErrorKind::Timeout`) that keeps everything received so far; it is
    /// never retried, since content may have streamed. Default
    /// [`DEFAULT_IDLE_TIMEOUT`] (60 s); `None` (or zero) turns it off, for
    /// servers that hold back every byte while a model reasons.
    /// Cancellation wins over it.
    pub idle_timeout: Option<Duration>,
    /// Retries before the first byte; `None` uses the provider's policy.
    pub max_retries: Option<u32>,
    /// Cancels the call; a cancelled stream ends with `aborted`.
    pub cancel: CancellationToken,
    /// Told before each retry's wait (attempt, delay, the error).
    pub on_retry: Option<RetryObserver>,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            max_tokens: None,
            temperature: None,
            thinking: ThinkingLevel::default(),
            api_key: None,
            headers: BTreeMap::new(),
            timeout: None,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_retries: None,
            cancel: CancellationToken::new(),
            on_retry: None,
        }
    }
}

impl StreamOptions {
    /// The output limit to send: the explicit one, else the model's limit
    /// capped at 32000, as pi-ai's `buildBaseOptions`.
    pub(crate) fn effective_max_tokens(&self, model_max_tokens: u64) -> Option<u64> {
        self.max_tokens.or_else(|| {
            if model_max_tokens > 0 {
                Some(model_max_tokens.min(32_000))
            } else {
                None
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_user_text_skips_later_messages_and_is_empty_without_one() {
        let ctx: Context = serde_json::from_value(serde_json::json!({
            "messages": [
                {"role": "user", "content": "first", "timestamp": 1},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "timestamp": 2},
                {"role": "assistant", "content": [], "api": "openai-completions", "provider": "p", "model": "m",
                 "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                           "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                 "stopReason": "stop", "timestamp": 3}
            ]
        }))
        .unwrap();
        assert_eq!(ctx.last_user_text(), "a\nb");
        assert_eq!(Context::default().last_user_text(), "");
    }

    #[test]
    fn pi_context_deserialises() {
        let ctx: Context = serde_json::from_value(serde_json::json!({
            "systemPrompt": "be brief",
            "messages": [{"role": "user", "content": "hi", "timestamp": 1}],
            "tools": [{"name": "ls", "description": "list", "parameters": {"type": "object"}}]
        }))
        .unwrap();
        assert_eq!(ctx.system_prompt.as_deref(), Some("be brief"));
        assert_eq!(ctx.tools[0].name, "ls");
    }
}
