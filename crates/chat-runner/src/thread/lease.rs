//! Turn leases on shared threads: with [`TurnLeases`], the runner running
//! a bot's turn on a thread holds the lease of that (thread, bot) and
//! renews it while the turn runs. A turn left open by a runner whose lease
//! lapsed (its process died) is closed as interrupted by any runner that
//! takes the lease, and the wake it answered is answered again by one of
//! them.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use roundtable_dispatch::Wake;
use roundtable_providers::now_millis;
use roundtable_thread_stream::lease::{Lease, LeaseError};
use roundtable_thread_stream::{StoreError, ThreadId, ThreadStore};
use tokio_util::sync::CancellationToken;

use super::bot_view::BotView;
use crate::lifecycle::{TurnLeases, TurnLedger, close_interrupted};

/// The prefix of a bot's turn lease key.
const KEY_PREFIX: &str = "bot-turn.";

/// The lease key of `bot`'s turns on `thread`: the bot's id as it is when
/// it is a plain name, else in hex.
pub(crate) fn key(thread: &ThreadId, bot: &str) -> String {
    let plain = !bot.is_empty()
        && bot
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        format!("{KEY_PREFIX}{thread}.{bot}")
    } else {
        let hex: String = bot.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{KEY_PREFIX}{thread}.x{hex}")
    }
}

/// A lease error as the store error the runner reports.
fn store_error(error: LeaseError) -> StoreError {
    match error {
        LeaseError::Store(error) => error,
        other => StoreError::Backend(other.to_string()),
    }
}

/// Takes the lease of the view's bot on `thread` to answer `wake`: waits
/// while another runner holds it. `None` when the wake is answered
/// meanwhile or `cancel` fires.
pub(crate) async fn take(
    leases: &TurnLeases,
    store: &dyn ThreadStore,
    thread: &ThreadId,
    view: &mut BotView,
    wake: &Wake,
    cancel: &CancellationToken,
) -> Result<Option<Lease>, StoreError> {
    let key = key(thread, &view.bot);
    let mut tried: Option<Instant> = None;
    loop {
        view.catch_up(store, thread).await?;
        if !view.ledger.owes(wake.trigger) {
            return Ok(None);
        }
        // While the holder's turn is open, its end is what to wait for; the
        // lease is tried again only each renewal interval, in case it died.
        let open = view.ledger.open().next().is_some();
        if !open || tried.is_none_or(|at| at.elapsed() >= leases.renew_every()) {
            tried = Some(Instant::now());
            if let Some(lease) = leases.acquire(&key).await.map_err(store_error)? {
                return Ok(Some(lease));
            }
        }
        let mut next = store.subscribe(thread, view.read_upto + 1).await?;
        tokio::select! {
            _ = next.next() => {}
            () = tokio::time::sleep(leases.renew_every()) => {}
            () = cancel.cancelled() => return Ok(None),
        }
    }
}

/// Closes as interrupted the view's bot's open turns on `thread`: the
/// caller holds the bot's lease, so no live runner runs them.
pub(crate) async fn close_dead_turns(
    store: &dyn ThreadStore,
    thread: &ThreadId,
    view: &mut BotView,
) -> Result<(), StoreError> {
    let open: Vec<Arc<str>> = view.ledger.open().map(|r| r.turn.clone()).collect();
    for turn in open {
        let mut ledger = view.ledger.clone();
        let (seen, _) =
            close_interrupted(store, thread, &view.bot, &turn, view.read_upto, &mut ledger).await?;
        for entry in &seen {
            view.observe(entry);
        }
    }
    Ok(())
}

/// Closes `bot`'s open turns on `thread` whose runner is gone: those whose
/// lease this runner can take. `read_upto` is the last seq `ledger` has
/// seen; only turns open at least a lease's lifetime are looked at, since a
/// younger one's runner cannot have lapsed yet. Returns whether it closed
/// one.
pub(crate) async fn close_lapsed(
    leases: &TurnLeases,
    store: &dyn ThreadStore,
    thread: &ThreadId,
    (bot, ledger): (&Arc<str>, &TurnLedger),
    read_upto: u64,
    min_age_ms: i64,
) -> Result<bool, StoreError> {
    let now = now_millis();
    let open: Vec<Arc<str>> = ledger
        .open()
        .filter(|r| now.saturating_sub(r.at) >= min_age_ms)
        .map(|r| r.turn.clone())
        .collect();
    if open.is_empty() {
        return Ok(false);
    }
    let Some(lease) = leases
        .acquire(&key(thread, bot))
        .await
        .map_err(store_error)?
    else {
        return Ok(false);
    };
    let (mut ledger, mut read_upto) = (ledger.clone(), read_upto);
    let mut closed = false;
    for turn in open {
        match close_interrupted(store, thread, bot, &turn, read_upto, &mut ledger).await {
            Ok((seen, done)) => {
                closed |= done;
                read_upto = seen.last().map_or(read_upto, |e| e.seq.max(read_upto));
            }
            Err(error) => {
                leases.release(&lease).await;
                return Err(error);
            }
        }
    }
    leases.release(&lease).await;
    Ok(closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hold_the_thread_and_a_plain_bot_id() {
        let thread = ThreadId::new("room-1").unwrap();
        assert_eq!(key(&thread, "archivist"), "bot-turn.room-1.archivist");
        assert_eq!(key(&thread, "a.b"), "bot-turn.room-1.x612e62");
    }
}
