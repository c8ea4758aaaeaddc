//! Attachments: files a client uploads into a session, and what a model
//! reads of them.
//!
//! An upload ([`upload`]) is checked before anything is stored: its size
//! against [`AttachmentLimits`], and its declared MIME type against its
//! bytes (the magic bytes of PNG, JPEG, GIF, WebP, PDF, WAV, MP3, Ogg and
//! ZIP; valid UTF-8 for `text/*` and JSON), because the type decides what a
//! model is later sent: a "PNG" that is not one would reach a provider as a
//! broken image block, and "text" that is binary would flood the context.
//! The file is stored in the session's [`BlobStore`] under a name the
//! store makes up (`attachments/img_01.png`, `audio_01.wav`,
//! `file_01.txt`: a kind prefix, the next free number, the extension of the
//! checked type), never one derived from the client's file name, so no
//! name a client chooses can reach a path or collide with another file.
//! The numbers of one engine come from a counter ([`UploadNumbers`]), so
//! uploads arriving together each get their own; the store's create-only write keeps an
//! upload of another process sharing the store from ever being replaced.
//!
//! A message then refers to the upload by that reference (a
//! [`FileRef`](roundtable_thread_stream::FileRef) of its `chat` entry), and
//! when a turn builds the model's request, [`resolve`] turns each reference
//! into the blocks the model reads: an image block when the model accepts
//! images, the text of a text file (cut at a limit, with a marker), and a
//! short note naming anything else. The type used there is found again
//! from the stored bytes, not taken from the message.

mod file_type;
mod resolve;
mod serve;

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use self::file_type::{BinaryType, Declared, FileKind, Sniffed, classify, normalise, sniff};
pub use self::resolve::{resolve, resolve_bytes};
pub(crate) use self::serve::content_type_of;
use crate::blob::{BlobError, BlobPath, BlobStore};
use crate::ids::SessionId;

/// How many names taken by other processes sharing the blob store an
/// upload steps over before it gives up (the uploads of this process never
/// race each other for a name: see [`UploadNumbers`]).
const NAME_ATTEMPTS: u32 = 64;

/// The numbers an engine handed out to uploads, per session and kind, so
/// that uploads arriving together each get their own (an entry per session
/// and kind uploaded to, a few bytes each).
#[derive(Debug, Default)]
pub struct UploadNumbers(Mutex<HashMap<(SessionId, &'static str), u32>>);

impl UploadNumbers {
    /// A new number for an upload of `prefix` to `session`: above `stored`
    /// (the highest listed) and above every number handed out for them
    /// before.
    fn take(&self, session: &SessionId, prefix: &'static str, stored: u32) -> u32 {
        let mut numbers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let last = numbers.entry((session.clone(), prefix)).or_insert(0);
        *last = (*last).max(stored).saturating_add(1);
        *last
    }
}

/// Limits on attachments: what an upload may weigh, and how much of a file
/// a model is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentLimits {
    /// The largest upload, in bytes. Default 10 MiB.
    pub max_upload_bytes: usize,
    /// How much of a text file is put into the model's context, in bytes;
    /// the rest is cut, with a marker naming the file. Default 32 KiB.
    pub max_inline_text_bytes: usize,
    /// The largest image sent to a model as an image; a larger one is only
    /// named. Default 3.75 MiB, whose base64 stays within the 5 MiB per
    /// image the Anthropic API takes.
    pub max_image_bytes: usize,
}

impl Default for AttachmentLimits {
    fn default() -> Self {
        Self {
            max_upload_bytes: 10 * 1024 * 1024,
            max_inline_text_bytes: 32 * 1024,
            max_image_bytes: 3 * 1024 * 1024 + 768 * 1024,
        }
    }
}

/// A stored upload: what the client refers to it by in its messages.
/// Serialises as the upload endpoint's answer,
/// `{"ref":"attachments/img_01.png","mime_type":"image/png","size":1234}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttachmentRef {
    /// The blob path, such as `attachments/img_01.png`.
    #[serde(rename = "ref")]
    pub reference: BlobPath,
    /// Its checked MIME type.
    pub mime_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// The client's name for the file, for display only (its last path
    /// segment, without control characters, at most 200 characters); it
    /// is never used to store or find the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

impl AttachmentRef {
    /// The reference as a message part of a `chat` entry.
    pub fn file_ref(&self) -> roundtable_thread_stream::FileRef {
        roundtable_thread_stream::FileRef {
            reference: self.reference.as_str().into(),
            mime_type: self.mime_type.as_str().into(),
        }
    }
}

/// Why an upload was refused. Nothing was stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    /// The file is larger than [`AttachmentLimits::max_upload_bytes`].
    #[error("the file holds {size} bytes, more than the {limit} allowed")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The file is empty.
    #[error("the file is empty")]
    Empty,
    /// The declared type is not a MIME type.
    #[error("{declared:?} is not a MIME type")]
    InvalidMimeType {
        /// What was declared (its first 80 characters).
        declared: String,
    },
    /// The declared type is not one attachments may have.
    #[error(
        "{declared} is not accepted: send images (PNG, JPEG, GIF, WebP), audio (WAV, MP3, Ogg), \
         PDF, ZIP, text/* or JSON, or application/octet-stream for any other file"
    )]
    UnsupportedType {
        /// The declared type, normalised.
        declared: String,
    },
    /// The bytes are not what the declared type says.
    #[error("the file was declared {declared} but its content is {detected}")]
    Mismatch {
        /// The declared type, normalised.
        declared: String,
        /// What the content is.
        detected: &'static str,
    },
}

/// Why [`upload`] stored nothing.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The file was refused.
    #[error(transparent)]
    Refused(#[from] AttachmentError),
    /// The blob store failed.
    #[error(transparent)]
    Store(#[from] BlobError),
    /// Other processes sharing the store took every name tried.
    #[error("no free name for an upload after {0} tries: too many uploads at once")]
    NoFreeName(u32),
}

impl AttachmentError {
    /// True when the error is about size (for the error's kind).
    pub(crate) fn is_too_large(&self) -> bool {
        matches!(self, Self::TooLarge { .. })
    }
}

/// What an upload is stored as.
#[derive(Debug, PartialEq, Eq)]
struct Checked {
    mime: String,
    prefix: &'static str,
    extension: &'static str,
}

impl Checked {
    fn binary(t: &BinaryType) -> Self {
        Self {
            mime: t.mime.to_string(),
            prefix: prefix(t.kind),
            extension: t.extension,
        }
    }

    fn text(mime: impl Into<String>, extension: &'static str) -> Self {
        Self {
            mime: mime.into(),
            prefix: prefix(FileKind::Text),
            extension,
        }
    }
}

/// The name prefix of a kind of file.
fn prefix(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Image => "img",
        FileKind::Audio => "audio",
        FileKind::Text | FileKind::Other => "file",
    }
}

/// Checks an upload's size and declared type against its bytes (pure).
fn check(
    declared: &str,
    bytes: &[u8],
    limits: &AttachmentLimits,
) -> Result<Checked, AttachmentError> {
    if bytes.len() > limits.max_upload_bytes {
        return Err(AttachmentError::TooLarge {
            size: bytes.len(),
            limit: limits.max_upload_bytes,
        });
    }
    if bytes.is_empty() {
        return Err(AttachmentError::Empty);
    }
    let Some(mime) = normalise(declared) else {
        return Err(AttachmentError::InvalidMimeType {
            declared: declared.chars().take(80).collect(),
        });
    };
    let found = sniff(bytes);
    let mismatch = |detected: &'static str| AttachmentError::Mismatch {
        declared: mime.clone(),
        detected,
    };
    match (classify(&mime), found) {
        (Declared::Binary(want), Sniffed::Binary(got)) if want.mime == got.mime => {
            Ok(Checked::binary(got))
        }
        (Declared::Text { mime, extension }, Sniffed::Text) => Ok(Checked::text(mime, extension)),
        (Declared::Json, Sniffed::Text) => {
            match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => Ok(Checked::text("application/json", "json")),
                Err(_) => Err(mismatch("UTF-8 text that is not valid JSON")),
            }
        }
        (Declared::Opaque, Sniffed::Binary(got)) => Ok(Checked::binary(got)),
        (Declared::Opaque, Sniffed::Text) => Ok(Checked::text("text/plain", "txt")),
        (Declared::Opaque, Sniffed::Unknown) => Ok(Checked {
            mime: "application/octet-stream".into(),
            prefix: prefix(FileKind::Other),
            extension: "bin",
        }),
        (Declared::Unsupported, _) => Err(AttachmentError::UnsupportedType { declared: mime }),
        (_, found) => Err(mismatch(found.describe())),
    }
}

/// The client's file name, kept for display: its last path segment, without
/// control characters, at most 200 characters.
fn display_name(filename: Option<&str>) -> Option<String> {
    let last = filename?.rsplit(['/', '\\']).next()?;
    let clean: String = last.chars().filter(|c| !c.is_control()).take(200).collect();
    let clean = clean.trim();
    (!clean.is_empty()).then(|| clean.to_string())
}

/// The number after `<prefix>_` in a stored name (`img_07.png` → 7).
fn number_of(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('_')?;
    let digits = rest.split('.').next()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Checks and stores an upload in `session`'s attachments, under a new
/// name: `<kind>_<nn>.<extension>` with the kind `img`, `audio` or `file`,
/// `nn` above the highest number of that kind stored and every number
/// `numbers` handed out for the session (`01` first),
/// and the extension of the checked type. The name never depends on
/// `filename`, which is only handed back for display.
///
/// `declared_mime` is the type the client gave; it must match the bytes
/// (an [`AttachmentError`] naming both otherwise), except
/// `application/octet-stream`, which takes whatever the bytes are
/// recognised as.
///
/// ```
/// use bytes::Bytes;
/// use roundtable_sessions::attachments::{self, AttachmentLimits, UploadNumbers};
/// use roundtable_sessions::{FolderBlobStore, SessionId};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let blobs = FolderBlobStore::new(dir.path());
/// let session = SessionId::generate();
/// let (limits, numbers) = (AttachmentLimits::default(), UploadNumbers::default());
/// let notes = Bytes::from_static(b"# Notes\n");
/// let stored = attachments::upload(&blobs, &session, Some("../notes.md"), "text/markdown", notes, &limits, &numbers)
///     .await
///     .unwrap();
/// assert_eq!(stored.reference.as_str(), "attachments/file_01.md");
/// assert_eq!(stored.filename.as_deref(), Some("notes.md"));
///
/// let fake_png = Bytes::from_static(b"not a picture");
/// let refused = attachments::upload(&blobs, &session, None, "image/png", fake_png, &limits, &numbers).await;
/// assert_eq!(
///     refused.unwrap_err().to_string(),
///     "the file was declared image/png but its content is UTF-8 text"
/// );
/// # });
/// ```
pub async fn upload(
    blobs: &dyn BlobStore,
    session: &SessionId,
    filename: Option<&str>,
    declared_mime: &str,
    bytes: Bytes,
    limits: &AttachmentLimits,
    numbers: &UploadNumbers,
) -> Result<AttachmentRef, UploadError> {
    let checked = check(declared_mime, &bytes, limits)?;
    let folder = BlobPath::attachments();
    for _ in 0..NAME_ATTEMPTS {
        let stored = highest_number(blobs, session, &folder, checked.prefix).await?;
        let number = numbers.take(session, checked.prefix, stored);
        let name = format!("{}_{number:02}.{}", checked.prefix, checked.extension);
        let path = folder.join(&name).map_err(BlobError::from)?;
        match blobs.put_new(session, &path, bytes.clone()).await {
            Ok(()) => {
                return Ok(AttachmentRef {
                    reference: path,
                    mime_type: checked.mime,
                    size: bytes.len() as u64,
                    filename: display_name(filename),
                });
            }
            // Another process sharing the store took the number first: the
            // next attempt lists the folder again and goes past it.
            Err(BlobError::AlreadyExists { .. }) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(UploadError::NoFreeName(NAME_ATTEMPTS))
}

/// The highest number of the stored uploads of `prefix` in `folder` (0
/// when there is none).
async fn highest_number(
    blobs: &dyn BlobStore,
    session: &SessionId,
    folder: &BlobPath,
    prefix: &str,
) -> Result<u32, BlobError> {
    let stored = blobs.list(session, folder).await?;
    Ok(stored
        .iter()
        .filter_map(|blob| number_of(blob.path.file_name(), prefix))
        .max()
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_from_generated_names_only() {
        assert_eq!(number_of("img_07.png", "img"), Some(7));
        assert_eq!(number_of("img_123.jpg", "img"), Some(123));
        assert_eq!(number_of("img_07.png", "file"), None);
        assert_eq!(number_of("img_.png", "img"), None);
        assert_eq!(number_of("img_x1.png", "img"), None);
        assert_eq!(number_of("imgs_01.png", "img"), None);
    }

    #[test]
    fn display_names_keep_the_last_segment_only() {
        assert_eq!(
            display_name(Some("../../etc/passwd")).as_deref(),
            Some("passwd")
        );
        assert_eq!(display_name(Some("C:\\x\\a.png")).as_deref(), Some("a.png"));
        assert_eq!(
            display_name(Some("a\u{0}b\n.txt")).as_deref(),
            Some("ab.txt")
        );
        assert_eq!(display_name(Some("dir/")), None);
        assert_eq!(display_name(None), None);
    }
}
