//! HTTP routers a host mounts for roundtable's agentic sessions.
//!
//! The crate holds no session state: every route is one call of the
//! sessions engine ([`roundtable_sessions::SessionEngine`]), and every
//! event a client streams comes from the engine's store. A host builds the
//! routers, adds its own routes beside them, and puts the whole router
//! behind [`Security`]:
//!
//! - [`sessions_router`] / [`SessionsApi`]: `/v1/sessions` of the spec,
//!   with server-sent events that resume after `Last-Event-ID`, and
//!   uploads (JSON with base64, or multipart) into the session's
//!   attachments that messages then refer to;
//! - [`chat_router`] / [`ChatApi`]: `/api/chat`, a prompt in and the
//!   session's answer out as NDJSON chat events (`start`, `delta`, `tool`,
//!   `queue`, `done`...), with steer and follow-up queueing, abort,
//!   answers to questions and approvals, transcripts, [`ChatSettings`] and
//!   provenance;
//! - [`app_router`]: both, and the chat page at `/` (plain HTML and script
//!   embedded in the binary), in one router whose compression never holds
//!   a stream back, with the OpenAPI 3.1 document of all its routes at
//!   `GET /openapi.json` (generated from the routes and their bodies'
//!   types);
//! - [`RoomsApi`](rooms::RoomsApi): `/v1/rooms`, multi-party rooms where many people and
//!   many bots talk in one thread (a room is a thread of the store; its
//!   bots answer through a `ThreadRunner`), with their history by seq, an
//!   event stream of every entry, members and per-room overrides, and
//!   `/v1/bots`, the catalogue; [`app_router_with_rooms`] mounts it beside
//!   the others;
//! - [`Security`]: the `Host` check (no DNS rebinding), the `Origin` check
//!   (no cross-origin requests but from allowed origins, with CORS for
//!   those), and the token check, which hands each request's
//!   [`Caller`](roundtable_sessions::Caller) to the handlers (the host's
//!   token is [`HostToken`], users' tokens [`TokenUsers`]); a browser signs in with a one-time `?token=` link that
//!   sets an `HttpOnly`, `SameSite=Strict` cookie;
//! - [`AccessToken`]: the token, explicit (`ROUNDTABLE_TOKEN`) or generated
//!   and written to a file only its user reads; [`check_bind`] refuses a
//!   non-loopback address without an explicit token;
//! - [`ApiError`]: every failure as `{"error": {"code", "message"}}` with
//!   its status, engine errors mapped by their kind in one place;
//! - [`serve`]: the connection loop, with a request-head timeout that also
//!   closes idle keep-alive connections, a cap on open connections (those
//!   beyond it get a 503), bounded send buffers with a timeout on blocked
//!   writes (a client that stops reading is closed and resumes) and
//!   graceful shutdown ([`ServeLimits`]);
//!   `raise_open_files_limit` lifts the process's descriptor limit (Unix).
//!
//! ```no_run
//! # async fn run(
//! #     engine: roundtable_sessions::SessionEngine,
//! #     stop: impl std::future::Future<Output = ()> + Send,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! use roundtable_server::{
//!     AccessToken, ChatApi, HostToken, Security, ServeLimits, SessionsApi, app_router, check_bind,
//!     serve,
//! };
//!
//! let addr: std::net::SocketAddr = "127.0.0.1:8787".parse()?;
//! let token = AccessToken::from_env_or_generate(std::path::Path::new("data/token"))?;
//! check_bind(addr, &token)?;
//! let chat = ChatApi::new(engine.clone()).workspace("/srv/project");
//! let app = Security::new(addr, HostToken::new(token))
//!     .protect(app_router(SessionsApi::new(engine), chat));
//! let listener = tokio::net::TcpListener::bind(addr).await?;
//! // Until `stop` (the host's Ctrl-C or SIGTERM): then the responses in
//! // progress get a grace to end.
//! serve(listener, app, ServeLimits::default(), stop).await;
//! # Ok(()) }
//! ```

mod api_error;
mod app;
mod auth;
mod body;
mod chat;
mod drain;
mod error;
mod extract;
mod guard;
pub mod headers;
mod keep_alive;
mod live_tail;
mod mount;
mod open_streams;
mod openapi;
mod page;
pub mod rooms;
mod security;
mod serve;
pub mod sessions;
mod timeout;
pub mod token;

pub use api_error::{ApiError, ErrorCode};
pub use app::{app_router, app_router_with_rooms};
pub use auth::{Authenticator, HostToken, TokenUsers};
pub use chat::{ChatApi, ChatSettings, StreamingBehavior, chat_router};
pub use error::ServerError;
pub use security::{Security, check_bind};
#[cfg(unix)]
pub use serve::raise_open_files_limit;
pub use serve::{ServeLimits, WRITE_QUEUE, serve};
pub use sessions::{SessionsApi, sessions_router};
pub use token::AccessToken;
