//! Agentic sessions on the thread stream.
//!
//! A session is a thread: everything that happens in it (the session's
//! creation, messages, turns, tool calls, approvals, verification) is an
//! entry of the session's thread, and every event a client sees is derived
//! from one stored entry, with the entry's seq as its id. A client that
//! reconnects, a server that restarts, or another server process reading
//! the same store replays exactly what was missed.

mod approver;
mod config;
mod context;
mod core;
mod engine;
mod error;
mod events;
mod ids;
mod info;
mod records;
mod runtime;
mod state;
mod turn_driver;
mod verify;
mod watch;

pub use config::{CreateSession, agents_md_verify_commands};
pub use engine::{
    ApprovalAction, DEFAULT_AGENT, DEFAULT_USER, EventStream, SessionEngine, SessionEngineBuilder,
    Submit, Submitted,
};
pub use error::{ErrorKind, SessionError};
pub use events::{EventId, EventType, EventView, InvalidEventId, SessionEvent};
pub use ids::{MessageId, SessionId, TurnId};
pub use info::{QueuedInfo, SessionInfo};
pub use records::{
    CancelRequested, QueueAdded, QueueExit, QueueMode, QueueRemoved, SessionCreated, SessionRecord,
    Verification,
};
pub use state::{
    MessageInfo, PendingApproval, QueuedMessage, SessionState, SessionStatus, TurnInfo,
    TurnProgress,
};
pub use verify::VERIFY_AUTHOR;
