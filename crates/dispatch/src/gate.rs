//! The bot gate: the second, costlier filter that ambient candidates must pass.

use async_trait::async_trait;
use roundtable_thread_stream::Entry;

use crate::dispatcher::{Wake, WakeReason};
use crate::event::event_text;
use crate::roster::{Participant, Roster};

/// Decides whether an ambient bot should answer an event.
///
/// The host implements it (or uses [`TopicGate`]); a gate that asks a model
/// with the bot's [gating prompt](crate::BotProfile::gating_prompt) belongs
/// to the runner. A gate that cannot decide (a model call failed) should say no.
#[async_trait]
pub trait BotGate: Send + Sync {
    /// True when `bot` should wake for `event`.
    async fn admit(&self, bot: &Participant, event: &Entry) -> bool;
}

/// The built-in gate: admits a bot when the event's text matches one of its
/// [topics](crate::BotProfile::topics) (keywords on word boundaries, or
/// regular expressions). Needs no model; a bot with no topics is never admitted.
///
/// ```
/// use roundtable_dispatch::{BotProfile, Participant, Topic, TopicGate, Trigger};
///
/// let bot = Participant::bot(
///     "b1",
///     "Rusty",
///     BotProfile::new(Trigger::Ambient, "You answer Rust questions.").with_topics([Topic::keyword("rust")]),
/// );
/// assert!(TopicGate.admits_text(&bot, "Is Rust fast?"));
/// assert!(!TopicGate.admits_text(&bot, "I trust you"));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TopicGate;

impl TopicGate {
    /// True when `text` matches one of the bot's topics.
    pub fn admits_text(&self, bot: &Participant, text: &str) -> bool {
        let Some(profile) = bot.bot_profile() else {
            return false;
        };
        if profile.topics.is_empty() {
            return false;
        }
        let lowered = text.to_lowercase();
        profile.topics.iter().any(|t| t.matches(text, &lowered))
    }
}

#[async_trait]
impl BotGate for TopicGate {
    async fn admit(&self, bot: &Participant, event: &Entry) -> bool {
        event_text(event).is_some_and(|text| self.admits_text(bot, &text))
    }
}

/// Runs the gate over the ambient candidates among `wakes` (all at once) and
/// keeps those it admits; mention and `always` wakes pass untouched. The order
/// of `wakes` is kept.
///
/// The gate sees only the candidates the dispatcher kept under its fanout cap,
/// so a costly gate runs at most `max_fanout` times per event.
pub async fn gate_wakes(
    wakes: Vec<Wake>,
    event: &Entry,
    roster: &Roster,
    gate: &dyn BotGate,
) -> Vec<Wake> {
    let verdicts = futures::future::join_all(wakes.iter().map(|wake| async move {
        match wake.reason {
            WakeReason::Mention | WakeReason::Always => true,
            WakeReason::Ambient => match roster.get(&wake.bot) {
                Some(bot) => gate.admit(bot, event).await,
                None => false,
            },
        }
    }))
    .await;
    wakes
        .into_iter()
        .zip(verdicts)
        .filter_map(|(wake, admitted)| admitted.then_some(wake))
        .collect()
}
