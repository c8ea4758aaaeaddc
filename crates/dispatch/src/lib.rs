//! Dispatch for roundtable threads: who wakes, and what each bot sees.
//!
//! A thread is one shared, author-stamped stream of entries. This crate turns
//! it into decisions and views, and does no I/O:
//!
//! - [`dispatch`]: the pure dispatcher, `(event, recent entries, roster,
//!   policy, now) -> wakes`. Mention and `always` routing, ambient candidates,
//!   the loop guard, the hop limit, the fanout cap and fair tie-breaking;
//!   [`halt`] says when the loop guard or the hop limit stopped every wake,
//!   and [`mentioned_handles`] reads the `@handles` of a text as it does.
//! - [`BotGate`]: the async second filter for ambient candidates, implemented
//!   by the host; [`TopicGate`] is a built-in one that matches topics without
//!   a model; [`gate_wakes`](gate::gate_wakes) applies a gate to a wake list.
//! - [`build_messages`] and its incremental form [`Projection`]: one bot's
//!   clean one-on-one model conversation, projected from the shared thread.
//! - [`system_prompt`]: the bot's persona, the thread context and the roster.
//! - [`Roster`], [`Participant`], [`BotProfile`], [`Trigger`], [`Topic`]: who
//!   is in the thread; [`Policy`]: the dispatcher's limits.
//! - Token estimates for a request ([`estimate_context`], [`text_tokens`],
//!   [`overhead_tokens`]), which hosts use to size a context.
//! - [`compaction`], the pure side of compaction: the
//!   [`CompactionBudget`](compaction::CompactionBudget), a bot's view in
//!   projection order ([`project_view`](compaction::project_view)), its units
//!   ([`split_view`](compaction::split_view)), where a compaction cuts
//!   ([`plan_cut`](compaction::plan_cut)) and what the summarizer reads
//!   ([`transcript`](compaction::transcript),
//!   [`summary_prompt`](compaction::summary_prompt)).
//!
//! # Which entries are events
//!
//! Only a `chat` entry and a bot's *final* assistant text (a `pi.assistant`
//! message with text, no tool calls, and no failure) can wake anyone. Tool
//! results, chunks, signals, compaction and turn lifecycle entries never do.
//! Authors who are bots in the roster (and authors of `pi.assistant` entries)
//! are bots; everyone else is a human.
//!
//! # Projection rules
//!
//! [`build_messages`]`(self, entries, roster)` shows the thread from bot
//! `self`'s side, as a conversation every provider accepts:
//!
//! 1. The bot's own `pi.assistant` entries pass through unchanged, in order;
//!    failed ones (stop reason `error` or `aborted`) are skipped as pi-ai skips
//!    them, since their partial tool calls never ran.
//! 2. Each tool call is followed right away by its result, in call order: the
//!    bot's own `pi.tool_result` entry for it, wherever that entry sits in the
//!    thread (other people may have spoken in between; their turns come after
//!    the results). A call with no result gets an error result
//!    ([`MISSING_RESULT_TEXT`](projection::MISSING_RESULT_TEXT)) instead, so no call dangles. A result answers
//!    the latest earlier call with its id; a result with no open call (unknown
//!    id, already answered, or its call compacted away) is dropped.
//! 3. Another participant's `chat` becomes a user turn labelled with the
//!    author's display name (`[Alice]: …`; text parts follow on new lines,
//!    images follow as image blocks). Another bot's final assistant text becomes
//!    a labelled user turn too; its thinking, intermediate text and tool
//!    traffic are never shown.
//! 4. The bot's own plain `chat` (written on its behalf, not by its model) is
//!    its own words: an assistant message with that text, from
//!    [`OWN_CHAT_SOURCE`](projection::OWN_CHAT_SOURCE).
//! 5. Other authors' tool results, `chat.chunk`, `signal.*`, lifecycle
//!    entries, unknown entry types and other authors' compaction entries are
//!    skipped.
//! 6. The bot's own latest `compaction` entry replaces everything up to its
//!    `upto` (never past the compaction itself) with a user turn holding its
//!    summary.
//! 7. Consecutive user turns merge into one user message, one text block per
//!    speaker turn, so no two user messages are adjacent.
//!
//! The output depends only on the entries: recomputing gives the same
//! messages, which is how a bot resumes after a crash.
//!
//! # Example
//!
//! ```
//! use roundtable_dispatch::*;
//! use roundtable_thread_stream::{EntryBody, NewEntry, ThreadId};
//!
//! let roster = Roster::new([
//!     Participant::human("u1", "Alice"),
//!     Participant::bot("b1", "Archive Bot", BotProfile::new(Trigger::Mention, "You keep the archive.")),
//! ])?;
//! let thread = ThreadId::new("support-42")?;
//! let hello = NewEntry::new("u1", EntryBody::chat("@archive-bot hello"))
//!     .at(1_000)
//!     .into_entry(thread, 1);
//!
//! for wake in dispatch(&hello, &[], &roster, &Policy::default(), 1_000) {
//!     let system = system_prompt(&wake.bot, &roster, &ThreadContext::new("support-42"))?;
//!     let messages = build_messages(&wake.bot, std::slice::from_ref(&hello), &roster);
//!     assert!(system.contains("Alice"));
//!     assert_eq!(messages.len(), 1);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod authors;
pub mod compaction;
mod dispatcher;
mod error;
pub mod event;
pub mod gate;
mod handle;
mod policy;
pub mod projection;
mod prompt;
mod roster;
mod topic;

pub use compaction::{
    ContextEstimate, estimate_context, overhead_tokens, text_tokens, text_tokens_bound,
};
pub use dispatcher::{Halt, Wake, WakeReason, dispatch, halt};
pub use error::DispatchError;
pub use gate::{BotGate, TopicGate};
pub use handle::mentioned_handles;
pub use policy::Policy;
pub use projection::{Projection, build_messages};
pub use prompt::{ThreadContext, system_prompt};
pub use roster::{BotProfile, Participant, Role, Roster, Trigger};
pub use topic::Topic;
