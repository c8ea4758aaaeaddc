//! The one-on-one chat surface: [`ChatRunner`] maps session keys (chat
//! threads of a host's front end) to agent sessions, serialises turns per
//! key, replays the last prompt/answer pairs ([`HistoryWindow`]) and writes
//! one thread per session.
//!
//! # What a chat session stores
//!
//! One thread per agent session (`chat-<uuid>`; with the JSONL store a
//! `chat-<uuid>.jsonl` file). Per turn:
//!
//! 1. before the model runs, in one append: a `chat` entry with the prompt
//!    (authored by the user) and `turn.started` (authored by the agent);
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
//! [`INTERRUPTED`](roundtable_thread_stream::INTERRUPTED) before its prompt.
//!
//! The index thread (`chat-sessions`) maps keys to sessions with
//! `signal.chat_session` and `signal.chat_reset` entries (`{key, session}`).
//! History is rebuilt from the session thread: each prompt paired with its
//! turn's final text, for turns that ended with `stop`, `length` or
//! `max-rounds`.
//!
//! With compaction on ([`ChatRunnerBuilder::compaction`]) the history is
//! the agent's projection of the whole session thread instead (tool
//! traffic included, the user's prompts labelled with their author), from
//! its latest `compaction` entry on; when a request nears the model's
//! window, the older part is summarised into a new `compaction` entry,
//! written in the turn between its messages.

mod chat_runner;
mod history;
mod prompt;
mod roster;
mod session_index;
mod turn_result;

pub use chat_runner::{
    CHAT_ROLE, ChatRunner, ChatRunnerBuilder, ChatTurn, DEFAULT_INDEX_THREAD, RunningTurn,
    TurnOptions,
};
pub use history::{
    ChatPair, DEFAULT_HISTORY_PAIRS, HistoryWindow, pair_messages, pairs_from_entries,
};
pub use prompt::{DEFAULT_CHAT_INSTRUCTIONS, SCREENING_FLAGS_INSTRUCTIONS, chat_system_prompt};
pub use session_index::{RESET_SIGNAL, SESSION_SIGNAL};
pub use turn_result::{TURN_RESULT_SIGNAL, TurnResultRecord};
