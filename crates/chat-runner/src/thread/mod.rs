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
//! - [`RunnerNotice`]: what the runner tells its host (turns started and
//!   finished, wakes skipped, errors).
//!
//! [`TurnLoop`]: crate::TurnLoop

mod claim;
mod follow;
mod gate;
mod ledger;
mod notice;
mod overrides;
mod runner;
mod slot;

pub use gate::ModelGate;
pub use ledger::INTERRUPTED;
pub use notice::RunnerNotice;
pub use overrides::TriggerOverride;
pub use runner::{DEFAULT_CHUNK_INTERVAL, ThreadRunner, ThreadRunnerBuilder};
