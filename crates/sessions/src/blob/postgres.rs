//! [`PostgresBlobStore`]: blobs as rows of a PostgreSQL table.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use roundtable_thread_stream::PostgresOptions;

use super::{BlobError, BlobInfo, BlobPath, BlobStore};
use crate::ids::SessionId;
use crate::postgres::Db;

/// The largest blob a `bytea` value holds (1 GiB, less a byte).
const MAX_BLOB_BYTES: usize = (1 << 30) - 1;

/// A [`BlobStore`] in PostgreSQL, shared by every process connected to the
/// same database (as `PostgresStore` shares the threads). Cloning gives
/// another handle on the same connection.
///
/// # Layout
///
/// One row per blob in `<schema>.session_blobs` (session, path, size,
/// bytes, the time it was stored), created by the sessions' embedded
/// migrations in the schema of the [`PostgresOptions`] (by default the
/// thread store's, `roundtable`). A blob is one `bytea` value: the upload
/// limits the engine enforces (10 MiB by default) keep it far below the
/// 1 GiB a value may hold.
///
/// # Write-once
///
/// A write is an insert that does nothing on the primary key `(session,
/// path)`, so of two writers racing for a name exactly one stores its
/// bytes and the other gets [`BlobError::AlreadyExists`]. Each write
/// carries a fresh nonce: a write whose answer was lost with its
/// connection is tried again on a new one, and a row found there with its
/// own nonce is the earlier try that landed, not another writer's.
///
/// ```no_run
/// # async fn demo() -> Result<(), roundtable_sessions::blob::BlobError> {
/// use roundtable_sessions::blob::PostgresBlobStore;
/// use roundtable_thread_stream::PostgresOptions;
///
/// let blobs =
///     PostgresBlobStore::connect("postgres://app@127.0.0.1/app", PostgresOptions::default())
///         .await?;
/// # let _ = blobs;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresBlobStore {
    db: Arc<Db>,
    sql: Arc<Statements>,
}

/// The store's statements, with the schema filled in.
struct Statements {
    insert: String,
    nonce: String,
    get: String,
    list: String,
    delete_session: String,
}

impl Statements {
    fn new(s: &str) -> Self {
        let table = format!("{s}.session_blobs");
        Self {
            insert: format!(
                "INSERT INTO {table} (session, path, size, bytes, nonce)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (session, path) DO NOTHING
                 RETURNING nonce"
            ),
            nonce: format!("SELECT nonce FROM {table} WHERE session = $1 AND path = $2"),
            get: format!("SELECT bytes FROM {table} WHERE session = $1 AND path = $2"),
            list: format!(
                "SELECT path, size FROM {table}
                 WHERE session = $1 AND (path = $2 OR starts_with(path, $2 || '/'))
                 ORDER BY path COLLATE \"C\""
            ),
            delete_session: format!("DELETE FROM {table} WHERE session = $1"),
        }
    }
}

impl fmt::Debug for PostgresBlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresBlobStore")
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
}

fn backend(operation: &'static str, message: String) -> BlobError {
    BlobError::Backend { operation, message }
}

impl PostgresBlobStore {
    /// Connects to the database at `url` (`postgres://user:password@host/db`
    /// or a `key=value` string) and creates or upgrades the sessions'
    /// tables in the schema of `options`. An error never shows the
    /// password.
    pub async fn connect(url: &str, options: PostgresOptions) -> Result<Self, BlobError> {
        let db = Db::connect(url, options)
            .await
            .map_err(|e| backend("connecting", e))?;
        let sql = Arc::new(Statements::new(&db.schema()));
        Ok(Self {
            db: Arc::new(db),
            sql,
        })
    }

    /// One try of a write, settled: whether this write (`nonce`) holds the
    /// name, whether it landed on an earlier try or another writer's does.
    async fn try_insert(
        &self,
        session: &str,
        path: &str,
        bytes: &[u8],
        nonce: &str,
    ) -> Result<bool, String> {
        let size = bytes.len() as i64;
        self.db
            .retrying("storing a blob", |client| async move {
                let inserted = client
                    .query_opt(&self.sql.insert, &[&session, &path, &size, &bytes, &nonce])
                    .await?;
                if inserted.is_some() {
                    return Ok(true);
                }
                // The name is taken: by an earlier try of this write whose
                // answer was lost, or by another writer.
                let held = client
                    .query_opt(&self.sql.nonce, &[&session, &path])
                    .await?;
                Ok(held.is_some_and(|row| row.get::<_, &str>(0) == nonce))
            })
            .await
    }
}

#[async_trait]
impl BlobStore for PostgresBlobStore {
    async fn put_new(
        &self,
        session: &SessionId,
        path: &BlobPath,
        bytes: Bytes,
    ) -> Result<(), BlobError> {
        path.check_names_a_blob()?;
        if bytes.len() > MAX_BLOB_BYTES {
            return Err(backend(
                "storing",
                format!(
                    "{path}: {} bytes is more than a PostgreSQL value holds ({MAX_BLOB_BYTES})",
                    bytes.len()
                ),
            ));
        }
        let nonce = uuid::Uuid::now_v7().simple().to_string();
        let stored = self
            .try_insert(session.as_str(), path.as_str(), &bytes, &nonce)
            .await
            .map_err(|e| backend("storing", format!("{path}: {e}")))?;
        if stored {
            Ok(())
        } else {
            Err(BlobError::AlreadyExists {
                session: session.clone(),
                path: path.clone(),
            })
        }
    }

    async fn get(&self, session: &SessionId, path: &BlobPath) -> Result<Vec<u8>, BlobError> {
        path.check_names_a_blob()?;
        let (id, name) = (session.as_str(), path.as_str());
        let row = self
            .db
            .retrying("reading a blob", |client| async move {
                client.query_opt(&self.sql.get, &[&id, &name]).await
            })
            .await
            .map_err(|e| backend("reading", format!("{path}: {e}")))?;
        match row {
            Some(row) => Ok(row.get(0)),
            None => Err(BlobError::NotFound {
                session: session.clone(),
                path: path.clone(),
            }),
        }
    }

    async fn list(
        &self,
        session: &SessionId,
        prefix: &BlobPath,
    ) -> Result<Vec<BlobInfo>, BlobError> {
        let (id, folder) = (session.as_str(), prefix.as_str());
        let rows = self
            .db
            .retrying("listing blobs", |client| async move {
                client.query(&self.sql.list, &[&id, &folder]).await
            })
            .await
            .map_err(|e| backend("listing", e))?;
        let mut found: Vec<BlobInfo> = rows
            .iter()
            .filter_map(|row| {
                // A row no path check passes (written by hand) is not a blob.
                let path = BlobPath::parse(row.get::<_, &str>(0)).ok()?;
                let size = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
                Some(BlobInfo { path, size })
            })
            .collect();
        found.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(found)
    }

    async fn delete_session(&self, session: &SessionId) -> Result<(), BlobError> {
        let id = session.as_str();
        self.db
            .retrying("deleting a session's blobs", |client| async move {
                client.execute(&self.sql.delete_session, &[&id]).await
            })
            .await
            .map(drop)
            .map_err(|e| backend("deleting a session's blobs", e))
    }
}
