//! The lease conformance suite: what every `Leases` implementation must do,
//! written once and run against each by `lease_suite!`.
//!
//! A test file does:
//!
//! ```ignore
//! mod lease_conformance;
//! lease_suite!(async { (Replicas::one(Arc::new(MemoryLeases::new())), ()) });
//! ```
//!
//! where `Replicas` holds two handles on the same leases (two connections to
//! the backend where there is one, standing for two processes) and the
//! second element keeps whatever the backend needs alive (a server) until
//! the test ends.
//!
//! Waits are derived from the leases' own expiry (`until_lapsed`), never
//! fixed sleeps; leases that must stay live during a step are taken for
//! long enough that a slow machine cannot let them lapse.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use roundtable_thread_stream::{Lease, LeaseError, Leases};
use tokio::sync::Barrier;

/// A lease meant to lapse during the test.
pub(crate) const SHORT: Duration = Duration::from_millis(300);
/// A lease meant to stay live for the whole test.
pub(crate) const LONG: Duration = Duration::from_secs(60);

/// Two handles on the same leases, standing for two processes.
pub(crate) struct Replicas {
    pub(crate) a: Arc<dyn Leases>,
    pub(crate) b: Arc<dyn Leases>,
}

impl Replicas {
    /// One handle for both (in-process leases).
    pub(crate) fn one(leases: Arc<dyn Leases>) -> Self {
        Self {
            a: leases.clone(),
            b: leases,
        }
    }

    /// The handle of contender `i`: the two alternate.
    fn pick(&self, i: usize) -> Arc<dyn Leases> {
        if i.is_multiple_of(2) {
            self.a.clone()
        } else {
            self.b.clone()
        }
    }
}

/// Runs each test of the suite with fresh leases from `$make`.
#[macro_export]
macro_rules! lease_suite {
    ($make:expr) => {
        $crate::lease_suite!(@tests $make;
            acquire_renew_release,
            a_live_lease_is_refused_to_everyone,
            a_lapsed_lease_is_taken_over_and_its_old_holder_loses_it,
            exactly_one_of_eight_concurrent_acquirers_wins,
            expired_lists_only_lapsed_leases,
            release_lets_another_acquire_at_once,
            releasing_or_handing_over_a_lost_lease_changes_nothing,
            a_handed_over_lease_is_listed_and_taken_at_once,
            keys_and_holders_are_checked,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                // The guard keeps what the leases need alive until the end.
                let (replicas, _guard) = $make.await;
                lease_conformance::$name(replicas).await;
            }
        )*
    };
}

/// Waits until `lease` has lapsed by this process's clock: its own expiry
/// decides, so the wait is as long as needed and no longer.
pub(crate) async fn until_lapsed(lease: &Lease) {
    let deadline = Instant::now() + lease.time_left() + Duration::from_secs(5);
    while !lease.is_expired() {
        assert!(
            Instant::now() < deadline,
            "the clock did not reach the expiry"
        );
        tokio::time::sleep(lease.time_left() + Duration::from_millis(1)).await;
    }
}

async fn acquire(leases: &Arc<dyn Leases>, key: &str, holder: &str, ttl: Duration) -> Lease {
    leases
        .acquire(key, holder, ttl)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{holder} could not acquire free key {key}"))
}

async fn refused(leases: &Arc<dyn Leases>, key: &str, holder: &str) -> bool {
    leases.acquire(key, holder, LONG).await.unwrap().is_none()
}

fn keys(leases: &[Lease]) -> Vec<&str> {
    leases.iter().map(|l| l.key.as_str()).collect()
}

pub(crate) async fn acquire_renew_release(r: Replicas) {
    let started = roundtable_thread_stream::lease::DEFAULT_LEASE_TTL;
    let lease = acquire(&r.a, "turn.s1", "alpha", started).await;
    assert_eq!(
        (lease.key.as_str(), lease.holder.as_str()),
        ("turn.s1", "alpha")
    );
    assert!(!lease.is_expired());
    let left = lease.time_left();
    assert!(left <= started && left > started / 2, "{left:?}");

    let renewed = r.a.renew(&lease, LONG).await.unwrap();
    assert_eq!(
        (renewed.key.as_str(), renewed.holder.as_str()),
        ("turn.s1", "alpha")
    );
    assert!(renewed.expires_at > lease.expires_at);
    assert_ne!(renewed.revision(), lease.revision());
    // The old handle is spent: only the newest one renews.
    assert!(matches!(
        r.a.renew(&lease, LONG).await,
        Err(LeaseError::Lost { key }) if key == "turn.s1"
    ));
    let again = r.b.renew(&renewed, LONG).await.unwrap();

    r.a.release(&again).await.unwrap();
    assert!(matches!(
        r.a.renew(&again, LONG).await,
        Err(LeaseError::Lost { .. })
    ));
    let next = acquire(&r.b, "turn.s1", "beta", LONG).await;
    assert_eq!(next.holder, "beta");
    assert!(r.a.expired().await.unwrap().is_empty());
}

pub(crate) async fn a_live_lease_is_refused_to_everyone(r: Replicas) {
    let lease = acquire(&r.a, "turn.s1", "alpha", LONG).await;
    assert!(refused(&r.b, "turn.s1", "beta").await);
    assert!(refused(&r.a, "turn.s1", "beta").await);
    // One key, one live lease: its own holder gets no second one.
    assert!(refused(&r.a, "turn.s1", "alpha").await);
    // Other keys are free.
    acquire(&r.b, "turn.s2", "beta", LONG).await;
    // The refusals changed nothing.
    r.a.renew(&lease, LONG).await.unwrap();
}

pub(crate) async fn a_lapsed_lease_is_taken_over_and_its_old_holder_loses_it(r: Replicas) {
    let old = acquire(&r.a, "turn.s1", "alpha", SHORT).await;
    until_lapsed(&old).await;
    let taken = acquire(&r.b, "turn.s1", "beta", LONG).await;
    assert_eq!(taken.holder, "beta");
    assert!(matches!(
        r.a.renew(&old, LONG).await,
        Err(LeaseError::Lost { key }) if key == "turn.s1"
    ));
    assert!(refused(&r.a, "turn.s1", "alpha").await);
    r.b.renew(&taken, LONG).await.unwrap();
}

/// Eight contenders on the two handles race for `key`; the winners.
async fn race(r: &Replicas, key: &str, round: usize) -> Vec<Lease> {
    let barrier = Arc::new(Barrier::new(8));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let leases = r.pick(i);
            let barrier = barrier.clone();
            let key = key.to_string();
            tokio::spawn(async move {
                barrier.wait().await;
                let holder = format!("contender-{round}-{i}");
                leases.acquire(&key, &holder, LONG).await.unwrap()
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        winners.extend(task.await.unwrap());
    }
    winners
}

pub(crate) async fn exactly_one_of_eight_concurrent_acquirers_wins(r: Replicas) {
    for round in 0..4 {
        // A free key (never used, then released)...
        let free = format!("turn.free-{}", round % 2);
        let winners = race(&r, &free, round).await;
        assert_eq!(winners.len(), 1, "round {round}, free key: {winners:?}");
        r.a.release(&winners[0]).await.unwrap();
        // ...and a key whose lease lapsed.
        let lapsed = format!("turn.lapsed-{round}");
        let old = acquire(&r.b, &lapsed, "old", SHORT).await;
        until_lapsed(&old).await;
        let winners = race(&r, &lapsed, round).await;
        assert_eq!(winners.len(), 1, "round {round}, lapsed key: {winners:?}");
        assert!(matches!(
            r.b.renew(&old, LONG).await,
            Err(LeaseError::Lost { .. })
        ));
        r.b.renew(&winners[0], LONG).await.unwrap();
    }
}

pub(crate) async fn expired_lists_only_lapsed_leases(r: Replicas) {
    assert!(r.a.expired().await.unwrap().is_empty());
    let first = acquire(&r.a, "turn.a", "alpha", SHORT).await;
    let live = acquire(&r.a, "turn.b", "alpha", LONG).await;
    let released = acquire(&r.b, "turn.c", "beta", SHORT).await;
    r.b.release(&released).await.unwrap();
    let second = acquire(&r.b, "turn.d", "beta", SHORT).await;
    until_lapsed(&first).await;
    until_lapsed(&second).await;

    for leases in [&r.a, &r.b] {
        let expired = leases.expired().await.unwrap();
        assert_eq!(keys(&expired), ["turn.a", "turn.d"], "{expired:?}");
        assert_eq!(expired[0], first);
        assert_eq!(expired[1], second);
    }
    // A listed lease is what a replica takes over.
    let taken = acquire(&r.b, "turn.a", "beta", LONG).await;
    assert_eq!(keys(&r.a.expired().await.unwrap()), ["turn.d"]);
    // Renewing a lapsed lease nobody took brings it back.
    r.b.renew(&second, LONG).await.unwrap();
    assert!(r.a.expired().await.unwrap().is_empty());
    r.a.renew(&live, LONG).await.unwrap();
    r.b.renew(&taken, LONG).await.unwrap();
}

pub(crate) async fn release_lets_another_acquire_at_once(r: Replicas) {
    for i in 0..3usize {
        let (holder, other) = if i.is_multiple_of(2) {
            (&r.a, &r.b)
        } else {
            (&r.b, &r.a)
        };
        let lease = acquire(holder, "turn.s1", &format!("holder-{i}"), LONG).await;
        assert!(refused(other, "turn.s1", "other").await);
        holder.release(&lease).await.unwrap();
        // Releasing twice is fine.
        holder.release(&lease).await.unwrap();
        let next = acquire(other, "turn.s1", "other", LONG).await;
        other.release(&next).await.unwrap();
    }
    assert!(r.a.expired().await.unwrap().is_empty());
}

pub(crate) async fn releasing_or_handing_over_a_lost_lease_changes_nothing(r: Replicas) {
    let old = acquire(&r.a, "turn.s1", "alpha", SHORT).await;
    until_lapsed(&old).await;
    let taken = acquire(&r.b, "turn.s1", "beta", LONG).await;
    r.a.release(&old).await.unwrap();
    r.a.hand_over(&old).await.unwrap();
    assert!(refused(&r.a, "turn.s1", "gamma").await);
    assert!(r.a.expired().await.unwrap().is_empty());
    let taken = r.b.renew(&taken, LONG).await.unwrap();

    // A lease released by its holder, then taken by another: the first
    // handle's release still leaves the new lease alone.
    r.b.release(&taken).await.unwrap();
    let third = acquire(&r.a, "turn.s1", "gamma", LONG).await;
    r.b.release(&taken).await.unwrap();
    r.b.hand_over(&taken).await.unwrap();
    assert!(refused(&r.b, "turn.s1", "delta").await);
    r.a.renew(&third, LONG).await.unwrap();
}

pub(crate) async fn a_handed_over_lease_is_listed_and_taken_at_once(r: Replicas) {
    let lease = acquire(&r.a, "turn.s1", "alpha", LONG).await;
    let other = acquire(&r.a, "turn.s2", "alpha", LONG).await;
    r.a.hand_over(&lease).await.unwrap();
    let expired = r.b.expired().await.unwrap();
    assert_eq!(keys(&expired), ["turn.s1"]);
    assert_eq!(expired[0].holder, "alpha");
    assert!(expired[0].expires_at <= lease.expires_at);
    // The handed-over handle is spent.
    assert!(matches!(
        r.a.renew(&lease, LONG).await,
        Err(LeaseError::Lost { .. })
    ));
    let taken = acquire(&r.b, "turn.s1", "beta", LONG).await;
    assert_eq!(taken.holder, "beta");
    assert!(r.b.expired().await.unwrap().is_empty());
    r.a.renew(&other, LONG).await.unwrap();
}

pub(crate) async fn keys_and_holders_are_checked(r: Replicas) {
    for key in ["", "a b", "a..b", ".a", "a*", "a>"] {
        assert!(
            matches!(
                r.a.acquire(key, "alpha", LONG).await,
                Err(LeaseError::InvalidKey { .. })
            ),
            "{key:?}"
        );
    }
    for holder in ["", "a\nb", "nul\0"] {
        assert!(
            matches!(
                r.a.acquire("turn.s1", holder, LONG).await,
                Err(LeaseError::InvalidHolder { .. })
            ),
            "{holder:?}"
        );
    }
    let odd = "session/2024=x_y-z.0";
    let lease = acquire(&r.a, odd, "replica 1 (pid 42) ü", LONG).await;
    let renewed = r.b.renew(&lease, LONG).await.unwrap();
    assert_eq!(renewed.holder, "replica 1 (pid 42) ü");
    r.b.release(&renewed).await.unwrap();
}

/// Twenty leases lapse; ten are taken over (five of those released by
/// their new holder), five of the rest released by their old one: the
/// backend lists five lapsed (the caller counts what it stores: ten).
#[cfg(any(feature = "nats", feature = "postgres"))]
pub(crate) async fn release_leaves_nothing_behind(r: &Replicas) {
    let mut held = Vec::new();
    for i in 0..20 {
        held.push(acquire(&r.a, &format!("turn.{i}"), "alpha", SHORT).await);
    }
    for lease in &held {
        until_lapsed(lease).await;
    }
    for lease in &held[..10] {
        let taken = acquire(&r.b, &lease.key, "beta", LONG).await;
        if lease.key.ends_with(['0', '2', '4', '6', '8']) {
            r.b.release(&taken).await.unwrap();
        }
        r.a.release(lease).await.unwrap();
    }
    for lease in &held[10..15] {
        r.a.release(lease).await.unwrap();
    }
    assert_eq!(r.b.expired().await.unwrap().len(), 5);
}

/// A lease held across `restart` of the backend is renewed by its holder
/// once the backend answers again, and stays refused to others.
#[cfg(any(feature = "nats", feature = "postgres"))]
pub(crate) async fn a_lease_outlives_a_restart(r: &Replicas, restart: impl FnOnce()) {
    let lease = acquire(&r.a, "turn.s1", "alpha", LONG).await;
    restart();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let renewed = loop {
        match r.a.renew(&lease, LONG).await {
            Ok(renewed) => break renewed,
            Err(e) => assert!(std::time::Instant::now() < deadline, "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(refused(&r.b, "turn.s1", "beta").await);
    r.b.release(&renewed).await.unwrap();
    assert!(!refused(&r.b, "turn.s1", "beta").await);
}
