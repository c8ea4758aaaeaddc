//! [`JsonScan`]: a reader of the simple JSON shapes streamed chunks take,
//! for the decoders' fast path.
//!
//! Nearly every chunk of a streamed answer is a small object of strings,
//! integers and nulls holding one delta. Reading it through serde's generic
//! visitor costs most of a decoder's time (every field of every chunk goes
//! through it, `id`, `model` and `created` included). A decoder reads its
//! common shapes with this scanner instead and falls back to serde_json
//! for anything else.
//!
//! The scanner is only ever sure or silent: each method returns `None` on
//! anything it does not handle (a key with an escape, a nested value it was
//! not asked for, a number with a fraction, a duplicate key, a lone
//! surrogate, trailing text...), and the caller then parses the same text
//! with serde_json, which reports every error. So whatever it accepts, it
//! reads exactly as serde_json would: a string is borrowed unless it holds
//! escapes, and every escape serde_json accepts is decoded the same way.

use std::borrow::Cow;
#[cfg(test)]
use std::cell::Cell;

use super::JsonStr;
use crate::json_escape::decode_escape;

#[cfg(test)]
thread_local! {
    static SERDE_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// True unless a test turned the fast path off to compare the events of
/// both paths ([`serde_only`]).
pub(crate) fn fast_path_on() -> bool {
    #[cfg(test)]
    return !SERDE_ONLY.with(Cell::get);
    #[cfg(not(test))]
    true
}

/// Runs `f` with every chunk read by serde_json alone, on this thread.
#[cfg(test)]
pub(crate) fn serde_only<R>(f: impl FnOnce() -> R) -> R {
    SERDE_ONLY.with(|s| s.set(true));
    let result = f();
    SERDE_ONLY.with(|s| s.set(false));
    result
}

/// A cursor over one JSON text.
#[derive(Debug)]
pub(crate) struct JsonScan<'a> {
    text: &'a str,
    pos: usize,
}

/// Which known keys of one object were read, to refuse a duplicate as
/// serde's derived readers do (they fail on one).
#[derive(Debug, Default)]
pub(crate) struct SeenKeys(u32);

impl SeenKeys {
    /// Marks key number `bit`; `None` when it was already seen.
    pub(crate) fn once(&mut self, bit: u32) -> Option<()> {
        let mask = 1 << bit;
        if self.0 & mask != 0 {
            return None;
        }
        self.0 |= mask;
        Some(())
    }

    /// True when key number `bit` was seen.
    pub(crate) fn has(&self, bit: u32) -> bool {
        self.0 & (1 << bit) != 0
    }
}

impl<'a> JsonScan<'a> {
    /// A scanner at the start of `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte after whitespace, without consuming it.
    fn peek(&mut self) -> Option<u8> {
        let b = *self.bytes().get(self.pos)?;
        if b > b' ' {
            return Some(b);
        }
        self.peek_past_whitespace()
    }

    #[cold]
    fn peek_past_whitespace(&mut self) -> Option<u8> {
        let bytes = self.bytes();
        while let Some(&b) = bytes.get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// Consumes `b` after whitespace.
    fn eat(&mut self, b: u8) -> Option<()> {
        if self.peek()? == b {
            self.pos += 1;
            Some(())
        } else {
            None
        }
    }

    /// Consumes the literal `word` (`null`, `true`, `false`).
    fn literal(&mut self, word: &str) -> Option<()> {
        if self.bytes()[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Some(())
        } else {
            None
        }
    }

    /// The text is over (trailing whitespace aside).
    pub(crate) fn end(mut self) -> Option<()> {
        match self.peek() {
            None => Some(()),
            Some(_) => None,
        }
    }

    /// Reads an object, calling `field` with each key; `field` must read
    /// the key's value. Keys holding escapes are refused.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            self.eat(b'"')?;
            let key = self.plain_string_body()?;
            self.eat(b':')?;
            self.peek()?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Reads an array, calling `element` for each element.
    pub(crate) fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(());
        }
        loop {
            element(self)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Consumes a `null` if one comes next: true when it did.
    pub(crate) fn null(&mut self) -> bool {
        self.peek() == Some(b'n') && self.literal("null").is_some()
    }

    /// Reads `null` only: a value the caller does not read unless absent.
    pub(crate) fn only_null(&mut self) -> Option<()> {
        self.null().then_some(())
    }

    /// Reads a string, or `null` as `None`.
    pub(crate) fn optional_string(&mut self) -> Option<Option<JsonStr<'a>>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// Reads an unsigned integer, or `null` as `None`.
    pub(crate) fn optional_u64(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        self.u64().map(Some)
    }

    /// Reads a string: borrowed from the text unless it holds escapes.
    pub(crate) fn string(&mut self) -> Option<JsonStr<'a>> {
        self.eat(b'"')?;
        let start = self.pos;
        let bytes = self.bytes();
        let end = start + plain_len(&bytes[start..]);
        match bytes.get(end)? {
            b'"' => {
                self.pos = end + 1;
                Some(JsonStr::from(Cow::Borrowed(self.text.get(start..end)?)))
            }
            b'\\' => {
                self.pos = end;
                let mut out = String::with_capacity(end - start + 16);
                out.push_str(self.text.get(start..end)?);
                self.escaped_rest(&mut out)?;
                Some(JsonStr::from(Cow::Owned(out)))
            }
            _ => None,
        }
    }

    /// The body of a string without escapes, after its opening quote.
    fn plain_string_body(&mut self) -> Option<&'a str> {
        let start = self.pos;
        let end = start + plain_len(&self.bytes()[start..]);
        if self.bytes().get(end) != Some(&b'"') {
            return None;
        }
        self.pos = end + 1;
        self.text.get(start..end)
    }

    /// Decodes the rest of a string from an escape on, through its closing
    /// quote.
    fn escaped_rest(&mut self, out: &mut String) -> Option<()> {
        let bytes = self.bytes();
        loop {
            let start = self.pos;
            let end = start + plain_len(&bytes[start..]);
            out.push_str(self.text.get(start..end)?);
            self.pos = end + 1;
            match bytes.get(end)? {
                b'"' => return Some(()),
                b'\\' => {}
                _ => return None,
            }
            let (c, used) = decode_escape(bytes.get(self.pos..)?)?;
            self.pos += used;
            out.push(c);
        }
    }

    /// Reads an unsigned integer without fraction or exponent that fits a
    /// `u64`.
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.peek()?;
        let digits = self.digits()?;
        let mut value: u64 = 0;
        for &d in digits {
            value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        Some(value)
    }

    /// The digits of an integer (`0`, or no leading zero), consumed.
    fn digits(&mut self) -> Option<&'a [u8]> {
        let bytes = self.bytes();
        let start = self.pos;
        let mut len = 0;
        while bytes.get(start + len).is_some_and(u8::is_ascii_digit) {
            len += 1;
        }
        if len == 0 || (len > 1 && bytes[start] == b'0') {
            return None;
        }
        if matches!(bytes.get(start + len), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.pos = start + len;
        Some(&bytes[start..start + len])
    }

    /// Skips a value the caller does not read: a string, an integer, a
    /// boolean or `null`. Anything else is refused.
    pub(crate) fn skip_scalar(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'n' => self.literal("null"),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'-' => {
                self.pos += 1;
                self.digits().map(drop)
            }
            _ => self.digits().map(drop),
        }
    }
}

/// The length of the run of bytes that can stand in a string as they are:
/// up to a quote, a backslash or a control character (which JSON forbids
/// in a string).
///
/// Eight bytes at a time: a byte equal to `c` is a zero byte of `x ^ c`,
/// and `(v - 0x01..) & !v & 0x80..` flags the zero bytes of `v` (and
/// `(x - 0x20..) & !x & 0x80..` the bytes below 0x20). A borrow can flag a
/// byte wrongly only above a byte flagged rightly, so the lowest flag of
/// the three is the first byte that ends the run.
fn plain_len(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |v: u64| v.wrapping_sub(ONES) & !v;
    let mut words = bytes.chunks_exact(8);
    let mut len = 0;
    for word in &mut words {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let x = u64::from_le_bytes(eight);
        let stops = (zero_bytes(x ^ (ONES * u64::from(b'"')))
            | zero_bytes(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGH;
        if stops != 0 {
            return len + (stops.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    let rest = words.remainder();
    len + rest
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(rest.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(json: &str) -> Option<String> {
        let mut scan = JsonScan::new(json);
        let s = scan.string()?;
        scan.end()?;
        Some(s.to_string())
    }

    #[test]
    fn strings_read_as_serde_json_reads_them_or_not_at_all() {
        for json in [
            r#""plain grüße""#,
            r#""a\"b\\c\/d\b\f\n\r\t""#,
            r#""\u00e9\u00E9 \ud83d\ude00 \u0000""#,
            r#""é\u0041""#,
            r#""""#,
        ] {
            let serde: String = serde_json::from_str(json).unwrap();
            assert_eq!(string(json), Some(serde), "{json}");
        }
        for json in [
            r#""\ud83d""#,
            r#""\ud83d\u0041""#,
            r#""\ude00""#,
            r#""\x""#,
            r#""\u12""#,
            "\"a\tb\"",
            r#""open"#,
            r#""a" x"#,
        ] {
            assert_eq!(string(json), None, "{json}");
        }
    }

    #[test]
    fn a_plain_run_ends_at_the_first_quote_backslash_or_control_byte() {
        let slow = |b: &[u8]| {
            b.iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .unwrap_or(b.len())
        };
        let alphabet = [
            b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x7f, 0x80, 0xa2, 0xff,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for len in 0..40 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        // Mostly plain bytes, so runs are long.
                        if seed.is_multiple_of(4) {
                            alphabet[(seed >> 8) as usize % alphabet.len()]
                        } else {
                            b'a' + (seed >> 16) as u8 % 26
                        }
                    })
                    .collect();
                assert_eq!(plain_len(&bytes), slow(&bytes), "{bytes:?}");
            }
        }
    }

    #[test]
    fn integers_are_plain_and_fit_a_u64() {
        let read = |json: &str| {
            let mut scan = JsonScan::new(json);
            let n = scan.u64()?;
            scan.end()?;
            Some(n)
        };
        assert_eq!(read(" 0 "), Some(0));
        assert_eq!(read("18446744073709551615"), Some(u64::MAX));
        for json in ["18446744073709551616", "01", "-1", "1.5", "1e3", "", "x"] {
            assert_eq!(read(json), None, "{json}");
        }
    }

    fn keys(json: &str) -> Option<Vec<&str>> {
        let mut scan = JsonScan::new(json);
        let mut keys = Vec::new();
        scan.object(|s, key| {
            keys.push(key);
            s.skip_scalar()
        })?;
        scan.end()?;
        Some(keys)
    }

    #[test]
    fn objects_refuse_what_json_forbids() {
        assert_eq!(
            keys(" { \"a\" : 1 ,\n\"b\":\"x\",\"c\":null,\"d\":true,\"e\":-2} "),
            Some(vec!["a", "b", "c", "d", "e"])
        );
        assert_eq!(keys("{}"), Some(vec![]));
        for json in [
            r#"{"a":1,}"#,
            r#"{"a":1"#,
            r#"{"a" 1}"#,
            r#"{"a":01}"#,
            r#"{"a":nul}"#,
            r#"{"a":{}}"#,
            r#"{"a":[]}"#,
            r#"{"\u0061":1}"#,
            r#"{"a":1} x"#,
            r#"{,}"#,
        ] {
            assert_eq!(keys(json), None, "{json}");
        }
    }
}
