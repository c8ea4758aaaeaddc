//! Closing a turn that a stopped process left open, with optimistic
//! concurrency: of two runners finding the same open turn, one closes it.

use std::sync::Arc;

use roundtable_thread_stream::{Entry, Expect, StoreError, ThreadId, ThreadStore};

use super::ledger::TurnLedger;
use super::turn_interrupted;

/// How many conflicts in a row closing a turn accepts before it gives up
/// (each retry has read the entries that caused the conflict, so this is
/// only hit on a thread written faster than it can be read).
const MAX_ATTEMPTS: usize = 64;

/// Appends `turn.failed {reason: "interrupted"}` for `author`'s open `turn`
/// unless someone closes it first. `read_upto` is the last seq the caller
/// has read; `ledger` is the author's, up to there. Returns the entries read
/// or written after `read_upto`, and whether this call closed the turn.
pub async fn close_interrupted(
    store: &dyn ThreadStore,
    thread: &ThreadId,
    author: &Arc<str>,
    turn: &Arc<str>,
    mut read_upto: u64,
    ledger: &mut TurnLedger,
) -> Result<(Vec<Entry>, bool), StoreError> {
    let mut seen = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        let tip = store.last_seq(thread).await?;
        if tip > read_upto {
            for entry in store.read(thread, read_upto + 1..=tip).await? {
                ledger.observe(author, &entry);
                read_upto = read_upto.max(entry.seq);
                seen.push(entry);
            }
        }
        if !ledger.open().any(|r| r.turn == *turn) {
            return Ok((seen, false));
        }
        match store
            .append(
                thread,
                Expect::LastSeq(read_upto),
                vec![turn_interrupted(author, turn)],
            )
            .await
        {
            Ok(written) => {
                for entry in written {
                    ledger.observe(author, &entry);
                    seen.push(entry);
                }
                return Ok((seen, true));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Backend(format!(
        "could not close turn {turn} on thread {thread} after {MAX_ATTEMPTS} conflicts"
    )))
}
