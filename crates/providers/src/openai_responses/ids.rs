//! Ids as pi-ai writes them into a Responses request: tool-call ids
//! (`call_id|item_id`) made acceptable to the API, and the short hash that
//! shortens ids too long for it.

/// pi-ai's `shortHash`: a fast deterministic hash of `text`'s UTF-16 code
/// units, written in base 36 (two 32-bit halves).
pub(super) fn short_hash(text: &str) -> String {
    let mut h1: u32 = 0xdead_beef;
    let mut h2: u32 = 0x41c6_ce57;
    for unit in text.encode_utf16() {
        let ch = u32::from(unit);
        h1 = (h1 ^ ch).wrapping_mul(2_654_435_761);
        h2 = (h2 ^ ch).wrapping_mul(1_597_334_677);
    }
    h1 = (h1 ^ (h1 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h2 ^ (h2 >> 13)).wrapping_mul(3_266_489_909);
    h2 = (h2 ^ (h2 >> 16)).wrapping_mul(2_246_822_507)
        ^ (h1 ^ (h1 >> 13)).wrapping_mul(3_266_489_909);
    format!("{}{}", base36(h2), base36(h1))
}

/// `n` in base 36, lower case, as JavaScript's `toString(36)`.
fn base36(mut n: u32) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// pi-ai's `normalizeIdPart`: every character but ASCII letters, digits,
/// `_` and `-` becomes `_` (one per UTF-16 unit, as JavaScript counts),
/// cut to 64 characters, trailing `_` removed.
pub(super) fn normalize_id_part(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for c in part.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            out.extend(std::iter::repeat_n('_', c.len_utf16()));
        }
    }
    out.truncate(64);
    out.trim_end_matches('_').to_string()
}

/// The providers whose tool-call ids carry a Responses item id
/// (`call_id|item_id`).
const ITEM_ID_PROVIDERS: [&str; 3] = ["openai", "openai-codex", "opencode"];

/// pi-ai's tool-call id for a call another model made, sent to `provider`:
/// `foreign` when the call came from another provider or API (its item id
/// is then hashed, as the API checks item ids it made itself).
pub(super) fn normalize_call_id(provider: &str, id: &str, foreign: bool) -> String {
    if !ITEM_ID_PROVIDERS.contains(&provider) {
        return normalize_id_part(id);
    }
    let mut parts = id.split('|');
    let (Some(call_id), Some(item_id)) = (parts.next(), parts.next()) else {
        return normalize_id_part(id);
    };
    let mut item = if foreign {
        let mut hashed = format!("fc_{}", short_hash(item_id));
        hashed.truncate(64);
        hashed
    } else {
        normalize_id_part(item_id)
    };
    // The API wants function-call item ids to start with `fc_`.
    if !item.starts_with("fc_") {
        item = normalize_id_part(&format!("fc_{item}"));
    }
    format!("{}|{item}", normalize_id_part(call_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_hash_matches_pi() {
        // Values from pi-ai 0.73.1's shortHash.
        assert_eq!(short_hash(""), "k4n83c7h0j2b");
        assert_eq!(short_hash("fc_abc"), "1qaoofs1vxahbg");
        assert_eq!(short_hash("ü😀"), "2rfb6joz9u98");
    }

    #[test]
    fn ids_are_normalised_as_pi_normalises_them() {
        assert_eq!(normalize_id_part("call.1|x😀"), "call_1_x");
        assert_eq!(normalize_id_part(&"a".repeat(70)).len(), 64);
        assert_eq!(
            normalize_call_id("openai", "call_1|fc_1", false),
            "call_1|fc_1"
        );
        assert_eq!(
            normalize_call_id("openai", "call_1|item", false),
            "call_1|fc_item"
        );
        assert_eq!(
            normalize_call_id("openai", "call_1|fc_abc", true),
            "call_1|fc_1qaoofs1vxahbg"
        );
        assert_eq!(
            normalize_call_id("azure", "call_1|fc_1", true),
            "call_1_fc_1"
        );
        assert_eq!(normalize_call_id("openai", "toolu_01", true), "toolu_01");
    }
}
