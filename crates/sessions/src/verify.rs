//! Auto-verify (the spec's agent-loop step 7): when the model answers after
//! changing the workspace, the verify policy's commands run; each command's
//! result is an entry (`signal.verification`), and on failure the output
//! goes back to the model as a message from `verify`, up to a bounded
//! number of verifications per turn. When the last one still fails, the
//! turn ends failed, saying so.
//!
//! What counts as a change: a `write` tool that succeeded (a patch), or an
//! `exec` tool that succeeded (a command) after which the git working tree
//! differs from when it was last looked at (when the workspace is not a git
//! work tree, any successful command counts).
//!
//! `require_clean` (from the verify policy) makes a verification fail when
//! the commands themselves change the working tree (a formatter rewriting
//! files, generated files out of date): what the model leaves must already
//! be what the checks produce.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use roundtable_chat_runner::lifecycle::WriterSink;
use roundtable_chat_runner::{EventSink, TurnEvent, TurnHooks, TurnInput};
use roundtable_dispatch::Roster;
use roundtable_dispatch::projection::labelled_chat;
use roundtable_providers::now_millis;
use roundtable_thread_stream::{Chat, NewEntry};
use roundtable_tools::workspace::{Verify, Workspace};
use roundtable_tools::{Artifacts, Tool, ToolContext, ToolKind};
use tokio_util::sync::CancellationToken;

use crate::records::{SessionRecord, Verification, VerificationRun};
use crate::turn_tools::ToolKinds;
use crate::working_tree::TurnTree;

/// The author of the messages that carry a failed verification back.
pub const VERIFY_AUTHOR: &str = "verify";

/// How much of a command's output a verification record keeps (the whole
/// log is an artifact).
const RECORD_OUTPUT: usize = 4 * 1024;

/// How much of the verification report goes back to the model.
const REPORT_FOR_MODEL: usize = 12 * 1024;

/// Watches the turn's tool calls for changes to the workspace (give the
/// turn loop this sink; it forwards everything to the writer).
pub(crate) struct ChangeWatch {
    pub(crate) sink: WriterSink,
    kinds: Arc<ToolKinds>,
    wrote: AtomicBool,
    ran: AtomicBool,
}

impl ChangeWatch {
    pub(crate) fn new(sink: WriterSink, kinds: Arc<ToolKinds>) -> Self {
        Self {
            sink,
            kinds,
            wrote: AtomicBool::new(false),
            ran: AtomicBool::new(false),
        }
    }
}

impl EventSink for ChangeWatch {
    fn emit(&self, event: TurnEvent) {
        if let TurnEvent::ToolCallCompleted { tool, result, .. } = &event
            && !result.is_error
        {
            match self.kinds.get(tool) {
                Some(ToolKind::Write) => self.wrote.store(true, Ordering::SeqCst),
                Some(ToolKind::Exec) => self.ran.store(true, Ordering::SeqCst),
                _ => {}
            }
        }
        self.sink.emit(event);
    }
}

/// The auto-verify hook of one turn.
pub(crate) struct AutoVerify {
    pub(crate) workspace: Workspace,
    pub(crate) changes: Arc<ChangeWatch>,
    pub(crate) artifacts: Option<Arc<dyn Artifacts>>,
    pub(crate) cancel: CancellationToken,
    pub(crate) roster: Roster,
    pub(crate) turn: Arc<str>,
    pub(crate) max_attempts: u32,
    pub(crate) attempts: AtomicU32,
    /// The turn's working tree: its state before the turn's first change
    /// is the first one compared.
    pub(crate) turn_tree: Arc<TurnTree>,
    /// The working tree as last looked at after a verification (`None`
    /// before the first: the turn tree's "before" state stands for it).
    pub(crate) last_look: Mutex<Option<Option<String>>>,
    /// Set when the last verification allowed still failed.
    pub(crate) exhausted: AtomicBool,
    /// Every command run, for the run's provenance.
    pub(crate) runs: Mutex<Vec<VerificationRun>>,
}

impl AutoVerify {
    /// Whether the workspace changed since the last look.
    async fn changed(&self) -> bool {
        let wrote = self.changes.wrote.swap(false, Ordering::SeqCst);
        let ran = self.changes.ran.swap(false, Ordering::SeqCst);
        if !wrote && !ran {
            return false;
        }
        let now = self.turn_tree.look().await;
        // A tool that may change the workspace ran, so the turn tree took
        // its "before" state first.
        let before = lock(&self.last_look)
            .replace(now.clone())
            .unwrap_or_else(|| self.turn_tree.before());
        wrote || now.is_none() || before.as_deref() != now.as_deref()
    }

    /// Remembers the working tree as it is now.
    async fn look(&self) {
        let now = self.turn_tree.look().await;
        *lock(&self.last_look) = Some(now);
    }

    /// True when the last verification allowed failed.
    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::SeqCst)
    }

    /// Every command run so far.
    pub(crate) fn runs(&self) -> Vec<VerificationRun> {
        lock(&self.runs).clone()
    }
}

#[async_trait]
impl TurnHooks for AutoVerify {
    async fn after_answer(&self, _turn: &Arc<str>, _round: u32) -> Vec<TurnInput> {
        if !self.changed().await {
            return Vec::new();
        }
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        let verify = Verify::new(self.workspace.clone());
        let mut ctx =
            ToolContext::new(format!("verify-{attempt}")).with_cancel(self.cancel.clone());
        if let Some(artifacts) = &self.artifacts {
            ctx = ctx.with_artifacts(artifacts.clone());
        }
        let result = match verify.invoke(ctx, Default::default()).await {
            Ok(result) => result,
            // Cancelled: the turn is ending.
            Err(_) => return Vec::new(),
        };
        let reports = result
            .details
            .as_ref()
            .and_then(|d| d.get("commands"))
            .and_then(|c| c.as_array())
            .cloned()
            .unwrap_or_default();
        let mut records = Vec::new();
        for report in &reports {
            let text = |key: &str| report.get(key).and_then(|v| v.as_str()).map(str::to_string);
            let record = Verification {
                turn: self.turn.clone(),
                attempt,
                command: text("command").unwrap_or_default(),
                ok: report.get("ok").and_then(|v| v.as_bool()).unwrap_or(false),
                exit_code: report
                    .get("exit_code")
                    .and_then(|v| v.as_i64())
                    .and_then(|c| i32::try_from(c).ok()),
                output: tail(&text("output").unwrap_or_default(), RECORD_OUTPUT),
                artifact: text("full_output"),
            };
            lock(&self.runs).push(VerificationRun {
                command: record.command.clone(),
                ok: record.ok,
                attempt,
            });
            if let Ok(body) = record.to_body() {
                records.push(NewEntry::new(VERIFY_AUTHOR, body));
            }
        }
        // The records land in order with the turn's other entries; a store
        // failure here also stops the turn's writer, which ends the turn.
        let _ = self.changes.sink.append(records).await;
        self.look().await;
        if result.ok {
            return Vec::new();
        }
        if attempt >= self.max_attempts {
            self.exhausted.store(true, Ordering::SeqCst);
            return Vec::new();
        }
        let report = tail(&result.text_content(), REPORT_FOR_MODEL);
        let text = format!(
            "Verification failed after your changes (check {attempt} of {}). Fix the problem, \
             then answer again; the checks run again when you do.\n\n{report}",
            self.max_attempts
        );
        let chat = Chat::new(text);
        let message = labelled_chat(&self.roster, VERIFY_AUTHOR, &chat, now_millis());
        vec![TurnInput {
            author: Arc::from(VERIFY_AUTHOR),
            id: None,
            chat,
            message,
        }]
    }
}

/// The last `max` bytes of `text` (cut at a character boundary), marked
/// when cut.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {start} bytes cut]\n{}", &text[start..])
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_cut_at_a_character_boundary() {
        assert_eq!(tail("short", 10), "short");
        let cut = tail("ééééé", 3);
        assert!(cut.ends_with('é'), "{cut}");
        assert!(cut.starts_with("[… "));
    }
}
