//! Stopping the engine: new turns are refused, running ones get a grace to
//! finish, and those still running after it are halted and closed as
//! interrupted, as a recovery after a crash would close them (their
//! pending approvals and questions expire). Queued follow-ups stay queued:
//! the next start runs them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::core::EngineCore;
use crate::error::SessionError;
use crate::ids::SessionId;
use crate::runtime::SessionRuntime;

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
}

/// What [`SessionEngine::shutdown`](crate::SessionEngine::shutdown) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stopped {
    /// The sessions whose turns ran past the grace and were closed as
    /// interrupted; empty when every turn finished in time.
    pub interrupted: Vec<SessionId>,
}

/// Stops `core`'s drivers: see the module's documentation.
pub(crate) async fn stop(core: &EngineCore, grace: Duration) -> Stopped {
    let drivers = &core.drivers;
    drivers.stopping.store(true, Ordering::SeqCst);
    drivers.tasks.close();
    if tokio::time::timeout(grace, drivers.tasks.wait())
        .await
        .is_err()
    {
        drivers.halt.cancel();
        drivers.tasks.wait().await;
    }
    let interrupted = std::mem::take(&mut *lock(&drivers.halted));
    Stopped { interrupted }
}

/// Closes the turn of a driver the stop halted as interrupted (the task
/// that ran it is gone, so it is no longer this process's).
pub(crate) async fn close_halted(
    core: &EngineCore,
    runtime: &Arc<SessionRuntime>,
) -> Result<(), SessionError> {
    if let Some(local) = runtime.local() {
        runtime.release(&local.turn);
    }
    lock(&core.drivers.halted).push(runtime.id.clone());
    core.close_turns_older_than(runtime, Duration::ZERO).await?;
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
