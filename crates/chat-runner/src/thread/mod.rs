//! The multi-party thread runner: many humans and bots in one shared
//! thread, every bot answering from its own clean projection.
//!
//! - [`ThreadRunner`] follows threads of a store, runs the dispatcher and the
//!   gate for every appended entry, and runs a turn for each woken bot.
//! - [`ThreadRunnerBuilder`] configures it: the roster, one [`TurnLoop`]
//!   (provider, model, tools, limits) per bot it runs, the dispatch policy,
//!   the gate, the global concurrency limit.
//! - [`TriggerOverride`]: a per-(bot, thread) trigger mode, mute or hourly
//!   turn cap.
//! - [`ModelGate`]: an ambient gate that asks the bot's gating prompt a yes/no
//!   question through a model.
//! - [`EntryObserver`]: a host's reader of each entry before it is
//!   dispatched (a thread that carries its own roster).
//! - [`RunnerNotice`]: what the runner tells its host (turns started and
//!   finished, wakes skipped, errors).
//!
//! Inside, `core` holds what every part shares; `follow` reads a thread and
//! dispatches its entries; `worker` answers one bot's wakes on one thread
//! (`bot_slot` queues them, `bot_view` keeps the bot's projection and claims
//! its turns, `compaction_view` reads that view for a compaction); `lease`
//! holds a bot's turns on a thread when runners share leases.
//!
//! [`TurnLoop`]: crate::TurnLoop

mod bot_slot;
mod bot_view;
mod compaction_view;
mod core;
mod follow;
mod gate;
mod lease;
mod notice;
mod observer;
mod overrides;
mod thread_runner;
mod worker;

pub use gate::ModelGate;
pub use notice::RunnerNotice;
pub use observer::EntryObserver;
pub use overrides::TriggerOverride;
pub use thread_runner::{DEFAULT_CHUNK_INTERVAL, ThreadRunner, ThreadRunnerBuilder};
