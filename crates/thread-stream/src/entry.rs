//! Entries: one author-stamped line of a thread.
//!
//! On disk (and on the wire) an entry is one flat JSON object: the header
//! fields first, then `type`, then the body's fields:
//!
//! ```json
//! {"seq":3,"id":"0193…","thread":"support-42","author":"alice","at":1731000000000,"type":"chat","text":"hi @archive-bot"}
//! ```
//!
//! Because header and body share one object, a body's fields may not take a
//! header's name; stores refuse such bodies before writing (`storable.rs`).
//!
//! Reading is a serde visitor of its own: when `type` comes before the
//! body's fields (as roundtable always writes it) the body is decoded
//! straight from the input; otherwise the fields are buffered first, so
//! files written by other tools in another key order still read.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ThreadId;
use crate::body::*;
use crate::entry_id::fresh_entry_id;
use crate::lifecycle::{TurnEnded, TurnFailed, TurnStarted};

/// One author-stamped entry of a thread, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Position in the thread: 1 for the first entry, no gaps.
    pub seq: u64,
    /// A unique id (UUID v7 unless the appender chose another), also used to
    /// make retried appends idempotent in distributed stores (the NATS store
    /// refuses a batch whose first id another batch already used, within its
    /// duplicate window: [`StoreError::DuplicateId`](crate::StoreError::DuplicateId)).
    pub id: Arc<str>,
    /// The thread the entry belongs to.
    pub thread: ThreadId,
    /// The participant who wrote it (a human's or a bot's id).
    pub author: Arc<str>,
    /// When it was written, Unix milliseconds.
    pub at: i64,
    /// What it says.
    pub body: EntryBody,
}

/// An entry before a store has given it a thread and a seq.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntry {
    /// A unique id.
    pub id: Arc<str>,
    /// The participant who writes it.
    pub author: Arc<str>,
    /// Unix milliseconds.
    pub at: i64,
    /// What it says.
    pub body: EntryBody,
}

impl NewEntry {
    /// An entry by `author` with a fresh UUID v7 id, stamped now.
    pub fn new(author: impl Into<Arc<str>>, body: EntryBody) -> Self {
        let (id, at) = fresh_entry_id();
        Self {
            id,
            author: author.into(),
            at,
            body,
        }
    }

    /// The same entry with another timestamp (tests, imports).
    pub fn at(mut self, at: i64) -> Self {
        self.at = at;
        self
    }

    /// Gives the entry its place in a thread.
    pub fn into_entry(self, thread: ThreadId, seq: u64) -> Entry {
        Entry {
            seq,
            id: self.id,
            thread,
            author: self.author,
            at: self.at,
            body: self.body,
        }
    }
}

// ---------------------------------------------------------------- writing

#[derive(Serialize)]
struct WireOut<'a> {
    seq: u64,
    id: &'a str,
    thread: &'a ThreadId,
    author: &'a str,
    at: i64,
    /// Only in stored lines of a multi-entry batch: how many entries of the
    /// batch follow this one (see [`StoredLine`]).
    #[serde(skip_serializing_if = "is_zero")]
    more: u32,
    #[serde(rename = "type")]
    kind: Cow<'a, str>,
    #[serde(flatten)]
    body: BodyOut<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum BodyOut<'a> {
    Chat(&'a Chat),
    Assistant(&'a AssistantEntry),
    ToolResult(&'a ToolResultEntry),
    Chunk(&'a Chunk),
    Signal { data: &'a crate::SignalData },
    Compaction(&'a Compaction),
    TurnStarted(&'a TurnStarted),
    TurnEnded(&'a TurnEnded),
    TurnFailed(&'a TurnFailed),
    Other(&'a serde_json::Map<String, serde_json::Value>),
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.wire(0).serialize(s)
    }
}

impl Entry {
    fn wire(&self, more: u32) -> WireOut<'_> {
        let body = match &self.body {
            EntryBody::Chat(b) => BodyOut::Chat(b),
            EntryBody::Assistant(b) => BodyOut::Assistant(b),
            EntryBody::ToolResult(b) => BodyOut::ToolResult(b),
            EntryBody::Chunk(b) => BodyOut::Chunk(b),
            EntryBody::Signal(b) => BodyOut::Signal { data: &b.data },
            EntryBody::Compaction(b) => BodyOut::Compaction(b),
            EntryBody::TurnStarted(b) => BodyOut::TurnStarted(b),
            EntryBody::TurnEnded(b) => BodyOut::TurnEnded(b),
            EntryBody::TurnFailed(b) => BodyOut::TurnFailed(b),
            EntryBody::Other { fields, .. } => BodyOut::Other(fields),
        };
        WireOut {
            seq: self.seq,
            id: &self.id,
            thread: &self.thread,
            author: &self.author,
            at: self.at,
            more,
            kind: self.body.kind(),
            body,
        }
    }
}

/// An entry as a store writes it on one line, with the batch marker: `more`
/// counts the entries of the same append that follow it. A store that finds
/// a batch whose last entries are missing after a crash drops the whole batch,
/// so a batch is all or nothing on disk as well as in memory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredLine {
    pub(crate) entry: Entry,
    pub(crate) more: u32,
}

impl StoredLine {
    /// Appends the line (without its newline) to `out`.
    pub(crate) fn write(
        entry: &Entry,
        more: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), serde_json::Error> {
        serde_json::to_writer(out, &entry.wire(more))
    }

    /// Appends the lines of one append's batch to `out`, each with its
    /// newline and its batch marker, and returns where each line ends in
    /// `out`. The JSONL store writes these bytes to its file and the NATS
    /// store publishes them as one message.
    pub(crate) fn write_batch(
        entries: &[Entry],
        out: &mut Vec<u8>,
    ) -> Result<Vec<usize>, serde_json::Error> {
        let mut line_ends = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let more = u32::try_from(entries.len() - 1 - i).map_err(|_| {
                <serde_json::Error as serde::ser::Error>::custom(
                    "a batch holds more entries than its marker can count",
                )
            })?;
            Self::write(entry, more, out)?;
            out.push(b'\n');
            line_ends.push(out.len());
        }
        Ok(line_ends)
    }
}

impl<'de> Deserialize<'de> for StoredLine {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor)
    }
}

// ---------------------------------------------------------------- reading

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor).map(|line| line.entry)
    }
}

/// A key of the entry object; header keys are recognised without allocating.
enum Key<'de> {
    Seq,
    Id,
    Thread,
    Author,
    At,
    More,
    Type,
    Other(Cow<'de, str>),
}

/// Whether `name` is a header field of the entry object (`type` and the
/// batch marker `more` included): a body field of that name would collide
/// with it on the one flat line.
pub(crate) fn is_header_field(name: &str) -> bool {
    Key::from_str(name).is_some()
}

impl<'de> Key<'de> {
    fn from_str(s: &str) -> Option<Key<'de>> {
        Some(match s {
            "seq" => Key::Seq,
            "id" => Key::Id,
            "thread" => Key::Thread,
            "author" => Key::Author,
            "at" => Key::At,
            "more" => Key::More,
            "type" => Key::Type,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::from_str(v).unwrap_or(Key::Other(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::from_str(v).unwrap_or_else(|| Key::Other(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::from_str(&v).unwrap_or(Key::Other(Cow::Owned(v))))
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

#[derive(Default)]
struct Header {
    seq: Option<u64>,
    id: Option<Arc<str>>,
    thread: Option<ThreadId>,
    author: Option<Arc<str>>,
    at: Option<i64>,
    more: Option<u32>,
}

impl Header {
    /// Reads the value of a header key; false when `key` is not a header key.
    fn read<'de, A: MapAccess<'de>>(
        &mut self,
        key: &Key<'de>,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        fn set<T, E: de::Error>(
            slot: &mut Option<T>,
            value: T,
            name: &'static str,
        ) -> Result<(), E> {
            if slot.replace(value).is_some() {
                return Err(E::duplicate_field(name));
            }
            Ok(())
        }
        match key {
            Key::Seq => set(&mut self.seq, map.next_value()?, "seq")?,
            Key::Id => set(
                &mut self.id,
                Arc::from(map.next_value::<CowStr<'de>>()?.0),
                "id",
            )?,
            Key::Thread => set(&mut self.thread, map.next_value()?, "thread")?,
            Key::Author => set(
                &mut self.author,
                Arc::from(map.next_value::<CowStr<'de>>()?.0),
                "author",
            )?,
            Key::At => set(&mut self.at, map.next_value()?, "at")?,
            Key::More => set(&mut self.more, map.next_value()?, "more")?,
            Key::Type | Key::Other(_) => return Ok(false),
        }
        Ok(true)
    }

    fn finish<E: de::Error>(self, body: EntryBody) -> Result<StoredLine, E> {
        let more = self.more.unwrap_or(0);
        let seq = self.seq.ok_or_else(|| E::missing_field("seq"))?;
        if seq == 0 {
            return Err(E::custom("seq starts at 1"));
        }
        let entry = Entry {
            seq,
            id: self.id.ok_or_else(|| E::missing_field("id"))?,
            thread: self.thread.ok_or_else(|| E::missing_field("thread"))?,
            author: self.author.ok_or_else(|| E::missing_field("author"))?,
            at: self.at.ok_or_else(|| E::missing_field("at"))?,
            body,
        };
        Ok(StoredLine { entry, more })
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = StoredLine;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a thread entry object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StoredLine, A::Error> {
        let mut header = Header::default();
        let mut pending = serde_json::Map::new();
        let mut kind: Option<String> = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if header.read(&key, &mut map)? {
                continue;
            }
            match key {
                Key::Type if kind.is_some() => return Err(de::Error::duplicate_field("type")),
                Key::Type => {
                    let k: Cow<'de, str> = map.next_value::<CowStr<'de>>()?.0;
                    if pending.is_empty() {
                        // Fast path: the rest of the object is the body.
                        let body = {
                            let tap = HeaderTap {
                                map: &mut map,
                                header: &mut header,
                            };
                            body_from(&k, de::value::MapAccessDeserializer::new(tap))?
                        };
                        return header.finish(body);
                    }
                    kind = Some(k.into_owned());
                }
                Key::Other(name) => {
                    let value: serde_json::Value = map.next_value()?;
                    pending.insert(name.into_owned(), value);
                }
                _ => {}
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        let body =
            body_from(&kind, serde_json::Value::Object(pending)).map_err(de::Error::custom)?;
        header.finish(body)
    }
}

/// A string that borrows from the input when it can.
struct CowStr<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// The remaining keys of an entry object as a map for the body, with any
/// header keys that come after `type` taken out on the way.
struct HeaderTap<'a, A> {
    map: &'a mut A,
    header: &'a mut Header,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for HeaderTap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<Key<'de>>()? {
            if self.header.read(&key, self.map)? {
                continue;
            }
            return match key {
                Key::Other(Cow::Borrowed(name)) => seed
                    .deserialize(de::value::BorrowedStrDeserializer::new(name))
                    .map(Some),
                Key::Other(Cow::Owned(name)) => {
                    seed.deserialize(name.into_deserializer()).map(Some)
                }
                _ => Err(de::Error::duplicate_field("type")),
            };
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

fn body_from<'de, D: Deserializer<'de>>(kind: &str, d: D) -> Result<EntryBody, D::Error> {
    Ok(match BodyKind::of(kind) {
        BodyKind::Chat => EntryBody::Chat(Chat::deserialize(d)?),
        BodyKind::Assistant => EntryBody::Assistant(AssistantEntry::deserialize(d)?),
        BodyKind::ToolResult => EntryBody::ToolResult(ToolResultEntry::deserialize(d)?),
        BodyKind::Chunk => EntryBody::Chunk(Chunk::deserialize(d)?),
        BodyKind::Compaction => EntryBody::Compaction(Compaction::deserialize(d)?),
        BodyKind::TurnStarted => EntryBody::TurnStarted(TurnStarted::deserialize(d)?),
        BodyKind::TurnEnded => EntryBody::TurnEnded(TurnEnded::deserialize(d)?),
        BodyKind::TurnFailed => EntryBody::TurnFailed(TurnFailed::deserialize(d)?),
        BodyKind::Signal(name) => {
            let fields = SignalFields::deserialize(d)?;
            EntryBody::Signal(Signal {
                name: name.to_owned(),
                data: fields.data,
            })
        }
        BodyKind::Unknown => EntryBody::Other {
            kind: kind.to_owned(),
            fields: Box::new(serde_json::Map::deserialize(d)?),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable_providers::{AssistantBlock, AssistantMessage, ToolCall, ToolResultMessage};
    use serde_json::json;

    fn entry(body: EntryBody) -> Entry {
        NewEntry::new("alice", body)
            .at(1_731_000_000_000)
            .into_entry(ThreadId::new("t-1").unwrap(), 7)
    }

    fn every_body() -> Vec<EntryBody> {
        let mut message = AssistantMessage::empty("openai-completions", "openai", "gpt-4o", 5);
        message.content.push(AssistantBlock::text("hello"));
        let call = ToolCall::new("c1", "read_file", serde_json::Map::new());
        message.content.push(AssistantBlock::ToolCall(call.clone()));
        vec![
            EntryBody::chat("hi @bot"),
            EntryBody::Chat(Chat {
                text: "look".into(),
                parts: vec![roundtable_providers::UserBlock::text("extra")].into(),
                mentions: vec!["bot-1".into()].into(),
                files: vec![crate::FileRef {
                    reference: "attachments/log_01.txt".into(),
                    mime_type: "text/plain".into(),
                }]
                .into(),
            }),
            EntryBody::Assistant(AssistantEntry::new(Some("turn-1".into()), message)),
            EntryBody::ToolResult(ToolResultEntry {
                turn: None,
                message: ToolResultMessage::text(&call, "ok", false, 6).into(),
            }),
            EntryBody::Chunk(Chunk::text("turn-1", "hel")),
            EntryBody::Signal(Signal {
                name: "typing".into(),
                data: json!({"on": true}).into(),
            }),
            EntryBody::Compaction(Compaction {
                summary: "earlier".into(),
                upto: 4,
            }),
            EntryBody::TurnStarted(TurnStarted {
                turn: "turn-1".into(),
                trigger: Some(3),
                depth: 1,
                reason: Some("mention".into()),
            }),
            EntryBody::TurnEnded(TurnEnded {
                turn: "turn-1".into(),
                reason: "stop".into(),
            }),
            EntryBody::TurnFailed(TurnFailed {
                turn: "turn-1".into(),
                reason: "boom".into(),
            }),
            EntryBody::Other {
                kind: "future.kind".into(),
                fields: Box::new(json!({"x": 1}).as_object().unwrap().clone()),
            },
        ]
    }

    #[test]
    fn every_body_round_trips() {
        for body in every_body() {
            let e = entry(body);
            let line = serde_json::to_string(&e).unwrap();
            let back: Entry = serde_json::from_str(&line).unwrap();
            assert_eq!(back, e, "{line}");
            // Bytes too: reading and writing again changes nothing.
            assert_eq!(serde_json::to_string(&back).unwrap(), line);
        }
    }

    #[test]
    fn headers_written_are_the_ones_read_and_no_typed_body_writes_one() {
        let bare = entry(EntryBody::Other {
            kind: "x".into(),
            fields: Default::default(),
        });
        let mut line = Vec::new();
        StoredLine::write(&bare, 1, &mut line).unwrap();
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&line).unwrap();
        let names: Vec<&str> = header.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["seq", "id", "thread", "author", "at", "more", "type"]
        );
        assert!(names.iter().all(|name| is_header_field(name)));
        // Typed bodies are objects whose fields never collide with a header.
        for body in every_body() {
            let e = entry(body);
            let fields = serde_json::to_value(e.wire(0).body).unwrap();
            let fields = fields.as_object().unwrap();
            assert!(!fields.keys().any(|k| is_header_field(k)), "{fields:?}");
        }
    }

    #[test]
    fn entry_is_one_flat_object_tagged_by_type() {
        let line = serde_json::to_string(&entry(EntryBody::chat("hi"))).unwrap();
        assert!(line.starts_with(r#"{"seq":7,"id":""#), "{line}");
        assert!(
            line.ends_with(
                r#","thread":"t-1","author":"alice","at":1731000000000,"type":"chat","text":"hi"}"#
            ),
            "{line}"
        );
        let signal = serde_json::to_value(entry(EntryBody::Signal(Signal {
            name: "typing".into(),
            data: json!(1).into(),
        })))
        .unwrap();
        assert_eq!(signal["type"], "signal.typing");
        assert_eq!(signal["data"], 1);
    }

    #[test]
    fn any_key_order_reads() {
        // Body fields before `type`, header fields after it.
        let e: Entry = serde_json::from_value(json!({
            "text": "hi", "mentions": ["b"], "type": "chat", "at": 1, "author": "a", "thread": "t", "id": "x", "seq": 2
        }))
        .unwrap();
        assert_eq!(e.seq, 2);
        assert!(matches!(&e.body, EntryBody::Chat(c) if &*c.text == "hi" && c.mentions.len() == 1));
        // Header fields after `type` on the fast path.
        let e: Entry =
            serde_json::from_str(r#"{"type":"chat.chunk","turn":"u","seq":1,"delta":"x","id":"i","thread":"t","author":"a","at":0}"#)
                .unwrap();
        assert!(matches!(&e.body, EntryBody::Chunk(c) if &*c.delta == "x" && c.kind.is_text()));
    }

    #[test]
    fn a_thinking_chunk_says_so_and_a_text_chunk_reads_as_it_always_did() {
        let text = serde_json::to_value(entry(EntryBody::Chunk(Chunk::text("u", "x")))).unwrap();
        assert!(text.get("kind").is_none(), "{text}");
        let thinking = entry(EntryBody::Chunk(Chunk::thinking("u", "hmm")));
        let json = serde_json::to_string(&thinking).unwrap();
        assert!(json.contains(r#""kind":"thinking""#), "{json}");
        let back: Entry = serde_json::from_str(&json).unwrap();
        assert_eq!(back, thinking);
    }

    #[test]
    fn stored_lines_carry_the_batch_marker_and_entries_ignore_it() {
        let e = entry(EntryBody::chat("hi"));
        let mut line = Vec::new();
        StoredLine::write(&e, 2, &mut line).unwrap();
        let text = String::from_utf8(line.clone()).unwrap();
        assert!(
            text.contains(r#""at":1731000000000,"more":2,"type":"chat""#),
            "{text}"
        );
        let stored: StoredLine = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            stored,
            StoredLine {
                entry: e.clone(),
                more: 2
            }
        );
        let plain: Entry = serde_json::from_slice(&line).unwrap();
        assert_eq!(plain, e);
    }

    #[test]
    fn bad_entries_are_errors() {
        for bad in [
            r#"{"seq":1,"id":"i","thread":"t","author":"a","at":0}"#,
            r#"{"seq":0,"id":"i","thread":"t","author":"a","at":0,"type":"chat","text":"x"}"#,
            r#"{"seq":1,"id":"i","thread":"../t","author":"a","at":0,"type":"chat","text":"x"}"#,
            r#"{"seq":1,"id":"i","thread":"t","author":"a","at":0,"type":"chat"}"#,
            r#"{"seq":1,"seq":2,"id":"i","thread":"t","author":"a","at":0,"type":"chat","text":"x"}"#,
            r#"{"seq":1,"id":"i","thread":"t","author":"a","at":0,"type":"pi.assistant","message":{"role":"user"}}"#,
            r#"[1,2]"#,
            r#"{"seq":1,"id":"i","thread":"t","author":"a","at":0,"type":"chat","text":"x""#,
        ] {
            assert!(serde_json::from_str::<Entry>(bad).is_err(), "{bad}");
        }
    }
}
