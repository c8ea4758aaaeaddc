//! What a PostgreSQL store's handles and subscriptions share: the
//! connection with its prepared statements, reconnected when it is lost,
//! and the reads every part of the store makes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_postgres::{Client, Config, Statement};

use super::connection::{
    backend, backoff, connect, connect_config, describe, is_transient, open_client, quote,
};
use super::listener::{Tips, channel};
use super::options::PostgresOptions;
use super::schema::migrate;
use crate::lease::LeaseStatements;
use crate::{Entry, StoreError, ThreadId};

/// What a store's handles, subscriptions and leases share.
pub(crate) struct Inner {
    pub(super) config: Config,
    pub(super) options: PostgresOptions,
    pub(super) session: tokio::sync::Mutex<Option<Arc<Session>>>,
    pub(crate) tips: Arc<Tips>,
    pub(super) closed: watch::Sender<bool>,
}

/// One connection with the store's statements prepared on it.
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(super) append_any: Statement,
    pub(super) append_first: Statement,
    pub(super) append_after: Statement,
    pub(super) read: Statement,
    pub(super) last_seq: Statement,
    pub(super) list: Statement,
    pub(super) find: Statement,
    /// The statements of [`PostgresLeases`](crate::lease::PostgresLeases).
    pub(crate) leases: LeaseStatements,
}

/// The statement that appends a batch: `tip` moves the thread's last seq
/// (or finds the expectation unmet and returns no row), `ins` writes the
/// entries after the old tip, and the final select notifies followers and
/// returns the new last seq. One statement is one transaction: the batch is
/// written whole or not at all.
///
/// Parameters: $1 thread, $2 batch size, $3 expected last seq (unused by
/// the `Any` form), $4..$8 the entries' ids, authors, times, kinds and lines
/// without their leading `{"seq":N` (see `line_tail` in `store.rs`).
pub(super) fn append_sql(schema: &str, tip: &str) -> String {
    let s = quote(schema);
    let channel = channel(schema);
    format!(
        r#"WITH tip AS ({tip}),
ins AS (
    INSERT INTO {s}.entries (thread, seq, id, author, at, kind, line)
    SELECT $1, tip.last_seq - $2 + b.ord, b.id, b.author, b.at, b.kind,
           '{{"seq":' || (tip.last_seq - $2 + b.ord) || b.tail
    FROM tip, unnest($4::text[], $5::text[], $6::int8[], $7::text[], $8::text[])
         WITH ORDINALITY AS b(id, author, at, kind, tail, ord)
)
SELECT tip.last_seq, pg_notify('{channel}', $1 || ' ' || tip.last_seq)::text FROM tip"#
    )
}

impl Session {
    pub(super) async fn prepare(
        client: Client,
        schema: &str,
    ) -> Result<Self, tokio_postgres::Error> {
        let s = quote(schema);
        let any = format!(
            "INSERT INTO {s}.threads AS th (thread, last_seq) VALUES ($1, $2)
             ON CONFLICT (thread) DO UPDATE SET last_seq = th.last_seq + $2
             RETURNING last_seq, $3::int8 AS unused"
        );
        let first = format!(
            "INSERT INTO {s}.threads (thread, last_seq) VALUES ($1, $2)
             ON CONFLICT (thread) DO NOTHING
             RETURNING last_seq, $3::int8 AS unused"
        );
        let after = format!(
            "UPDATE {s}.threads SET last_seq = last_seq + $2
             WHERE thread = $1 AND last_seq = $3
             RETURNING last_seq"
        );
        Ok(Self {
            append_any: client.prepare(&append_sql(schema, &any)).await?,
            append_first: client.prepare(&append_sql(schema, &first)).await?,
            append_after: client.prepare(&append_sql(schema, &after)).await?,
            read: client
                .prepare(&format!(
                    "SELECT line FROM {s}.entries WHERE thread = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq"
                ))
                .await?,
            last_seq: client
                .prepare(&format!("SELECT last_seq FROM {s}.threads WHERE thread = $1"))
                .await?,
            list: client
                .prepare(&format!("SELECT thread FROM {s}.threads WHERE last_seq > 0"))
                .await?,
            find: client
                .prepare(&format!(
                    "SELECT seq FROM {s}.entries WHERE thread = $1 AND seq > $2 AND id = $3 ORDER BY seq LIMIT 1"
                ))
                .await?,
            leases: LeaseStatements::prepare(&client, schema).await?,
            client,
        })
    }
}

/// Seqs are `bigint`: a range end past its largest value means "to the end".
pub(super) fn to_db(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

pub(super) fn from_db(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

impl Inner {
    /// Connects to the database at `url`, creates or upgrades the tables and
    /// prepares the statements: what a store and leases opened from a URL
    /// share (the store also starts listening for appends).
    pub(crate) async fn connect(
        url: &str,
        options: PostgresOptions,
    ) -> Result<Arc<Self>, StoreError> {
        let config = connect_config(url, &options.schema, options.connect_timeout)
            .map_err(StoreError::Backend)?;
        let mut setup = connect(&config).await.map_err(StoreError::Backend)?;
        migrate(&mut setup, &options.schema).await?;
        let session = Session::prepare(setup, &options.schema)
            .await
            .map_err(|e| backend("prepare", &e))?;
        Ok(Arc::new(Self {
            config,
            options,
            session: tokio::sync::Mutex::new(Some(Arc::new(session))),
            tips: Arc::new(Tips::default()),
            closed: watch::Sender::new(false),
        }))
    }

    pub(crate) fn check_open(&self) -> Result<(), StoreError> {
        if *self.closed.borrow() {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    /// The current session, reconnecting if the last one was lost.
    pub(crate) async fn session(&self) -> Result<Arc<Session>, tokio_postgres::Error> {
        let mut current = self.session.lock().await;
        if let Some(session) = current.as_ref()
            && !session.client.is_closed()
        {
            return Ok(session.clone());
        }
        *current = None;
        let client = open_client(&self.config).await?;
        let session = Arc::new(Session::prepare(client, &self.options.schema).await?);
        *current = Some(session.clone());
        tracing::debug!("store connection (re)opened");
        Ok(session)
    }

    /// Drops `session` (its connection failed) so the next call reconnects.
    pub(crate) async fn discard(&self, session: &Arc<Session>) {
        let mut current = self.session.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, session)) {
            *current = None;
        }
    }

    /// Runs an idempotent request, retrying on a new connection while the
    /// connection is lost, for up to `retry_for`.
    pub(crate) async fn retrying<T, F, Fut>(&self, what: &str, request: F) -> Result<T, StoreError>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            let error = match self.session().await {
                Ok(session) => match request(session.clone()).await {
                    Ok(value) => return Ok(value),
                    Err(error) => {
                        if is_transient(&error) {
                            self.discard(&session).await;
                        }
                        error
                    }
                },
                Err(error) => error,
            };
            if !is_transient(&error) || started.elapsed() >= self.options.retry_for {
                return Err(backend(what, &error));
            }
            tracing::debug!(error = %describe(&error), what, "retrying on a new connection");
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
        }
    }

    /// Entries `from..=to` of `thread`, checked dense from `from`.
    pub(crate) async fn read_range(
        &self,
        thread: &ThreadId,
        from: u64,
        to: u64,
    ) -> Result<Vec<Entry>, StoreError> {
        let from = from.max(1);
        if to < from {
            return Ok(Vec::new());
        }
        let rows = self
            .retrying("read", |s| {
                let thread = thread.as_str().to_string();
                async move {
                    s.client
                        .query(&s.read, &[&thread, &to_db(from), &to_db(to)])
                        .await
                }
            })
            .await?;
        let mut entries = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let expected = from + i as u64;
            let line: &str = row.get(0);
            let corrupt = |message: String| StoreError::Corrupt {
                thread: thread.clone(),
                location: format!("entry {expected}"),
                message,
            };
            let entry: Entry = serde_json::from_str(line).map_err(|e| corrupt(e.to_string()))?;
            if entry.seq != expected || entry.thread != *thread {
                return Err(corrupt(format!(
                    "the stored line is entry {} of thread {}",
                    entry.seq, entry.thread
                )));
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    /// The thread's last seq.
    pub(crate) async fn last_seq(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        let rows = self
            .retrying("last seq", |s| {
                let thread = thread.as_str().to_string();
                async move { s.client.query(&s.last_seq, &[&thread]).await }
            })
            .await?;
        Ok(rows.first().map_or(0, |row| from_db(row.get(0))))
    }

    /// Whether the store was closed.
    pub(crate) fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// How long a call keeps retrying through a lost connection.
    pub(crate) fn retry_for(&self) -> Duration {
        self.options.retry_for
    }

    /// How often waiting subscriptions read anyway.
    pub(crate) fn poll_interval(&self) -> Duration {
        self.options.poll_interval
    }
}
