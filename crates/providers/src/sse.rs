//! An incremental Server-Sent Events parser over raw bytes.
//!
//! Bytes are buffered until a whole line is there, and only whole lines are
//! decoded as UTF-8, so a character split across network chunks survives
//! (the line terminators `\r` and `\n` never occur inside a UTF-8 sequence).

/// One SSE event: its `event:` name, if any, and its `data:` lines joined
/// with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field.
    pub(crate) event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub(crate) data: String,
}

/// Parses SSE from byte chunks of any size.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    state: Pending,
}

/// The event being read: its name and data lines so far.
#[derive(Debug, Default)]
struct Pending {
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Feeds a chunk and appends every event it completes to `out`.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        if self.buf.is_empty() {
            // The common case: parse straight from the chunk, keep the tail.
            let used = self.state.lines(bytes, out);
            self.buf.extend_from_slice(&bytes[used..]);
        } else {
            let mut buf = std::mem::take(&mut self.buf);
            buf.extend_from_slice(bytes);
            let used = self.state.lines(&buf, out);
            buf.drain(..used);
            self.buf = buf;
        }
    }

    /// Ends the input: a last line without terminator and a last event
    /// without blank line are still delivered.
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let text = String::from_utf8_lossy(&rest);
            for line in text.split(['\r', '\n']) {
                if !line.is_empty() {
                    self.state.line(line, out);
                }
            }
        }
        self.state.dispatch(out);
    }
}

impl Pending {
    /// Handles every complete line of `bytes`; returns how many bytes were
    /// used.
    fn lines(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> usize {
        let mut start = 0;
        let len = bytes.len();
        while let Some(offset) = bytes[start..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r')
        {
            let end = start + offset;
            let next = if bytes[end] == b'\r' {
                if end + 1 == len {
                    // A `\r` at the end of the chunk may be half of `\r\n`.
                    break;
                }
                if bytes[end + 1] == b'\n' {
                    end + 2
                } else {
                    end + 1
                }
            } else {
                end + 1
            };
            let line = &bytes[start..end];
            match std::str::from_utf8(line) {
                Ok(text) => self.line(text, out),
                Err(_) => self.line(&String::from_utf8_lossy(line), out),
            }
            start = next;
        }
        start
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data || self.event.is_some() {
            out.push(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for piece in input.chunks(size) {
            p.feed(piece, &mut out);
        }
        p.finish(&mut out);
        out
    }

    #[test]
    fn a_character_split_across_chunks_survives() {
        let mut parser = SseParser::default();
        let bytes = "event: ping\ndata: {\"a\":\"é\"}\n\n".as_bytes();
        let mut events = Vec::new();
        let (head, tail) = bytes.split_at(24); // splits the two bytes of "é"
        parser.feed(head, &mut events);
        parser.feed(tail, &mut events);
        assert_eq!(events[0].event.as_deref(), Some("ping"));
        assert_eq!(events[0].data, "{\"a\":\"é\"}");
    }

    #[test]
    fn any_chunking_gives_the_same_events() {
        let input = "data: {\"x\":\"héllo 😀\"}\r\n\r\n: comment\nevent: a\ndata: 1\ndata: 2\n\ndata: [DONE]\n\n";
        let whole = parse_in_pieces(input.as_bytes(), input.len());
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].data, "{\"x\":\"héllo 😀\"}");
        assert_eq!(whole[1].data, "1\n2");
        assert_eq!(whole[2].data, "[DONE]");
        for size in 1..8 {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), size),
                whole,
                "size {size}"
            );
        }
    }

    #[test]
    fn a_last_event_without_blank_line_is_delivered() {
        let events = parse_in_pieces(b"data: tail", 3);
        assert_eq!(events[0].data, "tail");
    }

    #[test]
    fn invalid_utf8_does_not_panic() {
        let events = parse_in_pieces(b"data: \xff\xfe\n\n", 1);
        assert_eq!(events.len(), 1);
    }
}
