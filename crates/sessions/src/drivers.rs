//! The turn drivers of one engine: the tasks that run its sessions'
//! turns, and what a stop needs of them (see [`shutdown`](crate::shutdown)).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::SessionError;
use crate::ids::SessionId;

/// The turn drivers of one engine, and how a stop halts them.
#[derive(Debug, Default)]
pub(crate) struct Drivers {
    /// Every driver task this process started.
    pub(crate) tasks: TaskTracker,
    /// Fired when the grace is over: the drivers still running stop.
    pub(crate) halt: CancellationToken,
    /// Set once a stop began: no new turn starts.
    stopping: AtomicBool,
    /// The sessions whose turns were halted.
    halted: Mutex<Vec<SessionId>>,
}

impl Drivers {
    /// Refuses a new turn once the engine is stopping.
    pub(crate) fn check_running(&self) -> Result<(), SessionError> {
        if self.stopping() {
            return Err(SessionError::ShuttingDown);
        }
        Ok(())
    }

    /// Whether a stop began.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Starts a stop: no new turn, no new driver.
    pub(crate) fn begin_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.tasks.close();
    }

    /// Records that the stop halted the turn of `session`.
    pub(crate) fn halted(&self, session: SessionId) {
        lock(&self.halted).push(session);
    }

    /// The sessions whose turns the stop halted.
    pub(crate) fn take_halted(&self) -> Vec<SessionId> {
        std::mem::take(&mut *lock(&self.halted))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
