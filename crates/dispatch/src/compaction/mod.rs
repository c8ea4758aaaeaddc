//! The pure side of compaction: when a bot's conversation is too large for
//! its model, which part of the bot's view a summary stands in for, and
//! what the summarizer is asked. The runners do the I/O (reading the view,
//! calling the summarizer, writing the `compaction` entry).
//!
//! - [`estimate`](estimate_context): how large a request is, from the
//!   provider's count of the last request when it can be trusted, else
//!   about four characters a token ([`text_tokens`], [`message_tokens`],
//!   [`overhead_tokens`]); [`RunningCount`] counts each message of a
//!   growing conversation once.
//! - [`CompactionBudget`]: the threshold (window less a reserve) and how
//!   much of the newest conversation stays in full.
//! - [`ViewNumbering`] and [`project_view`]: a bot's view in the order its
//!   projection takes the entries, which a compaction's `upto` refers to.
//! - [`split_view`]: the view split at the bot's latest compaction, the
//!   rest cut into [`ViewUnit`]s that are kept or summarised whole.
//! - [`plan_cut`]: where a new compaction cuts ([`CompactionCut`]).
//! - [`transcript`], [`humans_words`], [`files_touched`],
//!   [`summary_prompt`], [`chunk_transcript`], [`with_humans_words`]: the
//!   summarizer's request.
//!
//! # The one boundary per bot
//!
//! A bot's view is its system prompt, the summary of its latest compaction
//! (a user message saying it is a summary of earlier conversation), and
//! its projection of the entries after the compaction's `upto`. A new
//! compaction summarises the previous summary and exactly the units
//! between the previous cut and the new one; everything after the new cut
//! stays in full. So nothing kept is ever dropped, and a tool call never
//! parts from its result (invariant 10).

mod budget;
mod cut;
mod estimate;
mod summary;
mod transcript;
mod units;
mod view;

pub use budget::{CompactionBudget, DEFAULT_KEEP_RECENT_TOKENS, DEFAULT_RESERVE_TOKENS};
pub use cut::{CompactionCut, plan_cut};
pub use estimate::{
    CHARS_PER_TOKEN, ContextEstimate, IMAGE_TOKENS, RunningCount, estimate_context, message_tokens,
    messages_tokens, overhead_tokens, text_tokens, text_tokens_bound,
};
pub use summary::{
    HUMANS_WORDS_HEADING, SUMMARY_SYSTEM_PROMPT, SummaryInput, chunk_transcript,
    split_humans_words, summary_prompt, with_humans_words,
};
pub use transcript::{TRANSCRIPT_CUT_CHARS, files_touched, humans_words, transcript};
pub use units::{ViewSplit, ViewUnit, split_view};
pub use view::{ViewNumbering, project_view};
