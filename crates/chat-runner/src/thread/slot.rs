//! One bot on one thread: its pending wake, its worker, its turns one after
//! the other.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use roundtable_dispatch::{Roster, Wake, system_prompt};
use roundtable_thread_stream::{EntryBody, Expect, NewEntry, StoreError, TurnEnded, TurnFailed};
use tokio::sync::OwnedSemaphorePermit;

use crate::event::FinishReason;
use crate::turn::TurnRequest;

use super::claim::BotView;
use super::ledger::INTERRUPTED;
use super::notice::RunnerNotice;
use super::runner::{Busy, Inner, ThreadState, lock};
use crate::writer::{TurnWriter, message_entries};

/// How many times a wake is tried when the store fails.
const ATTEMPTS: u32 = 3;

/// The pause before the second try (doubled before the third).
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// The wakes of one bot on one thread and the state of its turns.
pub(crate) struct Slot {
    bot: Arc<str>,
    queue: Mutex<Queue>,
    view: tokio::sync::Mutex<BotView>,
}

#[derive(Default)]
struct Queue {
    /// The wake to answer next: wakes that arrive while a turn runs merge
    /// into it (the latest event wins; the next projection sees them all).
    pending: Option<Wake>,
    /// A worker is draining the queue.
    running: bool,
}

impl Slot {
    pub(crate) fn new(bot: Arc<str>, roster: &Roster) -> Self {
        Self {
            view: tokio::sync::Mutex::new(BotView::new(bot.clone(), roster)),
            bot,
            queue: Mutex::new(Queue::default()),
        }
    }
}

/// Hands `wake` to its bot's worker on `thread`, starting one if none runs.
pub(crate) fn enqueue(inner: &Arc<Inner>, thread: &Arc<ThreadState>, wake: Wake) {
    if inner.cancel.is_cancelled() {
        return;
    }
    let slot = thread.slot(&wake.bot);
    let start = {
        let mut queue = lock(&slot.queue);
        queue.pending = Some(match queue.pending.take() {
            Some(old) => merge(old, wake),
            None => wake,
        });
        !std::mem::replace(&mut queue.running, true)
    };
    if start {
        let busy = Busy::begin(inner);
        // Take a free permit here, in wake order, rather than in the spawned
        // worker: spawned tasks do not start in the order they were spawned,
        // and under the global limit the dispatcher's order (mentions first)
        // must decide who runs first.
        let permit = inner.permits.clone().try_acquire_owned().ok();
        tokio::spawn(work(inner.clone(), thread.clone(), slot, busy, permit));
    }
}

/// Frees the slot if its worker panics (a host's tool), so later wakes
/// start a new worker.
struct Release<'a>(&'a Slot);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut queue = lock(&self.0.queue);
            queue.pending = None;
            queue.running = false;
        }
    }
}

/// One wake standing for two: the later event (the next projection shows
/// both), the shallowest depth and the strongest reason (a human's mention
/// coalesced with a bot's chain keeps the human's standing).
fn merge(a: Wake, b: Wake) -> Wake {
    Wake {
        trigger: a.trigger.max(b.trigger),
        depth: a.depth.min(b.depth),
        reason: a.reason.min(b.reason),
        bot: a.bot,
    }
}

/// Answers the slot's wakes one at a time until none is pending.
async fn work(
    inner: Arc<Inner>,
    thread: Arc<ThreadState>,
    slot: Arc<Slot>,
    busy: Busy,
    mut first_permit: Option<OwnedSemaphorePermit>,
) {
    let _release = Release(&slot);
    loop {
        let wake = {
            let mut queue = lock(&slot.queue);
            match queue.pending.take() {
                Some(wake) if !inner.cancel.is_cancelled() => wake,
                _ => {
                    queue.pending = None;
                    queue.running = false;
                    break;
                }
            }
        };
        let permit = match first_permit.take() {
            Some(permit) => Some(permit),
            None => tokio::select! {
                permit = inner.permits.clone().acquire_owned() => permit.ok(),
                () = inner.cancel.cancelled() => None,
            },
        };
        let Some(_permit) = permit else {
            continue;
        };
        // A store error may be transient (a distributed store's hiccup):
        // try the wake again a few times before giving it up. The claim
        // makes a retry safe: a turn already started is not started twice.
        for attempt in 1..=ATTEMPTS {
            let Err(e) = answer(&inner, &thread, &slot, &wake).await else {
                break;
            };
            inner.notify(RunnerNotice::Error {
                thread: thread.id.clone(),
                bot: Some(slot.bot.clone()),
                message: e.to_string(),
            });
            if attempt == ATTEMPTS || inner.cancel.is_cancelled() {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(RETRY_AFTER * attempt) => {}
                () = inner.cancel.cancelled() => break,
            }
        }
    }
    drop(busy);
}

/// Claims `wake` and runs the bot's turn for it.
async fn answer(
    inner: &Inner,
    thread: &ThreadState,
    slot: &Slot,
    wake: &Wake,
) -> Result<(), StoreError> {
    let Some(bot) = inner.bots.get(&slot.bot) else {
        return Ok(());
    };
    let store = &*inner.store;
    let mut view = slot.view.lock().await;
    let turn: Arc<str> = Arc::from(uuid::Uuid::now_v7().to_string());
    // Another runner's open turn holds the bot for at most its timeout.
    let busy_for = bot
        .turns
        .limits()
        .timeout
        .map_or(Duration::from_secs(600), |t| t + Duration::from_secs(5));
    if !view
        .claim(store, &thread.id, wake, &turn, busy_for, &inner.cancel)
        .await?
    {
        if inner.cancel.is_cancelled() {
            return Ok(());
        }
        inner.notify(RunnerNotice::AlreadyAnswered {
            thread: thread.id.clone(),
            bot: slot.bot.clone(),
            trigger: wake.trigger,
        });
        return Ok(());
    }
    inner.notify(RunnerNotice::TurnStarted {
        thread: thread.id.clone(),
        bot: slot.bot.clone(),
        turn: turn.clone(),
        trigger: wake.trigger,
    });

    let context = lock(&thread.context).clone();
    let mut system = system_prompt(&slot.bot, &thread.roster(), &context).unwrap_or_default();
    for extra in [&bot.suffix, &bot.skills].into_iter().flatten() {
        system.push('\n');
        system.push_str(extra);
    }
    let request = TurnRequest::new(view.projection.messages().to_vec())
        .with_system_prompt(system)
        .with_turn_id(turn.clone());
    drop(view);

    let writer = TurnWriter::spawn(
        inner.store.clone(),
        thread.id.clone(),
        slot.bot.clone(),
        turn.clone(),
        Some(inner.chunk_interval),
    );
    let sink = writer.sink();
    let outcome = bot
        .turns
        .run(request, inner.cancel.child_token(), &sink)
        .await;
    drop(sink);
    let written = writer.finish().await;
    if let Some(e) = written.error {
        // The turn stays open; a restart closes it as interrupted.
        return Err(e);
    }

    let mut rest = message_entries(&slot.bot, &turn, &outcome.messages, written.messages);
    let shut_down = inner.cancel.is_cancelled() && !outcome.finish_reason.is_success();
    let end = match (&outcome.error, shut_down) {
        (_, true) => EntryBody::TurnFailed(TurnFailed {
            turn: turn.clone(),
            reason: INTERRUPTED.to_string(),
        }),
        (None, false) => EntryBody::TurnEnded(TurnEnded {
            turn: turn.clone(),
            reason: outcome.finish_reason.as_str().to_string(),
        }),
        (Some(error), false) => EntryBody::TurnFailed(TurnFailed {
            turn: turn.clone(),
            reason: format!("{}: {error}", outcome.finish_reason),
        }),
    };
    rest.push(NewEntry::new(slot.bot.clone(), end));
    store.append(&thread.id, Expect::Any, rest).await?;
    inner.notify(RunnerNotice::TurnFinished {
        thread: thread.id.clone(),
        bot: slot.bot.clone(),
        turn,
        finish_reason: if shut_down {
            FinishReason::Aborted
        } else {
            outcome.finish_reason
        },
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use roundtable_dispatch::WakeReason;

    use super::*;

    #[test]
    fn merged_wakes_keep_the_latest_event_and_the_humans_standing() {
        let wake = |trigger, depth, reason| Wake {
            bot: "b".into(),
            reason,
            depth,
            trigger,
        };
        let merged = merge(
            wake(3, 1, WakeReason::Mention),
            wake(7, 4, WakeReason::Always),
        );
        assert_eq!(merged, wake(7, 1, WakeReason::Mention));
    }
}
