//! One append batch as one JetStream message.
//!
//! The message's body is the batch's entries as JSONL, byte for byte the
//! lines the JSONL store writes for the same append (each line carries the
//! `more` batch marker). Two headers say where the batch sits in its thread
//! without parsing the body: `Roundtable-Seq` (the first entry's seq) and
//! `Roundtable-Count` (how many entries). Because a batch is one message, the
//! server stores it, replicates it and delivers it whole or not at all.

use async_nats::HeaderMap;
use bytes::Bytes;

use crate::entry::StoredLine;
use crate::{Entry, StoreError, ThreadId};

/// The header holding the batch's first seq.
pub(crate) const SEQ_HEADER: &str = "Roundtable-Seq";
/// The header holding the batch's entry count.
pub(crate) const COUNT_HEADER: &str = "Roundtable-Count";

/// Where one batch message sits: its stream sequence and the thread seqs it
/// holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchPos {
    /// The message's sequence in the stream.
    pub(crate) stream_seq: u64,
    /// The seq of the batch's first entry.
    pub(crate) first: u64,
    /// How many entries it holds (at least 1).
    pub(crate) count: u64,
}

impl BatchPos {
    /// The seq of the batch's last entry.
    pub(crate) fn last(&self) -> u64 {
        self.first + self.count - 1
    }

    /// Whether the batch holds entry `seq`.
    pub(crate) fn holds(&self, seq: u64) -> bool {
        self.first <= seq && seq <= self.last()
    }
}

/// The body of a batch message: the entries as JSONL lines.
pub(crate) fn encode(thread: &ThreadId, entries: &[Entry]) -> Result<Bytes, StoreError> {
    let mut out = Vec::with_capacity(256 * entries.len());
    StoredLine::write_batch(entries, &mut out).map_err(|source| StoreError::Encode {
        thread: thread.clone(),
        source,
    })?;
    Ok(Bytes::from(out))
}

/// The headers that place a batch in its thread.
pub(crate) fn position_headers(first: u64, count: usize) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(SEQ_HEADER, first.to_string().as_str());
    headers.insert(COUNT_HEADER, count.to_string().as_str());
    headers
}

/// Reads a batch message back: its position and its entries, checked to be
/// a whole batch of `thread` with dense seqs that agree with its headers.
pub(crate) fn decode(
    thread: &ThreadId,
    stream_seq: u64,
    headers: Option<&HeaderMap>,
    payload: &[u8],
) -> Result<(BatchPos, Vec<Entry>), StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        thread: thread.clone(),
        location: format!("stream message {stream_seq}"),
        message,
    };
    let mut entries = Vec::new();
    let mut expect_more: Option<u32> = None;
    for line in payload
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
    {
        let stored: StoredLine = serde_json::from_slice(line)
            .map_err(|e| corrupt(format!("entry {}: {e}", entries.len() + 1)))?;
        if let Some(more) = expect_more
            && stored.more != more
        {
            return Err(corrupt(format!(
                "batch marker says {} more entries, expected {more}",
                stored.more
            )));
        }
        expect_more = stored.more.checked_sub(1);
        if stored.entry.thread != *thread {
            return Err(corrupt(format!(
                "holds an entry of thread {}",
                stored.entry.thread
            )));
        }
        entries.push(stored.entry);
        if expect_more.is_none() {
            break;
        }
    }
    let Some(first) = entries.first().map(|e| e.seq) else {
        return Err(corrupt("holds no entry".into()));
    };
    if expect_more.is_some() {
        return Err(corrupt("the batch's last entries are missing".into()));
    }
    for (i, e) in entries.iter().enumerate() {
        if e.seq != first + i as u64 {
            return Err(corrupt(format!("seq {} out of order", e.seq)));
        }
    }
    let count = entries.len() as u64;
    let header = |name: &str| -> Result<Option<u64>, StoreError> {
        match headers.and_then(|h| h.get(name)) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .parse()
                .map(Some)
                .map_err(|_| corrupt(format!("bad {name} header {:?}", v.as_str()))),
        }
    };
    if header(SEQ_HEADER)?.is_some_and(|s| s != first)
        || header(COUNT_HEADER)?.is_some_and(|c| c != count)
    {
        return Err(corrupt("headers disagree with the entries".into()));
    }
    Ok((
        BatchPos {
            stream_seq,
            first,
            count,
        },
        entries,
    ))
}

/// The message id that makes a retried publish of the same batch a no-op
/// (the server drops a second message with the same id inside its duplicate
/// window). It is derived from the thread and the batch's first entry id,
/// never from the seq, so a retry that lands at another seq is still caught.
pub(crate) fn message_id(thread: &ThreadId, first_entry_id: &str) -> String {
    let safe = !first_entry_id.is_empty()
        && first_entry_id.len() <= 128
        && first_entry_id.bytes().all(|b| b.is_ascii_graphic());
    if safe {
        format!("{thread}/{first_entry_id}")
    } else {
        let hex: String = first_entry_id
            .bytes()
            .take(256)
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{thread}/x{hex}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EntryBody, NewEntry};

    fn batch(thread: &ThreadId, first: u64, n: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| {
                NewEntry::new("a", EntryBody::chat(format!("m{i}")))
                    .into_entry(thread.clone(), first + i as u64)
            })
            .collect()
    }

    #[test]
    fn a_batch_round_trips_with_its_position() {
        let t = ThreadId::new("t.1").unwrap();
        let entries = batch(&t, 4, 3);
        let body = encode(&t, &entries).unwrap();
        let headers = position_headers(4, 3);
        let (pos, back) = decode(&t, 17, Some(&headers), &body).unwrap();
        assert_eq!(back, entries);
        assert_eq!(
            pos,
            BatchPos {
                stream_seq: 17,
                first: 4,
                count: 3
            }
        );
        assert_eq!(pos.last(), 6);
        assert!(pos.holds(4) && pos.holds(6) && !pos.holds(7) && !pos.holds(3));
        // The body is the JSONL store's lines for the same batch.
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().next().unwrap().contains(r#""more":2"#));
    }

    #[test]
    fn damaged_batches_are_corrupt() {
        let t = ThreadId::new("t").unwrap();
        let entries = batch(&t, 1, 3);
        let body = encode(&t, &entries).unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        let two_lines: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        let other = ThreadId::new("other").unwrap();
        let cases: Vec<(Vec<u8>, Option<HeaderMap>, &ThreadId)> = vec![
            (two_lines.into_bytes(), None, &t),
            (b"".to_vec(), None, &t),
            (b"{not json\n".to_vec(), None, &t),
            (body.to_vec(), Some(position_headers(2, 3)), &t),
            (body.to_vec(), Some(position_headers(1, 2)), &t),
            (body.to_vec(), None, &other),
        ];
        for (payload, headers, thread) in cases {
            let got = decode(thread, 1, headers.as_ref(), &payload);
            assert!(matches!(got, Err(StoreError::Corrupt { .. })), "{got:?}");
        }
    }

    #[test]
    fn message_ids_are_header_safe_and_seq_free() {
        let t = ThreadId::new("t").unwrap();
        assert_eq!(message_id(&t, "0193-abc"), "t/0193-abc");
        let odd = message_id(&t, "a b\r\n");
        assert!(odd.bytes().all(|b| b.is_ascii_graphic()), "{odd}");
        assert_ne!(odd, message_id(&t, "a b\r"));
    }
}
