//! Compaction: when a bot's conversation nears its model's window, a
//! summary of its older part, written as a `compaction` entry of the bot,
//! stands in for it. The pure side (estimates, units, cut, the
//! summarizer's prompt) is `roundtable_dispatch`'s; this module reads the
//! view, calls the summarizer, writes the entry and hands the turn loop
//! its new conversation.
//!
//! - [`CompactionConfig`]: on or off, the budget, the summary model.
//! - [`Compactor`]: one per runner; [`Compactor::turn_step`] gives a turn
//!   its step (the loop's [`CompactStep`](crate::CompactStep)),
//!   [`Compactor::compact`] compacts on a host's demand;
//!   [`ConversationCount`] keeps a conversation's token count from request
//!   to request and turn to turn.
//! - [`CompactionTarget`] and [`ViewSource`]: whose view, read how
//!   ([`StoreView`] for a thread projected in store order).
//!
//! Inside: `compactor` (locks and the one procedure), `step` (the per-turn
//! triggers and loop breakers), `summarizer` (the calls, folding a long
//! transcript in pieces).

mod compactor;
mod config;
mod error;
mod step;
mod summarizer;
mod view_source;

pub use compactor::{CompactionReport, CompactionTarget, Compactor};
pub use config::{
    CompactionConfig, DEFAULT_HUMANS_WORDS_CHARS, DEFAULT_MAX_PER_TURN, SummaryModel,
};
pub use error::CompactionError;
pub use step::ConversationCount;
pub use view_source::{StoreView, ViewSource};
