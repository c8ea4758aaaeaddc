//! The thread stream: one durable, append-only, author-stamped log per thread,
//! shared by every human and bot in it.
//!
//! - [`Entry`] is one line of a thread; [`EntryBody`] says what it is (`chat`,
//!   `pi.assistant`, `pi.tool_result`, `chat.chunk`, `signal.*`, `compaction`,
//!   turn lifecycle: [`TurnStarted`], [`TurnEnded`], [`TurnFailed`] closed
//!   for a typed [`TurnReason`]). Its id is a UUID v7 from the process's
//!   generator, which [`fresh_uuid_v7`] offers for a host's own ids.
//! - [`ThreadStore`] appends with optimistic concurrency, reads ranges,
//!   subscribes (history, then live) and lists threads. Every store refuses
//!   an entry that would not read back as written ([`EntryBody::check`],
//!   [`InvalidEntry`]).
//! - Stores: [`MemoryStore`] for tests, [`JsonlStore`] (a file per thread,
//!   `<thread>.jsonl`, or a folder per thread, see [`JsonlLayout`]; the
//!   embedded default), `NatsStore` (feature `nats`:
//!   a NATS JetStream stream shared by hosts on several machines), and
//!   `PostgresStore` (feature `postgres`: tables in a PostgreSQL database).
//! - `PostgresMirror` (feature `postgres`) copies the threads of any store
//!   into PostgreSQL tables for dashboards: entries, runs, tool executions
//!   and file mutations. The `postgres` module also holds the mirror's
//!   status and the rows it derives from an entry.
//! - [`Leases`] (module [`lease`]): which process holds a key (a running
//!   turn) until when, in the store's own coordination primitive (in
//!   process, a NATS KV bucket, a PostgreSQL table), so that processes
//!   sharing a store take over the work of one that died.
//!
//! The store never interprets entries: projections and wake decisions are
//! recomputed from the stream by the crates above it.

mod body;
mod entry;
mod entry_id;
mod error;
pub mod jsonl;
pub mod lease;
mod lifecycle;
mod memory;
#[cfg(feature = "nats")]
mod nats;
#[cfg(feature = "postgres")]
pub mod postgres;
mod signal_data;
mod storable;
mod store;
mod thread_id;
mod thread_table;
mod tip;

pub use body::{
    Answer, AssistantEntry, Chat, Chunk, ChunkKind, Compaction, EntryBody, FileRef, Signal,
    ThinVec, ToolResultEntry,
};
pub use entry::{Entry, NewEntry};
pub use entry_id::fresh_uuid_v7;
pub use error::{InvalidEntry, StoreError};
pub use jsonl::{JsonlLayout, JsonlOptions, JsonlStore};
pub use lease::{Lease, LeaseError, Leases};
pub use lifecycle::{
    FinishReason, INTERRUPTED, TURN_RESULT_SIGNAL, TurnEnded, TurnFailed, TurnReason, TurnStarted,
};
pub use memory::MemoryStore;
#[cfg(feature = "nats")]
pub use nats::{NatsOptions, NatsStore, connect_nats};
#[cfg(feature = "postgres")]
pub use postgres::{MirrorOptions, PostgresMirror, PostgresOptions, PostgresStore};
pub use signal_data::SignalData;
pub use store::{EntryStream, Expect, ThreadStore};
pub use thread_id::{InvalidThreadId, ThreadId};
