//! The files a message refers to: checked when the message is submitted,
//! and shown to the model, as their content, when a turn reads the
//! conversation.
//!
//! The `chat` entry keeps only references ([`FileRef`]); the content is in
//! the session's [`BlobStore`]. What a model reads of a file is recomputed
//! from the stored bytes for every turn (the thread stays small, and the
//! type shown is the one the bytes are, whatever the message declared).

use std::sync::Arc;

use roundtable_providers::{InputKind, TextContent, UserBlock};
use roundtable_thread_stream::{Chat, Entry, EntryBody, FileRef};

use crate::attachments::{AttachmentLimits, UploadNumbers, resolve};
use crate::blob::{BlobError, BlobPath, BlobStore};
use crate::error::SessionError;
use crate::ids::SessionId;

/// Where a session's files are, and how much of them a model reads.
#[derive(Clone)]
pub(crate) struct SessionFiles {
    /// The blob store, when the host gave the engine one.
    pub(crate) blobs: Option<Arc<dyn BlobStore>>,
    /// Upload and inline limits.
    pub(crate) limits: AttachmentLimits,
    /// The numbers handed out to uploads.
    pub(crate) numbers: Arc<UploadNumbers>,
}

impl SessionFiles {
    /// The blob store, or the error a call that needs one gets.
    pub(crate) fn store(&self) -> Result<&Arc<dyn BlobStore>, SessionError> {
        self.blobs
            .as_ref()
            .ok_or_else(|| SessionError::InvalidField {
                field: "files",
                reason: "this engine keeps no files (it was built without a blob store)".into(),
            })
    }

    /// Checks that every reference names a stored attachment of the
    /// session, so a message is refused at submit time rather than failing
    /// in the middle of its turn.
    pub(crate) async fn check(
        &self,
        session: &SessionId,
        files: &[FileRef],
    ) -> Result<(), SessionError> {
        if files.is_empty() {
            return Ok(());
        }
        let blobs = self.store()?;
        for file in files {
            let path = BlobPath::parse(&file.reference)?;
            if !path.starts_with(&BlobPath::attachments()) {
                return Err(SessionError::InvalidField {
                    field: "files",
                    reason: format!("{path} is not an attachment of the session"),
                });
            }
            match blobs.get(session, &path).await {
                Ok(_) => {}
                Err(BlobError::NotFound { .. }) => {
                    return Err(SessionError::InvalidField {
                        field: "files",
                        reason: format!("no attachment {path} in the session"),
                    });
                }
                Err(BlobError::NotAFile { .. }) => {
                    return Err(SessionError::InvalidField {
                        field: "files",
                        reason: format!(
                            "{path} is not a regular file of the session (a symlink is never followed)"
                        ),
                    });
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// `entries` with the files of every `chat` entry shown as parts of
    /// it (what [`build_messages`](roundtable_dispatch::build_messages)
    /// sends a model). A file that cannot be read any more is shown as a
    /// line saying so: the turn goes on.
    pub(crate) async fn show_in(
        &self,
        session: &SessionId,
        accepts_images: bool,
        mut entries: Vec<Entry>,
    ) -> Vec<Entry> {
        for entry in &mut entries {
            if let EntryBody::Chat(chat) = &entry.body
                && !chat.files.is_empty()
            {
                let shown = self.show(session, accepts_images, chat).await;
                entry.body = EntryBody::Chat(shown);
            }
        }
        entries
    }

    /// `chat` with its files' content appended to its parts.
    pub(crate) async fn show(
        &self,
        session: &SessionId,
        accepts_images: bool,
        chat: &Chat,
    ) -> Chat {
        let mut shown = chat.clone();
        for file in &chat.files {
            let blocks = match self.store() {
                Ok(blobs) => resolve(&**blobs, session, file, accepts_images, &self.limits).await,
                Err(error) => Err(error),
            };
            match blocks {
                Ok(blocks) => shown.parts.extend(blocks),
                Err(error) => shown.parts.push(UserBlock::Text(TextContent::new(format!(
                    "[attachment {}: it cannot be read: {error}]",
                    file.reference
                )))),
            }
        }
        shown
    }
}

/// True when `input` lets a model read images.
pub(crate) fn accepts_images(input: &[InputKind]) -> bool {
    input.contains(&InputKind::Image)
}
