//! [`JsonStr`]: a string of JSON text (a field of a streamed chunk, a key
//! or tag of a stored message), borrowed from the text.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A string of a chunk's JSON: borrowed from the text unless it holds
/// escapes (then unescaped into its own). Serde borrows a `Cow<str>` field
/// only when it is the field's whole type, never inside an `Option`; this
/// borrows wherever it is, so an optional field costs no allocation per
/// chunk.
#[derive(Debug, PartialEq)]
pub(crate) struct JsonStr<'a>(Cow<'a, str>);

impl JsonStr<'_> {
    /// The string, owned (copied only when it was borrowed).
    pub(crate) fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

impl Deref for JsonStr<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct JsonStrVisitor;

        impl<'de> Visitor<'de> for JsonStrVisitor {
            type Value = JsonStr<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v.to_string())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v)))
            }
        }

        deserializer.deserialize_str(JsonStrVisitor)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    struct Chunk<'a> {
        #[serde(default, borrow)]
        text: Option<JsonStr<'a>>,
    }

    #[test]
    fn plain_strings_are_borrowed_and_escaped_ones_unescaped() {
        let json = r#"{"text":"grüße"}"#;
        let chunk: Chunk = serde_json::from_str(json).unwrap();
        let text = chunk.text.unwrap();
        assert!(matches!(text.0, Cow::Borrowed(_)));
        assert_eq!(&*text, "grüße");
        let chunk: Chunk = serde_json::from_str(r#"{"text":"a\"b\n"}"#).unwrap();
        assert_eq!(chunk.text.as_deref(), Some("a\"b\n"));
        let chunk: Chunk = serde_json::from_str(r#"{"text":null}"#).unwrap();
        assert!(chunk.text.is_none());
        assert!(serde_json::from_str::<Chunk>(r#"{"text":7}"#).is_err());
    }
}
