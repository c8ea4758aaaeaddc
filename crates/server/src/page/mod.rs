//! The web pages a daemon serves: the chat page at `/` and, with rooms,
//! the room page at `/room`. Each is one HTML page, its script and its
//! style, embedded in the binary (no build step, nothing fetched from
//! elsewhere). The chat page chats through `/api/chat`, the room page
//! through `/v1/rooms`; both sign in with the cookie of the one-time
//! `?token=` link, like any other client of the API.

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::openapi;

const INDEX_HTML: &str = include_str!("index.html");
const CHAT_JS: &str = include_str!("chat.js");
const CHAT_CSS: &str = include_str!("chat.css");
const ROOM_HTML: &str = include_str!("room.html");
const ROOM_JS: &str = include_str!("room.js");
const ROOM_CSS: &str = include_str!("room.css");

/// What the page may load and where it may connect: its own files and
/// its own server, nothing inline, nothing from elsewhere, never framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /` (the page), `GET /chat.js`, `GET /chat.css`.
pub(crate) fn page_router() -> ApiRouter {
    ApiRouter::new()
        .api_route(
            "/",
            get_with(
                || async { asset("text/html; charset=utf-8", INDEX_HTML) },
                |op| openapi::text(op.summary("The chat page"), "text/html", "The page."),
            ),
        )
        .api_route(
            "/chat.js",
            get_with(
                || async { asset("text/javascript; charset=utf-8", CHAT_JS) },
                |op| {
                    openapi::text(
                        op.summary("The page's script"),
                        "text/javascript",
                        "The script.",
                    )
                },
            ),
        )
        .api_route(
            "/chat.css",
            get_with(
                || async { asset("text/css; charset=utf-8", CHAT_CSS) },
                |op| openapi::text(op.summary("The page's style"), "text/css", "The style."),
            ),
        )
}

/// `GET /room` (the room page: `?id=` names the room, else the newest),
/// `GET /room.js`, `GET /room.css`.
pub(crate) fn room_page_router() -> ApiRouter {
    ApiRouter::new()
        .api_route(
            "/room",
            get_with(
                || async { asset("text/html; charset=utf-8", ROOM_HTML) },
                |op| openapi::text(op.summary("The room page"), "text/html", "The page."),
            ),
        )
        .api_route(
            "/room.js",
            get_with(
                || async { asset("text/javascript; charset=utf-8", ROOM_JS) },
                |op| {
                    openapi::text(
                        op.summary("The room page's script"),
                        "text/javascript",
                        "The script.",
                    )
                },
            ),
        )
        .api_route(
            "/room.css",
            get_with(
                || async { asset("text/css; charset=utf-8", ROOM_CSS) },
                |op| {
                    openapi::text(
                        op.summary("The room page's style"),
                        "text/css",
                        "The style.",
                    )
                },
            ),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}
