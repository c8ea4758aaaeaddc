//! Thread ids, validated so that no id can name a path outside a store's root
//! or a subject outside a store's prefix.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest thread id accepted.
const MAX_THREAD_ID_LEN: usize = 128;

/// The id of a thread: 1 to 128 characters of `A-Z a-z 0-9 _ -` and interior
/// single dots (`team.general` is fine; `..`, `.hidden`, `a/b`, `a b` are not).
///
/// The rules make an id safe as a file or folder name (`<id>.jsonl` and
/// `<id>/` always stay inside the store's folder) and as NATS subject tokens
/// (no wildcards, no empty token).
///
/// ```
/// use roundtable_thread_stream::ThreadId;
///
/// assert!(ThreadId::new("support-42").is_ok());
/// assert!(ThreadId::new("../etc/passwd").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(Arc<str>);

impl ThreadId {
    /// Validates `id` and wraps it.
    pub fn new(id: impl AsRef<str>) -> Result<Self, InvalidThreadId> {
        let id = id.as_ref();
        validate(id)?;
        Ok(Self(Arc::from(id)))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn validate(id: &str) -> Result<(), InvalidThreadId> {
    let reason = if id.is_empty() {
        Some("is empty")
    } else if id.len() > MAX_THREAD_ID_LEN {
        Some("is longer than 128 characters")
    } else if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    {
        Some("may hold only A-Z, a-z, 0-9, '_', '-' and '.'")
    } else if id.starts_with('.') || id.ends_with('.') || id.contains("..") {
        Some("may not start or end with '.' or hold '..'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(InvalidThreadId {
            id: id.chars().take(MAX_THREAD_ID_LEN + 8).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for ThreadId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for ThreadId {
    type Error = InvalidThreadId;
    fn try_from(id: &str) -> Result<Self, Self::Error> {
        Self::new(id)
    }
}

impl Serialize for ThreadId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ThreadId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let id = roundtable_providers::serde_shared::arc_str(d)?;
        validate(&id).map_err(serde::de::Error::custom)?;
        Ok(ThreadId(id))
    }
}

/// A thread id that breaks the rules of [`ThreadId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid thread id {id:?}: it {reason}")]
pub struct InvalidThreadId {
    /// The rejected id (cut to a sane length).
    pub id: String,
    /// Which rule it breaks.
    pub reason: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_ids() {
        for id in [
            "a",
            "support-42",
            "team.general",
            "C0FFEE_1",
            &"x".repeat(128),
        ] {
            assert!(ThreadId::new(id).is_ok(), "{id}");
        }
    }

    #[test]
    fn rejects_ids_that_could_escape_a_root_or_a_subject() {
        for id in [
            "",
            "..",
            ".",
            "../x",
            "a/../../b",
            "/etc/passwd",
            "a/b",
            "a\\b",
            ".hidden",
            "a.",
            "a..b",
            "a b",
            "a*",
            "a>",
            "nul\0",
            "é",
            "a\nb",
            &"x".repeat(129),
        ] {
            assert!(ThreadId::new(id).is_err(), "{id:?}");
        }
    }

    #[test]
    fn deserialising_validates() {
        assert!(serde_json::from_str::<ThreadId>(r#""ok-1""#).is_ok());
        assert!(serde_json::from_str::<ThreadId>(r#""../x""#).is_err());
    }
}
