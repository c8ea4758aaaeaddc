//! What a tool gets besides its arguments: call id, cancellation, progress,
//! the host's artifact sink and the output limit.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roundtable_providers::UserBlock;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{Artifacts, OutputLimit};

/// A progress update from a running tool (for example a chunk of command output).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolProgress {
    /// The call the update belongs to.
    pub call_id: Arc<str>,
    /// The update: text or images.
    pub parts: Vec<UserBlock>,
}

/// Where a tool sends progress updates. Sending never blocks and never fails:
/// updates are best effort and dropped when nobody listens.
#[derive(Debug, Clone, Default)]
pub struct ProgressSink {
    tx: Option<mpsc::UnboundedSender<ToolProgress>>,
}

impl ProgressSink {
    /// A sink that drops every update.
    pub fn none() -> Self {
        Self { tx: None }
    }

    /// A sink and the receiver its updates arrive on.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<ToolProgress>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx: Some(tx) }, rx)
    }

    /// Sends an update; a closed or absent receiver is ignored.
    pub fn send(&self, update: ToolProgress) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(update);
        }
    }
}

/// The context of one tool call.
///
/// Built by the host per call. Tools must watch [`ToolContext::cancel`] in
/// anything that may take long and stop promptly when it fires.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The provider's id of the call.
    pub call_id: Arc<str>,
    /// Fires when the turn is cancelled.
    pub cancel: CancellationToken,
    /// Where progress updates go.
    pub progress: ProgressSink,
    /// The workspace root, for hosts that run workspace tools; tools that own
    /// their root (the workspace toolset) ignore it.
    pub workspace_root: Option<PathBuf>,
    /// Where the call's artifacts go (full command outputs, applied
    /// patches, rendered diagrams); `None` when the host keeps none, and
    /// tools then skip that step.
    pub artifacts: Option<Arc<dyn Artifacts>>,
    /// The limit the result will be cut to. The [`ToolRegistry`] sets its
    /// own before the call runs, so a tool can tell whether an image fits
    /// (the limit cuts text only).
    ///
    /// [`ToolRegistry`]: crate::ToolRegistry
    pub output_limit: OutputLimit,
}

impl ToolContext {
    /// A context with a fresh cancellation token, no progress sink, no
    /// root, no artifact sink and the default output limit.
    pub fn new(call_id: impl Into<Arc<str>>) -> Self {
        Self {
            call_id: call_id.into(),
            cancel: CancellationToken::new(),
            progress: ProgressSink::none(),
            workspace_root: None,
            artifacts: None,
            output_limit: OutputLimit::default(),
        }
    }

    /// Uses the given cancellation token.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Uses the given progress sink.
    pub fn with_progress(mut self, progress: ProgressSink) -> Self {
        self.progress = progress;
        self
    }

    /// Sets the workspace root.
    pub fn with_workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace_root = Some(root.into());
        self
    }

    /// The workspace root, if any.
    pub fn workspace_root(&self) -> Option<&Path> {
        self.workspace_root.as_deref()
    }

    /// Sends the call's artifacts to `sink` (typically the turn's, shared
    /// by all its calls).
    pub fn with_artifacts(mut self, sink: Arc<dyn Artifacts>) -> Self {
        self.artifacts = Some(sink);
        self
    }

    /// The artifact sink, if the host keeps artifacts.
    pub fn artifacts(&self) -> Option<&dyn Artifacts> {
        self.artifacts.as_deref()
    }

    /// Uses the given output limit.
    pub fn with_output_limit(mut self, limit: OutputLimit) -> Self {
        self.output_limit = limit;
        self
    }

    /// Sends a text progress update for this call.
    pub fn progress_text(&self, text: impl Into<Arc<str>>) {
        self.progress.send(ToolProgress {
            call_id: self.call_id.clone(),
            parts: vec![UserBlock::text(text)],
        });
    }
}
