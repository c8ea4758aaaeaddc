//! Reading a thread file on open: checking every line, and cutting off what a
//! crash left half-written.
//!
//! Checking a line means parsing its entry whole. When the thread is opened
//! by a read, the entries that read asks for are kept from that one parse
//! and returned by it, rather than parsed a second time; no other entry is
//! kept, so a thread opened for anything else (an append, its last seq)
//! holds none of its entries in memory.

use std::ops::RangeInclusive;
use std::path::Path;

use super::parse::{LineError, parse_until_error, read_line};
use crate::{Entry, StoreError, ThreadId};

/// One line of a thread file.
struct Line<'a> {
    /// Where it starts.
    start: usize,
    /// Its bytes, without the newline.
    bytes: &'a [u8],
    /// Where the next line starts.
    next: usize,
    /// True when it ends with a newline.
    complete: bool,
    /// True when it holds only whitespace.
    blank: bool,
}

/// What opening a thread file found.
#[derive(Debug)]
pub(crate) struct Scan {
    /// Start offset of each complete entry's line, in seq order.
    pub(crate) starts: Vec<u64>,
    /// Where the kept entries end: the file's length once the torn tail is cut.
    pub(crate) end: u64,
    /// True when the last kept entry's line lacks its newline (a crash between
    /// the line and its `\n`): the store writes the newline before appending.
    pub(crate) missing_newline: bool,
    /// The kept entries whose seqs the scan was asked to keep, in seq order.
    pub(crate) entries: Vec<Entry>,
}

/// What the scan needs of a parsed line.
struct ScannedLine {
    seq: u64,
    /// The batch marker.
    more: u32,
    /// The thread the line names, when it is not the scanned one.
    foreign: Option<ThreadId>,
    /// The entry, when its seq is one to keep.
    entry: Option<Entry>,
}

/// A torn tail cut off a thread file on open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The thread.
    pub thread: ThreadId,
    /// The file's length before the cut.
    pub found_len: u64,
    /// The file's length after the cut: every complete entry before it is kept.
    pub kept_len: u64,
    /// Entries of an incomplete batch dropped with the torn tail (complete
    /// lines whose batch lost its later lines).
    pub dropped_entries: usize,
}

/// Checks the bytes of `thread`'s file. Complete lines must be valid entries of
/// this thread with seqs 1, 2, 3...; anything else there is corruption and an
/// error (nothing is cut). A last line without its newline that does not parse
/// is a torn write; so are the complete lines of a batch whose end is missing.
/// The kept entries whose seqs are in `keep` (if any) are returned.
pub(crate) fn scan(
    thread: &ThreadId,
    path: &Path,
    data: &[u8],
    keep: Option<RangeInclusive<u64>>,
) -> Result<Scan, StoreError> {
    // The lines first (a blank one is skipped but counted), then their
    // entries, parsed at once, then the checks line by line.
    let lines = split_lines(data);
    let texts: Vec<&[u8]> = lines.iter().filter(|l| !l.blank).map(|l| l.bytes).collect();
    let (parsed, error) = parse_lines(thread, &texts, keep.as_ref());
    let mut kept =
        check_lines(&lines, &parsed, error).map_err(|(line, message)| StoreError::Corrupt {
            thread: thread.clone(),
            location: format!("{}:{}", path.display(), line),
            message,
        })?;
    kept.drop_torn_batch();
    let entries = match keep {
        Some(_) => kept_entries(parsed, kept.starts.len()),
        None => Vec::new(),
    };
    Ok(Scan {
        starts: kept.starts,
        end: kept.end as u64,
        missing_newline: kept.missing_newline,
        entries,
    })
}

/// The lines of `data`, the last one possibly without its newline.
fn split_lines(data: &[u8]) -> Vec<Line<'_>> {
    let mut lines: Vec<Line<'_>> = Vec::with_capacity(data.len() / 256 + 1);
    let mut pos = 0usize;
    while pos < data.len() {
        let (bytes, next, complete) = match memchr::memchr(b'\n', &data[pos..]) {
            Some(rel) => (&data[pos..pos + rel], pos + rel + 1, true),
            None => (&data[pos..], data.len(), false),
        };
        lines.push(Line {
            start: pos,
            bytes,
            next,
            complete,
            blank: bytes.iter().all(u8::is_ascii_whitespace),
        });
        pos = next;
    }
    lines
}

/// Parses `texts` in order up to the first that is not a valid entry (and
/// that line's error), keeping the entries whose seqs are in `keep`.
fn parse_lines(
    thread: &ThreadId,
    texts: &[&[u8]],
    keep: Option<&RangeInclusive<u64>>,
) -> (Vec<ScannedLine>, Option<LineError>) {
    parse_until_error(texts, || {
        move |line: &[u8]| {
            let stored = read_line(line)?;
            let entry = stored.entry;
            Ok::<_, LineError>(ScannedLine {
                seq: entry.seq,
                more: stored.more,
                foreign: (entry.thread != *thread).then(|| entry.thread.clone()),
                entry: keep
                    .is_some_and(|keep| keep.contains(&entry.seq))
                    .then_some(entry),
            })
        }
    })
}

/// The complete entries a scan keeps, before the batch check.
struct Kept {
    /// Start offset of each entry's line.
    starts: Vec<u64>,
    /// `more` of each entry, for the batch check.
    mores: Vec<u32>,
    end: usize,
    missing_newline: bool,
}

/// Checks the parsed lines one by one: each must be an entry of the thread
/// with the next seq, except a torn last line, which is cut off. A corrupt
/// line is an error: its line number and what is wrong.
fn check_lines(
    lines: &[Line<'_>],
    parsed: &[ScannedLine],
    mut error: Option<LineError>,
) -> Result<Kept, (usize, String)> {
    let mut scanned = parsed.iter();
    let mut kept = Kept {
        starts: Vec::with_capacity(parsed.len()),
        mores: Vec::with_capacity(parsed.len()),
        end: 0,
        missing_newline: false,
    };
    for (i, line) in lines.iter().enumerate() {
        let line_no = i + 1;
        if line.blank {
            if line.complete {
                kept.end = line.next;
            }
            continue;
        }
        let expected_seq = kept.starts.len() as u64 + 1;
        let next = match scanned.next() {
            Some(fields) => Ok(fields),
            None => Err(error.take()),
        };
        match next {
            Ok(ScannedLine {
                foreign: Some(found),
                ..
            }) => {
                return Err((line_no, format!("entry belongs to thread {found}")));
            }
            Ok(line_read) if line_read.seq == expected_seq => {
                kept.starts.push(line.start as u64);
                kept.mores.push(line_read.more);
                kept.end = line.next;
                kept.missing_newline = !line.complete;
            }
            // A torn last line: keep everything before it.
            Err(_) if !line.complete => break,
            Ok(ScannedLine { seq, .. }) => {
                return Err((line_no, format!("expected seq {expected_seq}, found {seq}")));
            }
            Err(Some(e)) => return Err((line_no, format!("not a valid entry: {e}"))),
            Err(None) => return Err((line_no, "not a valid entry".to_string())),
        }
    }
    Ok(kept)
}

impl Kept {
    /// Drops whole a batch whose last entries never reached the disk.
    fn drop_torn_batch(&mut self) {
        if let Some(&last_more) = self.mores.last()
            && last_more > 0
        {
            let mut first = self.mores.len() - 1;
            while first > 0 && self.mores[first - 1] == self.mores[first] + 1 {
                first -= 1;
            }
            self.end = self.starts[first] as usize;
            self.starts.truncate(first);
            self.missing_newline = false;
        }
    }
}

/// The entries asked for, of the first `kept` lines, collected where they
/// were parsed rather than copied to fresh memory; a few entries of a long
/// file are moved out of the room all its lines took, which the caller
/// would otherwise hold.
fn kept_entries(mut parsed: Vec<ScannedLine>, kept: usize) -> Vec<Entry> {
    parsed.truncate(kept);
    let mut entries: Vec<Entry> = parsed.into_iter().filter_map(|line| line.entry).collect();
    if entries.capacity() > 2 * entries.len() {
        entries.shrink_to_fit();
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::StoredLine;
    use crate::{EntryBody, NewEntry};

    fn lines(thread: &ThreadId, n: u64, batch: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for seq in 1..=n {
            let e = NewEntry::new("a", EntryBody::chat(format!("m{seq}")))
                .into_entry(thread.clone(), seq);
            let more = batch.get(seq as usize - 1).copied().unwrap_or(0);
            StoredLine::write(&e, more, &mut out).unwrap();
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn a_clean_file_keeps_everything() {
        let t = ThreadId::new("t").unwrap();
        let data = lines(&t, 3, &[]);
        let s = scan(&t, Path::new("t.jsonl"), &data, None).unwrap();
        assert_eq!(s.starts.len(), 3);
        assert_eq!(s.end, data.len() as u64);
        assert!(!s.missing_newline);
    }

    #[test]
    fn the_entries_asked_for_are_kept_and_no_dropped_one() {
        let t = ThreadId::new("t").unwrap();
        let data = lines(&t, 6, &[]);
        let seqs = |keep: Option<RangeInclusive<u64>>| -> Vec<u64> {
            let s = scan(&t, Path::new("t.jsonl"), &data, keep).unwrap();
            s.entries.iter().map(|e| e.seq).collect()
        };
        assert_eq!(seqs(Some(1..=u64::MAX)), [1, 2, 3, 4, 5, 6]);
        assert_eq!(seqs(Some(2..=4)), [2, 3, 4]);
        assert_eq!(seqs(Some(5..=9)), [5, 6]);
        assert_eq!(seqs(None), [] as [u64; 0]);

        // A few entries of a long file do not hold the room of all its lines.
        let long = lines(&t, 300, &[]);
        let s = scan(&t, Path::new("t.jsonl"), &long, Some(299..=300)).unwrap();
        assert_eq!(s.entries.len(), 2);
        assert!(s.entries.capacity() <= 4, "{}", s.entries.capacity());

        // Entries 1 to 3 alone, then a batch of three of which two landed.
        let data = lines(&t, 5, &[0, 0, 0, 2, 1]);
        let s = scan(&t, Path::new("t.jsonl"), &data, Some(1..=u64::MAX)).unwrap();
        assert_eq!(s.starts.len(), 3);
        let texts: Vec<String> = s
            .entries
            .iter()
            .map(|e| match &e.body {
                EntryBody::Chat(c) => c.text.to_string(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["m1", "m2", "m3"]);
    }

    #[test]
    fn an_incomplete_batch_is_dropped_whole() {
        let t = ThreadId::new("t").unwrap();
        // Entry 1 alone, then a batch of three (more = 2, 1, 0) of which only two landed.
        let data = lines(&t, 3, &[0, 2, 1]);
        let s = scan(&t, Path::new("t.jsonl"), &data, None).unwrap();
        assert_eq!(s.starts.len(), 1);
        assert_eq!(
            s.end,
            s.starts
                .first()
                .map(|_| {
                    let first_line_len = data.iter().position(|b| *b == b'\n').unwrap() + 1;
                    first_line_len as u64
                })
                .unwrap()
        );
    }

    #[test]
    fn a_corrupt_middle_line_is_an_error() {
        let t = ThreadId::new("t").unwrap();
        let mut data = lines(&t, 1, &[]);
        data.extend_from_slice(b"{not json}\n");
        data.extend_from_slice(&lines(&t, 2, &[])[..]);
        let err = scan(&t, Path::new("t.jsonl"), &data, None).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    }

    #[test]
    fn a_seq_gap_or_foreign_thread_is_an_error() {
        let t = ThreadId::new("t").unwrap();
        let other = ThreadId::new("u").unwrap();
        assert!(scan(&t, Path::new("t.jsonl"), &lines(&other, 1, &[]), None).is_err());
        let e = NewEntry::new("a", EntryBody::chat("x")).into_entry(t.clone(), 2);
        let mut data = Vec::new();
        StoredLine::write(&e, 0, &mut data).unwrap();
        data.push(b'\n');
        assert!(scan(&t, Path::new("t.jsonl"), &data, None).is_err());
    }
}
