//! Parsing stored lines: each line checked as UTF-8 once, and a long run
//! of lines on two cores.
//!
//! serde_json checks every string it reads from bytes as UTF-8 on its own;
//! a line checked whole first is read as a `str`, which it does not check
//! again. Lines are independent, so a long run (a thread file checked on
//! open, a large read) is cut in two halves parsed at once, each by a
//! parser of its own; the results are put back in order and the first
//! failing line is the one reported, exactly as a parse line by line would.

use std::fmt;
use std::sync::OnceLock;

use crate::entry::StoredLine;

/// Why a line did not parse.
#[derive(Debug)]
pub(crate) enum LineError {
    /// The line is not UTF-8.
    Utf8(std::str::Utf8Error),
    /// The line is not the JSON expected.
    Json(serde_json::Error),
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::Utf8(e) => write!(f, "not UTF-8: {e}"),
            LineError::Json(e) => e.fmt(f),
        }
    }
}

/// Checks a line as UTF-8.
fn line_text(line: &[u8]) -> Result<&str, LineError> {
    std::str::from_utf8(line).map_err(LineError::Utf8)
}

/// Parses one stored line.
pub(crate) fn read_line(line: &[u8]) -> Result<StoredLine, LineError> {
    serde_json::from_str(line_text(line)?).map_err(LineError::Json)
}

/// Below this many bytes a second thread costs more than it saves.
const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// Parses `lines` in order until one fails: returns what the lines before
/// it gave, and its error (`None` when every line parsed). Each run of
/// lines parsed at once gets a parser of its own from `parser`.
pub(crate) fn parse_until_error<T: Send, E: Send, P: FnMut(&[u8]) -> Result<T, E>>(
    lines: &[&[u8]],
    parser: impl Fn() -> P + Sync,
) -> (Vec<T>, Option<E>) {
    // The front half's results are made room for the back half's too.
    let all = lines.len();
    let in_order = |lines: &[&[u8]], room: usize| {
        let mut parse = parser();
        let mut out = Vec::with_capacity(room);
        for line in lines {
            match parse(line) {
                Ok(value) => out.push(value),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    };
    let total: usize = lines.iter().map(|l| l.len()).sum();
    if total < PARALLEL_MIN_BYTES || cores() < 2 {
        return in_order(lines, all);
    }
    // Cut where half the bytes are behind.
    let mut behind = 0;
    let mid = lines
        .iter()
        .position(|l| {
            behind += l.len();
            behind >= total / 2
        })
        .map_or(lines.len(), |i| i + 1);
    let (front, back) = lines.split_at(mid);
    std::thread::scope(|scope| {
        let back_half = std::thread::Builder::new()
            .name("jsonl-parse".into())
            .spawn_scoped(scope, || in_order(back, back.len()));
        let (mut out, error) = in_order(front, all);
        let back_half = match back_half {
            // No second thread to be had: the back half here, after the front.
            Err(_) if error.is_none() => in_order(back, back.len()),
            Err(_) => return (out, error),
            Ok(handle) => match handle.join() {
                Ok(parsed) => parsed,
                Err(panic) => std::panic::resume_unwind(panic),
            },
        };
        if error.is_some() {
            return (out, error);
        }
        let (rest, error) = back_half;
        out.extend(rest);
        (out, error)
    })
}

/// The cores this process may use (asked once).
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` lines of about 300 bytes each, numbered from 1.
    fn lines(n: usize) -> Vec<Vec<u8>> {
        (1..=n)
            .map(|i| format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(280)).into_bytes())
            .collect()
    }

    #[derive(serde::Deserialize)]
    struct Numbered {
        n: usize,
    }

    fn parse(all: &[Vec<u8>]) -> (Vec<usize>, Option<String>) {
        let refs: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
        let (parsed, error) = parse_until_error(&refs, || {
            |line: &[u8]| {
                serde_json::from_str::<Numbered>(line_text(line)?).map_err(LineError::Json)
            }
        });
        (
            parsed.into_iter().map(|x| x.n).collect(),
            error.map(|e| e.to_string()),
        )
    }

    #[test]
    fn a_long_run_parses_in_order_and_stops_at_its_first_bad_line() {
        // Over the threshold, so both halves run at once.
        let mut all = lines(2_000);
        assert!(all.iter().map(Vec::len).sum::<usize>() > PARALLEL_MIN_BYTES);
        let (parsed, error) = parse(&all);
        assert_eq!(parsed, (1..=2_000).collect::<Vec<_>>());
        assert!(error.is_none());

        // A bad line in each half: the first one is reported, with every
        // line before it.
        all[1_500] = b"{not json".to_vec();
        all[300] = vec![b'"', 0xff, b'"'];
        let (parsed, error) = parse(&all);
        assert_eq!(parsed, (1..=300).collect::<Vec<_>>());
        assert!(error.is_some_and(|e| e.starts_with("not UTF-8")));

        // Only in the back half.
        all[300] = lines(301).pop().unwrap_or_default();
        let (parsed, error) = parse(&all);
        assert_eq!(parsed, (1..=1_500).collect::<Vec<_>>());
        assert!(error.is_some());
    }
}
