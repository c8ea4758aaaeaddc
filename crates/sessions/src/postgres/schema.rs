//! The sessions' tables and their embedded migrations.
//!
//! They share the thread store's schema (so dropping the schema drops a
//! deployment whole) but not its migration history: the sessions' applied
//! versions are recorded in `<schema>.sessions_migrations`, and the thread
//! store's runner applies them under the same lock.

use roundtable_thread_stream::postgres::{Migration, Migrations};
use tokio_postgres::Client;

use super::DbError;

/// The sessions' migrations, in order.
const MIGRATIONS: Migrations = Migrations {
    owner: "the sessions' tables",
    history: "sessions_migrations",
    list: &[Migration {
        version: 1,
        name: "blobs and record tables",
        sql: r#"
-- A session's blobs (attachments, artifacts): write-once rows. `nonce`
-- tells the writer that stored a row from another one, so a write whose
-- answer was lost with its connection can tell whether it landed.
CREATE TABLE {schema}.session_blobs (
    session    text        NOT NULL,
    path       text        NOT NULL,
    size       bigint      NOT NULL CHECK (size >= 0),
    bytes      bytea       NOT NULL,
    nonce      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, path)
);

-- Record tables (the session index, ...): one row per table whose
-- `revision` every write moves (under its row lock, so revisions are
-- given in commit order) and whose `complete` says a full copy was
-- written; one row per record, stamped with the revision that wrote it.
CREATE TABLE {schema}.record_tables (
    name     text    PRIMARY KEY,
    revision bigint  NOT NULL DEFAULT 0,
    complete boolean NOT NULL DEFAULT false
);
CREATE TABLE {schema}.records (
    table_name text   NOT NULL REFERENCES {schema}.record_tables (name),
    key        text   NOT NULL,
    value      text   NOT NULL,
    revision   bigint NOT NULL,
    PRIMARY KEY (table_name, key)
);
CREATE INDEX records_revision ON {schema}.records (table_name, revision);
"#,
    }],
};

/// Brings `schema` up to date: creates it if needed and applies the
/// migrations it lacks. Safe to call from many processes at once.
pub(super) async fn migrate(client: &mut Client, schema: &str) -> Result<(), DbError> {
    MIGRATIONS.apply(client, schema).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        assert_eq!(MIGRATIONS.check(), Ok(()));
    }
}
