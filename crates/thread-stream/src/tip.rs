//! The tip of a thread (its last seq, and whether the store closed) and the
//! subscription built on watching it, shared by the memory and JSONL stores.
//!
//! A subscriber reads whatever lies between its cursor and the tip, then waits
//! for the tip to move. Because it always re-reads from its own cursor there is
//! no seam between history and live entries: nothing is skipped or repeated,
//! and a slow subscriber never loses entries (it just reads more at once).

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::watch;

use crate::store::EntryStream;
use crate::{Entry, StoreError};

/// How far a thread goes, and whether its store has closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tip {
    pub(crate) last: u64,
    pub(crate) closed: bool,
}

/// Moves the tip forward to `last`; never back. Appends publish their new
/// tip after writing, and two appends racing to publish could otherwise land
/// out of order: the tip would step back below entries that exist, and
/// subscribers would not see those until the next append.
pub(crate) fn advance(tip: &watch::Sender<Tip>, last: u64) {
    tip.send_if_modified(|tip| {
        let forward = last > tip.last;
        if forward {
            tip.last = last;
        }
        forward
    });
}

/// Where a subscription reads stored entries from.
pub(crate) trait EntrySource: Send + Sync + 'static {
    /// Entries `from..=to`, in order (all of them exist: `to` is at most the tip).
    fn read_range(&self, from: u64, to: u64) -> Result<Vec<Entry>, StoreError>;
}

/// Most entries a subscription reads in one go.
const READ_BATCH: u64 = 512;

struct Subscription<S> {
    source: Arc<S>,
    tip: watch::Receiver<Tip>,
    next: u64,
    buffer: VecDeque<Entry>,
    failed: bool,
}

/// A stream of the entries from seq `from` on, following the tip.
pub(crate) fn subscribe<S: EntrySource>(
    source: Arc<S>,
    tip: watch::Receiver<Tip>,
    from: u64,
) -> EntryStream {
    let state = Subscription {
        source,
        tip,
        next: from.max(1),
        buffer: VecDeque::new(),
        failed: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        if s.failed {
            return None;
        }
        loop {
            if let Some(entry) = s.buffer.pop_front() {
                return Some((Ok(entry), s));
            }
            let tip = *s.tip.borrow_and_update();
            if s.next <= tip.last {
                let to = tip.last.min(s.next.saturating_add(READ_BATCH - 1));
                match s.source.read_range(s.next, to) {
                    Ok(entries) if entries.len() as u64 == to - s.next + 1 => {
                        s.next = to + 1;
                        s.buffer.extend(entries);
                        continue;
                    }
                    Ok(entries) => {
                        s.failed = true;
                        let error = StoreError::Backend(format!(
                            "expected entries {}..={to}, read {}",
                            s.next,
                            entries.len()
                        ));
                        return Some((Err(error), s));
                    }
                    Err(error) => {
                        s.failed = true;
                        return Some((Err(error), s));
                    }
                }
            }
            if tip.closed || s.tip.changed().await.is_err() {
                return None;
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tip_never_steps_back() {
        let (tx, mut rx) = watch::channel(Tip::default());
        advance(&tx, 12);
        assert!(rx.has_changed().unwrap());
        assert_eq!(rx.borrow_and_update().last, 12);
        // An earlier append publishing late changes nothing, and wakes no one.
        advance(&tx, 10);
        assert!(!rx.has_changed().unwrap());
        assert_eq!(rx.borrow().last, 12);
    }
}
