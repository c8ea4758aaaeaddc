//! The workspace toolset: tools that read, search, patch and run commands in
//! one directory tree, never outside it, and render diagrams.
//!
//! Every path a model gives is resolved through [`WorkspaceRoot::resolve`]:
//! absolute paths, `..` and symlinks that leave the root are refused, and
//! directory walks skip symlinks. `.gitignore` is honoured by the walking
//! tools. `.git/` (and every `.git` below the root, however it is named or
//! linked to) is never read, listed, searched or patched: it holds the
//! hooks and configuration git runs commands from, and often a credential
//! (a token in a remote URL or an `http.extraheader`). `git_status` shows
//! the branch instead. Writes go through [`WorkspaceRoot::replace_file`],
//! which follows no link.
//!
//! ```
//! use roundtable_tools::{ToolContext, ToolRegistry, ApprovalPolicy};
//! use roundtable_tools::workspace::Workspace;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("hello.txt"), "hi\n").unwrap();
//! let mut registry = ToolRegistry::new();
//! registry.register_all(Workspace::open(dir.path()).unwrap().toolset()).unwrap();
//!
//! let call = roundtable_providers::ToolCall::new(
//!     "call_1",
//!     "read_file",
//!     serde_json::json!({"path": "hello.txt"}).as_object().unwrap().clone(),
//! );
//! let result = registry.invoke(&call, ToolContext::new("call_1")).await.unwrap();
//! assert_eq!(result.text_content(), "hi\n");
//!
//! let escape = roundtable_providers::ToolCall::new(
//!     "call_2",
//!     "read_file",
//!     serde_json::json!({"path": "../etc/passwd"}).as_object().unwrap().clone(),
//! );
//! let result = registry.invoke(&escape, ToolContext::new("call_2")).await.unwrap();
//! assert!(!result.ok);
//! # });
//! ```

mod diagram;
mod env;
mod git;
mod map;
mod patch;
mod process;
mod read;
mod root;
mod search;
mod shell;
mod tree;
mod verify;
mod write;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use diagram::Diagram;
pub use env::{CommandEnv, is_secret_name};
use git::GitStatus;
use map::RepoMap;
use patch::ApplyPatch;
pub use patch::{PatchedFile, patched_files};
use read::ReadFile;
pub use root::WorkspaceRoot;
use search::Search;
use shell::Shell;
use tree::RepoTree;
pub use verify::Verify;

use crate::{SetupError, Tool, VerifyPolicy};

/// Limits for commands run by `shell`, `verify`, `git_status` and `diagram`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// Timeout when the call names none.
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for.
    pub max_timeout: Duration,
    /// Bytes of output kept (the tail; the rest is reported as omitted).
    pub output_cap: usize,
}

impl Default for CommandLimits {
    /// Two minutes by default, ten at most, 32 KiB of output.
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            output_cap: 32 * 1024,
        }
    }
}

/// Bytes of a command's output kept whole for its artifact by default.
const DEFAULT_FULL_OUTPUT_CAP: usize = 16 * 1024 * 1024;

/// A workspace: a root directory and the settings of the tools working in it.
/// Cheap to clone; every tool of [`toolset`](Self::toolset) shares it.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: Arc<WorkspaceRoot>,
    verify_policy: Arc<VerifyPolicy>,
    command_limits: CommandLimits,
    full_output_cap: usize,
    command_env: CommandEnv,
}

impl Workspace {
    /// Opens the workspace rooted at `root` (an existing directory) with the
    /// default verify policy and command limits.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, SetupError> {
        let root = WorkspaceRoot::new(root.as_ref()).map_err(|source| SetupError::InvalidRoot {
            path: root.as_ref().to_path_buf(),
            source,
        })?;
        Ok(Self {
            root: Arc::new(root),
            verify_policy: Arc::new(VerifyPolicy::default()),
            command_limits: CommandLimits::default(),
            full_output_cap: DEFAULT_FULL_OUTPUT_CAP,
            command_env: CommandEnv::default(),
        })
    }

    /// Sets the verify policy the `verify` tool runs.
    pub fn with_verify_policy(mut self, policy: VerifyPolicy) -> Self {
        self.verify_policy = Arc::new(policy);
        self
    }

    /// Sets the environment commands run with (by default this process's
    /// environment without its secrets: see [`CommandEnv`]).
    pub fn with_command_env(mut self, env: CommandEnv) -> Self {
        self.command_env = env;
        self
    }

    /// The environment commands run with.
    pub fn command_env(&self) -> &CommandEnv {
        &self.command_env
    }

    /// Sets the command limits.
    pub fn with_command_limits(mut self, limits: CommandLimits) -> Self {
        self.command_limits = limits;
        self
    }

    /// Sets how much of a command's output its artifact keeps (16 MiB by
    /// default). When the call's [`ToolContext`](crate::ToolContext) has an
    /// artifact sink, `shell` and `verify` store each command's whole
    /// output there; an output longer than this keeps its first `bytes`
    /// and its tail (the part the result shows), the gap between them
    /// marked.
    pub fn with_full_output_cap(mut self, bytes: usize) -> Self {
        self.full_output_cap = bytes;
        self
    }

    /// How much of a command's output its artifact keeps.
    pub fn full_output_cap(&self) -> usize {
        self.full_output_cap
    }

    /// The root.
    pub fn root(&self) -> &WorkspaceRoot {
        &self.root
    }

    /// The verify policy.
    pub fn verify_policy(&self) -> &VerifyPolicy {
        &self.verify_policy
    }

    /// The command limits.
    pub fn command_limits(&self) -> CommandLimits {
        self.command_limits
    }

    /// The names of [`toolset`](Self::toolset)'s tools, in its order: what
    /// a host checks its own tools against before any workspace is open.
    pub const TOOL_NAMES: [&'static str; 9] = [
        "repo_tree",
        "repo_map",
        "read_file",
        "search",
        "git_status",
        "apply_patch",
        "shell",
        "verify",
        "diagram",
    ];

    /// Every workspace tool: `repo_tree`, `repo_map`, `read_file`, `search`,
    /// `git_status` (read), `apply_patch` (write), `shell`, `verify` and
    /// `diagram` (exec).
    pub fn toolset(&self) -> Vec<Arc<dyn Tool>> {
        let mut tools = self.read_only_toolset();
        tools.push(Arc::new(ApplyPatch::new(self.clone())));
        tools.push(Arc::new(Shell::new(self.clone())));
        tools.push(Arc::new(Verify::new(self.clone())));
        tools.push(Arc::new(Diagram::new(self.clone())));
        tools
    }

    /// The state of the git working tree (`git status --porcelain`, run
    /// with the same hardening as `git_status`): equal texts mean nothing
    /// changed in between. An error when the root is not a git work tree
    /// or git cannot run.
    pub async fn working_tree_state(
        &self,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<String, String> {
        git::porcelain(self, cancel).await
    }

    /// The read tools only: `repo_tree`, `repo_map`, `read_file`, `search`,
    /// `git_status`.
    pub fn read_only_toolset(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(RepoTree::new(self.clone())),
            Arc::new(RepoMap::new(self.clone())),
            Arc::new(ReadFile::new(self.clone())),
            Arc::new(Search::new(self.clone())),
            Arc::new(GitStatus::new(self.clone())),
        ]
    }

    /// A directory walker over `base` (inside the root, outside `.git`) that
    /// honours `.gitignore`, shows hidden files but never a `.git`, does not
    /// follow symlinks, and sorts by name.
    pub(crate) fn walker(&self, base: &Path) -> ignore::WalkBuilder {
        let mut builder = ignore::WalkBuilder::new(base);
        builder
            .hidden(false)
            .follow_links(false)
            .require_git(false)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .parents(true)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|entry| !root::is_git_name(entry.file_name()));
        builder
    }
}

/// Runs blocking work off the async threads; a panic in it becomes an error
/// text for the model.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(err) => Err(format!("internal error: {err}")),
    }
}

#[cfg(test)]
mod tool_names_tests {
    use super::Workspace;

    #[test]
    fn the_tool_names_are_the_toolsets() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let names: Vec<String> = workspace
            .toolset()
            .iter()
            .map(|t| t.definition().name().to_string())
            .collect();
        assert_eq!(names, Workspace::TOOL_NAMES);
    }
}
