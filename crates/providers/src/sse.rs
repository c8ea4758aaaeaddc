//! An incremental Server-Sent Events parser over raw bytes.
//!
//! Lines are found with `memchr` and parsed straight from the bytes they
//! arrive in; only a line split across two reads is copied to be joined.
//! Only whole lines are decoded as UTF-8, so a character split across
//! network chunks survives (the line terminators `\r` and `\n` never occur
//! inside a UTF-8 sequence). They are checked with SIMD by `simdutf8`:
//! `std`'s check was a tenth of the decoder's time.
//!
//! The events a read completes are kept in one reused text buffer (their
//! `event:` names and `data:` payloads, side by side) and read back as
//! borrowed [`SseFrame`]s: parsing a stream allocates nothing per event
//! once the buffers have grown to the size of a read.

use std::ops::Range;

/// One SSE event: its `event:` name, if any, and its `data:` lines joined
/// with `\n`, borrowed from the parser until its next
/// [`SseParser::clear_frames`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SseFrame<'a> {
    /// The `event:` field.
    pub(crate) event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub(crate) data: &'a str,
}

/// Parses SSE from byte chunks of any size.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The start of a line whose end has not arrived yet.
    tail: Vec<u8>,
    frames: Frames,
}

/// The events parsed so far and the one being read, in one text buffer.
#[derive(Debug, Default)]
struct Frames {
    /// The completed events' data and names, then the pending event's data.
    text: String,
    /// The completed events, as ranges of `text`.
    complete: Vec<FrameRange>,
    /// Where the pending event's data begins in `text`.
    data_start: usize,
    /// True once the pending event has a `data:` line.
    has_data: bool,
    /// The pending event's `event:` field (it may come before or after its
    /// data lines, so it is kept apart until the event is complete).
    event: String,
    has_event: bool,
}

#[derive(Debug, Clone)]
struct FrameRange {
    event: Option<Range<usize>>,
    data: Range<usize>,
}

impl SseParser {
    /// Feeds a chunk; the events it completes are read with
    /// [`SseParser::frames`].
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        if !self.tail.is_empty() {
            if self.tail.last() == Some(&b'\r') {
                // The last read ended with `\r`: its line is complete, and a
                // `\n` starting this one is the rest of a `\r\n`.
                self.tail.pop();
                self.frames.line(&self.tail);
                self.tail.clear();
                if bytes.first() == Some(&b'\n') {
                    bytes = &bytes[1..];
                }
            } else {
                match memchr::memchr2(b'\n', b'\r', bytes) {
                    None => {
                        self.tail.extend_from_slice(bytes);
                        return;
                    }
                    Some(end) if bytes[end] == b'\r' && end + 1 == bytes.len() => {
                        self.tail.extend_from_slice(bytes);
                        return;
                    }
                    Some(end) => {
                        self.tail.extend_from_slice(&bytes[..end]);
                        self.frames.line(&self.tail);
                        self.tail.clear();
                        bytes = &bytes[end + terminator_len(bytes, end)..];
                    }
                }
            }
        }
        let used = self.frames.lines(bytes);
        self.tail.extend_from_slice(&bytes[used..]);
    }

    /// Ends the input: a last line without terminator and a last event
    /// without blank line are still delivered.
    pub(crate) fn finish(&mut self) {
        if !self.tail.is_empty() {
            let rest = std::mem::take(&mut self.tail);
            let text = String::from_utf8_lossy(&rest);
            for line in text.split(['\r', '\n']) {
                if !line.is_empty() {
                    self.frames.line_str(line);
                }
            }
        }
        self.frames.dispatch();
    }

    /// The events completed since the last [`SseParser::clear_frames`], in
    /// order.
    pub(crate) fn frames(&self) -> impl Iterator<Item = SseFrame<'_>> {
        let text = self.frames.text.as_str();
        self.frames.complete.iter().map(move |f| SseFrame {
            event: f.event.clone().and_then(|r| text.get(r)),
            data: text.get(f.data.clone()).unwrap_or_default(),
        })
    }

    /// Forgets the completed events (keeping the one being read).
    pub(crate) fn clear_frames(&mut self) {
        let frames = &mut self.frames;
        frames.complete.clear();
        if frames.data_start > 0 {
            frames.text.replace_range(..frames.data_start, "");
            frames.data_start = 0;
        }
    }
}

/// The length of the line terminator at `end`: 2 for `\r\n`, else 1.
fn terminator_len(bytes: &[u8], end: usize) -> usize {
    if bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n') {
        2
    } else {
        1
    }
}

impl Frames {
    /// Handles every complete line of `bytes`; returns how many bytes were
    /// used.
    fn lines(&mut self, bytes: &[u8]) -> usize {
        let mut start = 0;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &bytes[start..]) {
            let end = start + offset;
            if bytes[end] == b'\r' && end + 1 == bytes.len() {
                // A `\r` at the end of the chunk may be half of `\r\n`.
                break;
            }
            self.line(&bytes[start..end]);
            start = end + terminator_len(bytes, end);
        }
        start
    }

    fn line(&mut self, line: &[u8]) {
        match simdutf8::basic::from_utf8(line) {
            Ok(text) => self.line_str(text),
            Err(_) => self.line_str(&String::from_utf8_lossy(line)),
        }
    }

    fn line_str(&mut self, line: &str) {
        if line.is_empty() {
            self.dispatch();
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line.as_bytes()) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "event" => {
                self.event.clear();
                self.event.push_str(value);
                self.has_event = true;
            }
            "data" => {
                if self.has_data {
                    self.text.push('\n');
                }
                self.text.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) {
        if self.has_data || self.has_event {
            let data = self.data_start..self.text.len();
            let event = self.has_event.then(|| {
                let start = self.text.len();
                self.text.push_str(&self.event);
                start..self.text.len()
            });
            self.complete.push(FrameRange { event, data });
            self.data_start = self.text.len();
        }
        self.has_data = false;
        self.has_event = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owned copy of a frame, to compare parses.
    #[derive(Debug, PartialEq, Eq)]
    struct Owned {
        event: Option<String>,
        data: String,
    }

    fn drain(parser: &mut SseParser, out: &mut Vec<Owned>) {
        out.extend(parser.frames().map(|f| Owned {
            event: f.event.map(str::to_string),
            data: f.data.to_string(),
        }));
        parser.clear_frames();
    }

    fn parse_in_pieces(input: &[u8], size: usize) -> Vec<Owned> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for piece in input.chunks(size) {
            p.feed(piece);
            drain(&mut p, &mut out);
        }
        p.finish();
        drain(&mut p, &mut out);
        out
    }

    #[test]
    fn a_character_split_across_chunks_survives() {
        let mut parser = SseParser::default();
        let bytes = "event: ping\ndata: {\"a\":\"é\"}\n\n".as_bytes();
        let mut events = Vec::new();
        let (head, tail) = bytes.split_at(24); // splits the two bytes of "é"
        parser.feed(head);
        drain(&mut parser, &mut events);
        parser.feed(tail);
        drain(&mut parser, &mut events);
        assert_eq!(events[0].event.as_deref(), Some("ping"));
        assert_eq!(events[0].data, "{\"a\":\"é\"}");
    }

    #[test]
    fn any_chunking_gives_the_same_events() {
        let input = "data: {\"x\":\"héllo 😀\"}\r\n\r\n: comment\nevent: a\ndata: 1\ndata: 2\n\ndata: [DONE]\n\ndata: a\revent: late\r\rdata: b\r\n\n";
        let whole = parse_in_pieces(input.as_bytes(), input.len());
        assert_eq!(whole.len(), 5);
        assert_eq!(whole[0].data, "{\"x\":\"héllo 😀\"}");
        assert_eq!(whole[1].event.as_deref(), Some("a"));
        assert_eq!(whole[1].data, "1\n2");
        assert_eq!(whole[2].data, "[DONE]");
        assert_eq!(whole[3].event.as_deref(), Some("late"));
        assert_eq!(whole[3].data, "a");
        assert_eq!(whole[4].event, None);
        assert_eq!(whole[4].data, "b");
        for size in 1..12 {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), size),
                whole,
                "size {size}"
            );
        }
    }

    #[test]
    fn an_event_spanning_reads_keeps_its_data_while_earlier_ones_are_cleared() {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        parser.feed(b"data: first\n\ndata: sec");
        drain(&mut parser, &mut events);
        parser.feed(b"ond\ndata: third line\n");
        drain(&mut parser, &mut events);
        parser.feed(b"\n");
        drain(&mut parser, &mut events);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].data, "second\nthird line");
    }

    #[test]
    fn a_last_event_without_blank_line_is_delivered() {
        let events = parse_in_pieces(b"data: tail", 3);
        assert_eq!(events[0].data, "tail");
    }

    #[test]
    fn an_event_name_alone_is_an_event_with_empty_data() {
        let events = parse_in_pieces(b"event: ping\n\n", 5);
        assert_eq!(
            events,
            vec![Owned {
                event: Some("ping".into()),
                data: String::new()
            }]
        );
    }

    #[test]
    fn invalid_utf8_does_not_panic() {
        let events = parse_in_pieces(b"data: \xff\xfe\n\n", 1);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "\u{fffd}\u{fffd}");
    }
}
