//! Record tables: where a host keeps small state beside its threads (the
//! session index, chat settings, users and their hashed tokens), in the
//! same place as the threads: a [`FileTable`] in the data folder for the
//! JSONL store, a `NatsKvTable` (feature `nats`) in a JetStream KV bucket,
//! a `PostgresTable` (feature `postgres`) in the store's database, a
//! [`MemoryTable`] for the memory store.
//!
//! They live here, beside the engine rather than inside its session index,
//! because the index is only one of their users: the server's chat
//! settings and the daemon's users are others, and the PostgreSQL tables
//! share the sessions' migrations and connection code.

mod file;
#[cfg(feature = "nats")]
mod nats;
#[cfg(feature = "postgres")]
mod postgres;

pub use file::FileTable;
#[cfg(feature = "nats")]
pub use nats::NatsKvTable;
#[cfg(feature = "postgres")]
pub use postgres::PostgresTable;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Mutex;

use async_trait::async_trait;
use futures::stream::BoxStream;

/// What a record table can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// Reading or writing the table's file failed.
    #[error("record table {path}: {source}")]
    Io {
        /// The table's file.
        path: std::path::PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// A shared table's backend failed (connection, server error).
    #[error("record table backend: {0}")]
    Backend(String),
}

/// A change another process made to a shared table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableChange {
    /// `key` now holds the value.
    Put(String, String),
    /// `key` was removed.
    Removed(String),
}

/// A small durable table of records by key: each value a short text (a
/// JSON object of a few hundred bytes, for the session index).
///
/// The table is the durable copy; its user keeps what it reads from it in
/// memory and writes every change through. A table that has no usable copy
/// (missing, or unreadable) says so from [`load`](Self::load), and its user
/// rebuilds it from the source of truth (for the session index: the
/// threads) with [`replace_all`](Self::replace_all).
#[async_trait]
pub trait RecordTable: Debug + Send + Sync {
    /// Every record, or `None` when the table has no usable copy.
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError>;

    /// Sets `key` to `value`.
    async fn put(&self, key: &str, value: String) -> Result<(), TableError>;

    /// Removes `key` (an unknown key is no error).
    async fn remove(&self, key: &str) -> Result<(), TableError>;

    /// Replaces every record with `records`.
    async fn replace_all(&self, records: Vec<(String, String)>) -> Result<(), TableError>;

    /// The changes other processes make from now on, for a table several
    /// processes share; `None` (the default) when only this one writes.
    async fn changes(&self) -> Result<Option<BoxStream<'static, TableChange>>, TableError> {
        Ok(None)
    }
}

/// A table in memory: for the memory thread store, whose threads are gone
/// with the process too.
#[derive(Debug, Default)]
pub struct MemoryTable {
    records: Mutex<Option<BTreeMap<String, String>>>,
}

impl MemoryTable {
    /// An empty table (whose first load asks for a rebuild).
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, String>) -> T) -> T {
        let mut records = self
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(records.get_or_insert_with(BTreeMap::new))
    }
}

#[async_trait]
impl RecordTable for MemoryTable {
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError> {
        let records = self
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(records
            .as_ref()
            .map(|r| r.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
    }

    async fn put(&self, key: &str, value: String) -> Result<(), TableError> {
        self.with(|r| r.insert(key.to_string(), value));
        Ok(())
    }

    async fn remove(&self, key: &str) -> Result<(), TableError> {
        self.with(|r| r.remove(key));
        Ok(())
    }

    async fn replace_all(&self, records: Vec<(String, String)>) -> Result<(), TableError> {
        self.with(|r| *r = records.into_iter().collect());
        Ok(())
    }
}
