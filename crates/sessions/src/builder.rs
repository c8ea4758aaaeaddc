//! Configuring a [`SessionEngine`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use roundtable_chat_runner::compaction::CompactionConfig;
use roundtable_chat_runner::compaction::Compactor;
use roundtable_chat_runner::{DEFAULT_CHUNK_INTERVAL, Limits};
use roundtable_providers::{Model, Provider, StreamOptions};
use roundtable_thread_stream::ThreadStore;
use roundtable_thread_stream::lease::{DEFAULT_LEASE_TTL, DEFAULT_RENEW_EVERY, Leases};
use roundtable_tools::workspace::CommandLimits;
use roundtable_tools::{ToolRegistry, ToolSource};

use crate::attachments::AttachmentLimits;
use crate::blob::BlobStore;
use crate::cache::{DEFAULT_MAX_RUNTIMES, DEFAULT_RUNTIME_TTL, RuntimeCache};
use crate::caller::UnownedSessions;
use crate::core::EngineCore;
use crate::drivers::Drivers;
use crate::engine::SessionEngine;
use crate::error::SessionError;
use crate::host_tools::HostToolSources;
use crate::index::{FileTable, INDEX_FILE, MemoryTable, RecordTable, SessionIndex};
use crate::limits::{DEFAULT_STALL_TIMEOUT, default_command_limits, default_turn_limits};
use crate::message_files::SessionFiles;
use crate::models::ModelChoices;
use crate::snapshot::Snapshots;
use roundtable_chat_runner::lifecycle::TurnLeases;

/// The default author of a session's agent entries.
pub const DEFAULT_AGENT: &str = "agent";

/// Builds a [`SessionEngine`].
pub struct SessionEngineBuilder {
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) models: ModelChoices,
    stream_options: StreamOptions,
    stall_timeout: Option<Duration>,
    limits: Limits,
    command_limits: CommandLimits,
    agent_name: Arc<str>,
    chunk_interval: Duration,
    verify_attempts: u32,
    snapshot_dir: Option<PathBuf>,
    interrupt_open_turns_after: Duration,
    unowned_sessions: UnownedSessions,
    runtime_ttl: Duration,
    max_runtimes: u64,
    blob_store: Option<Arc<dyn BlobStore>>,
    attachment_limits: AttachmentLimits,
    compaction: CompactionConfig,
    host_tools: HostToolSources,
    index_table: Option<Arc<dyn RecordTable>>,
    retention: Option<Duration>,
    leases: Option<Arc<dyn Leases>>,
    lease_ttl: Duration,
    lease_renew_every: Duration,
}

impl std::fmt::Debug for SessionEngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionEngineBuilder")
            .field("model", &self.models.own().model.id)
            .finish_non_exhaustive()
    }
}

impl SessionEngine {
    /// A builder over `store`, running turns on `provider` with `model`.
    pub fn builder(
        store: Arc<dyn ThreadStore>,
        provider: Arc<dyn Provider>,
        model: Model,
    ) -> SessionEngineBuilder {
        SessionEngineBuilder::new(store, provider, model)
    }
}

impl SessionEngineBuilder {
    fn new(store: Arc<dyn ThreadStore>, provider: Arc<dyn Provider>, model: Model) -> Self {
        Self {
            store,
            models: ModelChoices::new(model, provider),
            stream_options: StreamOptions::default(),
            stall_timeout: Some(DEFAULT_STALL_TIMEOUT),
            limits: default_turn_limits(),
            command_limits: default_command_limits(),
            agent_name: Arc::from(DEFAULT_AGENT),
            chunk_interval: DEFAULT_CHUNK_INTERVAL,
            verify_attempts: 3,
            snapshot_dir: None,
            interrupt_open_turns_after: Duration::ZERO,
            unowned_sessions: UnownedSessions::default(),
            runtime_ttl: DEFAULT_RUNTIME_TTL,
            max_runtimes: DEFAULT_MAX_RUNTIMES,
            blob_store: None,
            attachment_limits: AttachmentLimits::default(),
            compaction: CompactionConfig::default(),
            host_tools: HostToolSources::default(),
            index_table: None,
            retention: None,
            leases: None,
            lease_ttl: DEFAULT_LEASE_TTL,
            lease_renew_every: DEFAULT_RENEW_EVERY,
        }
    }

    /// Sets the stream options of every model call. Their idle timeout is
    /// replaced by the [`stall_timeout`](Self::stall_timeout).
    pub fn stream_options(mut self, options: StreamOptions) -> Self {
        self.stream_options = options;
        self
    }

    /// How long a model stream may send nothing before it counts as
    /// stalled (default [`DEFAULT_STALL_TIMEOUT`]; `None` for no bound).
    /// A stalled call is sent again up to the limits' `stall_retries`
    /// times, then the turn fails with `stream stalled: no data for N s`.
    pub fn stall_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.stall_timeout = timeout;
        self
    }

    /// Sets the limits of every turn, which a session's own
    /// ([`SessionLimits`](crate::SessionLimits)) override (default
    /// [`default_turn_limits`]: 200 rounds, no wall clock, 2 stall
    /// retries, no budget). A wall clock here counts the time a turn waits
    /// on people too.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the limits of the sessions' `shell` and `verify` commands
    /// (default [`default_command_limits`]).
    pub fn command_limits(mut self, limits: CommandLimits) -> Self {
        self.command_limits = limits;
        self
    }

    /// The author of the agent's entries (default `agent`).
    pub fn agent_name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.agent_name = name.into();
        self
    }

    /// How long text deltas are held to share one `chat.chunk` entry
    /// (default 40 ms): the grain of `model_output_delta` events.
    pub fn chunk_interval(mut self, interval: Duration) -> Self {
        self.chunk_interval = interval;
        self
    }

    /// How many verifications a turn may run before it ends failed
    /// (default 3).
    pub fn verify_attempts(mut self, attempts: u32) -> Self {
        self.verify_attempts = attempts.max(1);
        self
    }

    /// Writes each session's `session.json` into `<dir>/<session id>/`
    /// (beside its thread, with the JSONL store's folder layout) when it is
    /// created and each time it settles, and keeps the session index in `<dir>/.sessions-index` (a [`FileTable`]) unless
    /// [`index_table`](Self::index_table) names another place. Deleting a
    /// session removes its folder there.
    pub fn snapshot_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.snapshot_dir = Some(dir.into());
        self
    }

    /// Where the session index lives (what listing sessions reads): by
    /// default a [`FileTable`] in the [`snapshot_dir`](Self::snapshot_dir)
    /// when there is one, else a [`MemoryTable`] (rebuilt from the threads
    /// at each start). Engines sharing a NATS store share a `NatsKvTable`,
    /// engines sharing a PostgreSQL store a `PostgresTable`.
    pub fn index_table(mut self, table: Arc<dyn RecordTable>) -> Self {
        self.index_table = Some(table);
        self
    }

    /// Deletes sessions idle (nothing written) for longer than `idle`,
    /// each time [`SessionEngine::delete_idle_sessions`] runs (default:
    /// sessions are kept until deleted).
    pub fn retention(mut self, idle: Duration) -> Self {
        self.retention = Some(idle);
        self
    }

    /// An open turn that no process of this engine runs counts as
    /// interrupted once it is at least this old (default zero: right when
    /// one engine serves the store). With several engines over one store,
    /// set it above the longest a turn runs, waits on people included
    /// (turns have no wall clock by default), so that one engine never
    /// closes another's live turn.
    pub fn interrupt_open_turns_after(mut self, age: Duration) -> Self {
        self.interrupt_open_turns_after = age;
        self
    }

    /// Holds every running turn by a lease in `leases`, so that a turn
    /// outlives the process running it: the process renews the lease while
    /// the turn runs, and when it dies (or stops past its grace) another
    /// process sharing `leases` carries the turn on from its stored entries
    /// ([`SessionEngine::take_over_turns`]). A start-up
    /// [`recover`](SessionEngine::recover) then carries on the turns it
    /// finds open rather than closing them, and open turns are never closed
    /// by age ([`interrupt_open_turns_after`](Self::interrupt_open_turns_after)
    /// no longer applies).
    pub fn leases(mut self, leases: Arc<dyn Leases>) -> Self {
        self.leases = Some(leases);
        self
    }

    /// How long a turn's lease lasts unless renewed, and how often it is
    /// renewed (defaults [`DEFAULT_LEASE_TTL`] and [`DEFAULT_RENEW_EVERY`]):
    /// a turn whose process died is carried on about `ttl` later. The
    /// renewal is raised to at most a third of `ttl`.
    pub fn lease_timing(mut self, ttl: Duration, renew_every: Duration) -> Self {
        self.lease_ttl = ttl;
        self.lease_renew_every = renew_every.min(ttl / 3);
        self
    }

    /// Who may use sessions that belong to nobody (default: the host only).
    pub fn unowned_sessions(mut self, access: UnownedSessions) -> Self {
        self.unowned_sessions = access;
        self
    }

    /// How long a session's runtime stays in memory unused (default 10
    /// minutes); it is rebuilt from the thread when needed again.
    pub fn runtime_ttl(mut self, ttl: Duration) -> Self {
        self.runtime_ttl = ttl;
        self
    }

    /// How many unused runtimes stay in memory at most (default 1000; the
    /// least recently used go first).
    pub fn max_runtimes(mut self, max: u64) -> Self {
        self.max_runtimes = max;
        self
    }

    /// Where sessions keep files: uploaded attachments and the artifacts
    /// of their turns (full command logs, diagrams). Without one, uploads
    /// and messages with files are refused and tools keep no artifacts.
    pub fn blob_store(mut self, blobs: Arc<dyn BlobStore>) -> Self {
        self.blob_store = Some(blobs);
        self
    }

    /// How large an upload may be, and how much of a file a model reads.
    pub fn attachment_limits(mut self, limits: AttachmentLimits) -> Self {
        self.attachment_limits = limits;
        self
    }

    /// How sessions compact their conversations (default: automatically,
    /// when a request nears the model's context window, with
    /// [`CompactionConfig::default`]; [`CompactionConfig::manual_only`]
    /// leaves only [`SessionEngine::compact`]).
    pub fn compaction(mut self, config: CompactionConfig) -> Self {
        self.compaction = config;
        self
    }

    /// Gives every session's turns the tools of `source` (an
    /// `McpToolset`, or a fixed [`ToolRegistry`]) beside the session's own
    /// (its workspace tools, `read_skill`, `ask_user`, `update_plan`), under
    /// the session's approval policy (a registry's own policy does not
    /// apply). Each turn starts with the tools the sources list then; when
    /// they differ from those of the session's previous turn, the turn
    /// stores a [`ToolsChanged`](crate::records::ToolsChanged) record, a
    /// `tools_changed` event. A name that a session's tool or another host
    /// tool already has is a [`SessionError::Tools`] here, or fails the
    /// turn that first sees it; a host tool never hides another.
    pub fn host_tool_source(mut self, source: Arc<dyn ToolSource>) -> Result<Self, SessionError> {
        self.host_tools.add(source)?;
        Ok(self)
    }

    /// Offers `model`, served by `provider`, beside the engine's own: a
    /// session may choose it for its turns ([`Submit::model`]). The
    /// engine's own model stays every session's until it chooses another.
    ///
    /// [`Submit::model`]: crate::Submit::model
    pub fn offer_model(mut self, model: Model, provider: Arc<dyn Provider>) -> Self {
        self.models.offer(model, provider);
        self
    }

    /// Gives every session's turns these fixed tools (see
    /// [`host_tool_source`](Self::host_tool_source)).
    pub fn host_tools(self, tools: ToolRegistry) -> Result<Self, SessionError> {
        self.host_tool_source(Arc::new(tools))
    }

    /// The engine.
    pub fn build(self) -> SessionEngine {
        let runtimes = Arc::new(RuntimeCache::new(self.runtime_ttl, self.max_runtimes));
        let index_table = match (self.index_table, &self.snapshot_dir) {
            (Some(table), _) => table,
            (None, Some(dir)) => Arc::new(FileTable::new(dir.join(INDEX_FILE))),
            (None, None) => Arc::new(MemoryTable::new()),
        };
        SessionEngine::from_core(EngineCore {
            store: self.store,
            models: self.models,
            stream_options: StreamOptions {
                idle_timeout: self.stall_timeout,
                ..self.stream_options
            },
            limits: self.limits,
            command_limits: self.command_limits,
            agent: self.agent_name,
            chunk_interval: self.chunk_interval,
            verify_attempts: self.verify_attempts,
            snapshots: self.snapshot_dir.map(Snapshots::new),
            interrupt_open_turns_after: self.interrupt_open_turns_after,
            unowned: self.unowned_sessions,
            runtimes: runtimes.clone(),
            files: SessionFiles {
                blobs: self.blob_store,
                limits: self.attachment_limits,
                numbers: Default::default(),
            },
            compactor: Compactor::new(self.compaction),
            host_tools: self.host_tools.into_live(),
            drivers: Drivers::default(),
            index: SessionIndex::new(index_table, runtimes),
            retention: self.retention,
            leases: self.leases.map(|leases| {
                TurnLeases::new(leases).timing(self.lease_ttl, self.lease_renew_every)
            }),
        })
    }
}
