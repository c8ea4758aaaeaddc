//! Retry policy: exponential backoff with jitter, honouring `Retry-After`.
//! Retries happen only before the first byte of a response: once content
//! has streamed, a failure is reported, never replayed.

use std::fmt;
use std::sync::Arc;
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
    ///
    /// A positive `Retry-After` is waited for exactly (the server knows when
    /// its limit resets). A zero one (`Retry-After: 0`, or an HTTP-date
    /// already past) says there is nothing more to wait for, not that the
    /// client should hammer: the normal backoff applies.
    pub fn delay(
        &self,
        retry: u32,
        retry_after: Option<Duration>,
        random: f64,
    ) -> Option<Duration> {
        if let Some(after) = retry_after.filter(|a| !a.is_zero()) {
            return (after <= self.max_delay).then_some(after);
        }
        let exponent = i32::try_from(retry).unwrap_or(i32::MAX);
        let base = self.initial_delay.as_secs_f64() * self.multiplier.powi(exponent);
        let spread = 1.0 + self.jitter * (random.clamp(0.0, 1.0) * 2.0 - 1.0);
        let secs = (base * spread).min(self.max_delay.as_secs_f64()).max(0.0);
        Some(saturating_secs(secs).min(self.max_delay))
    }
}

/// `secs` seconds as a `Duration`, `Duration::MAX` when it holds no more
/// (a server may ask for any number of seconds); NaN and negatives are zero.
fn saturating_secs(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

/// A retry about to happen: the call failed before its response started
/// and will be sent again after `delay`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    /// Which retry this is (1 for the first).
    pub retry: u32,
    /// How many retries the policy allows.
    pub max_retries: u32,
    /// The wait before it.
    pub delay: Duration,
    /// Why the previous attempt failed.
    pub error: String,
}

/// Told about every retry of a call ([`StreamOptions::on_retry`]), before
/// its wait starts, so a host can show that a call is waiting and why.
///
/// [`StreamOptions::on_retry`]: crate::StreamOptions::on_retry
#[derive(Clone)]
pub struct RetryObserver(Arc<dyn Fn(&RetryNotice) + Send + Sync>);

impl RetryObserver {
    /// An observer calling `notify` (it runs on the call's task: keep it
    /// short and never block).
    pub fn new(notify: impl Fn(&RetryNotice) + Send + Sync + 'static) -> Self {
        Self(Arc::new(notify))
    }

    /// Tells the observer about `notice`.
    pub fn notify(&self, notice: &RetryNotice) {
        (self.0)(notice);
    }
}

impl fmt::Debug for RetryObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryObserver")
    }
}

/// Parses the wait a server asks for: `retry-after-ms` (milliseconds, a
/// common extension) when present and valid, else `Retry-After` as
/// delay-seconds or as an HTTP-date (RFC 9110 §10.2.3; the three date
/// formats HTTP allows: IMF-fixdate, RFC 850 and asctime). A date gives the
/// time from now until then, never negative: a date already past is a zero
/// wait. A wait longer than a `Duration` holds is `Duration::MAX` (which no
/// policy waits for). `None` when neither header holds a valid value.
// The HTTP transport is the only caller of this and of the two below.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn parse_retry_after(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
) -> Option<Duration> {
    parse_retry_after_at(retry_after, retry_after_ms, SystemTime::now())
}

/// [`parse_retry_after`] with "now" given, so an HTTP-date's wait can be
/// computed (and tested) against a fixed clock.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn parse_retry_after_at(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(saturating_secs(ms / 1000.0));
    }
    let value = retry_after?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| saturating_secs(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A cheap random number in `[0, 1)` for jitter (not for anything secret).
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) fn jitter_random() -> f64 {
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
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        assert_eq!(
            parse_retry_after(Some("3"), None),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_retry_after(Some("3"), Some("250")),
            Some(Duration::from_millis(250))
        );
        // A date in the past: nothing more to wait for.
        assert_eq!(
            parse_retry_after(Some("Fri, 31 Dec 1999 23:59:59 GMT"), None),
            Some(Duration::ZERO)
        );
    }

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
        assert_eq!(parse_retry_after(Some("soon"), None), None);
        assert_eq!(parse_retry_after(Some("-1"), None), None);
        assert_eq!(parse_retry_after(Some("inf"), Some("NaN")), None);
        assert_eq!(parse_retry_after(None, None), None);
    }

    #[test]
    fn a_wait_no_duration_holds_saturates_and_is_not_waited_for() {
        for (seconds, ms) in [
            (Some("1e20"), None),
            (Some("18446744073709551616"), None),
            (Some("99999999999999999999999999999"), None),
            (None, Some("1e300")),
            (Some("3"), Some("18446744073709551616000")),
        ] {
            let after = parse_retry_after(seconds, ms);
            assert_eq!(after, Some(Duration::MAX), "{seconds:?} {ms:?}");
            assert_eq!(RetryPolicy::default().delay(0, after, 0.5), None);
        }
        // A long wait that a Duration holds is kept as it is.
        assert_eq!(
            parse_retry_after(Some("1e15"), None),
            Some(Duration::from_secs(1_000_000_000_000_000))
        );
    }

    #[test]
    fn backoff_never_exceeds_a_policy_of_any_size() {
        let unbounded = RetryPolicy {
            max_delay: Duration::MAX,
            multiplier: 10.0,
            ..RetryPolicy::default()
        };
        let delays: Vec<Duration> = [0, 1, 30, 400, u32::MAX]
            .into_iter()
            .filter_map(|retry| unbounded.delay(retry, None, 1.0))
            .collect();
        assert_eq!(delays.len(), 5);
        assert_eq!(
            delays[..2],
            [Duration::from_millis(1200), Duration::from_secs(12)]
        );
        assert!(delays.is_sorted(), "{delays:?}");
        assert_eq!(delays[3..], [Duration::MAX, Duration::MAX]);
    }

    /// 1999-12-31T23:59:59Z, the date RFC 9110 uses.
    fn new_years_eve() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(946_684_799)
    }

    #[test]
    fn retry_after_dates_in_the_three_http_formats() {
        let now = new_years_eve() - Duration::from_millis(2500);
        for date in [
            "Fri, 31 Dec 1999 23:59:59 GMT",  // IMF-fixdate
            "Friday, 31-Dec-99 23:59:59 GMT", // obsolete RFC 850
            "Fri Dec 31 23:59:59 1999",       // obsolete asctime
            "  Fri, 31 Dec 1999 23:59:59 GMT ",
        ] {
            assert_eq!(
                parse_retry_after_at(Some(date), None, now),
                Some(Duration::from_millis(2500)),
                "{date}"
            );
        }
    }

    #[test]
    fn a_past_date_is_a_zero_wait_and_garbage_is_ignored() {
        let later = new_years_eve() + Duration::from_secs(3600);
        assert_eq!(
            parse_retry_after_at(Some("Fri, 31 Dec 1999 23:59:59 GMT"), None, later),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after_at(Some("Fri, 31 Dec 1999 23:59:59 GMT"), None, new_years_eve()),
            Some(Duration::ZERO)
        );
        for bad in [
            "Fri, 31 Dec 1999 23:59:59 CET",
            "31 Dec 1999",
            "Fri, 32 Dec 1999 23:59:59 GMT",
        ] {
            assert_eq!(parse_retry_after_at(Some(bad), None, later), None, "{bad}");
        }
        // retry-after-ms wins over a date; an invalid one falls back to it.
        let before = new_years_eve() - Duration::from_secs(10);
        assert_eq!(
            parse_retry_after_at(Some("Fri, 31 Dec 1999 23:59:59 GMT"), Some("40"), before),
            Some(Duration::from_millis(40))
        );
        assert_eq!(
            parse_retry_after_at(Some("Fri, 31 Dec 1999 23:59:59 GMT"), Some("x"), before),
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn a_zero_retry_after_keeps_the_normal_backoff() {
        let p = RetryPolicy {
            jitter: 0.0,
            ..RetryPolicy::default()
        };
        let past = parse_retry_after_at(
            Some("Fri, 31 Dec 1999 23:59:59 GMT"),
            None,
            new_years_eve() + Duration::from_secs(60),
        );
        assert_eq!(p.delay(1, past, 0.5), Some(Duration::from_secs(2)));
        assert_eq!(
            p.delay(1, Some(Duration::ZERO), 0.5),
            Some(Duration::from_secs(2))
        );
        // A date further away than max_delay is not waited for.
        let far = parse_retry_after_at(
            Some("Fri, 31 Dec 1999 23:59:59 GMT"),
            None,
            new_years_eve() - Duration::from_secs(3600),
        );
        assert_eq!(far, Some(Duration::from_secs(3600)));
        assert_eq!(p.delay(0, far, 0.5), None);
    }
}
