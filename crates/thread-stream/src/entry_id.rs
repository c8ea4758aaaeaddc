//! The ids [`NewEntry::new`](crate::NewEntry::new) gives: UUID v7 (RFC
//! 9562) from [`uuid::Uuid::now_v7`], as lowercase hyphenated text.
//!
//! The ids one process makes strictly increase in the order they are made,
//! across threads too (the `uuid` crate keeps one shared context for that),
//! so their text, of one fixed length, sorts in that order.
//! [`fresh_uuid_v7`] gives the same generator's UUIDs as numbers, for a
//! host's own ids.

use std::sync::Arc;

use uuid::Uuid;

/// A fresh entry id and the time it was made, Unix milliseconds. The clock
/// is read before the id is made, so the id's time is never earlier than
/// the entry's timestamp.
pub(crate) fn fresh_entry_id() -> (Arc<str>, i64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut text = Uuid::encode_buffer();
    let id = Uuid::now_v7().hyphenated().encode_lower(&mut text);
    (Arc::from(&*id), now)
}

/// A fresh UUID v7 (RFC 9562) as its 128 bits, from the generator the
/// entry ids come from: the ids one process makes, entry ids and these
/// together, strictly increase in the order they are made, so a host that
/// spells them as text of one fixed length (`{:032x}`, or the hyphenated
/// form) gets ids that sort by creation time.
///
/// ```
/// let first = roundtable_thread_stream::fresh_uuid_v7();
/// let second = roundtable_thread_stream::fresh_uuid_v7();
/// assert!(first < second);
/// assert_eq!(first >> 76 & 0xf, 7); // the version
/// ```
pub fn fresh_uuid_v7() -> u128 {
    Uuid::now_v7().as_u128()
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
}
