//! What the runner tells its host while it works.

use std::sync::Arc;

use roundtable_dispatch::Halt;
use roundtable_thread_stream::ThreadId;
use roundtable_tools::ToolsChange;

use crate::event::FinishReason;

/// One thing the [`ThreadRunner`](crate::ThreadRunner) did, broadcast to
/// [`notices`](crate::ThreadRunner::notices) subscribers (for logs and
/// dashboards; what was said is in the thread itself).
#[derive(Debug, Clone, PartialEq)]
pub enum RunnerNotice {
    /// A bot claimed a wake and began a turn.
    TurnStarted {
        /// The thread.
        thread: ThreadId,
        /// The bot.
        bot: Arc<str>,
        /// The turn's id.
        turn: Arc<str>,
        /// The seq of the event it answers (the latest one, when several
        /// wakes were coalesced).
        trigger: u64,
    },
    /// A bot's turn ended (its `turn.ended` or `turn.failed` is written).
    TurnFinished {
        /// The thread.
        thread: ThreadId,
        /// The bot.
        bot: Arc<str>,
        /// The turn's id.
        turn: Arc<str>,
        /// Why it ended.
        finish_reason: FinishReason,
    },
    /// A wake was not answered because a turn already answered it (this
    /// runner's or another runner's over the same store).
    AlreadyAnswered {
        /// The thread.
        thread: ThreadId,
        /// The bot.
        bot: Arc<str>,
        /// The seq of the event.
        trigger: u64,
    },
    /// An open turn found when following a thread was closed as
    /// [`INTERRUPTED`](roundtable_thread_stream::INTERRUPTED).
    Interrupted {
        /// The thread.
        thread: ThreadId,
        /// The bot.
        bot: Arc<str>,
        /// The turn's id.
        turn: Arc<str>,
    },
    /// A bot's tools changed since its previous turn (a tool source, such
    /// as an MCP server, listed new ones); the turn starting on `thread`
    /// is the first with the new list. Sent once per change.
    ToolsChanged {
        /// The thread of the turn that first runs with them.
        thread: ThreadId,
        /// The bot.
        bot: Arc<str>,
        /// The names added, removed and changed.
        change: ToolsChange,
    },
    /// The loop guard or the hop limit stopped every wake of an event (see
    /// [`halt`](roundtable_dispatch::halt)): a host may show why the bots
    /// went quiet.
    Halted {
        /// The thread.
        thread: ThreadId,
        /// The seq of the event nobody answers.
        trigger: u64,
        /// What stopped it.
        halt: Halt,
    },
    /// Something failed (mostly the store); the runner goes on.
    Error {
        /// The thread.
        thread: ThreadId,
        /// The bot, when the failure was in one of its turns.
        bot: Option<Arc<str>>,
        /// What went wrong.
        message: String,
    },
}
