//! `PostgresLeases`: leases in a table of the store's schema, shared by every
//! process connected to the same database.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_postgres::{Client, Row, Statement};

use super::{Lease, LeaseError, Leases, check_holder, check_key, expiry, now_ms};
use crate::StoreError;
use crate::postgres::PostgresOptions;
use crate::postgres::connection::{backend, backoff, describe, is_transient, quote};
use crate::postgres::session::{Inner, Session};

/// [`Leases`] in PostgreSQL: one row per lease in `<schema>.leases` (key,
/// holder, expiry, revision), created by the store's embedded migrations.
///
/// Revisions come from one sequence, so they are never reused: a handle
/// from before a release never matches a later lease on the same key. An
/// acquire is one upsert: it inserts the key, or, when the key exists,
/// updates it only if its lease has lapsed. The row lock serialises racing
/// acquirers and each checks the expiry on the row as the one before left
/// it, so exactly one wins. Renewals and hand-overs are conditional updates
/// (`WHERE key = $1 AND revision = $2`), a release a conditional delete, and
/// [`Leases::expired`] a query on the indexed expiry.
///
/// Get one from a store ([`PostgresStore::leases`](crate::PostgresStore::leases),
/// sharing its connection) or from a URL ([`PostgresLeases::connect`]).
#[derive(Clone)]
pub struct PostgresLeases {
    inner: Arc<Inner>,
}

/// The lease statements, prepared on every store connection.
#[derive(Clone)]
pub(crate) struct LeaseStatements {
    acquire: Statement,
    update: Statement,
    release: Statement,
    expired: Statement,
}

impl LeaseStatements {
    pub(crate) async fn prepare(
        client: &Client,
        schema: &str,
    ) -> Result<Self, tokio_postgres::Error> {
        let s = quote(schema);
        let revision = format!("nextval('{s}.lease_revisions')");
        let acquire = format!(
            "INSERT INTO {s}.leases AS l (key, holder, expires_at, revision)
             VALUES ($1, $2, $3, {revision})
             ON CONFLICT (key) DO UPDATE
             SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
                 revision = EXCLUDED.revision
             WHERE l.expires_at <= $4
             RETURNING revision"
        );
        let update = format!(
            "UPDATE {s}.leases SET expires_at = $3, revision = {revision}
             WHERE key = $1 AND revision = $2
             RETURNING revision"
        );
        Ok(Self {
            acquire: client.prepare(&acquire).await?,
            update: client.prepare(&update).await?,
            release: client
                .prepare(&format!(
                    "DELETE FROM {s}.leases WHERE key = $1 AND revision = $2"
                ))
                .await?,
            expired: client
                .prepare(&format!(
                    "SELECT key, holder, expires_at, revision FROM {s}.leases
                     WHERE expires_at <= $1 ORDER BY expires_at, key"
                ))
                .await?,
        })
    }
}

/// Times and revisions are `bigint`.
fn to_db(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn from_db(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl PostgresLeases {
    /// Connects to the database at `url` (as
    /// [`PostgresStore::connect`](crate::PostgresStore::connect) does),
    /// creating or upgrading the tables in the schema of `options`.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        Ok(Self::new(Inner::connect(url, options).await?))
    }

    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        Self { inner }
    }

    /// A connection, reconnecting for up to the store's retry budget while
    /// the server cannot be reached.
    async fn session(&self) -> Result<Arc<Session>, LeaseError> {
        self.inner.check_open()?;
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            match self.inner.session().await {
                Ok(session) => return Ok(session),
                Err(e) if !is_transient(&e) || started.elapsed() >= self.inner.retry_for() => {
                    return Err(backend("lease connection", &e).into());
                }
                Err(e) => tracing::debug!(error = %describe(&e), "lease connection retried"),
            }
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
        }
    }

    /// Runs one lease write once: one whose answer was lost may have
    /// committed, so it is not tried again (see the `lease` module).
    async fn query(
        &self,
        what: &str,
        statement: impl Fn(&LeaseStatements) -> &Statement,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>, LeaseError> {
        let session = self.session().await?;
        match session
            .client
            .query(statement(&session.leases), params)
            .await
        {
            Ok(rows) => Ok(rows),
            Err(e) => {
                if is_transient(&e) {
                    self.inner.discard(&session).await;
                }
                Err(backend(what, &e).into())
            }
        }
    }

    /// Moves `lease` to `expires_at` if it is still the stored one; its new
    /// revision if so.
    async fn update(&self, lease: &Lease, expires_at: u64) -> Result<Option<u64>, LeaseError> {
        let rows = self
            .query(
                "lease update",
                |s| &s.update,
                &[&lease.key, &to_db(lease.revision()), &to_db(expires_at)],
            )
            .await?;
        Ok(rows.first().map(|row| from_db(row.get(0))))
    }
}

#[async_trait]
impl Leases for PostgresLeases {
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        check_key(key)?;
        check_holder(holder)?;
        let now = now_ms();
        let expires_at = expiry(now, ttl);
        let rows = self
            .query(
                "lease acquire",
                |s| &s.acquire,
                &[&key, &holder, &to_db(expires_at), &to_db(now)],
            )
            .await?;
        Ok(rows.first().map(|row| {
            Lease::new(
                key.to_string(),
                holder.to_string(),
                expires_at,
                from_db(row.get(0)),
            )
        }))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        let expires_at = expiry(now_ms(), ttl);
        match self.update(lease, expires_at).await? {
            Some(revision) => Ok(Lease::new(
                lease.key.clone(),
                lease.holder.clone(),
                expires_at,
                revision,
            )),
            None => Err(LeaseError::Lost {
                key: lease.key.clone(),
            }),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        // Retried through lost connections: deleting a revision twice is
        // deleting it once, as revisions are never reused.
        self.inner.check_open()?;
        let revision = to_db(lease.revision());
        self.inner
            .retrying("lease release", |s| async move {
                let statement = &s.leases.release;
                s.client.execute(statement, &[&lease.key, &revision]).await
            })
            .await?;
        Ok(())
    }

    async fn hand_over(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.update(lease, now_ms()).await.map(drop)
    }

    async fn expired(&self) -> Result<Vec<Lease>, LeaseError> {
        self.inner.check_open()?;
        let now = to_db(now_ms());
        let rows = self
            .inner
            .retrying("expired leases", |s| async move {
                s.client.query(&s.leases.expired, &[&now]).await
            })
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                Lease::new(
                    row.get(0),
                    row.get(1),
                    from_db(row.get(2)),
                    from_db(row.get(3)),
                )
            })
            .collect())
    }
}
