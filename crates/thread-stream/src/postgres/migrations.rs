//! Embedded migrations and the one runner that applies them, for every
//! crate keeping tables in a roundtable schema.
//!
//! Each owner (the thread store, the sessions) numbers its migrations on
//! its own and records the applied ones in a history table of its own, so
//! neither refuses the other's. All run under one advisory lock per
//! schema, in one transaction, so processes starting together apply each
//! migration once and never see another owner's half-made tables. A
//! migration, once released, is never edited: a change is a new one.

use tokio_postgres::Client;

use super::connection::{describe, quote};

/// One embedded migration. `{schema}` in its SQL stands for the quoted
/// schema name.
#[derive(Debug)]
pub struct Migration {
    /// Its number: 1, 2, … without gaps.
    pub version: i32,
    /// What it makes, for the history table and the log.
    pub name: &'static str,
    /// The statements.
    pub sql: &'static str,
}

/// The migrations of one owner of tables, in order, and where their
/// applied versions are recorded.
#[derive(Debug)]
pub struct Migrations {
    /// Whose tables these are, for messages ("the sessions' tables").
    pub owner: &'static str,
    /// The history table, in the schema.
    pub history: &'static str,
    /// Every migration, in order.
    pub list: &'static [Migration],
}

impl Migrations {
    /// The newest migration this build knows.
    pub fn latest(&self) -> i32 {
        self.list.last().map_or(0, |m| m.version)
    }

    /// Brings `schema` up to date: creates it if needed and applies the
    /// migrations it lacks. Safe to call from many processes at once. The
    /// error holds no password.
    pub async fn apply(&self, client: &mut Client, schema: &str) -> Result<(), String> {
        let fail = |e: tokio_postgres::Error| format!("PostgreSQL migration: {}", describe(&e));
        let quoted = quote(schema);
        let history = format!("{quoted}.{}", self.history);
        let tx = client.transaction().await.map_err(fail)?;
        // One lock per schema name, held until the transaction ends.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 7294))",
            &[&format!("roundtable migrations {schema}")],
        )
        .await
        .map_err(fail)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {quoted};
             CREATE TABLE IF NOT EXISTS {history} (
                 version    integer     PRIMARY KEY,
                 name       text        NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );"
        ))
        .await
        .map_err(fail)?;
        let applied: Vec<i32> = tx
            .query(&format!("SELECT version FROM {history}"), &[])
            .await
            .map_err(fail)?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if let Some(newer) = applied.iter().find(|v| **v > self.latest()) {
            return Err(format!(
                "schema {schema} holds {} at migration {newer}, newer than this build knows ({}): upgrade roundtable",
                self.owner,
                self.latest()
            ));
        }
        for migration in self.list.iter().filter(|m| !applied.contains(&m.version)) {
            tx.batch_execute(&migration.sql.replace("{schema}", &quoted))
                .await
                .map_err(|e| {
                    format!(
                        "PostgreSQL migration {} of {} ({}): {}",
                        migration.version,
                        self.owner,
                        migration.name,
                        describe(&e)
                    )
                })?;
            tx.execute(
                &format!("INSERT INTO {history} (version, name) VALUES ($1, $2)"),
                &[&migration.version, &migration.name],
            )
            .await
            .map_err(fail)?;
            tracing::info!(
                schema,
                owner = self.owner,
                version = migration.version,
                name = migration.name,
                "applied migration"
            );
        }
        tx.commit().await.map_err(fail)
    }

    /// Whether the list is numbered from one without gaps and every
    /// migration names its tables by `{schema}` (for the owners' tests).
    pub fn check(&self) -> Result<(), String> {
        for (i, m) in self.list.iter().enumerate() {
            if i64::from(m.version) != i as i64 + 1 {
                return Err(format!("{} is number {}, not {}", m.name, m.version, i + 1));
            }
            if !m.sql.contains("{schema}.") {
                return Err(format!("{} does not name its tables by {{schema}}", m.name));
            }
        }
        Ok(())
    }
}
