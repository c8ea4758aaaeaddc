//! `/api/chat`: the chat API of the spec, over a [`SessionEngine`]. A
//! prompt goes in, the answer streams back as NDJSON; the other routes
//! manage sessions and answer what a turn asks.
//!
//! | route | engine call |
//! | --- | --- |
//! | `POST /api/chat` | `get` or `create`, `subscribe`, `submit`, or with `mode: "harness"` the host's `WorkflowRunner` (NDJSON: `start`, `delta`, `thinking`, `tool`, `plan`, `state`, `queue`, `compaction`, `retry`, `done`, `error`) |
//! | `POST /api/chat/abort` | `cancel` (202) |
//! | `POST /api/chat/question` | `answer` (an `ask_user` call), `decide` (a gated call) or `submit` with a plan action (202) |
//! | `GET /api/chat/session?sessionId=` or `?sessionFile=` | `get` and `events`: the session and its messages |
//! | `POST /api/chat/resume` | the same, the session named in the body |
//! | `GET /api/chat/sessions` | `list`: each session's `sessionId`, `sessionFile`, `title`, `createdAt`, `modifiedAt`, `status`, `mode`, `running`, newest first |
//! | `POST /api/chat/new` | `create` (201), in the workspace the host set |
//! | `GET /api/chat/models` | `models`: the engine's own model and those it offers |
//! | `GET /api/chat/resources` | the skills of the host's skill folders, with diagnostics |
//! | `GET`, `PUT /api/chat/settings` | the caller's chat settings |
//! | `GET /api/chat/provenance?sessionId=[&runId=]` | `provenance` or `runs` |
//!
//! A session is named by its id (`sessionId`) or, on a store that keeps
//! threads in files, by the path of its thread file (`sessionFile`, which
//! the stream's `start` and `done` carry): see [`named`]. A prompt naming
//! a session the caller cannot continue (unknown, removed, another
//! user's: all alike) starts a new session in its place, and says so with
//! `sessionReset: true` on `start` and `done`; the other routes naming
//! such a session answer 404. The stream's first `start` carries the
//! agent setup's `diagnostics`, when there are any.
//!
//! The server keeps no session state: a session is the engine's, and a
//! stream is a view of its stored events.

mod catalog;
mod handlers;
mod harness;
mod named;
mod protocol;
mod request;
mod settings;
mod stream;
mod summary;
mod transcript;
mod view;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with};
use axum::extract::DefaultBodyLimit;
use axum::{Json, Router};
use roundtable_sessions::table::{FileTable, MemoryTable, RecordTable};
use roundtable_sessions::{Caller, SessionEngine, SessionInfo, SessionMode, WorkflowRunner};
use roundtable_skills::Workflow;
use serde_json::{Map, Value};

pub(crate) use protocol::NDJSON;
pub use request::StreamingBehavior;
pub use settings::ChatSettings;

use self::harness::HostWorkflow;
use self::protocol::ChatStreamEvent;
use self::request::ChatRequest;
use self::settings::SettingsStore;
use crate::api_error::{ApiError, ErrorCode};
use crate::mount::mount;
use crate::openapi;
use crate::sessions::{DEFAULT_MESSAGE_BODY_LIMIT, DEFAULT_REQUEST_TIMEOUT, SMALL_BODY_LIMIT};

/// The `/api/chat` routes and their settings.
///
/// ```
/// # use std::sync::Arc;
/// # use roundtable_providers::{Model, ScriptedProvider, OPENAI_COMPLETIONS};
/// # use roundtable_sessions::SessionEngine;
/// # use roundtable_thread_stream::MemoryStore;
/// use roundtable_server::{ChatApi, ChatSettings};
///
/// # let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
/// # let engine = SessionEngine::builder(
/// #     Arc::new(MemoryStore::new()),
/// #     Arc::new(ScriptedProvider::new(Vec::<roundtable_providers::AssistantMessage>::new())),
/// #     model,
/// # ).build();
/// let routes: axum::Router = ChatApi::new(engine)
///     .workspace("/srv/project")
///     .settings(ChatSettings { auto_verify: Some(false), ..ChatSettings::default() })
///     .router();
/// ```
#[derive(Debug, Clone)]
pub struct ChatApi {
    engine: SessionEngine,
    workflow: Option<Workflow>,
    workflow_agent_context: Option<PathBuf>,
    workflow_context: Map<String, Value>,
    workspace: Option<PathBuf>,
    skill_dirs: Vec<PathBuf>,
    settings: ChatSettings,
    settings_table: Option<Arc<dyn RecordTable>>,
    request_timeout: Duration,
    message_body_limit: usize,
}

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct ChatState {
    pub(crate) engine: SessionEngine,
    pub(crate) workflow: Option<HostWorkflow>,
    pub(crate) workspace: Option<PathBuf>,
    pub(crate) skill_dirs: Vec<PathBuf>,
    pub(crate) settings: SettingsStore,
}

impl ChatState {
    /// The runner of the host's workflow, for a `mode: "harness"`
    /// `request`: 422 when the host set none, or when the request asks
    /// what a workflow run does not take (a model, a plan action).
    pub(crate) fn workflow_for(&self, request: &ChatRequest) -> Result<&HostWorkflow, ApiError> {
        let Some(workflow) = &self.workflow else {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "mode: `harness` runs the host's workflow, and this server has none (the host sets it with ChatApi::workflow; the daemon with --workflow FILE)",
            ));
        };
        if request.model.is_some() {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "model: a workflow's phases run on the session's model; send no model with mode `harness`",
            ));
        }
        if request.plan_action.is_some() {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "planAction: a workflow run carries out no plan; send no planAction with mode `harness`",
            ));
        }
        Ok(workflow)
    }

    /// `session`'s thread file as the stream and the transcript give it:
    /// `None` on stores without files, and for a path that is not UTF-8
    /// (it could not be named back).
    pub(crate) fn session_file(&self, session: &str) -> Option<Arc<str>> {
        let file = self.engine.session_file(session)?;
        file.to_str().map(Arc::from)
    }

    /// A new session of `caller`'s in the chat workspace, in `mode` (or
    /// the settings' mode).
    pub(crate) async fn create(
        &self,
        caller: &Caller,
        mode: Option<SessionMode>,
        settings: &ChatSettings,
    ) -> Result<SessionInfo, ApiError> {
        let Some(workspace) = &self.workspace else {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "sessionId: this server has no workspace for new chat sessions; name an existing session",
            ));
        };
        let request = settings.new_session(workspace, mode);
        Ok(self.engine.create(caller, request).await?)
    }
}

impl ChatApi {
    /// The routes over `engine`, with the default settings: no workspace
    /// for new sessions (a request must name a session).
    pub fn new(engine: SessionEngine) -> Self {
        Self {
            engine,
            workflow: None,
            workflow_agent_context: None,
            workflow_context: Map::new(),
            workspace: None,
            skill_dirs: Vec::new(),
            settings: ChatSettings::default(),
            settings_table: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            message_body_limit: DEFAULT_MESSAGE_BODY_LIMIT,
        }
    }

    /// New chat sessions (a prompt that names no session,
    /// `POST /api/chat/new`) work in `dir`. Clients never choose a folder.
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// The workflow a `mode: "harness"` prompt runs on its session (see
    /// `roundtable_sessions::WorkflowRunner`), the message as the prompts'
    /// `input`. Without one, such a prompt is refused (422).
    pub fn workflow(mut self, workflow: Workflow) -> Self {
        self.workflow = Some(workflow);
        self
    }

    /// The `agent-context/` folder whose `*.md` files become the
    /// workspace's `AGENTS.md` before a session's first phase.
    pub fn workflow_agent_context(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workflow_agent_context = Some(dir.into());
        self
    }

    /// Values every workflow run's prompts see (`{{key}}` in a template,
    /// the `Context:` lines of a skill nudge), beside `input` (the message,
    /// which wins over an `input` here).
    pub fn workflow_context(mut self, context: Map<String, Value>) -> Self {
        self.workflow_context = context;
        self
    }

    /// A folder of skills `/api/chat/resources` lists (each `<name>/SKILL.md`),
    /// with what is wrong with them.
    pub fn skill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.skill_dirs.push(dir.into());
        self
    }

    /// The host's chat settings: what applies where a caller set nothing.
    pub fn settings(mut self, defaults: ChatSettings) -> Self {
        self.settings = defaults;
        self
    }

    /// Keeps callers' settings in `file` (a [`FileTable`]), so they
    /// outlive the process; without it, or a
    /// [`settings_table`](Self::settings_table), they are kept in memory.
    pub fn settings_file(self, file: impl Into<PathBuf>) -> Self {
        self.settings_table(Arc::new(FileTable::new(file)))
    }

    /// Keeps callers' settings in `table`, one record a caller: servers
    /// sharing a table (a `NatsKvTable`, a `PostgresTable`) share the
    /// settings, each request reading the caller's record.
    pub fn settings_table(mut self, table: Arc<dyn RecordTable>) -> Self {
        self.settings_table = Some(table);
        self
    }

    /// How long a request may take to be answered (a stream's handler
    /// answers once the stream is set up; the stream lasts as its turns).
    pub fn request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// The largest body `POST /api/chat` accepts.
    pub fn message_body_limit(mut self, bytes: usize) -> Self {
        self.message_body_limit = bytes;
        self
    }

    /// The routes, under `/api/chat`, ready to merge into a host's router
    /// (and to [`protect`](crate::Security::protect)).
    pub fn router(self) -> Router {
        self.api_router().into()
    }

    /// The routes with their part of the API's document.
    pub(crate) fn api_router(self) -> ApiRouter {
        let workflow = self.workflow.map(|workflow| {
            let runner = WorkflowRunner::new(self.engine.clone(), workflow);
            HostWorkflow {
                runner: match self.workflow_agent_context {
                    Some(dir) => runner.agent_context(dir),
                    None => runner,
                },
                context: self.workflow_context,
            }
        });
        let state = Arc::new(ChatState {
            engine: self.engine,
            workflow,
            workspace: self.workspace,
            skill_dirs: self.skill_dirs,
            settings: SettingsStore::new(
                self.settings,
                self.settings_table
                    .unwrap_or_else(|| Arc::new(MemoryTable::new())),
            ),
        });
        let routes = turn_routes(ApiRouter::new(), self.message_body_limit);
        let routes = session_routes(routes);
        let routes = setup_routes(routes);
        mount("/api/chat", routes, self.request_timeout, state)
    }
}

/// The routes of a turn: the prompt and its stream, abort, and the answer
/// to what the turn asks.
fn turn_routes(
    routes: ApiRouter<Arc<ChatState>>,
    message_body_limit: usize,
) -> ApiRouter<Arc<ChatState>> {
    routes
        .api_route(
            "/",
            post_with(stream::chat, |op| {
                openapi::streamed::<ChatStreamEvent>(
                    op.summary("A prompt in, the session's answer out"),
                    NDJSON,
                    "NDJSON: one chat event per line, as the session produces them.",
                )
            })
            .layer(DefaultBodyLimit::max(message_body_limit)),
        )
        .api_route(
            "/abort",
            post_with(handlers::abort, |op| {
                op.summary("Stop the running turn")
                    .response::<202, Json<handlers::AbortAccepted>>()
            })
            .layer(DefaultBodyLimit::max(SMALL_BODY_LIMIT)),
        )
        .api_route(
            "/question",
            post_with(handlers::question, |op| {
                op.summary("Answer a question, decide a gated call, or decide about the plan")
                    .response::<200, Json<handlers::Answered>>()
                    .response::<202, Json<handlers::PlanDecided>>()
            })
            .layer(DefaultBodyLimit::max(message_body_limit)),
        )
}

/// The session routes: one session and its messages, the list, a new one.
fn session_routes(routes: ApiRouter<Arc<ChatState>>) -> ApiRouter<Arc<ChatState>> {
    let small = DefaultBodyLimit::max(SMALL_BODY_LIMIT);
    routes
        .api_route(
            "/session",
            get_with(handlers::session, |op| {
                op.summary("A session and its messages")
            }),
        )
        .api_route(
            "/resume",
            post_with(handlers::resume, |op| {
                op.summary("A session and its messages, named in the body")
            })
            .layer(small),
        )
        .api_route(
            "/sessions",
            get_with(handlers::sessions, |op| {
                op.summary("The caller's sessions, newest first")
            }),
        )
        .api_route(
            "/new",
            post_with(handlers::new_session, |op| {
                op.summary("A new session in the server's workspace")
                    .response::<201, Json<handlers::NewSession>>()
            })
            .layer(small),
        )
}

/// The routes about the setup and its runs: models, skills, the caller's
/// settings, provenance.
fn setup_routes(routes: ApiRouter<Arc<ChatState>>) -> ApiRouter<Arc<ChatState>> {
    routes
        .api_route(
            "/models",
            get_with(handlers::models, |op| {
                op.summary("The models a session may run on")
            }),
        )
        .api_route(
            "/resources",
            get_with(handlers::resources, |op| {
                op.summary("The skills of the server's skill folders")
            }),
        )
        .api_route(
            "/settings",
            get_with(handlers::get_settings, |op| {
                op.summary("The caller's chat settings")
            })
            .put_with(handlers::put_settings, |op| {
                op.summary("Change the caller's chat settings (`null` removes one)")
            })
            .layer(DefaultBodyLimit::max(SMALL_BODY_LIMIT)),
        )
        .api_route(
            "/provenance",
            get_with(handlers::provenance, |op| {
                op.summary("What a run did, or every run of a session")
            }),
        )
}

/// The `/api/chat` routes over `engine`, with the default settings (no
/// workspace for new sessions: see [`ChatApi::workspace`]).
pub fn chat_router(engine: SessionEngine) -> Router {
    ChatApi::new(engine).router()
}
