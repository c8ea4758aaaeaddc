//! `roundtable serve`: everything is checked and opened before the first
//! byte is written, then the routers are served until SIGTERM or Ctrl-C,
//! when running turns get the configured grace to finish and the rest are
//! handed over: their leases lapse at once, so another daemon on the same
//! store (or this one's next start) carries them on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use roundtable_chat_runner::TurnLoop;
use roundtable_chat_runner::lifecycle::TurnLeases;
use roundtable_dispatch::{Participant, Policy};
use roundtable_server::rooms::{RoomApprovals, RoomsApi};
use roundtable_server::token::TokenOrigin;
use roundtable_server::{
    AccessToken, ChatApi, Security, ServeLimits, SessionsApi, app_router_with_rooms, check_bind,
    serve,
};
use roundtable_sessions::{
    AttachmentLimits, BlobStore, FolderBlobStore, RecordTable, SessionEngine,
    default_command_limits, default_turn_limits,
};
use roundtable_skills::{SkillLibrary, Workflow};
use roundtable_thread_stream::lease::{Leases, MemoryLeases};
use roundtable_thread_stream::{JsonlLayout, JsonlOptions, JsonlStore, ThreadStore};
use roundtable_tools::ToolSource;

use crate::config::Config;
use crate::models::{self, Offered};
use crate::observe;
use crate::state::{self, State};
use crate::users::TokenAuth;
use crate::{Failure, bots, demo};

/// The name of a session's thread file in its folder.
const EVENTS_FILE: &str = "events.ndjson";

/// Descriptors kept for the store's files and the listener, out of the
/// open-files limit; the rest go to connections.
#[cfg(unix)]
const RESERVED_FILES: u64 = 256;

/// Serves until a stop is asked for.
pub(crate) async fn run(
    config: Config,
    values: Vec<(String, String)>,
    demo: bool,
) -> Result<(), Failure> {
    let usage = |e: String| Failure::Usage(e);
    observe::init_logs(&config.log).map_err(usage)?;
    let metrics = observe::init_metrics().map_err(Failure::Run)?;
    // What can be refused is refused before anything is written.
    let mut offered = models::offered(&config.models).map_err(usage)?;
    if offered.is_empty() {
        offered.push(models::offline());
    }
    let approvals = RoomApprovals::new();
    let (bots, policy) = room_bots(&config, demo, &offered, &approvals)?;
    let workflow = config.workflow.as_deref().map(load_workflow).transpose()?;
    let chat_workspace = chat_workspace(&config)?;
    let explicit = std::env::var(roundtable_server::token::TOKEN_ENV).ok();
    check_admin_token(&config, explicit.as_deref())?;
    // The origins are checked now, with no token yet.
    security(&config, no_one)?;
    let mcp_tools = match &config.mcp {
        Some(path) => Some(load_mcp(path).await?),
        None => None,
    };

    std::fs::create_dir_all(&config.data).map_err(|e| {
        Failure::Run(format!(
            "cannot make the data folder {}: {e}",
            config.data.display()
        ))
    })?;
    let admin = AccessToken::explicit_or_generate(explicit.as_deref(), &config.data.join("token"))
        .map_err(|e| Failure::Run(format!("cannot write the admin token: {e}")))?;
    let stores = open_stores(&config).await?;
    let auth = TokenAuth::open(admin.clone(), stores.state.users.clone())
        .await
        .map_err(|e| Failure::Run(e.to_string()))?;
    let store = stores.threads.clone();
    let model = roundtable_sessions::model_key(&offered[0].model);
    let engine = build_engine(&config, &stores, offered, mcp_tools)?;
    recover(&engine).await?;
    tokio::spawn(engine.take_over_turns());
    if config.limits.retention.is_some() {
        tokio::spawn(sweep_idle_sessions(engine.clone()));
    }

    let rooms = open_rooms(&config, &stores, (bots, approvals), policy).await?;
    let mut app = app_router_with_rooms(
        sessions_api(&config, &engine),
        chat_api(&config, &engine, chat_workspace, workflow, values)
            .settings_table(stores.state.settings.clone()),
        rooms.clone(),
    );
    if config.metrics_addr.is_none() {
        app = app.merge(observe::admin_metrics_router(metrics.clone()));
    }
    let app = Router::new()
        .merge(observe::health_router(store.clone()))
        .merge(security(&config, auth)?.protect(app))
        .layer(axum::middleware::from_fn(observe::log_request));
    if let Some(addr) = config.metrics_addr {
        spawn_metrics_listener(addr, metrics).await?;
    }
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| Failure::Run(format!("cannot listen on {}: {e}", config.addr)))?;
    announce(&config, stores.kind, &model, &admin, demo);
    serve_until_stopped(listener, app, &config, &engine, &rooms).await;
    store
        .close()
        .await
        .map_err(|e| Failure::Run(format!("closing the store failed: {e}")))
}

/// Refuses an invalid `ROUNDTABLE_TOKEN`, one too weak for the address,
/// and an address beyond loopback without one.
fn check_admin_token(config: &Config, explicit: Option<&str>) -> Result<(), Failure> {
    let usage = |e: String| Failure::Usage(e);
    if let Some(token) = explicit.filter(|t| !t.is_empty()) {
        let token = AccessToken::new(token).map_err(|e| usage(e.to_string()))?;
        check_bind(config.addr, &token).map_err(|e| usage(e.to_string()))?;
    } else if !config.addr.ip().is_loopback() {
        return Err(usage(format!(
            "{} is not a loopback address: set ROUNDTABLE_TOKEN to serve it",
            config.addr
        )));
    }
    Ok(())
}

/// The bots rooms may hold and their dispatch policy: the configured
/// `[[bots]]`, or the scripted ones of `--demo`.
fn room_bots(
    config: &Config,
    demo: bool,
    offered: &[Offered],
    approvals: &RoomApprovals,
) -> Result<(Vec<(Participant, TurnLoop)>, Policy), Failure> {
    if demo {
        return Ok((demo::bots(), demo::policy()));
    }
    let max_rounds = config.limits.max_rounds;
    let bots =
        bots::catalogue(&config.bots, offered, max_rounds, approvals).map_err(Failure::Usage)?;
    Ok((bots, Policy::default()))
}

/// The rooms, in the sessions' store (their threads told apart by their
/// `room-` prefix): over NATS or PostgreSQL every daemon on the store
/// serves every room, and each wake is answered by one of them.
async fn open_rooms(
    config: &Config,
    stores: &Stores,
    (bots, approvals): (Vec<(Participant, TurnLoop)>, RoomApprovals),
    policy: Policy,
) -> Result<RoomsApi, Failure> {
    let limits = &config.limits;
    let leases =
        TurnLeases::new(stores.leases.clone()).timing(limits.turn_lease, limits.turn_lease_renew);
    let mut rooms = RoomsApi::builder(stores.threads.clone())
        .approvals(approvals)
        .policy(policy)
        .leases(leases)
        .message_body_limit(limits.message_body_bytes.min(ROOM_MESSAGE_BYTES));
    for (bot, turns) in bots {
        rooms = rooms.bot(bot, turns);
    }
    rooms
        .open()
        .await
        .map_err(|e| Failure::Usage(e.to_string()))
}

/// The largest body of a room message: its text is capped far below.
const ROOM_MESSAGE_BYTES: usize = 64 * 1024;

/// The sessions' threads, where their files go, their index when it is
/// shared, and the daemon's state (over NATS: KV buckets; over PostgreSQL:
/// tables; every daemon on the same store reads them).
async fn open_stores(config: &Config) -> Result<Stores, Failure> {
    match (&config.nats, &config.postgres) {
        (None, None) => open_folder(&config.data).await,
        (Some(url), None) => open_nats(url).await,
        (None, Some(url)) => open_postgres(url).await,
        (Some(_), Some(_)) => Err(Failure::Usage(
            "nats and postgres both name where the sessions are kept: set only one".into(),
        )),
    }
}

/// The JSONL store in the sessions folder of `data`, the files and index
/// beside it, the state in `data`.
async fn open_folder(data: &Path) -> Result<Stores, Failure> {
    let sessions = &data.join("sessions");
    let state = state::in_folder(data).await.map_err(Failure::Run)?;
    let layout = JsonlOptions {
        layout: JsonlLayout::folder_per_thread(EVENTS_FILE),
        ..JsonlOptions::default()
    };
    let threads = JsonlStore::open_with(sessions, layout).await.map_err(|e| {
        Failure::Run(format!(
            "cannot open the sessions folder {}: {e}",
            sessions.display()
        ))
    })?;
    Ok(Stores {
        kind: StoreKind::Folder,
        threads: Arc::new(threads),
        files: Arc::new(FolderBlobStore::new(sessions)),
        index: None,
        state,
        // One daemon owns the folder: its leases live in it.
        leases: Arc::new(MemoryLeases::new()),
    })
}

/// The NATS JetStream store, its object store and the index's KV bucket.
#[cfg(feature = "nats")]
async fn open_nats(url: &str) -> Result<Stores, Failure> {
    use roundtable_sessions::blob::{NatsBlobOptions, NatsBlobStore};
    use roundtable_sessions::table::NatsKvTable;
    use roundtable_thread_stream::lease::{NatsLeaseOptions, NatsLeases};
    use roundtable_thread_stream::{NatsOptions, NatsStore, connect_nats};
    let failed = |e: String| Failure::Run(format!("cannot open the NATS store: {e}"));
    let options = NatsOptions::default();
    let threads = NatsStore::connect(url, options.clone())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let files = NatsBlobStore::connect(url, NatsBlobOptions::default())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let client = connect_nats(url, options.connect_timeout, options.request_timeout)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let leases = NatsLeases::open(client.clone(), &NatsLeaseOptions::default())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let index = NatsKvTable::open(
        client.clone(),
        SESSION_INDEX_BUCKET,
        options.request_timeout,
    )
    .await
    .map_err(|e| failed(e.to_string()))?;
    let state = state::over_nats(client, options.request_timeout)
        .await
        .map_err(failed)?;
    Ok(Stores {
        kind: StoreKind::Nats,
        threads: Arc::new(threads),
        files: Arc::new(files),
        index: Some(Arc::new(index)),
        state,
        leases: Arc::new(leases),
    })
}

#[cfg(not(feature = "nats"))]
async fn open_nats(_url: &str) -> Result<Stores, Failure> {
    Err(Failure::Usage(
        "nats: this binary was built without the nats feature".into(),
    ))
}

/// The PostgreSQL store, with the files and the index in tables of the
/// same database and schema. Errors name the server, never the password.
#[cfg(feature = "postgres")]
async fn open_postgres(url: &str) -> Result<Stores, Failure> {
    use roundtable_sessions::blob::PostgresBlobStore;
    use roundtable_sessions::table::PostgresTable;
    use roundtable_thread_stream::{PostgresOptions, PostgresStore};
    let failed = |e: String| Failure::Run(format!("cannot open the PostgreSQL store: {e}"));
    let options = PostgresOptions::default();
    let threads = PostgresStore::connect(url, options.clone())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let files = PostgresBlobStore::connect(url, options.clone())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let index = PostgresTable::connect(url, options, SESSION_INDEX_TABLE)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let state = state::over_postgres(url).await.map_err(failed)?;
    Ok(Stores {
        kind: StoreKind::Postgres,
        leases: Arc::new(threads.leases()),
        threads: Arc::new(threads),
        files: Arc::new(files),
        index: Some(Arc::new(index)),
        state,
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_url: &str) -> Result<Stores, Failure> {
    Err(Failure::Usage(
        "postgres: this binary was built without the postgres feature".into(),
    ))
}

/// Where a daemon keeps its sessions.
struct Stores {
    kind: StoreKind,
    threads: Arc<dyn ThreadStore>,
    files: Arc<dyn BlobStore>,
    index: Option<Arc<dyn RecordTable>>,
    /// Chat settings and users, beside the threads.
    state: State,
    /// What running turns are held by, so that another daemon carries on
    /// the turns of one that died.
    leases: Arc<dyn Leases>,
}

/// The kinds of store a daemon keeps its sessions in (a build without a
/// store's feature never makes its kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(all(feature = "nats", feature = "postgres")), allow(dead_code))]
enum StoreKind {
    /// The JSONL store in the data folder: this daemon's alone.
    Folder,
    /// NATS JetStream, shared by every daemon on it.
    Nats,
    /// A PostgreSQL database, shared by every daemon on it.
    Postgres,
}

impl StoreKind {
    /// Its name in the logs.
    fn name(self) -> &'static str {
        match self {
            StoreKind::Folder => "folder",
            StoreKind::Nats => "nats",
            StoreKind::Postgres => "postgres",
        }
    }
}

/// The KV bucket of the session index that daemons over one NATS share.
#[cfg(feature = "nats")]
const SESSION_INDEX_BUCKET: &str = "ROUNDTABLE_SESSIONS";

/// The record table of the session index that daemons over one PostgreSQL
/// database share.
#[cfg(feature = "postgres")]
const SESSION_INDEX_TABLE: &str = "sessions";

fn build_engine(
    config: &Config,
    stores: &Stores,
    offered: Vec<Offered>,
    mcp_tools: Option<Arc<dyn ToolSource>>,
) -> Result<SessionEngine, Failure> {
    let limits = &config.limits;
    let mut offered = offered.into_iter();
    let Some(first) = offered.next() else {
        return Err(Failure::Usage("no model".into()));
    };
    let turn = default_turn_limits().with_max_rounds(limits.max_rounds);
    let commands = roundtable_tools::workspace::CommandLimits {
        default_timeout: limits.command_timeout,
        max_timeout: limits.command_timeout_max,
        ..default_command_limits()
    };
    let mut engine = SessionEngine::builder(stores.threads.clone(), first.provider, first.model)
        .snapshot_dir(config.data.join("sessions"))
        .blob_store(stores.files.clone())
        .limits(turn)
        .command_limits(commands)
        .stall_timeout(Some(limits.stall_timeout))
        .verify_attempts(limits.verify_attempts)
        .runtime_ttl(limits.runtime_ttl)
        .attachment_limits(AttachmentLimits {
            max_upload_bytes: limits.upload_bytes,
            ..AttachmentLimits::default()
        });
    for other in offered {
        engine = engine.offer_model(other.model, other.provider);
    }
    if let Some(index) = &stores.index {
        engine = engine.index_table(index.clone());
    }
    if let Some(idle) = limits.retention {
        engine = engine.retention(idle);
    }
    engine = engine
        .leases(stores.leases.clone())
        .lease_timing(limits.turn_lease, limits.turn_lease_renew);
    if let Some(source) = mcp_tools {
        engine = engine
            .host_tool_source(source)
            .map_err(|e| Failure::Usage(e.to_string()))?;
    }
    Ok(engine.build())
}

/// Closes the turns a previous run left open, and says what it found.
async fn recover(engine: &SessionEngine) -> Result<(), Failure> {
    let recovered = engine
        .recover()
        .await
        .map_err(|e| Failure::Run(format!("cannot recover the sessions: {e}")))?;
    if !recovered.touched.is_empty() {
        tracing::info!(
            sessions = recovered.touched.len(),
            "recovered sessions a previous run left open"
        );
    }
    for session in &recovered.unreadable {
        tracing::error!(
            session = %session.id,
            reason = %session.reason,
            "session not served (its routes answer session_unreadable)"
        );
    }
    Ok(())
}

fn chat_api(
    config: &Config,
    engine: &SessionEngine,
    workspace: PathBuf,
    workflow: Option<(Workflow, PathBuf)>,
    values: Vec<(String, String)>,
) -> ChatApi {
    let mut chat = ChatApi::new(engine.clone())
        .workspace(&workspace)
        .skill_dir(workspace.join(".agents").join("skills"))
        .message_body_limit(config.limits.message_body_bytes);
    if let Some((workflow, base)) = workflow {
        let values = values
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        chat = chat.workflow(workflow).workflow_context(values);
        let agent_context = base.join("agent-context");
        if agent_context.is_dir() {
            chat = chat.workflow_agent_context(agent_context);
        }
    }
    chat
}

fn sessions_api(config: &Config, engine: &SessionEngine) -> SessionsApi {
    let limits = &config.limits;
    let api = SessionsApi::new(engine.clone())
        .message_body_limit(limits.message_body_bytes)
        .attachment_body_limit(roundtable_server::sessions::attachment_body_limit_for(
            limits.upload_bytes,
        ));
    match &config.workspace_root {
        Some(root) => api.workspace_root(root),
        None => api,
    }
}

/// An authenticator that knows nobody.
fn no_one(_token: &str) -> Option<roundtable_sessions::Caller> {
    None
}

/// The Host, Origin and token checks of the configuration.
fn security(
    config: &Config,
    auth: impl roundtable_server::Authenticator,
) -> Result<Security, Failure> {
    let mut security = Security::new(config.addr, auth);
    for host in &config.allowed_hosts {
        security = security.allow_host(host);
    }
    for origin in &config.allowed_origins {
        security = security
            .allow_origin(origin)
            .map_err(|e| Failure::Usage(e.to_string()))?;
    }
    Ok(security)
}

/// The workflow of `file`, with the folder it reads its skills, templates
/// and agent context from.
fn load_workflow(file: &Path) -> Result<(Workflow, PathBuf), Failure> {
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    Workflow::load(file, &SkillLibrary::new(&base))
        .map(|workflow| (workflow, base))
        .map_err(|e| Failure::Usage(format!("workflow {}: {e}", file.display())))
}

fn chat_workspace(config: &Config) -> Result<PathBuf, Failure> {
    let dir = match &config.chat_workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| Failure::Run(format!("cannot read the current folder: {e}")))?,
    };
    dir.canonicalize().map_err(|e| {
        Failure::Usage(format!(
            "the chat workspace {} cannot be opened: {e}",
            dir.display()
        ))
    })
}

#[cfg(feature = "mcp")]
async fn load_mcp(path: &Path) -> Result<Arc<dyn ToolSource>, Failure> {
    use roundtable_tools::mcp::{McpServerState, McpToolset};
    let toolset = McpToolset::load(path)
        .await
        .map_err(|e| Failure::Usage(format!("mcp {}: {e}", path.display())))?;
    for server in toolset.servers() {
        match &server.state {
            McpServerState::Running => {
                tracing::info!(server = %server.name, tools = server.tools, "mcp server running");
            }
            McpServerState::Failed(failure) => {
                tracing::error!(server = %server.name, %failure, "mcp server failed");
            }
            McpServerState::Disabled => {
                tracing::info!(server = %server.name, "mcp server disabled")
            }
        }
    }
    Ok(Arc::new(toolset))
}

#[cfg(not(feature = "mcp"))]
async fn load_mcp(_path: &Path) -> Result<Arc<dyn ToolSource>, Failure> {
    Err(Failure::Usage(
        "mcp: this binary was built without the mcp feature".into(),
    ))
}

async fn spawn_metrics_listener(
    addr: std::net::SocketAddr,
    handle: metrics_exporter_prometheus::PrometheusHandle,
) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::Run(format!("cannot listen on {addr} for metrics: {e}")))?;
    let router = observe::open_metrics_router(handle);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, "the metrics listener stopped");
        }
    });
    Ok(())
}

/// Logs where the daemon listens; prints the sign-in link only to a
/// terminal, so the admin token reaches no log collector.
fn announce(config: &Config, store: StoreKind, model: &str, admin: &AccessToken, demo: bool) {
    if demo {
        tracing::info!(
            "demo bots: archivist (mention), chatty (always), rusty (ambient: rust, cargo)"
        );
    }
    tracing::info!(
        addr = %config.addr,
        store = store.name(),
        data = %config.data.display(),
        model,
        "roundtable serving"
    );
    match admin.origin() {
        TokenOrigin::Generated => {
            tracing::info!(
                file = %config.data.join("token").display(),
                "admin token generated"
            );
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                println!(
                    "open the chat page: http://{}/?token={}",
                    config.addr,
                    admin.secret()
                );
            }
        }
        TokenOrigin::Explicit => tracing::info!("admin token from ROUNDTABLE_TOKEN"),
    }
}

/// The connection limits of the configuration, with as many connections
/// as the open-files limit (raised to its hard limit first) leaves room
/// for.
fn serve_limits(config: &Config) -> ServeLimits {
    let limits = &config.limits;
    #[allow(unused_mut)]
    let mut max_connections = limits.max_connections;
    #[cfg(unix)]
    match roundtable_server::raise_open_files_limit() {
        Ok(files) => {
            let room = usize::try_from(files.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX);
            max_connections = max_connections.min(room.max(1));
        }
        Err(error) => tracing::warn!(%error, "open-files limit not raised"),
    }
    ServeLimits {
        max_connections,
        header_read_timeout: limits.header_read_timeout,
        write_stall_timeout: limits.write_stall_timeout,
        // The engine's grace comes first; the server then only waits for
        // streams to deliver their last events.
        shutdown_grace: limits.shutdown_grace + Duration::from_secs(5),
        ..ServeLimits::default()
    }
}

/// How long streams get to send the events of the turns' ends once the
/// engine stopped.
const STREAM_FLUSH: Duration = Duration::from_millis(500);

/// Serves until SIGTERM or Ctrl-C; then stops accepting, gives running
/// turns the grace, interrupts the rest and closes the connections.
async fn serve_until_stopped(
    listener: tokio::net::TcpListener,
    app: Router,
    config: &Config,
    engine: &SessionEngine,
    rooms: &RoomsApi,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = serve_limits(config);
    let mut server = tokio::spawn(serve(listener, app, limits, async {
        let _ = stopped.await;
    }));
    tokio::select! {
        _ = stop_requested() => {}
        _ = &mut server => return,
    }
    tracing::info!(grace = ?config.limits.shutdown_grace, "stopping");
    let _ = stop.send(());
    let stopped = engine.shutdown(config.limits.shutdown_grace).await;
    for session in &stopped.interrupted {
        tracing::warn!(session = %session, "turn handed over by the stop");
    }
    rooms.shutdown().await;
    if tokio::time::timeout(STREAM_FLUSH, &mut server)
        .await
        .is_err()
    {
        server.abort();
    }
}

/// Deletes the sessions idle past the retention, at start and then hourly.
async fn sweep_idle_sessions(engine: SessionEngine) {
    let mut every = tokio::time::interval(RETENTION_SWEEP);
    loop {
        every.tick().await;
        match engine.delete_idle_sessions().await {
            Ok(deleted) if !deleted.is_empty() => {
                tracing::info!(count = deleted.len(), "idle sessions deleted");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "idle sessions not deleted"),
        }
    }
}

/// How often idle sessions are looked for when a retention is set.
const RETENTION_SWEEP: Duration = Duration::from_secs(60 * 60);

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
            Err(error) => {
                tracing::warn!(%error, "SIGTERM is not watched: Ctrl-C stops the daemon");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
