//! The handlers of `/v1/rooms` and `/v1/bots`: each reads its request,
//! checks that the caller sees the room (a stranger gets 404), and makes
//! one change or read of the room's thread.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use roundtable_sessions::Caller;

use super::RoomsState;
use super::change::{self, Change};
use super::history::{EntriesQuery, EntryPage, page};
use super::identity::author_of;
use super::post::{MessageBody, post};
use super::record::Room;
use super::requests::{
    AddMemberBody, BotList, CreateRoomBody, DecideBody, ListQuery, OverrideBody, Posted, RoomInfo,
    RoomList,
};
use super::sse::{EventsQuery, respond, resume_after};
use super::tail::RoomStream;
use crate::api_error::{ApiError, ErrorCode};
use crate::body::JsonBody;
use crate::extract::{caller, path_rejected};
use crate::live_tail::{Followed, Follower};

type Api = State<Arc<RoomsState>>;
type Found = Option<Extension<Caller>>;

fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    query
        .map(|Query(q)| q)
        .map_err(|r| ApiError::new(ErrorCode::InvalidRequest, r.body_text()))
}

/// The room as its answer.
fn info(api: &RoomsState, room: &Room) -> Result<Json<RoomInfo>, ApiError> {
    let roster = api.directory.roster(room)?;
    Ok(Json(RoomInfo::of(room, &roster)))
}

pub(crate) async fn list_bots(State(api): Api) -> Json<BotList> {
    Json(BotList {
        bots: api.directory.catalogue.infos(),
    })
}

pub(crate) async fn create_room(
    State(api): Api,
    found: Found,
    JsonBody(body): JsonBody<CreateRoomBody>,
) -> Result<Response, ApiError> {
    let author = author_of(&caller(found))?;
    let (title, members) = body.into_members(&author, &api.directory.catalogue)?;
    let room = api.directory.open(&author, &title, members).await?;
    Ok((StatusCode::CREATED, info(&api, &room)?).into_response())
}

pub(crate) async fn list_rooms(
    State(api): Api,
    found: Found,
    listed: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<RoomList>, ApiError> {
    let listed = query(listed)?;
    let (limit, after) = listed.page()?;
    let (rooms, more) = api.directory.list(&caller(found), limit, after);
    let next_cursor = more
        .then(|| rooms.last().map(|room| room.id.to_string()))
        .flatten();
    let rooms = rooms
        .iter()
        .map(|room| info(&api, room).map(|Json(info)| info))
        .collect::<Result<_, _>>()?;
    Ok(Json(RoomList { rooms, next_cursor }))
}

pub(crate) async fn get_room(
    State(api): Api,
    id: Result<Path<String>, PathRejection>,
    found: Found,
) -> Result<Json<RoomInfo>, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let (cell, _) = api.directory.find(&caller(found), &id).await?;
    // As the thread holds it now, changes of other processes included.
    let (room, _) = api.directory.current(&cell).await?;
    info(&api, &room)
}

pub(crate) async fn entries(
    State(api): Api,
    id: Result<Path<String>, PathRejection>,
    found: Found,
    asked: Result<Query<EntriesQuery>, QueryRejection>,
) -> Result<Json<EntryPage>, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let asked = query(asked)?;
    let (_, room) = api.directory.find(&caller(found), &id).await?;
    Ok(Json(page(&*api.directory.store, &room.id, &asked).await?))
}

pub(crate) async fn post_message(
    State(api): Api,
    id: Result<Path<String>, PathRejection>,
    found: Found,
    JsonBody(body): JsonBody<MessageBody>,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let entry = post(&api.directory, &caller(found), &id, body).await?;
    let mentions = match &entry.body {
        roundtable_thread_stream::EntryBody::Chat(chat) => chat.mentions.to_vec(),
        _ => Vec::new(),
    };
    let posted = Posted {
        seq: entry.seq,
        id: entry.id.clone(),
        mentions,
    };
    Ok((StatusCode::CREATED, Json(posted)).into_response())
}

pub(crate) async fn events(
    State(api): Api,
    id: Result<Path<String>, PathRejection>,
    found: Found,
    headers: HeaderMap,
    asked: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let asked = query(asked)?;
    let after = resume_after(&headers, &asked)?;
    let caller = caller(found);
    let (_, room) = api.directory.find(&caller, &id).await?;
    let stream = RoomStream {
        store: api.directory.store.clone(),
        room: room.id.clone(),
    };
    let stored = stream
        .stored(Some(after))
        .await
        .map_err(ApiError::internal)?;
    let follower = Follower::new(stream, api.tails.clone(), Some(after), stored);
    let viewer = caller.user_id().cloned();
    Ok(respond(follower, viewer, api.keep_alive))
}

pub(crate) async fn add_member(
    State(api): Api,
    id: Result<Path<String>, PathRejection>,
    found: Found,
    JsonBody(body): JsonBody<AddMemberBody>,
) -> Result<Json<RoomInfo>, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let member = body.into_member(&api.directory.catalogue)?;
    change_room(&api, found, &id, Change::Join(member)).await
}

pub(crate) async fn remove_member(
    State(api): Api,
    ids: Result<Path<(String, String)>, PathRejection>,
    found: Found,
) -> Result<Json<RoomInfo>, ApiError> {
    let Path((id, member)) = ids.map_err(path_rejected)?;
    change_room(&api, found, &id, Change::Leave(Arc::from(member))).await
}

pub(crate) async fn set_override(
    State(api): Api,
    ids: Result<Path<(String, String)>, PathRejection>,
    found: Found,
    JsonBody(body): JsonBody<OverrideBody>,
) -> Result<Json<RoomInfo>, ApiError> {
    let Path((id, bot)) = ids.map_err(path_rejected)?;
    let change_to = Change::Override(Arc::from(bot), Some(body.mode));
    change_room(&api, found, &id, change_to).await
}

pub(crate) async fn clear_override(
    State(api): Api,
    ids: Result<Path<(String, String)>, PathRejection>,
    found: Found,
) -> Result<Json<RoomInfo>, ApiError> {
    let Path((id, bot)) = ids.map_err(path_rejected)?;
    change_room(&api, found, &id, Change::Override(Arc::from(bot), None)).await
}

pub(crate) async fn decide(
    State(api): Api,
    id: Result<Path<String>, PathRejection>,
    found: Found,
    JsonBody(body): JsonBody<DecideBody>,
) -> Result<Json<RoomInfo>, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let decision = body.into_decision()?;
    change_room(&api, found, &id, Change::Decide(decision)).await
}

/// Makes `change` to room `id` as the caller, and answers the room.
async fn change_room(
    api: &RoomsState,
    found: Found,
    id: &str,
    change: Change,
) -> Result<Json<RoomInfo>, ApiError> {
    let caller = caller(found);
    let author = author_of(&caller)?;
    let room = change::change(&api.directory, &caller, &author, id, change).await?;
    info(api, &room)
}
