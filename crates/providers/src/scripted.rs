//! `ScriptedProvider`: replays given assistant messages as realistic event
//! streams, for tests and offline examples.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::content::AssistantBlock;
use crate::context::{Context, StreamOptions};
use crate::error::ErrorKind;
use crate::event::AssistantEvent;
use crate::message::{AssistantMessage, StopReason};
use crate::model::Model;
use crate::provider::{EventStream, Provider, now_millis};
use crate::retry::RetryNotice;
use crate::text::Text;

/// One scripted reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptStep {
    /// Stream this message. A message whose stop reason is `error` or
    /// `aborted` ends with an `error` event (kind [`ErrorKind::Server`] or
    /// [`ErrorKind::Aborted`]).
    Reply(AssistantMessage),
    /// Stream this message and end with an `error` event of this kind.
    Fail {
        /// The kind reported to the host.
        kind: ErrorKind,
        /// The message (its stop reason is forced to `error`).
        message: AssistantMessage,
    },
}

impl From<AssistantMessage> for ScriptStep {
    fn from(message: AssistantMessage) -> Self {
        ScriptStep::Reply(message)
    }
}

/// A provider that answers each call with the next scripted message,
/// streamed block by block in small deltas (optionally paced), and records
/// every context it was given.
///
/// ```
/// use roundtable_providers::{
///     AssistantBlock, AssistantEvent, AssistantMessage, Context, Model, Provider,
///     ScriptedProvider, StreamOptions, OPENAI_COMPLETIONS,
/// };
/// use futures::StreamExt;
///
/// let mut reply = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
/// reply.content.push(AssistantBlock::text("hello there"));
/// let provider = ScriptedProvider::new([reply.clone()]).with_chunk_chars(4);
/// let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
/// let events: Vec<_> = futures::executor::block_on(
///     provider.stream(&model, &Context::default(), &StreamOptions::default()).collect(),
/// );
/// // start, text_start, 3 deltas ("hell", "o th", "ere"), text_end, done
/// assert_eq!(events.len(), 7);
/// assert_eq!(events.last().unwrap().final_message(), Some(&reply));
/// assert_eq!(provider.requests().len(), 1);
/// ```
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    steps: Mutex<VecDeque<ScriptStep>>,
    requests: Mutex<Vec<Context>>,
    pacing: Option<Duration>,
    chunk_chars: Option<usize>,
    retries: Mutex<Option<ScriptedRetries>>,
}

/// Retries the next call goes through before it is answered.
#[derive(Debug, Clone)]
struct ScriptedRetries {
    count: u32,
    delay: Duration,
    error: String,
}

impl ScriptedProvider {
    /// A provider that replays `steps` in order.
    pub fn new<S: Into<ScriptStep>>(steps: impl IntoIterator<Item = S>) -> Self {
        Self {
            steps: Mutex::new(steps.into_iter().map(Into::into).collect()),
            ..Self::default()
        }
    }

    /// Waits `pacing` between events (needs a tokio runtime).
    pub fn with_pacing(mut self, pacing: Duration) -> Self {
        self.pacing = Some(pacing);
        self
    }

    /// Splits text, thinking and argument JSON into deltas of at most `n`
    /// characters (default 16).
    pub fn with_chunk_chars(mut self, n: usize) -> Self {
        self.chunk_chars = Some(n.max(1));
        self
    }

    /// Makes the next call fail `count` times before its response starts,
    /// as a server that is overloaded would: each retry is announced to
    /// [`StreamOptions::on_retry`] and waited for (`delay`, cut short by
    /// cancellation, which ends the call as aborted), then the call gets
    /// its scripted reply. The HTTP provider retries the same way.
    pub fn retry_next_call(&self, count: u32, delay: Duration, error: impl Into<String>) {
        if let Ok(mut retries) = self.retries.lock() {
            *retries = Some(ScriptedRetries {
                count,
                delay,
                error: error.into(),
            });
        }
    }

    /// Adds a reply at the end of the script.
    pub fn push(&self, step: impl Into<ScriptStep>) {
        if let Ok(mut steps) = self.steps.lock() {
            steps.push_back(step.into());
        }
    }

    /// How many replies are left.
    pub fn remaining(&self) -> usize {
        self.steps.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// The contexts of every call so far, in order.
    pub fn requests(&self) -> Vec<Context> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Provider for ScriptedProvider {
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> EventStream {
        if let Ok(mut requests) = self.requests.lock() {
            requests.push(context.clone());
        }
        let step = self.steps.lock().ok().and_then(|mut s| s.pop_front());
        let step = step.unwrap_or_else(|| ScriptStep::Fail {
            kind: ErrorKind::Protocol,
            message: AssistantMessage::failure(
                model,
                StopReason::Error,
                "the scripted provider has no more replies",
                now_millis(),
            ),
        });
        let chunk = self.chunk_chars.unwrap_or(16);
        let events = script_events(step, chunk);
        let reply = paced(events, self.pacing, options.cancel.clone());
        match self.retries.lock().ok().and_then(|mut r| r.take()) {
            None => reply,
            Some(retries) => {
                let aborted = script_events(
                    ScriptStep::Fail {
                        kind: ErrorKind::Aborted,
                        message: AssistantMessage::failure(
                            model,
                            StopReason::Aborted,
                            "Request was aborted",
                            now_millis(),
                        ),
                    },
                    chunk,
                );
                after_retries(retries, options, reply, aborted)
            }
        }
    }
}

/// The events that stream `step`: every block opened, streamed in deltas of
/// `chunk` characters and closed, then the terminal event.
pub fn script_events(step: ScriptStep, chunk: usize) -> Vec<AssistantEvent> {
    let (message, kind) = match step {
        ScriptStep::Reply(m) => {
            let kind = match m.stop_reason {
                StopReason::Aborted => Some(ErrorKind::Aborted),
                StopReason::Error => Some(ErrorKind::Server),
                _ => None,
            };
            (m, kind)
        }
        ScriptStep::Fail { kind, mut message } => {
            message.stop_reason = if kind == ErrorKind::Aborted {
                StopReason::Aborted
            } else {
                StopReason::Error
            };
            (message, Some(kind))
        }
    };
    let mut events = vec![AssistantEvent::Start];
    for (i, block) in message.content.iter().enumerate() {
        match block {
            AssistantBlock::Text(t) => {
                events.push(AssistantEvent::TextStart { content_index: i });
                for piece in chunks(&t.text, chunk) {
                    events.push(AssistantEvent::TextDelta {
                        content_index: i,
                        delta: piece.into(),
                    });
                }
                events.push(AssistantEvent::TextEnd {
                    content_index: i,
                    content: t.text.to_arc(),
                });
            }
            AssistantBlock::Thinking(t) => {
                events.push(AssistantEvent::ThinkingStart { content_index: i });
                for piece in chunks(&t.thinking, chunk) {
                    events.push(AssistantEvent::ThinkingDelta {
                        content_index: i,
                        delta: piece.into(),
                    });
                }
                events.push(AssistantEvent::ThinkingEnd {
                    content_index: i,
                    content: t.thinking.clone(),
                });
            }
            AssistantBlock::ToolCall(call) => {
                events.push(AssistantEvent::ToolCallStart {
                    content_index: i,
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
                let json = serde_json::to_string(&*call.arguments).unwrap_or_default();
                for piece in chunks(&json, chunk) {
                    events.push(AssistantEvent::ToolCallDelta {
                        content_index: i,
                        delta: piece.into(),
                    });
                }
                if kind.is_none() {
                    events.push(AssistantEvent::ToolCallEnd {
                        content_index: i,
                        tool_call: call.clone(),
                    });
                }
            }
        }
    }
    events.push(match kind {
        None => AssistantEvent::Done {
            reason: message.stop_reason,
            message,
        },
        Some(kind) => AssistantEvent::Error {
            reason: message.stop_reason,
            kind,
            error: message,
        },
    });
    events
}

/// `reply` once the scripted retries have been announced and waited for;
/// `aborted` when the call is cancelled during a wait.
fn after_retries(
    retries: ScriptedRetries,
    options: &StreamOptions,
    reply: EventStream,
    aborted: Vec<AssistantEvent>,
) -> EventStream {
    let observer = options.on_retry.clone();
    let cancel = options.cancel.clone();
    let waited = async move {
        for retry in 1..=retries.count {
            if let Some(observer) = &observer {
                observer.notify(&RetryNotice {
                    retry,
                    max_retries: retries.count,
                    delay: retries.delay,
                    error: retries.error.clone(),
                });
            }
            tokio::select! {
                () = tokio::time::sleep(retries.delay) => {}
                () = cancel.cancelled() => return false,
            }
        }
        true
    };
    let mut reply = Some(reply);
    let mut aborted = Some(aborted);
    Box::pin(futures::stream::once(waited).flat_map(move |went_on| {
        let rest: EventStream = if went_on {
            reply
                .take()
                .unwrap_or_else(|| Box::pin(futures::stream::empty()))
        } else {
            Box::pin(futures::stream::iter(aborted.take().unwrap_or_default()))
        };
        rest
    }))
}

fn chunks(text: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .nth(n)
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

/// Streams `events`, waiting `pacing` between them, and ends with `aborted`
/// (keeping the content streamed so far) when `cancel` fires first.
fn paced(
    events: Vec<AssistantEvent>,
    pacing: Option<Duration>,
    cancel: CancellationToken,
) -> EventStream {
    struct State {
        events: std::vec::IntoIter<AssistantEvent>,
        seen: Vec<AssistantEvent>,
        pacing: Option<Duration>,
        cancel: CancellationToken,
        done: bool,
        first: bool,
    }
    let state = State {
        events: events.into_iter(),
        seen: Vec::new(),
        pacing,
        cancel,
        done: false,
        first: true,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        if let (Some(pace), false) = (st.pacing, st.first) {
            tokio::select! {
                _ = tokio::time::sleep(pace) => {}
                _ = st.cancel.cancelled() => {}
            }
        }
        st.first = false;
        if st.cancel.is_cancelled() {
            st.done = true;
            return Some((aborted_from(&st.seen, st.events.as_slice()), st));
        }
        let event = st.events.next()?;
        st.done = event.is_terminal();
        st.seen.push(event.clone());
        Some((event, st))
    })
    .boxed()
}

/// The `aborted` event after `seen` events of a script whose remaining
/// events (ending with the terminal one) are `rest`.
fn aborted_from(seen: &[AssistantEvent], rest: &[AssistantEvent]) -> AssistantEvent {
    let mut message = rest
        .last()
        .and_then(AssistantEvent::final_message)
        .cloned()
        .unwrap_or_else(|| AssistantMessage::empty("", "", "", now_millis()));
    let started: Vec<usize> = seen
        .iter()
        .filter_map(AssistantEvent::content_index)
        .collect();
    let keep = started.iter().max().map(|m| m + 1).unwrap_or(0);
    message.content.truncate(keep);
    // Cut the last block's text to what was streamed.
    if let Some(last) = message.content.last_mut() {
        let streamed: String = seen
            .iter()
            .filter_map(|e| match e {
                AssistantEvent::TextDelta {
                    content_index,
                    delta,
                }
                | AssistantEvent::ThinkingDelta {
                    content_index,
                    delta,
                } if *content_index + 1 == keep => Some(&**delta),
                _ => None,
            })
            .collect();
        match last {
            AssistantBlock::Text(t) => t.text = Text::from(streamed),
            AssistantBlock::Thinking(t) => t.thinking = Arc::from(streamed),
            AssistantBlock::ToolCall(_) => {}
        }
    }
    message.stop_reason = StopReason::Aborted;
    message.error_message = Some("Request was aborted".into());
    AssistantEvent::Error {
        reason: StopReason::Aborted,
        kind: ErrorKind::Aborted,
        error: message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::ToolCall;
    use crate::wire::OPENAI_COMPLETIONS;

    fn reply() -> AssistantMessage {
        let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
        m.content.push(AssistantBlock::text("héllo wörld"));
        let mut args = serde_json::Map::new();
        args.insert("path".into(), "a.txt".into());
        m.content.push(AssistantBlock::ToolCall(ToolCall::new(
            "call_1", "read", args,
        )));
        m.stop_reason = StopReason::ToolUse;
        m
    }

    #[test]
    fn deltas_split_on_char_boundaries_and_concatenate() {
        let events = script_events(ScriptStep::Reply(reply()), 3);
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                AssistantEvent::TextDelta { delta, .. } => Some(&**delta),
                _ => None,
            })
            .collect();
        assert_eq!(text, "héllo wörld");
        assert!(matches!(
            events.last(),
            Some(AssistantEvent::Done {
                reason: StopReason::ToolUse,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn cancellation_mid_stream_ends_aborted() {
        let provider = ScriptedProvider::new([reply()])
            .with_pacing(Duration::from_millis(1))
            .with_chunk_chars(1);
        let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
        let options = StreamOptions::default();
        let mut stream = provider.stream(&model, &Context::default(), &options);
        let mut events = Vec::new();
        while let Some(e) = stream.next().await {
            if matches!(e, AssistantEvent::TextDelta { .. }) && events.len() > 3 {
                options.cancel.cancel();
            }
            events.push(e);
        }
        let AssistantEvent::Error { reason, error, .. } = events.last().unwrap() else {
            panic!("{events:?}")
        };
        assert_eq!(*reason, StopReason::Aborted);
        assert!("héllo wörld".starts_with(&error.text()));
        assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
    }

    #[test]
    fn an_empty_script_fails_with_a_protocol_error() {
        let provider = ScriptedProvider::default();
        let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
        let events: Vec<_> = futures::executor::block_on(
            provider
                .stream(&model, &Context::default(), &StreamOptions::default())
                .collect(),
        );
        assert!(matches!(
            events.last(),
            Some(AssistantEvent::Error {
                kind: ErrorKind::Protocol,
                ..
            })
        ));
    }
}
