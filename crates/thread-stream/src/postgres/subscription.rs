//! A subscription to a PostgreSQL thread: read the rows after the cursor,
//! then wait for the thread's tip to move (a notification, an append of this
//! process, a reconnect of the listener, or the poll interval).
//!
//! Because it always reads from its own cursor, there is no seam between
//! history and live entries, and nothing depends on a notification arriving:
//! each one only says "read again".

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::watch;

use super::session::Inner;
use crate::store::EntryStream;
use crate::tip::Tip;
use crate::{Entry, ThreadId};

/// Most entries read in one query.
const READ_BATCH: u64 = 512;

struct Subscription {
    inner: Arc<Inner>,
    thread: ThreadId,
    next: u64,
    tip: watch::Receiver<Tip>,
    closed: watch::Receiver<bool>,
    buffer: VecDeque<Entry>,
    /// Once the store closed: the last seq to deliver before ending.
    stop_at: Option<u64>,
    /// The last read came back short: wait before reading again.
    caught_up: bool,
    done: bool,
}

/// Entries of `thread` from seq `from` on, stored ones first, then live ones.
pub(crate) fn subscribe(inner: Arc<Inner>, thread: ThreadId, from: u64) -> EntryStream {
    let tip = inner.tips.watch(&thread);
    let closed = inner.closed();
    let state = Subscription {
        inner,
        thread,
        next: from.max(1),
        tip,
        closed,
        buffer: VecDeque::new(),
        stop_at: None,
        caught_up: false,
        done: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(entry) = s.buffer.pop_front() {
                return Some((Ok(entry), s));
            }
            if s.done || s.stop_at.is_some_and(|stop| s.next > stop) {
                return None;
            }
            if s.stop_at.is_none() && (*s.closed.borrow() || s.tip.borrow().closed) {
                // Deliver what the thread holds now, then end.
                match s.inner.last_seq(&s.thread).await {
                    Ok(last) => s.stop_at = Some(last),
                    Err(_) => return None,
                }
                s.caught_up = false;
                continue;
            }
            if s.caught_up && s.stop_at.is_none() {
                let poll = s.inner.poll_interval();
                tokio::select! {
                    changed = s.tip.changed() => if changed.is_err() { return None },
                    _ = s.closed.changed() => {}
                    _ = tokio::time::sleep(poll) => {}
                }
            }
            // Seen now: a notification that lands during the read below
            // makes the next wait return at once.
            s.tip.borrow_and_update();
            let to = s
                .stop_at
                .unwrap_or(u64::MAX)
                .min(s.next.saturating_add(READ_BATCH - 1));
            match s.inner.read_range(&s.thread, s.next, to).await {
                Ok(entries) => {
                    s.caught_up = (entries.len() as u64) < to - s.next + 1;
                    if let Some(last) = entries.last() {
                        s.next = last.seq + 1;
                    } else if s.stop_at.is_some() {
                        // Closed and nothing more stored.
                        return None;
                    }
                    s.buffer.extend(entries);
                }
                Err(error) => {
                    s.done = true;
                    return Some((Err(error), s));
                }
            }
        }
    })
    .boxed()
}
