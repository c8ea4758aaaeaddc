//! The ids a session hands out: `sess_…`, `msg_…`, `turn_…`.
//!
//! Each is a prefix and 32 lowercase hex digits of a UUID v7, so ids sort by
//! creation time and a session id is a valid thread id (the session's
//! thread has the session's id).

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use roundtable_thread_stream::fresh_uuid_v7;

use serde::{Deserialize, Serialize};

/// A text that is not an id of the kind expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{id:?} is not a valid {kind}")]
pub struct InvalidId {
    /// Which kind of id was expected (`SessionId`, `MessageId`, `TurnId`).
    pub kind: &'static str,
    /// What was given (cut to a sane length).
    pub id: String,
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
            schemars::JsonSchema,
        )]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(Arc<str>);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// A new id (time-ordered): the prefix and the 32 hex digits of a
            /// UUID v7 from the generator of the thread stream's entry ids,
            /// so the ids of one process strictly increase.
            pub fn generate() -> Self {
                let mut digits = [0u8; 32];
                // Two digits a byte: the lengths always agree.
                let _ = hex::encode_to_slice(fresh_uuid_v7().to_be_bytes(), &mut digits);
                Self(joined($prefix, &digits))
            }

            /// Reads an id, refusing anything that is not this prefix and 1 to
            /// 64 of `a-z`, `A-Z`, `0-9`, `_`, `-`.
            pub fn parse(text: &str) -> Result<Self, InvalidId> {
                if is_id(text, $prefix) {
                    Ok(Self(Arc::from(text)))
                } else {
                    Err(InvalidId {
                        kind: stringify!($name),
                        id: text.chars().take(80).collect(),
                    })
                }
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, shared.
            pub fn as_arc(&self) -> &Arc<str> {
                &self.0
            }
        }

        /// Looked up by its text (the runtime cache finds a session by the
        /// caller's text without making an id first).
        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(text: String) -> Result<Self, InvalidId> {
                Self::parse(&text)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0.to_string()
            }
        }
    };
}

prefixed_id!(
    /// A session's id (`sess_…`), also the id of its thread.
    SessionId,
    "sess_"
);
prefixed_id!(
    /// A message's id (`msg_…`), also the id of its `chat` entry.
    MessageId,
    "msg_"
);
prefixed_id!(
    /// A turn's id (`turn_…`), carried by every entry of the turn.
    TurnId,
    "turn_"
);

impl MessageId {
    /// The id of the message an idempotency key names in `session`: the
    /// same key always gives the same id (a UUID v5 of the session and
    /// the key, where generated ids are v7).
    pub(crate) fn for_key(session: &str, key: &str) -> Self {
        let uuid = uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_OID,
            format!("{session}\n{key}").as_bytes(),
        );
        Self(Arc::from(format!("{}{}", Self::PREFIX, uuid.simple())))
    }

    /// True when `id` is one [`for_key`](Self::for_key) gives: the only
    /// message ids a submit can be given twice.
    pub(crate) fn is_for_key(id: &str) -> bool {
        id.strip_prefix(Self::PREFIX)
            .and_then(|hex| uuid::Uuid::try_parse(hex).ok())
            .is_some_and(|uuid| uuid.get_version_num() == 5)
    }
}

/// `prefix` and `rest` as one shared text, made in a buffer on the stack
/// (one allocation: the `Arc`'s). `rest` is at most 64 bytes of an id
/// (longer is cut, which no caller gives).
fn joined(prefix: &str, rest: &[u8]) -> Arc<str> {
    let mut text = [0u8; 80];
    let rest = &rest[..rest.len().min(64)];
    let len = prefix.len() + rest.len();
    text[..prefix.len()].copy_from_slice(prefix.as_bytes());
    text[prefix.len()..len].copy_from_slice(rest);
    // Both parts are ASCII: the prefixes, and hex digits or an id's
    // checked characters.
    Arc::from(std::str::from_utf8(&text[..len]).unwrap_or_default())
}

impl TurnId {
    /// The id of the first turn answering `message`: derived from the
    /// message, so a retried submit names the same turn even before it
    /// started. Its suffix under the turn's prefix (a message id's suffix
    /// is a valid turn id's).
    pub(crate) fn for_message(message: &MessageId) -> Self {
        let suffix = &message.as_str()[MessageId::PREFIX.len()..];
        Self(joined(Self::PREFIX, suffix.as_bytes()))
    }
}

/// True when `text` is `prefix` followed by 1 to 64 safe characters.
fn is_id(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 64
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    })
}

impl SessionId {
    /// The session's thread. (Every session id is a valid thread id: a
    /// prefix and at most 64 safe characters; the error is the thread id's
    /// own check, kept rather than assumed.)
    pub fn thread(
        &self,
    ) -> Result<roundtable_thread_stream::ThreadId, roundtable_thread_stream::InvalidThreadId> {
        roundtable_thread_stream::ThreadId::new(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_prefix_and_sort_by_time() {
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert!(a.as_str().starts_with("sess_"));
        assert_eq!(a.as_str().len(), 37);
        assert!(a < b);
        assert_eq!(a.thread().unwrap().as_str(), a.as_str());
        assert!(MessageId::generate().as_str().starts_with("msg_"));
        assert!(TurnId::generate().as_str().starts_with("turn_"));
        let digits = uuid::Uuid::try_parse(&a.as_str()["sess_".len()..]).unwrap();
        assert_eq!(digits.get_version_num(), 7);
        assert_eq!(digits.simple().to_string(), a.as_str()["sess_".len()..]);
    }

    #[test]
    fn a_key_always_names_the_same_message() {
        let id = MessageId::for_key("sess_1", "key-1");
        assert_eq!(id, MessageId::for_key("sess_1", "key-1"));
        assert_ne!(id, MessageId::for_key("sess_2", "key-1"));
        assert!(MessageId::parse(id.as_str()).is_ok());
        assert!(MessageId::is_for_key(id.as_str()));
        assert!(!MessageId::is_for_key(MessageId::generate().as_str()));
        assert!(!MessageId::is_for_key("msg_1"));
    }

    #[test]
    fn parsing_refuses_what_is_not_an_id() {
        assert!(SessionId::parse("sess_0190abc").is_ok());
        for bad in [
            "",
            "sess_",
            "msg_1",
            "sess_../x",
            "sess_a b",
            "sess_a.b",
            &format!("sess_{}", "a".repeat(65)),
        ] {
            assert!(SessionId::parse(bad).is_err(), "{bad:?}");
        }
        let id: TurnId = serde_json::from_str("\"turn_1\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"turn_1\"");
        assert!(serde_json::from_str::<TurnId>("\"sess_1\"").is_err());
    }
}
