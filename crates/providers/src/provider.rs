//! The `Provider` trait: anything that streams an assistant message for a
//! model and a context.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};

use crate::breaker::BreakerState;
use crate::context::{Context, StreamOptions};
use crate::error::ErrorKind;
use crate::event::AssistantEvent;
use crate::message::{AssistantMessage, StopReason};
use crate::model::Model;

/// A stream of assistant events, ending with exactly one `done` or `error`.
pub type EventStream = Pin<Box<dyn Stream<Item = AssistantEvent> + Send>>;

/// Streams assistant messages. Object-safe: hosts hold `Arc<dyn Provider>`.
///
/// `stream` never fails up front: every failure (bad request, HTTP error,
/// broken stream, cancellation) arrives as the terminal `error` event, whose
/// message has `stopReason: "error" | "aborted"` and an `errorMessage`.
pub trait Provider: Send + Sync {
    /// Starts one model call. The stream owns everything it needs; dropping
    /// it cancels the call.
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> EventStream;

    /// The state of the circuit breaker in front of `model`'s provider, for
    /// hosts that show why calls fail fast. A provider without a breaker
    /// is always [`BreakerState::Closed`].
    fn breaker_state(&self, _model: &Model) -> BreakerState {
        BreakerState::Closed
    }
}

/// The end of one model call: the final message and, when it failed, what
/// kind of failure it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The final assistant message.
    pub message: AssistantMessage,
    /// Set when `message.stop_reason` is `error` or `aborted`.
    pub error: Option<ErrorKind>,
}

/// Runs one call to the end and returns its final message.
///
/// ```
/// use roundtable_providers::{
///     complete, AssistantMessage, AssistantBlock, Context, Model, ScriptedProvider,
///     StreamOptions, OPENAI_COMPLETIONS,
/// };
///
/// let mut reply = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
/// reply.content.push(AssistantBlock::text("hi"));
/// let provider = ScriptedProvider::new([reply]);
/// let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
/// let done = futures::executor::block_on(complete(
///     &provider, &model, &Context::default(), &StreamOptions::default(),
/// ));
/// assert_eq!(done.message.text(), "hi");
/// assert!(done.error.is_none());
/// ```
pub async fn complete(
    provider: &dyn Provider,
    model: &Model,
    context: &Context,
    options: &StreamOptions,
) -> Completion {
    let mut stream = provider.stream(model, context, options);
    while let Some(event) = stream.next().await {
        match event {
            AssistantEvent::Done { message, .. } => {
                return Completion {
                    message: Arc::unwrap_or_clone(message),
                    error: None,
                };
            }
            AssistantEvent::Error { kind, error, .. } => {
                return Completion {
                    message: Arc::unwrap_or_clone(error),
                    error: Some(kind),
                };
            }
            _ => {}
        }
    }
    let message = AssistantMessage::failure(
        model,
        StopReason::Error,
        "the provider's stream ended without a terminal event",
        now_millis(),
    );
    Completion {
        message,
        error: Some(ErrorKind::Protocol),
    }
}

/// The current time in Unix milliseconds.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
