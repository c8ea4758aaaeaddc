//! A model-backed ambient gate: the bot's gating prompt asks its model a
//! yes/no question about the event.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use roundtable_dispatch::event::event_text;
use roundtable_dispatch::{BotGate, Participant, Roster, TopicGate};
use roundtable_providers::{
    Context, Message, Model, Provider, StreamOptions, UserMessage, complete, now_millis,
};
use roundtable_thread_stream::Entry;

/// The question put to the model after the event.
const QUESTION: &str = "Should you reply to this message? Answer with one word: yes or no.";

/// An ambient gate that asks a model. For a bot with a
/// [gating prompt](roundtable_dispatch::BotProfile::gating_prompt) and a model
/// registered here, the model gets the persona and the gating prompt as its
/// system prompt and the event (labelled with its author's name) as a user
/// turn, and the bot is admitted when the answer starts with "yes". A failed
/// call says no. Other bots fall back to the [`TopicGate`].
///
/// ```
/// use std::sync::Arc;
/// use roundtable_chat_runner::ModelGate;
/// use roundtable_dispatch::{BotGate, BotProfile, Participant, Roster, Trigger};
/// use roundtable_providers::{AssistantBlock, AssistantMessage, Model, ScriptedProvider, OPENAI_COMPLETIONS};
/// use roundtable_thread_stream::{EntryBody, NewEntry, ThreadId};
///
/// let bot = Participant::bot("b", "Rusty", BotProfile::new(Trigger::Ambient, "You answer Rust questions.")
///     .with_gating_prompt("Answer only questions about Rust."));
/// let roster = Roster::new([Participant::human("u", "Alice"), bot.clone()])?;
/// let mut yes = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
/// yes.content.push(AssistantBlock::text("Yes."));
/// let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
/// let gate = ModelGate::new(roster).bot("b", Arc::new(ScriptedProvider::new([yes])), model);
/// let event = NewEntry::new("u", EntryBody::chat("how do lifetimes work?")).into_entry(ThreadId::new("t")?, 1);
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// assert!(gate.admit(&bot, &event).await);
/// # });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ModelGate {
    roster: Roster,
    models: HashMap<Arc<str>, (Arc<dyn Provider>, Model)>,
    options: StreamOptions,
}

impl std::fmt::Debug for ModelGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelGate")
            .field("bots", &self.models.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ModelGate {
    /// A gate with no models yet; `roster` labels the events' authors.
    pub fn new(roster: Roster) -> Self {
        Self {
            roster,
            models: HashMap::new(),
            options: StreamOptions {
                max_tokens: Some(8),
                ..StreamOptions::default()
            },
        }
    }

    /// Asks `model` through `provider` for bot `id`.
    pub fn bot(
        mut self,
        id: impl Into<Arc<str>>,
        provider: Arc<dyn Provider>,
        model: Model,
    ) -> Self {
        self.models.insert(id.into(), (provider, model));
        self
    }

    /// Sets the stream options of the gate's calls (default: at most 8 output
    /// tokens).
    pub fn with_options(mut self, options: StreamOptions) -> Self {
        self.options = options;
        self
    }
}

#[async_trait]
impl BotGate for ModelGate {
    async fn admit(&self, bot: &Participant, event: &Entry) -> bool {
        let (Some(profile), Some((provider, model))) =
            (bot.bot_profile(), self.models.get(&bot.id))
        else {
            return TopicGate.admit(bot, event).await;
        };
        let Some(gating) = &profile.gating_prompt else {
            return TopicGate.admit(bot, event).await;
        };
        let Some(text) = event_text(event) else {
            return false;
        };
        let system = format!("{}\n\n{}", profile.persona.trim(), gating.trim());
        let question = format!(
            "[{}]: {}\n\n{QUESTION}",
            self.roster.name_of(&event.author),
            text
        );
        let context = Context {
            system_prompt: Some(system),
            messages: vec![Message::from(UserMessage::text(question, now_millis()))],
            tools: Default::default(),
        };
        let done = complete(&**provider, model, &context, &self.options).await;
        if done.error.is_some() {
            return false;
        }
        is_yes(&done.message.text())
    }
}

/// True when `answer` starts with the word "yes" (any case, after spaces and
/// punctuation).
fn is_yes(answer: &str) -> bool {
    let word: String = answer
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .chars()
        .take_while(|c| c.is_alphanumeric())
        .collect();
    word.eq_ignore_ascii_case("yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_yes_and_no() {
        assert!(is_yes("Yes."));
        assert!(is_yes("  **yes** I should"));
        assert!(!is_yes("No."));
        assert!(!is_yes("yesterday"));
        assert!(!is_yes(""));
    }
}
