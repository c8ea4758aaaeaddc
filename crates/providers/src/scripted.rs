//! `ScriptedProvider`: replays given assistant messages as realistic event
//! streams, for tests and offline examples.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::content::AssistantBlock;
use crate::context::{Context, ModelTool, StreamOptions};
use crate::error::ErrorKind;
use crate::event::AssistantEvent;
use crate::message::{AssistantMessage, Message, StopReason};
use crate::model::Model;
use crate::provider::{EventStream, Provider, now_millis};
use crate::retry::RetryNotice;

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
    requests: Mutex<Recording>,
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
        let steps: VecDeque<ScriptStep> = steps.into_iter().map(Into::into).collect();
        // One call a step is the usual run: its recording is made room for
        // once (a tool loop's call adds two messages, the reply and a
        // result), not grown call after call.
        let requests = Recording {
            calls: Vec::with_capacity(steps.len()),
            added: Vec::with_capacity(2 * steps.len()),
        };
        Self {
            steps: Mutex::new(steps),
            requests: Mutex::new(requests),
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
        self.requests
            .lock()
            .map(|r| r.contexts())
            .unwrap_or_default()
    }

    /// The contexts of every call since the last take, in order, no longer
    /// kept: the provider keeps every request it is sent (each with its
    /// system prompt and tool schemas), which a long run must let go of.
    pub fn take_requests(&self) -> Vec<Context> {
        self.requests
            .lock()
            .map(|mut r| std::mem::take(&mut *r).contexts())
            .unwrap_or_default()
    }
}

/// The contexts of the calls, kept without copying what one call repeats
/// of the previous: a tool loop sends the previous request's messages again
/// plus the round's, the same tools and the same system prompt.
#[derive(Debug, Default)]
struct Recording {
    /// The calls, in order.
    calls: Vec<Recorded>,
    /// The messages each call added to what it repeated, one call after
    /// the other.
    added: Vec<Message>,
}

/// One call's context as recorded: its messages are the first `repeated`
/// of the previous call's, then `added`; the tools are the context's own
/// (shared), and the system prompt is shared with the previous call's when
/// it did not change.
#[derive(Debug)]
struct Recorded {
    system_prompt: Option<Arc<str>>,
    repeated: usize,
    added: std::ops::Range<usize>,
    tools: Arc<[ModelTool]>,
}

impl Recorded {
    /// How many messages the call has.
    fn len(&self) -> usize {
        self.repeated + self.added.len()
    }
}

impl Recording {
    fn record(&mut self, context: &Context) {
        let previous = self.calls.last();
        let system_prompt = match (previous, &context.system_prompt) {
            (_, None) => None,
            (
                Some(Recorded {
                    system_prompt: Some(last),
                    ..
                }),
                Some(prompt),
            ) if **last == **prompt => Some(last.clone()),
            (_, Some(prompt)) => Some(Arc::from(prompt.as_str())),
        };
        let repeated = self.repeated(&context.messages);
        let start = self.added.len();
        self.added
            .extend(context.messages[repeated..].iter().cloned());
        self.calls.push(Recorded {
            system_prompt,
            repeated,
            added: start..self.added.len(),
            tools: context.tools.clone(),
        });
    }

    /// How many of `messages` are the previous call's messages, all of
    /// them (0 when they are not a prefix of `messages`). Messages are
    /// compared by identity: every message recorded is held here, so the
    /// same address is the same message.
    fn repeated(&self, messages: &[Message]) -> usize {
        let Some(last) = self.calls.last() else {
            return 0;
        };
        let len = last.len();
        if messages.len() < len {
            return 0;
        }
        // The previous call's messages, walked back through the calls
        // they repeat: `messages[..end]` is still to be compared.
        let mut end = len;
        for call in self.calls.iter().rev() {
            if end == 0 {
                break;
            }
            if end > call.repeated {
                let own = &self.added[call.added.start..call.added.start + (end - call.repeated)];
                if !own
                    .iter()
                    .zip(&messages[call.repeated..end])
                    .all(|(a, b)| same_message(a, b))
                {
                    return 0;
                }
                end = call.repeated;
            }
        }
        len
    }

    /// The contexts of the calls, in order.
    fn contexts(&self) -> Vec<Context> {
        let mut contexts: Vec<Context> = Vec::with_capacity(self.calls.len());
        for call in &self.calls {
            let mut messages = Vec::with_capacity(call.len());
            if let Some(previous) = contexts.last() {
                messages.extend_from_slice(&previous.messages[..call.repeated]);
            }
            messages.extend_from_slice(&self.added[call.added.clone()]);
            contexts.push(Context {
                system_prompt: call.system_prompt.as_deref().map(str::to_string),
                messages,
                tools: call.tools.clone(),
            });
        }
        contexts
    }
}

impl Provider for ScriptedProvider {
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> EventStream {
        if let Ok(mut requests) = self.requests.lock() {
            requests.record(context);
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
        let reply = paced(
            ScriptEvents::new(step, chunk),
            self.pacing,
            options.cancel.clone(),
        );
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
    ScriptEvents::new(step, chunk).collect()
}

/// The events of one scripted reply, made one at a time as they are
/// streamed (no list of events, no copy of what was sent): `start`, each
/// block opened, streamed in deltas of `chunk` characters and closed, then
/// the terminal event carrying the message.
#[derive(Debug)]
struct ScriptEvents {
    /// The reply, shared from the start: the terminal event hands it on
    /// as it is (no copy, no allocation then), and the stream's state stays
    /// small enough to move cheaply into its box. Taken by the terminal
    /// event.
    message: Option<Arc<AssistantMessage>>,
    /// The error kind a failing reply ends with.
    kind: Option<ErrorKind>,
    chunk: usize,
    /// The block being streamed, and where in it.
    block: usize,
    phase: Phase,
    /// The argument JSON of the tool call being streamed.
    json: String,
    /// How many blocks were announced so far, and how many bytes of the
    /// last one's text were streamed: what an abort keeps.
    announced: usize,
    streamed: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Open,
    Deltas { offset: usize },
    Close,
    Terminal,
    Ended,
}

impl ScriptEvents {
    fn new(step: ScriptStep, chunk: usize) -> Self {
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
        Self {
            message: Some(Arc::new(message)),
            kind,
            chunk: chunk.max(1),
            block: 0,
            phase: Phase::Start,
            json: String::new(),
            announced: 0,
            streamed: 0,
        }
    }

    /// The next event: the phases advance until one sends something (each
    /// phase's step returns its event, or `None` to go on to the next).
    fn next_event(&mut self) -> Option<AssistantEvent> {
        loop {
            let event = match self.phase {
                Phase::Ended => return None,
                Phase::Start => {
                    self.phase = Phase::Open;
                    Some(AssistantEvent::Start)
                }
                Phase::Open => self.open_block(),
                Phase::Deltas { offset } => self.next_delta(offset),
                Phase::Close => self.close_block(),
                Phase::Terminal => self.terminal(),
            };
            if event.is_some() {
                return event;
            }
        }
    }

    /// Announces the next block (its tool call's argument JSON is kept to
    /// stream), or moves on to the terminal event when none is left.
    fn open_block(&mut self) -> Option<AssistantEvent> {
        let Some(block) = self
            .message
            .as_ref()
            .and_then(|m| m.content.get(self.block))
        else {
            self.phase = Phase::Terminal;
            return None;
        };
        let i = self.block;
        self.announced = i + 1;
        self.streamed = 0;
        self.phase = Phase::Deltas { offset: 0 };
        Some(match block {
            AssistantBlock::Text(_) => AssistantEvent::TextStart { content_index: i },
            AssistantBlock::Thinking(_) => AssistantEvent::ThinkingStart { content_index: i },
            AssistantBlock::ToolCall(call) => {
                self.json.clear();
                if let Ok(json) = serde_json::to_string(&*call.arguments) {
                    self.json = json;
                }
                AssistantEvent::ToolCallStart {
                    content_index: i,
                    id: call.id.clone(),
                    name: call.name.clone(),
                }
            }
        })
    }

    /// The block's next delta from `offset`, or, at its end, nothing and
    /// on to closing it.
    fn next_delta(&mut self, offset: usize) -> Option<AssistantEvent> {
        let i = self.block;
        let block = self.message.as_ref().and_then(|m| m.content.get(i));
        let text = match block {
            Some(AssistantBlock::Text(t)) => &*t.text,
            Some(AssistantBlock::Thinking(t)) => &*t.thinking,
            Some(AssistantBlock::ToolCall(_)) => self.json.as_str(),
            None => "",
        };
        let rest = text.get(offset..).unwrap_or_default();
        if rest.is_empty() {
            self.phase = Phase::Close;
            return None;
        }
        let cut = chunk_end(rest, self.chunk);
        let delta: Arc<str> = Arc::from(&rest[..cut]);
        self.phase = Phase::Deltas {
            offset: offset + cut,
        };
        Some(match block {
            Some(AssistantBlock::ToolCall(_)) => AssistantEvent::ToolCallDelta {
                content_index: i,
                delta,
            },
            Some(AssistantBlock::Thinking(_)) => {
                self.streamed = offset + cut;
                AssistantEvent::ThinkingDelta {
                    content_index: i,
                    delta,
                }
            }
            _ => {
                self.streamed = offset + cut;
                AssistantEvent::TextDelta {
                    content_index: i,
                    delta,
                }
            }
        })
    }

    /// Closes the block and moves to the next. A failing reply's tool
    /// calls end without their `toolcall_end`.
    fn close_block(&mut self) -> Option<AssistantEvent> {
        let i = self.block;
        let block = self.message.as_ref().and_then(|m| m.content.get(i));
        let event = match block {
            Some(AssistantBlock::Text(t)) => Some(AssistantEvent::TextEnd {
                content_index: i,
                content: t.text.clone(),
            }),
            Some(AssistantBlock::Thinking(t)) => Some(AssistantEvent::ThinkingEnd {
                content_index: i,
                content: t.thinking.clone(),
            }),
            Some(AssistantBlock::ToolCall(call)) if self.kind.is_none() => {
                Some(AssistantEvent::ToolCallEnd {
                    content_index: i,
                    tool_call: call.clone(),
                })
            }
            _ => None,
        };
        self.block += 1;
        self.phase = Phase::Open;
        event
    }

    /// The terminal event, handing on the message: `done`, or `error` for
    /// a failing reply.
    fn terminal(&mut self) -> Option<AssistantEvent> {
        self.phase = Phase::Ended;
        let message = self.message.take()?;
        let reason = message.stop_reason;
        Some(match self.kind {
            None => AssistantEvent::Done { reason, message },
            Some(kind) => AssistantEvent::Error {
                reason,
                kind,
                error: message,
            },
        })
    }

    /// The `aborted` event of a reply cut off now: the blocks announced so
    /// far, the last one's text cut to what was streamed of it.
    fn aborted(&mut self) -> AssistantEvent {
        let mut message = self.message.take().map_or_else(
            || AssistantMessage::empty("", "", "", now_millis()),
            // Not shared yet: the terminal event was not sent.
            Arc::unwrap_or_clone,
        );
        self.phase = Phase::Ended;
        message.content.truncate(self.announced);
        if let Some(last) = message.content.last_mut() {
            match last {
                AssistantBlock::Text(t) => {
                    t.text = Arc::from(t.text.get(..self.streamed).unwrap_or_default());
                }
                AssistantBlock::Thinking(t) => {
                    t.thinking = Arc::from(t.thinking.get(..self.streamed).unwrap_or_default());
                }
                AssistantBlock::ToolCall(_) => {}
            }
        }
        message.stop_reason = StopReason::Aborted;
        message.error_message = Some("Request was aborted".into());
        AssistantEvent::Error {
            reason: StopReason::Aborted,
            kind: ErrorKind::Aborted,
            error: Arc::new(message),
        }
    }
}

impl Iterator for ScriptEvents {
    type Item = AssistantEvent;

    fn next(&mut self) -> Option<AssistantEvent> {
        self.next_event()
    }
}

/// Are `a` and `b` the same message (not equal ones: the same allocation)?
fn same_message(a: &Message, b: &Message) -> bool {
    match (a, b) {
        (Message::User(a), Message::User(b)) => Arc::ptr_eq(a, b),
        (Message::Assistant(a), Message::Assistant(b)) => Arc::ptr_eq(a, b),
        (Message::ToolResult(a), Message::ToolResult(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

/// The end of the first delta of `rest`: after `chunk` characters, or all of
/// it. ASCII text (the usual case) is cut by bytes without decoding it.
fn chunk_end(rest: &str, chunk: usize) -> usize {
    if rest.len() <= chunk {
        // At most `chunk` bytes hold at most `chunk` characters.
        return rest.len();
    }
    if rest.as_bytes()[..chunk].is_ascii() {
        // `chunk` one-byte characters; the next one starts at `chunk`.
        return chunk;
    }
    rest.char_indices()
        .nth(chunk)
        .map(|(at, _)| at)
        .unwrap_or(rest.len())
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

/// Streams `events`, waiting `pacing` between them, and ends with `aborted`
/// (keeping the content streamed so far) when `cancel` fires first.
fn paced(events: ScriptEvents, pacing: Option<Duration>, cancel: CancellationToken) -> EventStream {
    let Some(pacing) = pacing else {
        // Without pacing every event is ready at once: a stream that polls
        // the script in place (no state moved in and out of a future per
        // event, which for a reply is a few hundred bytes each time).
        let mut events = events;
        return futures::stream::poll_fn(move |_| {
            Poll::Ready(if events.phase == Phase::Ended {
                None
            } else if cancel.is_cancelled() {
                Some(events.aborted())
            } else {
                events.next_event()
            })
        })
        .boxed();
    };
    struct State {
        events: ScriptEvents,
        pacing: Duration,
        cancel: CancellationToken,
        first: bool,
    }
    let state = State {
        events,
        pacing,
        cancel,
        first: true,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.events.phase == Phase::Ended {
            return None;
        }
        if !st.first {
            tokio::select! {
                _ = tokio::time::sleep(st.pacing) => {}
                _ = st.cancel.cancelled() => {}
            }
        }
        st.first = false;
        if st.cancel.is_cancelled() {
            return Some((st.events.aborted(), st));
        }
        let event = st.events.next_event()?;
        Some((event, st))
    })
    .boxed()
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
    fn every_call_is_recorded_as_it_was_sent() {
        use crate::user_message::UserMessage;
        let provider = ScriptedProvider::new((0..6).map(|_| reply()));
        let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
        let user = |text: &str| Message::from(UserMessage::text(text, 0));
        let tools: Arc<[ModelTool]> = Arc::from(vec![ModelTool {
            name: "read".into(),
            description: "reads".into(),
            parameters: serde_json::json!({"type": "object"}),
        }]);
        let mut context = Context {
            system_prompt: Some("sys".into()),
            messages: vec![user("a")],
            tools: tools.clone(),
        };
        let mut sent = Vec::new();
        let send = |context: &Context, sent: &mut Vec<Context>| {
            drop(provider.stream(&model, context, &StreamOptions::default()));
            sent.push(context.clone());
        };
        send(&context, &mut sent);
        // A tool loop: the previous messages again, plus the round's.
        context.messages.push(user("b"));
        context.messages.push(user("c"));
        send(&context, &mut sent);
        // Equal but not the same messages, then a shorter list (a
        // compaction), then a list that repeats only part of it.
        context.messages = vec![user("a"), user("b"), user("c"), user("d")];
        context.system_prompt = None;
        send(&context, &mut sent);
        context.messages.truncate(1);
        context.tools = Arc::default();
        send(&context, &mut sent);
        let kept = context.messages[0].clone();
        context.messages = vec![kept, user("e")];
        send(&context, &mut sent);
        assert_eq!(provider.requests(), sent);
        assert_eq!(provider.take_requests(), sent);
        assert!(provider.requests().is_empty());
        send(&context, &mut sent);
        assert_eq!(provider.requests(), sent[sent.len() - 1..]);
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
