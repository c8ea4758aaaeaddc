//! The agentic-sessions daemon: `/v1/sessions` over HTTP with server-sent
//! events, `/api/chat` with NDJSON, and a chat page at `/`, on a thread
//! store in a data folder.
//!
//! ```text
//! cargo run --example daemon -- [--addr 127.0.0.1:8787] [--data ./data]
//!     [--nats nats://127.0.0.1:4222] [--allow-origin http://localhost:3000]
//!     [--allow-host devbox.lan] [--workspace-root DIR] [--chat-workspace DIR]
//!     [--mcp mcp.json] [--workflow review.yaml [--set key=value]...]
//! ```
//!
//! With `--mcp FILE` (and the `mcp` feature) every session's turns also get
//! the tools of the MCP servers in FILE, the `{"mcpServers": {...}}` file
//! other clients read (`examples/support/mcp.rs`, shared with the chat
//! example): each server's state is printed at start, failures with the
//! end of their stderr; a server that changes its tools gives the sessions
//! a `tools_changed` event at their next turn. Built without the feature,
//! `--mcp` says so and exits.
//!
//! With `--workflow FILE` (a workflow YAML such as
//! `examples/workflow/review.yaml`: skills in `skills/` next to it,
//! templates relative to it, `agent-context/*.md` there as the workspace's
//! `AGENTS.md`) a prompt with `mode: "harness"` runs that workflow on its
//! session, the message as the prompts' `input`, every phase streamed;
//! gates are approved through `/api/chat/question`. `--set key=value`
//! gives the prompts more values (the sample's templates use `repo` and
//! `file`: `--set repo=greet --set file=greet.sh`).
//!
//! The chat page and `/api/chat` start new sessions in `--chat-workspace`
//! (default: the current directory); the skills listed by
//! `/api/chat/resources` are those of its `.agents/skills`, and callers'
//! chat settings are kept in `<data>/chat-settings.json`.
//!
//! Sessions are threads of the JSONL store under `--data` (default
//! `./data`), in the layout of the sessions spec: `<data>/sessions/<session
//! id>/` holds the session's thread (`events.ndjson`, one entry a line), its
//! `session.json` snapshot and its files (`attachments/`, and
//! `artifacts/<turn id>/` for the outputs of its turns); with `--nats URL` (and the `nats` feature) the threads live in a
//! NATS JetStream store and the files in a JetStream object store
//! (`ROUNDTABLE_BLOBS`) instead, so several daemons serve the same
//! sessions.
//! At start the daemon closes the turns a previous run left open
//! (`recover`). With `ROUNDTABLE_DATABASE_URL` set (and `--features
//! postgres`) every session's thread is mirrored into PostgreSQL for
//! dashboards (`examples/support/mirror.rs`, shared with the chat example).
//!
//! Offline by default: a scripted model answers every message by saying it
//! is offline, so the API, the events and the storage all work without a
//! key. `OPENAI_API_KEY` (with `OPENAI_BASE_URL`, `OPENAI_MODEL`) or
//! `ANTHROPIC_API_KEY` selects a real provider (`examples/support/model.rs`,
//! shared with the chat example).
//!
//! Security is on: it binds loopback unless told otherwise, and refuses a
//! non-loopback address without an explicit token. Every request needs the
//! token: `ROUNDTABLE_TOKEN`, or one generated at start, printed once and
//! written to `<data>/token` (mode 0600). A browser signs in by opening the
//! printed `?token=` link once: it lands on the chat page.
//!
//! ```text
//! TOKEN=$(cat data/token)
//! curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
//!   -d "{\"workspace_path\": \"$PWD\"}" http://127.0.0.1:8787/v1/sessions
//! curl -N -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8787/v1/sessions/$SESSION/events
//! curl -s -H "Authorization: Bearer $TOKEN" -F file=@shot.png \
//!   http://127.0.0.1:8787/v1/sessions/$SESSION/attachments
//! curl -N -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
//!   -d '{"message": "What is in this folder?"}' http://127.0.0.1:8787/api/chat
//! curl -N -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
//!   -d '{"message": "the greeting is wrong", "mode": "harness"}' http://127.0.0.1:8787/api/chat
//! ```

// The shared `support/mirror.rs` stops the process on a bad setting.
#![allow(clippy::panic)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use roundtable::providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, HttpProvider, Model,
    OPENAI_COMPLETIONS, Provider, ScriptStep, StreamOptions, now_millis, script_events,
};
use roundtable::server::{
    AccessToken, ChatApi, HostToken, Security, ServeLimits, SessionsApi, TokenOrigin, app_router,
    check_bind, serve,
};
use roundtable::sessions::{BlobStore, FolderBlobStore, RecordTable, SessionEngine};
use roundtable::skills::{SkillLibrary, Workflow};
use roundtable::thread_stream::{JsonlLayout, JsonlOptions, JsonlStore, ThreadStore};

#[path = "support/mcp.rs"]
mod mcp;
#[path = "support/mirror.rs"]
mod mirror;
#[path = "support/model.rs"]
mod model;

/// The command line.
struct Options {
    addr: SocketAddr,
    data: PathBuf,
    nats: Option<String>,
    origins: Vec<String>,
    hosts: Vec<String>,
    workspace_root: Option<PathBuf>,
    chat_workspace: Option<PathBuf>,
    mcp: Option<PathBuf>,
    workflow: Option<PathBuf>,
    workflow_context: serde_json::Map<String, serde_json::Value>,
}

const USAGE: &str = "usage: cargo run --example daemon -- [--addr 127.0.0.1:8787] [--data ./data] \
[--nats URL] [--allow-origin ORIGIN]... [--allow-host NAME]... [--workspace-root DIR] \
[--chat-workspace DIR] [--mcp FILE] [--workflow FILE [--set key=value]...]";

fn usage(problem: &str) -> ! {
    eprintln!("{problem}\n{USAGE}");
    std::process::exit(2)
}

/// Stops the daemon on a failure that is not the command line's.
fn fail(problem: &str) -> ! {
    eprintln!("{problem}");
    std::process::exit(1)
}

fn options() -> Options {
    let mut options = Options {
        addr: SocketAddr::from(([127, 0, 0, 1], 8787)),
        data: PathBuf::from("data"),
        nats: None,
        origins: Vec::new(),
        hosts: Vec::new(),
        workspace_root: None,
        chat_workspace: None,
        mcp: None,
        workflow: None,
        workflow_context: serde_json::Map::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--addr" => {
                let text = value();
                options.addr = text
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("{text} is not an address (IP:port)")));
            }
            "--data" => options.data = value().into(),
            "--nats" => options.nats = Some(value()),
            "--allow-origin" => options.origins.push(value()),
            "--allow-host" => options.hosts.push(value()),
            "--workspace-root" => options.workspace_root = Some(value().into()),
            "--chat-workspace" => options.chat_workspace = Some(value().into()),
            "--mcp" => options.mcp = Some(value().into()),
            "--workflow" => options.workflow = Some(value().into()),
            "--set" => {
                let pair = value();
                let Some((key, val)) = pair.split_once('=') else {
                    usage(&format!("--set takes key=value, not {pair}"))
                };
                options
                    .workflow_context
                    .insert(key.into(), serde_json::Value::String(val.into()));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    options
}

/// The model that answers offline: it says so, and echoes the message.
struct Offline;

impl Provider for Offline {
    fn stream(&self, model: &Model, context: &Context, _options: &StreamOptions) -> EventStream {
        let said = context.last_user_text();
        let mut reply = AssistantMessage::for_model(model, now_millis());
        reply.content.push(AssistantBlock::text(format!(
            "(offline) This daemon has no model, so it cannot act on: {said}\n\
             Set OPENAI_API_KEY or ANTHROPIC_API_KEY and restart it for real answers."
        )));
        Box::pin(futures::stream::iter(script_events(
            ScriptStep::Reply(reply),
            16,
        )))
    }
}

/// The workflow of `--workflow FILE`, with the folder it reads its skills,
/// templates and agent context from; a file that cannot be used stops the
/// daemon.
fn load_workflow(file: &std::path::Path) -> (Workflow, PathBuf) {
    let base = file
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf();
    match Workflow::load(file, &SkillLibrary::new(&base)) {
        Ok(workflow) => (workflow, base),
        Err(e) => usage(&format!("--workflow {}: {e}", file.display())),
    }
}

/// Descriptors kept for the store's files, the listener and the refused
/// connections, out of the open-files limit; the rest go to connections.
#[cfg(unix)]
const RESERVED_FILES: u64 = 256;

/// The connection limits: the defaults, with as many connections as the
/// open-files limit (raised to its hard limit first) leaves room for.
fn serve_limits() -> ServeLimits {
    let defaults = ServeLimits::default();
    #[cfg(unix)]
    match roundtable::server::raise_open_files_limit() {
        Ok(files) => {
            let room = usize::try_from(files.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX);
            return ServeLimits {
                max_connections: room.max(defaults.max_connections),
                ..defaults
            };
        }
        Err(e) => eprintln!(
            "{e}; serving at most {} connections",
            defaults.max_connections
        ),
    }
    defaults
}

/// The name of a session's thread file in its folder.
const EVENTS_FILE: &str = "events.ndjson";

/// Where the sessions' folders are: `<data>/sessions/<id>/` holds a
/// session's `session.json`, its thread (`events.ndjson`, on the JSONL
/// store), `attachments/` and `artifacts/<turn id>/`.
fn sessions_folder(options: &Options) -> PathBuf {
    options.data.join("sessions")
}

/// The sessions' threads, where their files go, and where their index
/// goes when not in the sessions folder (over NATS: a KV bucket every
/// daemon shares).
async fn open_stores(
    options: &Options,
) -> (
    Arc<dyn ThreadStore>,
    Arc<dyn BlobStore>,
    Option<Arc<dyn RecordTable>>,
) {
    match &options.nats {
        None => {
            // The spec's layout: `sessions/<id>/events.ndjson` beside the
            // session's `session.json`, `attachments/` and `artifacts/`.
            let layout = JsonlOptions {
                layout: JsonlLayout::folder_per_thread(EVENTS_FILE),
                ..JsonlOptions::default()
            };
            let folder = sessions_folder(options);
            let threads = JsonlStore::open_with(&folder, layout)
                .await
                .unwrap_or_else(|e| {
                    fail(&format!(
                        "cannot open the sessions folder {}: {e}",
                        folder.display()
                    ))
                });
            let files = FolderBlobStore::new(&folder);
            (Arc::new(threads), Arc::new(files), None)
        }
        #[cfg(feature = "nats")]
        Some(url) => {
            use roundtable::sessions::{NatsBlobOptions, NatsBlobStore, NatsKvTable};
            use roundtable::thread_stream::{NatsOptions, NatsStore, connect_nats};
            let threads = NatsStore::connect(url, NatsOptions::default())
                .await
                .unwrap_or_else(|e| fail(&format!("cannot open the NATS store at {url}: {e}")));
            let files = NatsBlobStore::connect(url, NatsBlobOptions::default())
                .await
                .unwrap_or_else(|e| {
                    fail(&format!("cannot open the NATS object store at {url}: {e}"))
                });
            let nats = NatsOptions::default();
            let client = connect_nats(url, nats.connect_timeout, nats.request_timeout)
                .await
                .unwrap_or_else(|e| fail(&format!("cannot connect to NATS at {url}: {e}")));
            let index = NatsKvTable::open(client, "ROUNDTABLE_SESSIONS", nats.request_timeout)
                .await
                .unwrap_or_else(|e| fail(&format!("cannot open the session index at {url}: {e}")));
            (Arc::new(threads), Arc::new(files), Some(Arc::new(index)))
        }
        #[cfg(not(feature = "nats"))]
        Some(_) => {
            usage("--nats needs the nats feature (cargo run --features nats --example daemon)")
        }
    }
}

/// Ctrl-C, or (on Unix) the SIGTERM of a service manager.
async fn stop_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            },
            Err(e) => {
                eprintln!("SIGTERM is not watched ({e}): Ctrl-C stops the daemon");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[tokio::main]
async fn main() {
    let options = options();
    // The MCP servers first: a file that cannot be used stops the daemon
    // before it writes anything.
    let mcp_tools = match &options.mcp {
        Some(path) => Some(mcp::load(path).await.unwrap_or_else(|e| usage(&e))),
        None => None,
    };
    let workflow = options.workflow.as_deref().map(load_workflow);
    if let Err(e) = std::fs::create_dir_all(&options.data) {
        fail(&format!(
            "cannot make the data folder {}: {e}",
            options.data.display()
        ));
    }
    let token = AccessToken::from_env_or_generate(&options.data.join("token"))
        .unwrap_or_else(|e| usage(&e.to_string()));
    if let Err(e) = check_bind(options.addr, &token) {
        usage(&e.to_string());
    }

    let (store, files, index) = open_stores(&options).await;
    let mirror = mirror::start(&store);
    // With both API keys set, sessions may choose either model
    // (`/api/chat`'s `model`).
    let mut real = model::real_models("agent").into_iter();
    let (provider, model): (Arc<dyn Provider>, Model) = match real.next() {
        Some(model) => (Arc::new(HttpProvider::new()), model),
        None => (
            Arc::new(Offline),
            Model::new(OPENAI_COMPLETIONS, "offline", "offline", ""),
        ),
    };
    let mut engine = SessionEngine::builder(store.clone(), provider.clone(), model.clone())
        .snapshot_dir(sessions_folder(&options))
        .blob_store(files);
    if let Some(index) = index {
        engine = engine.index_table(index);
    }
    for other in real {
        engine = engine.offer_model(other, provider.clone());
    }
    if options.nats.is_some() {
        // Other daemons run turns on the same store: an open turn is only
        // theirs to close once it is surely dead. Session turns have no
        // wall clock (they wait on people), so no age proves that; an hour
        // outlives nearly every wait, and a crashed turn closes by then.
        engine = engine.interrupt_open_turns_after(Duration::from_secs(60 * 60));
    }
    if let Some(source) = mcp_tools {
        engine = engine
            .host_tool_source(source)
            .unwrap_or_else(|e| usage(&e.to_string()));
    }
    let engine = engine.build();
    let recovered = engine
        .recover()
        .await
        .unwrap_or_else(|e| fail(&format!("cannot recover the sessions: {e}")));
    if !recovered.touched.is_empty() {
        println!(
            "recovered {} session(s) a previous run left open",
            recovered.touched.len()
        );
    }
    for session in &recovered.unreadable {
        eprintln!(
            "session {} is not served: {} (its routes answer session_unreadable)",
            session.id, session.reason
        );
    }

    let chat_workspace = match &options.chat_workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .unwrap_or_else(|e| fail(&format!("cannot read the current folder: {e}"))),
    };
    let chat_workspace = chat_workspace.canonicalize().unwrap_or_else(|e| {
        usage(&format!(
            "the chat workspace {} cannot be opened: {e}",
            chat_workspace.display()
        ))
    });
    let mut chat = ChatApi::new(engine.clone())
        .workspace(&chat_workspace)
        .skill_dir(chat_workspace.join(".agents").join("skills"))
        .settings_file(options.data.join("chat-settings.json"));
    if let Some((workflow, base)) = workflow {
        println!(
            "mode \"harness\" runs workflow {} ({} phases)",
            workflow.name,
            workflow.phases.len()
        );
        chat = chat
            .workflow(workflow)
            .workflow_context(options.workflow_context.clone());
        let agent_context = base.join("agent-context");
        if agent_context.is_dir() {
            chat = chat.workflow_agent_context(agent_context);
        }
    }
    let mut api = SessionsApi::new(engine);
    if let Some(root) = &options.workspace_root {
        api = api.workspace_root(root);
    }
    let mut security = Security::new(options.addr, HostToken::new(token.clone()));
    for host in &options.hosts {
        security = security.allow_host(host);
    }
    for origin in &options.origins {
        security = security
            .allow_origin(origin)
            .unwrap_or_else(|e| usage(&e.to_string()));
    }
    let app = security.protect(app_router(api, chat));
    let listener = match tokio::net::TcpListener::bind(options.addr).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot listen on {}: {e}", options.addr);
            std::process::exit(1)
        }
    };

    let store_name = match &options.nats {
        Some(url) => format!("NATS at {url}, files in its object store"),
        None => format!("sessions in {}", sessions_folder(&options).display()),
    };
    println!(
        "roundtable daemon on http://{} (store: {store_name}; model: {}/{}; chat sessions in {})",
        options.addr,
        model.provider,
        model.id,
        chat_workspace.display()
    );
    match token.origin() {
        TokenOrigin::Generated => {
            println!(
                "token: {} (also in {}, readable by you only)",
                token.secret(),
                options.data.join("token").display()
            );
            println!(
                "open the chat page: http://{}/?token={}",
                options.addr,
                token.secret()
            );
        }
        TokenOrigin::Explicit => println!(
            "token: the one in ROUNDTABLE_TOKEN; open the chat page: http://{}/?token=$ROUNDTABLE_TOKEN",
            options.addr
        ),
    }

    // Idle and half-sent connections are closed, connections beyond the
    // limit refused; on a stop, answers in progress get a few seconds.
    serve(listener, app, serve_limits(), async {
        stop_requested().await;
        println!("stopping");
    })
    .await;
    // Running turns stop with the process; the next start closes them as
    // interrupted. What the store holds is flushed first, and mirrored.
    mirror::finish(mirror, &*store).await;
    if let Err(e) = store.close().await {
        fail(&format!("closing the store failed: {e}"));
    }
}
