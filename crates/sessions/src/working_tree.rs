//! The git working tree around one turn, looked at only when the turn may
//! change it.
//!
//! A run's provenance records `git status` before and after it, and
//! auto-verify compares the tree before and after a command. Each look is
//! a child process (fork and exec of `git`), which costs far more than a
//! turn of read tools and answers. So the tree is looked at lazily: the
//! "before" state just before the turn's first tool that can change the
//! workspace (a `write` or `exec` kind) runs, and the "after" state only
//! when a "before" was taken. A turn that only reads and answers runs no
//! `git` at all, and its provenance carries no working-tree state (it
//! changed no file).

use roundtable_tools::ToolKind;
use roundtable_tools::workspace::Workspace;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

/// Whether a tool of `kind` can change the workspace's files.
pub(crate) fn may_change_workspace(kind: ToolKind) -> bool {
    matches!(kind, ToolKind::Write | ToolKind::Exec)
}

/// The working tree of one turn's workspace: its state before the turn's
/// first change, taken once, on demand.
pub(crate) struct TurnTree {
    workspace: Workspace,
    cancel: CancellationToken,
    /// `git status --porcelain` before the first tool that may change the
    /// workspace (`None` inside: not a git work tree, or git failed).
    before: OnceCell<Option<String>>,
}

impl TurnTree {
    /// The tree of `workspace`, looked at with `cancel` (a cancelled turn
    /// stops waiting for `git`).
    pub(crate) fn new(workspace: Workspace, cancel: CancellationToken) -> Self {
        Self {
            workspace,
            cancel,
            before: OnceCell::new(),
        }
    }

    /// The workspace.
    pub(crate) fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The state now, from `git status`; `None` when the workspace is not
    /// a git work tree (or git failed).
    pub(crate) async fn look(&self) -> Option<String> {
        self.workspace.working_tree_state(&self.cancel).await.ok()
    }

    /// Takes the "before" state, once: called before every tool that may
    /// change the workspace runs.
    pub(crate) async fn before_change(&self) {
        self.before.get_or_init(|| self.look()).await;
    }

    /// Whether a tool that may change the workspace was about to run in
    /// the turn.
    pub(crate) fn may_have_changed(&self) -> bool {
        self.before.initialized()
    }

    /// The "before" state, if it was taken (`None` when no tool that may
    /// change the workspace ran, or git gave nothing).
    pub(crate) fn before(&self) -> Option<String> {
        self.before.get().cloned().flatten()
    }

    /// The states before and after the turn for its provenance: both
    /// `None` for a turn that ran no tool that may change the workspace
    /// (no `git` runs).
    pub(crate) async fn before_and_after(&self) -> (Option<String>, Option<String>) {
        match self.before.get() {
            None => (None, None),
            Some(before) => (before.clone(), self.look().await),
        }
    }
}
