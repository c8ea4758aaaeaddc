//! Which process runs a session's open turn: the holder of the session's
//! lease ([`roundtable_thread_stream::lease`]). The driver takes the lease
//! before it runs the session's turns, renews it while they run and gives
//! it up when they are done; a process that dies stops renewing, its lease
//! lapses and another process carries the turn on
//! ([`takeover`](crate::takeover)).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use roundtable_thread_stream::lease::{Lease, LeaseError, Leases};
use tokio_util::sync::CancellationToken;

use crate::ids::SessionId;

/// The prefix of a session's lease key.
const KEY_PREFIX: &str = "turn.";

/// How many times in a row taking a lease may fail on the backend before a
/// driver gives up.
const ACQUIRE_ATTEMPTS: u32 = 3;

/// The leases of one engine's turns: where they are kept, who this process
/// is, and their timing.
#[derive(Clone)]
pub(crate) struct TurnLeases {
    pub(crate) leases: Arc<dyn Leases>,
    /// This process's holder id (unique per engine).
    pub(crate) holder: String,
    /// How long a lease lasts unless renewed.
    pub(crate) ttl: Duration,
    /// How often a held lease is renewed (and lapsed ones looked for).
    pub(crate) renew_every: Duration,
}

/// How holding a lease around some work ended.
pub(crate) enum Held<T> {
    /// The work finished; the lease is still this process's.
    Done(T, Lease),
    /// The process is stopping: the work was dropped where it stood, and
    /// the lease (still this process's) is to be handed over.
    Stopped(Lease),
    /// The lease was lost (another process took it): the work was dropped
    /// where it stood and must not be closed by this process.
    Lost,
}

impl TurnLeases {
    /// The session a lease key names, if it names one.
    pub(crate) fn session_of(key: &str) -> Option<SessionId> {
        SessionId::parse(key.strip_prefix(KEY_PREFIX)?).ok()
    }

    /// Takes `session`'s lease: `None` when a live lease holds it (another
    /// process runs the session's turn).
    pub(crate) async fn acquire(&self, session: &SessionId) -> Result<Option<Lease>, LeaseError> {
        let key = format!("{KEY_PREFIX}{session}");
        let mut attempt = 0;
        loop {
            match self.leases.acquire(&key, &self.holder, self.ttl).await {
                Err(LeaseError::Store(error)) if attempt + 1 < ACQUIRE_ATTEMPTS => {
                    attempt += 1;
                    tracing::warn!(%session, %error, attempt, "taking a turn lease failed");
                    tokio::time::sleep(self.renew_every / 4).await;
                }
                taken => return taken,
            }
        }
    }

    /// Runs `work` while renewing `lease`; drops it when the lease is lost
    /// (or runs out while the backend cannot be reached), or when `stop`
    /// fires.
    pub(crate) async fn hold<T>(
        &self,
        mut lease: Lease,
        work: impl Future<Output = T>,
        stop: &CancellationToken,
    ) -> Held<T> {
        tokio::pin!(work);
        loop {
            let wait = self.renew_every.min(lease.time_left());
            tokio::select! {
                biased;
                () = stop.cancelled() => return Held::Stopped(lease),
                done = &mut work => return Held::Done(done, lease),
                () = tokio::time::sleep(wait) => {}
            }
            match self.leases.renew(&lease, self.ttl).await {
                Ok(renewed) => lease = renewed,
                Err(LeaseError::Store(error)) if !lease.is_expired() => {
                    tracing::warn!(key = lease.key, %error, "renewing a turn lease failed");
                }
                Err(error) => {
                    tracing::warn!(key = lease.key, %error, "a turn lease was lost: its turn stops here");
                    return Held::Lost;
                }
            }
        }
    }

    /// Gives `lease` up (the session's turns are done here).
    pub(crate) async fn release(&self, lease: &Lease) {
        if let Err(error) = self.leases.release(lease).await {
            tracing::warn!(key = lease.key, %error, "releasing a turn lease failed");
        }
    }

    /// Makes `lease` lapse now, so that another process carries the turn on
    /// at once (this one is stopping).
    pub(crate) async fn hand_over(&self, lease: &Lease) {
        if let Err(error) = self.leases.hand_over(lease).await {
            tracing::warn!(key = lease.key, %error, "handing a turn lease over failed");
        }
    }
}

/// A holder id for this process: unique even for several engines in one
/// process.
pub(crate) fn new_holder() -> String {
    format!("{}-{}", std::process::id(), uuid::Uuid::now_v7().simple())
}
