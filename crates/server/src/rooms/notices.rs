//! What the bots' runner tells the rooms: a halt (the loop guard or the
//! hop limit stopped every wake of an event) becomes a `signal.room.halted`
//! entry of the room, so every member's stream shows why the bots went
//! quiet; failures go to the log. Every process over the store sees the
//! same halt, and the first to record it wins: the others find its record
//! and write nothing.

use std::sync::Weak;

use roundtable_chat_runner::RunnerNotice;
use roundtable_dispatch::Halt;
use roundtable_thread_stream::{Expect, StoreError, ThreadId};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::directory::Directory;
use super::record;

/// Watches the runner of `directory` until `stop` (or until the directory
/// is gone).
pub(crate) fn watch(directory: &std::sync::Arc<Directory>, stop: CancellationToken) {
    let mut notices = directory.runner.notices();
    let directory: Weak<Directory> = std::sync::Arc::downgrade(directory);
    tokio::spawn(async move {
        loop {
            let notice = tokio::select! {
                notice = notices.recv() => notice,
                () = stop.cancelled() => return,
            };
            let notice = match notice {
                Ok(notice) => notice,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "room notices missed");
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let Some(directory) = directory.upgrade() else {
                return;
            };
            handle(&directory, notice).await;
        }
    });
}

async fn handle(directory: &Directory, notice: RunnerNotice) {
    match notice {
        RunnerNotice::Halted {
            thread,
            trigger,
            halt,
        } if directory.knows(&thread) => {
            if let Err(error) = record_halt(directory, &thread, trigger, halt).await {
                tracing::warn!(room = %thread, %error, "halt not recorded");
            }
        }
        RunnerNotice::Error {
            thread,
            bot,
            message,
        } => {
            tracing::warn!(room = %thread, bot = bot.as_deref(), %message, "room runner error");
        }
        _ => {}
    }
}

/// How many times a halt's record is tried again after another entry
/// landed first.
const TRIES: usize = 16;

/// Appends the halt of event `trigger`, unless a record of it follows the
/// event already: checked and appended at one seq, so two processes never
/// both record it.
async fn record_halt(
    directory: &Directory,
    thread: &ThreadId,
    trigger: u64,
    halt: Halt,
) -> Result<(), StoreError> {
    let store = &directory.store;
    for _ in 0..TRIES {
        let tip = store.last_seq(thread).await?;
        if tip > trigger {
            let after = store.read(thread, trigger + 1..=tip).await?;
            if after.iter().any(|e| record::halts(e, trigger)) {
                return Ok(());
            }
        }
        let entry = record::halted(trigger, halt);
        match store
            .append(thread, Expect::LastSeq(tip), vec![entry])
            .await
        {
            Err(StoreError::Conflict { .. }) => continue,
            done => return done.map(|_| ()),
        }
    }
    Ok(())
}
