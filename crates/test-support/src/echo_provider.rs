//! A provider that answers from the request, for the runners' tests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, ErrorKind, EventStream, Message, Model,
    OPENAI_COMPLETIONS, Provider, ScriptStep, StopReason, StreamOptions, ToolCall, now_millis,
    script_events,
};

use crate::messages::message_text;
use crate::scripted::text;

/// A provider that answers from the request: `"<name>: re <last line>"`;
/// with tools, a user turn containing `look up <key>` calls `lookup`, and a
/// tool result is answered with `"<name>: found <result>"`. It records every
/// context and how many calls run at once, can fail its next calls, and can
/// hold each call until a permit of [`hold`](Self::hold) is given.
pub struct EchoProvider {
    /// The name its answers start with.
    pub name: String,
    /// Every context it was called with.
    pub contexts: Mutex<Vec<Context>>,
    /// Calls streaming now.
    pub in_flight: Arc<AtomicUsize>,
    /// The most calls that streamed at once.
    pub max_in_flight: AtomicUsize,
    /// How many of the next calls fail with a server error.
    pub fail_next: AtomicUsize,
    /// When set, each call waits for a permit (and stops waiting, aborted,
    /// when its call is cancelled).
    pub hold: Option<Arc<tokio::sync::Semaphore>>,
}

impl EchoProvider {
    /// A shared provider answering as `name`.
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Self::plain(name))
    }

    /// A provider answering as `name`, to be changed before it is shared.
    pub fn plain(name: &str) -> Self {
        Self {
            name: name.to_string(),
            contexts: Mutex::new(Vec::new()),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: AtomicUsize::new(0),
            fail_next: AtomicUsize::new(0),
            hold: None,
        }
    }

    /// How many calls it got.
    pub fn calls(&self) -> usize {
        self.contexts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The contexts of its calls, in order.
    pub fn contexts(&self) -> Vec<Context> {
        self.contexts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn reply(&self, context: &Context) -> AssistantMessage {
        match context.messages.last() {
            Some(m @ Message::ToolResult(_)) => {
                text(&format!("{}: found {}", self.name, message_text(m)))
            }
            Some(m @ Message::User(_)) => {
                let text_of_turn = message_text(m);
                let last = text_of_turn.lines().last().unwrap_or_default().to_string();
                if !context.tools.is_empty()
                    && let Some(at) = last.find("look up ")
                {
                    let key = last[at + 8..].trim().to_string();
                    let mut args = serde_json::Map::new();
                    args.insert("key".into(), key.into());
                    let mut m =
                        AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", now_millis());
                    m.content.push(AssistantBlock::ToolCall(ToolCall::new(
                        format!("call-{}", now_millis()),
                        "lookup",
                        args,
                    )));
                    m.stop_reason = StopReason::ToolUse;
                    return m;
                }
                text(&format!("{}: re {}", self.name, last))
            }
            _ => text(&format!("{}: hello", self.name)),
        }
    }
}

fn failure(kind: ErrorKind, why: &str) -> ScriptStep {
    let mut message = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", now_millis());
    message.error_message = Some(why.into());
    ScriptStep::Fail { kind, message }
}

impl Provider for EchoProvider {
    fn stream(&self, _model: &Model, context: &Context, options: &StreamOptions) -> EventStream {
        self.contexts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(context.clone());
        let step = if self
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            failure(ErrorKind::Server, "the provider is down")
        } else {
            ScriptStep::Reply(self.reply(context))
        };
        let events = script_events(step, 3);
        let hold = self.hold.clone();
        let cancel = options.cancel.clone();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let in_flight = self.in_flight.clone();
        futures::stream::once(async move {
            let mut events = events;
            if let Some(hold) = hold {
                tokio::select! {
                    permit = hold.acquire_owned() => {
                        if let Ok(permit) = permit {
                            permit.forget();
                        }
                    }
                    () = cancel.cancelled() => {
                        events = script_events(failure(ErrorKind::Aborted, "Request was aborted"), 3);
                    }
                }
            } else {
                tokio::task::yield_now().await;
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
            futures::stream::iter(events)
        })
        .flatten()
        .boxed()
    }
}
