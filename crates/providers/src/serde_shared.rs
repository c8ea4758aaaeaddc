//! Reading shared values (`Arc<str>`, `Arc<T>`) in one allocation, for
//! `#[serde(deserialize_with = "...")]`.
//!
//! serde reads an `Arc<str>` as a `Box<str>` that it then copies into the
//! `Arc`, and an `Arc<T>` as a `Box<T>` moved into the `Arc`: two
//! allocations (and a copy) where one does. Thread replays read millions of
//! messages, ids and names, so the message model's shared fields, and the
//! thread stream's, are read straight into their `Arc`.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Reads a string into an `Arc<str>` in one allocation.
pub fn arc_str<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    d.deserialize_str(ArcStrVisitor)
}

/// Reads an optional string (absent with `#[serde(default)]`, or `null`)
/// into an `Arc<str>` in one allocation.
pub fn option_arc_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
    d.deserialize_option(OptionVisitor(PhantomData))
}

/// Reads a `T` into an `Arc<T>` in one allocation.
pub fn arc<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Arc<T>, D::Error> {
    T::deserialize(d).map(Arc::new)
}

struct ArcStrVisitor;

impl Visitor<'_> for ArcStrVisitor {
    type Value = Arc<str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Arc<str>, E> {
        Ok(Arc::from(v))
    }
}

struct OptionVisitor<'de>(PhantomData<&'de ()>);

impl<'de> Visitor<'de> for OptionVisitor<'de> {
    type Value = Option<Arc<str>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        arc_str(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Shared {
        #[serde(deserialize_with = "arc_str")]
        name: Arc<str>,
        #[serde(default, deserialize_with = "option_arc_str")]
        label: Option<Arc<str>>,
        #[serde(deserialize_with = "arc")]
        list: Arc<Vec<u32>>,
    }

    #[test]
    fn shared_values_read_as_serde_reads_them() {
        for (json, label) in [
            (r#"{"name":"a\"b","label":"l","list":[1]}"#, Some("l")),
            (r#"{"name":"a\"b","label":null,"list":[1]}"#, None),
            (r#"{"name":"a\"b","list":[1]}"#, None),
        ] {
            let shared: Shared = serde_json::from_str(json).unwrap();
            assert_eq!(&*shared.name, "a\"b");
            assert_eq!(shared.label.as_deref(), label);
            assert_eq!(*shared.list, [1]);
        }
        for bad in [
            r#"{"name":1,"list":[1]}"#,
            r#"{"name":"a","label":2,"list":[1]}"#,
            r#"{"name":"a","list":{}}"#,
        ] {
            assert!(serde_json::from_str::<Shared>(bad).is_err(), "{bad}");
        }
    }
}
