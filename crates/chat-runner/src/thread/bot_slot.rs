//! One bot on one thread: its pending wake and what it knows of the thread.

use std::sync::{Arc, Mutex};

use roundtable_dispatch::{Roster, Wake};

use super::bot_view::BotView;
use crate::sync::lock;

/// The wakes of one bot on one thread and its view of the thread. Wakes that
/// arrive while a turn runs merge into one pending wake, answered by the
/// next turn.
pub(crate) struct BotSlot {
    pub(crate) bot: Arc<str>,
    queue: Mutex<WakeQueue>,
    /// The bot's projection and ledger; a turn holds it while it claims and
    /// projects.
    pub(crate) view: tokio::sync::Mutex<BotView>,
}

#[derive(Default)]
struct WakeQueue {
    /// The wake to answer next: wakes that arrive while a turn runs merge
    /// into it (the latest event wins; the next projection sees them all).
    pending: Option<Wake>,
    /// A worker is draining the queue.
    running: bool,
}

impl BotSlot {
    pub(crate) fn new(bot: Arc<str>, roster: &Roster) -> Self {
        Self {
            view: tokio::sync::Mutex::new(BotView::new(bot.clone(), roster)),
            bot,
            queue: Mutex::new(WakeQueue::default()),
        }
    }

    /// Queues `wake` (merged with a pending one). True when no worker is
    /// running: the caller must start one.
    pub(crate) fn push(&self, wake: Wake) -> bool {
        let mut queue = lock(&self.queue);
        queue.pending = Some(match queue.pending.take() {
            Some(old) => merge(old, wake),
            None => wake,
        });
        !std::mem::replace(&mut queue.running, true)
    }

    /// The next wake for the running worker, or `None` (the worker stops and
    /// the slot is free) when nothing is pending or `stop` says so.
    pub(crate) fn next(&self, stop: bool) -> Option<Wake> {
        let mut queue = lock(&self.queue);
        match queue.pending.take() {
            Some(wake) if !stop => Some(wake),
            _ => {
                queue.pending = None;
                queue.running = false;
                None
            }
        }
    }

    /// Frees the slot after its worker panicked, so later wakes start a new
    /// worker.
    pub(crate) fn release(&self) {
        let mut queue = lock(&self.queue);
        queue.pending = None;
        queue.running = false;
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
