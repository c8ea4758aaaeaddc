//! A message posted to a room: its text, and the mentions it makes,
//! resolved against the room's roster before anything is stored. A bot of
//! the catalogue named in a room it is not in, or a mention of someone not
//! in the room, is refused rather than silently dropped.

use std::sync::Arc;

use roundtable_dispatch::{Roster, mentioned_handles};
use roundtable_sessions::Caller;
use roundtable_thread_stream::{Chat, Entry, EntryBody, Expect, NewEntry, ThinVec};
use serde::Deserialize;

use super::catalogue::Catalogue;
use super::directory::Directory;
use super::identity::{author_of, no_room, sees};
use super::record::Room;
use crate::api_error::{ApiError, ErrorCode};

/// Posts `body` to room `id` as the caller: checked against the room (and,
/// when the check fails, against the newest entries of its thread, which
/// another process may have just changed), then stored.
pub(crate) async fn post(
    directory: &Directory,
    caller: &Caller,
    id: &str,
    body: MessageBody,
) -> Result<Entry, ApiError> {
    let author = author_of(caller)?;
    let (cell, _) = directory.find(caller, id).await?;
    let _held = cell.hold().await;
    let (room, _) = cell.snapshot();
    let checked = match check(directory, caller, &room, &body) {
        Ok(checked) => checked,
        Err(_) => {
            let (room, _) = directory.current(&cell).await?;
            check(directory, caller, &room, &body)?
        }
    };
    let entry = NewEntry::new(author, EntryBody::Chat(checked));
    let mut stored = directory
        .store
        .append(&room.id, Expect::Any, vec![entry])
        .await
        .map_err(ApiError::internal)?;
    stored
        .pop()
        .ok_or_else(|| ApiError::internal("the store stored nothing"))
}

/// The chat `body` makes in `room`, if the caller is in it.
fn check(
    directory: &Directory,
    caller: &Caller,
    room: &Room,
    body: &MessageBody,
) -> Result<Chat, ApiError> {
    if !sees(caller, room) {
        return Err(no_room(room.id.as_str()));
    }
    let roster = directory.roster(room)?;
    body.to_chat(room, &roster, &directory.catalogue)
}

/// The longest text a message may hold, in bytes (the body limit bounds
/// the request; this bounds what a bot's projection must carry).
pub const MAX_TEXT_BYTES: usize = 16 * 1024;

/// `POST /v1/rooms/{id}/messages`. There is no author field: the author is
/// the caller the token identifies, and a body naming one is refused.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageBody {
    /// What is said; `@handle`s in it mention members.
    text: String,
    /// Members mentioned besides the `@handle`s of the text, by id.
    #[serde(default)]
    mentions: Vec<String>,
}

impl MessageBody {
    /// The chat body to store: the text and every member it mentions.
    pub(crate) fn to_chat(
        &self,
        room: &Room,
        roster: &Roster,
        catalogue: &Catalogue,
    ) -> Result<Chat, ApiError> {
        if self.text.trim().is_empty() {
            return Err(invalid("text: a message needs some text"));
        }
        if self.text.len() > MAX_TEXT_BYTES {
            return Err(ApiError::new(
                ErrorCode::TooLarge,
                format!("text: a message holds at most {MAX_TEXT_BYTES} bytes"),
            ));
        }
        let mut mentioned: Vec<Arc<str>> = Vec::new();
        for id in &self.mentions {
            match room.member(id) {
                Some(member) => push_once(&mut mentioned, member.id.clone()),
                None => {
                    let shown: String = id.chars().take(80).collect();
                    return Err(invalid(format!("mentions: {shown} is not in the room")));
                }
            }
        }
        for handle in mentioned_handles(&self.text) {
            if let Some(member) = roster.by_handle(&handle) {
                push_once(&mut mentioned, member.id.clone());
            } else if let Some(bot) = catalogue.by_handle(&handle) {
                return Err(invalid(format!(
                    "text: @{handle} names the bot {}, which is not in the room (add it first)",
                    bot.id
                )));
            }
        }
        let mut chat = Chat::new(self.text.clone());
        chat.mentions = ThinVec::from(mentioned);
        Ok(chat)
    }
}

fn push_once(list: &mut Vec<Arc<str>>, id: Arc<str>) {
    if !list.contains(&id) {
        list.push(id);
    }
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidField, message)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use roundtable_dispatch::{BotProfile, Participant, Trigger};
    use roundtable_thread_stream::ThreadId;

    use super::*;
    use crate::rooms::record::{Member, MemberKind};

    fn setup() -> (Room, Roster, Catalogue) {
        let bot = |id: &str, name: &str| {
            Participant::bot(id, name, BotProfile::new(Trigger::Mention, "p"))
        };
        let catalogue =
            Catalogue::new(vec![bot("archivist", "Archivist"), bot("chatty", "Chatty")]).unwrap();
        let member = |id: &str, kind| Member {
            id: id.into(),
            kind,
        };
        let room = Room {
            id: ThreadId::new("room-1").unwrap(),
            title: "t".into(),
            created_by: "alice".into(),
            created_at: 0,
            members: vec![
                member("alice", MemberKind::Human),
                member("bob", MemberKind::Human),
                member("archivist", MemberKind::Bot),
            ],
            overrides: BTreeMap::new(),
            pending: Vec::new(),
            decided: Default::default(),
        };
        let roster = catalogue.roster_of(&room).unwrap();
        (room, roster, catalogue)
    }

    fn body(text: &str, mentions: &[&str]) -> MessageBody {
        MessageBody {
            text: text.into(),
            mentions: mentions.iter().map(|m| m.to_string()).collect(),
        }
    }

    #[test]
    fn mentions_resolve_against_the_roster() {
        let (room, roster, catalogue) = setup();
        let chat = body("@Archivist and @bob, mail me@example.com", &["alice"])
            .to_chat(&room, &roster, &catalogue)
            .unwrap();
        let ids: Vec<&str> = chat.mentions.iter().map(|m| &**m).collect();
        assert_eq!(ids, ["alice", "archivist", "bob"]);
        let plain = body("@nobody hi", &[]).to_chat(&room, &roster, &catalogue);
        assert!(plain.unwrap().mentions.is_empty());
    }

    #[test]
    fn bad_mentions_and_texts_are_refused() {
        let (room, roster, catalogue) = setup();
        let code = |b: MessageBody| b.to_chat(&room, &roster, &catalogue).unwrap_err().code;
        assert_eq!(code(body("@chatty hi", &[])), ErrorCode::InvalidField);
        assert_eq!(code(body("hi", &["carol"])), ErrorCode::InvalidField);
        assert_eq!(code(body("  ", &[])), ErrorCode::InvalidField);
        let long = "x".repeat(MAX_TEXT_BYTES + 1);
        assert_eq!(code(body(&long, &[])), ErrorCode::TooLarge);
    }
}
