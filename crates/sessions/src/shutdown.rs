//! Stopping the engine: new turns are refused, running ones get a grace to
//! finish, and those still running after it are halted and closed as
//! interrupted, as a recovery after a crash would close them (their
//! pending approvals and questions expire). Queued follow-ups stay queued:
//! the next start runs them.

use std::sync::Arc;
use std::time::Duration;

use crate::core::EngineCore;
use crate::error::SessionError;
use crate::ids::SessionId;
use crate::runtime::SessionRuntime;

/// What [`SessionEngine::shutdown`](crate::SessionEngine::shutdown) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stopped {
    /// The sessions whose turns ran past the grace and were closed as
    /// interrupted (with leases: handed over, still open, to the next
    /// process); empty when every turn finished in time.
    pub interrupted: Vec<SessionId>,
}

/// Stops `core`'s drivers: see the module's documentation.
pub(crate) async fn stop(core: &EngineCore, grace: Duration) -> Stopped {
    let drivers = &core.drivers;
    drivers.begin_stop();
    if tokio::time::timeout(grace, drivers.tasks.wait())
        .await
        .is_err()
    {
        drivers.halt.cancel();
        drivers.tasks.wait().await;
    }
    Stopped {
        interrupted: drivers.take_halted(),
    }
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
    core.drivers.halted(runtime.id.clone());
    core.close_turns_older_than(runtime, Duration::ZERO).await?;
    Ok(())
}
