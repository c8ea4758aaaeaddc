//! Artifacts: the whole outputs a tool call leaves behind for the host (a
//! command's full output, an applied patch, a rendered diagram), kept beside
//! the turn rather than in the model's context.
//!
//! Where artifacts live is the host's business: a session folder
//! (`artifacts/<turn_id>/`), an object store shared by several servers. A
//! tool never writes them to a path of its own; it hands the bytes to the
//! [`Artifacts`] sink of its [`ToolContext`](crate::ToolContext) under a
//! checked [`ArtifactName`] and shows the reference the sink returns. A
//! context without a sink means the host keeps no artifacts, and tools skip
//! that step. [`FolderArtifacts`] is a sink writing into one folder.

mod folder;
mod name;

use std::fmt::Debug;

use async_trait::async_trait;

pub use folder::FolderArtifacts;
pub use name::ArtifactName;

/// Where a tool call's artifacts go.
///
/// ```
/// use roundtable_tools::{ArtifactName, Artifacts, FolderArtifacts};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let sink = FolderArtifacts::new(dir.path().join("turn_1"))
///     .with_reference_prefix("artifacts/turn_1");
/// let name = ArtifactName::new("shell-call_1.log").unwrap();
/// let reference = sink.store(&name, b"hello\n".to_vec()).await.unwrap();
/// assert_eq!(reference, "artifacts/turn_1/shell-call_1.log");
/// // The name is taken: the next artifact under it gets a suffix.
/// let again = sink.store(&name, b"again\n".to_vec()).await.unwrap();
/// assert_eq!(again, "artifacts/turn_1/shell-call_1-2.log");
/// assert!(ArtifactName::new("../escape.log").is_err());
/// # });
/// ```
#[async_trait]
pub trait Artifacts: Debug + Send + Sync {
    /// Stores `bytes` as one artifact under `name` (or, when the name is
    /// taken, under a name derived from it: an artifact is never
    /// overwritten) and returns the reference to show the model and the
    /// host, such as `artifacts/turn_123/shell-call_1.log`.
    async fn store(&self, name: &ArtifactName, bytes: Vec<u8>) -> Result<String, ArtifactError>;
}

/// Why an artifact was not stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// The name is not a safe file name (see [`ArtifactName`]). Nothing was
    /// stored.
    #[error("{name:?} is not a valid artifact name: {reason}")]
    InvalidName {
        /// The name given (its first 64 characters when longer).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Every name derived from the one asked for is taken.
    #[error("no free name for artifact {name}: it and its numbered variants are all taken")]
    NoFreeName {
        /// The name asked for.
        name: ArtifactName,
    },
    /// The artifact could not be written.
    #[error("cannot store artifact {name}: {source}")]
    Io {
        /// The name asked for.
        name: ArtifactName,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// A host's store failed (an object store that is down, say).
    #[error("cannot store artifact {name}: {source}")]
    Store {
        /// The name asked for.
        name: ArtifactName,
        /// The store's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// An artifact a tool call tried to keep: its reference, or why it is not
/// kept. Renders as the bracketed note the model reads, e.g.
/// `[full output: artifacts/turn_1/shell-call_1.log]`.
#[derive(Debug)]
pub(crate) struct Kept {
    /// What the artifact holds, for the note ("full output", "patch").
    what: &'static str,
    stored: Result<String, ArtifactError>,
}

impl Kept {
    /// Stores `bytes` under `name` in the call's sink; `None` when the host
    /// keeps no artifacts.
    pub(crate) async fn store(
        ctx: &crate::ToolContext,
        what: &'static str,
        name: ArtifactName,
        bytes: Vec<u8>,
    ) -> Option<Self> {
        let sink = ctx.artifacts()?;
        Some(Self {
            what,
            stored: sink.store(&name, bytes).await,
        })
    }

    /// Stores a command's whole output, when it was captured (that is,
    /// when the host keeps artifacts).
    pub(crate) async fn full_output(
        ctx: &crate::ToolContext,
        name: ArtifactName,
        full: Option<Vec<u8>>,
    ) -> Option<Self> {
        Self::store(ctx, "full output", name, full?).await
    }

    /// The reference, when the artifact was stored.
    pub(crate) fn reference(&self) -> Option<&str> {
        self.stored.as_deref().ok()
    }

    /// Records the reference in `result.artifacts` when there is one.
    pub(crate) fn record(&self, result: &mut crate::ToolResult) {
        if let Some(reference) = self.reference() {
            result.artifacts.push(reference.to_string());
        }
    }
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.stored {
            Ok(reference) => write!(f, "[{}: {reference}]", self.what),
            Err(err) => write!(f, "[{} not kept: {err}]", self.what),
        }
    }
}
