//! `/v1/sessions`: the agentic-sessions API of the spec, over a
//! [`SessionEngine`].
//!
//! | route | engine call |
//! | --- | --- |
//! | `POST /v1/sessions` | `create` (201, `{session_id, ...session}`) |
//! | `GET /v1/sessions` | `list_page` (`{sessions: [...], next_cursor}`, most recent first; `?limit=` 1 to 200, default 50, `&cursor=` a `next_cursor`, `&status=`) |
//! | `GET /v1/sessions/{id}` | `get` |
//! | `DELETE /v1/sessions/{id}` | `delete` (204; 409 `session_busy` while a turn runs) |
//! | `POST /v1/sessions/{id}/messages` | `submit` (202, `{message_id, turn_id, queued}`; `Idempotency-Key`, 422 when reused with another body) |
//! | `POST /v1/sessions/{id}/attachments` | `upload_attachment` (201, `{ref, mime_type, size, filename}`; JSON with base64, or multipart) |
//! | `GET /v1/sessions/{id}/attachments/{name}` | `read_file` (the attachment's bytes, with its type; 404 for a name the session has not) |
//! | `GET /v1/sessions/{id}/artifacts/{turn_id}/{path...}` | `read_file` (a turn's artifact: a whole log, a patch) |
//! | `GET /v1/sessions/{id}/events` | `subscribe` (SSE; `Last-Event-ID`) |
//! | `POST /v1/sessions/{id}/approve` | `decide` |
//! | `POST /v1/sessions/{id}/cancel` | `cancel` (202) |
//! | `POST /v1/sessions/{id}/turns/{turn_id}/retry` | `retry` (201, `{turn_id}`) |

mod files;
mod handlers;
mod requests;
mod sse;
mod tail;
mod upload;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with};
use axum::extract::DefaultBodyLimit;
use axum::{Json, Router};
use roundtable_sessions::{AttachmentRef, SessionEngine, SessionEvent, Submitted};

pub(crate) use self::upload::{Upload, UploadBody};
use crate::headers::{IDEMPOTENCY_KEY, LAST_EVENT_ID};
use crate::live_tail::TAIL_FRAMES;
use crate::mount::mount;
use crate::openapi;

/// The default interval of keep-alive comments on an idle event stream.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The default time a request may take to be answered (event streams
/// excepted: they last as long as their client).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The default body limit of `POST /v1/sessions` (a system prompt and
/// policies).
pub const DEFAULT_CREATE_BODY_LIMIT: usize = 256 * 1024;

/// The default body limit of `POST .../messages` (text and references to
/// attachments; attachments themselves are uploaded elsewhere).
pub const DEFAULT_MESSAGE_BODY_LIMIT: usize = 1024 * 1024;

/// The body limit of `POST .../attachments` for an engine whose largest
/// upload is `max_upload_bytes`: such a file fits in base64 inside JSON
/// (4 bytes for every 3) as well as in a multipart body, with room for the
/// envelope. A larger file gets 413 from the route or from the engine.
pub fn attachment_body_limit_for(max_upload_bytes: usize) -> usize {
    const ENVELOPE: usize = 64 * 1024;
    max_upload_bytes
        .div_ceil(3)
        .saturating_mul(4)
        .saturating_add(ENVELOPE)
}

/// The body limit of the small requests (approve, cancel, retry).
pub const SMALL_BODY_LIMIT: usize = 16 * 1024;

/// The `/v1/sessions` routes and their settings.
///
/// ```
/// # use std::sync::Arc;
/// # use roundtable_providers::{Model, ScriptedProvider, OPENAI_COMPLETIONS};
/// # use roundtable_sessions::SessionEngine;
/// # use roundtable_thread_stream::MemoryStore;
/// use std::time::Duration;
/// use roundtable_server::SessionsApi;
///
/// # let engine = SessionEngine::builder(
/// #     Arc::new(MemoryStore::new()),
/// #     Arc::new(ScriptedProvider::new(Vec::<roundtable_providers::AssistantMessage>::new())),
/// #     Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""),
/// # ).build();
/// let routes: axum::Router = SessionsApi::new(engine)
///     .keep_alive(Duration::from_secs(5))
///     .router();
/// ```
#[derive(Debug, Clone)]
pub struct SessionsApi {
    engine: SessionEngine,
    keep_alive: Duration,
    request_timeout: Duration,
    create_body_limit: usize,
    message_body_limit: usize,
    attachment_body_limit: Option<usize>,
    workspace_root: Option<PathBuf>,
}

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct ApiState {
    pub(crate) engine: SessionEngine,
    pub(crate) keep_alive: Duration,
    pub(crate) workspace_root: Option<PathBuf>,
    /// The sessions' live tails, shared by their event streams.
    pub(crate) tails: Arc<tail::SessionTails>,
}

impl SessionsApi {
    /// The routes over `engine`, with the default settings.
    pub fn new(engine: SessionEngine) -> Self {
        Self {
            engine,
            keep_alive: DEFAULT_KEEP_ALIVE,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            create_body_limit: DEFAULT_CREATE_BODY_LIMIT,
            message_body_limit: DEFAULT_MESSAGE_BODY_LIMIT,
            attachment_body_limit: None,
            workspace_root: None,
        }
    }

    /// How often an idle event stream gets a keep-alive comment.
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
        self
    }

    /// How long a request may take to be answered.
    pub fn request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// The largest body `POST /v1/sessions` accepts.
    pub fn create_body_limit(mut self, bytes: usize) -> Self {
        self.create_body_limit = bytes;
        self
    }

    /// The largest body `POST .../messages` accepts.
    pub fn message_body_limit(mut self, bytes: usize) -> Self {
        self.message_body_limit = bytes;
        self
    }

    /// The largest body `POST .../attachments` accepts. By default it is
    /// sized from the engine's
    /// [`AttachmentLimits`](roundtable_sessions::AttachmentLimits) (see
    /// [`attachment_body_limit_for`]), so raising the engine's limit is
    /// enough.
    pub fn attachment_body_limit(mut self, bytes: usize) -> Self {
        self.attachment_body_limit = Some(bytes);
        self
    }

    /// Only workspaces inside `root` (after resolving links) may be used:
    /// for a server whose clients must not open any folder of the machine.
    pub fn workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace_root = Some(root.into());
        self
    }

    /// The routes, under `/v1/sessions`, ready to merge into a host's
    /// router (and to [`protect`](crate::Security::protect)).
    pub fn router(self) -> Router {
        self.api_router().into()
    }

    /// The routes with their part of the API's document.
    pub(crate) fn api_router(self) -> ApiRouter {
        let attachment_body_limit = self.attachment_body_limit.unwrap_or_else(|| {
            attachment_body_limit_for(self.engine.attachment_limits().max_upload_bytes)
        });
        let state = Arc::new(ApiState {
            engine: self.engine,
            keep_alive: self.keep_alive,
            workspace_root: self.workspace_root,
            tails: Arc::new(tail::SessionTails::new(TAIL_FRAMES)),
        });
        let routes = session_routes(ApiRouter::new(), self.create_body_limit);
        let routes = message_routes(routes, self.message_body_limit);
        let routes = file_routes(routes, attachment_body_limit);
        let routes = event_routes(routes);
        let routes = control_routes(routes);
        mount("/v1/sessions", routes, self.request_timeout, state)
    }
}

/// The routes of the sessions themselves: list, create, get, delete.
fn session_routes(
    routes: ApiRouter<Arc<ApiState>>,
    create_body_limit: usize,
) -> ApiRouter<Arc<ApiState>> {
    routes
        .api_route(
            "/",
            get_with(handlers::list_sessions, |op| {
                op.summary("The caller's sessions, most recent first")
            })
            .post_with(handlers::create_session, |op| {
                op.summary("Create a session")
                    .response::<201, Json<handlers::Created>>()
            })
            .layer(DefaultBodyLimit::max(create_body_limit)),
        )
        .api_route(
            "/{id}",
            get_with(handlers::get_session, |op| op.summary("A session")).delete_with(
                handlers::delete_session,
                |op| {
                    op.summary("Delete a session that runs nothing (409 while it does)")
                        .response::<204, ()>()
                },
            ),
        )
}

/// The route that posts a message.
fn message_routes(
    routes: ApiRouter<Arc<ApiState>>,
    message_body_limit: usize,
) -> ApiRouter<Arc<ApiState>> {
    routes.api_route(
        "/{id}/messages",
        post_with(handlers::post_message, |op| {
            let op = op
                .summary("Post a message (202: its turn runs or it waits)")
                .response::<202, Json<Submitted>>();
            openapi::header_parameter(
                op,
                IDEMPOTENCY_KEY.as_str(),
                "A retry with the same key and body is answered as the first; another body is 422.",
            )
        })
        .layer(DefaultBodyLimit::max(message_body_limit)),
    )
}

/// The file routes: upload and read attachments, read artifacts.
fn file_routes(
    routes: ApiRouter<Arc<ApiState>>,
    attachment_body_limit: usize,
) -> ApiRouter<Arc<ApiState>> {
    routes
        .api_route(
            "/{id}/attachments",
            post_with(handlers::upload_attachment, |op| {
                op.summary("Upload a file messages may refer to")
                    .response::<201, Json<AttachmentRef>>()
            })
            .layer(DefaultBodyLimit::max(attachment_body_limit)),
        )
        .api_route(
            "/{id}/attachments/{name}",
            get_with(files::get_attachment, |op| {
                openapi::binary(op.summary("An attachment"), "The attachment's bytes.")
            }),
        )
        .api_route(
            "/{id}/artifacts/{turn_id}/{*path}",
            get_with(files::get_artifact, |op| {
                openapi::binary(
                    op.summary("An artifact of a turn (a whole log, a patch)"),
                    "The artifact's bytes.",
                )
            }),
        )
}

/// The route of the session's event stream.
fn event_routes(routes: ApiRouter<Arc<ApiState>>) -> ApiRouter<Arc<ApiState>> {
    routes.api_route(
        "/{id}/events",
        get_with(sse::events, |op| {
            let op = openapi::streamed::<SessionEvent>(
                op.summary("The session's events, history then live"),
                "text/event-stream",
                "Server-sent events: each message's `id:` is the event's id and its `data:` one event.",
            );
            openapi::header_parameter(
                op,
                LAST_EVENT_ID.as_str(),
                "Resume after this event id (over the `last_event_id` query parameter).",
            )
        }),
    )
}

/// The routes that steer a turn: approve a call, cancel, retry.
fn control_routes(routes: ApiRouter<Arc<ApiState>>) -> ApiRouter<Arc<ApiState>> {
    let small = DefaultBodyLimit::max(SMALL_BODY_LIMIT);
    routes
        .api_route(
            "/{id}/approve",
            post_with(handlers::approve, |op| {
                op.summary("Decide about a gated call")
            })
            .layer(small),
        )
        .api_route(
            "/{id}/cancel",
            post_with(handlers::cancel, |op| {
                op.summary("Cancel the running turn")
                    .response::<202, Json<handlers::CancelAccepted>>()
            })
            .layer(small),
        )
        .api_route(
            "/{id}/turns/{turn_id}/retry",
            post_with(handlers::retry, |op| {
                op.summary("Run a failed turn again")
                    .response::<201, Json<handlers::Retried>>()
            })
            .layer(small),
        )
}

/// The `/v1/sessions` routes over `engine`, with the default settings.
pub fn sessions_router(engine: SessionEngine) -> Router {
    SessionsApi::new(engine).router()
}
