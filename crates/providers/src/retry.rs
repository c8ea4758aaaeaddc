//! Retry policy: exponential backoff with jitter, honouring `Retry-After`.
//! Retries happen only before the first byte of a response: once content
//! has streamed, a failure is reported, never replayed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// When and how often to retry a request that failed before its response
/// started (429, 5xx, overloaded, connection errors, timeouts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The delay before the first retry.
    pub initial_delay: Duration,
    /// The longest delay; a `Retry-After` longer than this is not waited
    /// for (the error is returned instead).
    pub max_delay: Duration,
    /// Growth of the delay per retry.
    pub multiplier: f64,
    /// Random spread of each delay, as a fraction (0.2 = ±20%).
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            multiplier: 2.0,
            jitter: 0.2,
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The wait before retry number `retry` (0 for the first), given the
    /// server's `Retry-After` and a random number in `[0, 1)`; `None` when
    /// the server asks for longer than `max_delay`.
    pub fn delay(
        &self,
        retry: u32,
        retry_after: Option<Duration>,
        random: f64,
    ) -> Option<Duration> {
        if let Some(after) = retry_after {
            return (after <= self.max_delay).then_some(after);
        }
        let base = self.initial_delay.as_secs_f64() * self.multiplier.powi(retry as i32);
        let spread = 1.0 + self.jitter * (random.clamp(0.0, 1.0) * 2.0 - 1.0);
        let secs = (base * spread).min(self.max_delay.as_secs_f64()).max(0.0);
        Some(Duration::from_secs_f64(secs))
    }
}

/// Parses `Retry-After` (delay-seconds) or `retry-after-ms` header values.
pub fn parse_retry_after(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    retry_after
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// A cheap random number in `[0, 1)` for jitter (not for anything secret).
pub fn jitter_random() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9E37_79B9_7F4A_7C15);
    let mut x = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            jitter: 0.0,
            max_delay: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        assert_eq!(p.delay(0, None, 0.5), Some(Duration::from_secs(1)));
        assert_eq!(p.delay(1, None, 0.5), Some(Duration::from_secs(2)));
        assert_eq!(p.delay(5, None, 0.5), Some(Duration::from_secs(5)));
    }

    #[test]
    fn jitter_spreads_the_delay() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, None, 0.0), Some(Duration::from_secs_f64(0.8)));
        assert_eq!(p.delay(0, None, 1.0), Some(Duration::from_secs_f64(1.2)));
        let r = jitter_random();
        assert!((0.0..1.0).contains(&r));
    }

    #[test]
    fn retry_after_wins_unless_too_long() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(2)), 0.5),
            Some(Duration::from_secs(2))
        );
        assert_eq!(p.delay(0, Some(Duration::from_secs(600)), 0.5), None);
        assert_eq!(
            parse_retry_after(Some("3"), None),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after(Some("3"), Some("250")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            None
        );
    }
}
