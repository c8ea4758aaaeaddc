//! A turn's lifecycle entries: `turn.started`, then `turn.ended` or
//! `turn.failed`, and the typed reason that closes a turn.
//!
//! The reason is stored as one string (`stop`, `max-rounds`,
//! `error: connection reset`, `interrupted`, ...); [`TurnReason`] is its
//! typed form, so that a reader asks [`TurnReason::is_interrupted`] instead
//! of comparing text.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How a turn loop ended, written as `stop`, `length`, `max-rounds`,
/// `budget`, `timeout`, `aborted` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model gave its final answer.
    Stop,
    /// The model hit its output limit.
    Length,
    /// The tool-round cap was reached with the model still calling tools.
    MaxRounds,
    /// The turn's usage passed its budget (tokens or cost) after a round
    /// that still called tools; those tools ran and got their results.
    Budget,
    /// The per-turn timeout fired.
    Timeout,
    /// The host cancelled the turn.
    Aborted,
    /// The provider failed or a tool ended the turn.
    Error,
}

impl FinishReason {
    /// Every finish reason.
    pub const ALL: [FinishReason; 7] = [
        Self::Stop,
        Self::Length,
        Self::MaxRounds,
        Self::Budget,
        Self::Timeout,
        Self::Aborted,
        Self::Error,
    ];

    /// The wire name (`max-rounds`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::MaxRounds => "max-rounds",
            Self::Budget => "budget",
            Self::Timeout => "timeout",
            Self::Aborted => "aborted",
            Self::Error => "error",
        }
    }

    /// The finish reason written as `name`, if it is one.
    pub fn from_wire(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// True for `stop`, `length`, `max-rounds` and `budget`: the loop ran
    /// to one of its own ends rather than being cut off or failing.
    pub fn is_success(self) -> bool {
        matches!(
            self,
            Self::Stop | Self::Length | Self::MaxRounds | Self::Budget
        )
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The reason of the `turn.failed` entry that closes a turn its runner never
/// finished (a crash, a shutdown): the wake such a turn was answering is
/// owed once more.
pub const INTERRUPTED: &str = "interrupted";

/// The signal name of the record a runner writes after a turn with its
/// figures (`signal.turn_result`: finish reason, rounds, tokens and cost,
/// duration, model), read by dashboards.
pub const TURN_RESULT_SIGNAL: &str = "turn_result";

/// Why a turn closed: the `reason` of its `turn.ended` or `turn.failed`.
///
/// Stored as one string, exactly: a finish reason alone (`stop`), a finish
/// reason and what went wrong (`error: connection reset`), `interrupted`, or
/// any other text a writer chose (kept as it was).
///
/// ```
/// use roundtable_thread_stream::{FinishReason, TurnReason};
///
/// let failed = TurnReason::failed(FinishReason::Error, "connection reset");
/// assert_eq!(failed.to_string(), "error: connection reset");
/// assert_eq!(TurnReason::parse("error: connection reset"), failed);
/// assert_eq!(failed.finish_reason(), Some(FinishReason::Error));
/// assert!(TurnReason::parse("interrupted").is_interrupted());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnReason {
    /// The turn loop ended for this reason; `message` says what went wrong,
    /// for a failed turn.
    Finished {
        /// How the loop ended.
        finish: FinishReason,
        /// What went wrong, if anything.
        message: Option<String>,
    },
    /// Its runner stopped in the middle of the turn ([`INTERRUPTED`]).
    Interrupted,
    /// A reason this version does not know, kept as written.
    Other(String),
}

impl TurnReason {
    /// A turn whose loop ended for `finish`, with nothing more to say.
    pub fn finished(finish: FinishReason) -> Self {
        Self::Finished {
            finish,
            message: None,
        }
    }

    /// A turn whose loop ended for `finish` because of `message`.
    pub fn failed(finish: FinishReason, message: impl Into<String>) -> Self {
        Self::Finished {
            finish,
            message: Some(message.into()),
        }
    }

    /// Reads a stored reason; never fails (unknown text is kept as
    /// [`Other`](Self::Other)).
    pub fn parse(text: &str) -> Self {
        if text == INTERRUPTED {
            return Self::Interrupted;
        }
        if let Some(finish) = FinishReason::from_wire(text) {
            return Self::finished(finish);
        }
        if let Some((name, message)) = text.split_once(": ")
            && let Some(finish) = FinishReason::from_wire(name)
        {
            return Self::failed(finish, message);
        }
        Self::Other(text.to_string())
    }

    /// The stored text.
    pub fn as_text(&self) -> Cow<'_, str> {
        match self {
            Self::Finished {
                finish,
                message: None,
            } => Cow::Borrowed(finish.as_str()),
            Self::Finished {
                finish,
                message: Some(message),
            } => Cow::Owned(format!("{finish}: {message}")),
            Self::Interrupted => Cow::Borrowed(INTERRUPTED),
            Self::Other(text) => Cow::Borrowed(text),
        }
    }

    /// True when the turn's runner stopped in the middle of it: the wake it
    /// answered is owed again.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Self::Interrupted)
    }

    /// How the turn loop ended, when the reason says.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        match self {
            Self::Finished { finish, .. } => Some(*finish),
            Self::Interrupted | Self::Other(_) => None,
        }
    }

    /// What went wrong, when the reason says.
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Finished { message, .. } => message.as_deref(),
            Self::Interrupted | Self::Other(_) => None,
        }
    }
}

impl fmt::Display for TurnReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_text())
    }
}

impl From<&str> for TurnReason {
    /// The same as [`TurnReason::parse`].
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

impl From<String> for TurnReason {
    /// The same as [`TurnReason::parse`].
    fn from(text: String) -> Self {
        Self::parse(&text)
    }
}

impl PartialEq<str> for TurnReason {
    fn eq(&self, other: &str) -> bool {
        self.as_text() == other
    }
}

impl PartialEq<&str> for TurnReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_text() == *other
    }
}

impl Serialize for TurnReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_text())
    }
}

impl<'de> Deserialize<'de> for TurnReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        Ok(Self::parse(&text))
    }
}

/// `turn.started`: a bot began a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStarted {
    /// The turn's id; the turn's other entries carry it.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub turn: Arc<str>,
    /// The seq of the entry that woke the bot, if an entry did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<u64>,
    /// The wake's hop depth: 1 for a wake by a human, the trigger's depth + 1
    /// for a wake by a bot.
    #[serde(default)]
    pub depth: u32,
    /// Why the bot woke (`mention`, `always`, `ambient`), if known. A
    /// `Box<str>`, not a `String`: every entry of a thread is as wide as its
    /// widest body, and this one's width counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Box<str>>,
}

impl TurnStarted {
    /// A turn no entry woke (a host asked for it), at depth 0.
    pub fn new(turn: impl Into<Arc<str>>) -> Self {
        Self {
            turn: turn.into(),
            trigger: None,
            depth: 0,
            reason: None,
        }
    }
}

/// `turn.ended`: a bot's turn finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnded {
    /// The turn.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub turn: Arc<str>,
    /// How it finished (`stop`, `max-rounds`, `length`, `aborted`, ...).
    pub reason: TurnReason,
}

/// `turn.failed`: a bot's turn failed; the thread stays usable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnFailed {
    /// The turn.
    #[serde(deserialize_with = "roundtable_providers::serde_shared::arc_str")]
    pub turn: Arc<str>,
    /// What went wrong.
    pub reason: TurnReason,
}

impl TurnFailed {
    /// Closes `turn`, which its runner stopped in the middle of.
    pub fn interrupted(turn: impl Into<Arc<str>>) -> Self {
        Self {
            turn: turn.into(),
            reason: TurnReason::Interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_reads_back_as_written() {
        let mut texts: Vec<String> = FinishReason::ALL
            .iter()
            .map(|r| r.as_str().to_string())
            .collect();
        texts.extend(
            [
                "interrupted",
                "error: boom",
                "aborted: the turn was cancelled",
                "timeout: ",
                "error:",
                "stop:x",
                "interrupted: again",
                "",
                "something else",
            ]
            .map(String::from),
        );
        for text in texts {
            let reason = TurnReason::parse(&text);
            assert_eq!(reason.as_text(), text, "{reason:?}");
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, serde_json::to_string(&text).unwrap());
            assert_eq!(serde_json::from_str::<TurnReason>(&json).unwrap(), reason);
        }
    }

    #[test]
    fn reasons_are_typed() {
        assert!(TurnReason::parse(INTERRUPTED).is_interrupted());
        assert!(!TurnReason::parse("interrupted: again").is_interrupted());
        assert_eq!(
            TurnReason::parse("max-rounds"),
            TurnReason::finished(FinishReason::MaxRounds)
        );
        let failed = TurnReason::parse("error: a: b");
        assert_eq!(failed.finish_reason(), Some(FinishReason::Error));
        assert_eq!(failed.message(), Some("a: b"));
        assert_eq!(TurnReason::parse("nope").finish_reason(), None);
    }
}
