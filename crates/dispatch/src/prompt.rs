//! The per-bot system prompt: persona + thread context + agent roster.

use std::fmt::Write as _;

use crate::error::DispatchError;
use crate::roster::{BotProfile, Participant, Role, Roster, Trigger};
use crate::topic::Topic;

/// What a bot is told about the thread it is in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadContext {
    /// The thread's id.
    pub id: String,
    /// A human-readable title, if the host has one.
    pub title: Option<String>,
    /// What the thread is for, or anything else every bot in it should know.
    pub description: Option<String>,
}

impl ThreadContext {
    /// The context of thread `id`, with no title or description.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }

    /// The same context with a title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The same context with a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// The system prompt of bot `self_id`: its persona, then a `<thread_context>`
/// section, then an `<agent_roster>` section that says who is human, who is a
/// bot, how others' messages are labelled and how to address each participant.
///
/// Fails when `self_id` is not a bot of `roster`.
///
/// ```
/// use roundtable_dispatch::{BotProfile, Participant, Roster, ThreadContext, Trigger, system_prompt};
///
/// let roster = Roster::new([
///     Participant::human("u1", "Alice"),
///     Participant::bot("b1", "Archive Bot", BotProfile::new(Trigger::Mention, "You keep the archive.")),
/// ])?;
/// let prompt = system_prompt("b1", &roster, &ThreadContext::new("support-42").with_title("Support"))?;
/// assert!(prompt.starts_with("You keep the archive."));
/// assert!(prompt.contains("- Alice (@alice)"));
/// assert!(prompt.contains("You are Archive Bot (@archive-bot)"));
/// # Ok::<(), roundtable_dispatch::DispatchError>(())
/// ```
pub fn system_prompt(
    self_id: &str,
    roster: &Roster,
    context: &ThreadContext,
) -> Result<String, DispatchError> {
    let me = roster
        .get(self_id)
        .ok_or_else(|| DispatchError::UnknownParticipant { id: self_id.into() })?;
    let profile = me
        .bot_profile()
        .ok_or_else(|| DispatchError::NotABot { id: me.id.clone() })?;
    let mut out = String::new();
    let persona = profile.persona.trim();
    if !persona.is_empty() {
        out.push_str(persona);
        out.push_str("\n\n");
    }
    write_thread_context(&mut out, context);
    out.push_str("<agent_roster>\n");
    write_introduction(&mut out, roster, me);
    write_humans(&mut out, roster);
    write_bots(&mut out, roster, me);
    out.push_str("</agent_roster>\n");
    Ok(out)
}

/// The handle of participant `id`, or the id itself when it has none.
fn handle(roster: &Roster, id: &str) -> String {
    roster.handle_of(id).unwrap_or(id).to_owned()
}

/// The `<thread_context>` section: the thread's title and id, and its
/// description.
fn write_thread_context(out: &mut String, context: &ThreadContext) {
    out.push_str("<thread_context>\n");
    match &context.title {
        Some(title) => {
            let _ = writeln!(out, "Thread: {title} (id {})", context.id);
        }
        None => {
            let _ = writeln!(out, "Thread: {}", context.id);
        }
    }
    if let Some(description) = context.description.as_deref().map(str::trim)
        && !description.is_empty()
    {
        out.push_str(description);
        out.push('\n');
    }
    out.push_str("</thread_context>\n\n");
}

/// Who the bot `me` is, and how the turns of others reach it.
fn write_introduction(out: &mut String, roster: &Roster, me: &Participant) {
    let _ = writeln!(
        out,
        "You are {} (@{}), a bot in a thread shared by several participants. \
         What others say reaches you as user turns labelled with the speaker's name, \
         like \"[{}]: hello\"; your own earlier replies are your assistant turns. \
         Reply without a label. To address someone, write their @handle; \
         a bot hears you only as it is set to below.",
        me.name,
        handle(roster, &me.id),
        roster
            .participants()
            .iter()
            .find(|p| p.id != me.id)
            .map_or("Alice", |p| &*p.name),
    );
}

/// The `Humans:` list, when there are any.
fn write_humans(out: &mut String, roster: &Roster) {
    let humans: Vec<_> = roster
        .participants()
        .iter()
        .filter(|p| !p.is_bot())
        .collect();
    if humans.is_empty() {
        return;
    }
    out.push_str("\nHumans:\n");
    for p in humans {
        let _ = write!(out, "- {} (@{})", p.name, handle(roster, &p.id));
        if let Some(about) = &p.about {
            let _ = write!(out, ": {about}");
        }
        out.push('\n');
    }
}

/// The `Bots:` list: each bot, `me` marked, and what wakes it.
fn write_bots(out: &mut String, roster: &Roster, me: &Participant) {
    out.push_str("\nBots:\n");
    for p in roster.participants() {
        let Role::Bot(bot) = &p.role else {
            continue;
        };
        let h = handle(roster, &p.id);
        let _ = write!(out, "- {} (@{h})", p.name);
        if p.id == me.id {
            out.push_str(" (you)");
        }
        if let Some(about) = &p.about {
            let _ = write!(out, ": {about}");
        }
        out.push_str(". ");
        write_trigger(out, bot, &h);
        out.push('\n');
    }
}

/// When bot `bot` (handle `h`) answers.
fn write_trigger(out: &mut String, bot: &BotProfile, h: &str) {
    match bot.trigger {
        Trigger::Mention => {
            let _ = write!(out, "Wakes when addressed as @{h}.");
        }
        Trigger::Always => out.push_str("Reads every message and may answer any."),
        Trigger::Ambient => {
            let keywords: Vec<&str> = bot
                .topics
                .iter()
                .filter_map(|t| match t {
                    Topic::Keyword(k) => Some(&**k),
                    Topic::Pattern(_) => None,
                })
                .collect();
            if keywords.is_empty() {
                let _ = write!(
                    out,
                    "Joins in when it has something to add, or when addressed as @{h}."
                );
            } else {
                let _ = write!(
                    out,
                    "Joins in on its topics ({}), or when addressed as @{h}.",
                    keywords.join(", ")
                );
            }
        }
    }
}
