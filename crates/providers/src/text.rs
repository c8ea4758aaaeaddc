//! [`Text`]: the text of a text block, which may be a [`Label`] in front of
//! text shared with another message.
//!
//! A bot's projection of a shared thread shows every other speaker's words
//! as `[Name]: text`. Copying each text behind its label would cost an
//! allocation and a copy per message on every turn of every bot; a `Text`
//! holds the label and the shared original instead. It is one string to
//! everything that reads it: it dereferences to the concatenation (made on
//! first use and kept), serialises as the concatenation (written piece by
//! piece, never joined), and compares by its characters. So pi-ai JSON and
//! every wire request are the same whether a text is labelled or plain.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use once_cell::race::OnceBox;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A short string written before a [`Text`]: a speaker's label such as
/// `[Alice]: `.
///
/// A projection puts one before almost every text it shows, and every one
/// of those texts is cloned into requests and dropped again. A label of up
/// to [`Label::INLINE`] bytes is kept in the `Label` itself, so copying or
/// dropping it touches no reference count (an atomic operation, which on
/// x86 also stops the processor from reading ahead while it waits for the
/// shared count's cache line); a longer one is shared.
///
/// The inline bytes are one plain array, not an enum's variant: copying a
/// label is then one 16-byte move (an enum's payload is copied in pieces
/// around its tag, which the processor cannot always forward from store
/// to load).
#[derive(Clone, Default)]
pub struct Label {
    /// The length, then up to [`Label::INLINE`] bytes copied from a `str`
    /// (all zero when `long` holds the label).
    inline: [u8; Label::INLINE + 1],
    /// A longer label (a thin pointer).
    long: Option<Arc<Box<str>>>,
}

impl Label {
    /// The longest label, in bytes, kept inline.
    pub const INLINE: usize = 15;

    /// No label: what a plain text has.
    const EMPTY: Label = Label {
        inline: [0; Label::INLINE + 1],
        long: None,
    };

    /// `label`, kept inline when it is short.
    pub fn new(label: &str) -> Self {
        match u8::try_from(label.len()) {
            Ok(len) if label.len() <= Self::INLINE => {
                let mut inline = [0; Self::INLINE + 1];
                inline[0] = len;
                inline[1..=label.len()].copy_from_slice(label.as_bytes());
                Self { inline, long: None }
            }
            _ => Self {
                inline: [0; Self::INLINE + 1],
                long: Some(Arc::new(label.into())),
            },
        }
    }

    /// The label as a string.
    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.long {
            Some(long) => long,
            // The bytes were copied whole from a `str`: always UTF-8.
            None => std::str::from_utf8(
                self.inline
                    .get(1..=usize::from(self.inline[0]))
                    .unwrap_or_default(),
            )
            .unwrap_or_default(),
        }
    }

    /// The length in bytes.
    #[inline]
    fn size(&self) -> usize {
        match &self.long {
            Some(long) => long.len(),
            None => usize::from(self.inline[0]),
        }
    }

    /// True for the empty label (a plain text's).
    #[inline]
    fn is_empty(&self) -> bool {
        self.inline[0] == 0 && self.long.is_none()
    }
}

impl From<&str> for Label {
    fn from(label: &str) -> Self {
        Self::new(label)
    }
}

impl From<Arc<str>> for Label {
    fn from(label: Arc<str>) -> Self {
        Self::new(&label)
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The text of a block: a string, or a label written before a shared string.
///
/// 48 bytes, so a text block is 64: a projection builds thousands of them
/// per call, and copies and drops them as whole blocks.
#[derive(Default)]
pub struct Text {
    /// The text itself, shared with whatever it was taken from.
    body: Arc<str>,
    /// Written before `body` (a speaker's label such as `[Alice]: `); empty
    /// for a plain text.
    label: Label,
    /// `label` and `body` joined, made the first time a labelled text is
    /// read as one `&str` (a thin pointer until then: most labelled texts
    /// are only ever serialised, piece by piece).
    joined: OnceBox<Arc<str>>,
}

impl Text {
    /// `label` followed by `body`, without copying `body`.
    #[inline]
    pub fn labelled(label: impl Into<Label>, body: Arc<str>) -> Self {
        Self {
            body,
            label: label.into(),
            joined: OnceBox::new(),
        }
    }

    /// The label and body joined (made on first use and kept).
    fn joined(&self) -> &Arc<str> {
        self.joined
            .get_or_init(|| Box::new(Arc::from([self.label.as_str(), &*self.body].concat())))
    }

    /// The text as one string.
    pub fn as_str(&self) -> &str {
        if self.label.is_empty() {
            &self.body
        } else {
            self.joined()
        }
    }

    /// The label and the text after it (the label is empty for a plain text).
    #[inline]
    pub fn parts(&self) -> (&str, &str) {
        (self.label.as_str(), &self.body)
    }

    /// The shared string of a plain text (`None` for a labelled one).
    #[inline]
    pub fn as_shared(&self) -> Option<&Arc<str>> {
        self.label.is_empty().then_some(&self.body)
    }

    /// The text as a shared string: the same string for a plain text.
    #[inline]
    pub fn to_arc(&self) -> Arc<str> {
        if self.label.is_empty() {
            self.body.clone()
        } else {
            self.joined().clone()
        }
    }

    /// The length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.label.size() + self.body.len()
    }

    /// True when the text is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the text's characters equal `other`, compared piece by
    /// piece.
    fn eq_str(&self, other: &str) -> bool {
        let (label, body) = self.parts();
        other.len() == label.len() + body.len()
            && other.as_bytes().starts_with(label.as_bytes())
            && other.as_bytes()[label.len()..] == *body.as_bytes()
    }
}

impl Clone for Text {
    /// The same label and shared body; the joined form, if any, is made
    /// again when the copy is read as one `&str`.
    #[inline]
    fn clone(&self) -> Self {
        Self {
            body: self.body.clone(),
            label: self.label.clone(),
            joined: OnceBox::new(),
        }
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        match (self.label.is_empty(), other.label.is_empty()) {
            (true, true) => self.body == other.body,
            (true, false) => other.eq_str(&self.body),
            (false, true) => self.eq_str(&other.body),
            (false, false) => {
                let ((a, b), (c, d)) = (self.parts(), other.parts());
                a.len() + b.len() == c.len() + d.len()
                    && a.bytes().chain(b.bytes()).eq(c.bytes().chain(d.bytes()))
            }
        }
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.eq_str(other)
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.eq_str(other)
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (label, body) = self.parts();
        f.write_str(label)?;
        f.write_str(body)
    }
}

impl From<Arc<str>> for Text {
    #[inline]
    fn from(body: Arc<str>) -> Self {
        Self {
            body,
            label: Label::EMPTY,
            joined: OnceBox::new(),
        }
    }
}

impl From<&Arc<str>> for Text {
    fn from(body: &Arc<str>) -> Self {
        Self::from(body.clone())
    }
}

impl From<&str> for Text {
    fn from(body: &str) -> Self {
        Self::from(Arc::<str>::from(body))
    }
}

impl From<&String> for Text {
    fn from(body: &String) -> Self {
        Self::from(body.as_str())
    }
}

impl From<String> for Text {
    fn from(body: String) -> Self {
        Self::from(Arc::<str>::from(body))
    }
}

impl From<Box<str>> for Text {
    fn from(body: Box<str>) -> Self {
        Self::from(Arc::<str>::from(body))
    }
}

impl From<Cow<'_, str>> for Text {
    fn from(body: Cow<'_, str>) -> Self {
        Self::from(Arc::<str>::from(body))
    }
}

impl From<Text> for Arc<str> {
    fn from(text: Text) -> Self {
        text.to_arc()
    }
}

impl From<&Text> for String {
    fn from(text: &Text) -> Self {
        text.as_str().to_owned()
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.label.is_empty() {
            serializer.serialize_str(&self.body)
        } else {
            // Written piece by piece: serde_json escapes each into the output.
            serializer.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Straight into the `Arc` (serde's `Arc<str>` reads a `Box<str>`
        // and copies it).
        struct TextVisitor;
        impl Visitor<'_> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text::from(v))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// `parts` joined with newlines.
pub(crate) fn join_lines<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, part) in parts.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_labelled_text_is_its_concatenation_everywhere() {
        let shared: Arc<str> = Arc::from("the build \"fails\"\n");
        let labelled = Text::labelled(Arc::from("[Alice]: "), shared.clone());
        let plain = Text::from("[Alice]: the build \"fails\"\n");
        assert_eq!(labelled, plain);
        assert_eq!(plain, labelled);
        assert_eq!(labelled, *"[Alice]: the build \"fails\"\n");
        assert_ne!(labelled, Text::from("[Alice]: the build"));
        assert_ne!(
            labelled,
            Text::labelled(Arc::from("[Bob]: "), shared.clone())
        );
        assert_eq!(&*labelled, &*plain);
        assert_eq!(labelled.len(), plain.len());
        assert_eq!(labelled.to_string(), &*plain);
        assert_eq!(
            serde_json::to_string(&labelled).unwrap(),
            serde_json::to_string(&plain).unwrap()
        );
        assert_eq!(
            serde_json::to_value(&labelled).unwrap(),
            serde_json::to_value(&plain).unwrap()
        );
        // The original is shared, not copied.
        assert!(std::ptr::eq(labelled.parts().1, &*shared));
    }

    #[test]
    fn a_long_label_is_shared_and_reads_the_same() {
        let long = "[A participant with a rather long display name]: ";
        assert!(long.len() > Label::INLINE);
        for label in [Label::new(long), Label::from(Arc::<str>::from(long))] {
            assert_eq!(label.as_str(), long);
            let text = Text::labelled(label, Arc::from("hi"));
            assert_eq!(text, *format!("{long}hi"));
            assert_eq!(text.len(), long.len() + 2);
        }
        let short = Label::new("[Ann]: ");
        assert_eq!(short.as_str(), "[Ann]: ");
        assert_eq!(
            Text::labelled(short, Arc::from("")).parts(),
            ("[Ann]: ", "")
        );
    }

    #[test]
    fn a_text_block_stays_small() {
        // A projection builds, copies and drops thousands of these per call.
        assert_eq!(std::mem::size_of::<Label>(), 24);
        assert_eq!(std::mem::size_of::<Text>(), 48);
        assert_eq!(std::mem::size_of::<crate::UserBlock>(), 64);
    }

    #[test]
    fn a_cloned_labelled_text_joins_again() {
        let text = Text::labelled("[Ann]: ", Arc::from("hi"));
        assert_eq!(text.as_str(), "[Ann]: hi");
        let copy = text.clone();
        assert_eq!(copy.as_str(), "[Ann]: hi");
        assert_eq!(&*copy.to_arc(), "[Ann]: hi");
        assert!(Arc::ptr_eq(&copy.to_arc(), &copy.to_arc()));
        assert_eq!(Text::default().as_str(), "");
    }

    #[test]
    fn reads_back_plain() {
        let text: Text = serde_json::from_str(r#""a \u00e9 b""#).unwrap();
        assert_eq!(text.parts(), ("", "a é b"));
        assert!(serde_json::from_str::<Text>("3").is_err());
    }
}
