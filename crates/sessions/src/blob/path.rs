//! [`BlobPath`]: where a blob lives inside its session, checked in one
//! place.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::TurnId;

/// A path that is not one a session may hold (see [`BlobPath`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path:?} is not a valid blob path: {reason}")]
pub struct InvalidBlobPath {
    /// The path given (its first 80 characters when longer).
    pub path: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The first segment of an attachment's path.
pub(crate) const ATTACHMENTS: &str = "attachments";
/// The first segment of an artifact's path.
pub(crate) const ARTIFACTS: &str = "artifacts";

/// A blob's path inside its session, such as `attachments/img_01.png` or
/// `artifacts/turn_…/shell-call_1.log`.
///
/// Paths come from clients (a message's file reference) as much as from the
/// engine, and a store turns them into file names or object names, so every
/// path is checked here, once, before anything is stored or read: it is 1
/// to [`MAX_SEGMENTS`](Self::MAX_SEGMENTS) segments joined by `/`, at most
/// [`MAX_LEN`](Self::MAX_LEN) bytes; a segment is ASCII letters, digits,
/// `.`, `_` and `-`, and does not start with `.` (so no `.`, `..` or hidden
/// name); the first segment is `attachments` or `artifacts`. Such a path
/// can only name a place inside the session's own folder, on any store;
/// anything else is an [`InvalidBlobPath`].
///
/// ```
/// use roundtable_sessions::blob::BlobPath;
///
/// let path = BlobPath::parse("attachments/img_01.png").unwrap();
/// assert_eq!(path.file_name(), "img_01.png");
/// for bad in ["../x", "attachments/../x", "/attachments/x", "attachments//x",
///             "attachments/.hidden", "events.ndjson", "attachments/a b", "attachments\\x"] {
///     assert!(BlobPath::parse(bad).is_err(), "{bad:?}");
/// }
/// ```
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct BlobPath(Arc<str>);

impl BlobPath {
    /// The most segments a path has.
    pub const MAX_SEGMENTS: usize = 4;
    /// The longest path, in bytes.
    pub const MAX_LEN: usize = 200;

    /// Checks `text`.
    pub fn parse(text: &str) -> Result<Self, InvalidBlobPath> {
        match check(text) {
            Ok(()) => Ok(Self(Arc::from(text))),
            Err(reason) => Err(InvalidBlobPath {
                path: shortened(text),
                reason,
            }),
        }
    }

    /// `attachments`: the folder of a session's uploads.
    pub fn attachments() -> Self {
        Self(Arc::from(ATTACHMENTS))
    }

    /// `artifacts/<turn>`: the folder of a turn's artifacts. (A turn id is
    /// a valid segment: a prefix and letters, digits, `_` and `-`.)
    pub fn artifacts_of(turn: &TurnId) -> Result<Self, InvalidBlobPath> {
        Self::parse(&format!("{ARTIFACTS}/{turn}"))
    }

    /// This path with `name` appended as a further segment.
    pub fn join(&self, name: &str) -> Result<Self, InvalidBlobPath> {
        Self::parse(&format!("{self}/{name}"))
    }

    /// The path's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments, first to last.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + Clone {
        self.0.split('/')
    }

    /// The last segment (for a file, its name).
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// Checks that the path can name a blob rather than only a folder of
    /// blobs: a blob lies below `attachments/` or `artifacts/`, never in
    /// their place.
    pub(crate) fn check_names_a_blob(&self) -> Result<(), InvalidBlobPath> {
        if self.0.contains('/') {
            Ok(())
        } else {
            Err(InvalidBlobPath {
                path: self.to_string(),
                reason: "it names the attachments or artifacts folder, not a file in it",
            })
        }
    }

    /// True when `prefix` is this path or a folder above it, segment by
    /// segment (`artifacts/turn_1` is not a prefix of `artifacts/turn_10/x`).
    pub fn starts_with(&self, prefix: &BlobPath) -> bool {
        self.0
            .strip_prefix(prefix.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

/// The one check of a blob path.
fn check(text: &str) -> Result<(), &'static str> {
    if text.is_empty() {
        return Err("it is empty");
    }
    if text.len() > BlobPath::MAX_LEN {
        return Err("it is longer than 200 bytes");
    }
    let mut count = 0;
    for segment in text.split('/') {
        count += 1;
        if count > BlobPath::MAX_SEGMENTS {
            return Err("it has more than 4 segments");
        }
        if segment.is_empty() {
            return Err("it has an empty segment");
        }
        if segment.starts_with('.') {
            return Err("a segment starts with '.'");
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err("only ASCII letters, digits, '.', '_' and '-' are allowed in a segment");
        }
        if count == 1 && segment != ATTACHMENTS && segment != ARTIFACTS {
            return Err("it is neither under attachments/ nor under artifacts/");
        }
    }
    Ok(())
}

/// A long bad path, cut for the error message.
fn shortened(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(80).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

impl fmt::Display for BlobPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for BlobPath {
    type Error = InvalidBlobPath;

    fn try_from(text: String) -> Result<Self, InvalidBlobPath> {
        Self::parse(&text)
    }
}

impl From<BlobPath> for String {
    fn from(path: BlobPath) -> String {
        path.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_session_pass() {
        for good in [
            "attachments",
            "artifacts",
            "attachments/img_01.png",
            "artifacts/turn_1/shell-call_1.log",
            "artifacts/turn_1/sub/x.tar.gz",
            "attachments/a..b",
        ] {
            assert_eq!(BlobPath::parse(good).unwrap().as_str(), good);
        }
        let long = format!("attachments/{}", "x".repeat(189));
        assert_eq!(long.len(), 201);
        for bad in [
            "",
            "/",
            "attachments/",
            "/attachments/x",
            "attachments//x",
            "attachments/./x",
            "attachments/../x",
            "attachments/..",
            "attachments/.x",
            "attachments/a b",
            "attachments/a\\b",
            "attachments/a:b",
            "attachments/é",
            "attachments/a\0b",
            "attachments/a/b/c/d",
            "session.json",
            "events.ndjson",
            "other/x",
            "Attachments/x",
            "..",
            long.as_str(),
        ] {
            let err = BlobPath::parse(bad).unwrap_err();
            assert_eq!(err.path, shortened(bad), "{bad:?}");
        }
        let err = BlobPath::parse(&long).unwrap_err().to_string();
        assert!(
            err.contains("longer than 200 bytes") && err.contains('…'),
            "{err}"
        );
    }

    #[test]
    fn prefixes_match_whole_segments() {
        let path = BlobPath::parse("artifacts/turn_10/x.log").unwrap();
        let p = |s: &str| BlobPath::parse(s).unwrap();
        assert!(path.starts_with(&p("artifacts")));
        assert!(path.starts_with(&p("artifacts/turn_10")));
        assert!(path.starts_with(&path));
        assert!(!path.starts_with(&p("artifacts/turn_1")));
        assert!(!path.starts_with(&p("attachments")));
        assert_eq!(path.file_name(), "x.log");
        assert_eq!(path.segments().count(), 3);
        let turn = TurnId::parse("turn_1").unwrap();
        let folder = BlobPath::artifacts_of(&turn).unwrap();
        assert_eq!(
            folder.join("a.log").unwrap().as_str(),
            "artifacts/turn_1/a.log"
        );
        assert!(folder.join("../x").is_err());
        let json = serde_json::to_string(&path).unwrap();
        assert_eq!(serde_json::from_str::<BlobPath>(&json).unwrap(), path);
        assert!(serde_json::from_str::<BlobPath>("\"../x\"").is_err());
    }
}
