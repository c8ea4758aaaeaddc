//! The sessions' own tables in PostgreSQL (feature `postgres`): what
//! `PostgresBlobStore` and `PostgresTable` share.
//!
//! They live in the schema of the thread store beside them (the same
//! `PostgresOptions`), with migrations of their own recorded apart from
//! the thread store's (`schema.rs`). This module connects, tells a lost
//! connection from a real error, and retries idempotent requests on a new
//! connection for `PostgresOptions::retry_for`, as the thread store does.

mod schema;

use std::sync::Arc;
use std::time::Instant;

use roundtable_thread_stream::PostgresOptions;
pub(crate) use roundtable_thread_stream::postgres::{backoff, describe, is_transient};
use roundtable_thread_stream::postgres::{connect, connect_config};
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, NoTls, Socket};

/// A failure of the database, in words that never hold a password.
pub(crate) type DbError = String;

/// A connection to the sessions' tables, reopened when it is lost.
pub(crate) struct Db {
    config: Config,
    options: PostgresOptions,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("hosts", &self.config.get_hosts())
            .field("ports", &self.config.get_ports())
            .field("schema", &self.options.schema)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Connects to the database at `url` and brings the sessions' tables
    /// in the schema of `options` up to date.
    pub(crate) async fn connect(url: &str, options: PostgresOptions) -> Result<Self, DbError> {
        let config = connect_config(url, &options.schema, options.connect_timeout)?;
        let mut client = connect(&config).await?;
        schema::migrate(&mut client, &options.schema).await?;
        Ok(Self {
            config,
            options,
            client: tokio::sync::Mutex::new(Some(Arc::new(client))),
        })
    }

    /// The schema, quoted for statements.
    pub(crate) fn schema(&self) -> String {
        quote(&self.options.schema)
    }

    /// The `NOTIFY` channel of the record tables of this schema.
    pub(crate) fn records_channel(&self) -> String {
        format!("{}_records", self.options.schema)
    }

    /// Where to connect, for a connection of one's own (a listener).
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The settings the database was opened with.
    pub(crate) fn options(&self) -> &PostgresOptions {
        &self.options
    }

    /// The current connection, reconnecting when the last one was lost.
    async fn client(&self) -> Result<Arc<Client>, tokio_postgres::Error> {
        let mut current = self.client.lock().await;
        if let Some(client) = current.as_ref()
            && !client.is_closed()
        {
            return Ok(client.clone());
        }
        *current = None;
        let client = Arc::new(open(&self.config, |_, _| {}, || {}).await?);
        *current = Some(client.clone());
        Ok(client)
    }

    /// Drops `client` (its connection failed) so the next call reconnects.
    async fn discard(&self, client: &Arc<Client>) {
        let mut current = self.client.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
            *current = None;
        }
    }

    /// Runs an idempotent request, retrying on a new connection while the
    /// connection is lost, for up to `retry_for`; the error names `what`.
    pub(crate) async fn retrying<T, F, Fut>(&self, what: &str, request: F) -> Result<T, DbError>
    where
        F: Fn(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            let error = match self.client().await {
                Ok(client) => match request(client.clone()).await {
                    Ok(value) => return Ok(value),
                    Err(error) => {
                        if is_transient(&error) {
                            self.discard(&client).await;
                        }
                        error
                    }
                },
                Err(error) => error,
            };
            if !is_transient(&error) || started.elapsed() >= self.options.retry_for {
                return Err(format!("PostgreSQL {what}: {}", describe(&error)));
            }
            tracing::debug!(error = %describe(&error), what, "retrying on a new connection");
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
        }
    }
}

/// Opens a connection driven in the background, passing its notifications
/// to `on_notification` (a channel and a payload) and calling `on_end`
/// when it ends (a listener must learn that it no longer listens).
pub(crate) async fn open(
    config: &Config,
    on_notification: impl Fn(&str, &str) + Send + 'static,
    on_end: impl FnOnce() + Send + 'static,
) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    drive(connection, on_notification, on_end);
    Ok(client)
}

/// Drives a connection until it ends, handing on its notifications.
fn drive(
    mut connection: Connection<Socket, NoTlsStream>,
    on_notification: impl Fn(&str, &str) + Send + 'static,
    on_end: impl FnOnce() + Send + 'static,
) {
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = futures::StreamExt::next(&mut messages).await {
            match message {
                Ok(AsyncMessage::Notification(n)) => on_notification(n.channel(), n.payload()),
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(%error, "PostgreSQL connection ended");
                    break;
                }
            }
        }
        // The connection goes first, so its client reads as closed.
        drop(messages);
        on_end();
    });
}

/// Quotes an identifier (already checked to be a plain lower-case name).
fn quote(ident: &str) -> String {
    format!("\"{ident}\"")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn a_bad_url_or_schema_is_refused_without_its_password() {
        let options = PostgresOptions::default();
        let err = Db::connect("postgres://u:hunter2@[::1", options.clone())
            .await
            .unwrap_err();
        assert!(err.contains("invalid PostgreSQL URL"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let bad = PostgresOptions {
            schema: "Bad".into(),
            ..options
        };
        let err = Db::connect("postgres://u:hunter2@127.0.0.1:1/db", bad)
            .await
            .unwrap_err();
        assert!(err.contains("schema"), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_named_without_the_password() {
        let port = roundtable_test_support::ports::free_port();
        let options = PostgresOptions {
            connect_timeout: std::time::Duration::from_secs(2),
            ..PostgresOptions::default()
        };
        let url = format!("postgres://u:hunter2@127.0.0.1:{port}/db");
        let err = Db::connect(&url, options).await.unwrap_err();
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}
