//! The roster: who is in a thread, who is a bot, and how each bot wakes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::DispatchError;
use crate::handle::slug;
use crate::topic::Topic;

/// When a bot wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// Only when named: `@handle` in the text or a structured mention.
    Mention,
    /// On every eligible event.
    Always,
    /// On every eligible event it passes the [bot gate](crate::BotGate) for.
    Ambient,
}

/// What makes a participant a bot: how it wakes and who it is.
#[derive(Debug, Clone)]
pub struct BotProfile {
    /// When it wakes.
    pub trigger: Trigger,
    /// The persona: the first part of its system prompt.
    pub persona: Arc<str>,
    /// Topics it cares about; the built-in [`TopicGate`](crate::TopicGate)
    /// admits an ambient bot when the event's text matches one.
    pub topics: Vec<Topic>,
    /// A prompt for a model-backed gate (run by the host or the runner) that
    /// decides whether an ambient bot should answer.
    pub gating_prompt: Option<Arc<str>>,
}

impl BotProfile {
    /// A bot with the given trigger and persona, no topics, no gating prompt.
    pub fn new(trigger: Trigger, persona: impl Into<Arc<str>>) -> Self {
        Self {
            trigger,
            persona: persona.into(),
            topics: Vec::new(),
            gating_prompt: None,
        }
    }

    /// The same profile with these topics.
    pub fn with_topics(mut self, topics: impl IntoIterator<Item = Topic>) -> Self {
        self.topics = topics.into_iter().collect();
        self
    }

    /// The same profile with a gating prompt.
    pub fn with_gating_prompt(mut self, prompt: impl Into<Arc<str>>) -> Self {
        self.gating_prompt = Some(prompt.into());
        self
    }
}

/// A human or a bot.
#[derive(Debug, Clone)]
pub enum Role {
    /// A person.
    Human,
    /// A bot, woken by the dispatcher.
    Bot(BotProfile),
}

/// One member of a thread.
#[derive(Debug, Clone)]
pub struct Participant {
    /// The id entries are stamped with (`Entry::author`).
    pub id: Arc<str>,
    /// The display name: labels in projections, and the source of the handle.
    pub name: Arc<str>,
    /// A one-line description shown to bots in the roster part of their prompt.
    pub about: Option<Arc<str>>,
    /// Human or bot.
    pub role: Role,
}

impl Participant {
    /// A human.
    pub fn human(id: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            about: None,
            role: Role::Human,
        }
    }

    /// A bot.
    pub fn bot(id: impl Into<Arc<str>>, name: impl Into<Arc<str>>, profile: BotProfile) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            about: None,
            role: Role::Bot(profile),
        }
    }

    /// The same participant with a one-line description.
    pub fn with_about(mut self, about: impl Into<Arc<str>>) -> Self {
        self.about = Some(about.into());
        self
    }

    /// The bot's profile, or `None` for a human.
    pub fn bot_profile(&self) -> Option<&BotProfile> {
        match &self.role {
            Role::Bot(profile) => Some(profile),
            Role::Human => None,
        }
    }

    /// True for a bot.
    pub fn is_bot(&self) -> bool {
        matches!(self.role, Role::Bot(_))
    }
}

/// Everyone in a thread, in a fixed order (the order breaks the dispatcher's
/// last ties), with their `@handles`.
///
/// Cheap to clone (shared). Ids and handles are unique; a participant whose
/// name has no letters or digits is handled by the slug of its id.
///
/// ```
/// use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger};
///
/// let roster = Roster::new([
///     Participant::human("u1", "Alice"),
///     Participant::bot("b1", "Archive Bot", BotProfile::new(Trigger::Mention, "You keep the archive.")),
/// ])?;
/// assert_eq!(roster.by_handle("archive-bot").map(|p| &*p.id), Some("b1"));
/// assert_eq!(roster.name_of("u1"), "Alice");
/// assert_eq!(roster.name_of("stranger"), "stranger");
/// # Ok::<(), roundtable_dispatch::DispatchError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Roster {
    inner: Arc<Inner>,
}

struct Inner {
    members: Vec<Participant>,
    handles: Vec<Arc<str>>,
    by_id: HashMap<Arc<str>, usize>,
    by_handle: HashMap<Arc<str>, usize>,
}

impl std::fmt::Debug for Inner {
    /// The members and their handles; the lookup maps only index them (and
    /// list in a random order), so two equal rosters print the same.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("members", &self.members)
            .field("handles", &self.handles)
            .finish_non_exhaustive()
    }
}

impl Default for Roster {
    /// A roster with nobody in it: labels show authors' ids.
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                members: Vec::new(),
                handles: Vec::new(),
                by_id: HashMap::default(),
                by_handle: HashMap::default(),
            }),
        }
    }
}

impl Roster {
    /// A roster of these participants, in this order.
    pub fn new(participants: impl IntoIterator<Item = Participant>) -> Result<Self, DispatchError> {
        let members: Vec<Participant> = participants.into_iter().collect();
        let mut handles = Vec::with_capacity(members.len());
        let mut by_id = HashMap::with_capacity(members.len());
        let mut by_handle: HashMap<Arc<str>, usize> = HashMap::with_capacity(members.len());
        for (i, p) in members.iter().enumerate() {
            if by_id.insert(p.id.clone(), i).is_some() {
                return Err(DispatchError::DuplicateId { id: p.id.clone() });
            }
            let mut handle = slug(&p.name);
            if handle.is_empty() {
                handle = slug(&p.id);
            }
            if handle.is_empty() {
                return Err(DispatchError::NoHandle {
                    id: p.id.clone(),
                    name: p.name.clone(),
                });
            }
            let handle: Arc<str> = handle.into();
            if let Some(&first) = by_handle.get(&handle) {
                return Err(DispatchError::DuplicateHandle {
                    handle: handle.to_string(),
                    first: members[first].id.clone(),
                    second: p.id.clone(),
                });
            }
            by_handle.insert(handle.clone(), i);
            handles.push(handle);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                members,
                handles,
                by_id,
                by_handle,
            }),
        })
    }

    /// Everyone, in roster order.
    pub fn participants(&self) -> &[Participant] {
        &self.inner.members
    }

    /// The number of participants.
    pub fn len(&self) -> usize {
        self.inner.members.len()
    }

    /// True when nobody is in the roster.
    pub fn is_empty(&self) -> bool {
        self.inner.members.is_empty()
    }

    /// The participant with this id.
    pub fn get(&self, id: &str) -> Option<&Participant> {
        self.index_of(id).map(|i| &self.inner.members[i])
    }

    /// The participant with this handle (without the `@`).
    pub fn by_handle(&self, handle: &str) -> Option<&Participant> {
        self.inner
            .by_handle
            .get(handle)
            .map(|&i| &self.inner.members[i])
    }

    /// The handle (without the `@`) of the participant with this id.
    pub fn handle_of(&self, id: &str) -> Option<&str> {
        self.index_of(id).map(|i| &*self.inner.handles[i])
    }

    /// The display name of `id`, or `id` itself for someone not in the roster.
    pub fn name_of<'a>(&'a self, id: &'a str) -> &'a str {
        self.get(id).map_or(id, |p| &p.name)
    }

    /// True when `id` is a bot in the roster.
    pub fn is_bot(&self, id: &str) -> bool {
        self.get(id).is_some_and(Participant::is_bot)
    }

    /// The position of `id` in the roster.
    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.inner.by_id.get(id).copied()
    }

    /// The position of the participant with this handle.
    pub(crate) fn index_of_handle(&self, handle: &str) -> Option<usize> {
        self.inner.by_handle.get(handle).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bot(id: &str, name: &str) -> Participant {
        Participant::bot(id, name, BotProfile::new(Trigger::Mention, "p"))
    }

    #[test]
    fn rejects_duplicates() {
        let err = Roster::new([Participant::human("a", "A"), bot("a", "B")]).unwrap_err();
        assert!(matches!(err, DispatchError::DuplicateId { .. }), "{err}");
        let err = Roster::new([
            Participant::human("a", "Archive Bot"),
            bot("b", "archive_bot"),
        ])
        .unwrap_err();
        assert!(
            matches!(&err, DispatchError::DuplicateHandle { handle, .. } if handle == "archive-bot"),
            "{err}"
        );
        let err = Roster::new([Participant::human("!", "?")]).unwrap_err();
        assert!(matches!(err, DispatchError::NoHandle { .. }), "{err}");
    }

    #[test]
    fn falls_back_to_the_id_for_a_handle() {
        let roster = Roster::new([Participant::human("user-7", "???")]).unwrap();
        assert_eq!(roster.handle_of("user-7"), Some("user-7"));
        assert_eq!(roster.name_of("user-7"), "???");
    }

    #[test]
    fn looks_up() {
        let roster =
            Roster::new([Participant::human("u", "Alice"), bot("b", "Archive Bot")]).unwrap();
        assert!(roster.is_bot("b"));
        assert!(!roster.is_bot("u"));
        assert!(!roster.is_bot("nobody"));
        assert_eq!(roster.len(), 2);
        assert_eq!(roster.handle_of("b"), Some("archive-bot"));
        assert_eq!(roster.by_handle("alice").map(|p| &*p.id), Some("u"));
        assert!(roster.by_handle("bob").is_none());
    }
}
