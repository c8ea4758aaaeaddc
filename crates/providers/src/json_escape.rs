//! The escapes of a JSON string, decoded once for the hand-written readers
//! (the providers' stream chunks, the thread stream's lines). Each reader
//! scans the plain bytes itself and calls [`decode_escape`] after every
//! backslash; where it answers `None` the reader leaves the input to
//! serde_json, whose error then stands.

/// Decodes the escape that follows a backslash: `after` starts right after
/// the `\`. Returns the character and how many bytes of `after` it took
/// (1, 5 for `\uXXXX`, 11 for a surrogate pair). `None` for an unknown
/// escape, bad hex digits, or half a surrogate pair alone.
///
/// ```
/// use roundtable_providers::json_escape::decode_escape;
///
/// assert_eq!(decode_escape(b"n rest"), Some(('\n', 1)));
/// assert_eq!(decode_escape(b"u00e9"), Some(('é', 5)));
/// assert_eq!(decode_escape(br"ud83d\ude00"), Some(('😀', 11)));
/// assert_eq!(decode_escape(b"ud83d"), None);
/// assert_eq!(decode_escape(b"x"), None);
/// ```
pub fn decode_escape(after: &[u8]) -> Option<(char, usize)> {
    let c = match *after.first()? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let high = hex4(after.get(1..5)?)?;
            return match high {
                0xD800..=0xDBFF => {
                    if after.get(5..7)? != b"\\u" {
                        return None;
                    }
                    let low = hex4(after.get(7..11)?)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    let c = char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?;
                    Some((c, 11))
                }
                0xDC00..=0xDFFF => None,
                _ => Some((char::from_u32(high)?, 5)),
            };
        }
        _ => return None,
    };
    Some((c, 1))
}

/// Four hex digits (either case) as a number.
fn hex4(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0, |value, &d| {
        Some(value * 16 + char::from(d).to_digit(16)?)
    })
}
