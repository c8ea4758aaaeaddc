//! Provenance: what one run (a prompt and the turn it caused) did. The
//! turn's events pass through a [`RunLog`] on their way to the writer; when
//! the turn ends, the log becomes a `signal.provenance` entry: the tools that
//! ran (name, a digest of the arguments, ok or not, how long), the files the
//! run's patches changed (and any other file the git working tree shows
//! changed), its verifications, its tokens and cost.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use roundtable_chat_runner::{EventSink, TurnEvent};
use roundtable_providers::{Usage, now_millis};
use roundtable_tools::workspace::patched_files;
use sha2::{Digest, Sha256};

use crate::records::{FileChanged, Provenance, ToolRun, VerificationRun};

/// The name of the tool whose successful calls change files by a patch.
const PATCH_TOOL: &str = "apply_patch";

/// Records a run's tool calls as they happen, and forwards every event.
pub(crate) struct RunLog<S> {
    next: S,
    inner: Mutex<RunLogInner>,
}

#[derive(Default)]
struct RunLogInner {
    /// Calls started and not finished: (call id, started, arguments digest,
    /// patch text). A list: a turn runs a few calls at once, which a scan
    /// finds sooner than a hash.
    running: Vec<(Arc<str>, Instant, String, Option<String>)>,
    tools: Vec<ToolRun>,
    /// Path -> (added, removed), from the run's applied patches.
    files: BTreeMap<String, (u32, u32)>,
}

impl<S: EventSink> RunLog<S> {
    /// A log forwarding every event to `next`.
    pub(crate) fn new(next: S) -> Self {
        Self {
            next,
            inner: Mutex::new(RunLogInner::default()),
        }
    }

    /// The run's record.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn provenance(
        &self,
        run_id: Arc<str>,
        message_id: Option<Arc<str>>,
        started_at: i64,
        outcome: String,
        git_before: Option<String>,
        git_after: Option<String>,
        verification: Vec<VerificationRun>,
        usage: Usage,
    ) -> Provenance {
        let inner = lock(&self.inner);
        let mut files: Vec<FileChanged> = inner
            .files
            .iter()
            .map(|(path, (added, removed))| FileChanged {
                path: path.clone(),
                added: *added,
                removed: *removed,
            })
            .collect();
        // Files the working tree shows changed that no patch explains (a
        // command wrote them).
        for path in changed_paths(git_before.as_deref(), git_after.as_deref()) {
            if !inner.files.contains_key(&path) {
                files.push(FileChanged {
                    path,
                    added: 0,
                    removed: 0,
                });
            }
        }
        Provenance {
            run_id,
            message_id,
            started_at,
            ended_at: now_millis(),
            outcome,
            tools: inner.tools.clone(),
            files,
            git_before,
            git_after,
            verification,
            usage,
        }
    }
}

impl<S: EventSink> EventSink for RunLog<S> {
    fn emit(&self, event: TurnEvent) {
        match &event {
            TurnEvent::ToolCallStarted {
                call_id,
                tool,
                arguments,
                ..
            } => {
                // The JSON text is hashed as it is written (a `Sha256` is an
                // `io::Write`): no buffer.
                let mut hasher = Sha256::new();
                // Writing a `Value` into a hasher cannot fail.
                let _ = serde_json::to_writer(&mut hasher, &**arguments);
                let digest = digest_hex(&hasher.finalize().into());
                let patch = (&**tool == PATCH_TOOL)
                    .then(|| {
                        arguments
                            .get("patch")
                            .and_then(|p| p.as_str())
                            .map(str::to_string)
                    })
                    .flatten();
                let mut inner = lock(&self.inner);
                // A call id is started once; a repeated one replaces the
                // first, as a map's insert did.
                inner.running.retain(|(id, ..)| id != call_id);
                inner
                    .running
                    .push((call_id.clone(), Instant::now(), digest, patch));
            }
            TurnEvent::ToolCallCompleted {
                call_id,
                tool,
                result,
                ..
            } => {
                let mut inner = lock(&self.inner);
                // A call settled without running (denied, cancelled before
                // it started) has no start: it ran nothing.
                let started = inner.running.iter().position(|(id, ..)| id == call_id);
                if let Some((_, started, digest, patch)) =
                    started.map(|at| inner.running.swap_remove(at))
                {
                    let ok = !result.is_error;
                    inner.tools.push(ToolRun {
                        tool: tool.clone(),
                        call_id: call_id.clone(),
                        arguments_digest: digest,
                        ok,
                        duration_ms: u64::try_from(started.elapsed().as_millis())
                            .unwrap_or(u64::MAX),
                    });
                    if ok && let Some(files) = patch.and_then(|p| patched_files(&p).ok()) {
                        for file in files {
                            let entry = inner.files.entry(file.path).or_default();
                            entry.0 = entry.0.saturating_add(file.added);
                            entry.1 = entry.1.saturating_add(file.removed);
                        }
                    }
                }
            }
            _ => {}
        }
        self.next.emit(event);
    }
}

/// The paths whose `git status --porcelain` line differs between `before`
/// and `after` (lines are `XY path`, with `--branch` headers `## ...`).
fn changed_paths(before: Option<&str>, after: Option<&str>) -> Vec<String> {
    let (Some(before), Some(after)) = (before, after) else {
        return Vec::new();
    };
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("##") && l.len() > 3)
            .map(str::to_string)
            .collect()
    };
    let (old, new) = (lines(before), lines(after));
    let mut paths: Vec<String> = new
        .iter()
        .filter(|l| !old.contains(l))
        .chain(old.iter().filter(|l| !new.contains(l)))
        .map(|l| {
            let path = &l[3..];
            // A rename shows `old -> new`: the new path changed.
            path.rsplit(" -> ").next().unwrap_or(path).to_string()
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A SHA-256 digest as its 64 lowercase hex digits.
fn digest_hex(digest: &[u8; 32]) -> String {
    let mut digits = [0u8; 64];
    // Two digits a byte: the lengths always agree, and every digit is ASCII.
    let _ = hex::encode_to_slice(digest, &mut digits);
    std::str::from_utf8(&digits).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_written_as_64_lowercase_hex_digits() {
        assert_eq!(
            digest_hex(&Sha256::digest(b"").into()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn an_arguments_digest_is_the_sha256_of_their_json_text() {
        let arguments = serde_json::json!({"path": "README.md", "limit": 10});
        let mut hasher = Sha256::new();
        serde_json::to_writer(&mut hasher, &arguments).unwrap();
        let json = serde_json::to_vec(&arguments).unwrap();
        assert_eq!(
            digest_hex(&hasher.finalize().into()),
            digest_hex(&Sha256::digest(&json).into())
        );
    }

    #[test]
    fn the_working_tree_names_what_changed() {
        let before = "## main\n M a.txt\n";
        let after = "## main\n M a.txt\n?? new.txt\nR  old.txt -> moved.txt\n";
        assert_eq!(
            changed_paths(Some(before), Some(after)),
            ["moved.txt", "new.txt"]
        );
        assert!(changed_paths(None, Some(after)).is_empty());
    }
}
