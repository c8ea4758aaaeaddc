//! The server's access token: given by the host (or `ROUNDTABLE_TOKEN`),
//! or generated at start and written to a file only its user can read, as
//! Jupyter does.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::error::ServerError;

/// The environment variable an explicit token is read from.
pub const TOKEN_ENV: &str = "ROUNDTABLE_TOKEN";

/// The shortest token accepted: shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

/// The longest token accepted.
pub const MAX_TOKEN_LEN: usize = 512;

/// Where a token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenOrigin {
    /// Chosen by the host or its operator (`ROUNDTABLE_TOKEN`).
    Explicit,
    /// Generated at start.
    Generated,
}

/// A bearer token. Its text never appears in `Debug` output or logs.
///
/// Tokens are restricted to URL-unreserved characters so that the same
/// text works as a header, a cookie and a `?token=` query parameter
/// without any encoding.
#[derive(Clone)]
pub struct AccessToken {
    secret: Arc<str>,
    origin: TokenOrigin,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl AccessToken {
    /// An explicit token, checked.
    pub fn new(secret: &str) -> Result<Self, ServerError> {
        check(secret)?;
        Ok(Self {
            secret: Arc::from(secret),
            origin: TokenOrigin::Explicit,
        })
    }

    /// A fresh random token (256 bits, hex).
    pub fn generate() -> Result<Self, ServerError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| ServerError::Random(e.to_string()))?;
        let secret = hex::encode(bytes);
        Ok(Self {
            secret: Arc::from(secret),
            origin: TokenOrigin::Generated,
        })
    }

    /// The token of `ROUNDTABLE_TOKEN` when it is set (and not empty);
    /// otherwise a generated one, written to `token_file` with mode 0600
    /// (replacing what was there) so that only this user can read it.
    pub fn from_env_or_generate(token_file: &Path) -> Result<Self, ServerError> {
        let explicit = std::env::var(TOKEN_ENV).ok();
        Self::explicit_or_generate(explicit.as_deref(), token_file)
    }

    /// `explicit` when it is given (and not empty), checked; otherwise a
    /// generated token, written to `token_file` as
    /// [`write_to`](Self::write_to) does.
    pub fn explicit_or_generate(
        explicit: Option<&str>,
        token_file: &Path,
    ) -> Result<Self, ServerError> {
        match explicit.filter(|s| !s.is_empty()) {
            Some(secret) => Self::new(secret),
            None => {
                let token = Self::generate()?;
                token.write_to(token_file)?;
                Ok(token)
            }
        }
    }

    /// Writes the token to `path`, readable and writable by its owner only:
    /// written to a private temporary file beside it and renamed over it,
    /// so no other user ever sees a partly written or world-readable file.
    pub fn write_to(&self, path: &Path) -> Result<(), ServerError> {
        let failed = |source| ServerError::TokenFile {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let mut temp = path.as_os_str().to_owned();
        temp.push(format!(".{}.tmp", std::process::id()));
        let temp = std::path::PathBuf::from(temp);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let written = options.open(&temp).and_then(|mut file| {
            file.write_all(self.secret.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()
        });
        let renamed = written.and_then(|()| std::fs::rename(&temp, path));
        if renamed.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        renamed.map_err(failed)
    }

    /// The token's text (to print once, or give to a client).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Where it came from.
    pub fn origin(&self) -> TokenOrigin {
        self.origin
    }

    /// True when `presented` is this token. The comparison takes the same
    /// time wherever the first difference is, so timing reveals nothing
    /// about the token but its length.
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(self.secret.as_bytes(), presented.as_bytes())
    }
}

/// Compares two byte strings in time that depends on their lengths only.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

fn check(secret: &str) -> Result<(), ServerError> {
    let invalid = |reason| ServerError::InvalidToken {
        min: MIN_TOKEN_LEN,
        max: MAX_TOKEN_LEN,
        reason,
    };
    if secret.len() < MIN_TOKEN_LEN {
        return Err(invalid("it is too short"));
    }
    if secret.len() > MAX_TOKEN_LEN {
        return Err(invalid("it is too long"));
    }
    if !secret
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
    {
        return Err(invalid("it has other characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn explicit_tokens_are_checked() {
        assert!(AccessToken::new("0123456789abcdef").is_ok());
        for bad in [
            "short",
            "with space 0123456789",
            "semi;colon-0123456789",
            "plus+0123456789abc",
        ] {
            assert!(
                matches!(AccessToken::new(bad), Err(ServerError::InvalidToken { .. })),
                "{bad}"
            );
        }
        assert!(AccessToken::new(&"a".repeat(MAX_TOKEN_LEN + 1)).is_err());
    }

    #[test]
    fn generated_tokens_are_long_random_and_valid() {
        let a = AccessToken::generate().unwrap();
        let b = AccessToken::generate().unwrap();
        assert_eq!(a.secret().len(), 64);
        assert_ne!(a.secret(), b.secret());
        assert!(check(a.secret()).is_ok());
        assert_eq!(a.origin(), TokenOrigin::Generated);
        assert!(!format!("{a:?}").contains(a.secret()));
    }

    #[test]
    fn matching_is_exact() {
        let token = AccessToken::new("0123456789abcdef").unwrap();
        assert!(token.matches("0123456789abcdef"));
        assert!(!token.matches("0123456789abcdeF"));
        assert!(!token.matches("0123456789abcde"));
        assert!(!token.matches(""));
    }

    #[cfg(unix)]
    #[test]
    fn the_token_file_is_private_and_replaced() {
        use std::os::unix::fs::PermissionsExt;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run").join("token");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let token = AccessToken::generate().unwrap();
        token.write_to(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().trim(),
            token.secret()
        );
        // Nothing else is left beside it.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn an_explicit_token_is_used_and_no_file_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let token = AccessToken::explicit_or_generate(Some("0123456789abcdef"), &path).unwrap();
        assert_eq!(token.origin(), TokenOrigin::Explicit);
        assert!(!path.exists());
        let token = AccessToken::explicit_or_generate(Some(""), &path).unwrap();
        assert_eq!(token.origin(), TokenOrigin::Generated);
        assert!(path.exists());
        assert!(AccessToken::explicit_or_generate(Some("short"), &path).is_err());
    }
}
