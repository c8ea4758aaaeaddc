//! Where a daemon keeps its state besides the threads: callers' chat
//! settings and the users with their hashed tokens. Each lives where the
//! threads live, as a record table (`roundtable_sessions::table`): over
//! NATS a JetStream KV bucket, over PostgreSQL a table of the store's
//! schema, so every daemon on a shared store sees the same; with the JSONL
//! store, files of the data folder, this daemon's alone.
//!
//! Chat settings are read from the table at each request, so a change
//! through one daemon applies on the next request to any other. Tokens are
//! followed through the table's changes (see [`TokenAuth`]).
//!
//! [`TokenAuth`]: crate::users::TokenAuth

use std::path::Path;
use std::sync::Arc;

use roundtable_sessions::table::{FileTable, RecordTable};

use crate::config::Config;
use crate::users::Users;

/// The KV buckets of the state daemons over one NATS share.
#[cfg(feature = "nats")]
const SETTINGS_BUCKET: &str = "ROUNDTABLE_CHAT_SETTINGS";
#[cfg(feature = "nats")]
const USERS_BUCKET: &str = "ROUNDTABLE_USERS";

/// The record tables of the state daemons over one PostgreSQL share.
#[cfg(feature = "postgres")]
const SETTINGS_TABLE: &str = "chat_settings";
#[cfg(feature = "postgres")]
const USERS_TABLE: &str = "users";

/// The chat settings' log in the data folder (the JSONL store).
const SETTINGS_FILE: &str = "chat-settings.log";
/// The JSON file that held them before, imported once.
const LEGACY_SETTINGS_FILE: &str = "chat-settings.json";

/// A daemon's state.
pub(crate) struct State {
    /// Callers' chat settings, one record a caller.
    pub(crate) settings: Arc<dyn RecordTable>,
    /// Users and their hashed tokens.
    pub(crate) users: Users,
}

/// The state in the data folder `data`, for the JSONL store.
pub(crate) async fn in_folder(data: &Path) -> Result<State, String> {
    let settings = FileTable::new(data.join(SETTINGS_FILE));
    import_legacy_settings(data, &settings).await?;
    Ok(State {
        settings: Arc::new(settings),
        users: Users::in_folder(data),
    })
}

/// Copies the settings of a `chat-settings.json` (an object of records by
/// caller) into `table` when the table has no file yet, then renames the
/// old file, so settings saved before the table outlive an upgrade.
async fn import_legacy_settings(data: &Path, table: &FileTable) -> Result<(), String> {
    let legacy = data.join(LEGACY_SETTINGS_FILE);
    if table.path().exists() || !legacy.exists() {
        return Ok(());
    }
    let failed = |e: &dyn std::fmt::Display| format!("chat settings not imported: {e}");
    let text = std::fs::read(&legacy).map_err(|e| failed(&e))?;
    let records: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&text).map_err(|e| failed(&e))?;
    for (caller, settings) in records {
        table
            .put(&caller, settings.to_string())
            .await
            .map_err(|e| failed(&e))?;
    }
    let mut done = legacy.clone().into_os_string();
    done.push(".imported");
    std::fs::rename(&legacy, done).map_err(|e| failed(&e))
}

/// The state in KV buckets over the NATS connection `client`.
#[cfg(feature = "nats")]
pub(crate) async fn over_nats(
    client: async_nats::Client,
    request_timeout: std::time::Duration,
) -> Result<State, String> {
    let settings = nats_table(client.clone(), SETTINGS_BUCKET, request_timeout).await?;
    let users = nats_table(client, USERS_BUCKET, request_timeout).await?;
    Ok(State {
        settings,
        users: Users::Table(users),
    })
}

#[cfg(feature = "nats")]
async fn nats_table(
    client: async_nats::Client,
    bucket: &str,
    request_timeout: std::time::Duration,
) -> Result<Arc<dyn RecordTable>, String> {
    use roundtable_sessions::table::NatsKvTable;
    let table = NatsKvTable::open(client, bucket, request_timeout)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(table))
}

/// The state in tables of the PostgreSQL database at `url`. Errors name
/// the server, never the password.
#[cfg(feature = "postgres")]
pub(crate) async fn over_postgres(url: &str) -> Result<State, String> {
    Ok(State {
        settings: postgres_table(url, SETTINGS_TABLE).await?,
        users: Users::Table(postgres_table(url, USERS_TABLE).await?),
    })
}

#[cfg(feature = "postgres")]
async fn postgres_table(url: &str, name: &str) -> Result<Arc<dyn RecordTable>, String> {
    use roundtable_sessions::table::PostgresTable;
    use roundtable_thread_stream::PostgresOptions;
    let table = PostgresTable::connect(url, PostgresOptions::default(), name)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(table))
}

/// The users of the store `config` names, for `roundtable token`: a
/// shared store's table, else the data folder's file.
pub(crate) async fn users_of(config: &Config) -> Result<Users, String> {
    match (&config.nats, &config.postgres) {
        (None, None) => Ok(Users::in_folder(&config.data)),
        (Some(url), None) => users_over_nats(url).await,
        (None, Some(url)) => users_over_postgres(url).await,
        (Some(_), Some(_)) => {
            Err("nats and postgres both name where the sessions are kept: set only one".into())
        }
    }
}

#[cfg(feature = "nats")]
async fn users_over_nats(url: &str) -> Result<Users, String> {
    use roundtable_thread_stream::{NatsOptions, connect_nats};
    let options = NatsOptions::default();
    let client = connect_nats(url, options.connect_timeout, options.request_timeout).await?;
    let users = nats_table(client, USERS_BUCKET, options.request_timeout).await?;
    Ok(Users::Table(users))
}

#[cfg(not(feature = "nats"))]
async fn users_over_nats(_url: &str) -> Result<Users, String> {
    Err("nats: this binary was built without the nats feature".into())
}

#[cfg(feature = "postgres")]
async fn users_over_postgres(url: &str) -> Result<Users, String> {
    Ok(Users::Table(postgres_table(url, USERS_TABLE).await?))
}

#[cfg(not(feature = "postgres"))]
async fn users_over_postgres(_url: &str) -> Result<Users, String> {
    Err("postgres: this binary was built without the postgres feature".into())
}
