//! Reading `Arc<str>` in one allocation.
//!
//! serde reads an `Arc<str>` as a `Box<str>` and then copies it into the
//! `Arc`: two allocations and a copy per string. Thread replays read millions
//! of ids, authors and texts, so the stream's own fields read straight into the
//! `Arc`.

use std::fmt;
use std::sync::Arc;

use serde::Deserializer;
use serde::de::{self, Visitor};

/// `#[serde(deserialize_with = "crate::arc_str::deserialize")]`.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    d.deserialize_str(ArcStrVisitor)
}

/// A visitor that builds an `Arc<str>` from whatever string it is given.
pub(crate) struct ArcStrVisitor;

impl Visitor<'_> for ArcStrVisitor {
    type Value = Arc<str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Arc<str>, E> {
        Ok(Arc::from(v))
    }
}

/// An `Arc<str>` read in one allocation (for `Option`al and generic slots).
pub(crate) struct ArcStr(pub(crate) Arc<str>);

impl<'de> serde::Deserialize<'de> for ArcStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(ArcStrVisitor).map(ArcStr)
    }
}
