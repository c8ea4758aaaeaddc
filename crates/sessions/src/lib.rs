//! Agentic sessions on the thread stream.
//!
//! A session is a thread: everything that happens in it (the session's
//! creation, messages, turns, tool calls, approvals, verification) is an
//! entry of the session's thread, and every event a client sees is derived
//! from one stored entry, with the entry's seq as its id. A client that
//! reconnects, a server that restarts, or another server process reading
//! the same store replays exactly what was missed.
//!
//! # What is where
//!
//! - **The calls a host makes**: [`SessionEngine`] (create, list, get,
//!   submit, subscribe, decide, answer, cancel, retry, compact, recover,
//!   delete, uploads), configured with a [`SessionEngineBuilder`]. Every call names
//!   its [`Caller`]; another user's session is unknown to it.
//!   [`CreateSession`] holds a new session's settings and the spec's
//!   defaults; [`Submit`] and [`Submitted`] what a message is and gives;
//!   [`SessionError`] and its [`ErrorKind`] what goes wrong (the kind is
//!   what an HTTP layer maps to a status).
//! - **What is stored**: messages and turns are the thread stream's own
//!   entries; everything else a session writes is a `signal.<name>` entry
//!   whose data is one of the records ([`SessionRecord`] and its
//!   implementors: [`SessionCreated`], [`QueueAdded`], [`Verification`],
//!   [`Provenance`] ...). Ids are [`SessionId`], [`MessageId`],
//!   [`TurnId`].
//! - **What is read from it**: the [`SessionState`] folded from the
//!   entries (status, turns, pending approvals, questions, queue, plan);
//!   the spec's session object [`SessionInfo`] derived from it (also
//!   written as `session.json` when the session is created and each time
//!   it settles); and the event view, a pure function from
//!   an entry to its [`SessionEvent`]s ([`EventView`], ids [`EventId`]),
//!   which [`SessionEngine::subscribe`] streams as history then live.
//! - **A turn**: claimed by a call, run by the engine's turn driver in
//!   this process one at a time per session, then the queued follow-ups.
//!   The agent gets the session's prompt with the workspace's AGENTS.md, a
//!   small repository bundle and the staged skills' catalogue, and the
//!   workspace tools confined to the workspace, plus the host's tools
//!   (MCP included) and `ask_user` ([`AskUserInput`]) and `update_plan`
//!   ([`UpdatePlanInput`]). Its conversation is projected from the thread
//!   and kept between turns; compaction summarises its older part. After a
//!   turn that changed the workspace, auto-verify runs the verify
//!   commands ([`VERIFY_AUTHOR`] speaks their failures to the model).
//! - **Limits**: a turn has no wall clock (it may wait on people for
//!   as long as they take); a high round cap, a stall timeout on model
//!   streams (sent again, then failed), a timeout on every command and an
//!   optional budget bound it instead ([`SessionLimits`] per session,
//!   [`default_turn_limits`] and [`default_command_limits`] for the host).
//! - **Waiting on people**: approvals, questions and cancel requests are
//!   entries any process may append; the running turn watches its thread
//!   for them, so they survive reconnects, and a restart closes a waiting
//!   turn as interrupted ([`SessionEngine::recover`]).
//! - **Stopping**: [`SessionEngine::shutdown`] refuses new turns, gives
//!   running ones a grace, then closes the rest as interrupted
//!   ([`Stopped`]); turns log their start and end and record metrics
//!   through the `metrics` facade for a host that installs an exporter.
//! - **Files**: uploads checked and stored under safe names
//!   ([`attachments`], [`AttachmentLimits`]), and per-turn artifacts
//!   ([`TurnArtifacts`]), both kept by a [`BlobStore`]: a folder by default
//!   ([`FolderBlobStore`]), the NATS JetStream object store under the
//!   `nats` feature.
//! - **The session index**: what listing reads, a page at a time
//!   ([`ListSessions`], [`SessionPage`], [`SessionCursor`]), kept in a
//!   [`RecordTable`] where the threads live ([`FileTable`] in the sessions
//!   folder, `NatsKvTable` under the `nats` feature, [`MemoryTable`]) and
//!   rebuilt from the threads when missing. Deleting a session removes it
//!   with its files; an optional retention deletes idle sessions
//!   ([`SessionEngine::delete_idle_sessions`]).
//! - **The runtime cache**: a session's state and agent setup stay in
//!   memory while in use and are rebuilt from the thread after an idle time
//!   ([`DEFAULT_RUNTIME_TTL`], [`DEFAULT_MAX_RUNTIMES`]).
//! - **Workflows**: [`WorkflowRunner`] runs the phases of a
//!   `roundtable_skills::Workflow` as turns of one session, each with its
//!   skills staged in the workspace, each phase's start and end an entry of
//!   the thread (so a run resumes after a restart where it stopped).

mod approver;
pub mod attachments;
mod blob;
mod bound_turn;
mod builder;
mod cache;
mod caller;
mod compaction;
mod config;
mod context;
mod conversation;
mod core;
mod drivers;
mod engine;
mod error;
mod event_data;
mod event_schema;
mod events;
mod host_tools;
mod ids;
mod index;
mod info;
mod limits;
mod listing;
mod message_files;
mod models;
mod patch_review;
mod plan;
mod provenance;
mod questions;
mod records;
mod recovery;
mod requests;
mod runtime;
mod shutdown;
mod snapshot;
mod state;
mod stored_file;
mod turn_driver;
mod turn_log;
mod turn_tools;
mod verify;
mod watch;
mod workflow;
mod working_tree;

pub use attachments::{AttachmentError, AttachmentLimits, AttachmentRef};
pub use blob::{
    BlobError, BlobInfo, BlobPath, BlobStore, FolderBlobStore, InvalidBlobPath, TurnArtifacts,
};
#[cfg(feature = "nats")]
pub use blob::{NatsBlobOptions, NatsBlobStore};
pub use builder::{DEFAULT_AGENT, SessionEngineBuilder};
pub use cache::{DEFAULT_MAX_RUNTIMES, DEFAULT_RUNTIME_TTL};
pub use caller::{Caller, UnownedSessions};
pub use config::{CreateSession, agents_md_verify_commands};
pub use engine::{DEFAULT_USER, EventStream, SessionEngine};
pub use error::{ErrorKind, SessionError};
pub use event_data::{
    ApprovalDecision, ApprovalRequest, ApprovalScope, CancelRequest, CompactionEnd,
    CompactionStart, EventData, Failure, Finish, Message, MessageAdded, ModelOutput, NoData, Part,
    PatchReview, PlanUpdate, QuestionAnswer, QuestionAsk, QueueChangeKind, QueueUpdate, RetryWait,
    Role, TextDelta, ToolCallEnd, ToolCallRef, ToolCallStart, ToolResultRef, TurnStart,
};
pub use events::{EventId, EventType, EventView, InvalidEventId, SessionEvent};
pub use ids::{InvalidId, MessageId, SessionId, TurnId};
#[cfg(feature = "nats")]
pub use index::NatsKvTable;
pub use index::{
    DEFAULT_PAGE_SIZE, FileTable, INDEX_FILE, InvalidCursor, ListSessions, MAX_PAGE_SIZE,
    MemoryTable, RecordTable, SessionCursor, SessionPage, TableChange, TableError,
};
pub use info::{ProviderCircuit, QueuedInfo, SessionInfo};
pub use limits::{
    DEFAULT_SESSION_MAX_ROUNDS, DEFAULT_STALL_RETRIES, DEFAULT_STALL_TIMEOUT, SessionLimits,
    default_command_limits, default_turn_limits,
};
pub use models::model_key;
pub use plan::UpdatePlanInput;
pub use questions::AskUserInput;
pub use records::{
    Answer, CancelRequested, FileChanged, HostTool, LastTurn, MessageKeyed, ModeChanged,
    ModelChanged, PHASE_GATE_TOOL, PhaseCompleted, PhaseFailed, PhaseStarted, PlanStep,
    PlanUpdated, Provenance, Question, QuestionAnswered, QuestionAsked, QueueAdded, QueueExit,
    QueueMode, QueueRemoved, QueueSnapshot, QueuedText, SessionCreated, SessionDeleted,
    SessionMode, SessionRecord, Settled, StepStatus, ToolRun, ToolsChanged, Verification,
    VerificationRun,
};
pub use recovery::{Recovery, UnreadableSession};
pub use requests::{ApprovalAction, Placed, PlanAction, Submit, Submitted};
pub use shutdown::Stopped;
pub use state::{
    MessageInfo, PendingApproval, PlanState, QueueChange, QueuedMessage, SessionState,
    SessionStatus, TITLE_CHARS, TurnInfo, TurnProgress,
};
pub use stored_file::StoredFile;
pub use verify::VERIFY_AUTHOR;
pub use workflow::{PhaseStop, WorkflowRun, WorkflowRunner};
