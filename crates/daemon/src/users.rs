//! Users and their tokens: `users.json` in the data folder holds, for each
//! token, its user and its SHA-256 (never the token itself), so a leaked
//! file opens no session. The running daemon reads the file again when it
//! changes, so `roundtable token add` and `revoke` take effect at once.
//!
//! Tokens are 256 random bits: a plain SHA-256 is enough to store them (a
//! slow password hash protects guessable secrets, which these are not).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use roundtable_server::{AccessToken, Authenticator};
use roundtable_sessions::Caller;
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
struct UsersFile {
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
}

/// The users file of a data folder.
#[derive(Debug, Clone)]
pub(crate) struct Users {
    path: PathBuf,
}

impl Users {
    /// The users file in `data`.
    pub(crate) fn in_folder(data: &Path) -> Self {
        Self {
            path: data.join(USERS_FILE),
        }
    }

    /// Every stored token (none when the file does not exist).
    pub(crate) fn list(&self) -> Result<Vec<TokenRecord>, UsersError> {
        Ok(self.read()?.tokens)
    }

    /// A new token for `user`: its record, and the token, which is shown
    /// once and kept nowhere.
    pub(crate) fn add(&self, user: &str) -> Result<(TokenRecord, AccessToken), UsersError> {
        check_user(user)?;
        let token = AccessToken::generate().map_err(|e| UsersError::Token(e.to_string()))?;
        let sha256 = digest(token.secret());
        let record = TokenRecord {
            id: format!("tok_{}", &sha256[..12]),
            user: user.to_string(),
            sha256,
            created_at: now_millis(),
        };
        let mut file = self.read()?;
        file.tokens.push(record.clone());
        self.write(&file)?;
        Ok((record, token))
    }

    /// Removes the token with id `which`, or every token of user `which`;
    /// the tokens removed.
    pub(crate) fn revoke(&self, which: &str) -> Result<Vec<TokenRecord>, UsersError> {
        let mut file = self.read()?;
        let (gone, kept) = file
            .tokens
            .into_iter()
            .partition(|t| t.id == which || t.user == which);
        file.tokens = kept;
        self.write(&file)?;
        Ok(gone)
    }

    fn read(&self) -> Result<UsersFile, UsersError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(UsersFile::default()),
            Err(source) => return Err(self.io(source)),
        };
        serde_json::from_str(&text).map_err(|e| UsersError::Damaged {
            path: self.path.clone(),
            message: e.to_string(),
        })
    }

    /// Writes the file whole, readable by this user only, through a
    /// rename so a reader never sees half of it.
    fn write(&self, file: &UsersFile) -> Result<(), UsersError> {
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
pub(crate) struct TokenAuth {
    admin: AccessToken,
    users: Users,
    known: Mutex<Known>,
}

struct Known {
    checked: Instant,
    modified: Option<SystemTime>,
    by_digest: HashMap<String, Arc<str>>,
}

impl TokenAuth {
    /// `admin` for the host, and the tokens of `users` (read now, and again
    /// whenever the file changes).
    pub(crate) fn new(admin: AccessToken, users: Users) -> Result<Self, UsersError> {
        let known = Known {
            checked: Instant::now(),
            modified: users.modified(),
            by_digest: by_digest(users.list()?),
        };
        Ok(Self {
            admin,
            users,
            known: Mutex::new(known),
        })
    }

    fn user_of(&self, token: &str) -> Option<Arc<str>> {
        let mut known = self
            .known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if known.checked.elapsed() >= RECHECK {
            known.checked = Instant::now();
            let modified = self.users.modified();
            if modified != known.modified {
                match self.users.list() {
                    Ok(tokens) => {
                        known.by_digest = by_digest(tokens);
                        known.modified = modified;
                    }
                    // The tokens known so far stay; the next look retries.
                    Err(error) => tracing::error!(%error, "users file not reloaded"),
                }
            }
        }
        known.by_digest.get(&digest(token)).cloned()
    }
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

    use super::*;

    #[test]
    fn a_token_is_stored_hashed_and_identifies_its_user_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::in_folder(dir.path());
        let (record, token) = users.add("alice").unwrap();
        let stored = std::fs::read_to_string(dir.path().join(USERS_FILE)).unwrap();
        assert!(!stored.contains(token.secret()));
        let admin = AccessToken::generate().unwrap();
        let auth = TokenAuth::new(admin.clone(), users.clone()).unwrap();
        assert_eq!(auth.authenticate(admin.secret()), Some(Caller::Host));
        assert_eq!(
            auth.authenticate(token.secret()),
            Some(Caller::user("alice"))
        );
        assert_eq!(auth.authenticate("not-a-token-at-all"), None);
        assert_eq!(users.revoke(&record.id).unwrap(), vec![record]);
        assert!(users.list().unwrap().is_empty());
    }

    #[test]
    fn a_user_id_with_odd_characters_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::in_folder(dir.path());
        assert!(matches!(users.add("a/b"), Err(UsersError::BadUser(_))));
        assert!(matches!(users.add(""), Err(UsersError::BadUser(_))));
        assert!(!dir.path().join(USERS_FILE).exists());
    }
}
