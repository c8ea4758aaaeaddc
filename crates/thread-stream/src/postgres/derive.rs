//! What a dashboard reads of an entry: the derived rows (runs, tool
//! executions, file mutations) of one entry, as a pure function.
//!
//! Each entry yields its rows without looking at earlier entries: a row
//! names the run (turn) or tool call it belongs to, and the mirror merges
//! rows of the same run or call in the database (an upsert per row). So
//! deriving a new kind of entry, such as a provenance record, is one more
//! arm in [`derive_rows`] and one more statement in the mirror's writer.
//!
//! What is derived today:
//!
//! | entry | rows |
//! | --- | --- |
//! | `turn.started` | [`DerivedRow::RunStarted`] |
//! | `turn.ended` / `turn.failed` | [`DerivedRow::RunEnded`] |
//! | `pi.assistant` with a turn | [`DerivedRow::RunUsage`] (tokens, cost, tool calls) |
//! | `pi.assistant` | [`DerivedRow::ToolCalled`] per tool call; [`DerivedRow::FileChanged`] per file a patch tool call changes |
//! | `pi.tool_result` | [`DerivedRow::ToolFinished`] (which also settles the call's file changes) |
//! | `signal.turn_result` | [`DerivedRow::RunResult`] (finish reason, rounds, duration, model) |

use std::sync::Arc;

use roundtable_providers::{AssistantBlock, Usage, UserBlock};

use super::patch_stats::{FileChange, patch_stats};
use crate::lifecycle::TURN_RESULT_SIGNAL;
use crate::{AssistantEntry, Entry, EntryBody, ToolResultEntry};

/// What the derivation needs to know of the host's tools.
#[derive(Debug, Clone)]
pub struct DeriveOptions {
    /// Tools whose `patch` argument is a unified diff applied all or
    /// nothing: their calls yield file changes. Default: `apply_patch` (the
    /// workspace toolset's patch tool).
    pub patch_tools: Vec<String>,
    /// Most characters of a tool result's text kept in
    /// `tool_executions.result_text`. Default 2000.
    pub result_text_limit: usize,
}

impl Default for DeriveOptions {
    fn default() -> Self {
        Self {
            patch_tools: vec!["apply_patch".into()],
            result_text_limit: 2000,
        }
    }
}

/// A row (or a change to a row) that an entry contributes to the derived
/// tables. The entry's thread, seq, time and author go with it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DerivedRow {
    /// A run began (`turn.started`).
    RunStarted {
        /// The turn id.
        turn: Arc<str>,
        /// The seq of the entry that woke the bot.
        trigger: Option<u64>,
        /// The wake's hop depth.
        depth: u32,
        /// Why the bot woke.
        reason: Option<String>,
    },
    /// A run finished (`turn.ended`) or failed (`turn.failed`).
    RunEnded {
        /// The turn id.
        turn: Arc<str>,
        /// True for `turn.failed`.
        failed: bool,
        /// The finish reason, or what went wrong.
        reason: String,
    },
    /// One assistant message of a run: its tokens and cost are added to the
    /// run's.
    RunUsage {
        /// The turn id.
        turn: Arc<str>,
        /// The message's usage and cost.
        usage: Usage,
        /// How many tool calls the message makes.
        tool_calls: u32,
    },
    /// The runner's record of a finished run (`signal.turn_result`).
    RunResult {
        /// The turn id.
        turn: Arc<str>,
        /// Why it ended.
        finish_reason: Option<String>,
        /// Model calls made.
        rounds: Option<u32>,
        /// Wall time.
        duration_ms: Option<u64>,
        /// The model, `provider/id`.
        model: Option<String>,
        /// What went wrong, if anything.
        error: Option<String>,
    },
    /// A tool call in an assistant message.
    ToolCalled {
        /// The call's id.
        call_id: Arc<str>,
        /// The turn id, when the entry names one.
        turn: Option<Arc<str>>,
        /// The tool.
        tool: Arc<str>,
        /// The arguments as the model sent them.
        arguments: serde_json::Value,
    },
    /// A tool call's result.
    ToolFinished {
        /// The call's id.
        call_id: Arc<str>,
        /// The turn id, when the entry names one.
        turn: Option<Arc<str>>,
        /// The tool.
        tool: Arc<str>,
        /// Whether the tool failed.
        is_error: bool,
        /// The result's text, cut to [`DeriveOptions::result_text_limit`].
        text: String,
    },
    /// A file a patch tool call changes (applied once its result says so).
    FileChanged {
        /// The call's id.
        call_id: Arc<str>,
        /// The turn id, when the entry names one.
        turn: Option<Arc<str>>,
        /// How the file changes.
        change: FileChange,
        /// The path after the change (before it, for a deletion).
        path: String,
        /// The source of a rename or copy.
        from: Option<String>,
        /// Lines added.
        added: u32,
        /// Lines removed.
        removed: u32,
    },
}

/// The derived rows of one entry (none for most entries).
pub fn derive_rows(entry: &Entry, options: &DeriveOptions) -> Vec<DerivedRow> {
    match &entry.body {
        EntryBody::TurnStarted(started) => vec![DerivedRow::RunStarted {
            turn: started.turn.clone(),
            trigger: started.trigger,
            depth: started.depth,
            reason: started.reason.as_deref().map(str::to_owned),
        }],
        EntryBody::TurnEnded(ended) => vec![DerivedRow::RunEnded {
            turn: ended.turn.clone(),
            failed: false,
            reason: ended.reason.to_string(),
        }],
        EntryBody::TurnFailed(failed) => vec![DerivedRow::RunEnded {
            turn: failed.turn.clone(),
            failed: true,
            reason: failed.reason.to_string(),
        }],
        EntryBody::Assistant(assistant) => assistant_rows(assistant, options),
        EntryBody::ToolResult(result) => vec![tool_finished(result, options)],
        EntryBody::Signal(signal) if signal.name == TURN_RESULT_SIGNAL => {
            run_result(&signal.data).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// An assistant message's rows: its run's usage (when it is part of a
/// run), each tool call, and the files each patch call changes.
fn assistant_rows(assistant: &AssistantEntry, options: &DeriveOptions) -> Vec<DerivedRow> {
    let mut rows = Vec::new();
    let mut tool_calls = 0u32;
    for block in &assistant.message().content {
        let AssistantBlock::ToolCall(call) = block else {
            continue;
        };
        tool_calls += 1;
        rows.push(DerivedRow::ToolCalled {
            call_id: call.id.clone(),
            turn: assistant.turn.clone(),
            tool: call.name.clone(),
            arguments: serde_json::Value::Object((*call.arguments).clone()),
        });
        if options.patch_tools.iter().any(|t| **t == *call.name)
            && let Some(patch) = call.arguments.get("patch").and_then(|p| p.as_str())
        {
            rows.extend(
                patch_stats(patch)
                    .into_iter()
                    .map(|file| DerivedRow::FileChanged {
                        call_id: call.id.clone(),
                        turn: assistant.turn.clone(),
                        change: file.change,
                        path: file.path,
                        from: file.from,
                        added: file.added,
                        removed: file.removed,
                    }),
            );
        }
    }
    if let Some(turn) = &assistant.turn {
        rows.insert(
            0,
            DerivedRow::RunUsage {
                turn: turn.clone(),
                usage: assistant.message().usage,
                tool_calls,
            },
        );
    }
    rows
}

/// A tool result's row: the call's outcome and the start of its text.
fn tool_finished(result: &ToolResultEntry, options: &DeriveOptions) -> DerivedRow {
    let message = &result.message;
    let mut text = String::new();
    for block in &message.content {
        if let UserBlock::Text(t) = block {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&t.text);
        }
    }
    DerivedRow::ToolFinished {
        call_id: message.tool_call_id.clone(),
        turn: result.turn.clone(),
        tool: message.tool_name.clone(),
        is_error: message.is_error,
        text: text.chars().take(options.result_text_limit).collect(),
    }
}

/// The row of the runner's `signal.turn_result`, when it names its turn.
fn run_result(data: &serde_json::Value) -> Option<DerivedRow> {
    let turn = data.get("turn").and_then(|t| t.as_str())?;
    let text = |key: &str| data.get(key).and_then(|v| v.as_str()).map(String::from);
    Some(DerivedRow::RunResult {
        turn: turn.into(),
        finish_reason: text("finish_reason"),
        rounds: data
            .get("rounds")
            .and_then(|v| v.as_u64())
            .and_then(|n| u32::try_from(n).ok()),
        duration_ms: data.get("duration_ms").and_then(|v| v.as_u64()),
        model: text("model"),
        error: text("error"),
    })
}

/// The turn (run) an entry belongs to, when it names one: the entries of
/// a turn carry its id, and so does the runner's `signal.turn_result`.
pub(crate) fn entry_turn(entry: &Entry) -> Option<&str> {
    match &entry.body {
        EntryBody::Assistant(b) => b.turn.as_deref(),
        EntryBody::ToolResult(b) => b.turn.as_deref(),
        EntryBody::Chunk(b) => Some(&b.turn),
        EntryBody::TurnStarted(b) => Some(&b.turn),
        EntryBody::TurnEnded(b) => Some(&b.turn),
        EntryBody::TurnFailed(b) => Some(&b.turn),
        EntryBody::Signal(s) if s.name == TURN_RESULT_SIGNAL => {
            s.data.get("turn").and_then(|t| t.as_str())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        AssistantEntry, NewEntry, Signal, ThreadId, ToolResultEntry, TurnEnded, TurnStarted,
    };
    use roundtable_providers::{AssistantMessage, ToolCall, ToolResultMessage};

    fn entry(body: EntryBody) -> Entry {
        NewEntry::new("bot", body).into_entry(ThreadId::new("t").unwrap(), 1)
    }

    fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall::new(id, name, args.as_object().unwrap().clone())
    }

    #[test]
    fn turn_lifecycle_entries_make_runs() {
        let started = entry(EntryBody::TurnStarted(TurnStarted {
            turn: "u1".into(),
            trigger: Some(3),
            depth: 2,
            reason: Some("mention".into()),
        }));
        assert_eq!(
            derive_rows(&started, &DeriveOptions::default()),
            vec![DerivedRow::RunStarted {
                turn: "u1".into(),
                trigger: Some(3),
                depth: 2,
                reason: Some("mention".into())
            }]
        );
        let ended = entry(EntryBody::TurnEnded(TurnEnded {
            turn: "u1".into(),
            reason: "stop".into(),
        }));
        assert!(matches!(
            &derive_rows(&ended, &DeriveOptions::default())[..],
            [DerivedRow::RunEnded { failed: false, reason, .. }] if reason == "stop"
        ));
        let result = entry(EntryBody::Signal(Signal {
            name: TURN_RESULT_SIGNAL.into(),
            data: serde_json::json!({"turn": "u1", "finish_reason": "stop", "rounds": 2,
                "duration_ms": 1500, "model": "openai/gpt", "text": "hi", "usage": {}})
            .into(),
        }));
        assert_eq!(
            derive_rows(&result, &DeriveOptions::default()),
            vec![DerivedRow::RunResult {
                turn: "u1".into(),
                finish_reason: Some("stop".into()),
                rounds: Some(2),
                duration_ms: Some(1500),
                model: Some("openai/gpt".into()),
                error: None,
            }]
        );
    }

    #[test]
    fn assistant_messages_make_usage_tool_calls_and_patch_changes() {
        let mut message = AssistantMessage::empty("openai-completions", "openai", "gpt", 1);
        message.usage.input = 100;
        message.usage.cost.total = 0.5;
        let patch = "--- a/a.rs\n+++ b/a.rs\n@@ -1 +1,2 @@\n-x\n+y\n+z\n";
        message.content.push(AssistantBlock::ToolCall(call(
            "c1",
            "apply_patch",
            serde_json::json!({"patch": patch}),
        )));
        message.content.push(AssistantBlock::ToolCall(call(
            "c2",
            "read_file",
            serde_json::json!({"path": "a.rs"}),
        )));
        let e = entry(EntryBody::Assistant(AssistantEntry::new(
            Some("u1".into()),
            message,
        )));
        let rows = derive_rows(&e, &DeriveOptions::default());
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert!(matches!(&rows[0],
            DerivedRow::RunUsage { usage, tool_calls: 2, .. } if usage.input == 100 && usage.cost.total == 0.5));
        assert!(
            matches!(&rows[1], DerivedRow::ToolCalled { call_id, tool, .. } if &**call_id == "c1" && &**tool == "apply_patch")
        );
        assert!(matches!(&rows[2], DerivedRow::FileChanged {
            change: FileChange::Modified, path, added: 2, removed: 1, .. } if path == "a.rs"));
        assert!(matches!(&rows[3], DerivedRow::ToolCalled { call_id, .. } if &**call_id == "c2"));
        // Another host's patch tool is named in the options.
        let other = DeriveOptions {
            patch_tools: vec![],
            ..DeriveOptions::default()
        };
        assert_eq!(derive_rows(&e, &other).len(), 3);
    }

    #[test]
    fn tool_results_finish_their_call() {
        let c = call("c1", "shell", serde_json::json!({}));
        let e = entry(EntryBody::ToolResult(ToolResultEntry {
            turn: None,
            message: ToolResultMessage::text(&c, "x".repeat(5000), true, 2).into(),
        }));
        match &derive_rows(&e, &DeriveOptions::default())[..] {
            [
                DerivedRow::ToolFinished {
                    call_id,
                    is_error: true,
                    text,
                    turn: None,
                    ..
                },
            ] => {
                assert_eq!(&**call_id, "c1");
                assert_eq!(text.len(), 2000);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn other_entries_derive_nothing() {
        assert!(derive_rows(&entry(EntryBody::chat("hi")), &DeriveOptions::default()).is_empty());
        let typing = entry(EntryBody::Signal(Signal {
            name: "typing".into(),
            data: serde_json::Value::Null.into(),
        }));
        assert!(derive_rows(&typing, &DeriveOptions::default()).is_empty());
    }
}
