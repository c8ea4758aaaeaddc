//! What the bots' runner tells the rooms: a halt (the loop guard or the
//! hop limit stopped every wake of an event) becomes a `signal.room.halted`
//! entry of the room, so every member's stream shows why the bots went
//! quiet; failures go to the log.

use std::sync::Weak;

use roundtable_chat_runner::RunnerNotice;
use roundtable_thread_stream::Expect;
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
            let entry = record::halted(trigger, halt);
            if let Err(error) = directory
                .store
                .append(&thread, Expect::Any, vec![entry])
                .await
            {
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
