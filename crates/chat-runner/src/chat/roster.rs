//! The participants of a chat session, for a projection of its thread: the
//! agent, and whoever wrote in it (named by their ids).

use std::collections::HashSet;
use std::sync::Arc;

use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger};
use roundtable_thread_stream::{Entry, EntryBody};

/// The agent as the session's one bot and every other author of a `chat`
/// entry as a human named by its id.
pub(crate) fn session_roster(agent: &Arc<str>, entries: &[Entry]) -> Roster {
    let mut seen: HashSet<&str> = HashSet::from([&**agent]);
    let mut people = vec![Participant::bot(
        agent.clone(),
        agent.clone(),
        BotProfile::new(Trigger::Mention, ""),
    )];
    for e in entries {
        if matches!(e.body, EntryBody::Chat(_)) && seen.insert(&e.author) {
            people.push(Participant::human(e.author.clone(), e.author.clone()));
        }
    }
    // Ids whose handles collide keep the agent alone: labels then show the
    // ids, which is what the names are anyway.
    Roster::new(people.clone())
        .or_else(|_| Roster::new(people.into_iter().take(1)))
        .unwrap_or_else(|_| Roster::default())
}
