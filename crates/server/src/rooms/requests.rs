//! The bodies the rooms routes read and the answers they write, with the
//! checks of what a client sends: titles, user ids, bot ids of the
//! catalogue, paging parameters.

use std::collections::BTreeMap;
use std::sync::Arc;

use roundtable_dispatch::Roster;
use serde::{Deserialize, Serialize};

use roundtable_chat_runner::lifecycle::records::ApprovalVerdict;

use super::catalogue::{Catalogue, trigger_name};
use super::change::Decision;
use super::record::{Member, MemberKind, OverrideMode, PendingApproval, Room};
use crate::api_error::{ApiError, ErrorCode};

/// The longest room title, in characters.
const MAX_TITLE_CHARS: usize = 200;

/// The most members a room is opened with.
const MAX_MEMBERS: usize = 256;

/// `POST /v1/rooms`. The caller always joins the room they open.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateRoomBody {
    /// What the room is about (1 to 200 characters).
    title: String,
    /// The other people in the room, by user id.
    #[serde(default)]
    humans: Vec<String>,
    /// The bots in the room, by their id in the catalogue (`GET /v1/bots`).
    #[serde(default)]
    bots: Vec<String>,
}

impl CreateRoomBody {
    /// The title and the members, the caller (`author`) first.
    pub(crate) fn into_members(
        self,
        author: &Arc<str>,
        catalogue: &Catalogue,
    ) -> Result<(String, Vec<Member>), ApiError> {
        let title = self.title.trim().to_string();
        if title.is_empty() || title.chars().count() > MAX_TITLE_CHARS {
            return Err(invalid(format!("title: 1 to {MAX_TITLE_CHARS} characters")));
        }
        if self.humans.len() + self.bots.len() >= MAX_MEMBERS {
            return Err(invalid(format!(
                "a room holds fewer than {MAX_MEMBERS} members"
            )));
        }
        let mut members = vec![human(author.clone())];
        for id in &self.humans {
            let id = user_id(id)?;
            if !members.iter().any(|m| m.id == id) {
                members.push(human(id));
            }
        }
        for id in &self.bots {
            let bot = bot_id(id, catalogue)?;
            if !members.iter().any(|m| m.id == bot) {
                members.push(Member {
                    id: bot,
                    kind: MemberKind::Bot,
                });
            }
        }
        Ok((title, members))
    }
}

/// `POST /v1/rooms/{id}/members`: one of `user` or `bot`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddMemberBody {
    /// A person, by user id.
    #[serde(default)]
    user: Option<String>,
    /// A bot of the catalogue, by id.
    #[serde(default)]
    bot: Option<String>,
}

impl AddMemberBody {
    /// The member to add.
    pub(crate) fn into_member(self, catalogue: &Catalogue) -> Result<Member, ApiError> {
        match (self.user, self.bot) {
            (Some(user), None) => Ok(human(user_id(&user)?)),
            (None, Some(bot)) => Ok(Member {
                id: bot_id(&bot, catalogue)?,
                kind: MemberKind::Bot,
            }),
            _ => Err(invalid("give exactly one of `user` and `bot`")),
        }
    }
}

/// `PUT /v1/rooms/{id}/overrides/{bot}`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverrideBody {
    /// How the bot wakes in this room: `mute`, `mention_only` or `always`.
    pub(crate) mode: OverrideMode,
}

/// The longest reason a decision gives, in characters.
const MAX_REASON_CHARS: usize = 1000;

/// What a member decides about a bot's gated call.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    /// Run the call.
    Approve,
    /// Do not run it; the bot reads the reason.
    Deny,
}

/// `POST /v1/rooms/{id}/approvals`: a decision on a waiting call (the
/// room's `pending_approvals`, or a `signal.approval_requested` entry).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideBody {
    /// The call's id (`call_id` of the request).
    call_id: String,
    /// Its turn, needed only when two waiting calls share the id.
    #[serde(default)]
    turn: Option<String>,
    /// `approve` or `deny`.
    decision: Verdict,
    /// Why (up to 1000 characters), shown to the bot.
    #[serde(default)]
    reason: Option<String>,
}

impl DecideBody {
    /// The decision to store.
    pub(crate) fn into_decision(self) -> Result<Decision, ApiError> {
        if self
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
        {
            return Err(invalid(format!(
                "reason: at most {MAX_REASON_CHARS} characters"
            )));
        }
        let verdict = match self.decision {
            Verdict::Approve => ApprovalVerdict::Approve,
            Verdict::Deny => ApprovalVerdict::Deny,
        };
        Ok(Decision {
            call_id: self.call_id,
            turn: self.turn,
            verdict,
            reason: self.reason,
        })
    }
}

/// `GET /v1/rooms` query: `limit` (1 to 200, default 50) and `cursor` (a
/// previous page's `next_cursor`).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct ListQuery {
    /// How many rooms at most.
    limit: Option<String>,
    /// Where the page starts.
    cursor: Option<String>,
}

/// The default and largest page of `GET /v1/rooms`.
const DEFAULT_ROOM_PAGE: usize = 50;
const MAX_ROOM_PAGE: usize = 200;

impl ListQuery {
    /// The page size and the room the page starts after.
    pub(crate) fn page(&self) -> Result<(usize, Option<&str>), ApiError> {
        let limit = parse_limit(self.limit.as_deref(), DEFAULT_ROOM_PAGE, MAX_ROOM_PAGE)?;
        Ok((limit, self.cursor.as_deref().filter(|c| !c.is_empty())))
    }
}

/// `limit` as a number from 1 to `max` (`default` when absent).
pub(crate) fn parse_limit(
    limit: Option<&str>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    match limit {
        None => Ok(default),
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("limit must be a whole number from 1 to {max}"),
            )),
        },
    }
}

/// A participant as a client sees it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct MemberInfo {
    /// The user id or bot id: the `author` of what they write.
    id: Arc<str>,
    /// Human or bot.
    kind: MemberKind,
    /// The display name.
    name: Arc<str>,
    /// The `@handle` that mentions them.
    #[serde(skip_serializing_if = "Option::is_none")]
    handle: Option<String>,
    /// A bot's trigger in the catalogue: `mention`, `always` or `ambient`.
    #[serde(skip_serializing_if = "Option::is_none")]
    trigger: Option<&'static str>,
}

/// A room as a client sees it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct RoomInfo {
    /// The room's id (its thread's).
    id: String,
    title: String,
    /// Who opened it.
    created_by: Arc<str>,
    /// When, in Unix milliseconds.
    created_at: i64,
    /// Who is in it, in the order they joined.
    members: Vec<MemberInfo>,
    /// The bots whose trigger is overridden here, and how.
    overrides: BTreeMap<Arc<str>, OverrideMode>,
    /// The bots' gated calls waiting for a member's decision.
    pending_approvals: Vec<PendingApproval>,
}

impl RoomInfo {
    /// `room` with each member's name and handle from its `roster`.
    pub(crate) fn of(room: &Room, roster: &Roster) -> Self {
        let members = room
            .members
            .iter()
            .map(|m| {
                let participant = roster.get(&m.id);
                MemberInfo {
                    id: m.id.clone(),
                    kind: m.kind,
                    name: participant.map_or_else(|| m.id.clone(), |p| p.name.clone()),
                    handle: roster.handle_of(&m.id).map(str::to_string),
                    trigger: participant
                        .and_then(|p| p.bot_profile())
                        .map(|profile| trigger_name(profile.trigger)),
                }
            })
            .collect();
        Self {
            id: room.id.to_string(),
            title: room.title.clone(),
            created_by: room.created_by.clone(),
            created_at: room.created_at,
            members,
            overrides: room.overrides.clone(),
            pending_approvals: room.pending.clone(),
        }
    }
}

/// `GET /v1/rooms`: a page of rooms, newest first.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct RoomList {
    pub(crate) rooms: Vec<RoomInfo>,
    /// Where the next page starts; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

/// `GET /v1/bots`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct BotList {
    pub(crate) bots: Vec<super::catalogue::BotInfo>,
}

/// `POST /v1/rooms/{id}/messages` answers the stored message's place.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Posted {
    /// The message's seq in the room (its event id in the stream).
    pub(crate) seq: u64,
    /// The entry's id.
    pub(crate) id: Arc<str>,
    /// The members it mentions, resolved.
    pub(crate) mentions: Vec<Arc<str>>,
}

fn human(id: Arc<str>) -> Member {
    Member {
        id,
        kind: MemberKind::Human,
    }
}

/// A user id: 1 to 64 letters, digits, `.`, `_`, `-` or `@` (as the
/// daemon's users are named).
fn user_id(id: &str) -> Result<Arc<str>, ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b));
    if ok {
        Ok(Arc::from(id))
    } else {
        let shown: String = id.chars().take(80).collect();
        Err(invalid(format!(
            "user id {shown:?} must be 1 to 64 letters, digits, '.', '_', '-' or '@'"
        )))
    }
}

/// The id of a bot of the catalogue.
fn bot_id(id: &str, catalogue: &Catalogue) -> Result<Arc<str>, ApiError> {
    catalogue.get(id).map(|bot| bot.id.clone()).ok_or_else(|| {
        let shown: String = id.chars().take(80).collect();
        invalid(format!(
            "no bot {shown:?} in the catalogue (GET /v1/bots lists them)"
        ))
    })
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidField, message)
}
