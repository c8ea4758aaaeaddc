//! The errors of the dispatch crate.

use std::sync::Arc;

/// What can go wrong when building a roster or a bot's prompt.
///
/// Dispatching and projecting never fail: they are total functions of their
/// inputs. Errors come only from configuration (a roster that names someone
/// twice, a topic pattern that does not compile) and from asking about a
/// participant the roster does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// Two participants share an id.
    #[error("participant id {id:?} appears twice in the roster")]
    DuplicateId {
        /// The repeated id.
        id: Arc<str>,
    },
    /// Two participants' names slug to the same `@handle`.
    #[error("participants {first:?} and {second:?} both have the handle @{handle}")]
    DuplicateHandle {
        /// The shared handle.
        handle: String,
        /// The id of the first participant with it.
        first: Arc<str>,
        /// The id of the second one.
        second: Arc<str>,
    },
    /// A participant's name and id both slug to nothing (only punctuation).
    #[error("participant {id:?} has no usable handle: its name {name:?} has no letters or digits")]
    NoHandle {
        /// The participant's id.
        id: Arc<str>,
        /// The participant's display name.
        name: Arc<str>,
    },
    /// The roster does not know this participant.
    #[error("participant {id:?} is not in the roster")]
    UnknownParticipant {
        /// The id asked about.
        id: Arc<str>,
    },
    /// The participant is a human where a bot was needed.
    #[error("participant {id:?} is not a bot")]
    NotABot {
        /// The id asked about.
        id: Arc<str>,
    },
    /// A topic pattern is not a valid regular expression.
    #[error("invalid topic pattern {pattern:?}: {reason}")]
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// What the regex compiler said.
        reason: String,
    },
}
