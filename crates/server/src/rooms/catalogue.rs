//! The bots a server offers to its rooms: each room's roster takes its
//! bots from here, by id, so a client names a bot and never describes one.

use std::sync::Arc;

use roundtable_dispatch::{DispatchError, Participant, Roster};

use super::record::{MemberKind, Room};

/// Every bot the server runs, with unique ids and handles.
#[derive(Debug, Clone)]
pub(crate) struct Catalogue {
    bots: Roster,
}

impl Catalogue {
    /// The catalogue of `bots`; an error naming the first that is not a bot,
    /// or an id or handle used twice.
    pub(crate) fn new(bots: Vec<Participant>) -> Result<Self, String> {
        if let Some(human) = bots.iter().find(|p| !p.is_bot()) {
            return Err(format!("{} is not a bot (it has no bot profile)", human.id));
        }
        let bots = Roster::new(bots).map_err(|e| e.to_string())?;
        Ok(Self { bots })
    }

    /// Every bot, in the order the host gave them.
    pub(crate) fn bots(&self) -> &[Participant] {
        self.bots.participants()
    }

    /// The bot with this id.
    pub(crate) fn get(&self, id: &str) -> Option<&Participant> {
        self.bots.get(id)
    }

    /// The bot with this `@handle`.
    pub(crate) fn by_handle(&self, handle: &str) -> Option<&Participant> {
        self.bots.by_handle(handle)
    }

    /// The handle of bot `id`.
    pub(crate) fn handle_of(&self, id: &str) -> Option<&str> {
        self.bots.handle_of(id)
    }

    /// The roster of `room`: its humans (named by their user id) and its
    /// bots as the catalogue describes them. A bot the catalogue no longer
    /// offers is left out (it stays a member, and wakes again once offered).
    pub(crate) fn roster_of(&self, room: &Room) -> Result<Roster, DispatchError> {
        let people = room.members.iter().filter_map(|m| match m.kind {
            MemberKind::Human => Some(Participant::human(m.id.clone(), m.id.clone())),
            MemberKind::Bot => self.get(&m.id).cloned(),
        });
        Roster::new(people)
    }
}

/// A bot as a client sees it in the catalogue.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct BotInfo {
    /// The id a room's roster names it by.
    pub(crate) id: Arc<str>,
    /// Its display name.
    pub(crate) name: Arc<str>,
    /// The `@handle` that mentions it.
    pub(crate) handle: String,
    /// What it does, in a line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) about: Option<Arc<str>>,
    /// When it wakes: `mention`, `always` or `ambient`.
    pub(crate) trigger: &'static str,
}

impl Catalogue {
    /// The catalogue as clients see it.
    pub(crate) fn infos(&self) -> Vec<BotInfo> {
        self.bots()
            .iter()
            .map(|bot| BotInfo {
                id: bot.id.clone(),
                name: bot.name.clone(),
                handle: self.handle_of(&bot.id).unwrap_or_default().to_string(),
                about: bot.about.clone(),
                trigger: bot
                    .bot_profile()
                    .map_or("mention", |p| trigger_name(p.trigger)),
            })
            .collect()
    }
}

/// A trigger as the API writes it.
pub(crate) fn trigger_name(trigger: roundtable_dispatch::Trigger) -> &'static str {
    match trigger {
        roundtable_dispatch::Trigger::Mention => "mention",
        roundtable_dispatch::Trigger::Always => "always",
        roundtable_dispatch::Trigger::Ambient => "ambient",
    }
}
