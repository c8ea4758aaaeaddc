//! Test support for the HTTP layer: a real server on a free loopback port
//! over a JSONL store in a temp folder, a real HTTP client, and event
//! streams parsed as a browser parses them.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use roundtable_providers::{Provider, ScriptedProvider};
use roundtable_server::rooms::RoomsApi;
use roundtable_server::{
    AccessToken, ChatApi, ChatSettings, Security, ServeLimits, SessionsApi, TokenUsers, app_router,
    app_router_with_rooms, serve,
};
pub(crate) use roundtable_sessions::Caller;
use roundtable_sessions::{FolderBlobStore, SessionEngine, SessionEngineBuilder};
use roundtable_thread_stream::{JsonlStore, ThreadStore};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub(crate) use roundtable_test_support::scripted::{call, calls, model, text};
pub(crate) use roundtable_test_support::workspace::{
    SessionFolders, init_git_workspace, status_patch,
};

pub(crate) mod browser;
pub(crate) mod chat;
pub(crate) mod openapi;

/// The token of `alice`, the user of the tests.
pub(crate) const TOKEN: &str = "test-token-0123456789abcdef";

/// The token of `bob`, another user.
pub(crate) const BOB_TOKEN: &str = "bob-token-0123456789abcdef";

/// A temp folder holding a git workspace (`ws/`) and the server's data
/// (`data/`: the JSONL threads and each session's `session.json`).
pub(crate) struct Fixture {
    folders: SessionFolders,
}

impl std::ops::Deref for Fixture {
    type Target = SessionFolders;

    fn deref(&self) -> &SessionFolders {
        &self.folders
    }
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Self {
            folders: SessionFolders::new().unwrap(),
        }
    }

    /// The JSONL store of the data folder.
    pub(crate) async fn store(&self) -> Arc<dyn ThreadStore> {
        Arc::new(JsonlStore::open(self.data()).await.unwrap())
    }

    /// An engine over `store` answering with `provider`, snapshots and
    /// files (attachments, artifacts) in the data folder.
    pub(crate) fn engine(
        &self,
        store: Arc<dyn ThreadStore>,
        provider: Arc<dyn Provider>,
    ) -> SessionEngine {
        self.engine_builder(store, provider).build()
    }

    /// The builder of [`engine`](Self::engine), for tests that change it.
    pub(crate) fn engine_builder(
        &self,
        store: Arc<dyn ThreadStore>,
        provider: Arc<dyn Provider>,
    ) -> SessionEngineBuilder {
        SessionEngine::builder(store, provider, model())
            .snapshot_dir(self.data())
            .blob_store(Arc::new(FolderBlobStore::new(self.data())))
            .chunk_interval(Duration::from_millis(5))
    }

    /// A session body over the workspace, gating nothing, verifying
    /// nothing.
    pub(crate) fn open_session(&self) -> Value {
        json!({
            "workspace_path": self.workspace(),
            "approval_policy": {"require_for_kinds": [], "require_for_tools": []},
            "verify_policy": {"auto_verify": false},
        })
    }
}

/// How a test server is set up.
pub(crate) struct Options {
    pub keep_alive: Duration,
    pub request_timeout: Duration,
    pub allowed_origin: Option<&'static str>,
    /// The folder new chat sessions work in.
    pub chat_workspace: Option<PathBuf>,
    /// The host's chat settings.
    pub chat_settings: ChatSettings,
    /// Folders of skills `/api/chat/resources` lists.
    pub skill_dirs: Vec<PathBuf>,
    pub attachment_body_limit: Option<usize>,
    /// The workflow a `mode: "harness"` prompt runs.
    pub workflow: Option<roundtable_skills::Workflow>,
    /// The values its prompts see beside the message.
    pub workflow_context: serde_json::Map<String, Value>,
    /// The bounds of the connection loop.
    pub limits: ServeLimits,
    /// Rooms served beside the sessions, if any.
    pub rooms: Option<RoomsApi>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            keep_alive: Duration::from_secs(15),
            request_timeout: Duration::from_secs(30),
            allowed_origin: None,
            chat_workspace: None,
            chat_settings: ChatSettings::default(),
            skill_dirs: Vec::new(),
            attachment_body_limit: None,
            workflow: None,
            workflow_context: serde_json::Map::new(),
            limits: ServeLimits::default(),
            rooms: None,
        }
    }
}

/// A server on a free loopback port, serving `/v1/sessions`, `/api/chat`
/// and the web page behind the security layer.
pub(crate) struct TestServer {
    pub addr: SocketAddr,
    pub engine: SessionEngine,
    pub http: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub(crate) async fn start(engine: SessionEngine) -> Self {
        Self::start_with(engine, Options::default()).await
    }

    pub(crate) async fn start_with(engine: SessionEngine, options: Options) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let users = TokenUsers::new()
            .with(&AccessToken::new(TOKEN).unwrap(), "alice")
            .with(&AccessToken::new(BOB_TOKEN).unwrap(), "bob");
        let mut security = Security::new(addr, users);
        if let Some(origin) = options.allowed_origin {
            security = security.allow_origin(origin).unwrap();
        }
        let mut sessions = SessionsApi::new(engine.clone())
            .keep_alive(options.keep_alive)
            .request_timeout(options.request_timeout);
        if let Some(limit) = options.attachment_body_limit {
            sessions = sessions.attachment_body_limit(limit);
        }
        let mut chat = ChatApi::new(engine.clone())
            .settings(options.chat_settings)
            .request_timeout(options.request_timeout);
        if let Some(workspace) = options.chat_workspace {
            chat = chat.workspace(workspace);
        }
        for dir in options.skill_dirs {
            chat = chat.skill_dir(dir);
        }
        if let Some(workflow) = options.workflow {
            chat = chat
                .workflow(workflow)
                .workflow_context(options.workflow_context);
        }
        let app = match options.rooms {
            Some(rooms) => security.protect(app_router_with_rooms(sessions, chat, rooms)),
            None => security.protect(app_router(sessions, chat)),
        };
        let limits = options.limits;
        let task = tokio::spawn(serve(listener, app, limits, std::future::pending()));
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let server = Self {
            addr,
            engine,
            http,
            task,
        };
        let response = server
            .request(reqwest::Method::GET, "/openapi.json")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        openapi::keep(response.json().await.unwrap());
        server
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A request with the token.
    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(TOKEN)
    }

    /// `GET path` with the token: the status and the JSON body.
    pub(crate) async fn get(&self, path: &str) -> (StatusCode, Value) {
        send(self.request(reqwest::Method::GET, path)).await
    }

    /// `POST path` with the token and a JSON body.
    pub(crate) async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        send(self.request(reqwest::Method::POST, path).json(&body)).await
    }

    /// Creates a session; its id.
    pub(crate) async fn create(&self, body: Value) -> String {
        let (status, created) = self.post("/v1/sessions", body).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        created["session_id"].as_str().unwrap().to_string()
    }

    /// Posts a text message; the answer (`message_id`, `turn_id`).
    pub(crate) async fn say(&self, session: &str, text: &str) -> Value {
        let (status, sent) = self
            .post(
                &format!("/v1/sessions/{session}/messages"),
                json!({"role": "user", "parts": [{"type": "text", "text": text}]}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{sent}");
        sent
    }

    /// The session's event stream after `after` (all of it when `None`).
    pub(crate) async fn events(&self, session: &str, after: Option<&str>) -> Events {
        let mut request = self.request(
            reqwest::Method::GET,
            &format!("/v1/sessions/{session}/events"),
        );
        if let Some(after) = after {
            request = request.header("Last-Event-ID", after);
        }
        Events::open(request).await
    }

    /// Stops the server: no connection is accepted, open ones are closed.
    pub(crate) fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sends `request`: the status and the JSON body (`Null` when empty),
/// checked against the server's OpenAPI document.
pub(crate) async fn send(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let (client, request) = request.build_split();
    let request = request.unwrap();
    let method = request.method().to_string();
    let path = request.url().path().to_string();
    let response = client.execute(request).await.unwrap();
    let status = response.status();
    let bytes = response.bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{status}: not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        })
    };
    if !status.is_success() {
        assert_no_server_path(&body);
    }
    openapi::document().check_response(&method, &path, status.as_u16(), &body);
    (status, body)
}

/// Asserts that an error body names no path of the server's disk: every
/// fixture (data folder, workspace) is a temp folder, so no error body a
/// test reads may hold the temp folders' prefix.
pub(crate) fn assert_no_server_path(body: &Value) {
    let temp = std::env::temp_dir().join(".tmp");
    let temp = temp.to_string_lossy();
    let text = body.to_string();
    assert!(
        !text.contains(&*temp),
        "an error names a server path: {text}"
    );
}

/// Asserts an error answer: its status, and the JSON error body with its
/// code and a message.
pub(crate) fn assert_error(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    let (got, body) = answer;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

/// One SSE message as a browser's `EventSource` sees it.
#[derive(Debug, Clone)]
pub(crate) struct Message {
    /// `id:`
    pub id: String,
    /// `event:` (`message` when absent)
    pub event: String,
    /// `data:`, parsed.
    pub data: Value,
}

impl Message {
    pub(crate) fn kind(&self) -> &str {
        self.data["type"].as_str().unwrap_or("")
    }
}

type MessageStream = Pin<Box<dyn Stream<Item = Message> + Send>>;

/// An open event stream, parsed incrementally from the response's bytes.
pub(crate) struct Events {
    pub status: StatusCode,
    pub content_type: String,
    messages: MessageStream,
}

impl Events {
    pub(crate) async fn open(request: reqwest::RequestBuilder) -> Self {
        let (client, request) = request.build_split();
        let request = request.unwrap();
        let path = request.url().path().to_string();
        let response = client.execute(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        assert_eq!(status, StatusCode::OK, "{:?}", response.text().await);
        let messages = response
            .bytes_stream()
            .eventsource()
            .map(move |item| {
                let event = item.unwrap();
                let data = serde_json::from_str(&event.data).unwrap_or(Value::Null);
                if event.event == "message" {
                    assert_typed(&event.data);
                    openapi::document().check_item("GET", &path, "text/event-stream", &data);
                }
                Message {
                    data,
                    id: event.id,
                    event: event.event,
                }
            })
            .boxed();
        Self {
            status,
            content_type,
            messages,
        }
    }

    /// The next message. Fails the test after 20 s.
    pub(crate) async fn next(&mut self) -> Message {
        tokio::time::timeout(Duration::from_secs(20), self.messages.next())
            .await
            .expect("no event in 20 s")
            .expect("the event stream ended")
    }

    /// Reads until a message of type `kind`; returns all read.
    pub(crate) async fn until(&mut self, kind: &str) -> Vec<Message> {
        let mut seen = Vec::new();
        loop {
            let message = tokio::time::timeout(Duration::from_secs(20), self.messages.next())
                .await
                .unwrap_or_else(|_| {
                    let kinds: Vec<_> = seen
                        .iter()
                        .map(|m: &Message| m.kind().to_string())
                        .collect();
                    panic!("no {kind} in 20 s; saw {kinds:?}")
                })
                .expect("the event stream ended");
            let done = message.kind() == kind;
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// True when the stream ends (within 5 s) with no further message.
    pub(crate) async fn ended(&mut self) -> bool {
        let next = tokio::time::timeout(Duration::from_secs(5), self.messages.next()).await;
        matches!(next, Ok(None))
    }

    /// Reads `n` messages.
    pub(crate) async fn take(&mut self, n: usize) -> Vec<Message> {
        let mut seen = Vec::new();
        for _ in 0..n {
            seen.push(self.next().await);
        }
        seen
    }
}

/// Checks a session event's JSON against its typed definition: the
/// envelope and its payload (`EventData`, from which the events' JSON
/// Schema is derived) read back and written again give the same bytes, so
/// an event whose data the types do not describe fails the test.
pub(crate) fn assert_typed(raw: &str) {
    let event: roundtable_sessions::SessionEvent =
        serde_json::from_str(raw).unwrap_or_else(|e| panic!("{e}: {raw}"));
    assert_eq!(serde_json::to_string(&event).unwrap(), raw);
    let payload = event
        .payload()
        .unwrap_or_else(|e| panic!("untyped {:?} data ({e}): {raw}", event.kind));
    let wire = json!({"type": event.kind, "data": event.data});
    assert_eq!(
        serde_json::to_string(&payload).unwrap(),
        serde_json::to_string(&wire).unwrap(),
        "{raw}"
    );
}

pub(crate) fn kinds(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(Message::kind).collect()
}

/// Sends `request` as raw bytes and reads the answer until the server
/// closes the connection: for what an HTTP client library would not send.
pub(crate) async fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("no answer in 20 s")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// A scripted provider with no replies (for tests that run no turn).
pub(crate) fn silent() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(
        Vec::<roundtable_providers::ScriptStep>::new(),
    ))
}
