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
//! The crate root holds what a host embedding the engine uses every time;
//! the rest is reached through its module ([`records`], [`events`],
//! [`event_data`], [`state`], [`index`], [`blob`], ...).
//!
//! - **The calls a host makes**: [`SessionEngine`] (create, list, get,
//!   submit, subscribe, decide, answer, cancel, retry, compact, recover,
//!   delete, uploads), configured with a [`SessionEngineBuilder`] (its
//!   defaults in [`builder`]). Every call names its [`Caller`]; another
//!   user's session is unknown to it. [`CreateSession`] holds a new
//!   session's settings and the spec's defaults ([`config`]); [`Submit`]
//!   and [`Submitted`] what a message is and gives ([`requests`]);
//!   [`SessionError`] and its [`SessionErrorKind`] what goes wrong (the kind is
//!   what an HTTP layer maps to a status).
//! - **What is stored**: messages and turns are the thread stream's own
//!   entries; everything else a session writes is a `signal.<name>` entry
//!   whose data is one of the [`records`] ([`SessionRecord`] and its
//!   implementors: [`SessionCreated`], [`QueueAdded`], [`Verification`],
//!   [`Provenance`] ...). Ids are [`SessionId`], [`MessageId`],
//!   [`TurnId`] ([`ids`]).
//! - **What is read from it**: the [`SessionState`] folded from the
//!   entries (status, turns, pending approvals, questions, queue, plan:
//!   [`state`]); the spec's session object [`SessionInfo`] derived from it
//!   ([`info`]; also written as `session.json` when the session is created
//!   and each time it settles); and the event view, a pure function from
//!   an entry to its [`SessionEvent`]s ([`EventView`], ids [`EventId`]:
//!   [`events`]; each type's data an [`EventData`]: [`event_data`]), which
//!   [`SessionEngine::subscribe`] streams as history then live.
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
//!   [`default_turn_limits`] and [`default_command_limits`] for the host,
//!   their defaults in [`limits`]).
//! - **Waiting on people**: approvals, questions and cancel requests are
//!   entries any process may append; the running turn watches its thread
//!   for them, so they survive reconnects, and a restart closes a waiting
//!   turn as interrupted ([`SessionEngine::recover`], [`Recovery`]).
//! - **Turns that outlive their process**: with
//!   [`leases`](SessionEngineBuilder::leases), a running turn is held by a
//!   lease its process renews; when the process dies (or stops past its
//!   grace) another one takes the lease and carries the turn on from what
//!   it stored ([`SessionEngine::take_over_turns`]): stored results are
//!   kept, a call that may have run is answered as stopped, a pending
//!   approval stays pending, the model is called again.
//! - **Stopping**: [`SessionEngine::shutdown`] refuses new turns, gives
//!   running ones a grace, then closes the rest as interrupted
//!   ([`Stopped`]); turns log their start and end and record metrics
//!   through the `metrics` facade for a host that installs an exporter.
//! - **Files**: uploads checked and stored under safe names
//!   ([`attachments`], [`AttachmentLimits`]), and per-turn artifacts
//!   ([`TurnArtifacts`]), both kept by a [`BlobStore`] ([`blob`]): a folder
//!   by default ([`FolderBlobStore`]), the NATS JetStream object store
//!   under the `nats` feature, a PostgreSQL table under the `postgres`
//!   feature.
//! - **The session index**: what listing reads, a page at a time
//!   ([`ListSessions`], [`SessionPage`], [`SessionCursor`]), kept in a
//!   [`RecordTable`] where the threads live ([`FileTable`] in the sessions
//!   folder, `NatsKvTable` under the `nats` feature, `PostgresTable`
//!   under the `postgres` feature, [`MemoryTable`]: [`index`], [`table`])
//!   and rebuilt from the threads when missing. Deleting a
//!   session removes it with its files; an optional retention deletes idle
//!   sessions ([`SessionEngine::delete_idle_sessions`]).
//! - **The runtime cache**: a session's state and agent setup stay in
//!   memory while in use and are rebuilt from the thread after an idle time
//!   ([`DEFAULT_RUNTIME_TTL`], [`DEFAULT_MAX_RUNTIMES`]).
//! - **Workflows**: [`WorkflowRunner`] runs the phases of a
//!   `roundtable_skills::Workflow` as turns of one session, each with its
//!   skills staged in the workspace, each phase's start and end an entry of
//!   the thread (so a run resumes after a restart where it stopped:
//!   [`workflow`]).
//!
//! [`SessionRecord`]: records::SessionRecord
//! [`SessionCreated`]: records::SessionCreated
//! [`QueueAdded`]: records::QueueAdded
//! [`Verification`]: records::Verification
//! [`SessionState`]: state::SessionState
//! [`EventView`]: events::EventView
//! [`AskUserInput`]: questions::AskUserInput
//! [`UpdatePlanInput`]: plan::UpdatePlanInput
//! [`VERIFY_AUTHOR`]: verify::VERIFY_AUTHOR
//! [`TurnArtifacts`]: blob::TurnArtifacts
//! [`SessionCursor`]: index::SessionCursor
//! [`FileTable`]: table::FileTable
//! [`MemoryTable`]: table::MemoryTable
//! [`DEFAULT_RUNTIME_TTL`]: cache::DEFAULT_RUNTIME_TTL
//! [`DEFAULT_MAX_RUNTIMES`]: cache::DEFAULT_MAX_RUNTIMES

mod approver;
pub mod attachments;
pub mod blob;
mod bound_turn;
pub mod builder;
pub mod cache;
mod caller;
mod compaction;
pub mod config;
mod context;
mod continuation;
mod conversation;
mod core;
mod drivers;
mod engine;
mod erase;
mod error;
pub mod event_data;
mod event_schema;
pub mod events;
mod host_tools;
pub mod ids;
pub mod index;
pub mod info;
pub mod limits;
mod listing;
mod message_files;
mod models;
mod patch_review;
pub mod plan;
#[cfg(feature = "postgres")]
mod postgres;
mod provenance;
pub mod questions;
pub mod records;
pub mod recovery;
pub mod requests;
mod runtime;
mod shutdown;
mod snapshot;
pub mod state;
mod stored_file;
mod submit;
pub mod table;
mod takeover;
mod turn_driver;
mod turn_lease;
mod turn_log;
mod turn_tools;
pub mod verify;
mod watch;
pub mod workflow;
mod working_tree;

pub use attachments::{AttachmentLimits, AttachmentRef};
pub use blob::{BlobStore, FolderBlobStore};
pub use builder::SessionEngineBuilder;
pub use caller::{Caller, UnownedSessions};
pub use config::CreateSession;
pub use engine::{SessionEngine, SessionEvents};
pub use error::{SessionError, SessionErrorKind};
pub use event_data::EventData;
pub use events::{EventId, EventType, SessionEvent};
pub use ids::{MessageId, SessionId, TurnId};
pub use index::{ListSessions, RecordTable, SessionPage};
pub use info::SessionInfo;
pub use limits::{SessionLimits, default_command_limits, default_turn_limits};
pub use models::model_key;
pub use records::{Provenance, QuestionReply, QueueMode, SessionMode};
pub use recovery::Recovery;
pub use requests::{ApprovalAction, Placed, PlanAction, Submit, Submitted};
pub use shutdown::Stopped;
pub use state::SessionStatus;
pub use stored_file::StoredFile;
pub use workflow::WorkflowRunner;
