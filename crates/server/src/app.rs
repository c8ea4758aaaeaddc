//! One router for everything a daemon serves: `/v1/sessions`, `/api/chat`,
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
use crate::page::page_router;
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
    let compress = DefaultPredicate::new().and(NotForContentType::const_new(NDJSON));
    let routes = ApiRouter::new()
        .merge(page_router())
        .merge(sessions.api_router())
        .merge(chat.api_router());
    with_document(routes)
        .fallback(no_route)
        // The page's and the document's routes answer a wrong method as
        // the APIs do.
        .layer(axum::middleware::from_fn(method_not_allowed))
        .layer(CompressionLayer::new().compress_when(compress))
}
