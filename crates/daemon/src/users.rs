//! Users and their tokens: for each token, its user and its SHA-256 (never
//! the token itself), so a leaked copy opens no session. With the JSONL
//! store they are `users.json` in the data folder, which the running daemon
//! reads again within a second of a change; with a shared store they are
//! records of the store's `users` table (one a token), which every daemon
//! follows (see [`TokenAuth`]). Either way `roundtable token add` and
//! `revoke` take effect on every daemon at once.
//!
//! Tokens are 256 random bits: a plain SHA-256 is enough to store them (a
//! slow password hash protects guessable secrets, which these are not).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use futures::stream::BoxStream;
use roundtable_server::{AccessToken, Authenticator};
use roundtable_sessions::Caller;
use roundtable_sessions::table::{RecordTable, TableChange};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The file of users' tokens in the data folder.
pub(crate) const USERS_FILE: &str = "users.json";

/// How often, at most, the daemon looks whether the file changed.
const RECHECK: Duration = Duration::from_secs(1);

/// One token of a user, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TokenRecord {
    /// The token's public id (for `list` and `revoke`).
    pub(crate) id: String,
    /// The user it identifies.
    pub(crate) user: String,
    /// The hex SHA-256 of the token.
    pub(crate) sha256: String,
    /// When it was made, in Unix milliseconds.
    pub(crate) created_at: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Tokens {
    tokens: Vec<TokenRecord>,
}

/// Why the users file could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UsersError {
    /// Reading or writing it failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It holds something else than tokens.
    #[error("{path} is damaged: {message}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The parser's words.
        message: String,
    },
    /// A user id that cannot be one.
    #[error("user id {0:?} must be 1 to 64 letters, digits, '.', '_', '-' or '@'")]
    BadUser(String),
    /// A fresh token could not be drawn.
    #[error("{0}")]
    Token(String),
    /// The shared store's users table failed.
    #[error("users table: {0}")]
    Table(String),
}

/// Where the users and their tokens are kept.
#[derive(Debug, Clone)]
pub(crate) enum Users {
    /// `users.json` of a data folder (the JSONL store's daemon).
    File(UsersFile),
    /// One record a token (its id the key), in a table every daemon on a
    /// shared store reads.
    Table(Arc<dyn RecordTable>),
}

impl Users {
    /// The users file in `data`.
    pub(crate) fn in_folder(data: &Path) -> Self {
        Self::File(UsersFile {
            path: data.join(USERS_FILE),
        })
    }

    /// Every stored token (none when there are none yet).
    pub(crate) async fn list(&self) -> Result<Vec<TokenRecord>, UsersError> {
        match self {
            Self::File(file) => Ok(file.read()?.tokens),
            Self::Table(table) => {
                let records = table.records().await.map_err(table_error)?;
                Ok(records.iter().filter_map(|(_, v)| parse(v)).collect())
            }
        }
    }

    /// A new token for `user`: its record, and the token, which is shown
    /// once and kept nowhere.
    pub(crate) async fn add(&self, user: &str) -> Result<(TokenRecord, AccessToken), UsersError> {
        check_user(user)?;
        let token = AccessToken::generate().map_err(|e| UsersError::Token(e.to_string()))?;
        let sha256 = digest(token.secret());
        let record = TokenRecord {
            id: format!("tok_{}", &sha256[..12]),
            user: user.to_string(),
            sha256,
            created_at: now_millis(),
        };
        match self {
            Self::File(file) => {
                let mut tokens = file.read()?;
                tokens.tokens.push(record.clone());
                file.write(&tokens)?;
            }
            Self::Table(table) => {
                let value =
                    serde_json::to_string(&record).map_err(|e| UsersError::Table(e.to_string()))?;
                let created = table
                    .put_if(&record.id, value, None)
                    .await
                    .map_err(table_error)?;
                if created.is_none() {
                    return Err(UsersError::Token("a token id was drawn twice".into()));
                }
            }
        }
        Ok((record, token))
    }

    /// Removes the token with id `which`, or every token of user `which`;
    /// the tokens removed.
    pub(crate) async fn revoke(&self, which: &str) -> Result<Vec<TokenRecord>, UsersError> {
        let matches = |t: &TokenRecord| t.id == which || t.user == which;
        match self {
            Self::File(file) => {
                let mut tokens = file.read()?;
                let (gone, kept) = tokens.tokens.into_iter().partition(matches);
                tokens.tokens = kept;
                file.write(&tokens)?;
                Ok(gone)
            }
            Self::Table(table) => {
                let gone: Vec<TokenRecord> = self
                    .list()
                    .await?
                    .into_iter()
                    .filter(|t| matches(t))
                    .collect();
                for token in &gone {
                    table.remove(&token.id).await.map_err(table_error)?;
                }
                Ok(gone)
            }
        }
    }
}

/// A token's record as stored in a table (`None` when it is not one).
fn parse(value: &str) -> Option<TokenRecord> {
    serde_json::from_str(value).ok()
}

fn table_error(error: roundtable_sessions::table::TableError) -> UsersError {
    UsersError::Table(error.to_string())
}

/// `users.json` of a data folder.
#[derive(Debug, Clone)]
pub(crate) struct UsersFile {
    path: PathBuf,
}

impl UsersFile {
    fn read(&self) -> Result<Tokens, UsersError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tokens::default()),
            Err(source) => return Err(self.io(source)),
        };
        serde_json::from_str(&text).map_err(|e| UsersError::Damaged {
            path: self.path.clone(),
            message: e.to_string(),
        })
    }

    /// Writes the file whole, readable by this user only, through a
    /// rename so a reader never sees half of it.
    fn write(&self, file: &Tokens) -> Result<(), UsersError> {
        use std::io::Write;
        let text = serde_json::to_vec_pretty(file).map_err(|e| UsersError::Damaged {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let temp = self.path.with_extension("json.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut out = options.open(&temp).map_err(|e| self.io(e))?;
        out.write_all(&text)
            .and_then(|()| out.sync_all())
            .map_err(|e| self.io(e))?;
        std::fs::rename(&temp, &self.path).map_err(|e| self.io(e))
    }

    fn io(&self, source: std::io::Error) -> UsersError {
        UsersError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn modified(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }
}

fn check_user(user: &str) -> Result<(), UsersError> {
    let fits = (1..=64).contains(&user.len())
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if fits {
        Ok(())
    } else {
        Err(UsersError::BadUser(user.to_string()))
    }
}

fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Who a token is: the admin token identifies the host (every session,
/// `/metrics`), a user's token that user (their own sessions only).
///
/// The tokens are held in memory, so a request costs a hash and a lookup.
/// From `users.json` they are read again within [`RECHECK`] of a change;
/// from a shared table they follow its changes: a token added or revoked
/// through any daemon applies here as soon as the change arrives (over
/// NATS a pushed watch; over PostgreSQL a notification, or the next poll
/// of the table's revision, 5 s by default, when one was lost).
pub(crate) struct TokenAuth {
    admin: AccessToken,
    known: Known,
}

/// Where the known tokens come from.
enum Known {
    File {
        file: UsersFile,
        state: Mutex<FileTokens>,
    },
    Table(Arc<Mutex<TableTokens>>),
}

struct FileTokens {
    checked: Instant,
    modified: Option<SystemTime>,
    by_digest: HashMap<String, Arc<str>>,
}

/// The tokens of a table: their users by digest, and each id's digest
/// (a removal names the id).
#[derive(Default)]
struct TableTokens {
    by_digest: HashMap<String, Arc<str>>,
    by_id: HashMap<String, String>,
}

impl TableTokens {
    fn put(&mut self, record: TokenRecord) {
        if let Some(old) = self.by_id.insert(record.id, record.sha256.clone()) {
            self.by_digest.remove(&old);
        }
        self.by_digest.insert(record.sha256, Arc::from(record.user));
    }

    fn remove(&mut self, id: &str) {
        if let Some(digest) = self.by_id.remove(id) {
            self.by_digest.remove(&digest);
        }
    }

    fn of(records: Vec<TokenRecord>) -> Self {
        let mut tokens = Self::default();
        for record in records {
            tokens.put(record);
        }
        tokens
    }
}

impl TokenAuth {
    /// `admin` for the host, and the tokens of `users` (read now, and
    /// followed from then on).
    pub(crate) async fn open(admin: AccessToken, users: Users) -> Result<Self, UsersError> {
        let known = match users {
            Users::File(file) => {
                let state = FileTokens {
                    checked: Instant::now(),
                    modified: file.modified(),
                    by_digest: by_digest(file.read()?.tokens),
                };
                Known::File {
                    file,
                    state: Mutex::new(state),
                }
            }
            Users::Table(table) => {
                // Followed before the read, so no change falls in between.
                let changes = table.changes().await.map_err(table_error)?;
                let users = Users::Table(table.clone());
                let tokens = Arc::new(Mutex::new(TableTokens::of(users.list().await?)));
                if let Some(changes) = changes {
                    tokio::spawn(follow(table, changes, Arc::downgrade(&tokens)));
                }
                Known::Table(tokens)
            }
        };
        Ok(Self { admin, known })
    }

    fn user_of(&self, token: &str) -> Option<Arc<str>> {
        match &self.known {
            Known::File { file, state } => {
                let mut known = lock(state);
                if known.checked.elapsed() >= RECHECK {
                    known.checked = Instant::now();
                    let modified = file.modified();
                    if modified != known.modified {
                        match file.read() {
                            Ok(tokens) => {
                                known.by_digest = by_digest(tokens.tokens);
                                known.modified = modified;
                            }
                            // The tokens known so far stay; the next look retries.
                            Err(error) => tracing::error!(%error, "users file not reloaded"),
                        }
                    }
                }
                known.by_digest.get(&digest(token)).cloned()
            }
            Known::Table(tokens) => lock(tokens).by_digest.get(&digest(token)).cloned(),
        }
    }
}

/// How long a follower waits before it watches a table again whose changes
/// ended (a lost connection).
const REWATCH: Duration = Duration::from_secs(1);

/// Applies the table's changes to `tokens` as long as they are used; when
/// the changes end, watches again and reads every token anew, so that no
/// revocation is missed.
async fn follow(
    table: Arc<dyn RecordTable>,
    mut changes: BoxStream<'static, TableChange>,
    tokens: Weak<Mutex<TableTokens>>,
) {
    loop {
        while let Some(change) = changes.next().await {
            let Some(tokens) = tokens.upgrade() else {
                return;
            };
            match change {
                TableChange::Put(_, value) => {
                    if let Some(record) = parse(&value) {
                        lock(&tokens).put(record);
                    }
                }
                TableChange::Removed(id) => lock(&tokens).remove(&id),
            }
        }
        tracing::warn!("the users table's changes ended: watching again");
        loop {
            tokio::time::sleep(REWATCH).await;
            if tokens.strong_count() == 0 {
                return;
            }
            match rewatch(&table).await {
                Ok((again, read)) => {
                    if let Some(tokens) = tokens.upgrade() {
                        *lock(&tokens) = read;
                    }
                    changes = again;
                    break;
                }
                Err(error) => tracing::warn!(%error, "the users table is not watched yet"),
            }
        }
    }
}

/// The table's changes from now on and every token it holds.
async fn rewatch(
    table: &Arc<dyn RecordTable>,
) -> Result<(BoxStream<'static, TableChange>, TableTokens), UsersError> {
    let changes = table
        .changes()
        .await
        .map_err(table_error)?
        .unwrap_or_else(|| futures::stream::pending().boxed());
    let read = Users::Table(table.clone()).list().await?;
    Ok((changes, TableTokens::of(read)))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every change leaves the maps whole: a poisoned lock holds them.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn by_digest(tokens: Vec<TokenRecord>) -> HashMap<String, Arc<str>> {
    tokens
        .into_iter()
        .map(|t| (t.sha256, Arc::from(t.user)))
        .collect()
}

impl Authenticator for TokenAuth {
    fn authenticate(&self, token: &str) -> Option<Caller> {
        if self.admin.matches(token) {
            return Some(Caller::Host);
        }
        self.user_of(token).map(Caller::User)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use roundtable_sessions::table::MemoryTable;

    use super::*;

    #[tokio::test]
    async fn a_token_is_stored_hashed_and_identifies_its_user_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::in_folder(dir.path());
        let (record, token) = users.add("alice").await.unwrap();
        let stored = std::fs::read_to_string(dir.path().join(USERS_FILE)).unwrap();
        assert!(!stored.contains(token.secret()));
        let admin = AccessToken::generate().unwrap();
        let auth = TokenAuth::open(admin.clone(), users.clone()).await.unwrap();
        assert_eq!(auth.authenticate(admin.secret()), Some(Caller::Host));
        assert_eq!(
            auth.authenticate(token.secret()),
            Some(Caller::user("alice"))
        );
        assert_eq!(auth.authenticate("not-a-token-at-all"), None);
        assert_eq!(users.revoke(&record.id).await.unwrap(), vec![record]);
        assert!(users.list().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_table_keeps_tokens_hashed_and_revokes_by_user() {
        let table: Arc<dyn RecordTable> = Arc::new(MemoryTable::new());
        let users = Users::Table(table.clone());
        let (first, token) = users.add("alice").await.unwrap();
        let (second, _) = users.add("alice").await.unwrap();
        users.add("bob").await.unwrap();
        let stored = table.records().await.unwrap();
        assert!(stored.iter().all(|(_, v)| !v.contains(token.secret())));
        let admin = AccessToken::generate().unwrap();
        let auth = TokenAuth::open(admin, users.clone()).await.unwrap();
        assert_eq!(
            auth.authenticate(token.secret()),
            Some(Caller::user("alice"))
        );
        let mut gone = users.revoke("alice").await.unwrap();
        gone.sort_by(|a, b| a.id.cmp(&b.id));
        let mut expected = vec![first, second];
        expected.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(gone, expected);
        assert_eq!(users.list().await.unwrap().len(), 1);
    }

    #[test]
    fn tokens_of_a_table_follow_puts_and_removals() {
        let mut tokens = TableTokens::default();
        let record = |id: &str, sha: &str| TokenRecord {
            id: id.into(),
            user: "alice".into(),
            sha256: sha.into(),
            created_at: 0,
        };
        tokens.put(record("tok_1", "aa"));
        tokens.put(record("tok_1", "bb"));
        assert!(!tokens.by_digest.contains_key("aa"));
        tokens.remove("tok_1");
        assert!(tokens.by_digest.is_empty());
        tokens.remove("tok_unknown");
    }

    #[tokio::test]
    async fn a_user_id_with_odd_characters_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::in_folder(dir.path());
        assert!(matches!(
            users.add("a/b").await,
            Err(UsersError::BadUser(_))
        ));
        assert!(matches!(users.add("").await, Err(UsersError::BadUser(_))));
        assert!(!dir.path().join(USERS_FILE).exists());
    }
}
