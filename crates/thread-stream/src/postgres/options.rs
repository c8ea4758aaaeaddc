//! The settings of a [`PostgresStore`](super::PostgresStore).

use std::time::Duration;

/// Settings of a [`PostgresStore`](super::PostgresStore).
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// The PostgreSQL schema holding the tables (created if missing): 1 to
    /// 48 of `a-z`, `0-9` and `_`. Default `roundtable`.
    pub schema: String,
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
    /// How long a call keeps retrying through a lost connection or a server
    /// restart before it gives up with [`StoreError::Backend`](crate::StoreError::Backend). Default 30 s.
    pub retry_for: Duration,
    /// How often a waiting subscription reads even without a notification,
    /// so a notification lost with a silently dead connection delays entries
    /// by at most this. Default 5 s.
    pub poll_interval: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: "roundtable".into(),
            connect_timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(30),
            poll_interval: Duration::from_secs(5),
        }
    }
}
