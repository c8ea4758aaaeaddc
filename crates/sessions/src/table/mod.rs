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

/// A record as a table holds it: its value and the revision that wrote it.
///
/// A revision changes with every write of the record, so a writer that
/// read it can ask for its change to land only if nobody wrote in between
/// ([`RecordTable::put_if`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The record's value.
    pub value: String,
    /// The revision that wrote it (greater than zero).
    pub revision: u64,
}

/// A small durable table of records by key: each value a short text (a
/// JSON object of a few hundred bytes, for the session index).
///
/// The session index keeps what it reads from its table in memory and
/// writes every change through. A table that has no usable copy
/// (missing, or unreadable) says so from [`load`](Self::load), and its user
/// rebuilds it from the source of truth (for the session index: the
/// threads) with [`replace_all`](Self::replace_all). State with no other
/// source (settings, users) reads [`records`](Self::records) or one record
/// with [`get`](Self::get), and changes a record it read with
/// [`put_if`](Self::put_if), so that two processes changing it at once
/// never lose an update.
#[async_trait]
pub trait RecordTable: Debug + Send + Sync {
    /// Every record, or `None` when the table has no usable copy.
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError>;

    /// Every record the table holds, for state that has no other source:
    /// a table never filled whole by [`replace_all`](Self::replace_all)
    /// reads as the records written so far (where [`load`](Self::load)
    /// would ask for a rebuild).
    async fn records(&self) -> Result<Vec<(String, String)>, TableError> {
        Ok(self.load().await?.unwrap_or_default())
    }

    /// Record `key` with its revision, or `None` when it is absent, as the
    /// table holds it now (a shared table answers what every process wrote).
    async fn get(&self, key: &str) -> Result<Option<Versioned>, TableError>;

    /// Sets `key` to `value`.
    async fn put(&self, key: &str, value: String) -> Result<(), TableError>;

    /// Sets `key` to `value` only if it is still at revision `expected`
    /// (`None`: only if it is absent): the new revision, or `None` when
    /// another write came first and nothing was written (read it again).
    async fn put_if(
        &self,
        key: &str,
        value: String,
        expected: Option<u64>,
    ) -> Result<Option<u64>, TableError>;

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

/// Records by key with revisions given from one counter: the memory and
/// file tables' copy, where one process decides every write (under the
/// table's lock, which makes [`put_if`](RecordTable::put_if) atomic).
#[derive(Debug, Default)]
pub(crate) struct Revised {
    records: BTreeMap<String, Versioned>,
    last: u64,
}

impl Revised {
    /// Sets `key`, giving it the next revision.
    pub(crate) fn put(&mut self, key: &str, value: String) -> u64 {
        self.last += 1;
        let revision = self.last;
        self.records
            .insert(key.to_string(), Versioned { value, revision });
        revision
    }

    /// Whether `key` is at revision `expected` (`None`: absent).
    pub(crate) fn is_at(&self, key: &str, expected: Option<u64>) -> bool {
        self.records.get(key).map(|r| r.revision) == expected
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Versioned> {
        self.records.get(key)
    }

    pub(crate) fn remove(&mut self, key: &str) {
        self.records.remove(key);
    }

    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.records.iter().map(|(k, r)| (k, &r.value))
    }

    /// Every record, as pairs.
    pub(crate) fn pairs(&self) -> Vec<(String, String)> {
        self.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Replaces every record with `pairs` (the last value of a key wins),
    /// each at a revision never given before, so a revision read earlier
    /// matches none of them.
    pub(crate) fn replace(&mut self, pairs: impl IntoIterator<Item = (String, String)>) {
        self.records.clear();
        for (key, value) in pairs {
            self.put(&key, value);
        }
    }
}

/// A table in memory: for the memory thread store, whose threads are gone
/// with the process too.
#[derive(Debug, Default)]
pub struct MemoryTable {
    records: Mutex<Option<Revised>>,
}

impl MemoryTable {
    /// An empty table (whose first load asks for a rebuild).
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Revised>> {
        // Every change is one insert or remove: a poisoned lock holds
        // consistent data.
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn with<T>(&self, f: impl FnOnce(&mut Revised) -> T) -> T {
        f(self.lock().get_or_insert_with(Revised::default))
    }
}

#[async_trait]
impl RecordTable for MemoryTable {
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError> {
        Ok(self.lock().as_ref().map(Revised::pairs))
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>, TableError> {
        Ok(self.with(|r| r.get(key).cloned()))
    }

    async fn put(&self, key: &str, value: String) -> Result<(), TableError> {
        self.with(|r| r.put(key, value));
        Ok(())
    }

    async fn put_if(
        &self,
        key: &str,
        value: String,
        expected: Option<u64>,
    ) -> Result<Option<u64>, TableError> {
        Ok(self.with(|r| r.is_at(key, expected).then(|| r.put(key, value))))
    }

    async fn remove(&self, key: &str) -> Result<(), TableError> {
        self.with(|r| r.remove(key));
        Ok(())
    }

    async fn replace_all(&self, records: Vec<(String, String)>) -> Result<(), TableError> {
        self.with(|r| r.replace(records));
        Ok(())
    }
}
