//! Token usage and its cost, counted as pi-ai counts them, and token counts
//! as read from a provider: untrusted numbers that saturate, never overflow.

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// Tokens used by one model call.
///
/// As in pi-ai, `input` excludes cache reads and writes, `output` includes
/// reasoning tokens, and `total_tokens` is the sum of the four counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: u64,
    /// `input + output + cache_read + cache_write`.
    pub total_tokens: u64,
    /// What those tokens cost, in US dollars.
    pub cost: Cost,
}

/// The cost of a model call in US dollars, by kind of token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Cost of uncached input tokens.
    #[serde(serialize_with = "js_number::serialize")]
    pub input: f64,
    /// Cost of output tokens.
    #[serde(serialize_with = "js_number::serialize")]
    pub output: f64,
    /// Cost of cache reads.
    #[serde(serialize_with = "js_number::serialize")]
    pub cache_read: f64,
    /// Cost of cache writes.
    #[serde(serialize_with = "js_number::serialize")]
    pub cache_write: f64,
    /// The sum of the four.
    #[serde(serialize_with = "js_number::serialize")]
    pub total: f64,
}

impl Usage {
    /// The usage of these token counts, with their total and no cost yet.
    /// The counts come from a provider, so the total saturates at
    /// `u64::MAX` instead of overflowing.
    pub(crate) fn from_counts(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Self {
        Self {
            input,
            output,
            cache_read,
            cache_write,
            total_tokens: input
                .saturating_add(output)
                .saturating_add(cache_read)
                .saturating_add(cache_write),
            cost: Cost::default(),
        }
    }

    /// Adds another call's usage to this one (token counts and costs).
    /// Counts saturate at `u64::MAX`.
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cost.input += other.cost.input;
        self.cost.output += other.cost.output;
        self.cost.cache_read += other.cost.cache_read;
        self.cost.cache_write += other.cost.cache_write;
        self.cost.total += other.cost.total;
    }
}

/// Reads a token count from a provider's usage object (a serde
/// `deserialize_with` for `Option<u64>` fields). Any JSON number is taken
/// and clamped into `u64`: a negative count is 0, one beyond `u64::MAX` is
/// `u64::MAX`, a fraction loses its fractional part. `null` and values that
/// are not numbers count as absent: a server's odd bookkeeping must not
/// make a whole stream unreadable.
pub(crate) fn token_count<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    deserializer.deserialize_any(TokenCount)
}

struct TokenCount;

impl<'de> Visitor<'de> for TokenCount {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a token count")
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(u64::try_from(v).unwrap_or(0)))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Self::Value, E> {
        Ok(Some(u64::try_from(v).unwrap_or(u64::MAX)))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Self::Value, E> {
        Ok(Some(u64::try_from(v.max(0)).unwrap_or(u64::MAX)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        // `as` saturates: negative to 0, too large to u64::MAX (NaN, which
        // JSON cannot carry, to 0).
        Ok(Some(v as u64))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// Numbers written the way JavaScript's `Number.prototype.toString` writes
/// them (`0` not `0.0`, `0.00001` not `1e-5`, `1e-7`, `1.5e+21`), so costs
/// serialise byte for byte as pi-ai writes them.
mod js_number {
    use serde::Serializer;

    pub(super) fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        let value = *value;
        // An integer below 2^53 (a zero cost above all) is written as
        // `serde_json` writes an integer, with no text made and checked.
        // (A fraction is not left to `serde_json`: its shortest digits
        // break a tie between two the other way from `format`'s.)
        if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
            return serializer.serialize_i64(value as i64);
        }
        let text = format(value);
        match serde_json::value::RawValue::from_string(text) {
            Ok(raw) => serde::Serialize::serialize(&raw, serializer),
            Err(_) => serializer.serialize_f64(value),
        }
    }

    /// JavaScript's number-to-string algorithm (ECMA-262 Number::toString)
    /// over Rust's shortest round-trip digits.
    pub(super) fn format(value: f64) -> String {
        if !value.is_finite() {
            // JSON has no NaN or infinity; JSON.stringify writes null.
            return "null".to_string();
        }
        if value == 0.0 {
            return "0".to_string();
        }
        let sci = format!("{:e}", value.abs());
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
        let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
        let exponent: i64 = exponent.parse().unwrap_or(0);
        let k = digits.len() as i64;
        let n = exponent + 1;
        let mut out = String::new();
        if value < 0.0 {
            out.push('-');
        }
        if k <= n && n <= 21 {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (n - k) as usize));
        } else if 0 < n && n <= 21 {
            out.push_str(&digits[..n as usize]);
            out.push('.');
            out.push_str(&digits[n as usize..]);
        } else if -6 < n && n <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-n) as usize));
            out.push_str(&digits);
        } else {
            out.push_str(&digits[..1]);
            if k > 1 {
                out.push('.');
                out.push_str(&digits[1..]);
            }
            out.push('e');
            out.push(if n > 0 { '+' } else { '-' });
            out.push_str(&(n - 1).abs().to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_with_pi_field_names() {
        let usage = Usage {
            input: 10,
            output: 5,
            cache_read: 3,
            cache_write: 2,
            total_tokens: 20,
            cost: Cost {
                input: 0.5,
                output: 0.25,
                cache_read: 0.0,
                cache_write: 0.0,
                total: 0.75,
            },
        };
        let json = serde_json::to_value(usage).unwrap();
        assert_eq!(json["cacheRead"], 3);
        assert_eq!(json["cacheWrite"], 2);
        assert_eq!(json["totalTokens"], 20);
        assert_eq!(json["cost"]["cacheRead"], 0.0);
        assert_eq!(json["cost"]["total"], 0.75);
    }

    #[test]
    fn costs_are_written_as_javascript_writes_numbers() {
        for (value, js) in [
            (0.0, "0"),
            (1.0, "1"),
            (0.75, "0.75"),
            (0.00001, "0.00001"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (123456.789, "123456.789"),
            (1e21, "1e+21"),
            (-0.5, "-0.5"),
            (0.1 + 0.2, "0.30000000000000004"),
        ] {
            assert_eq!(js_number::format(value), js, "{value}");
        }
        let cost = Cost {
            total: 0.00003,
            ..Cost::default()
        };
        assert_eq!(
            serde_json::to_string(&cost).unwrap(),
            r#"{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.00003}"#
        );
    }

    #[test]
    fn costs_written_by_serde_json_are_the_javascript_spelling() {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -3.0,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            1e-5,
            f64::from_bits(1e-5f64.to_bits() - 1),
            f64::from_bits(1e-5f64.to_bits() + 1),
            9_999_999_999_999_998.0,
            1e16,
            0.5e16 + 0.5,
            1234.5678,
            0.1 + 0.2,
            f64::MIN_POSITIVE,
            f64::MAX,
        ];
        // Bit patterns spread over the whole range of finite numbers, and
        // numbers near the edges of JavaScript's and `serde_json`'s
        // spellings.
        let mut bits: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            bits ^= bits << 13;
            bits ^= bits >> 7;
            bits ^= bits << 17;
            values.push(f64::from_bits(bits));
            let fraction = (bits >> 11) as f64 / (1u64 << 53) as f64;
            values.push(1e-5 * (1.0 + fraction));
            values.push(1e-6 * (1.0 + 9.0 * fraction));
            values.push(1e15 * (1.0 + 9.0 * fraction));
            values.push((bits >> 12) as f64 + fraction);
        }
        for value in values.into_iter().filter(|v| v.is_finite()) {
            let cost = Cost {
                total: value,
                ..Cost::default()
            };
            let json = serde_json::to_string(&cost).unwrap();
            let written = json
                .strip_prefix(r#"{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":"#)
                .and_then(|rest| rest.strip_suffix('}'))
                .unwrap();
            assert_eq!(written, js_number::format(value), "{value:e}");
        }
    }

    #[test]
    fn totals_and_sums_saturate() {
        let huge = Usage::from_counts(u64::MAX, u64::MAX, 1, 0);
        assert_eq!(huge.total_tokens, u64::MAX);
        let mut sum = Usage::from_counts(1, 2, 3, 4);
        assert_eq!(sum.total_tokens, 10);
        sum.add(&huge);
        assert_eq!(
            (sum.input, sum.output, sum.cache_read, sum.total_tokens),
            (u64::MAX, u64::MAX, 4, u64::MAX)
        );
    }

    #[derive(Debug, Deserialize)]
    struct Counted {
        #[serde(default, deserialize_with = "token_count")]
        n: Option<u64>,
    }

    #[test]
    fn token_counts_are_clamped_into_u64() {
        for (json, n) in [
            (r#"{"n":12}"#, Some(12)),
            (r#"{"n":18446744073709551615}"#, Some(u64::MAX)),
            (r#"{"n":18446744073709551616}"#, Some(u64::MAX)),
            (r#"{"n":1e300}"#, Some(u64::MAX)),
            (r#"{"n":-5}"#, Some(0)),
            (r#"{"n":-1e300}"#, Some(0)),
            (r#"{"n":12.75}"#, Some(12)),
            (r#"{"n":null}"#, None),
            (r#"{"n":"12"}"#, None),
            (r#"{"n":{"a":[1,{"b":2}]}}"#, None),
            (r#"{"n":[1,2]}"#, None),
            (r#"{"n":true}"#, None),
            (r#"{}"#, None),
        ] {
            let counted: Counted = serde_json::from_str(json).unwrap();
            assert_eq!(counted.n, n, "{json}");
        }
    }

    #[test]
    fn add_sums_tokens_and_cost() {
        let mut a = Usage {
            input: 1,
            output: 2,
            total_tokens: 3,
            ..Usage::default()
        };
        a.cost.total = 0.5;
        let b = a;
        a.add(&b);
        assert_eq!((a.input, a.output, a.total_tokens), (2, 4, 6));
        assert_eq!(a.cost.total, 1.0);
    }
}
