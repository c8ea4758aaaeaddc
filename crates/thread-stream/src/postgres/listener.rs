//! Thread tips fed by `LISTEN/NOTIFY`: what wakes a subscription.
//!
//! Every append notifies the schema's channel with `<thread> <last seq>`
//! when it commits. One connection per store listens on that channel and
//! moves the tip of each thread someone follows. A notification is only a
//! wake-up: subscribers read the rows themselves from their own cursor, so a
//! notification that never arrives (the listening connection dropped, the
//! server restarted) delays entries but loses none. After (re)connecting the
//! listener wakes every subscriber to read what it may have missed, and
//! subscribers also read every `poll_interval` in case a connection died
//! without anyone noticing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio_postgres::Config;

use super::connection::{backoff, describe, drive, open, quote};
use crate::ThreadId;
use crate::tip::{Tip, advance};

/// The `NOTIFY` channel of a schema.
pub(crate) fn channel(schema: &str) -> String {
    format!("{schema}_entries")
}

/// The payload of an append's notification.
pub(crate) fn parse_payload(payload: &str) -> Option<(ThreadId, u64)> {
    let (thread, last) = payload.rsplit_once(' ')?;
    Some((ThreadId::new(thread).ok()?, last.parse().ok()?))
}

/// Followed threads kept in [`Tips`] before the tips nobody follows any
/// more are let go.
const TIPS_KEPT: usize = 256;

/// The tips of the threads this process follows (and, while they are
/// followed, writes).
pub(crate) struct Tips {
    threads: Mutex<TipTable>,
}

/// The tips by thread, and the size at which the unfollowed ones are let
/// go next.
struct TipTable {
    tips: HashMap<ThreadId, watch::Sender<Tip>>,
    prune_at: usize,
}

impl Default for Tips {
    fn default() -> Self {
        Self {
            threads: Mutex::new(TipTable {
                tips: HashMap::new(),
                prune_at: TIPS_KEPT,
            }),
        }
    }
}

impl Tips {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<ThreadId, watch::Sender<Tip>>) -> R) -> R {
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut threads.tips)
    }

    /// A receiver of `thread`'s tip (created at 0 when unknown: subscribers
    /// read the rows, the value only says something moved). A server
    /// follows many threads over its life: when the table has grown to its
    /// bound, the tips no subscriber holds any more are let go first (a tip
    /// is only a floor for appends and a wake-up for subscribers; a thread
    /// followed again starts from 0 and reads the rows).
    pub(crate) fn watch(&self, thread: &ThreadId) -> watch::Receiver<Tip> {
        let mut table = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        if table.tips.len() >= table.prune_at && !table.tips.contains_key(thread) {
            table.tips.retain(|_, tip| tip.receiver_count() > 0);
            // Twice what stays, so a table of followed threads is not
            // scanned at every new one.
            table.prune_at = TIPS_KEPT.max(2 * table.tips.len());
        }
        table
            .tips
            .entry(thread.clone())
            .or_insert_with(|| watch::Sender::new(Tip::default()))
            .subscribe()
    }

    /// How many threads have a tip.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.with(|threads| threads.len())
    }

    /// The highest seq known committed for `thread` (0 when none is known).
    pub(crate) fn known(&self, thread: &ThreadId) -> u64 {
        self.with(|threads| threads.get(thread).map_or(0, |t| t.borrow().last))
    }

    /// Moves `thread`'s tip forward (never back) if anyone follows it.
    pub(crate) fn advance(&self, thread: &ThreadId, last: u64) {
        self.with(|threads| {
            if let Some(tip) = threads.get(thread) {
                advance(tip, last);
            }
        });
    }

    /// Wakes every follower to read what it may have missed.
    pub(crate) fn wake_all(&self) {
        self.with(|threads| {
            for tip in threads.values() {
                tip.send_modify(|_| {});
            }
        });
    }

    /// Marks every tip closed: followers deliver what is stored and end.
    pub(crate) fn close_all(&self) {
        self.with(|threads| {
            for tip in threads.values() {
                tip.send_modify(|tip| tip.closed = true);
            }
        });
    }
}

/// Listens on the schema's channel until `closed` turns true, reconnecting
/// whenever the connection is lost.
pub(crate) fn spawn(
    config: Config,
    schema: String,
    tips: Arc<Tips>,
    mut closed: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        let channel = channel(&schema);
        let mut attempt = 0u32;
        // Ends when the store closes or is dropped.
        while !stopped(&mut closed) {
            let (client, connection) = match open(&config).await {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::debug!(error = %describe(&error), "listener cannot connect; retrying");
                    pause(&mut closed, attempt).await;
                    attempt += 1;
                    continue;
                }
            };
            let on = tips.clone();
            let wanted = channel.clone();
            let mut driver = drive(connection, move |ch, payload| {
                if ch == wanted
                    && let Some((thread, last)) = parse_payload(payload)
                {
                    on.advance(&thread, last);
                }
            });
            if let Err(error) = client
                .batch_execute(&format!("LISTEN {}", quote(&channel)))
                .await
            {
                tracing::debug!(error = %describe(&error), "listener cannot LISTEN; retrying");
                pause(&mut closed, attempt).await;
                attempt += 1;
                continue;
            }
            attempt = 0;
            // Anything committed before LISTEN took effect: read it now.
            tips.wake_all();
            tokio::select! {
                _ = &mut driver => {
                    tracing::debug!("listener connection lost; reconnecting");
                    tips.wake_all();
                }
                _ = closed.changed() => driver.abort(),
            }
        }
    });
}

fn stopped(closed: &mut watch::Receiver<bool>) -> bool {
    closed.has_changed().is_err() || *closed.borrow_and_update()
}

async fn pause(closed: &mut watch::Receiver<bool>, attempt: u32) {
    tokio::select! {
        _ = tokio::time::sleep(backoff(attempt)) => {}
        _ = closed.changed() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_a_thread_and_its_last_seq() {
        let (thread, last) = parse_payload("team.general 42").unwrap();
        assert_eq!(thread.as_str(), "team.general");
        assert_eq!(last, 42);
        for bad in ["", "general", "general x", "../x 1", " 1"] {
            assert!(parse_payload(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn tips_nobody_follows_are_let_go_and_followed_ones_stay() {
        let tips = Tips::default();
        let thread = |n: usize| ThreadId::new(format!("t{n}")).unwrap();
        let followed = tips.watch(&thread(0));
        for n in 1..TIPS_KEPT {
            drop(tips.watch(&thread(n)));
        }
        assert_eq!(tips.len(), TIPS_KEPT);
        // The next new thread lets the unfollowed ones go.
        let _next = tips.watch(&thread(TIPS_KEPT));
        assert_eq!(tips.len(), 2);
        // The followed thread kept its tip: it still hears of appends.
        tips.advance(&thread(0), 7);
        assert_eq!(followed.borrow().last, 7);
    }
}
