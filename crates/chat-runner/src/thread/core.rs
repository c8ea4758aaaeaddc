//! What every part of a [`ThreadRunner`](super::ThreadRunner) shares: its
//! settings, the threads it follows and the work in flight. The follower,
//! the workers and the public surface all import this module; it imports
//! none of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_dispatch::{BotGate, Policy, Roster, ThreadContext};
use roundtable_thread_stream::{Entry, ThreadId, ThreadStore};
use tokio::sync::{Semaphore, broadcast, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::bot_slot::BotSlot;
use super::notice::RunnerNotice;
use super::overrides::{TriggerOverride, effective_roster};
use crate::compaction::Compactor;
use crate::lifecycle::TurnLeases;
use crate::live_loop::LiveTurnLoop;
use crate::sync::lock;

/// One bot this runner runs.
pub(crate) struct BotRun {
    /// Its turn loop; the tools move between turns when the host gave the
    /// bot tool sources.
    pub(crate) turns: LiveTurnLoop,
    /// Text appended to the bot's system prompt.
    pub(crate) system_suffix: Option<Arc<str>>,
    /// The skills section of the system prompt, when the bot has skills.
    pub(crate) skills: Option<Arc<str>>,
}

/// The runner's settings, fixed when it is built.
pub(crate) struct RunnerSettings {
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) roster: Roster,
    pub(crate) bots: HashMap<Arc<str>, BotRun>,
    pub(crate) policy: Policy,
    pub(crate) gate: Arc<dyn BotGate>,
    pub(crate) chunk_interval: Duration,
    /// How many of a thread's latest entries the dispatcher sees.
    pub(crate) recent_entries: usize,
    /// How old an open turn must be to count as interrupted on resume
    /// (without leases).
    pub(crate) interrupt_open_turns_after: Duration,
    /// The leases that hold running turns, when runners share them.
    pub(crate) leases: Option<TurnLeases>,
    /// Compacts the bots' conversations, when enabled.
    pub(crate) compaction: Option<Compactor>,
    /// Shows each entry to the host's observer before it is dispatched,
    /// when the host gave one (bound to the runner where it is built).
    pub(crate) observer: Option<Observe>,
}

/// The host's observer, bound to the runner whose core it is given.
pub(crate) type Observe = Box<dyn Fn(&Arc<RunnerCore>, &Entry) + Send + Sync>;

/// The state shared by the runner's clones, followers and workers.
pub(crate) struct RunnerCore {
    pub(crate) settings: RunnerSettings,
    /// The global cap on turns running at once.
    pub(crate) permits: Arc<Semaphore>,
    /// Cancelled on shutdown.
    pub(crate) cancel: CancellationToken,
    threads: Mutex<HashMap<ThreadId, Arc<ThreadState>>>,
    activity: Activity,
    notices: broadcast::Sender<RunnerNotice>,
    followers: Mutex<Vec<JoinHandle<()>>>,
}

impl RunnerCore {
    pub(crate) fn new(
        settings: RunnerSettings,
        max_concurrent_turns: usize,
        cancel: CancellationToken,
    ) -> Self {
        let (notices, _) = broadcast::channel(1024);
        let (tick, _) = watch::channel(0);
        Self {
            settings,
            permits: Arc::new(Semaphore::new(max_concurrent_turns)),
            cancel,
            threads: Mutex::new(HashMap::new()),
            activity: Activity {
                busy: AtomicUsize::new(0),
                tick,
            },
            notices,
            followers: Mutex::new(Vec::new()),
        }
    }

    /// Tells the host (no subscriber is fine).
    pub(crate) fn notify(&self, notice: RunnerNotice) {
        let _ = self.notices.send(notice);
    }

    /// A new receiver of notices.
    pub(crate) fn notices(&self) -> broadcast::Receiver<RunnerNotice> {
        self.notices.subscribe()
    }

    /// The state of `thread`, created on first use.
    pub(crate) fn thread_state(&self, thread: &ThreadId) -> Arc<ThreadState> {
        lock(&self.threads)
            .entry(thread.clone())
            .or_insert_with(|| {
                Arc::new(ThreadState::new(
                    thread.clone(),
                    self.settings.roster.clone(),
                ))
            })
            .clone()
    }

    /// The threads being followed.
    pub(crate) fn followed_threads(&self) -> Vec<Arc<ThreadState>> {
        lock(&self.threads)
            .values()
            .filter(|t| t.following.load(Ordering::SeqCst))
            .cloned()
            .collect()
    }

    /// Keeps a follower task, to wait for it on shutdown.
    pub(crate) fn add_follower(&self, follower: JoinHandle<()>) {
        lock(&self.followers).push(follower);
    }

    /// Takes the follower tasks (on shutdown).
    pub(crate) fn take_followers(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *lock(&self.followers))
    }

    /// The work in flight.
    pub(crate) fn activity(&self) -> &Activity {
        &self.activity
    }
}

/// Counts the work in flight (resumes, gate calls, bot workers) and ticks
/// whenever something changes, for [`ThreadRunner::idle`](super::ThreadRunner::idle).
pub(crate) struct Activity {
    busy: AtomicUsize,
    tick: watch::Sender<u64>,
}

impl Activity {
    pub(crate) fn begin(&self) {
        self.busy.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn end(&self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
        self.bump();
    }

    /// Says that something changed (an entry processed).
    pub(crate) fn bump(&self) {
        self.tick.send_modify(|t| *t = t.wrapping_add(1));
    }

    /// How many pieces of work are in flight.
    pub(crate) fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// A receiver of the ticks.
    pub(crate) fn ticks(&self) -> watch::Receiver<u64> {
        self.tick.subscribe()
    }
}

/// Ends one piece of work when dropped, so that a task that panics (a host's
/// gate or tool) still lets [`ThreadRunner::idle`](super::ThreadRunner::idle)
/// and shutdown finish.
pub(crate) struct Busy(Arc<RunnerCore>);

impl Busy {
    pub(crate) fn begin(core: &Arc<RunnerCore>) -> Self {
        core.activity.begin();
        Self(core.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.activity.end();
    }
}

/// What the runner keeps about one thread.
pub(crate) struct ThreadState {
    pub(crate) id: ThreadId,
    pub(crate) context: Mutex<ThreadContext>,
    /// Who is in the thread: the runner's roster unless the host gave the
    /// thread its own.
    base: Mutex<Roster>,
    overrides: Mutex<HashMap<Arc<str>, TriggerOverride>>,
    /// The base roster with the overrides applied: what the dispatcher sees.
    roster: Mutex<Roster>,
    /// The last seq the follower has dispatched.
    pub(crate) processed: AtomicU64,
    pub(crate) following: AtomicBool,
    slots: Mutex<HashMap<Arc<str>, Arc<BotSlot>>>,
}

impl ThreadState {
    fn new(id: ThreadId, roster: Roster) -> Self {
        Self {
            context: Mutex::new(ThreadContext::new(id.as_str())),
            id,
            base: Mutex::new(roster.clone()),
            overrides: Mutex::new(HashMap::new()),
            roster: Mutex::new(roster),
            processed: AtomicU64::new(0),
            following: AtomicBool::new(false),
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The roster the dispatcher sees here (overrides applied).
    pub(crate) fn roster(&self) -> Roster {
        lock(&self.roster).clone()
    }

    /// The override of `bot` here, if any.
    pub(crate) fn override_of(&self, bot: &str) -> Option<TriggerOverride> {
        lock(&self.overrides).get(bot).copied()
    }

    /// Sets (`Some`) or removes (`None`) the override of `bot` here.
    pub(crate) fn set_override(&self, bot: &str, value: Option<TriggerOverride>) {
        let mut overrides = lock(&self.overrides);
        match value {
            Some(value) => {
                overrides.insert(Arc::from(bot), value);
            }
            None => {
                overrides.remove(bot);
            }
        }
        *lock(&self.roster) = effective_roster(&lock(&self.base), &overrides);
    }

    /// Gives the thread its own roster (the overrides still apply).
    pub(crate) fn set_base(&self, roster: Roster) {
        let overrides = lock(&self.overrides);
        *lock(&self.roster) = effective_roster(&roster, &overrides);
        *lock(&self.base) = roster;
    }

    /// The worker slot of `bot` here.
    pub(crate) fn slot(&self, bot: &Arc<str>) -> Arc<BotSlot> {
        lock(&self.slots)
            .entry(bot.clone())
            .or_insert_with(|| Arc::new(BotSlot::new(bot.clone(), &self.roster())))
            .clone()
    }
}
