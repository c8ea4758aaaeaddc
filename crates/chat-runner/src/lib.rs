//! Runners for roundtable: the provider-agnostic turn loop and the
//! one-on-one [`ChatRunner`].
//!
//! - The turn loop: [`TurnLoop`] runs one turn (stream the model, run its
//!   tool calls with approvals, feed the results back, repeat) under
//!   [`Limits`] (round cap, timeout) and a cancellation token, reporting
//!   [`TurnEvent`]s to an [`EventSink`] and returning a [`TurnOutcome`].
//! - Approvals: the host's [`Approver`] decides gated calls.
//! - The chat surface: [`ChatRunner`] maps session keys (chat threads) to
//!   agent sessions, serialises turns per key, replays the last
//!   prompt/answer pairs ([`HistoryWindow`]) and writes one thread per
//!   session; its system prompt is [`chat_system_prompt`].
//! - The multi-party surface: [`ThreadRunner`] follows shared threads where
//!   many humans and bots talk; for every entry it runs the dispatcher and
//!   the ambient gate ([`ModelGate`] or the topic matcher), then a turn for
//!   each woken bot over its own projection of the thread, written back into
//!   the thread as it happens (`turn.started`, `chat.chunk`, `pi.assistant`,
//!   `pi.tool_result`, `turn.ended` / `turn.failed`). Turns are claimed with
//!   optimistic concurrency, serialised per (bot, thread) with coalescing,
//!   capped globally, overridable per thread ([`TriggerOverride`]) and
//!   resumed after a restart.
//!
//! # What a chat session stores
//!
//! One thread per agent session (`chat-<uuid>`; with the JSONL store a
//! `chat-<uuid>.jsonl` file). Per turn:
//!
//! 1. before the model runs: a `chat` entry with the prompt (authored by the
//!    user) and `turn.started` (authored by the agent);
//! 2. while it runs, authored by the agent: each of the turn's messages as a
//!    `pi.assistant` / `pi.tool_result` entry (with the turn id) as soon as
//!    it is complete;
//! 3. after it, in one append: `turn.ended` (reason: the finish reason) or
//!    `turn.failed` (reason: the error), then `signal.turn_result` carrying a
//!    [`TurnResultRecord`] (finish reason, final text, rounds, tokens and
//!    cost, duration, model).
//!
//! A turn the process stopped in the middle of keeps the messages it had
//! completed; the session's next turn closes it as `turn.failed` with reason
//! [`INTERRUPTED`] before its prompt.
//!
//! The index thread (`chat-sessions`) maps keys to sessions with
//! `signal.chat_session` and `signal.chat_reset` entries (`{key, session}`).
//! History is rebuilt from the session thread: each prompt paired with its
//! turn's final text, for turns that ended with `stop`, `length` or
//! `max-rounds`.
//!
//! The crate depends on no particular provider or store: it takes an
//! `Arc<dyn Provider>` and an `Arc<dyn ThreadStore>`.

mod approval;
mod error;
mod event;
mod exec;
mod history;
mod limits;
mod prompt;
mod record;
mod runner;
mod thread;
mod turn;
mod writer;

pub use approval::{ApprovalDecision, ApprovalRequest, ApproveAll, Approver, DenyAll};
pub use error::ChatError;
pub use event::{EventSink, FinishReason, FnSink, NullSink, OutputKind, TurnEvent};
pub use history::{
    ChatPair, DEFAULT_HISTORY_PAIRS, HistoryWindow, estimate_tokens, pair_messages,
    pairs_from_entries,
};
pub use limits::{DEFAULT_MAX_ROUNDS, DEFAULT_TURN_TIMEOUT, Limits};
pub use prompt::{CHAT_SYSTEM_SUFFIX, chat_system_prompt};
pub use record::{RESET_SIGNAL, SESSION_SIGNAL, TURN_RESULT_SIGNAL, TurnResultRecord};
pub use runner::{
    CHAT_ROLE, ChatRunner, ChatRunnerBuilder, ChatTurn, DEFAULT_INDEX_THREAD, RunningTurn,
    TurnOptions,
};
pub use thread::{
    DEFAULT_CHUNK_INTERVAL, INTERRUPTED, ModelGate, RunnerNotice, ThreadRunner,
    ThreadRunnerBuilder, TriggerOverride,
};
pub use turn::{TurnLoop, TurnOutcome, TurnRequest};
