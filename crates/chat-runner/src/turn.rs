//! The turn loop: stream the model, run its tool calls, feed the results
//! back, repeat until a final answer or a stop.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use roundtable_providers::retry::RetryNotice;
use roundtable_providers::{
    AssistantEvent, AssistantMessage, Context, ErrorKind, Message, Model, ModelTool, Provider,
    StopReason, StreamOptions, ToolCall, ToolResultMessage, Usage, UserMessage,
    is_context_overflow, is_stalled, now_millis,
};
use roundtable_thread_stream::Chat;
use roundtable_tools::{Artifacts, ToolRegistry};
use tokio_util::sync::CancellationToken;

use crate::approval::{Approver, DenyAll};
use crate::compact_step::{CompactStep, ContextCheck};
use crate::event::{CompactionReason, EventSink, FinishReason, OutputKind, TurnEvent};
use crate::exec::{CallsEnd, ToolRunner};
use crate::limits::Limits;
use crate::retry_relay::{RetryRelay, retry_relay};

/// How long a provider that ignores cancellation gets to end its stream
/// before the loop gives up on it.
const ABORT_GRACE: Duration = Duration::from_secs(2);

/// The messages a turn makes room for when it starts (those of four tool
/// rounds with one call each). A caller that builds the request's list
/// with this much spare room spares the turn a copy of the conversation
/// when it makes that room.
pub const ROOM_FOR_ROUNDS: usize = 8;

/// A message a host adds to a running turn between two model calls.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnInput {
    /// Who it is from (the author of its `chat` entry).
    pub author: Arc<str>,
    /// The id its entry gets, if the host chose one.
    pub id: Option<Arc<str>>,
    /// What is stored: the message as its author wrote it.
    pub chat: Chat,
    /// What the model reads: the message as a projection of the stored
    /// entry shows it (labelled with its author).
    pub message: UserMessage,
}

/// What a host adds to a running turn at its round boundaries. Both calls
/// default to adding nothing.
///
/// `before_model_call` always runs to completion, even when the turn is
/// cancelled meanwhile: what it returns may already be taken from a store
/// (a queue), so its messages are recorded in the turn before the loop
/// stops. Keep it short. The loop stops waiting for `after_answer` when the
/// turn is cancelled (a verification running commands must not hold an
/// abort back).
#[async_trait]
pub trait TurnHooks: Send + Sync {
    /// Before every model call but the first (after the previous round's
    /// tool results): messages to add to the conversation first, such as a
    /// user steering the running turn.
    async fn before_model_call(&self, _turn: &Arc<str>, _round: u32) -> Vec<TurnInput> {
        Vec::new()
    }

    /// When the model answered without calling tools, and the round cap
    /// leaves room for another round: messages that make the turn go on
    /// (a failed verification for the model to fix), or none to end it.
    async fn after_answer(&self, _turn: &Arc<str>, _round: u32) -> Vec<TurnInput> {
        Vec::new()
    }
}

/// What one turn is given besides the loop's fixed configuration.
#[derive(Clone, Default)]
pub struct TurnRequest {
    /// The turn's id (events and stored entries carry it); a fresh UUID v7
    /// when `None`.
    pub turn_id: Option<Arc<str>>,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The conversation so far, ending with the new user message.
    pub messages: Vec<Message>,
    /// What the host adds at the turn's round boundaries.
    pub hooks: Option<Arc<dyn TurnHooks>>,
    /// Where the turn's tool calls keep what they leave behind (whole
    /// command outputs, applied patches, rendered diagrams).
    pub artifacts: Option<Arc<dyn Artifacts>>,
    /// The step asked before every model request whether to compact the
    /// conversation (and after a context overflow, to compact and retry).
    pub compaction: Option<Arc<dyn CompactStep>>,
    /// Where a turn another process began goes on from, when this request
    /// carries such a turn on.
    pub resume: Option<Resume>,
}

/// Where a turn begun by another process (which stopped) goes on from: the
/// conversation in the request holds everything the turn stored, and the
/// loop counts its limits from the rounds already made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resume {
    /// The model calls the turn already made.
    pub rounds: u32,
    /// Calls of the turn's last reply that never started (the first one
    /// waited for an approval): they run, in order, before the next model
    /// call. Their results must not be in the request's conversation.
    pub calls: Vec<ToolCall>,
    /// The ids of the calls among `calls` whose approval request is
    /// already stored: it is not asked again, only waited for.
    pub requested: Vec<Arc<str>>,
}

impl std::fmt::Debug for TurnRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnRequest")
            .field("turn_id", &self.turn_id)
            .field("system_prompt", &self.system_prompt)
            .field("messages", &self.messages.len())
            .field("hooks", &self.hooks.is_some())
            .field("artifacts", &self.artifacts)
            .field("compaction", &self.compaction.is_some())
            .field("resume", &self.resume)
            .finish()
    }
}

impl TurnRequest {
    /// A request over `messages`.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }

    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Sets the turn id.
    pub fn with_turn_id(mut self, turn_id: impl Into<Arc<str>>) -> Self {
        self.turn_id = Some(turn_id.into());
        self
    }

    /// Sets the hooks of the turn's round boundaries.
    pub fn with_hooks(mut self, hooks: Arc<dyn TurnHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Sets where the turn's tool calls keep their artifacts.
    pub fn with_artifacts(mut self, artifacts: Arc<dyn Artifacts>) -> Self {
        self.artifacts = Some(artifacts);
        self
    }

    /// Sets the compaction step asked before every model request.
    pub fn with_compaction(mut self, step: Arc<dyn CompactStep>) -> Self {
        self.compaction = Some(step);
        self
    }

    /// Carries on a turn another process began, from `resume`.
    pub fn with_resume(mut self, resume: Resume) -> Self {
        self.resume = Some(resume);
        self
    }
}

/// What a turn produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// The turn's id.
    pub turn_id: Arc<str>,
    /// The text of the last assistant message (the answer on `stop`; what
    /// there was otherwise, possibly empty).
    pub text: String,
    /// Why the turn ended.
    pub finish_reason: FinishReason,
    /// What went wrong, for `timeout`, `aborted` and `error`.
    pub error: Option<String>,
    /// Every message the turn added, in order: assistant messages and the
    /// tool results answering their calls (every call has its result).
    pub messages: Vec<Message>,
    /// Usage and cost summed over the rounds.
    pub usage: Usage,
    /// Model calls made.
    pub rounds: u32,
    /// Wall time.
    pub duration: Duration,
}

/// The provider-agnostic turn loop: a provider and model, tools, an
/// approver, limits and stream options, reused for many turns.
///
/// Each model call ("round") is streamed; when the assistant message calls
/// tools they run (read and network tools side by side, write and exec tools
/// alone, gated calls only after the [`Approver`] agreed) and their results,
/// in the order of the calls, go back to the model. The loop ends on a final
/// answer (`stop`, `length`), the round cap (`max-rounds`), the budget
/// (`budget`), the timeout (`timeout`), cancellation (`aborted`) or a
/// failure (`error`, which includes a stream that stalled once the
/// limits' stall retries were used up). Whatever
/// the end, every tool call in [`TurnOutcome::messages`] has a result.
///
/// With a [`CompactStep`] in the request, the step sees every request
/// before it is sent (inside a tool loop too) and may replace its
/// conversation by a compacted one. When the model refuses a request as
/// larger than its window, the refused reply stays out of the conversation
/// (it is still reported and stored, as a failed message) and the step is
/// asked to compact; if it does, the request is sent again.
///
/// ```
/// use std::sync::Arc;
/// use roundtable_chat_runner::{FinishReason, NullSink, TurnLoop, TurnRequest};
/// use roundtable_providers::{
///     AssistantBlock, AssistantMessage, Message, Model, ScriptedProvider, UserMessage,
///     OPENAI_COMPLETIONS,
/// };
/// use tokio_util::sync::CancellationToken;
///
/// let mut reply = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
/// reply.content.push(AssistantBlock::text("Hello!"));
/// let provider = Arc::new(ScriptedProvider::new([reply]));
/// let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
/// let turns = TurnLoop::new(provider, model);
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let request = TurnRequest::new(vec![Message::from(UserMessage::text("hi", 0))]);
/// let outcome = turns.run(request, CancellationToken::new(), &NullSink).await;
/// assert_eq!(outcome.finish_reason, FinishReason::Stop);
/// assert_eq!(outcome.text, "Hello!");
/// assert_eq!(outcome.rounds, 1);
/// # });
/// ```
#[derive(Clone)]
pub struct TurnLoop {
    provider: Arc<dyn Provider>,
    /// Shared: a runner clones its loop for every turn (and the compaction
    /// step keeps one), and a model holds several strings.
    model: Arc<Model>,
    tools: Arc<ToolRegistry>,
    model_tools: Arc<[ModelTool]>,
    /// The estimated tokens of `model_tools`, counted the first time a
    /// compaction check needs them and shared by the loop's clones: the
    /// count serialises every tool's JSON schema, and a runner's turns
    /// offer the same list again and again.
    model_tools_tokens: Arc<OnceLock<u64>>,
    approver: Arc<dyn Approver>,
    limits: Limits,
    options: StreamOptions,
}

impl std::fmt::Debug for TurnLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnLoop")
            .field("model", &self.model.id)
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl TurnLoop {
    /// A loop over `provider` and `model` with no tools, the [`DenyAll`]
    /// approver, default [`Limits`] and default stream options.
    pub fn new(provider: Arc<dyn Provider>, model: impl Into<Arc<Model>>) -> Self {
        Self {
            provider,
            model: model.into(),
            tools: Arc::new(ToolRegistry::new()),
            model_tools: Arc::from(Vec::new()),
            model_tools_tokens: Arc::default(),
            approver: Arc::new(DenyAll),
            limits: Limits::default(),
            options: StreamOptions::default(),
        }
    }

    /// Sets the tools; the registry's approval policy decides which calls
    /// need the approver.
    pub fn with_tools(mut self, tools: Arc<ToolRegistry>) -> Self {
        self.model_tools = tools.definitions().map(|d| d.for_model().clone()).collect();
        self.model_tools_tokens = Arc::default();
        self.tools = tools;
        self
    }

    /// Sets the approver of gated calls.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// Sets the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the stream options of every model call (thinking level, output
    /// limit, key...); their cancellation token is replaced by the turn's.
    pub fn with_options(mut self, options: StreamOptions) -> Self {
        self.options = options;
        self
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The stream options of every model call.
    pub fn options(&self) -> &StreamOptions {
        &self.options
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The tools as the model is shown them (names, descriptions, schemas),
    /// shared with every request the loop sends.
    pub fn model_tools(&self) -> &Arc<[ModelTool]> {
        &self.model_tools
    }

    /// The estimated tokens of `context`'s fixed part: its system prompt
    /// and its tools (see [`tools_tokens`](Self::tools_tokens)).
    pub(crate) fn fixed_tokens(&self, context: &Context) -> u64 {
        roundtable_dispatch::text_tokens(context.system_prompt.as_deref().unwrap_or_default())
            .saturating_add(self.tools_tokens(&context.tools))
    }

    /// An upper bound of [`fixed_tokens`](Self::fixed_tokens) made without
    /// reading the prompt: its bytes bound its characters.
    pub(crate) fn fixed_tokens_bound(&self, context: &Context) -> u64 {
        roundtable_dispatch::text_tokens_bound(context.system_prompt.as_deref().unwrap_or_default())
            .saturating_add(self.tools_tokens(&context.tools))
    }

    /// The estimated tokens of `tools` (their names, descriptions and
    /// schemas): counted once for this loop's own list, which is what its
    /// requests carry, and anew for any other list.
    pub(crate) fn tools_tokens(&self, tools: &Arc<[ModelTool]>) -> u64 {
        let count = || roundtable_dispatch::overhead_tokens(None, tools);
        if Arc::ptr_eq(tools, &self.model_tools) {
            *self.model_tools_tokens.get_or_init(count)
        } else {
            count()
        }
    }

    /// The tools.
    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// Runs one turn to its end. Never fails: failures are the outcome's
    /// `error` finish reason. Cancelling `cancel` ends the turn with
    /// `aborted` (a running model call is aborted, running tools are told to
    /// stop and every pending call gets a cancelled result). Needs a tokio
    /// runtime with timers enabled when a timeout is set.
    pub async fn run(
        &self,
        mut request: TurnRequest,
        cancel: CancellationToken,
        sink: &dyn EventSink,
    ) -> TurnOutcome {
        let started = Instant::now();
        let turn_id = request.turn_id.take().unwrap_or_else(new_turn_id);
        let artifacts = request.artifacts.take();
        let cancel = cancel.child_token();
        let timed_out = AtomicBool::new(false);
        sink.emit(TurnEvent::TurnStarted {
            turn: turn_id.clone(),
        });
        let mut turn = Turn::new(
            self,
            request,
            artifacts.as_ref(),
            &turn_id,
            &cancel,
            &timed_out,
            sink,
        );
        let end = within_timeout(self.limits.timeout, turn.drive(), &cancel, &timed_out).await;
        turn.state.finish(turn_id.clone(), end, started, sink)
    }

    /// Whether the turn's usage so far spent its budget.
    fn over_budget(&self, usage: &Usage) -> bool {
        self.limits.budget.is_some_and(|b| b.is_spent(usage))
    }

    /// Makes a round's model call, sending it again (as a `Retrying` event
    /// says) while its stream stalls before any output was reported, at
    /// most [`Limits::stall_retries`] times. A stall that ends the round
    /// after retries says how many attempts were made; one after output
    /// says that output had streamed.
    async fn call_model_or_stall(
        &self,
        call: ModelCall<'_>,
        retries: &mut RetryRelay,
    ) -> (Arc<AssistantMessage>, Option<ErrorKind>) {
        let mut attempt = 0;
        loop {
            let (mut message, failure, streamed) = self.call_model(&call, retries).await;
            let stalled = failure == Some(ErrorKind::Timeout) && is_stalled(&message);
            if !stalled || call.options.cancel.is_cancelled() {
                return (message, failure);
            }
            let error = message.error_message.clone().unwrap_or_default();
            if !streamed && attempt < self.limits.stall_retries {
                attempt += 1;
                call.sink.emit(TurnEvent::Retrying {
                    turn: call.turn.clone(),
                    round: call.round,
                    attempt,
                    max_attempts: self.limits.stall_retries,
                    delay_ms: 0,
                    error,
                });
                continue;
            }
            let why = if streamed {
                Some(format!("{error} (after part of the reply had streamed)"))
            } else if attempt > 0 {
                Some(format!("{error} ({} attempts)", attempt + 1))
            } else {
                None
            };
            if why.is_some() {
                Arc::make_mut(&mut message).error_message = why;
            }
            return (message, failure);
        }
    }

    /// Streams one model call, forwarding deltas and the retries its
    /// options announce into `retries`, and returns its final message with
    /// the failure kind when it failed, and whether any output (text or
    /// thinking) was reported.
    async fn call_model(
        &self,
        call: &ModelCall<'_>,
        retries: &mut RetryRelay,
    ) -> (Arc<AssistantMessage>, Option<ErrorKind>, bool) {
        let mut output = CallOutput::new();
        // A notice an earlier call sent as it ended belongs to that call.
        retries.clear();
        let mut stream = self
            .provider
            .stream(&self.model, call.context, call.options);
        let give_up = async {
            call.options.cancel.cancelled().await;
            tokio::time::sleep(ABORT_GRACE).await;
        };
        tokio::pin!(give_up);
        // Every event ready is handled in place, in one poll: an event is
        // not moved out of the loop and back for each delta. Retry notices come
        // first, then the stream, then the abort's grace, as a biased
        // select would; but the relay's waker is set only while the stream
        // is pending: notices are sent from inside the stream's poll, so a
        // stream that is ready never needs it.
        let (message, failure) = std::future::poll_fn(|cx| {
            loop {
                if let Some(notice) = retries.try_next() {
                    call.sink.emit(call.retrying(notice));
                    continue;
                }
                // Matched where it lands: the event is not moved again.
                match stream.poll_next_unpin(cx) {
                    Poll::Pending => {
                        if let Poll::Ready(notice) = retries.poll_next(cx) {
                            call.sink.emit(call.retrying(notice));
                            continue;
                        }
                        if give_up.as_mut().poll(cx).is_ready() {
                            return Poll::Ready((
                                self.failed_message(StopReason::Aborted, "Request was aborted"),
                                Some(ErrorKind::Aborted),
                            ));
                        }
                        return Poll::Pending;
                    }
                    Poll::Ready(None) => {
                        return Poll::Ready((
                            self.failed_message(
                                StopReason::Error,
                                "the provider's stream ended without a terminal event",
                            ),
                            Some(ErrorKind::Protocol),
                        ));
                    }
                    Poll::Ready(Some(AssistantEvent::Done { message, .. })) => {
                        return Poll::Ready((message, None));
                    }
                    Poll::Ready(Some(AssistantEvent::Error { kind, error, .. })) => {
                        return Poll::Ready((error, Some(kind)));
                    }
                    Poll::Ready(Some(AssistantEvent::TextDelta { delta, .. })) => {
                        output.delta(call, OutputKind::Text, delta);
                    }
                    Poll::Ready(Some(AssistantEvent::ThinkingDelta { delta, .. })) => {
                        output.delta(call, OutputKind::Thinking, delta);
                    }
                    Poll::Ready(Some(AssistantEvent::Start)) => {}
                    // A tool call's first token is output too.
                    Poll::Ready(Some(_)) => output.note_first(),
                }
            }
        })
        .await;
        crate::telemetry::model_call(
            &self.model,
            output.started.elapsed(),
            output.first,
            failure.as_ref(),
        );
        (message, failure, output.streamed)
    }

    fn failed_message(&self, reason: StopReason, error: &str) -> Arc<AssistantMessage> {
        Arc::new(AssistantMessage::failure(
            &self.model,
            reason,
            error,
            now_millis(),
        ))
    }
}

/// One model call of a round: what it sends and where its events go.
#[derive(Clone, Copy)]
struct ModelCall<'a> {
    turn: &'a Arc<str>,
    round: u32,
    context: &'a Context,
    options: &'a StreamOptions,
    sink: &'a dyn EventSink,
}

struct State {
    /// What the next model request sends.
    context: Context,
    /// Every message the turn added, in order (what [`TurnOutcome::messages`]
    /// returns): kept apart from the context, which a compaction replaces.
    added: Vec<Message>,
    usage: Usage,
    rounds: u32,
}

impl State {
    /// Adds a message of the turn to the conversation.
    fn push(&mut self, message: Message) {
        self.context.messages.push(message.clone());
        self.added.push(message);
    }

    /// Reports the turn's end to `sink` and makes its outcome.
    fn finish(
        self,
        turn_id: Arc<str>,
        (finish, error): Ended,
        started: Instant,
        sink: &dyn EventSink,
    ) -> TurnOutcome {
        let messages = self.added;
        let text = messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant(a) => Some(a.text()),
                _ => None,
            })
            .unwrap_or_default();
        let duration = started.elapsed();
        let duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        sink.emit(match &error {
            None => TurnEvent::TurnCompleted {
                turn: turn_id.clone(),
                finish_reason: finish,
                rounds: self.rounds,
                usage: self.usage,
                duration_ms,
            },
            Some(error) => TurnEvent::TurnFailed {
                turn: turn_id.clone(),
                finish_reason: finish,
                error: error.clone(),
                rounds: self.rounds,
                usage: self.usage,
                duration_ms,
            },
        });
        TurnOutcome {
            turn_id,
            text,
            finish_reason: finish,
            error,
            messages,
            usage: self.usage,
            rounds: self.rounds,
            duration,
        }
    }
}

impl ModelCall<'_> {
    /// The event reporting a provider's retry of this call.
    fn retrying(&self, notice: RetryNotice) -> TurnEvent {
        TurnEvent::Retrying {
            turn: self.turn.clone(),
            round: self.round,
            attempt: notice.retry,
            max_attempts: notice.max_retries,
            delay_ms: u64::try_from(notice.delay.as_millis()).unwrap_or(u64::MAX),
            error: notice.error,
        }
    }
}

/// What one model call has output so far, for its events and telemetry.
struct CallOutput {
    started: Instant,
    /// How long after the start the first output (text, thinking or a tool
    /// call's first token) came.
    first: Option<Duration>,
    /// Whether text or thinking was reported.
    streamed: bool,
}

impl CallOutput {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            first: None,
            streamed: false,
        }
    }

    /// Notes the call's first output, if this is it.
    fn note_first(&mut self) {
        self.first.get_or_insert_with(|| self.started.elapsed());
    }

    /// Reports a delta of text or thinking.
    fn delta(&mut self, call: &ModelCall<'_>, kind: OutputKind, delta: Arc<str>) {
        self.note_first();
        self.streamed = true;
        call.sink.emit(TurnEvent::OutputDelta {
            turn: call.turn.clone(),
            round: call.round,
            kind,
            delta,
        });
    }
}

/// How a turn ended: its finish reason, and what went wrong if anything.
type Ended = (FinishReason, Option<String>);

/// A fresh turn id: a UUID v7, formatted in place so that it is allocated
/// once, as the `Arc`.
fn new_turn_id() -> Arc<str> {
    let mut id = uuid::Uuid::encode_buffer();
    Arc::from(&*uuid::Uuid::now_v7().hyphenated().encode_lower(&mut id))
}

/// Awaits `drive` (a turn), cancelling the turn when `timeout` passes first.
///
/// The timeout cancels the turn like the host would, then lets the loop
/// wind down so that every call still gets its result.
async fn within_timeout(
    timeout: Option<Duration>,
    drive: impl Future<Output = Ended>,
    cancel: &CancellationToken,
    timed_out: &AtomicBool,
) -> Ended {
    tokio::pin!(drive);
    match timeout {
        None => drive.await,
        // The turn is polled first: one that ends without waiting never
        // arms the timer.
        Some(after) => tokio::select! {
            biased;
            end = &mut drive => end,
            () = tokio::time::sleep(after) => {
                timed_out.store(true, Ordering::SeqCst);
                cancel.cancel();
                drive.await
            }
        },
    }
}

/// One running turn: the loop it runs on, what it was given and what it
/// has done so far, with a method per phase of a round.
struct Turn<'a> {
    looped: &'a TurnLoop,
    id: &'a Arc<str>,
    cancel: &'a CancellationToken,
    /// Set when the timeout cancelled the turn.
    timed_out: &'a AtomicBool,
    sink: &'a dyn EventSink,
    hooks: Option<Arc<dyn TurnHooks>>,
    compaction: Option<Arc<dyn CompactStep>>,
    /// The stream options of every model call: the loop's, with the turn's
    /// cancellation and retry relay.
    options: StreamOptions,
    /// Where the provider's retry notices wait for the model call's loop.
    retries: RetryRelay,
    tools: ToolRunner<'a>,
    state: State,
    /// The calls of the latest message and their results, in lists reused
    /// every round.
    calls: Vec<ToolCall>,
    results: Vec<Arc<ToolResultMessage>>,
    /// The calls a resumed turn runs before its next model call.
    resume: Option<Resume>,
}

impl<'a> Turn<'a> {
    fn new(
        looped: &'a TurnLoop,
        request: TurnRequest,
        artifacts: Option<&'a Arc<dyn Artifacts>>,
        id: &'a Arc<str>,
        cancel: &'a CancellationToken,
        timed_out: &'a AtomicBool,
        sink: &'a dyn EventSink,
    ) -> Self {
        // A tool round adds two messages or more (the reply, a result per
        // call): room for a few rounds is made at once, rather than grown
        // from nothing round after round.
        let mut messages = request.messages;
        messages.reserve(ROOM_FOR_ROUNDS);
        let resume = request.resume;
        let state = State {
            context: Context {
                system_prompt: request.system_prompt,
                messages,
                tools: looped.model_tools.clone(),
            },
            added: Vec::with_capacity(ROOM_FOR_ROUNDS),
            usage: Usage::default(),
            rounds: resume.as_ref().map_or(0, |r| r.rounds),
        };
        // The provider announces retries on its own task; they reach the
        // sink from the model call's loop, in order with the call's other
        // events. One relay serves every round of the turn.
        let (on_retry, retries) = retry_relay(looped.options.on_retry.clone());
        let options = StreamOptions {
            cancel: cancel.clone(),
            on_retry: Some(on_retry),
            ..looped.options.clone()
        };
        let tools = ToolRunner {
            turn: id,
            registry: &looped.tools,
            approver: &*looped.approver,
            cancel,
            sink,
            artifacts,
            lone_cancel: None,
            requested: Vec::new(),
        };
        Self {
            looped,
            id,
            cancel,
            timed_out,
            sink,
            hooks: request.hooks,
            compaction: request.compaction,
            options,
            retries,
            tools,
            state,
            calls: Vec::new(),
            results: Vec::new(),
            resume,
        }
    }
}

impl Turn<'_> {
    /// Runs rounds until one ends the turn (a resumed turn first runs the
    /// calls its last reply left).
    async fn drive(&mut self) -> Ended {
        if let ControlFlow::Break(end) = self.resume_calls().await {
            return end;
        }
        loop {
            if self.cancel.is_cancelled() {
                return self.cut_off(None);
            }
            if let ControlFlow::Break(end) = self.round().await {
                return end;
            }
        }
    }

    /// Runs the calls a resumed turn's last reply left (their approval
    /// requests, when stored, are waited for rather than made again).
    async fn resume_calls(&mut self) -> ControlFlow<Ended> {
        let Some(resume) = self.resume.take() else {
            return ControlFlow::Continue(());
        };
        if resume.calls.is_empty() {
            return ControlFlow::Continue(());
        }
        self.calls = resume.calls;
        self.tools.requested = resume.requested;
        self.run_tools(resume.rounds).await?;
        self.tools.requested = Vec::new();
        self.within_limits(resume.rounds)
    }

    /// One round: the host's inputs and a compaction check, the model call,
    /// then what its reply calls for. Breaks with the turn's end, or
    /// continues to the next round.
    async fn round(&mut self) -> ControlFlow<Ended> {
        self.state.rounds += 1;
        let round = self.state.rounds;
        self.before_call(round).await?;
        let call = ModelCall {
            turn: self.id,
            round,
            context: &self.state.context,
            options: &self.options,
            sink: self.sink,
        };
        let (message, failure) = self
            .looped
            .call_model_or_stall(call, &mut self.retries)
            .await;
        self.state.usage.add(&message.usage);
        self.sink.emit(TurnEvent::OutputCompleted {
            turn: self.id.clone(),
            round,
            message: message.clone(),
        });
        self.calls.clear();
        self.calls.extend(message.tool_calls().cloned());
        let stop_reason = message.stop_reason;
        let error = message.error_message.clone();
        let overflow = failure.is_some_and(|kind| {
            kind == ErrorKind::ContextOverflow || is_context_overflow(&message, 0)
        });
        if overflow && !self.cancel.is_cancelled() && self.compaction.is_some() {
            return self.recover_overflow(round, message, error).await;
        }
        self.state.push(Message::Assistant(message));
        if let Some(kind) = failure {
            return ControlFlow::Break(self.failed(round, kind, error));
        }
        if self.calls.is_empty() {
            return self.answered(round, stop_reason).await;
        }
        self.run_tools(round).await?;
        self.within_limits(round)
    }

    /// Before every model call: the hooks' messages (from the second round
    /// on), then the compaction step's check. Breaks when the turn was
    /// cancelled meanwhile.
    async fn before_call(&mut self, round: u32) -> ControlFlow<Ended> {
        if round > 1
            && let Some(hooks) = &self.hooks
        {
            let inputs = hooks.before_model_call(self.id, round).await;
            self.add_inputs(inputs, round);
            if self.cancel.is_cancelled() {
                return ControlFlow::Break(self.cut_off(None));
            }
        }
        if self.compaction.is_some() {
            self.compact(round, CompactionReason::Threshold).await;
            if self.cancel.is_cancelled() {
                return ControlFlow::Break(self.cut_off(None));
            }
        }
        ControlFlow::Continue(())
    }

    /// Asks the compaction step whether to compact the conversation, and
    /// takes the compacted one when it did. Returns whether it did.
    async fn compact(&mut self, round: u32, reason: CompactionReason) -> bool {
        let Some(step) = &self.compaction else {
            return false;
        };
        let check = ContextCheck {
            turn: self.id,
            round,
            reason,
            context: &self.state.context,
            sink: self.sink,
            cancel: self.cancel,
        };
        match step.check(check).await {
            Some(messages) => {
                self.state.context.messages = messages;
                true
            }
            None => false,
        }
    }

    /// The model refused the request as larger than its window: the refused
    /// reply is the turn's (reported, stored as a failed message) but not
    /// the conversation's, and the request is compacted and sent again
    /// without it. Ends the turn when the step does not compact.
    async fn recover_overflow(
        &mut self,
        round: u32,
        message: Arc<AssistantMessage>,
        error: Option<String>,
    ) -> ControlFlow<Ended> {
        self.state.added.push(Message::Assistant(message));
        let unrun = self.tools.unrun(round, &self.calls);
        self.state
            .added
            .extend(unrun.into_iter().map(Message::from));
        if self.compact(round, CompactionReason::Overflow).await {
            return ControlFlow::Continue(());
        }
        let error = error.unwrap_or_else(|| "the model call failed".into());
        if self.cancel.is_cancelled() {
            return ControlFlow::Break(self.cut_off(Some(error)));
        }
        ControlFlow::Break((FinishReason::Error, Some(error)))
    }

    /// The end of a round whose model call failed: its calls never run,
    /// but still get a result.
    fn failed(&mut self, round: u32, kind: ErrorKind, error: Option<String>) -> Ended {
        for result in self.tools.unrun(round, &self.calls) {
            self.state.push(Message::from(result));
        }
        let error = error.unwrap_or_else(|| "the model call failed".into());
        if kind == ErrorKind::Aborted || self.cancel.is_cancelled() {
            return self.cut_off(Some(error));
        }
        (FinishReason::Error, Some(error))
    }

    /// The model answered without calling tools: the turn ends, unless the
    /// hooks add messages that make it go on (while the limits leave room
    /// for another round).
    async fn answered(&mut self, round: u32, stop_reason: StopReason) -> ControlFlow<Ended> {
        if stop_reason == StopReason::Length {
            return ControlFlow::Break((FinishReason::Length, None));
        }
        if round < self.looped.limits.max_rounds
            && !self.looped.over_budget(&self.state.usage)
            && let Some(hooks) = &self.hooks
        {
            let inputs = tokio::select! {
                inputs = hooks.after_answer(self.id, round) => inputs,
                () = self.cancel.cancelled() => return ControlFlow::Break(self.cut_off(None)),
            };
            if !inputs.is_empty() {
                self.add_inputs(inputs, round + 1);
                return ControlFlow::Continue(());
            }
        }
        ControlFlow::Break((FinishReason::Stop, None))
    }

    /// Runs the latest message's calls and adds their results.
    async fn run_tools(&mut self, round: u32) -> ControlFlow<Ended> {
        let end = self.tools.run(round, &self.calls, &mut self.results).await;
        for result in self.results.drain(..) {
            self.state.push(Message::from(result));
        }
        match end {
            CallsEnd::Done => ControlFlow::Continue(()),
            CallsEnd::Cancelled => ControlFlow::Break(self.cut_off(None)),
            CallsEnd::Fatal(error) => ControlFlow::Break((FinishReason::Error, Some(error))),
        }
    }

    /// Ends the turn after a tool round that used up the round cap or the
    /// budget.
    fn within_limits(&self, round: u32) -> ControlFlow<Ended> {
        if round >= self.looped.limits.max_rounds {
            return ControlFlow::Break((FinishReason::MaxRounds, None));
        }
        if self.looped.over_budget(&self.state.usage) {
            return ControlFlow::Break((FinishReason::Budget, None));
        }
        ControlFlow::Continue(())
    }

    /// Adds the hooks' messages to the conversation.
    fn add_inputs(&mut self, inputs: Vec<TurnInput>, round: u32) {
        for input in inputs {
            let message = Arc::new(input.message);
            self.state.push(Message::User(message.clone()));
            self.sink.emit(TurnEvent::InputAdded {
                turn: self.id.clone(),
                round,
                author: input.author,
                id: input.id,
                chat: input.chat,
                message,
            });
        }
    }

    /// The end of a turn that was cancelled: `timeout` when the timer did it.
    fn cut_off(&self, error: Option<String>) -> Ended {
        if self.timed_out.load(Ordering::SeqCst) {
            (
                FinishReason::Timeout,
                Some("the turn timed out".to_string()),
            )
        } else {
            (
                FinishReason::Aborted,
                Some(error.unwrap_or_else(|| "the turn was cancelled".to_string())),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use roundtable_providers::{OPENAI_COMPLETIONS, ScriptedProvider};

    use super::*;

    fn workspace_tools(root: &std::path::Path, how_many: usize) -> Arc<ToolRegistry> {
        let mut tools = ToolRegistry::new();
        let toolset = roundtable_tools::workspace::Workspace::open(root)
            .unwrap()
            .toolset();
        tools
            .register_all(toolset.into_iter().take(how_many).collect::<Vec<_>>())
            .unwrap();
        Arc::new(tools)
    }

    /// A loop over the scripted provider with the first `how_many`
    /// workspace tools on `root`.
    fn loop_with_tools(root: &std::path::Path, how_many: usize) -> TurnLoop {
        TurnLoop::new(
            Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new())),
            Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""),
        )
        .with_tools(workspace_tools(root, how_many))
    }

    #[test]
    fn the_tools_tokens_are_counted_once_per_tool_list_and_shared_by_clones() {
        let root = tempfile::tempdir().unwrap();
        let turns = loop_with_tools(root.path(), 3);
        let own = turns.model_tools().clone();
        let counted = roundtable_dispatch::overhead_tokens(None, &own);
        assert!(counted > 0);

        let clone = turns.clone();
        assert_eq!(clone.tools_tokens(&own), counted);
        // The clone's count is the loop's.
        assert_eq!(turns.model_tools_tokens.get(), Some(&counted));

        // Another list is counted as it is, and leaves the kept count alone.
        let fewer = loop_with_tools(root.path(), 1).model_tools().clone();
        let fewer_count = roundtable_dispatch::overhead_tokens(None, &fewer);
        assert!(fewer_count < counted);
        assert_eq!(turns.tools_tokens(&fewer), fewer_count);
        assert_eq!(turns.model_tools_tokens.get(), Some(&counted));

        // New tools start a new count.
        let changed = turns.with_tools(workspace_tools(root.path(), 1));
        assert_eq!(changed.model_tools_tokens.get(), None);
        assert_eq!(
            changed.tools_tokens(&changed.model_tools().clone()),
            fewer_count
        );
    }

    #[test]
    fn the_fixed_count_follows_the_prompt_and_the_tools() {
        let root = tempfile::tempdir().unwrap();
        let turns = loop_with_tools(root.path(), 1);
        let tools = turns.model_tools().clone();
        let context = |prompt: &str, tools: &Arc<[ModelTool]>| Context {
            system_prompt: Some(prompt.into()),
            messages: Vec::new(),
            tools: tools.clone(),
        };
        let fresh = |c: &Context| {
            roundtable_dispatch::overhead_tokens(c.system_prompt.as_deref(), &c.tools)
        };

        let first = context("be brief", &tools);
        assert_eq!(turns.fixed_tokens(&first), fresh(&first));
        // Counted again: the same tools, the same prompt.
        assert_eq!(turns.fixed_tokens(&first), fresh(&first));
        // Another prompt over the same tools is counted anew.
        let longer = context(&"be brief, ".repeat(100), &tools);
        assert_eq!(turns.fixed_tokens(&longer), fresh(&longer));
        assert!(fresh(&longer) > fresh(&first));
        // Other tools (a new list, even after the old one is gone) too.
        drop(first);
        drop(longer);
        drop(tools);
        let more = loop_with_tools(root.path(), 2).model_tools().clone();
        let again = context("be brief", &more);
        assert_eq!(turns.fixed_tokens(&again), fresh(&again));
    }
}
