//! [`SharedUser`]: a user message as a [`Message`](crate::Message) holds
//! it, in an allocation of its own or one of a batch made together.
//!
//! A bot's projection of a busy thread makes hundreds of user messages per
//! call. Each in an `Arc` of its own, they cost an allocation and a free
//! apiece, and their frees fill the allocator's fast lists, which the
//! projection's next large allocation then has to sort out. The projection
//! makes them as one batch instead, and each message holds its place in
//! it: one allocation for all of them, freed when the last one goes (so a
//! message kept alone keeps its batch: the messages of a projection are
//! used together, for a request).
//!
//! Everything else reads a `SharedUser` as the [`UserMessage`] it derefs
//! to; it serialises as that message and compares by it, so pi-ai JSON and
//! every wire request are the same whichever way it is held.

use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Weak};

use serde::{Serialize, Serializer};

use crate::user_blocks::UserBlocks;
use crate::user_message::{UserContent, UserMessage};

/// A shared user message: its own `Arc`, or a place in a batch.
///
/// Cloning it costs a reference count and never copies the message;
/// [`make_mut`](Self::make_mut) edits a copy of its own when it is shared.
#[derive(Clone)]
pub struct SharedUser(Repr);

#[derive(Clone)]
enum Repr {
    Own(Arc<UserMessage>),
    /// `batch[index]`.
    InBatch {
        batch: Arc<Vec<UserMessage>>,
        index: u32,
    },
}

/// What a place past the end of its batch reads as (never made: a batch's
/// places are made from its length).
static NO_MESSAGE: UserMessage = UserMessage {
    content: UserContent::Blocks(UserBlocks::new()),
    timestamp: 0,
};

impl SharedUser {
    /// `message`, in an allocation of its own.
    #[inline]
    pub fn new(message: UserMessage) -> Self {
        Self(Repr::Own(Arc::new(message)))
    }

    /// Every message of `batch`, in order, each holding its place in it
    /// (one allocation for all of them; a batch is cut at `u32::MAX`
    /// messages).
    pub fn batch(batch: Vec<UserMessage>) -> impl ExactSizeIterator<Item = Self> {
        let batch = Arc::new(batch);
        (0..u32::try_from(batch.len()).unwrap_or(u32::MAX)).map(move |index| {
            Self(Repr::InBatch {
                batch: batch.clone(),
                index,
            })
        })
    }

    /// The message, to edit: a copy of its own first when it is shared
    /// (with another holder, or with the rest of its batch).
    pub fn make_mut(this: &mut Self) -> &mut UserMessage {
        if let Repr::InBatch { .. } = this.0 {
            *this = Self::new((**this).clone());
        }
        match &mut this.0 {
            Repr::Own(message) => Arc::make_mut(message),
            // Not reached (a place in a batch was made a message of its
            // own just above), and right if it were: the batch's message,
            // in a batch of its own.
            Repr::InBatch { batch, index } => {
                let batch = Arc::make_mut(batch);
                let index = (*index as usize).min(batch.len());
                if index == batch.len() {
                    batch.push(NO_MESSAGE.clone());
                }
                &mut batch[index]
            }
        }
    }

    /// What tells this message apart from every other while
    /// [`allocation`](Self::allocation) is kept: its allocation's address
    /// and its place there (0 for a message of its own).
    pub fn address(&self) -> (usize, u32) {
        match &self.0 {
            Repr::Own(message) => (Arc::as_ptr(message).addr(), 0),
            Repr::InBatch { batch, index } => (Arc::as_ptr(batch).addr(), *index),
        }
    }

    /// A weak handle on the message's allocation (its own, or its batch's):
    /// while it is kept, no other message is allocated at its
    /// [`address`](Self::address).
    pub fn allocation(&self) -> Weak<dyn Any + Send + Sync> {
        match &self.0 {
            Repr::Own(message) => Arc::downgrade(message) as _,
            Repr::InBatch { batch, .. } => Arc::downgrade(batch) as _,
        }
    }

    /// True when both hold the same message (not an equal copy).
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        std::ptr::eq::<UserMessage>(&**a, &**b)
    }
}

impl Deref for SharedUser {
    type Target = UserMessage;

    #[inline]
    fn deref(&self) -> &UserMessage {
        match &self.0 {
            Repr::Own(message) => message,
            Repr::InBatch { batch, index } => batch.get(*index as usize).unwrap_or(&NO_MESSAGE),
        }
    }
}

impl From<UserMessage> for SharedUser {
    #[inline]
    fn from(message: UserMessage) -> Self {
        Self::new(message)
    }
}

impl From<Arc<UserMessage>> for SharedUser {
    fn from(message: Arc<UserMessage>) -> Self {
        Self(Repr::Own(message))
    }
}

impl fmt::Debug for SharedUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl PartialEq for SharedUser {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Serialize for SharedUser {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    fn batch(texts: &[&str]) -> Vec<SharedUser> {
        SharedUser::batch(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| UserMessage::text(*t, i as i64))
                .collect(),
        )
        .collect()
    }

    #[test]
    fn a_place_in_a_batch_reads_serialises_and_compares_as_its_message() {
        let users = batch(&["a", "b", "c"]);
        assert_eq!(users.len(), 3);
        for (i, text) in ["a", "b", "c"].into_iter().enumerate() {
            let own = SharedUser::new(UserMessage::text(text, i as i64));
            assert_eq!(users[i], own);
            assert_eq!(*users[i], *own);
            assert_eq!(
                serde_json::to_string(&users[i]).unwrap(),
                serde_json::to_string(&own).unwrap()
            );
            assert_eq!(format!("{:?}", users[i]), format!("{own:?}"));
            let json = serde_json::to_string(&Message::User(users[i].clone())).unwrap();
            assert_eq!(json, serde_json::to_string(&Message::User(own)).unwrap());
        }
    }

    #[test]
    fn editing_a_place_in_a_batch_copies_it_out() {
        let users = batch(&["a", "b"]);
        let mut edited = users[1].clone();
        assert!(SharedUser::ptr_eq(&edited, &users[1]));
        SharedUser::make_mut(&mut edited).timestamp = 99;
        assert!(!SharedUser::ptr_eq(&edited, &users[1]));
        assert_eq!(edited.timestamp, 99);
        assert_eq!(users[1].timestamp, 1);
        // A message of its own, unshared: edited in place.
        let before = edited.address();
        SharedUser::make_mut(&mut edited).timestamp = 100;
        assert_eq!(edited.address(), before);
    }

    #[test]
    fn each_place_has_its_own_address_while_its_allocation_is_held() {
        let users = batch(&["a", "b"]);
        assert_ne!(users[0].address(), users[1].address());
        assert_eq!(users[0].address(), users[0].clone().address());
        let held = users[0].allocation();
        assert_eq!(held.strong_count(), 2);
        drop(users);
        assert_eq!(held.strong_count(), 0);
    }

    #[test]
    fn a_message_is_as_small_as_before() {
        assert_eq!(std::mem::size_of::<SharedUser>(), 16);
        assert_eq!(std::mem::size_of::<Message>(), 16);
    }
}
