//! A circuit breaker per provider: after too many failures calls fail fast
//! for a while, then one probe call decides whether to close again.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When the breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    /// Open when at least this fraction of the recent calls failed.
    pub failure_ratio: f64,
    /// ... and at least this many calls were seen.
    pub min_calls: usize,
    /// How many recent calls are counted.
    pub window: usize,
    /// How long the breaker stays open before a probe call is let through.
    pub open_for: Duration,
    /// How long a call may take to get its response before it counts as a
    /// failure (the default when the call sets no timeout).
    pub call_timeout: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_ratio: 0.5,
            min_calls: 5,
            window: 20,
            open_for: Duration::from_secs(30),
            call_timeout: Duration::from_secs(30),
        }
    }
}

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls fail fast until the instant passes.
    Open {
        /// When a probe call is let through.
        until: Instant,
    },
    /// One probe call is in flight (or may start).
    HalfOpen {
        /// Whether the probe has started.
        probing: bool,
    },
}

#[derive(Debug)]
struct Inner {
    state: BreakerState,
    outcomes: VecDeque<bool>,
}

/// A circuit breaker. The `_at` methods take the current instant, so the
/// logic is testable without waiting.
#[derive(Debug)]
pub struct CircuitBreaker {
    config: BreakerConfig,
    inner: Mutex<Inner>,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self::new(BreakerConfig::default())
    }
}

impl CircuitBreaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                outcomes: VecDeque::new(),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The state at `now` (an open breaker whose time is up is half-open).
    pub fn state_at(&self, now: Instant) -> BreakerState {
        match self.inner.lock() {
            Ok(inner) => match inner.state {
                BreakerState::Open { until } if now >= until => {
                    BreakerState::HalfOpen { probing: false }
                }
                s => s,
            },
            Err(_) => BreakerState::Closed,
        }
    }

    /// Whether a call may start now.
    pub fn try_acquire(&self) -> bool {
        self.try_acquire_at(Instant::now())
    }

    /// Whether a call may start at `now`; in half-open state only the first
    /// caller (the probe) may.
    pub fn try_acquire_at(&self, now: Instant) -> bool {
        let Ok(mut inner) = self.inner.lock() else {
            return true;
        };
        match inner.state {
            BreakerState::Closed => true,
            BreakerState::Open { until } if now >= until => {
                inner.state = BreakerState::HalfOpen { probing: true };
                true
            }
            BreakerState::Open { .. } => false,
            BreakerState::HalfOpen { probing: false } => {
                inner.state = BreakerState::HalfOpen { probing: true };
                true
            }
            BreakerState::HalfOpen { probing: true } => false,
        }
    }

    /// Records a call's outcome now.
    pub fn record(&self, success: bool) {
        self.record_at(success, Instant::now());
    }

    /// Records a call's outcome at `now`.
    pub fn record_at(&self, success: bool, now: Instant) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if let BreakerState::HalfOpen { .. } = inner.state {
            inner.outcomes.clear();
            inner.state = if success {
                BreakerState::Closed
            } else {
                BreakerState::Open {
                    until: open_until(now, self.config.open_for),
                }
            };
            return;
        }
        inner.outcomes.push_back(success);
        while inner.outcomes.len() > self.config.window.max(1) {
            inner.outcomes.pop_front();
        }
        let calls = inner.outcomes.len();
        let failures = inner.outcomes.iter().filter(|ok| !**ok).count();
        if calls >= self.config.min_calls
            && failures as f64 >= self.config.failure_ratio * calls as f64
            && failures > 0
        {
            inner.state = BreakerState::Open {
                until: open_until(now, self.config.open_for),
            };
            inner.outcomes.clear();
        }
    }
}

/// When a breaker opened at `now` for `open_for` lets its probe through.
/// An `open_for` past what an `Instant` can hold (`Duration::MAX` for "until
/// restarted") keeps it open for a century rather than panicking.
fn open_until(now: Instant, open_for: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);
    now.checked_add(open_for)
        .or_else(|| now.checked_add(CENTURY))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_at_half_failures_over_five_calls_then_probes() {
        let b = CircuitBreaker::default();
        let t0 = Instant::now();
        for ok in [true, false, true, false] {
            assert!(b.try_acquire_at(t0));
            b.record_at(ok, t0);
        }
        assert_eq!(b.state_at(t0), BreakerState::Closed);
        b.record_at(false, t0); // 3 of 5 failed
        assert!(!b.try_acquire_at(t0 + Duration::from_secs(29)));
        let later = t0 + Duration::from_secs(30);
        assert!(b.try_acquire_at(later), "the probe goes through");
        assert!(!b.try_acquire_at(later), "only one probe");
        b.record_at(false, later);
        assert!(!b.try_acquire_at(later + Duration::from_secs(1)));
        let again = later + Duration::from_secs(30);
        assert!(b.try_acquire_at(again));
        b.record_at(true, again);
        assert_eq!(b.state_at(again), BreakerState::Closed);
    }

    #[test]
    fn an_open_time_past_any_instant_keeps_it_open() {
        let b = CircuitBreaker::new(BreakerConfig {
            min_calls: 1,
            open_for: Duration::MAX,
            ..BreakerConfig::default()
        });
        let t0 = Instant::now();
        b.record_at(false, t0);
        let decade = Duration::from_secs(10 * 365 * 24 * 60 * 60);
        assert!(!b.try_acquire_at(t0 + decade));
        assert!(matches!(b.state_at(t0), BreakerState::Open { .. }));
    }

    #[test]
    fn stays_closed_below_min_calls() {
        let b = CircuitBreaker::default();
        let t0 = Instant::now();
        for _ in 0..4 {
            b.record_at(false, t0);
        }
        assert!(b.try_acquire_at(t0));
    }
}
