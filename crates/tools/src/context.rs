//! What a tool gets besides its arguments: call id, cancellation, progress.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use roundtable_providers::UserBlock;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
}

impl ToolContext {
    /// A context with a fresh cancellation token, no progress sink and no root.
    pub fn new(call_id: impl Into<Arc<str>>) -> Self {
        Self {
            call_id: call_id.into(),
            cancel: CancellationToken::new(),
            progress: ProgressSink::none(),
            workspace_root: None,
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

    /// Sends a text progress update for this call.
    pub fn progress_text(&self, text: impl Into<Arc<str>>) {
        self.progress.send(ToolProgress {
            call_id: self.call_id.clone(),
            parts: vec![UserBlock::text(text)],
        });
    }
}
