//! The sessions' tables, created and upgraded by embedded migrations.
//!
//! They share the thread store's schema (so dropping the schema drops a
//! deployment whole) but not its migration history: the sessions' applied
//! versions are recorded in `<schema>.sessions_migrations`, so each crate
//! numbers its migrations on its own and neither refuses the other's.
//! Migrations are applied in order, in one transaction, under the advisory
//! lock the thread store's migrations take, so daemons starting together
//! apply each once. A migration, once
//! released, is never edited: a change is a new migration.

use tokio_postgres::Client;

use super::{DbError, describe, quote};

/// One embedded migration. `{schema}` in its SQL stands for the quoted
/// schema name.
struct Migration {
    version: i32,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, in order.
const MIGRATIONS: &[Migration] = &[Migration {
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
}];

/// The newest migration this build knows.
fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Brings `schema` up to date: creates it if needed and applies the
/// migrations it lacks. Safe to call from many processes at once.
pub(super) async fn migrate(client: &mut Client, schema: &str) -> Result<(), DbError> {
    let fail = |e: tokio_postgres::Error| format!("PostgreSQL migration: {}", describe(&e));
    let quoted = quote(schema);
    let tx = client.transaction().await.map_err(fail)?;
    // The thread store's lock of the schema, held until the transaction
    // ends: its migrations and these never run at once, so neither sees
    // the other's half-made schema.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 7294))",
        &[&format!("roundtable migrations {schema}")],
    )
    .await
    .map_err(fail)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {quoted};
         CREATE TABLE IF NOT EXISTS {quoted}.sessions_migrations (
             version    integer     PRIMARY KEY,
             name       text        NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         );"
    ))
    .await
    .map_err(fail)?;
    let applied: Vec<i32> = tx
        .query(
            &format!("SELECT version FROM {quoted}.sessions_migrations"),
            &[],
        )
        .await
        .map_err(fail)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    if let Some(newer) = applied.iter().find(|v| **v > latest_version()) {
        return Err(format!(
            "schema {schema} holds sessions' tables at migration {newer}, newer than this build knows ({}): upgrade roundtable",
            latest_version()
        ));
    }
    for migration in MIGRATIONS.iter().filter(|m| !applied.contains(&m.version)) {
        tx.batch_execute(&migration.sql.replace("{schema}", &quoted))
            .await
            .map_err(|e| {
                format!(
                    "PostgreSQL migration {} ({}): {}",
                    migration.version,
                    migration.name,
                    describe(&e)
                )
            })?;
        tx.execute(
            &format!("INSERT INTO {quoted}.sessions_migrations (version, name) VALUES ($1, $2)"),
            &[&migration.version, &migration.name],
        )
        .await
        .map_err(fail)?;
        tracing::info!(
            schema,
            version = migration.version,
            name = migration.name,
            "applied sessions migration"
        );
    }
    tx.commit().await.map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1, "{}", m.name);
            assert!(m.sql.contains("{schema}."), "{}", m.name);
        }
    }
}
