//! Connections to PostgreSQL: opening one (with its background driver),
//! telling a lost connection from a real error, and the retry pace.

use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, NoTls, Socket};

use crate::StoreError;

/// The settings for a connection to `url` (`postgres://user@host:port/db`
/// or `host=... user=...`) keeping tables in `schema`, which is checked.
/// The error never holds the password.
pub fn connect_config(
    url: &str,
    schema: &str,
    connect_timeout: Duration,
) -> Result<Config, String> {
    check_schema(schema)?;
    let mut config: Config = url
        .parse()
        .map_err(|e| format!("invalid PostgreSQL URL: {e}"))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(connect_timeout);
    }
    config.application_name("roundtable");
    Ok(config)
}

/// Opens a first connection, driven in the background: the error names
/// the server but never the password.
pub async fn connect(config: &Config) -> Result<Client, String> {
    open_client(config).await.map_err(|e| {
        format!(
            "cannot connect to PostgreSQL at {}: {}",
            describe_target(config),
            describe(&e)
        )
    })
}

/// Where a connection goes, for error messages (never the password).
fn describe_target(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// Opens a connection and returns its client and the connection itself,
/// which the caller must drive (see [`drive`]).
pub(crate) async fn open(
    config: &Config,
) -> Result<(Client, Connection<Socket, NoTlsStream>), tokio_postgres::Error> {
    config.connect(NoTls).await
}

/// Drives a connection in the background, passing its notifications to
/// `on_notification` (a channel and a payload); the task ends when the
/// connection does.
pub(crate) fn drive(
    mut connection: Connection<Socket, NoTlsStream>,
    on_notification: impl Fn(&str, &str) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = futures::StreamExt::next(&mut messages).await {
            match message {
                Ok(AsyncMessage::Notification(n)) => on_notification(n.channel(), n.payload()),
                Ok(AsyncMessage::Notice(notice)) => {
                    tracing::debug!(notice = %notice, "PostgreSQL notice");
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(%error, "PostgreSQL connection ended");
                    break;
                }
            }
        }
    })
}

/// Opens a connection driven in the background that ignores notifications.
pub(crate) async fn open_client(config: &Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = open(config).await?;
    drive(connection, |_, _| {});
    Ok(client)
}

/// Whether `error` means the connection (or the server) went away rather
/// than that the request itself was wrong: the request may be retried on a
/// new connection.
pub fn is_transient(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // No server answer at all: I/O failure, timeout, refused connection.
        None => error.as_db_error().is_none(),
        Some(code) => {
            let class = &code.code()[..2];
            // 08: connection exception; 57: operator intervention (admin or
            // crash shutdown, cannot connect now); 53: insufficient resources.
            class == "08"
                || class == "57"
                || class == "53"
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
        }
    }
}

/// A backend error naming what failed.
pub(crate) fn backend(what: &str, error: &tokio_postgres::Error) -> StoreError {
    StoreError::Backend(format!("PostgreSQL {what}: {}", describe(error)))
}

/// The error with the server's message when there is one (the plain
/// `Display` of a server error says only "db error").
pub fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{error}: {}", db.message()),
        None => error.to_string(),
    }
}

/// How long to wait before retry `attempt` (0-based): 50 ms doubling up to 1 s.
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1u64 << attempt.min(5)).min(1000))
}

/// `text` as PostgreSQL `text` accepts it: a NUL character (which JSON
/// strings may hold, and `text` may not) becomes U+FFFD.
pub(crate) fn pg_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Quotes an identifier (already checked to be a plain lower-case name).
pub(crate) fn quote(ident: &str) -> String {
    format!("\"{ident}\"")
}

/// Checks a schema name: a plain lower-case SQL identifier, so it can be
/// put into statements and channel names as it is.
fn check_schema(schema: &str) -> Result<(), String> {
    let ok = !schema.is_empty()
        && schema.len() <= 48
        && schema
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid PostgreSQL schema name {schema:?}: use 1 to 48 of a-z, 0-9 and _, not starting with a digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["roundtable", "rt_2", "_x"] {
            assert!(check_schema(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Roundtable",
            "2rt",
            "a-b",
            "a\"b",
            "a b",
            &"x".repeat(49),
        ] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(50));
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(10), Duration::from_secs(1));
    }

    #[test]
    fn a_bad_url_or_schema_is_refused_without_its_password() {
        let timeout = Duration::from_secs(1);
        let err = connect_config("postgres://u:hunter2@[::1", "rt", timeout).unwrap_err();
        assert!(err.contains("invalid PostgreSQL URL"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let err = connect_config("postgres://u:hunter2@127.0.0.1/db", "Bad", timeout).unwrap_err();
        assert!(err.contains("schema"), "{err}");
    }
}
