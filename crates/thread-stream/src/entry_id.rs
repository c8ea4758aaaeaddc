//! The ids [`NewEntry::new`](crate::NewEntry::new) gives: UUID v7 (RFC
//! 9562), as lowercase hyphenated text, made with one clock read for both
//! the id and the entry's timestamp.
//!
//! [`fresh_uuid_v7`] gives the same generator's UUIDs as numbers, for a
//! host's own ids.
//!
//! An id is 48 bits of Unix milliseconds, the version, a 12-bit counter in
//! `rand_a` (the RFC's method 1, a fixed-length dedicated counter), the
//! variant and 62 random bits in `rand_b`. The milliseconds and the counter
//! come from one atomic word shared by the process: each id takes the larger
//! of "now, counter 0" and "the last id's, plus one", so the ids one process
//! makes strictly increase in the order they are made, across threads too,
//! and sort as text in that order. A counter past 4095 carries into the
//! milliseconds (the RFC's rollover guard: the id's time runs ahead of the
//! clock until the clock catches up, and a clock set back does not make an
//! id go back). The random bits come from the thread's CSPRNG
//! ([`rand::random`]), so ids of different processes collide no more than
//! random ones.
//!
//! `uuid::Uuid::now_v7` gives the same properties with a shared context
//! behind a mutex, 128-bit divisions and its own clock read: about three
//! times the instructions, and an entry read the clock a second time for its
//! timestamp.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The milliseconds (high 52 bits, of which 48 are used) and the counter
/// (low 12 bits) of the last id made in this process.
static LAST_STAMP: AtomicU64 = AtomicU64::new(0);

/// Bits of the counter in `rand_a`.
const COUNTER_BITS: u32 = 12;

/// The largest Unix milliseconds a UUID v7 holds (48 bits).
const MAX_MILLIS: u64 = (1 << 48) - 1;

/// A fresh entry id and the time it was made, Unix milliseconds (the clock
/// as read, which the id's time may run ahead of, see the module's note).
pub(crate) fn fresh_entry_id() -> (Arc<str>, i64) {
    let (uuid, now) = fresh_uuid_v7_at();
    (Arc::from(hyphenated(uuid).as_str()), now)
}

/// A fresh UUID v7 (RFC 9562) as its 128 bits, from the generator the
/// entry ids come from: the ids one process makes, entry ids and these
/// together, strictly increase in the order they are made (see the
/// module's note), so a host that spells them as text of one fixed length
/// (`{:032x}`, or the hyphenated form) gets ids that sort by creation
/// time. One clock read, one atomic update and a draw from the thread's
/// random generator: no lock and no allocation.
///
/// ```
/// let first = roundtable_thread_stream::fresh_uuid_v7();
/// let second = roundtable_thread_stream::fresh_uuid_v7();
/// assert!(first < second);
/// assert_eq!(first >> 76 & 0xf, 7); // the version
/// ```
pub fn fresh_uuid_v7() -> u128 {
    fresh_uuid_v7_at().0
}

/// A fresh UUID v7 and the Unix milliseconds the clock read for it.
fn fresh_uuid_v7_at() -> (u128, i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(MAX_MILLIS)) as u64);
    let stamp = next_stamp(&LAST_STAMP, now);
    let random: u64 = rand::random();
    (uuid_v7(stamp, random), now as i64)
}

/// The (milliseconds, counter) stamp of the next id: `now` with a counter
/// of 0 if that is past the last one made (in `last_stamp`), else the last
/// one plus one.
fn next_stamp(last_stamp: &AtomicU64, now_millis: u64) -> u64 {
    let candidate = now_millis << COUNTER_BITS;
    let mut last = last_stamp.load(Ordering::Relaxed);
    loop {
        let next = if candidate > last {
            candidate
        } else {
            last + 1
        };
        match last_stamp.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// The 128 bits of a UUID v7 with `stamp`'s milliseconds and counter and
/// 62 of `random`'s bits.
fn uuid_v7(stamp: u64, random: u64) -> u128 {
    let millis = u128::from((stamp >> COUNTER_BITS) & MAX_MILLIS);
    let counter = u128::from(stamp & ((1 << COUNTER_BITS) - 1));
    let rand_b = u128::from(random >> 2);
    (millis << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand_b
}

/// Two lowercase hex digits of every byte. The entry ids' own, because an
/// id is made for every entry: written from this table, an id's text costs
/// about 93 instructions, against about 150 through the `hex` crate and 181
/// through `uuid`'s formatter.
static HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0xf]];
        byte += 1;
    }
    pairs
};

/// A UUID's text, `8-4-4-4-12` lowercase hex digits.
struct Hyphenated([u8; 36]);

impl Hyphenated {
    fn as_str(&self) -> &str {
        // Only ASCII hex digits and hyphens are written (every byte of
        // `HEX_PAIRS` and the `-`s), so this never fails.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

fn hyphenated(uuid: u128) -> Hyphenated {
    let bytes = uuid.to_be_bytes();
    let mut text = [b'-'; 36];
    let mut at = 0;
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            at += 1;
        }
        text[at..at + 2].copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
        at += 2;
    }
    Hyphenated(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuid_v7_text_the_uuid_crate_reads_back() {
        let (id, at) = fresh_entry_id();
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(&*parsed.hyphenated().to_string(), &*id);
        let (seconds, nanos) = parsed.get_timestamp().unwrap().to_unix();
        let id_millis = seconds as i64 * 1000 + i64::from(nanos / 1_000_000);
        assert!(id_millis >= at, "{id_millis} < {at}");
    }

    #[test]
    fn the_text_is_the_uuid_crates_text_of_the_same_bits() {
        for bits in [0, u128::MAX, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210] {
            assert_eq!(
                hyphenated(bits).as_str(),
                uuid::Uuid::from_u128(bits).hyphenated().to_string()
            );
        }
        let stamp = (0x0192_3456_789a << COUNTER_BITS) | 0xabc;
        let uuid = uuid::Uuid::from_u128(uuid_v7(stamp, u64::MAX));
        assert_eq!(uuid.to_string(), "01923456-789a-7abc-bfff-ffffffffffff");
    }

    #[test]
    fn ids_strictly_increase_across_threads() {
        let per_thread: Vec<Vec<Arc<str>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..5000).map(|_| fresh_entry_id().0).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for ids in &per_thread {
            assert!(ids.windows(2).all(|pair| pair[0] < pair[1]));
        }
        let mut all: Vec<&Arc<str>> = per_thread.iter().flatten().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 4 * 5000);
    }

    #[test]
    fn a_full_counter_carries_into_the_milliseconds_and_a_clock_set_back_does_not_go_back() {
        let last_stamp = AtomicU64::new(0);
        let now = 1_800_000_000_000;
        let first = next_stamp(&last_stamp, now);
        assert_eq!(first, now << COUNTER_BITS);
        let mut last = first;
        for _ in 0..5000 {
            let next = next_stamp(&last_stamp, now);
            assert_eq!(next, last + 1);
            last = next;
        }
        assert_eq!(last >> COUNTER_BITS, now + 1);
        assert_eq!(next_stamp(&last_stamp, now - 5), last + 1);
        assert_eq!(next_stamp(&last_stamp, now + 2), (now + 2) << COUNTER_BITS);
    }
}
