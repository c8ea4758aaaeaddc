//! Carrying on the turns whose process stopped: every renewal interval an
//! engine with leases looks for lapsed turn leases, takes each with a
//! compare-and-set (of several processes, exactly one wins) and carries its
//! session's open turn on from what the turn stored
//! ([`continuation`](crate::continuation)), then the session's queue.

use std::sync::Arc;

use roundtable_thread_stream::StoreError;

use crate::caller::Caller;
use crate::core::EngineCore;
use crate::error::SessionError;
use crate::ids::SessionId;
use crate::turn_driver;
use crate::turn_lease;
use roundtable_chat_runner::lifecycle::TurnLeases;

/// Looks for lapsed turn leases and takes them over until the engine stops.
pub(crate) async fn run(core: Arc<EngineCore>) {
    let Some(leases) = core.leases.clone() else {
        return;
    };
    loop {
        tokio::select! {
            () = core.drivers.halt.cancelled() => return,
            () = tokio::time::sleep(leases.renew_every()) => {}
        }
        if core.drivers.stopping() {
            return;
        }
        let lapsed = match leases.expired().await {
            Ok(lapsed) => lapsed,
            Err(error) => {
                tracing::warn!(%error, "looking for lapsed turn leases failed");
                continue;
            }
        };
        for lease in lapsed {
            let Some(session) = turn_lease::session_of(&lease.key) else {
                continue;
            };
            if let Err(error) = take_over(&core, &leases, &session).await {
                tracing::warn!(%session, %error, "taking a turn over failed");
            }
        }
    }
}

/// Takes `session`'s lease when no live process holds it, then carries its
/// open turn on, or runs its queue. True when it took the session over.
pub(crate) async fn take_over(
    core: &Arc<EngineCore>,
    leases: &TurnLeases,
    session: &SessionId,
) -> Result<bool, SessionError> {
    if core.drivers.stopping() {
        return Ok(false);
    }
    let Some(lease) = leases
        .acquire(&turn_lease::key_of(session))
        .await
        .map_err(|e| SessionError::Store(StoreError::Backend(e.to_string())))?
    else {
        return Ok(false);
    };
    let work = match pending_work(core, session).await {
        Ok(work) => work,
        Err(error) => {
            leases.release(&lease).await;
            return Err(error);
        }
    };
    let Some((runtime, turn)) = work else {
        leases.release(&lease).await;
        return Ok(false);
    };
    match turn {
        Some(turn) => {
            tracing::info!(%session, %turn, "carrying on a turn whose process stopped");
            runtime.claim(turn);
        }
        None => runtime.request_resume(),
    }
    turn_driver::carry_on(core.clone(), runtime, lease);
    Ok(true)
}

/// What is left to do in `session`: its runtime with the open turn to
/// carry on, or with no turn when only its queue waits; `None` when
/// nothing is (or the session is gone).
async fn pending_work(
    core: &EngineCore,
    session: &SessionId,
) -> Result<Option<(Arc<crate::runtime::SessionRuntime>, Option<Arc<str>>)>, SessionError> {
    let runtime = match core.runtime(&Caller::Host, session.as_str()).await {
        Ok(runtime) => runtime,
        Err(SessionError::UnknownSession(_)) => return Ok(None),
        Err(error) => return Err(error),
    };
    let state = runtime.refresh(&*core.store).await?;
    let open = state.running_turn().map(|t| t.id.clone());
    let queued = !state.queue.is_empty();
    drop(state);
    Ok(match open {
        Some(turn) => Some((runtime, Some(turn))),
        None if queued => Some((runtime, None)),
        None => None,
    })
}
