//! Leases: which process holds a key (a running turn, say) and until when,
//! kept in the store's own coordination primitive so that processes sharing
//! a store agree on it and one may take over the work of another that died.
//!
//! A holder [acquires](Leases::acquire) a key for a time, [renews](Leases::renew)
//! it while it works, and [releases](Leases::release) it when done (or
//! [hands it over](Leases::hand_over) when another process should carry the
//! work on). A holder that stops renewing, because its process died, lets
//! the lease lapse: [`Leases::expired`] lists it, and any process may
//! acquire it. Every change is a compare-and-set on the lease's revision, so
//! of several processes racing for one key exactly one wins, and a holder
//! whose lease was taken learns it at its next renewal
//! ([`LeaseError::Lost`]).
//!
//! # Clocks
//!
//! A lease's expiry is a wall-clock time (milliseconds since the Unix epoch)
//! written by its holder and compared, by whoever acts on it, with that
//! process's own clock. Leases therefore assume the clocks of the processes
//! sharing a store agree within a second or so (NTP does far better): a
//! clock running ahead by `d` sees every lease lapse `d` early, which eats
//! into the margin between [`DEFAULT_RENEW_EVERY`] and [`DEFAULT_LEASE_TTL`].
//!
//! # Implementations
//!
//! - [`MemoryLeases`]: a map in the process, for the memory and JSONL
//!   stores (one process owns their threads);
//! - `NatsLeases` (feature `nats`): a NATS JetStream KV bucket;
//! - `PostgresLeases` (feature `postgres`): a table next to the store's.
//!
//! After a backend error ([`LeaseError::Store`]) the outcome of a write is
//! unknown: a lease it may have written lapses by itself, and a lease it may
//! have changed reports [`LeaseError::Lost`] at its next renewal. Neither
//! ever gives a key two holders.

mod memory;
#[cfg(feature = "nats")]
mod nats;
#[cfg(feature = "postgres")]
mod postgres;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

pub use memory::MemoryLeases;
#[cfg(feature = "nats")]
pub use nats::{NatsLeaseOptions, NatsLeases};
#[cfg(feature = "postgres")]
pub(crate) use postgres::LeaseStatements;
#[cfg(feature = "postgres")]
pub use postgres::PostgresLeases;

use crate::StoreError;

/// How long a lease lasts unless renewed: 15 s. Long enough that a holder
/// rides out a slow renewal (a NATS leader election or a PostgreSQL
/// reconnect takes a few seconds), short enough that work whose process
/// died is taken over within seconds rather than minutes.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// How often a holder renews its lease: 5 s, a third of
/// [`DEFAULT_LEASE_TTL`], so that two renewals in a row may fail before the
/// lease lapses.
pub const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(5);

/// Longest lease key and holder accepted.
const MAX_LEN: usize = 255;

/// A key held by one holder until a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// What is held, e.g. `turn.<session>`.
    pub key: String,
    /// Who holds it: an id unique to the holding process.
    pub holder: String,
    /// When it lapses unless renewed: milliseconds since the Unix epoch, by
    /// the holder's clock.
    pub expires_at: u64,
    /// The version of the stored lease this handle knows; every change
    /// makes a new one.
    revision: u64,
}

impl Lease {
    /// A lease as a [`Leases`] implementation stored it; `revision` is what
    /// its next compare-and-set expects.
    pub fn new(key: String, holder: String, expires_at: u64, revision: u64) -> Self {
        Self {
            key,
            holder,
            expires_at,
            revision,
        }
    }

    /// The stored version this handle knows (opaque: only compared for
    /// equality by the implementation that made it).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Whether the lease has lapsed by this process's clock.
    pub fn is_expired(&self) -> bool {
        now_ms() >= self.expires_at
    }

    /// How long until the lease lapses by this process's clock (zero once it
    /// has).
    pub fn time_left(&self) -> Duration {
        Duration::from_millis(self.expires_at.saturating_sub(now_ms()))
    }
}

/// What can go wrong with a lease.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The lease is no longer this holder's: another holder took it after it
    /// lapsed, or it was released. The work it guarded must stop.
    #[error("lease {key} was lost to another holder")]
    Lost {
        /// The lease's key.
        key: String,
    },
    /// The key cannot name a lease.
    #[error("invalid lease key {key:?}: {reason}")]
    InvalidKey {
        /// The key (cut to its first 263 characters).
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The holder id cannot be stored.
    #[error("invalid lease holder {holder:?}: {reason}")]
    InvalidHolder {
        /// The holder id (cut to its first 263 characters).
        holder: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The backend failed (connection, server error, an unreadable stored
    /// lease).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Leases on keys, shared by every process using the same backend.
///
/// Keys are 1 to 255 characters of `A-Z a-z 0-9 _ - = /` and interior
/// single dots; holder ids are 1 to 255 characters without control
/// characters. Every implementation takes the same keys and holders.
/// Expiry is judged by the clock of the process that asks, so the processes
/// sharing leases need clocks that agree within a second or so (see the
/// [module documentation](self)).
#[async_trait]
pub trait Leases: Send + Sync {
    /// Takes `key` for `holder` for `ttl`, if nobody holds it or its lease
    /// has lapsed. `None` when a live lease holds it, whoever its holder
    /// (this one too: one key, one live lease). Of several processes racing
    /// for one key, exactly one gets it.
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError>;

    /// Extends `lease` to `ttl` from now, returning the new handle (the old
    /// one is spent). [`LeaseError::Lost`] when the lease changed since this
    /// handle was made (another holder took it, or it was released); a
    /// lease that lapsed but that nobody took is renewed.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError>;

    /// Gives `lease` up and forgets its key, so another process may acquire
    /// it at once. Releasing a lease that was already lost changes nothing
    /// and is not an error.
    async fn release(&self, lease: &Lease) -> Result<(), LeaseError>;

    /// Makes `lease` lapse now but keeps its key, so that [`Leases::expired`]
    /// lists it at once and another process takes the work over (a process
    /// shutting down with work unfinished). Handing over a lease already
    /// lost changes nothing and is not an error.
    async fn hand_over(&self, lease: &Lease) -> Result<(), LeaseError>;

    /// The leases that lapsed by this process's clock (what a process may
    /// take over with [`Leases::acquire`]), by expiry. Its cost grows with
    /// the number of leases held, never with the number of keys ever used.
    async fn expired(&self) -> Result<Vec<Lease>, LeaseError>;
}

/// Now, in milliseconds since the Unix epoch, by this process's clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// When a lease taken at `now` for `ttl` lapses.
pub(crate) fn expiry(now: u64, ttl: Duration) -> u64 {
    now.saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

/// Checks a lease key (see [`Leases`]): the rules make it a NATS KV key and
/// a subject token sequence as it is.
pub(crate) fn check_key(key: &str) -> Result<(), LeaseError> {
    let reason = if key.is_empty() {
        Some("is empty")
    } else if key.len() > MAX_LEN {
        Some("is longer than 255 characters")
    } else if !key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'=' | b'/' | b'.'))
    {
        Some("may hold only A-Z, a-z, 0-9, '_', '-', '=', '/' and '.'")
    } else if key.starts_with('.') || key.ends_with('.') || key.contains("..") {
        Some("may not start or end with '.' or hold '..'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(LeaseError::InvalidKey {
            key: key.chars().take(MAX_LEN + 8).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a holder id (see [`Leases`]).
pub(crate) fn check_holder(holder: &str) -> Result<(), LeaseError> {
    let reason = if holder.is_empty() {
        Some("is empty")
    } else if holder.len() > MAX_LEN {
        Some("is longer than 255 characters")
    } else if holder.chars().any(char::is_control) {
        Some("may not hold control characters")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(LeaseError::InvalidHolder {
            holder: holder.chars().take(MAX_LEN + 8).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Sorts leases by expiry, then key: the order [`Leases::expired`] gives.
pub(crate) fn by_expiry(mut leases: Vec<Lease>) -> Vec<Lease> {
    leases.sort_by(|a, b| (a.expires_at, &a.key).cmp(&(b.expires_at, &b.key)));
    leases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        for good in ["turn.s1", "a", "x/y=z_-", &"k".repeat(255)] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "a b",
            "a*",
            "a>",
            "ü",
            &"k".repeat(256),
        ] {
            assert!(
                matches!(check_key(bad), Err(LeaseError::InvalidKey { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn holders_are_checked() {
        assert!(check_holder("replica 1 (pid 42) ü").is_ok());
        for bad in ["", "a\nb", "nul\0", &"h".repeat(256)] {
            assert!(
                matches!(check_holder(bad), Err(LeaseError::InvalidHolder { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_defaults_allow_two_failed_renewals() {
        assert!(DEFAULT_RENEW_EVERY * 3 <= DEFAULT_LEASE_TTL);
    }

    #[test]
    fn expiry_saturates() {
        assert_eq!(expiry(5, Duration::from_millis(7)), 12);
        assert_eq!(expiry(u64::MAX - 1, Duration::from_secs(1)), u64::MAX);
    }
}
