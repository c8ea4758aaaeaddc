//! Prints one bot's view of a thread: the messages `build_messages` projects
//! for it, as pi-ai-shaped JSON, one message per line.
//!
//! ```text
//! cargo run --example project -- THREAD.jsonl BOT_ID [--system]
//! ```
//!
//! `THREAD.jsonl` is a thread file written by the JSONL store (one entry per
//! line). The file carries no roster, so one is derived from it: authors of
//! assistant, tool-result, chunk, compaction or turn entries (and `BOT_ID`)
//! are bots, everyone else is human, and display names are ids. A torn last
//! line (a crash in the middle of an append) is skipped with a note on
//! stderr. `--system` also prints the bot's system prompt on stderr.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;

use roundtable_dispatch::{
    BotProfile, Participant, Roster, ThreadContext, Trigger, build_messages, system_prompt,
};
use roundtable_thread_stream::{Entry, EntryBody};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let show_system = args.iter().any(|a| a == "--system");
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [path, bot] = positional.as_slice() else {
        eprintln!("usage: project THREAD.jsonl BOT_ID [--system]");
        return ExitCode::from(2);
    };

    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("cannot read {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let entries = match read_entries(&text) {
        Ok(entries) => entries,
        Err(message) => {
            eprintln!("{path}: {message}");
            return ExitCode::FAILURE;
        }
    };

    let roster = match derive_roster(&entries, bot) {
        Ok(roster) => roster,
        Err(e) => {
            eprintln!("cannot build a roster from {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if show_system {
        let thread = entries.first().map_or("thread", |e| e.thread.as_str());
        match system_prompt(bot, &roster, &ThreadContext::new(thread)) {
            Ok(prompt) => eprintln!("{prompt}"),
            Err(e) => eprintln!("no system prompt: {e}"),
        }
    }

    let messages = build_messages(bot, &entries, &roster);
    let mut out = std::io::stdout().lock();
    for m in &messages {
        let line = serde_json::to_string(m).expect("messages always serialise");
        if writeln!(out, "{line}").is_err() {
            break; // stdout closed (e.g. piped into `head`)
        }
    }
    ExitCode::SUCCESS
}

/// Parses one entry per line; a bad last line is a torn append and is
/// skipped, a bad line anywhere else is an error.
fn read_entries(text: &str) -> Result<Vec<Entry>, String> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let mut entries = Vec::with_capacity(lines.len());
    for (k, (n, line)) in lines.iter().enumerate() {
        match serde_json::from_str::<Entry>(line) {
            Ok(entry) => entries.push(entry),
            Err(e) if k + 1 == lines.len() => {
                eprintln!("skipping torn last line {}: {e}", n + 1);
            }
            Err(e) => return Err(format!("line {}: {e}", n + 1)),
        }
    }
    Ok(entries)
}

/// Bots are the authors of what only bots write; everyone else is human.
fn derive_roster(
    entries: &[Entry],
    bot: &str,
) -> Result<Roster, roundtable_dispatch::DispatchError> {
    let mut bots = BTreeSet::from([bot.to_owned()]);
    let mut everyone = vec![bot.to_owned()];
    for e in entries {
        if !everyone.iter().any(|p| **p == *e.author) {
            everyone.push(e.author.to_string());
        }
        if !matches!(
            e.body,
            EntryBody::Chat(_) | EntryBody::Signal(_) | EntryBody::Other { .. }
        ) {
            bots.insert(e.author.to_string());
        }
    }
    Roster::new(everyone.into_iter().map(|id| {
        if bots.contains(&id) {
            Participant::bot(id.clone(), id, BotProfile::new(Trigger::Mention, ""))
        } else {
            Participant::human(id.clone(), id)
        }
    }))
}
