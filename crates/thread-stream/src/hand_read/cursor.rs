//! A position in a line read by hand, and the JSON values it reads.

use roundtable_providers::json_escape::decode_escape;

/// A position in a line read by hand. Every read steps over what it read
/// and gives `None`, having moved no further than the value it gave up on,
/// when the line does not go on with what it expects.
#[derive(Clone, Copy)]
pub(crate) struct HandCursor<'a> {
    line: &'a str,
    pos: usize,
}

/// Nesting deeper than this in a JSON value skipped by hand is left to
/// serde_json: read alone, the value would escape the depth limit it gets
/// inside the whole line.
const RAW_DEPTH_MAX: usize = 64;

impl<'a> HandCursor<'a> {
    /// A cursor at `pos` in `line`.
    pub(crate) fn new(line: &'a str, pos: usize) -> Self {
        Self { line, pos }
    }

    /// Where the cursor is.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// True when the whole line was read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.line.len()
    }

    /// Steps over `text` when the line goes on with it.
    pub(crate) fn literal(&mut self, text: &str) -> Option<()> {
        let rest = self.line.as_bytes().get(self.pos..)?;
        rest.starts_with(text.as_bytes())
            .then(|| self.pos += text.len())
    }

    /// True (and steps over it) when the line goes on with `text`.
    pub(crate) fn next_is(&mut self, text: &str) -> bool {
        self.literal(text).is_some()
    }

    /// A JSON string without escapes or control characters (which the
    /// general reader handles), as it stands in the line.
    pub(crate) fn plain_str(&mut self) -> Option<&'a str> {
        let bytes = self.line.as_bytes();
        if bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let start = self.pos + 1;
        let rest = bytes.get(start..)?;
        let len = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[len] != b'"' || has_control(&rest[..len]) {
            return None;
        }
        self.pos = start + len + 1;
        // Both ends are next to an ASCII quote: character boundaries.
        self.line.get(start..start + len)
    }

    /// A JSON string, escapes decoded (into `scratch` when it has any). A
    /// `\u` escape of half a surrogate pair alone is left to serde_json,
    /// which refuses it.
    pub(crate) fn str_in<'s>(&mut self, scratch: &'s mut String) -> Option<&'s str>
    where
        'a: 's,
    {
        let bytes = self.line.as_bytes();
        if bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let mut pos = self.pos + 1;
        let rest = bytes.get(pos..)?;
        let len = memchr::memchr2(b'"', b'\\', rest)?;
        if has_control(&rest[..len]) {
            return None;
        }
        if rest[len] == b'"' {
            self.pos = pos + len + 1;
            return self.line.get(pos..pos + len);
        }
        scratch.clear();
        loop {
            let rest = bytes.get(pos..)?;
            let len = memchr::memchr2(b'"', b'\\', rest)?;
            if has_control(&rest[..len]) {
                return None;
            }
            // Every piece starts and ends next to ASCII: whole characters.
            scratch.push_str(self.line.get(pos..pos + len)?);
            pos += len;
            if bytes[pos] == b'"' {
                self.pos = pos + 1;
                return Some(scratch);
            }
            let (c, used) = decode_escape(bytes.get(pos + 1..)?)?;
            pos += 1 + used;
            scratch.push(c);
        }
    }

    /// A JSON integer of at most `max_digits` digits, without a sign, a
    /// fraction, an exponent or a leading zero (as JSON has none).
    /// `max_digits` is at most 19, so the value always fits.
    pub(crate) fn unsigned(&mut self, max_digits: usize) -> Option<u64> {
        let bytes = self.line.as_bytes().get(self.pos..)?;
        let mut value = 0u64;
        let mut digits = 0;
        for b in bytes {
            if !b.is_ascii_digit() {
                break;
            }
            digits += 1;
            if digits > max_digits {
                return None;
            }
            value = value * 10 + u64::from(b - b'0');
        }
        let leading_zero = digits > 1 && bytes[0] == b'0';
        if digits == 0 || leading_zero || matches!(bytes.get(digits), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.pos += digits;
        Some(value)
    }

    /// As [`HandCursor::unsigned`], with an optional minus sign, within `i64`
    /// (`-0` is left out: serde_json reads it as a float).
    pub(crate) fn signed(&mut self) -> Option<i64> {
        let mut ahead = *self;
        let negative = ahead.next_is("-");
        let magnitude = i64::try_from(ahead.unsigned(18)?).ok()?;
        let value = match (negative, magnitude) {
            (true, 0) => return None,
            (true, m) => -m,
            (false, m) => m,
        };
        *self = ahead;
        Some(value)
    }

    /// A JSON number read as an `f64`, by serde_json itself (its rounding,
    /// its errors).
    pub(crate) fn float(&mut self) -> Option<f64> {
        let bytes = self.line.as_bytes().get(self.pos..)?;
        let len = bytes
            .iter()
            .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(bytes.len());
        let number = self.line.get(self.pos..self.pos + len)?;
        let value = serde_json::from_str::<f64>(number).ok()?;
        self.pos += len;
        Some(value)
    }

    /// `true` or `false`.
    pub(crate) fn boolean(&mut self) -> Option<bool> {
        if self.next_is("true") {
            Some(true)
        } else if self.next_is("false") {
            Some(false)
        } else {
            None
        }
    }

    /// The text of the JSON object or array that starts here, as it stands
    /// in the line, unchecked but for its brackets and strings: the caller
    /// has serde_json read it.
    pub(crate) fn raw_nested(&mut self) -> Option<&'a str> {
        let bytes = self.line.as_bytes();
        if !matches!(bytes.get(self.pos), Some(b'{' | b'[')) {
            return None;
        }
        let mut depth = 0usize;
        let mut pos = self.pos;
        loop {
            match *bytes.get(pos)? {
                b'"' => {
                    // Over the string, escapes and all.
                    pos += 1;
                    loop {
                        let rest = bytes.get(pos..)?;
                        let len = memchr::memchr2(b'"', b'\\', rest)?;
                        pos += len + if rest[len] == b'"' { 1 } else { 2 };
                        if rest[len] == b'"' {
                            break;
                        }
                    }
                    continue;
                }
                b'{' | b'[' => {
                    depth += 1;
                    if depth > RAW_DEPTH_MAX {
                        return None;
                    }
                }
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        let raw = self.line.get(self.pos..=pos)?;
                        self.pos = pos + 1;
                        return Some(raw);
                    }
                }
                _ => {}
            }
            pos += 1;
        }
    }
}

/// True when `bytes` hold a control character, which a JSON string may not.
/// Without an early exit, so that it runs a vector at a time.
fn has_control(bytes: &[u8]) -> bool {
    bytes.iter().fold(false, |seen, b| seen | (*b < 0x20))
}
