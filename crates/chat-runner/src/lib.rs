//! Runners for roundtable: the provider-agnostic turn loop and the
//! one-on-one [`ChatRunner`].
//!
//! - The turn loop: [`TurnLoop`] runs one turn (stream the model, run its
//!   tool calls with approvals, feed the results back, repeat) under
//!   [`Limits`] (round cap, timeout, stall retries, [`limits::Budget`]) and a
//!   cancellation token, reporting
//!   [`TurnEvent`]s to an [`EventSink`] and returning a [`TurnOutcome`].
//! - Approvals: the host's [`Approver`] decides gated calls.
//! - Tools that change: both runners take tool sources (an `McpToolset`)
//!   beside their fixed tools and ask them for the tools of each turn as it
//!   starts (`live_loop`); a turn keeps its tools, and the first turn after
//!   a change reports it ([`TurnEvent::ToolsChanged`],
//!   [`RunnerNotice::ToolsChanged`]).
//! - The chat surface: [`ChatRunner`] maps session keys (chat threads) to
//!   agent sessions, serialises turns per key, replays the last
//!   prompt/answer pairs ([`chat::HistoryWindow`]) and writes one thread per
//!   session; its system prompt is [`chat::chat_system_prompt`].
//! - The multi-party surface: [`ThreadRunner`] follows shared threads where
//!   many humans and bots talk; for every entry it runs the dispatcher and
//!   the ambient gate ([`ModelGate`] or the topic matcher), then a turn for
//!   each woken bot over its own projection of the thread, written back into
//!   the thread as it happens (`turn.started`, `chat.chunk`, `pi.assistant`,
//!   `pi.tool_result`, `turn.ended` / `turn.failed`). Turns are claimed with
//!   optimistic concurrency, serialised per (bot, thread) with coalescing,
//!   capped globally, overridable per thread ([`TriggerOverride`]) and
//!   resumed after a restart.
//! - The turn lifecycle on a thread ([`lifecycle`]): opening, writing and
//!   closing a turn, reading back which turns are open, closing an
//!   interrupted one. Every runner goes through it.
//! - Compaction: a [`compaction::Compactor`] gives each turn a [`CompactStep`] the loop
//!   asks before every model request; when the request nears the model's
//!   window (or the model refused it as too large), the older part of the
//!   bot's view is summarised into a `compaction` entry that stands in for
//!   it, never parting a tool call from its result. Both runners take a
//!   [`CompactionConfig`](compaction::CompactionConfig); a session engine wires the same step into its
//!   own turns ([`compaction::CompactionTarget`], [`compaction::ViewSource`]).
//!
//! The crate depends on no particular provider or store: it takes an
//! `Arc<dyn Provider>` and an `Arc<dyn ThreadStore>`.

mod approval;
pub mod chat;
mod compact_step;
pub mod compaction;
mod error;
mod event;
mod exec;
pub mod lifecycle;
pub mod limits;
mod live_loop;
mod retry_relay;
mod sync;
mod telemetry;
mod thread;
mod turn;

pub use approval::{ApprovalDecision, ApprovalRequest, ApproveAll, Approver, DenyAll};
pub use chat::{ChatRunner, TurnOptions};
pub use compact_step::{CompactStep, ContextCheck};
pub use error::ChatError;
pub use event::{
    CompactionReason, EventSink, FinishReason, FnSink, NullSink, OutputKind, TurnEvent,
};
pub use limits::Limits;
pub use thread::{
    DEFAULT_CHUNK_INTERVAL, EntryObserver, ModelGate, RunnerNotice, ThreadRunner,
    ThreadRunnerBuilder, TriggerOverride,
};
pub use turn::{ROOM_FOR_ROUNDS, Resume, TurnHooks, TurnInput, TurnLoop, TurnOutcome, TurnRequest};
