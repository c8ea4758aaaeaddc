//! Lowercase hex digits of bytes, written into a buffer of known size: the
//! ids' 32 digits and the tool runs' 64-digit digests are made once a
//! call or a message, and a formatter call or a `char` pushed at a time
//! cost more than the rest of making them.

/// Two lowercase hex digits of every byte.
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

/// The hex digits of the `N` bytes `bytes` into `digits`, which holds
/// `2 * N` (two per byte, high half first).
pub(crate) fn hex_into(bytes: &[u8], digits: &mut [u8]) {
    for (pair, byte) in digits.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
    }
}

/// The 32 hex digits of `bytes` (a UUID's simple text).
pub(crate) fn hex16(bytes: [u8; 16]) -> [u8; 32] {
    let mut digits = [0; 32];
    hex_into(&bytes, &mut digits);
    digits
}

/// The 64 hex digits of `bytes` (a SHA-256 digest's text).
pub(crate) fn hex32(bytes: &[u8; 32]) -> String {
    let mut digits = [0; 64];
    hex_into(bytes, &mut digits);
    // Every byte written is an ASCII digit or letter.
    std::str::from_utf8(&digits).unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_lowercase_high_half_first() {
        let mut bytes = [0u8; 16];
        bytes[..3].copy_from_slice(&[0, 255, 16]);
        assert_eq!(&hex16(bytes)[..6], b"00ff10");
        let digest = [0xab; 32];
        assert_eq!(hex32(&digest), "ab".repeat(32));
        let uuid = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128;
        assert_eq!(
            std::str::from_utf8(&hex16(uuid.to_be_bytes())).unwrap(),
            format!("{uuid:032x}")
        );
    }
}
