//! [`PostgresTable`]: a record table in PostgreSQL, shared by every daemon
//! on the same database (as `PostgresStore` shares the threads). Each
//! daemon keeps what it loaded in memory and follows the others' changes
//! through `LISTEN/NOTIFY`.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use roundtable_thread_stream::PostgresOptions;
use tokio::sync::{Notify, mpsc};
use tokio_postgres::{Client, IsolationLevel};

use super::{RecordTable, TableChange, TableError, Versioned};
use crate::postgres::{Db, backoff, describe, open};

/// Changes a follower holds before its reader takes them.
const CHANGES_BUFFERED: usize = 256;

/// A [`RecordTable`] in PostgreSQL: the rows of one table name in
/// `<schema>.records` (table name, key, value), created by the sessions'
/// embedded migrations in the schema of the [`PostgresOptions`] (by
/// default the thread store's, `roundtable`). Several tables live side by
/// side under different names.
///
/// # Writes
///
/// Every write is one statement, so one transaction: it moves the table's
/// revision in `<schema>.record_tables` (whose row lock serialises the
/// writers of a table across daemons, so revisions are given in commit
/// order), stamps the rows it writes with it, and notifies the schema's
/// channel (`<schema>_records`) with the table's name. A
/// [`replace_all`](RecordTable::replace_all) also marks the table
/// complete: until one has, [`load`](RecordTable::load) answers that there
/// is no usable copy.
///
/// # Following other daemons
///
/// [`changes`](RecordTable::changes) listens on the channel over a
/// connection of its own. A notification is only a wake-up: the follower
/// reads the rows stamped after the last revision it saw, and when the
/// table holds fewer keys than it knows, which keys went. It also reads
/// every [`PostgresOptions::poll_interval`] and right after its connection
/// comes back, so a lost notification delays a change but loses none.
///
/// ```no_run
/// # async fn demo() -> Result<(), roundtable_sessions::index::TableError> {
/// use roundtable_sessions::index::PostgresTable;
/// use roundtable_thread_stream::PostgresOptions;
///
/// let index = PostgresTable::connect(
///     "postgres://app@127.0.0.1/app",
///     PostgresOptions::default(),
///     "sessions",
/// )
/// .await?;
/// # let _ = index;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresTable {
    db: Arc<Db>,
    name: Arc<str>,
    sql: Arc<Statements>,
}

/// The table's statements, with the schema and channel filled in.
#[derive(Debug)]
struct Statements {
    register: String,
    complete: String,
    load: String,
    get: String,
    put: String,
    update_if: String,
    insert_if: String,
    remove: String,
    replace_all: String,
    revision: String,
    since: String,
    count: String,
    keys: String,
    listen: String,
}

impl Statements {
    fn new(s: &str, channel: &str) -> Self {
        let bump = format!(
            "UPDATE {s}.record_tables SET revision = revision + 1 WHERE name = $1 RETURNING revision"
        );
        let notify = format!("pg_notify('{channel}', $1)::text");
        Self {
            register: format!(
                "INSERT INTO {s}.record_tables (name) VALUES ($1) ON CONFLICT (name) DO NOTHING"
            ),
            complete: format!("SELECT complete FROM {s}.record_tables WHERE name = $1"),
            load: format!("SELECT key, value FROM {s}.records WHERE table_name = $1"),
            get: format!(
                "SELECT value, revision FROM {s}.records WHERE table_name = $1 AND key = $2"
            ),
            put: format!(
                "WITH rev AS ({bump})
                 INSERT INTO {s}.records (table_name, key, value, revision)
                 SELECT $1, $2, $3, rev.revision FROM rev
                 ON CONFLICT (table_name, key)
                 DO UPDATE SET value = EXCLUDED.value, revision = EXCLUDED.revision
                 RETURNING {notify}"
            ),
            // The compare-and-set writes: the row is written, and the
            // change notified, only when it is still at `$4` (or absent).
            // A writer that waited for another's row sees the row as that
            // one left it, so of two at once only one matches.
            update_if: format!(
                "WITH rev AS ({bump}),
                 w AS (UPDATE {s}.records AS r SET value = $3, revision = rev.revision
                       FROM rev WHERE r.table_name = $1 AND r.key = $2 AND r.revision = $4
                       RETURNING r.revision)
                 SELECT w.revision, {notify} FROM w"
            ),
            insert_if: format!(
                "WITH rev AS ({bump}),
                 w AS (INSERT INTO {s}.records (table_name, key, value, revision)
                       SELECT $1, $2, $3, rev.revision FROM rev
                       ON CONFLICT (table_name, key) DO NOTHING
                       RETURNING revision)
                 SELECT w.revision, {notify} FROM w"
            ),
            remove: format!(
                "WITH rev AS ({bump}),
                 gone AS (DELETE FROM {s}.records WHERE table_name = $1 AND key = $2)
                 SELECT {notify} FROM rev"
            ),
            replace_all: format!(
                "WITH rev AS (UPDATE {s}.record_tables SET revision = revision + 1, complete = true
                              WHERE name = $1 RETURNING revision),
                 gone AS (DELETE FROM {s}.records
                          WHERE table_name = $1 AND NOT (key = ANY ($2::text[]))),
                 put AS (INSERT INTO {s}.records (table_name, key, value, revision)
                         SELECT $1, b.key, b.value, rev.revision
                         FROM rev, unnest($2::text[], $3::text[]) AS b(key, value)
                         ON CONFLICT (table_name, key)
                         DO UPDATE SET value = EXCLUDED.value, revision = EXCLUDED.revision)
                 SELECT {notify} FROM rev"
            ),
            revision: format!("SELECT revision FROM {s}.record_tables WHERE name = $1"),
            since: format!(
                "SELECT key, value FROM {s}.records WHERE table_name = $1 AND revision > $2"
            ),
            count: format!("SELECT count(*) FROM {s}.records WHERE table_name = $1"),
            keys: format!("SELECT key FROM {s}.records WHERE table_name = $1"),
            listen: format!("LISTEN \"{channel}\""),
        }
    }
}

fn backend(what: &str, message: String) -> TableError {
    TableError::Backend(format!("{what}: {message}"))
}

/// Checks a table name: it is the payload of the table's notifications.
fn check_name(name: &str) -> Result<(), TableError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(TableError::Backend(format!(
            "invalid record table name {name:?}: use 1 to 64 of A-Z, a-z, 0-9, '_', '-' and '.'"
        )))
    }
}

impl PostgresTable {
    /// Connects to the database at `url` (`postgres://user:password@host/db`
    /// or a `key=value` string), creates or upgrades the sessions' tables in
    /// the schema of `options`, and opens the record table `name` (1 to 64
    /// of `A-Z`, `a-z`, `0-9`, `_`, `-` and `.`). An error never shows the
    /// password.
    pub async fn connect(
        url: &str,
        options: PostgresOptions,
        name: &str,
    ) -> Result<Self, TableError> {
        check_name(name)?;
        let opening = format!("opening record table {name}");
        let db = Db::connect(url, options)
            .await
            .map_err(|e| backend(&opening, e))?;
        let sql = Arc::new(Statements::new(&db.schema(), &db.records_channel()));
        let table = Self {
            db: Arc::new(db),
            name: Arc::from(name),
            sql,
        };
        table
            .execute(&opening, &table.sql.register, &[])
            .await
            .map_err(|e| backend(&opening, e))?;
        Ok(table)
    }

    /// Runs a statement of this table (`sql`, whose `$1` is the table's
    /// name and the rest `params`) and answers its rows.
    async fn query(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, TableError> {
        let name: &str = &self.name;
        self.db
            .retrying(what, |client| async move {
                let mut all: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&name];
                all.extend_from_slice(params);
                client.query(sql, &all).await
            })
            .await
            .map_err(|e| backend(what, e))
    }

    /// Runs a write of this table (see [`query`](Self::query)) and tells
    /// how many rows it answered.
    async fn execute(
        &self,
        what: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<usize, String> {
        let name: &str = &self.name;
        self.db
            .retrying(what, |client| async move {
                let mut all: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&name];
                all.extend_from_slice(params);
                client.query(sql, &all).await.map(|rows| rows.len())
            })
            .await
    }

    fn writing(&self) -> String {
        format!("writing record table {}", self.name)
    }
}

#[async_trait]
impl RecordTable for PostgresTable {
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError> {
        let reading = format!("reading record table {}", self.name);
        let name: &str = &self.name;
        let complete = self
            .db
            .retrying(&reading, |client| async move {
                client.query_opt(&self.sql.complete, &[&name]).await
            })
            .await
            .map_err(|e| backend(&reading, e))?
            .is_some_and(|row| row.get::<_, bool>(0));
        if !complete {
            return Ok(None);
        }
        let rows = self
            .db
            .retrying(&reading, |client| async move {
                client.query(&self.sql.load, &[&name]).await
            })
            .await
            .map_err(|e| backend(&reading, e))?;
        Ok(Some(rows.iter().map(|r| (r.get(0), r.get(1))).collect()))
    }

    async fn records(&self) -> Result<Vec<(String, String)>, TableError> {
        let reading = format!("reading record table {}", self.name);
        let rows = self.query(&reading, &self.sql.load, &[]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>, TableError> {
        let reading = format!("reading record table {}", self.name);
        let rows = self.query(&reading, &self.sql.get, &[&key]).await?;
        Ok(rows.first().map(|row| Versioned {
            value: row.get(0),
            revision: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
        }))
    }

    async fn put_if(
        &self,
        key: &str,
        value: String,
        expected: Option<u64>,
    ) -> Result<Option<u64>, TableError> {
        let writing = self.writing();
        let rows = match expected {
            Some(revision) => {
                // No row holds a revision past i64: nothing can match it.
                let Ok(revision) = i64::try_from(revision) else {
                    return Ok(None);
                };
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                    [&key, &value, &revision];
                self.query(&writing, &self.sql.update_if, &params).await?
            }
            None => {
                self.query(&writing, &self.sql.insert_if, &[&key, &value])
                    .await?
            }
        };
        Ok(rows
            .first()
            .map(|row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)))
    }

    async fn put(&self, key: &str, value: String) -> Result<(), TableError> {
        let writing = self.writing();
        let written = self
            .execute(&writing, &self.sql.put, &[&key, &value])
            .await
            .map_err(|e| backend(&writing, e))?;
        if written == 0 {
            return Err(backend(&writing, "the table is not registered".into()));
        }
        Ok(())
    }

    async fn remove(&self, key: &str) -> Result<(), TableError> {
        let writing = self.writing();
        self.execute(&writing, &self.sql.remove, &[&key])
            .await
            .map(drop)
            .map_err(|e| backend(&writing, e))
    }

    async fn replace_all(&self, records: Vec<(String, String)>) -> Result<(), TableError> {
        // One row per key (the last value given wins), as one statement.
        let records: std::collections::BTreeMap<String, String> = records.into_iter().collect();
        let (keys, values): (Vec<String>, Vec<String>) = records.into_iter().unzip();
        let writing = self.writing();
        self.execute(&writing, &self.sql.replace_all, &[&keys, &values])
            .await
            .map(drop)
            .map_err(|e| backend(&writing, e))
    }

    async fn changes(&self) -> Result<Option<BoxStream<'static, TableChange>>, TableError> {
        let watching = format!("watching record table {}", self.name);
        let (mut client, wake) = self.listen().await.map_err(|e| backend(&watching, e))?;
        let (out, mut changes) = mpsc::channel(CHANGES_BUFFERED);
        let mut follower = Follower {
            table: self.clone(),
            keys: HashSet::new(),
            revision: 0,
            out,
        };
        follower
            .start(&mut client)
            .await
            .map_err(|e| backend(&watching, describe(&e)))?;
        tokio::spawn(follower.run(client, wake));
        let stream = futures::stream::poll_fn(move |cx| changes.poll_recv(cx));
        Ok(Some(stream.boxed()))
    }
}

impl PostgresTable {
    /// A connection of its own listening on the records channel, and what
    /// it wakes when this table changes or the connection ends.
    async fn listen(&self) -> Result<(Client, Arc<Notify>), String> {
        let wake = Arc::new(Notify::new());
        let (channel, name, woken) = (self.db.records_channel(), self.name.clone(), wake.clone());
        let ended = wake.clone();
        let on_notification = move |on: &str, payload: &str| {
            if on == channel && payload == &*name {
                woken.notify_one();
            }
        };
        let client = open(self.db.config(), on_notification, move || {
            ended.notify_one()
        })
        .await
        .map_err(|e| describe(&e))?;
        client
            .batch_execute(&self.sql.listen)
            .await
            .map_err(|e| describe(&e))?;
        Ok((client, wake))
    }
}

/// Follows one table for a reader of [`RecordTable::changes`]: the keys it
/// has told the reader about and the revision it has read up to.
struct Follower {
    table: PostgresTable,
    keys: HashSet<String>,
    revision: i64,
    out: mpsc::Sender<TableChange>,
}

impl Follower {
    /// Takes the table as it is now as the point the changes start from.
    async fn start(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        let name: &str = &self.table.name;
        let sql = &self.table.sql;
        let tx = snapshot(client).await?;
        self.revision = tx
            .query_opt(&sql.revision, &[&name])
            .await?
            .map_or(0, |row| row.get(0));
        let rows = tx.query(&sql.keys, &[&name]).await?;
        self.keys = rows.iter().map(|row| row.get(0)).collect();
        tx.commit().await
    }

    /// Reads what changed at each wake-up, poll or reconnection, until the
    /// reader is gone.
    async fn run(mut self, mut client: Client, mut wake: Arc<Notify>) {
        let poll = self.table.db.options().poll_interval;
        let mut now = false;
        loop {
            if !now {
                tokio::select! {
                    _ = self.out.closed() => return,
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(poll) => {}
                }
            }
            if client.is_closed() {
                let Some((reopened, woken)) = self.reconnect().await else {
                    return;
                };
                (client, wake) = (reopened, woken);
            }
            match self.sync(&mut client).await {
                Ok(changes) => {
                    for change in changes {
                        if self.out.send(change).await.is_err() {
                            return;
                        }
                    }
                    now = false;
                }
                Err(error) => {
                    tracing::debug!(error = %describe(&error), table = %self.table.name, "record table not read");
                    now = client.is_closed();
                }
            }
        }
    }

    /// Listens again after the connection was lost, trying until it works
    /// or the reader is gone.
    async fn reconnect(&self) -> Option<(Client, Arc<Notify>)> {
        let mut attempt = 0;
        loop {
            tokio::select! {
                _ = self.out.closed() => return None,
                _ = tokio::time::sleep(backoff(attempt)) => {}
            }
            match self.table.listen().await {
                Ok(listening) => return Some(listening),
                Err(error) => {
                    tracing::debug!(%error, table = %self.table.name, "record table listener not back yet");
                }
            }
            attempt = attempt.saturating_add(1);
        }
    }

    /// The changes since the last revision read, from one snapshot: the
    /// records written since, then the keys gone when the table holds fewer
    /// than those known (a key written since is known, so fewer means
    /// some went).
    async fn sync(
        &mut self,
        client: &mut Client,
    ) -> Result<Vec<TableChange>, tokio_postgres::Error> {
        let name: &str = &self.table.name;
        let sql = &self.table.sql;
        let tx = snapshot(client).await?;
        let revision: i64 = tx
            .query_opt(&sql.revision, &[&name])
            .await?
            .map_or(0, |row| row.get(0));
        if revision == self.revision {
            return Ok(Vec::new());
        }
        let mut changes = Vec::new();
        for row in tx.query(&sql.since, &[&name, &self.revision]).await? {
            let (key, value): (String, String) = (row.get(0), row.get(1));
            self.keys.insert(key.clone());
            changes.push(TableChange::Put(key, value));
        }
        let count: i64 = tx.query_one(&sql.count, &[&name]).await?.get(0);
        if usize::try_from(count).ok() != Some(self.keys.len()) {
            let rows = tx.query(&sql.keys, &[&name]).await?;
            let present: HashSet<String> = rows.iter().map(|row| row.get(0)).collect();
            changes.extend(
                self.keys
                    .difference(&present)
                    .map(|key| TableChange::Removed(key.clone())),
            );
            self.keys = present;
        }
        tx.commit().await?;
        self.revision = revision;
        Ok(changes)
    }
}

/// A read-only transaction whose reads all see one moment.
async fn snapshot(
    client: &mut Client,
) -> Result<tokio_postgres::Transaction<'_>, tokio_postgres::Error> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
}
