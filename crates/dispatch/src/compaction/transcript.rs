//! What a summarizer reads: the covered part of a bot's view as labelled
//! text, one paragraph per message, so that the summarizing model reads a
//! record of a conversation instead of a conversation to continue.
//!
//! Labels tell speakers apart as the bot saw them: a human by name
//! (`[Alice]`), another bot by handle (`[bot:critic]`), the bot itself as
//! `[you]`. Tool results, arguments and thinking are cut to a length, as
//! pi's summarizer does: their gist is enough to summarise.

use roundtable_providers::{AssistantBlock, JsonObject, UserBlock};
use roundtable_thread_stream::{Entry, EntryBody};

use super::units::ViewUnit;
use crate::event::is_final;
use crate::roster::Roster;

/// How many characters of a tool result, tool arguments or thinking a
/// transcript keeps (pi's summarizer keeps 2,000 of a tool result).
pub const TRANSCRIPT_CUT_CHARS: usize = 2_000;

/// The transcript of `units` of bot `self_id`'s `view`: one paragraph per
/// message, in the order the projection shows them, each piece of tool
/// traffic and thinking cut to `cut_chars` characters.
///
/// ```
/// use roundtable_dispatch::compaction::{TRANSCRIPT_CUT_CHARS, split_view, transcript};
/// use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger};
/// use roundtable_thread_stream::{EntryBody, NewEntry, ThreadId};
///
/// let roster = Roster::new([
///     Participant::human("u1", "Alice"),
///     Participant::bot("b1", "Archive Bot", BotProfile::new(Trigger::Mention, "You keep the archive.")),
/// ])?;
/// let thread = ThreadId::new("t")?;
/// let view = vec![
///     NewEntry::new("u1", EntryBody::chat("where is Q3?")).into_entry(thread.clone(), 1),
///     NewEntry::new("b1", EntryBody::chat("In /reports.")).into_entry(thread, 2),
/// ];
/// let split = split_view("b1", &view, &roster);
/// assert_eq!(
///     transcript("b1", &view, &split.units, &roster, TRANSCRIPT_CUT_CHARS),
///     ["[Alice]: where is Q3?", "[you]: In /reports."],
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn transcript(
    self_id: &str,
    view: &[Entry],
    units: &[ViewUnit],
    roster: &Roster,
    cut_chars: usize,
) -> Vec<String> {
    let mut lines = Vec::new();
    for e in units
        .iter()
        .flat_map(|u| &u.positions)
        .filter_map(|&p| view.get(p))
    {
        let own = *e.author == *self_id;
        let label = if own {
            "you".to_string()
        } else {
            speaker(roster, &e.author)
        };
        match &e.body {
            EntryBody::Chat(chat) => {
                let mut text = chat.text.to_string();
                for part in &chat.parts {
                    text.push('\n');
                    match part {
                        UserBlock::Text(t) => text.push_str(&t.text),
                        UserBlock::Image(i) => text.push_str(&format!("[image: {}]", i.mime_type)),
                    }
                }
                lines.push(format!("[{label}]: {text}"));
            }
            EntryBody::Assistant(a) if own => {
                for block in &a.message().content {
                    match block {
                        AssistantBlock::Thinking(t) if !t.thinking.trim().is_empty() => {
                            lines.push(format!("[you, thinking]: {}", cut(&t.thinking, cut_chars)))
                        }
                        AssistantBlock::Text(t) if !t.text.trim().is_empty() => {
                            lines.push(format!("[you]: {}", t.text));
                        }
                        AssistantBlock::ToolCall(call) => lines.push(format!(
                            "[you called {}]: {}",
                            call.name,
                            cut(&arguments(&call.arguments), cut_chars)
                        )),
                        _ => {}
                    }
                }
            }
            EntryBody::Assistant(a) if is_final(a.message()) => {
                lines.push(format!("[{label}]: {}", a.message().text()));
            }
            EntryBody::ToolResult(r) => {
                let mut text = String::new();
                for block in &r.message.content {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    match block {
                        UserBlock::Text(t) => text.push_str(&t.text),
                        UserBlock::Image(i) => text.push_str(&format!("[image: {}]", i.mime_type)),
                    }
                }
                let error = if r.message.is_error { ", an error" } else { "" };
                lines.push(format!(
                    "[result of {}{error}]: {}",
                    r.message.tool_name,
                    cut(&text, cut_chars)
                ));
            }
            _ => {}
        }
    }
    lines
}

/// How a transcript names someone other than the bot: a bot by handle
/// (`bot:critic`), anyone else by name.
pub(crate) fn speaker(roster: &Roster, id: &str) -> String {
    if roster.is_bot(id) {
        format!("bot:{}", roster.handle_of(id).unwrap_or(id))
    } else {
        roster.name_of(id).to_string()
    }
}

/// The humans' messages among `units` of `view`, each as `[Name]: text`:
/// the words a summary must not paraphrase away. Bots (the roster's, and
/// whoever wrote an assistant message in the view) are left out.
pub fn humans_words(
    self_id: &str,
    view: &[Entry],
    units: &[ViewUnit],
    roster: &Roster,
) -> Vec<String> {
    let bots: std::collections::HashSet<&str> = view
        .iter()
        .filter(|e| matches!(e.body, EntryBody::Assistant(_)))
        .map(|e| &*e.author)
        .collect();
    units
        .iter()
        .flat_map(|u| &u.positions)
        .filter_map(|&p| view.get(p))
        .filter(|e| {
            *e.author != *self_id && !roster.is_bot(&e.author) && !bots.contains(&*e.author)
        })
        .filter_map(|e| match &e.body {
            EntryBody::Chat(chat) if !chat.text.trim().is_empty() => {
                Some(format!("[{}]: {}", roster.name_of(&e.author), chat.text))
            }
            _ => None,
        })
        .collect()
}

/// The files the bot's tool calls among `units` named: a `path` argument,
/// each string of a `paths` argument, and the files a `patch` argument (a
/// unified diff) changes; as `tool: path`, in order, once each.
pub fn files_touched(self_id: &str, view: &[Entry], units: &[ViewUnit]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    let mut add = |tool: &str, path: &str| {
        let line = format!("{tool}: {path}");
        if !path.is_empty() && !files.contains(&line) {
            files.push(line);
        }
    };
    for e in units
        .iter()
        .flat_map(|u| &u.positions)
        .filter_map(|&p| view.get(p))
    {
        let EntryBody::Assistant(a) = &e.body else {
            continue;
        };
        if *e.author != *self_id {
            continue;
        }
        for call in a.message().tool_calls() {
            let args = &call.arguments;
            for key in ["path", "file", "file_path"] {
                if let Some(path) = args.get(key).and_then(|v| v.as_str()) {
                    add(&call.name, path);
                }
            }
            if let Some(paths) = args.get("paths").and_then(|v| v.as_array()) {
                for path in paths.iter().filter_map(|v| v.as_str()) {
                    add(&call.name, path);
                }
            }
            if let Some(patch) = args.get("patch").and_then(|v| v.as_str()) {
                for path in patched_files(patch) {
                    add(&call.name, path);
                }
            }
        }
    }
    files
}

/// The files a unified diff changes (`+++ b/x`, or `--- a/x` for a file it
/// deletes).
fn patched_files(patch: &str) -> Vec<&str> {
    let mut files = Vec::new();
    let mut old = None;
    for line in patch.lines() {
        if let Some(path) = line.strip_prefix("--- ") {
            old = Some(strip_side(path));
        } else if let Some(path) = line.strip_prefix("+++ ") {
            let new = strip_side(path);
            match (new, old.take()) {
                ("/dev/null", Some(old)) if old != "/dev/null" => files.push(old),
                ("/dev/null", _) => {}
                (new, _) => files.push(new),
            }
        }
    }
    files
}

fn strip_side(path: &str) -> &str {
    let path = path.split('\t').next().unwrap_or(path).trim();
    path.strip_prefix("a/")
        .or_else(|| path.strip_prefix("b/"))
        .unwrap_or(path)
}

/// Tool arguments as `key=value` pairs (values as JSON), as pi writes them.
fn arguments(args: &JsonObject) -> String {
    args.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first `max` characters of `text`, and how many more there were.
pub(crate) fn cut(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}\n\n[... {} more characters cut]", total - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_what_it_changes_adds_and_deletes() {
        let patch = "--- a/src/a.rs\n+++ b/src/a.rs\n@@\n--- /dev/null\n+++ b/new.txt\n--- a/gone.txt\n+++ /dev/null\n";
        assert_eq!(patched_files(patch), ["src/a.rs", "new.txt", "gone.txt"]);
    }

    #[test]
    fn long_text_is_cut_with_a_note() {
        assert_eq!(cut("abcdef", 4), "abcd\n\n[... 2 more characters cut]");
        assert_eq!(cut("abc", 4), "abc");
    }
}
