//! Following one thread: resume what is owed, then dispatch every new entry.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use roundtable_dispatch::{Roster, Wake, WakeReason, dispatch, halt};
use roundtable_providers::now_millis;
use roundtable_thread_stream::{Entry, EntryBody, StoreError};
use tokio::task::JoinHandle;

use super::core::{Busy, RunnerCore, ThreadState};
use super::lease;
use super::notice::RunnerNotice;
use super::overrides::{HOUR, admits};
use super::worker::enqueue;
use crate::lifecycle::{TurnLeases, TurnLedger, close_interrupted};

/// How long a follower waits before subscribing again after a store error.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(200);

/// At most this many gate calls per ambient bot when a thread is resumed.
const RESUME_GATE_CALLS: usize = 3;

/// What the follower keeps between entries.
struct Follower {
    core: Arc<RunnerCore>,
    thread: Arc<ThreadState>,
    /// The latest entries, for the dispatcher (at most twice the runner's
    /// `recent_entries`).
    recent: Vec<Entry>,
    /// When each bot's turns on the thread started (Unix ms), for hourly caps.
    turn_times: HashMap<Arc<str>, Vec<i64>>,
    /// The turns of each bot the runner runs (with leases: which are open,
    /// for the sweep, and which wake an interrupted one answered).
    ledgers: HashMap<Arc<str>, TurnLedger>,
}

/// Resumes `thread` and starts its follower task.
pub(crate) async fn start(
    core: Arc<RunnerCore>,
    thread: Arc<ThreadState>,
) -> Result<JoinHandle<()>, StoreError> {
    let busy = Busy::begin(&core);
    let (history, tip, ledgers) = resume(&core, &thread).await?;
    let mut follower = Follower {
        core: core.clone(),
        thread: thread.clone(),
        recent: Vec::new(),
        turn_times: HashMap::new(),
        ledgers,
    };
    for entry in history {
        follower.remember(entry);
    }
    thread.processed.store(tip, Ordering::SeqCst);
    drop(busy);
    Ok(tokio::spawn(follower.run(tip + 1)))
}

/// Reads the thread, closes its open turns as interrupted and schedules the
/// wakes still owed. Returns the latest entries, the seq they reach and the
/// bots' ledgers up to there.
async fn resume(
    core: &Arc<RunnerCore>,
    thread: &Arc<ThreadState>,
) -> Result<(Vec<Entry>, u64, HashMap<Arc<str>, TurnLedger>), StoreError> {
    let mut resume = Resume::read(core, thread).await?;
    match &core.settings.leases {
        // What it closes comes to the follower, which answers it again.
        Some(leases) => resume.close_lapsed_turns(leases).await?,
        None => resume.close_open_turns().await?,
    }
    resume.schedule_owed().await;
    Ok(resume.into_recent())
}

/// A thread being resumed: its entries, each bot's ledger of turns, and
/// when each author's turns started.
struct Resume<'a> {
    core: &'a Arc<RunnerCore>,
    thread: &'a Arc<ThreadState>,
    history: Vec<Entry>,
    ledgers: HashMap<Arc<str>, TurnLedger>,
    turn_times: HashMap<Arc<str>, Vec<i64>>,
    /// When the thread was read (Unix ms).
    now: i64,
}

impl<'a> Resume<'a> {
    /// Reads the whole thread and folds it into the bots' ledgers.
    async fn read(
        core: &'a Arc<RunnerCore>,
        thread: &'a Arc<ThreadState>,
    ) -> Result<Self, StoreError> {
        let settings = &core.settings;
        let history = settings.store.read_all(&thread.id).await?;
        for entry in &history {
            observe(core, entry);
        }
        let mut ledgers: HashMap<Arc<str>, TurnLedger> = settings
            .bots
            .keys()
            .map(|bot| (bot.clone(), TurnLedger::default()))
            .collect();
        let mut turn_times: HashMap<Arc<str>, Vec<i64>> = HashMap::new();
        for entry in &history {
            for (bot, ledger) in &mut ledgers {
                ledger.observe(bot, entry);
            }
            if let EntryBody::TurnStarted(_) = entry.body {
                turn_times
                    .entry(entry.author.clone())
                    .or_default()
                    .push(entry.at);
            }
        }
        Ok(Self {
            core,
            thread,
            history,
            ledgers,
            turn_times,
            now: now_millis(),
        })
    }
}

impl Resume<'_> {
    /// Closes as interrupted the open turns whose runner is gone (open
    /// longer than the runner's `interrupt_open_turns_after`).
    async fn close_open_turns(&mut self) -> Result<(), StoreError> {
        let settings = &self.core.settings;
        let stale =
            i64::try_from(settings.interrupt_open_turns_after.as_millis()).unwrap_or(i64::MAX);
        // (bot, turn, started at) of every open turn.
        let open_turns: Vec<(Arc<str>, Arc<str>, i64)> = self
            .ledgers
            .iter()
            .flat_map(|(bot, ledger)| ledger.open().map(|r| (bot.clone(), r.turn.clone(), r.at)))
            .collect();
        for (bot, turn, at) in open_turns {
            if self.now.saturating_sub(at) < stale {
                continue;
            }
            let read_upto = self.history.last().map_or(0, |e| e.seq);
            let Some(ledger) = self.ledgers.get_mut(&bot) else {
                continue;
            };
            let store = &*settings.store;
            let (seen, closed) =
                close_interrupted(store, &self.thread.id, &bot, &turn, read_upto, ledger).await?;
            for entry in &seen {
                observe(self.core, entry);
                for (other, ledger) in self.ledgers.iter_mut().filter(|(b, _)| **b != bot) {
                    ledger.observe(other, entry);
                }
            }
            self.history.extend(seen);
            if closed {
                self.core.notify(RunnerNotice::Interrupted {
                    thread: self.thread.id.clone(),
                    bot: bot.clone(),
                    turn,
                });
            }
        }
        Ok(())
    }

    /// Schedules the wakes still owed: replays the dispatcher over the
    /// latest events as it ran when they were appended.
    async fn schedule_owed(&self) {
        let settings = &self.core.settings;
        let roster = self.thread.roster();
        let recent = settings.recent_entries;
        let history = &self.history;
        let start = history.len().saturating_sub(recent);
        let mut ambient: Vec<(Wake, usize)> = Vec::new();
        for i in start..history.len() {
            let event = &history[i];
            let before = &history[i.saturating_sub(recent)..i];
            for wake in dispatch(event, before, &roster, &settings.policy, event.at) {
                let owed = self
                    .ledgers
                    .get(&wake.bot)
                    .is_some_and(|l| l.owes(wake.trigger));
                let times = self
                    .turn_times
                    .get(&wake.bot)
                    .map_or(&[][..], Vec::as_slice);
                if !owed || !admits(self.thread.override_of(&wake.bot).as_ref(), times, self.now) {
                    continue;
                }
                if wake.reason == WakeReason::Ambient {
                    ambient.push((wake, i));
                } else {
                    enqueue(self.core, self.thread, wake);
                }
            }
        }
        self.ask_gates(&roster, ambient).await;
    }

    /// Schedules the owed ambient wakes (each with the index of its event)
    /// that the gate admits. Owed wakes of one bot coalesce into one turn,
    /// so a bot's gate is asked about its latest candidates only, newest
    /// first, until one admits it.
    async fn ask_gates(&self, roster: &Roster, ambient: Vec<(Wake, usize)>) {
        let settings = &self.core.settings;
        let mut asked: HashMap<Arc<str>, (usize, bool)> = HashMap::new();
        for (wake, i) in ambient.into_iter().rev() {
            let (calls, done) = asked.entry(wake.bot.clone()).or_insert((0, false));
            if *done || *calls >= RESUME_GATE_CALLS {
                continue;
            }
            *calls += 1;
            let Some(bot) = roster.get(&wake.bot) else {
                continue;
            };
            if settings.gate.admit(bot, &self.history[i]).await {
                *done = true;
                enqueue(self.core, self.thread, wake);
            }
        }
    }

    /// Closes the open turns whose lease this runner can take: no live
    /// runner runs them.
    async fn close_lapsed_turns(&mut self, leases: &TurnLeases) -> Result<(), StoreError> {
        let store = &*self.core.settings.store;
        let read_upto = self.history.last().map_or(0, |e| e.seq);
        for (bot, ledger) in &self.ledgers {
            lease::close_lapsed(leases, store, &self.thread.id, (bot, ledger), read_upto, 0)
                .await?;
        }
        Ok(())
    }

    /// The latest entries (the follower's `recent`), the seq they reach and
    /// the bots' ledgers.
    fn into_recent(mut self) -> (Vec<Entry>, u64, HashMap<Arc<str>, TurnLedger>) {
        let tip = self.history.last().map_or(0, |e| e.seq);
        let keep = self
            .history
            .len()
            .saturating_sub(self.core.settings.recent_entries);
        (self.history.split_off(keep), tip, self.ledgers)
    }
}

/// Shows `entry` to the host's observer, if it gave one.
fn observe(core: &Arc<RunnerCore>, entry: &Entry) {
    if let Some(observe) = &core.settings.observer {
        observe(core, entry);
    }
}

impl Follower {
    /// Dispatches every entry from seq `from` on until the store closes or
    /// the runner shuts down; with leases, closes the turns whose runner is
    /// gone each renewal interval.
    async fn run(mut self, mut from: u64) {
        let cancel = self.core.cancel.clone();
        let leases = self.core.settings.leases.clone();
        let mut sweeps = leases
            .as_ref()
            .map(|l| tokio::time::interval(l.renew_every()));
        loop {
            let subscribed = tokio::select! {
                s = self.core.settings.store.subscribe(&self.thread.id, from) => s,
                () = cancel.cancelled() => return,
            };
            let mut stream = match subscribed {
                Ok(stream) => stream,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    self.error(e);
                    tokio::select! {
                        () = tokio::time::sleep(RESUBSCRIBE_AFTER) => continue,
                        () = cancel.cancelled() => return,
                    }
                }
            };
            loop {
                let item = tokio::select! {
                    item = stream.next() => item,
                    () = tick(&mut sweeps) => {
                        if let Some(leases) = &leases {
                            self.sweep(leases, from.saturating_sub(1)).await;
                        }
                        continue;
                    }
                    () = cancel.cancelled() => return,
                };
                match item {
                    Some(Ok(entry)) => {
                        from = entry.seq + 1;
                        self.on_entry(entry);
                    }
                    Some(Err(e)) => {
                        self.error(e);
                        break;
                    }
                    None => return,
                }
            }
        }
    }

    /// Closes the open turns whose runner is gone (their lease lapsed);
    /// the follower then answers their wakes again.
    async fn sweep(&self, leases: &TurnLeases, read_upto: u64) {
        let min_age = i64::try_from(leases.ttl().as_millis()).unwrap_or(i64::MAX);
        let store = &*self.core.settings.store;
        for (bot, ledger) in &self.ledgers {
            if ledger.open().next().is_none() {
                continue;
            }
            let thread = &self.thread.id;
            let closed =
                lease::close_lapsed(leases, store, thread, (bot, ledger), read_upto, min_age);
            if let Err(e) = closed.await {
                self.error(e);
            }
        }
    }

    /// With leases: answers again the wake that `entry`, a bot's turn
    /// closed as interrupted (its runner stopped or died), answered, when
    /// it is still owed. Every runner does so; the lease lets one run it.
    fn answer_interrupted(&self, entry: &Entry, roster: &Roster) {
        let EntryBody::TurnFailed(failed) = &entry.body else {
            return;
        };
        if !failed.reason.is_interrupted() || self.core.settings.leases.is_none() {
            return;
        }
        let Some(ledger) = self.ledgers.get(&*entry.author) else {
            return;
        };
        let Some(trigger) = ledger.turn(&failed.turn).and_then(|r| r.trigger) else {
            return;
        };
        let Ok(i) = self.recent.binary_search_by_key(&trigger, |e| e.seq) else {
            return;
        };
        if !ledger.owes(trigger) {
            return;
        }
        let event = &self.recent[i];
        let policy = &self.core.settings.policy;
        let times = self
            .turn_times
            .get(&*entry.author)
            .map_or(&[][..], Vec::as_slice);
        let wakes = dispatch(event, &self.recent[..i], roster, policy, event.at);
        for wake in wakes.into_iter().filter(|w| *w.bot == *entry.author) {
            if admits(
                self.thread.override_of(&wake.bot).as_ref(),
                times,
                now_millis(),
            ) {
                enqueue(&self.core, &self.thread, wake);
            }
        }
    }

    fn error(&self, e: StoreError) {
        self.core.notify(RunnerNotice::Error {
            thread: self.thread.id.clone(),
            bot: None,
            message: e.to_string(),
        });
    }

    /// Keeps `entry` for later dispatches.
    fn remember(&mut self, entry: Entry) {
        if let EntryBody::TurnStarted(_) = entry.body {
            let times = self.turn_times.entry(entry.author.clone()).or_default();
            let since = entry.at - HOUR.as_millis() as i64;
            times.retain(|&at| at > since);
            times.push(entry.at);
        }
        self.recent.push(entry);
        let keep = self.core.settings.recent_entries;
        if self.recent.len() >= 2 * keep {
            let cut = self.recent.len() - keep;
            self.recent.drain(..cut);
        }
    }

    /// Tells the host when the loop guard or the hop limit stopped every
    /// wake of `entry`.
    fn report_halt(&self, entry: &Entry, roster: &Roster, now: i64) {
        let policy = &self.core.settings.policy;
        if let Some(halt) = halt(entry, &self.recent, roster, policy, now) {
            self.core.notify(RunnerNotice::Halted {
                thread: self.thread.id.clone(),
                trigger: entry.seq,
                halt,
            });
        }
    }

    fn on_entry(&mut self, entry: Entry) {
        observe(&self.core, &entry);
        let core = self.core.clone();
        let seq = entry.seq;
        let roster = self.thread.roster();
        if let Some(ledger) = self.ledgers.get_mut(&*entry.author) {
            ledger.observe(&entry.author, &entry);
            self.answer_interrupted(&entry, &roster);
        }
        let now = now_millis().max(entry.at);
        let settings = &core.settings;
        let all = dispatch(&entry, &self.recent, &roster, &settings.policy, now);
        if all.is_empty() {
            self.report_halt(&entry, &roster, now);
        }
        let wakes: Vec<Wake> = all
            .into_iter()
            .filter(|w| settings.bots.contains_key(&w.bot))
            .filter(|w| {
                let times = self.turn_times.get(&w.bot).map_or(&[][..], Vec::as_slice);
                admits(self.thread.override_of(&w.bot).as_ref(), times, now)
            })
            .collect();
        let (ambient, direct): (Vec<Wake>, Vec<Wake>) = wakes
            .into_iter()
            .partition(|w| w.reason == WakeReason::Ambient);
        for wake in direct {
            enqueue(&core, &self.thread, wake);
        }
        if !ambient.is_empty() {
            let busy = Busy::begin(&core);
            let thread = self.thread.clone();
            let event = entry.clone();
            tokio::spawn(async move {
                let admitted = futures::future::join_all(ambient.into_iter().map(|wake| {
                    let core = &core;
                    let roster = &roster;
                    let event = &event;
                    async move {
                        let bot = roster.get(&wake.bot)?;
                        core.settings.gate.admit(bot, event).await.then_some(wake)
                    }
                }))
                .await;
                for wake in admitted.into_iter().flatten() {
                    enqueue(&core, &thread, wake);
                }
                drop(busy);
            });
        }
        self.remember(entry);
        self.thread.processed.store(seq, Ordering::SeqCst);
        self.core.activity().bump();
    }
}

/// The next sweep of `sweeps`; never, without leases.
async fn tick(sweeps: &mut Option<tokio::time::Interval>) {
    match sweeps {
        Some(sweeps) => {
            sweeps.tick().await;
        }
        None => std::future::pending().await,
    }
}
