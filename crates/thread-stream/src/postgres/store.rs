//! `PostgresStore`: a [`ThreadStore`] on PostgreSQL tables.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::connection::{backend, backoff, describe, is_transient, pg_text};
use super::listener;
use super::options::PostgresOptions;
use super::session::{Inner, Session, from_db, to_db};
use super::subscription;
use crate::lease::PostgresLeases;
use crate::storable::StorableBatch;
use crate::store::{EntryStream, Expect, ThreadStore};
use crate::{Entry, NewEntry, StoreError, ThreadId};

/// A [`ThreadStore`] on PostgreSQL, shared by every process connected to the
/// same database: for hosts that already run PostgreSQL.
///
/// Cloning gives another handle on the same connections.
///
/// # Tables
///
/// Everything lives in one PostgreSQL schema (`roundtable` by default),
/// created and upgraded by embedded migrations when the store connects:
/// `threads` (a thread's last seq) and `entries` (one row per entry: the line
/// exactly as the JSONL store writes it, plus id, author, time and kind
/// columns for indexes and people). The mirror's tables and the leases'
/// ([`PostgresStore::leases`]) live there too.
///
/// # Appends
///
/// An append is one SQL statement, so one transaction: it moves the thread's
/// row in `threads` (a conditional update for [`Expect::LastSeq`], an upsert
/// for [`Expect::Any`]), inserts the batch after the old last seq and sends
/// a notification. The row lock serialises writers of a thread across
/// processes, the primary key `(thread, seq)` makes a duplicate seq
/// impossible, and a writer whose expectation fails changes nothing and gets
/// [`StoreError::Conflict`]. The stored line is assembled in SQL from the
/// seq the database assigned and the rest of the line as [`Entry`]
/// serialises it, so it reads back byte for byte as the other stores give
/// it. When a connection drops in the middle of an append, the store
/// reconnects and looks for the batch's first entry id before it tries
/// again, so a batch that did commit is not written twice.
///
/// # Subscriptions
///
/// Appends `NOTIFY` the schema's channel (`<schema>_entries`) with the
/// thread and its new last seq; one connection per store `LISTEN`s and
/// wakes that thread's subscribers, which read the rows after their own
/// cursor. A notification is only a wake-up: after the listening connection
/// comes back every subscriber reads again, and a waiting subscriber also
/// reads every [`PostgresOptions::poll_interval`], so a lost notification
/// delays entries but loses none. Reads and subscriptions ride out lost
/// connections and server restarts for [`PostgresOptions::retry_for`].
///
/// ```no_run
/// # async fn demo() -> Result<(), roundtable_thread_stream::StoreError> {
/// use roundtable_thread_stream::{
///     EntryBody, Expect, NewEntry, PostgresOptions, PostgresStore, ThreadId, ThreadStore,
/// };
///
/// let store =
///     PostgresStore::connect("postgres://app@127.0.0.1/app", PostgresOptions::default()).await?;
/// let thread = ThreadId::new("general").unwrap();
/// let hi = NewEntry::new("alice", EntryBody::chat("hi"));
/// let written = store.append(&thread, Expect::LastSeq(0), vec![hi]).await?;
/// assert_eq!(written[0].seq, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

/// The stored line of `entry` without its leading `{"seq":N`: the append
/// statement puts the seq the database assigns in front, so the stored line
/// is byte for byte the one [`Entry`]'s `Serialize` (and so the JSONL
/// store) writes. The header fields come first in every entry line, `seq`
/// first of all.
fn line_tail(thread: &ThreadId, entry: &NewEntry) -> Result<String, StoreError> {
    const PREFIX: &str = "{\"seq\":0";
    let placed = entry.clone().into_entry(thread.clone(), 0);
    let line = serde_json::to_string(&placed).map_err(|source| StoreError::Encode {
        thread: thread.clone(),
        source,
    })?;
    match line.strip_prefix(PREFIX) {
        Some(tail) if tail.starts_with(',') => Ok(tail.to_string()),
        _ => Err(StoreError::Backend(format!(
            "an entry line does not start with its seq: {}",
            line.chars().take(40).collect::<String>()
        ))),
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`,
    /// or a `key=value` string), creates or upgrades the store's tables in
    /// the schema of `options`, and starts listening for appends. A server
    /// that cannot be reached is a [`StoreError::Backend`] naming the host.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let inner = Inner::connect(url, options).await?;
        listener::spawn(
            inner.config.clone(),
            inner.options.schema.clone(),
            inner.tips.clone(),
            inner.closed.subscribe(),
        );
        Ok(Self { inner })
    }

    /// Leases in this store's database, over its connection (see
    /// [`PostgresLeases`]): for processes sharing the store to agree on who
    /// runs what.
    pub fn leases(&self) -> PostgresLeases {
        PostgresLeases::new(self.inner.clone())
    }

    fn check_open(&self) -> Result<(), StoreError> {
        self.inner.check_open()
    }

    /// One try of an append: the new last seq, None when the expectation
    /// does not hold.
    async fn try_append(
        session: &Session,
        thread: &ThreadId,
        expect: Expect,
        columns: &Columns,
    ) -> Result<Option<u64>, tokio_postgres::Error> {
        let (statement, expected) = match expect {
            Expect::Any => (&session.append_any, 0),
            Expect::LastSeq(0) => (&session.append_first, 0),
            Expect::LastSeq(n) => (&session.append_after, to_db(n)),
        };
        let count = columns.ids.len() as i64;
        let rows = session
            .client
            .query(
                statement,
                &[
                    &thread.as_str(),
                    &count,
                    &expected,
                    &columns.ids,
                    &columns.authors,
                    &columns.ats,
                    &columns.kinds,
                    &columns.tails,
                ],
            )
            .await?;
        Ok(rows.first().map(|row| from_db(row.get(0))))
    }

    /// Whether an earlier try of this append, whose answer was lost with
    /// its connection, did land: the seq its first entry got if so.
    async fn landed(
        &self,
        thread: &ThreadId,
        after: u64,
        first_id: &str,
    ) -> Result<Option<u64>, StoreError> {
        let rows = self
            .inner
            .retrying("find an append", |s| {
                let thread = thread.as_str().to_string();
                let first_id = first_id.to_string();
                async move {
                    s.client
                        .query(&s.find, &[&thread, &to_db(after), &first_id])
                        .await
                }
            })
            .await?;
        Ok(rows.first().map(|row| from_db(row.get(0))))
    }
}

/// An append batch as the statement's array parameters.
struct Columns {
    ids: Vec<String>,
    authors: Vec<String>,
    ats: Vec<i64>,
    kinds: Vec<String>,
    tails: Vec<String>,
}

impl Columns {
    fn new(thread: &ThreadId, batch: &StorableBatch) -> Result<Self, StoreError> {
        let entries = batch.entries();
        let mut columns = Columns {
            ids: Vec::with_capacity(entries.len()),
            authors: Vec::with_capacity(entries.len()),
            ats: Vec::with_capacity(entries.len()),
            kinds: Vec::with_capacity(entries.len()),
            tails: Vec::with_capacity(entries.len()),
        };
        for entry in entries {
            columns.ids.push(pg_text(&entry.id).into_owned());
            columns.authors.push(pg_text(&entry.author).into_owned());
            columns.ats.push(entry.at);
            columns.kinds.push(pg_text(&entry.body.kind()).into_owned());
            columns.tails.push(line_tail(thread, entry)?);
        }
        Ok(columns)
    }
}

#[async_trait]
impl ThreadStore for PostgresStore {
    async fn append(
        &self,
        thread: &ThreadId,
        expect: Expect,
        entries: Vec<NewEntry>,
    ) -> Result<Vec<Entry>, StoreError> {
        self.check_open()?;
        if entries.is_empty() {
            let last = self.inner.last_seq(thread).await?;
            expect.check(thread, last)?;
            return Ok(Vec::new());
        }
        let batch = StorableBatch::check(thread, entries)?;
        let count = batch.entries().len() as u64;
        let columns = Columns::new(thread, &batch)?;
        // Entries of this append land after every seq known committed now.
        let floor = match expect {
            Expect::LastSeq(n) => n,
            Expect::Any => self.inner.tips.known(thread),
        };
        let started = Instant::now();
        let mut attempt = 0;
        let mut uncertain = false;
        let last = loop {
            if uncertain && let Some(first) = self.landed(thread, floor, &columns.ids[0]).await? {
                break first + count - 1;
            }
            let error = match self.inner.session().await {
                Ok(session) => match Self::try_append(&session, thread, expect, &columns).await {
                    Ok(Some(last)) => break last,
                    Ok(None) => {
                        let actual = self.inner.last_seq(thread).await?;
                        return Err(match expect {
                            Expect::LastSeq(expected) => StoreError::Conflict {
                                thread: thread.clone(),
                                expected,
                                actual,
                            },
                            Expect::Any => StoreError::Backend(format!(
                                "append to thread {thread} was refused"
                            )),
                        });
                    }
                    Err(error) => {
                        if is_transient(&error) {
                            self.inner.discard(&session).await;
                            // The statement may have committed before its
                            // answer was lost.
                            uncertain = true;
                        }
                        error
                    }
                },
                Err(error) => error,
            };
            if !is_transient(&error) || started.elapsed() >= self.inner.options.retry_for {
                return Err(backend("append", &error));
            }
            tracing::debug!(error = %describe(&error), "append retried on a new connection");
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
        };
        self.inner.tips.advance(thread, last);
        Ok(batch.place(thread, last - count))
    }

    async fn read(
        &self,
        thread: &ThreadId,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<Entry>, StoreError> {
        self.check_open()?;
        self.inner
            .read_range(thread, *range.start(), *range.end())
            .await
    }

    async fn last_seq(&self, thread: &ThreadId) -> Result<u64, StoreError> {
        self.check_open()?;
        self.inner.last_seq(thread).await
    }

    async fn subscribe(&self, thread: &ThreadId, from: u64) -> Result<EntryStream, StoreError> {
        self.check_open()?;
        Ok(subscription::subscribe(
            self.inner.clone(),
            thread.clone(),
            from,
        ))
    }

    async fn list_threads(&self) -> Result<Vec<ThreadId>, StoreError> {
        self.check_open()?;
        let rows = self
            .inner
            .retrying("list threads", |s| async move {
                s.client.query(&s.list, &[]).await
            })
            .await?;
        let mut threads = Vec::with_capacity(rows.len());
        for row in rows {
            let name: &str = row.get(0);
            threads.push(ThreadId::new(name).map_err(|e| {
                StoreError::Backend(format!("the threads table holds a bad thread id: {e}"))
            })?);
        }
        threads.sort();
        Ok(threads)
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.inner.closed.send_replace(true);
        self.inner.tips.close_all();
        Ok(())
    }
}
