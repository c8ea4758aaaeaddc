//! [`UserBlocks`]: the blocks of a user message, owned or a stretch of a
//! buffer shared with other messages.
//!
//! A bot's projection of a busy thread makes hundreds of user messages per
//! call, each a run of speakers' turns. Giving each its own vector of blocks
//! costs an allocation per message beside the message's own, and the runs'
//! varied sizes send those allocations down the allocator's slow path. The
//! projection writes every run's blocks into one buffer instead, and each
//! message holds a stretch of it: one allocation for all the blocks, and
//! they are dropped together, in order, when the last message goes (so a
//! message kept alone keeps the whole buffer: the messages of a
//! projection are used together, for a request).
//!
//! Everything else reads the blocks as a slice; it serialises as the list
//! it holds, and compares by its blocks, so pi-ai JSON and every wire
//! request are the same whether the blocks are owned or shared.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::content::UserBlock;

/// The blocks of a user message: a slice to every reader.
///
/// Made from a `Vec` (owned, as a caller builds one) or by
/// [`shared`](Self::shared) (a stretch of a buffer several messages
/// share). [`push`](Self::push) and [`extend`](Self::extend) add to them,
/// copying a shared stretch out first.
#[derive(Clone)]
pub struct UserBlocks(Repr);

#[derive(Clone)]
enum Repr {
    Owned(Vec<UserBlock>),
    /// `all[start..end]`: 32-bit bounds keep this beside the `Vec`'s spare
    /// capacity bits, so `UserBlocks` is as small as a `Vec`.
    Shared {
        all: Arc<Vec<UserBlock>>,
        start: u32,
        end: u32,
    },
}

impl UserBlocks {
    /// No blocks.
    pub const fn new() -> Self {
        Self(Repr::Owned(Vec::new()))
    }

    /// The blocks `all[range]`, sharing `all` (an empty stretch when the
    /// range is out of bounds or past 32-bit indices).
    #[inline]
    pub fn shared(all: Arc<Vec<UserBlock>>, range: std::ops::Range<usize>) -> Self {
        let (start, end) = match (u32::try_from(range.start), u32::try_from(range.end)) {
            (Ok(start), Ok(end)) if range.start <= range.end && range.end <= all.len() => {
                (start, end)
            }
            _ => (0, 0),
        };
        Self(Repr::Shared { all, start, end })
    }

    /// The blocks as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[UserBlock] {
        match &self.0 {
            Repr::Owned(blocks) => blocks,
            Repr::Shared { all, start, end } => {
                all.get(*start as usize..*end as usize).unwrap_or_default()
            }
        }
    }

    /// Adds `block` at the end (a shared stretch is copied out first: its
    /// blocks cloned, their texts shared).
    pub fn push(&mut self, block: UserBlock) {
        match &mut self.0 {
            Repr::Owned(blocks) => blocks.push(block),
            Repr::Shared { .. } => self.extend(std::iter::once(block)),
        }
    }

    /// Adds `more` at the end (a shared stretch is copied out first).
    pub fn extend(&mut self, more: impl IntoIterator<Item = UserBlock>) {
        match &mut self.0 {
            Repr::Owned(blocks) => blocks.extend(more),
            Repr::Shared { .. } => {
                let mut blocks = self.as_slice().to_vec();
                blocks.extend(more);
                self.0 = Repr::Owned(blocks);
            }
        }
    }

    /// The blocks as a vector of their own (a copy of a shared stretch).
    pub fn into_vec(self) -> Vec<UserBlock> {
        match self.0 {
            Repr::Owned(blocks) => blocks,
            Repr::Shared { .. } => self.as_slice().to_vec(),
        }
    }
}

impl Default for UserBlocks {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for UserBlocks {
    type Target = [UserBlock];

    #[inline]
    fn deref(&self) -> &[UserBlock] {
        self.as_slice()
    }
}

impl AsRef<[UserBlock]> for UserBlocks {
    fn as_ref(&self) -> &[UserBlock] {
        self.as_slice()
    }
}

impl From<Vec<UserBlock>> for UserBlocks {
    fn from(blocks: Vec<UserBlock>) -> Self {
        Self(Repr::Owned(blocks))
    }
}

impl From<UserBlocks> for Vec<UserBlock> {
    fn from(blocks: UserBlocks) -> Self {
        blocks.into_vec()
    }
}

impl FromIterator<UserBlock> for UserBlocks {
    fn from_iter<I: IntoIterator<Item = UserBlock>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl<'a> IntoIterator for &'a UserBlocks {
    type Item = &'a UserBlock;
    type IntoIter = std::slice::Iter<'a, UserBlock>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl fmt::Debug for UserBlocks {
    /// As the list it holds (the same output as a `Vec`'s).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl PartialEq for UserBlocks {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl PartialEq<[UserBlock]> for UserBlocks {
    fn eq(&self, other: &[UserBlock]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Vec<UserBlock>> for UserBlocks {
    fn eq(&self, other: &Vec<UserBlock>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<const N: usize> PartialEq<[UserBlock; N]> for UserBlocks {
    fn eq(&self, other: &[UserBlock; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Serialize for UserBlocks {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for UserBlocks {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<UserBlock>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(texts: &[&str]) -> Vec<UserBlock> {
        texts.iter().map(|t| UserBlock::text(*t)).collect()
    }

    #[test]
    fn a_shared_stretch_reads_serialises_and_compares_as_its_blocks() {
        let all = Arc::new(blocks(&["a", "b", "c", "d"]));
        let shared = UserBlocks::shared(all.clone(), 1..3);
        let owned = UserBlocks::from(blocks(&["b", "c"]));
        assert_eq!(shared.len(), 2);
        assert_eq!(shared, owned);
        assert_eq!(shared, blocks(&["b", "c"]));
        assert_eq!(
            serde_json::to_string(&shared).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
        assert_eq!(format!("{shared:?}"), format!("{:?}", blocks(&["b", "c"])));
        let back: UserBlocks =
            serde_json::from_str(&serde_json::to_string(&shared).unwrap()).unwrap();
        assert_eq!(back, shared);
        // Out of bounds: empty, never a panic.
        assert!(UserBlocks::shared(all, 3..9).is_empty());
    }

    #[test]
    fn editing_a_shared_stretch_copies_it_out() {
        let all = Arc::new(blocks(&["a", "b", "c"]));
        let mut shared = UserBlocks::shared(all.clone(), 0..2);
        shared.push(UserBlock::text("z"));
        assert_eq!(shared, blocks(&["a", "b", "z"]));
        assert_eq!(*all, blocks(&["a", "b", "c"]));
        assert_eq!(Arc::strong_count(&all), 1);
    }

    #[test]
    fn it_is_as_small_as_a_vec() {
        assert_eq!(
            std::mem::size_of::<UserBlocks>(),
            std::mem::size_of::<Vec<UserBlock>>()
        );
    }
}
