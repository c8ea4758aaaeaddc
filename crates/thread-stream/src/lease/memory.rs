//! `MemoryLeases`: leases in a map of the process, for the stores only one
//! process uses (memory, JSONL).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use super::{Lease, LeaseError, Leases, by_expiry, check_holder, check_key, expiry, now_ms};

/// [`Leases`] held in the process: a mutex-guarded map from key to lease.
/// For the memory and JSONL stores, whose threads one process owns; several
/// tasks of that process still get one holder per key.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use roundtable_thread_stream::Leases;
/// use roundtable_thread_stream::lease::{DEFAULT_LEASE_TTL, MemoryLeases};
///
/// let leases = MemoryLeases::new();
/// let lease = leases.acquire("turn.s1", "replica-a", DEFAULT_LEASE_TTL).await.unwrap();
/// let lease = lease.expect("nobody held it");
/// assert!(leases.acquire("turn.s1", "replica-b", DEFAULT_LEASE_TTL).await.unwrap().is_none());
/// leases.release(&lease).await.unwrap();
/// # });
/// ```
#[derive(Debug, Default)]
pub struct MemoryLeases {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    held: HashMap<String, Held>,
    /// The last revision given: revisions are never reused, so a handle
    /// from before a release never matches a later lease on the same key.
    last_revision: u64,
}

#[derive(Debug)]
struct Held {
    holder: String,
    expires_at: u64,
    revision: u64,
}

impl State {
    fn next_revision(&mut self) -> u64 {
        self.last_revision += 1;
        self.last_revision
    }

    /// The stored lease if `lease` is still its current handle.
    fn current(&mut self, lease: &Lease) -> Option<&mut Held> {
        self.held
            .get_mut(&lease.key)
            .filter(|held| held.revision == lease.revision)
    }
}

impl MemoryLeases {
    /// No leases.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change is made whole under the lock: a panic elsewhere
        // cannot leave the map half changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Leases for MemoryLeases {
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        check_key(key)?;
        check_holder(holder)?;
        let now = now_ms();
        let mut state = self.state();
        if state.held.get(key).is_some_and(|h| now < h.expires_at) {
            return Ok(None);
        }
        let revision = state.next_revision();
        let expires_at = expiry(now, ttl);
        state.held.insert(
            key.to_string(),
            Held {
                holder: holder.to_string(),
                expires_at,
                revision,
            },
        );
        Ok(Some(Lease::new(
            key.to_string(),
            holder.to_string(),
            expires_at,
            revision,
        )))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        let expires_at = expiry(now_ms(), ttl);
        let mut state = self.state();
        let revision = state.next_revision();
        let Some(held) = state.current(lease) else {
            return Err(LeaseError::Lost {
                key: lease.key.clone(),
            });
        };
        held.expires_at = expires_at;
        held.revision = revision;
        Ok(Lease::new(
            lease.key.clone(),
            lease.holder.clone(),
            expires_at,
            revision,
        ))
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        let mut state = self.state();
        if state.current(lease).is_some() {
            state.held.remove(&lease.key);
        }
        Ok(())
    }

    async fn hand_over(&self, lease: &Lease) -> Result<(), LeaseError> {
        let now = now_ms();
        let mut state = self.state();
        let revision = state.next_revision();
        if let Some(held) = state.current(lease) {
            held.expires_at = now;
            held.revision = revision;
        }
        Ok(())
    }

    async fn expired(&self) -> Result<Vec<Lease>, LeaseError> {
        let now = now_ms();
        let state = self.state();
        let lapsed = state
            .held
            .iter()
            .filter(|(_, held)| now >= held.expires_at)
            .map(|(key, held)| {
                Lease::new(
                    key.clone(),
                    held.holder.clone(),
                    held.expires_at,
                    held.revision,
                )
            })
            .collect();
        Ok(by_expiry(lapsed))
    }
}
