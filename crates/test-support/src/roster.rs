//! Casts for the dispatcher's and the runners' tests: participants and
//! rosters.

// A cast that cannot be built must fail the test that asked.
#![allow(clippy::panic)]

use roundtable_dispatch::{BotProfile, Participant, Roster, Topic, Trigger};

/// A human.
pub fn human(id: &str, name: &str) -> Participant {
    Participant::human(id, name)
}

/// A bot woken by `trigger`, whose persona is `You are <name>.`.
pub fn bot(id: &str, name: &str, trigger: Trigger) -> Participant {
    Participant::bot(
        id,
        name,
        BotProfile::new(trigger, format!("You are {name}.")),
    )
}

/// An ambient bot with keyword topics.
pub fn ambient(id: &str, name: &str, topics: &[&str]) -> Participant {
    Participant::bot(
        id,
        name,
        BotProfile::new(Trigger::Ambient, format!("You are {name}."))
            .with_topics(topics.iter().map(|t| Topic::keyword(t))),
    )
}

/// A roster of `people`.
///
/// # Panics
///
/// When the roster is invalid (two participants with one id).
pub fn roster(people: impl IntoIterator<Item = Participant>) -> Roster {
    Roster::new(people).unwrap_or_else(|e| panic!("invalid roster: {e}"))
}

/// The standard cast: two humans, and bots of every trigger.
///
/// | id | name | trigger |
/// | --- | --- | --- |
/// | alice, bob | Alice, Bob | human |
/// | arch | Archive Bot | mention |
/// | coder | Coder | mention |
/// | watch | Watcher | always |
/// | echo | Echo | always |
/// | herald | Herald | always |
/// | rusty | Rusty | ambient, topic "rust" |
/// | poet | Poet | ambient, no topic |
///
/// # Panics
///
/// When `ids` names someone outside the cast.
pub fn cast(ids: &[&str]) -> Roster {
    let member = |id: &str| -> Participant {
        match id {
            "alice" => human("alice", "Alice"),
            "bob" => human("bob", "Bob"),
            "arch" => bot(id, "Archive Bot", Trigger::Mention),
            "coder" => bot(id, "Coder", Trigger::Mention),
            "watch" => bot(id, "Watcher", Trigger::Always),
            "echo" => bot(id, "Echo", Trigger::Always),
            "herald" => bot(id, "Herald", Trigger::Always),
            "rusty" => Participant::bot(
                "rusty",
                "Rusty",
                BotProfile::new(Trigger::Ambient, "You answer Rust questions.")
                    .with_topics([Topic::keyword("rust")]),
            ),
            "poet" => bot(id, "Poet", Trigger::Ambient),
            other => panic!("no cast member {other}"),
        }
    };
    roster(ids.iter().map(|id| member(id)))
}
