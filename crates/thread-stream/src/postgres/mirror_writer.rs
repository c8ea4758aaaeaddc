//! The mirror's writer: one task, one connection, one transaction per
//! round of batches.
//!
//! The thread readers hand it batches of entries and ask it where each
//! thread's mirror ends. Each round, in one transaction, it locks the
//! threads' rows in `mirror_threads`, drops the entries at or below their
//! last mirrored seq (so a batch written twice, after a lost answer or by a
//! second mirror process, is written once), inserts the rest with their
//! derived rows and moves `last_seq`. When the database is away it keeps the
//! round, reconnects with a growing pause and writes it again; the readers
//! wait meanwhile, which only holds back the mirror's own subscriptions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Statement};

use super::connection::{backoff, describe, is_transient, open_client, pg_text, quote};
use super::derive::{DeriveOptions, DerivedRow, derive_rows, entry_turn};
use super::schema::migrate;
use crate::{Entry, StoreError, ThreadId};

/// What thread readers send the writer.
pub(crate) enum WriterMsg {
    /// Where does the mirror of this thread end? (Answered once connected.)
    Cursor {
        thread: ThreadId,
        reply: oneshot::Sender<u64>,
    },
    /// Entries read from the source, in seq order.
    Batch {
        thread: ThreadId,
        entries: Vec<Entry>,
    },
}

/// What the writer reports: per-thread progress and its health.
#[derive(Default)]
pub(crate) struct Progress {
    mirrored: Mutex<HashMap<ThreadId, watch::Sender<u64>>>,
    pub(crate) connected: AtomicBool,
    pub(crate) written: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
}

impl Progress {
    /// A receiver of `thread`'s last mirrored seq.
    pub(crate) fn watch(&self, thread: &ThreadId) -> watch::Receiver<u64> {
        let mut map = self.mirrored.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(thread.clone())
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe()
    }

    /// `thread`'s last mirrored seq as last seen.
    pub(crate) fn mirrored(&self, thread: &ThreadId) -> u64 {
        let map = self.mirrored.lock().unwrap_or_else(|e| e.into_inner());
        map.get(thread).map_or(0, |m| *m.borrow())
    }

    fn set_mirrored(&self, thread: &ThreadId, seq: u64) {
        let mut map = self.mirrored.lock().unwrap_or_else(|e| e.into_inner());
        let tip = map
            .entry(thread.clone())
            .or_insert_with(|| watch::Sender::new(0));
        tip.send_if_modified(|last| {
            let forward = seq > *last;
            if forward {
                *last = seq;
            }
            forward
        });
    }

    fn failed(&self, error: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
    }
}

/// The writer's settings.
pub(crate) struct WriterSettings {
    pub(crate) config: Config,
    pub(crate) schema: String,
    pub(crate) derive: DeriveOptions,
    pub(crate) batch_size: usize,
}

/// Runs the writer until every sender is gone (or `stop` is set while the
/// database is away).
pub(crate) async fn run(
    settings: WriterSettings,
    mut inbox: mpsc::Receiver<WriterMsg>,
    progress: Arc<Progress>,
    stop: watch::Receiver<bool>,
) {
    let mut writer = Writer {
        settings,
        progress,
        connection: None,
        attempt: 0,
    };
    let mut round: Vec<WriterMsg> = Vec::new();
    loop {
        if round.is_empty() {
            match inbox.recv().await {
                Some(msg) => round.push(msg),
                None => return,
            }
        }
        writer.fill(&mut round, &mut inbox);
        match writer.write(&round).await {
            Ok(written) => writer.answer(written, &mut round),
            Err(error) => {
                writer.failed(error).await;
                if *stop.borrow() {
                    return;
                }
                tokio::time::sleep(backoff(writer.attempt)).await;
                writer.attempt += 1;
            }
        }
    }
}

/// The writer's state between rounds.
struct Writer {
    settings: WriterSettings,
    progress: Arc<Progress>,
    connection: Option<Connection>,
    /// Failed writes since the last good one.
    attempt: u32,
}

impl Writer {
    /// Adds to `round` what is already waiting, up to a batch's worth of
    /// entries.
    fn fill(&self, round: &mut Vec<WriterMsg>, inbox: &mut mpsc::Receiver<WriterMsg>) {
        let mut entries: usize = round.iter().map(WriterMsg::len).sum();
        while entries < self.settings.batch_size {
            match inbox.try_recv() {
                Ok(msg) => {
                    entries += msg.len();
                    round.push(msg);
                }
                Err(_) => break,
            }
        }
    }

    /// Writes `round`, connecting first if need be.
    async fn write(&mut self, round: &[WriterMsg]) -> Result<Written, WriteError> {
        let derive = &self.settings.derive;
        if let Some(c) = self.connection.as_mut() {
            return c.write(round, derive).await;
        }
        let mut c = Connection::open(&self.settings).await?;
        tracing::info!(
            schema = self.settings.schema,
            "mirror connected to PostgreSQL"
        );
        self.progress.connected.store(true, Ordering::Relaxed);
        let written = c.write(round, derive).await;
        self.connection = Some(c);
        written
    }

    /// Records a written round and answers its cursor requests.
    fn answer(&mut self, written: Written, round: &mut Vec<WriterMsg>) {
        let Written { cursors, entries } = written;
        self.attempt = 0;
        self.progress.written.fetch_add(entries, Ordering::Relaxed);
        for (thread, seq) in &cursors {
            self.progress.set_mirrored(thread, *seq);
        }
        tracing::debug!(entries, threads = cursors.len(), "mirrored a batch");
        for msg in round.drain(..) {
            if let WriterMsg::Cursor { thread, reply } = msg {
                let _ = reply.send(cursors.get(&thread).copied().unwrap_or(0));
            }
        }
    }

    /// Records a failed round: a lost connection is dropped (to reconnect),
    /// any other failure rolls the transaction back.
    async fn failed(&mut self, error: WriteError) {
        let lost = match &error {
            WriteError::Db(e) => is_transient(e),
            WriteError::Setup(_) => true,
        };
        let message = error.to_string();
        if lost {
            self.connection = None;
            // Said once per outage; the retries go to debug.
            if self.progress.connected.swap(false, Ordering::Relaxed) || self.attempt == 0 {
                tracing::warn!(error = %message, "mirror cannot reach PostgreSQL; retrying");
            } else {
                tracing::debug!(error = %message, attempt = self.attempt, "mirror still cannot reach PostgreSQL");
            }
        } else {
            if let Some(c) = self.connection.as_ref() {
                let _ = c.client.batch_execute("ROLLBACK").await;
            }
            tracing::error!(error = %message, "mirror write failed; retrying");
        }
        self.progress.failed(message);
    }
}

impl WriterMsg {
    fn len(&self) -> usize {
        match self {
            WriterMsg::Cursor { .. } => 0,
            WriterMsg::Batch { entries, .. } => entries.len(),
        }
    }

    fn thread(&self) -> &ThreadId {
        match self {
            WriterMsg::Cursor { thread, .. } | WriterMsg::Batch { thread, .. } => thread,
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error("{}", describe(.0))]
    Db(#[from] tokio_postgres::Error),
    #[error("{0}")]
    Setup(StoreError),
}

/// One request of a round, sent with the others.
type Request<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send + 'a>>;

/// What a round wrote: each thread's last mirrored seq, and how many
/// entries were new.
struct Written {
    cursors: HashMap<ThreadId, u64>,
    entries: u64,
}

/// The writer's connection and its prepared statements.
struct Connection {
    client: Client,
    threads: ThreadStatements,
    runs: RunStatements,
    tools: ToolStatements,
}

/// Statements on `mirror_threads` and `mirror_entries`.
struct ThreadStatements {
    lock: Statement,
    insert_entries: Statement,
    advance: Statement,
}

/// Statements on `runs`, one per [`DerivedRow`] kind that touches it.
struct RunStatements {
    started: Statement,
    ended: Statement,
    usage: Statement,
    result: Statement,
}

/// Statements on `tool_executions` and `file_mutations`.
struct ToolStatements {
    called: Statement,
    finished: Statement,
    file_changed: Statement,
}

/// A statement's parameter, owned or borrowed from the row it writes.
type Param<'a> = Box<dyn ToSql + Sync + Send + 'a>;

/// The timestamp of Unix milliseconds `$n`.
fn ts(n: u32) -> String {
    format!("to_timestamp(${n}::int8 / 1000.0)")
}

impl Connection {
    async fn open(settings: &WriterSettings) -> Result<Self, WriteError> {
        let mut client = open_client(&settings.config).await?;
        migrate(&mut client, &settings.schema)
            .await
            .map_err(WriteError::Setup)?;
        let s = quote(&settings.schema);
        Ok(Self {
            threads: ThreadStatements::prepare(&client, &s).await?,
            runs: RunStatements::prepare(&client, &s).await?,
            tools: ToolStatements::prepare(&client, &s).await?,
            client,
        })
    }
}

// Every derived statement takes $1 thread, $2 seq, $3 at (ms), $4 author.

impl ThreadStatements {
    async fn prepare(client: &Client, s: &str) -> Result<Self, tokio_postgres::Error> {
        Ok(Self {
            lock: client
                .prepare(&format!(
                    "INSERT INTO {s}.mirror_threads AS m (thread) VALUES ($1)
                     ON CONFLICT (thread) DO UPDATE SET thread = m.thread
                     RETURNING last_seq"
                ))
                .await?,
            insert_entries: client
                .prepare(&format!(
                    "INSERT INTO {s}.mirror_entries (thread, seq, id, author, at, kind, turn, line, body)
                     SELECT $1, b.seq, b.id, b.author, to_timestamp(b.at / 1000.0), b.kind, b.turn, b.line,
                            replace(b.line, '\\u0000', '\\ufffd')::jsonb
                     FROM unnest($2::int8[], $3::text[], $4::text[], $5::int8[], $6::text[], $7::text[], $8::text[])
                          AS b(seq, id, author, at, kind, turn, line)
                     ON CONFLICT (thread, seq) DO NOTHING"
                ))
                .await?,
            advance: client
                .prepare(&format!(
                    "UPDATE {s}.mirror_threads
                     SET last_seq = $2, first_at = coalesce(first_at, {first}), last_at = {last},
                         updated_at = now()
                     WHERE thread = $1",
                    first = ts(3),
                    last = ts(4)
                ))
                .await?,
        })
    }
}

impl RunStatements {
    async fn prepare(client: &Client, s: &str) -> Result<Self, tokio_postgres::Error> {
        let at = ts(3);
        Ok(Self {
            started: client
                .prepare(&format!(
                    "INSERT INTO {s}.runs AS r (thread, turn, author, trigger_seq, depth, wake_reason, started_seq, started_at)
                     VALUES ($1, $5, $4, $6, $7, $8, $2, {at})
                     ON CONFLICT (thread, turn) DO UPDATE SET
                         trigger_seq = excluded.trigger_seq, depth = excluded.depth,
                         wake_reason = excluded.wake_reason, started_seq = excluded.started_seq,
                         started_at = excluded.started_at"
                ))
                .await?,
            ended: client
                .prepare(&format!(
                    "INSERT INTO {s}.runs AS r (thread, turn, author, outcome, end_reason, ended_seq, ended_at)
                     VALUES ($1, $5, $4, $6, $7, $2, {at})
                     ON CONFLICT (thread, turn) DO UPDATE SET
                         outcome = excluded.outcome, end_reason = excluded.end_reason,
                         ended_seq = excluded.ended_seq, ended_at = excluded.ended_at"
                ))
                .await?,
            usage: client
                .prepare(&format!(
                    "INSERT INTO {s}.runs AS r (thread, turn, author, assistant_messages, tool_calls,
                         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost)
                     VALUES ($1, $5, $4, 1, $6, $7, $8, $9, $10, $11)
                     ON CONFLICT (thread, turn) DO UPDATE SET
                         assistant_messages = r.assistant_messages + 1,
                         tool_calls = r.tool_calls + excluded.tool_calls,
                         input_tokens = r.input_tokens + excluded.input_tokens,
                         output_tokens = r.output_tokens + excluded.output_tokens,
                         cache_read_tokens = r.cache_read_tokens + excluded.cache_read_tokens,
                         cache_write_tokens = r.cache_write_tokens + excluded.cache_write_tokens,
                         cost = r.cost + excluded.cost
                     RETURNING $2::int8, $3::int8"
                ))
                .await?,
            result: client
                .prepare(&format!(
                    "INSERT INTO {s}.runs AS r (thread, turn, author, finish_reason, rounds, duration_ms, model, error)
                     VALUES ($1, $5, $4, $6, $7, $8, $9, $10)
                     ON CONFLICT (thread, turn) DO UPDATE SET
                         finish_reason = excluded.finish_reason, rounds = excluded.rounds,
                         duration_ms = excluded.duration_ms, model = excluded.model,
                         error = excluded.error
                     RETURNING $2::int8, $3::int8"
                ))
                .await?,
        })
    }
}

impl ToolStatements {
    async fn prepare(client: &Client, s: &str) -> Result<Self, tokio_postgres::Error> {
        let at = ts(3);
        Ok(Self {
            called: client
                .prepare(&format!(
                    "INSERT INTO {s}.tool_executions AS t (thread, call_id, turn, author, tool, arguments, call_seq, called_at)
                     VALUES ($1, $5, $6, $4, $7, replace($8::text, '\\u0000', '\\ufffd')::jsonb, $2, {at})
                     ON CONFLICT (thread, call_id) DO UPDATE SET
                         turn = coalesce(excluded.turn, t.turn), tool = excluded.tool,
                         arguments = excluded.arguments, call_seq = excluded.call_seq,
                         called_at = excluded.called_at"
                ))
                .await?,
            finished: client
                .prepare(&format!(
                    "WITH finished AS (
                         INSERT INTO {s}.tool_executions AS t (thread, call_id, turn, author, tool, result_seq, finished_at, is_error, result_text)
                         VALUES ($1, $5, $6, $4, $7, $2, {at}, $8, $9)
                         ON CONFLICT (thread, call_id) DO UPDATE SET
                             turn = coalesce(t.turn, excluded.turn), result_seq = excluded.result_seq,
                             finished_at = excluded.finished_at, is_error = excluded.is_error,
                             result_text = excluded.result_text
                     )
                     UPDATE {s}.file_mutations SET applied = NOT $8 WHERE thread = $1 AND call_id = $5"
                ))
                .await?,
            file_changed: client
                .prepare(&format!(
                    "INSERT INTO {s}.file_mutations AS f (thread, call_id, path, turn, author, change, from_path,
                         lines_added, lines_removed, seq, at, applied)
                     VALUES ($1, $5, $6, $7, $4, $8, $9, $10, $11, $2, {at},
                             (SELECT NOT t.is_error FROM {s}.tool_executions t WHERE t.thread = $1 AND t.call_id = $5))
                     ON CONFLICT (thread, call_id, path) DO UPDATE SET
                         change = excluded.change, from_path = excluded.from_path,
                         lines_added = excluded.lines_added, lines_removed = excluded.lines_removed,
                         applied = coalesce(excluded.applied, f.applied)"
                ))
                .await?,
        })
    }
}

impl Connection {
    /// Writes one round in one transaction; the last mirrored seq of every
    /// thread in it.
    async fn write(
        &mut self,
        round: &[WriterMsg],
        derive: &DeriveOptions,
    ) -> Result<Written, WriteError> {
        let (order, mut by_thread) = by_thread(round);
        let mut written = Written {
            cursors: HashMap::with_capacity(order.len()),
            entries: 0,
        };
        self.client.batch_execute("BEGIN").await?;
        for thread in order {
            let entries = by_thread.remove(thread).unwrap_or_default();
            let (last, fresh) = self.write_thread(thread, entries, derive).await?;
            written.cursors.insert(thread.clone(), last);
            written.entries += fresh;
        }
        self.client.batch_execute("COMMIT").await?;
        Ok(written)
    }

    /// Writes the entries of `thread` it has not mirrored yet, with their
    /// derived rows; its last mirrored seq and how many entries were new.
    async fn write_thread(
        &self,
        thread: &ThreadId,
        entries: Vec<&Entry>,
        derive: &DeriveOptions,
    ) -> Result<(u64, u64), tokio_postgres::Error> {
        let row = self
            .client
            .query_one(&self.threads.lock, &[&thread.as_str()])
            .await?;
        let mirrored = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        let mut fresh: Vec<&Entry> = entries.into_iter().filter(|e| e.seq > mirrored).collect();
        fresh.sort_by_key(|e| e.seq);
        fresh.dedup_by_key(|e| e.seq);
        let (Some(first), Some(last)) = (fresh.first(), fresh.last()) else {
            return Ok((mirrored, 0));
        };
        if first.seq != mirrored + 1 {
            tracing::warn!(
                thread = %thread,
                mirrored,
                next = first.seq,
                "mirror gap: the source gave entries after a gap"
            );
        }
        // Sent together (the connection pipelines them): one round trip
        // for the thread, not one per row. Every derived statement is an
        // upsert of its own columns, so their order does not matter.
        let derived: Vec<(&Entry, DerivedRow)> = fresh
            .iter()
            .flat_map(|entry| {
                derive_rows(entry, derive)
                    .into_iter()
                    .map(move |row| (*entry, row))
            })
            .collect();
        let mut requests: Vec<Request<'_>> = Vec::with_capacity(derived.len() + 2);
        requests.push(Box::pin(self.insert_entries(thread, &fresh)));
        for (entry, row) in &derived {
            requests.push(Box::pin(self.apply(entry, row)));
        }
        requests.push(Box::pin(async {
            self.client
                .execute(
                    &self.threads.advance,
                    &[&thread.as_str(), &db_int(last.seq), &first.at, &last.at],
                )
                .await
                .map(drop)
        }));
        futures::future::try_join_all(requests).await?;
        Ok((last.seq, fresh.len() as u64))
    }

    async fn insert_entries(
        &self,
        thread: &ThreadId,
        entries: &[&Entry],
    ) -> Result<(), tokio_postgres::Error> {
        let mut seqs = Vec::with_capacity(entries.len());
        let mut ids = Vec::with_capacity(entries.len());
        let mut authors = Vec::with_capacity(entries.len());
        let mut ats = Vec::with_capacity(entries.len());
        let mut kinds = Vec::with_capacity(entries.len());
        let mut turns: Vec<Option<String>> = Vec::with_capacity(entries.len());
        let mut lines = Vec::with_capacity(entries.len());
        for entry in entries {
            seqs.push(db_int(entry.seq));
            ids.push(pg_text(&entry.id).into_owned());
            authors.push(pg_text(&entry.author).into_owned());
            ats.push(entry.at);
            kinds.push(pg_text(&entry.body.kind()).into_owned());
            turns.push(entry_turn(entry).map(|t| pg_text(t).into_owned()));
            // serde_json escapes every control character, NUL included.
            lines.push(serde_json::to_string(entry).unwrap_or_default());
        }
        self.client
            .execute(
                &self.threads.insert_entries,
                &[
                    &thread.as_str(),
                    &seqs,
                    &ids,
                    &authors,
                    &ats,
                    &kinds,
                    &turns,
                    &lines,
                ],
            )
            .await?;
        Ok(())
    }

    /// Applies one derived row of `entry`: the row's statement with the
    /// entry's thread, seq, time and author, then the row's own values.
    async fn apply(&self, entry: &Entry, row: &DerivedRow) -> Result<(), tokio_postgres::Error> {
        let (statement, values) = self.statement(row);
        let author = pg_text(&entry.author);
        let head: [&(dyn ToSql + Sync); 4] = [
            &entry.thread.as_str(),
            &db_int(entry.seq),
            &entry.at,
            &author,
        ];
        let params: Vec<&(dyn ToSql + Sync)> = head
            .into_iter()
            .chain(values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)))
            .collect();
        self.client.execute(statement, &params).await?;
        Ok(())
    }

    // Long for a reason: one flat match over the row kinds, each listing its values in order.
    /// The statement that writes `row`, and the row's values for it ($5 on).
    fn statement<'a>(&self, row: &'a DerivedRow) -> (&Statement, Vec<Param<'a>>) {
        match row {
            DerivedRow::RunStarted {
                turn,
                trigger,
                depth,
                reason,
            } => (
                &self.runs.started,
                vec![
                    Box::new(pg_text(turn)),
                    Box::new(trigger.map(db_int)),
                    Box::new(db_int32(u64::from(*depth))),
                    Box::new(reason.as_deref().map(pg_text)),
                ],
            ),
            DerivedRow::RunEnded {
                turn,
                failed,
                reason,
            } => {
                let outcome = if *failed { "failed" } else { "ended" };
                let values: Vec<Param<'a>> = vec![
                    Box::new(pg_text(turn)),
                    Box::new(outcome),
                    Box::new(pg_text(reason)),
                ];
                (&self.runs.ended, values)
            }
            DerivedRow::RunUsage {
                turn,
                usage,
                tool_calls,
            } => (
                &self.runs.usage,
                vec![
                    Box::new(pg_text(turn)),
                    Box::new(db_int32(u64::from(*tool_calls))),
                    Box::new(db_int(usage.input)),
                    Box::new(db_int(usage.output)),
                    Box::new(db_int(usage.cache_read)),
                    Box::new(db_int(usage.cache_write)),
                    Box::new(usage.cost.total),
                ],
            ),
            DerivedRow::RunResult {
                turn,
                finish_reason,
                rounds,
                duration_ms,
                model,
                error,
            } => (
                &self.runs.result,
                vec![
                    Box::new(pg_text(turn)),
                    Box::new(finish_reason.as_deref().map(pg_text)),
                    Box::new(rounds.map(|r| db_int32(u64::from(r)))),
                    Box::new(duration_ms.map(db_int)),
                    Box::new(model.as_deref().map(pg_text)),
                    Box::new(error.as_deref().map(pg_text)),
                ],
            ),
            DerivedRow::ToolCalled {
                call_id,
                turn,
                tool,
                arguments,
            } => (
                &self.tools.called,
                vec![
                    Box::new(pg_text(call_id)),
                    Box::new(turn.as_deref().map(pg_text)),
                    Box::new(pg_text(tool)),
                    Box::new(arguments.to_string()),
                ],
            ),
            DerivedRow::ToolFinished {
                call_id,
                turn,
                tool,
                is_error,
                text,
            } => (
                &self.tools.finished,
                vec![
                    Box::new(pg_text(call_id)),
                    Box::new(turn.as_deref().map(pg_text)),
                    Box::new(pg_text(tool)),
                    Box::new(*is_error),
                    Box::new(pg_text(text)),
                ],
            ),
            DerivedRow::FileChanged {
                call_id,
                turn,
                change,
                path,
                from,
                added,
                removed,
            } => (
                &self.tools.file_changed,
                vec![
                    Box::new(pg_text(call_id)),
                    Box::new(pg_text(path)),
                    Box::new(turn.as_deref().map(pg_text)),
                    Box::new(change.as_str()),
                    Box::new(from.as_deref().map(pg_text)),
                    Box::new(db_int32(u64::from(*added))),
                    Box::new(db_int32(u64::from(*removed))),
                ],
            ),
        }
    }
}

/// The round's entries by thread, and the threads in the order they first
/// appear.
fn by_thread(round: &[WriterMsg]) -> (Vec<&ThreadId>, HashMap<&ThreadId, Vec<&Entry>>) {
    let mut order: Vec<&ThreadId> = Vec::new();
    let mut by_thread: HashMap<&ThreadId, Vec<&Entry>> = HashMap::new();
    for msg in round {
        let thread = msg.thread();
        let slot = by_thread.entry(thread).or_insert_with(|| {
            order.push(thread);
            Vec::new()
        });
        if let WriterMsg::Batch { entries, .. } = msg {
            slot.extend(entries.iter());
        }
    }
    (order, by_thread)
}

/// A count or seq as `bigint`.
fn db_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A small count as `integer`.
fn db_int32(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
