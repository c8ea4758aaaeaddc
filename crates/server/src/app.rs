//! One router for everything a daemon serves: `/v1/sessions`, `/api/chat`,
//! `/v1/rooms` when the host has rooms,
//! the web page at `/` and the OpenAPI document of them all at
//! `/openapi.json`, with one JSON 404 for any other path, and compression
//! that never holds a stream back.

use aide::axum::ApiRouter;
use axum::Router;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate};

use crate::api_error::no_route;
use crate::chat::{ChatApi, NDJSON};
use crate::mount::method_not_allowed;
use crate::openapi::with_document;
use crate::page::{page_router, room_page_router};
use crate::rooms::RoomsApi;
use crate::sessions::SessionsApi;

/// `sessions` and `chat` with the web page and their OpenAPI document
/// (`GET /openapi.json`), in one router to
/// [`protect`](crate::Security::protect): the same security layer and the
/// same JSON errors for all of them.
///
/// Responses are gzip-compressed when the client accepts it, except event
/// streams: tower-http's default predicate leaves server-sent events
/// alone but not `application/x-ndjson`, whose lines a compressor would
/// hold until its buffer fills.
pub fn app_router(sessions: SessionsApi, chat: ChatApi) -> Router {
    finish(
        ApiRouter::new()
            .merge(page_router())
            .merge(sessions.api_router())
            .merge(chat.api_router()),
    )
}

/// [`app_router`] with the rooms (`/v1/rooms`, `/v1/bots`) and the room
/// page (`/room`) beside the sessions and the chat, in the same document
/// and behind the same layers.
pub fn app_router_with_rooms(sessions: SessionsApi, chat: ChatApi, rooms: RoomsApi) -> Router {
    finish(
        ApiRouter::new()
            .merge(page_router())
            .merge(room_page_router())
            .merge(sessions.api_router())
            .merge(chat.api_router())
            .merge(rooms.api_router()),
    )
}

/// The routes with their document, the JSON 404 and compression.
fn finish(routes: ApiRouter) -> Router {
    let compress = DefaultPredicate::new().and(NotForContentType::const_new(NDJSON));
    with_document(routes)
        .fallback(no_route)
        // The page's and the document's routes answer a wrong method as
        // the APIs do.
        .layer(axum::middleware::from_fn(method_not_allowed))
        .layer(CompressionLayer::new().compress_when(compress))
}
