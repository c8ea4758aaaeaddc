//! What a store accepts: entries that read back exactly as they were written.
//!
//! An entry is stored as one flat JSON object (header fields, `type`, then the
//! body's fields), so a body could break the line in ways no JSON encoder
//! reports: an unknown body's field named like a header (read back as the
//! header, or a duplicate key), an unknown body tagged with a known `type`
//! (read back as that body), a signal without a name (read back as an unknown
//! body), a cost that is NaN (written as `null`, which does not read back as
//! a number). Each store checks a batch here before it writes anything, so an
//! append never acknowledges an entry that cannot be read back, and every
//! store (memory, JSONL, NATS) accepts and refuses the same entries.

use crate::body::BodyKind;
use crate::entry::is_header_field;
use crate::error::InvalidEntry;
use crate::{Entry, EntryBody, NewEntry, StoreError, ThreadId};

impl EntryBody {
    /// Checks that the body can be stored and read back unchanged; every
    /// store refuses an append holding a body that cannot
    /// ([`StoreError::InvalidEntry`]). A body is refused when:
    ///
    /// - it is [`EntryBody::Other`] with the `type` of a known body (`chat`,
    ///   `pi.assistant`, `signal.<name>`, ...): it would read back as that
    ///   body;
    /// - it is [`EntryBody::Other`] with a field named like an entry header
    ///   (`seq`, `id`, `thread`, `author`, `at`, `more`, `type`);
    /// - it is a [`Signal`](crate::Signal) with an empty name;
    /// - it is an assistant message whose cost holds NaN or an infinity.
    ///
    /// ```
    /// use roundtable_thread_stream::{EntryBody, InvalidEntry};
    ///
    /// let vote = serde_json::json!({"choice": 2, "id": "v-1"});
    /// let body = EntryBody::Other {
    ///     kind: "poll.vote".into(),
    ///     fields: Box::new(vote.as_object().cloned().unwrap_or_default()),
    /// };
    /// assert!(matches!(body.check(), Err(InvalidEntry::HeaderField { .. })));
    /// ```
    pub fn check(&self) -> Result<(), InvalidEntry> {
        match self {
            EntryBody::Other { kind, fields } => {
                if BodyKind::of(kind) != BodyKind::Unknown {
                    return Err(InvalidEntry::KnownKind { kind: kind.clone() });
                }
                if let Some(field) = fields.keys().find(|name| is_header_field(name)) {
                    return Err(InvalidEntry::HeaderField {
                        kind: kind.clone(),
                        field: field.clone(),
                    });
                }
            }
            EntryBody::Signal(signal) if signal.name.is_empty() => {
                return Err(InvalidEntry::UnnamedSignal);
            }
            EntryBody::Assistant(assistant) => {
                // The only floats of any body; the providers write a
                // non-finite one as `null`, as `JSON.stringify` does.
                let cost = &assistant.message().usage.cost;
                for (field, value) in [
                    ("message.usage.cost.input", cost.input),
                    ("message.usage.cost.output", cost.output),
                    ("message.usage.cost.cacheRead", cost.cache_read),
                    ("message.usage.cost.cacheWrite", cost.cache_write),
                    ("message.usage.cost.total", cost.total),
                ] {
                    if !value.is_finite() {
                        return Err(InvalidEntry::NotFinite { field });
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The entries of one append, checked: the only way a store turns new
/// entries into stored ones, so no store can skip the check.
#[derive(Debug, Clone)]
pub(crate) struct StorableBatch(Vec<NewEntry>);

impl StorableBatch {
    /// Checks every entry of an append to `thread`; the first that cannot be
    /// stored refuses the whole batch.
    pub(crate) fn check(thread: &ThreadId, entries: Vec<NewEntry>) -> Result<Self, StoreError> {
        for (index, entry) in entries.iter().enumerate() {
            entry
                .body
                .check()
                .map_err(|source| StoreError::InvalidEntry {
                    thread: thread.clone(),
                    index,
                    source,
                })?;
        }
        Ok(Self(entries))
    }

    /// The new entries, in order.
    pub(crate) fn entries(&self) -> &[NewEntry] {
        &self.0
    }

    /// The entries placed in `thread` after seq `last`.
    pub(crate) fn place(self, thread: &ThreadId, last: u64) -> Vec<Entry> {
        self.0
            .into_iter()
            .zip(last + 1..)
            .map(|(entry, seq)| entry.into_entry(thread.clone(), seq))
            .collect()
    }

    /// Whether `stored` holds exactly these entries (seqs aside): how a store
    /// that drops retried appends tells its own earlier try from another
    /// batch that reused an entry id.
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    pub(crate) fn is_stored_as(&self, stored: &[Entry]) -> bool {
        self.0.len() == stored.len()
            && self.0.iter().zip(stored).all(|(new, old)| {
                new.id == old.id
                    && new.author == old.author
                    && new.at == old.at
                    && new.body == old.body
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_providers::AssistantMessage;
    use serde_json::json;

    use crate::{AssistantEntry, Signal};

    fn other(kind: &str, fields: serde_json::Value) -> EntryBody {
        EntryBody::Other {
            kind: kind.into(),
            fields: Box::new(fields.as_object().cloned().unwrap_or_default()),
        }
    }

    #[test]
    fn unknown_bodies_may_not_use_header_names_or_known_types() {
        for field in ["seq", "id", "thread", "author", "at", "more", "type"] {
            assert_eq!(
                other("poll.vote", json!({ field: 1 })).check(),
                Err(InvalidEntry::HeaderField {
                    kind: "poll.vote".into(),
                    field: field.into()
                })
            );
        }
        for kind in [
            "chat",
            "pi.assistant",
            "pi.tool_result",
            "chat.chunk",
            "signal.typing",
            "compaction",
            "turn.started",
            "turn.ended",
            "turn.failed",
        ] {
            assert_eq!(
                other(kind, json!({})).check(),
                Err(InvalidEntry::KnownKind { kind: kind.into() })
            );
        }
        // Near misses are unknown types and ordinary fields.
        for kind in ["", "signal.", "signal", "Chat", "chat ", "poll.vote"] {
            assert_eq!(other(kind, json!({"Seq": 1, "ids": 2})).check(), Ok(()));
        }
    }

    #[test]
    fn signals_need_a_name_and_costs_a_number() {
        let unnamed = EntryBody::Signal(Signal {
            name: String::new(),
            data: json!(1).into(),
        });
        assert_eq!(unnamed.check(), Err(InvalidEntry::UnnamedSignal));
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut message = AssistantMessage::empty("api", "p", "m", 1);
            message.usage.cost.cache_write = bad;
            let body = EntryBody::Assistant(AssistantEntry::new(None, message));
            assert_eq!(
                body.check(),
                Err(InvalidEntry::NotFinite {
                    field: "message.usage.cost.cacheWrite"
                })
            );
        }
    }

    #[test]
    fn a_batch_is_refused_at_its_first_bad_entry() {
        let t = ThreadId::new("t").unwrap();
        let entries = vec![
            NewEntry::new("a", EntryBody::chat("fine")),
            NewEntry::new("a", other("x", json!({"at": 1}))),
        ];
        let err = StorableBatch::check(&t, entries).unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidEntry { index: 1, .. }),
            "{err}"
        );
    }
}
