//! Which process runs an open turn: the holder of the turn's lease
//! ([`roundtable_thread_stream::lease`]). A runner takes the lease before
//! it opens a turn, renews it while the turn runs and gives it up when the
//! turn is closed; a process that dies stops renewing, its lease lapses and
//! another process sharing the leases takes the turn over.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use roundtable_thread_stream::lease::{
    DEFAULT_LEASE_TTL, DEFAULT_RENEW_EVERY, Lease, LeaseError, Leases,
};
use tokio_util::sync::CancellationToken;

/// How many times in a row taking a lease may fail on the backend before
/// [`TurnLeases::acquire`] gives up.
const ACQUIRE_ATTEMPTS: u32 = 3;

/// The turn leases of one runner: where they are kept, who this runner is,
/// and their timing.
#[derive(Clone)]
pub struct TurnLeases {
    leases: Arc<dyn Leases>,
    /// This runner's holder id (unique per runner, even in one process).
    holder: String,
    ttl: Duration,
    renew_every: Duration,
}

impl std::fmt::Debug for TurnLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnLeases")
            .field("holder", &self.holder)
            .field("ttl", &self.ttl)
            .field("renew_every", &self.renew_every)
            .finish_non_exhaustive()
    }
}

/// How holding a lease around some work ended.
#[derive(Debug)]
pub enum Held<T> {
    /// The work finished; the lease is still this runner's.
    Done(T, Lease),
    /// The runner is stopping: the work was dropped where it stood, and
    /// the lease (still this runner's) is to be handed over.
    Stopped(Lease),
    /// The lease was lost (another process took it): the work was dropped
    /// where it stood and must not be closed by this runner.
    Lost,
}

impl TurnLeases {
    /// Turn leases kept in `leases`, with the default timing
    /// ([`DEFAULT_LEASE_TTL`], renewed every [`DEFAULT_RENEW_EVERY`]).
    pub fn new(leases: Arc<dyn Leases>) -> Self {
        Self {
            leases,
            holder: format!("{}-{}", std::process::id(), uuid::Uuid::now_v7().simple()),
            ttl: DEFAULT_LEASE_TTL,
            renew_every: DEFAULT_RENEW_EVERY,
        }
    }

    /// A lease lasts `ttl` unless renewed, and is renewed every
    /// `renew_every` (at most a third of `ttl`, so that two renewals in a
    /// row may fail before it lapses).
    pub fn timing(mut self, ttl: Duration, renew_every: Duration) -> Self {
        self.ttl = ttl;
        self.renew_every = renew_every.min(ttl / 3);
        self
    }

    /// How often a held lease is renewed (and lapsed ones looked for).
    pub fn renew_every(&self) -> Duration {
        self.renew_every
    }

    /// How long a lease lasts unless renewed.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The leases that lapsed: the turns a process left to be taken over.
    pub async fn expired(&self) -> Result<Vec<Lease>, LeaseError> {
        self.leases.expired().await
    }

    /// Takes `key`: `None` when a live lease holds it (another runner's
    /// turn). A backend error is retried twice before it is returned.
    pub async fn acquire(&self, key: &str) -> Result<Option<Lease>, LeaseError> {
        let mut attempt = 0;
        loop {
            match self.leases.acquire(key, &self.holder, self.ttl).await {
                Err(LeaseError::Store(error)) if attempt + 1 < ACQUIRE_ATTEMPTS => {
                    attempt += 1;
                    tracing::warn!(key, %error, attempt, "taking a turn lease failed");
                    tokio::time::sleep(self.renew_every / 4).await;
                }
                taken => return taken,
            }
        }
    }

    /// Runs `work` while renewing `lease`; drops it when the lease is lost
    /// (or runs out while the backend cannot be reached), or when `stop`
    /// fires.
    pub async fn hold<T>(
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

    /// Gives `lease` up (its turn is closed).
    pub async fn release(&self, lease: &Lease) {
        if let Err(error) = self.leases.release(lease).await {
            tracing::warn!(key = lease.key, %error, "releasing a turn lease failed");
        }
    }

    /// Makes `lease` lapse now, so that another process takes the turn
    /// over at once (this one is stopping).
    pub async fn hand_over(&self, lease: &Lease) {
        if let Err(error) = self.leases.hand_over(lease).await {
            tracing::warn!(key = lease.key, %error, "handing a turn lease over failed");
        }
    }
}
