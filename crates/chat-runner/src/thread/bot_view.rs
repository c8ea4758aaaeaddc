//! What one bot knows of one thread (its projection and its turns), and
//! claiming a wake with optimistic concurrency: the append says which seq
//! it expects the thread to end at, so of two runners racing for one wake
//! exactly one wins.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use roundtable_dispatch::compaction::ViewNumbering;
use roundtable_dispatch::{Projection, Roster, Wake};
use roundtable_providers::now_millis;
use roundtable_thread_stream::{Entry, Expect, StoreError, ThreadId, ThreadStore};
use tokio_util::sync::CancellationToken;

use crate::lifecycle::{TurnLedger, turn_started};

/// How many conflicts in a row a claim accepts before it gives up (each
/// retry has read the entries that caused the conflict, so this is only hit
/// on a thread written faster than it can be read).
const MAX_ATTEMPTS: usize = 64;

/// What one bot knows about one thread: its projection and its turns, up
/// to `read_upto`.
///
/// The projection places each of the bot's turns where it started: what
/// others wrote while the turn ran is held back and projected after the
/// turn's end, since the bot had not seen it. (Entries go into the
/// projection renumbered in that order by a [`ViewNumbering`], which maps
/// a compaction's `upto` to the new numbers.)
pub(crate) struct BotView {
    pub(crate) bot: Arc<str>,
    pub(crate) projection: Projection,
    pub(crate) ledger: TurnLedger,
    pub(crate) read_upto: u64,
    /// Others' entries written while one of the bot's turns was open.
    deferred: Vec<Entry>,
    /// The order entries were projected in: the bot's view.
    numbering: ViewNumbering,
}

impl BotView {
    pub(crate) fn new(bot: Arc<str>, roster: &Roster) -> Self {
        Self {
            projection: Projection::new(bot.clone(), roster),
            bot,
            ledger: TurnLedger::default(),
            read_upto: 0,
            deferred: Vec::new(),
            numbering: ViewNumbering::default(),
        }
    }

    pub(crate) fn observe(&mut self, entry: &Entry) {
        self.ledger.observe(&self.bot, entry);
        self.read_upto = self.read_upto.max(entry.seq);
        if *entry.author == *self.bot {
            self.project(entry.clone());
            if self.ledger.open().next().is_none() {
                self.flush_deferred();
            }
        } else if self.ledger.open().next().is_some() {
            self.deferred.push(entry.clone());
        } else {
            self.project(entry.clone());
        }
    }

    fn project(&mut self, entry: Entry) {
        let entry = self.numbering.renumber(entry);
        self.projection.push(&entry);
    }

    /// The store seqs of the entries the bot's projection took, in the
    /// order it took them (what was held back for an open turn is not in
    /// it yet).
    pub(crate) fn view_order(&self) -> Vec<u64> {
        self.numbering.store_seqs().collect()
    }

    /// Projects what others wrote during the bot's open turns.
    fn flush_deferred(&mut self) {
        for entry in std::mem::take(&mut self.deferred) {
            self.project(entry);
        }
    }

    /// Reads the entries after `read_upto` up to the thread's tip.
    pub(crate) async fn catch_up(
        &mut self,
        store: &dyn ThreadStore,
        thread: &ThreadId,
    ) -> Result<(), StoreError> {
        let tip = store.last_seq(thread).await?;
        if tip > self.read_upto {
            for entry in store.read(thread, self.read_upto + 1..=tip).await? {
                self.observe(&entry);
            }
        }
        Ok(())
    }

    /// Claims `wake` for a new turn `turn`: appends its `turn.started` right
    /// after the last entry read. Returns false when a turn of the bot that
    /// started after the wake's event already answers it.
    ///
    /// While another turn of the bot is open on the thread (another runner's,
    /// younger than `busy_for`), it waits for that turn to end first, so a
    /// bot never runs two turns on one thread at once, whichever runner
    /// runs them.
    pub(crate) async fn claim(
        &mut self,
        store: &dyn ThreadStore,
        thread: &ThreadId,
        wake: &Wake,
        turn: &Arc<str>,
        busy_for: Duration,
        cancel: &CancellationToken,
    ) -> Result<bool, StoreError> {
        let mut attempts = 0;
        while attempts < MAX_ATTEMPTS {
            self.catch_up(store, thread).await?;
            if !self.ledger.owes(wake.trigger) {
                return Ok(false);
            }
            let busy = i64::try_from(busy_for.as_millis()).unwrap_or(i64::MAX);
            if self
                .ledger
                .open()
                .any(|r| now_millis().saturating_sub(r.at) < busy)
            {
                // Wait for the next entry (the open turn's end, or anything
                // else), then look again.
                let mut next = store.subscribe(thread, self.read_upto + 1).await?;
                tokio::select! {
                    _ = next.next() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = cancel.cancelled() => return Ok(false),
                }
                continue;
            }
            // Any open turn left is dead: what was held back for it is due.
            self.flush_deferred();
            attempts += 1;
            let started = turn_started(&self.bot, turn, Some(wake));
            match store
                .append(thread, Expect::LastSeq(self.read_upto), vec![started])
                .await
            {
                Ok(written) => {
                    for entry in &written {
                        self.observe(entry);
                    }
                    return Ok(true);
                }
                Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Backend(format!(
            "could not claim a turn on thread {thread} after {MAX_ATTEMPTS} conflicts"
        )))
    }
}
