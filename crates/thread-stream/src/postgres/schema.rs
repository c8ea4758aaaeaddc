//! The thread store's tables and their embedded migrations.
//!
//! Everything lives in one PostgreSQL schema (`roundtable` by default), so a
//! host can keep several apart or drop one whole. Applied versions are
//! recorded in `<schema>.schema_migrations`; `migrations.rs` applies them.

use tokio_postgres::Client;

use super::migrations::{Migration, Migrations};
use crate::StoreError;

/// The thread store's migrations, in order.
const MIGRATIONS: Migrations = Migrations {
    owner: "the thread store's tables",
    history: "schema_migrations",
    list: &[
        Migration {
            version: 1,
            name: "thread store",
            sql: r#"
-- The thread store: one row per thread holding its last seq (appends update
-- it, which serialises writers of one thread and checks their expectation),
-- and one row per entry holding the line exactly as the JSONL store writes
-- it. The line is the source; the other columns are for indexes and people.
CREATE TABLE {schema}.threads (
    thread   text   PRIMARY KEY,
    last_seq bigint NOT NULL CHECK (last_seq >= 0)
);
CREATE TABLE {schema}.entries (
    thread text   NOT NULL,
    seq    bigint NOT NULL CHECK (seq >= 1),
    id     text   NOT NULL,
    author text   NOT NULL,
    at     bigint NOT NULL,
    kind   text   NOT NULL,
    line   text   NOT NULL,
    PRIMARY KEY (thread, seq)
);
"#,
        },
        Migration {
            version: 2,
            name: "mirror",
            sql: r#"
-- The mirror of another store's threads, for dashboards. `last_seq` is the
-- last entry mirrored: the mirror resumes after it, and writes each batch in
-- the same transaction that moves it.
CREATE TABLE {schema}.mirror_threads (
    thread     text        PRIMARY KEY,
    last_seq   bigint      NOT NULL DEFAULT 0,
    first_at   timestamptz,
    last_at    timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {schema}.mirror_entries (
    thread text        NOT NULL,
    seq    bigint      NOT NULL,
    id     text        NOT NULL,
    author text        NOT NULL,
    at     timestamptz NOT NULL,
    kind   text        NOT NULL,
    turn   text,
    line   text        NOT NULL,
    body   jsonb       NOT NULL,
    PRIMARY KEY (thread, seq)
);
CREATE INDEX mirror_entries_kind ON {schema}.mirror_entries (kind, at);
CREATE INDEX mirror_entries_turn ON {schema}.mirror_entries (thread, turn) WHERE turn IS NOT NULL;

-- One row per turn (a run): from turn.started / turn.ended / turn.failed,
-- tokens and cost summed over its assistant messages, and the figures of
-- its signal.turn_result where the runner writes one.
CREATE TABLE {schema}.runs (
    thread             text             NOT NULL,
    turn               text             NOT NULL,
    author             text             NOT NULL,
    outcome            text             CHECK (outcome IN ('ended', 'failed')),
    status             text             GENERATED ALWAYS AS (coalesce(outcome, 'running')) STORED,
    trigger_seq        bigint,
    depth              integer,
    wake_reason        text,
    started_seq        bigint,
    started_at         timestamptz,
    ended_seq          bigint,
    ended_at           timestamptz,
    end_reason         text,
    assistant_messages integer          NOT NULL DEFAULT 0,
    tool_calls         integer          NOT NULL DEFAULT 0,
    input_tokens       bigint           NOT NULL DEFAULT 0,
    output_tokens      bigint           NOT NULL DEFAULT 0,
    cache_read_tokens  bigint           NOT NULL DEFAULT 0,
    cache_write_tokens bigint           NOT NULL DEFAULT 0,
    cost               double precision NOT NULL DEFAULT 0,
    finish_reason      text,
    rounds             integer,
    duration_ms        bigint,
    model              text,
    error              text,
    PRIMARY KEY (thread, turn)
);
CREATE INDEX runs_started ON {schema}.runs (started_at);

-- One row per tool call: the call from a pi.assistant entry, its outcome
-- from the pi.tool_result entry that answers it.
CREATE TABLE {schema}.tool_executions (
    thread      text        NOT NULL,
    call_id     text        NOT NULL,
    turn        text,
    author      text        NOT NULL,
    tool        text        NOT NULL,
    arguments   jsonb,
    call_seq    bigint,
    called_at   timestamptz,
    result_seq  bigint,
    finished_at timestamptz,
    is_error    boolean,
    status      text        GENERATED ALWAYS AS (
        CASE WHEN is_error IS NULL THEN 'pending' WHEN is_error THEN 'error' ELSE 'ok' END
    ) STORED,
    result_text text,
    PRIMARY KEY (thread, call_id)
);
CREATE INDEX tool_executions_tool ON {schema}.tool_executions (tool, called_at);

-- One row per file a patch tool call changes, with its added and removed
-- lines counted from the patch; `applied` is set when the call's result
-- arrives (a patch applies whole or not at all).
CREATE TABLE {schema}.file_mutations (
    thread        text        NOT NULL,
    call_id       text        NOT NULL,
    path          text        NOT NULL,
    turn          text,
    author        text        NOT NULL,
    change        text        NOT NULL CHECK (change IN ('added', 'modified', 'deleted', 'renamed', 'copied')),
    from_path     text,
    lines_added   integer     NOT NULL,
    lines_removed integer     NOT NULL,
    applied       boolean,
    seq           bigint      NOT NULL,
    at            timestamptz NOT NULL,
    PRIMARY KEY (thread, call_id, path)
);
CREATE INDEX file_mutations_path ON {schema}.file_mutations (path, at);
"#,
        },
        Migration {
            version: 3,
            name: "leases",
            sql: r#"
-- Leases (`PostgresLeases`): which process holds a key (a running turn) until
-- when. `expires_at` is milliseconds since the Unix epoch by the holder's
-- clock; `revision` changes with every write, from a sequence so that no
-- revision is ever given twice. A released lease's row is deleted, so the
-- table holds the leases held and the expiry index finds the lapsed ones.
CREATE SEQUENCE {schema}.lease_revisions;
CREATE TABLE {schema}.leases (
    key        text   PRIMARY KEY,
    holder     text   NOT NULL,
    expires_at bigint NOT NULL,
    revision   bigint NOT NULL
);
CREATE INDEX leases_expires_at ON {schema}.leases (expires_at);
"#,
        },
    ],
};

/// Brings `schema` up to date: creates it if needed and applies the
/// migrations it lacks. Safe to call from many processes at once.
pub(crate) async fn migrate(client: &mut Client, schema: &str) -> Result<(), StoreError> {
    MIGRATIONS
        .apply(client, schema)
        .await
        .map_err(StoreError::Backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        assert_eq!(MIGRATIONS.check(), Ok(()));
    }
}
