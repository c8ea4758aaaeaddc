//! What a summarizer is asked: the system prompt, the prompt for one piece
//! of transcript (folding in the summary so far), and the humans' own words
//! carried from summary to summary verbatim.

use super::estimate::text_tokens;
use super::transcript::cut;
use crate::roster::Roster;

/// The summarizer's system prompt.
pub const SUMMARY_SYSTEM_PROMPT: &str = "\
You are a context summarization assistant. You read the record of a conversation in which \
several participants (humans and bots) talk with an AI assistant, called \"you\" in the record, \
and you write the structured summary the assistant will continue from.

Do NOT continue the conversation. Do NOT answer any question in it. ONLY output the summary, \
in the format asked for.";

/// The heading of the summary's last section: the humans' messages word
/// for word, kept by the runner rather than by the summarizing model.
pub const HUMANS_WORDS_HEADING: &str = "## The humans' own words";

/// The sections every summary has, in order.
const SECTIONS: &str = "\
## Goal
[What the participants are trying to achieve; several items if there are several tasks.]

## Participants and roles
- [Each participant by name: who they are and what part they play]

## What was asked of you
- [Every request addressed to you (the assistant), by whom, and whether it is answered]

## Constraints and preferences
- [Rules, limits and preferences the participants stated, as exactly as they said them]
- [Or \"(none)\"]

## Progress
### Done
- [x] [Completed work]
### In progress
- [ ] [Work under way]
### Blocked
- [What prevents progress, if anything]

## Decisions
- **[Decision]**: [why, and who decided]

## Next steps
1. [What should happen next, in order]

## Files touched
- [Files read or changed, with what was done to them; or \"(none)\"]

Keep each section short. Keep exact file paths, names, numbers and error messages.";

/// What one summarizer call is given.
#[derive(Debug, Clone, Copy)]
pub struct SummaryInput<'a> {
    /// The roster, for the participants section.
    pub roster: &'a Roster,
    /// The bot the summary is for (its id).
    pub self_id: &'a str,
    /// The summary so far: the previous compaction's, or the one folded
    /// from the earlier pieces of this transcript.
    pub previous: Option<&'a str>,
    /// The piece of transcript to take in.
    pub transcript: &'a [String],
    /// The files the bot's tools touched in it.
    pub files: &'a [String],
    /// What the summary should stress (a host's manual compaction).
    pub focus: Option<&'a str>,
}

/// The prompt of one summarizer call: the record, the summary so far, and
/// the instructions to write or update the summary.
pub fn summary_prompt(input: &SummaryInput<'_>) -> String {
    let mut prompt = String::new();
    prompt.push_str("<participants>\n");
    for p in input.roster.participants() {
        let role = if *p.id == *input.self_id {
            "you, the assistant".to_string()
        } else if p.is_bot() {
            format!(
                "a bot, labelled bot:{}",
                input.roster.handle_of(&p.id).unwrap_or(&p.id)
            )
        } else {
            "a human".to_string()
        };
        prompt.push_str(&format!("- {} ({role})", p.name));
        if let Some(about) = &p.about {
            prompt.push_str(&format!(": {about}"));
        }
        prompt.push('\n');
    }
    prompt.push_str("</participants>\n\n<conversation>\n");
    prompt.push_str(&input.transcript.join("\n\n"));
    prompt.push_str("\n</conversation>\n\n");
    if !input.files.is_empty() {
        prompt.push_str("<files-touched>\n");
        prompt.push_str(&input.files.join("\n"));
        prompt.push_str("\n</files-touched>\n\n");
    }
    match input.previous {
        Some(previous) => {
            prompt.push_str("<previous-summary>\n");
            prompt.push_str(previous);
            prompt.push_str("\n</previous-summary>\n\n");
            prompt.push_str(
                "The conversation above comes after what the summary in <previous-summary> \
                 covers. Update that summary with it: keep everything still true, add the new \
                 progress, decisions, requests and constraints, move finished work to Done, and \
                 bring Next steps up to date. Use this exact format:\n\n",
            );
        }
        None => prompt.push_str(
            "Summarize the conversation above as a checkpoint the assistant will continue \
             from. Use this exact format:\n\n",
        ),
    }
    prompt.push_str(SECTIONS);
    if let Some(focus) = input.focus.filter(|f| !f.trim().is_empty()) {
        prompt.push_str("\n\nStress in particular: ");
        prompt.push_str(focus.trim());
    }
    prompt
}

/// The summary without its humans' words section, and the quotes of that
/// section (each `[Name]: text`).
///
/// ```
/// use roundtable_dispatch::compaction::{split_humans_words, with_humans_words};
///
/// let summary = with_humans_words("## Goal\nShip it.", &["[Alice]: use staging\nnot prod".to_string()], 1_000);
/// let (rest, quotes) = split_humans_words(&summary);
/// assert_eq!(rest, "## Goal\nShip it.");
/// assert_eq!(quotes, ["[Alice]: use staging\nnot prod"]);
/// ```
pub fn split_humans_words(summary: &str) -> (&str, Vec<String>) {
    let heading = format!("\n\n{HUMANS_WORDS_HEADING}\n");
    let Some(at) = summary.rfind(&heading) else {
        return (summary, Vec::new());
    };
    let quotes = summary[at + heading.len()..]
        .split("\n\n")
        .map(|q| q.trim_matches('\n'))
        .filter(|q| q.starts_with('>'))
        .map(|q| {
            q.lines()
                .map(|l| {
                    l.strip_prefix("> ")
                        .or_else(|| l.strip_prefix('>'))
                        .unwrap_or(l)
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    (&summary[..at], quotes)
}

/// The most characters of one quote kept verbatim.
const QUOTE_CHARS: usize = 1_000;

/// `summary` with a last section holding `quotes` word for word, earliest
/// first, in at most `budget_chars` characters: each quote cut to 1,000
/// characters or to what is left of the budget (a quote of fewer than 40
/// characters left is not started). The first requests and rules of a long
/// conversation are what summaries lose; the later ones are still in the
/// summary and the kept tail.
pub fn with_humans_words(summary: &str, quotes: &[String], budget_chars: usize) -> String {
    let mut section = String::new();
    let mut left = budget_chars;
    for quote in quotes {
        let size = quote.chars().count();
        if size > left && left < MIN_QUOTE_CHARS {
            break;
        }
        let quote = cut(quote, QUOTE_CHARS.min(left));
        left = left.saturating_sub(size.min(QUOTE_CHARS));
        section.push_str("\n\n");
        let quoted: Vec<String> = quote.lines().map(|l| format!("> {l}")).collect();
        section.push_str(quoted.join("\n").trim_end());
    }
    let summary = summary.trim_end();
    if section.is_empty() {
        return summary.to_string();
    }
    format!("{summary}\n\n{HUMANS_WORDS_HEADING}{section}")
}

/// The shortest part of a quote worth starting when the budget is nearly
/// spent.
const MIN_QUOTE_CHARS: usize = 40;

/// Splits a transcript into pieces of at most `budget_tokens` each (a
/// paragraph longer than that is cut to fit), for a summarizer whose window
/// cannot take it whole: each piece is folded into the summary of the ones
/// before it.
pub fn chunk_transcript(lines: &[String], budget_tokens: u64) -> Vec<Vec<String>> {
    let budget = budget_tokens.max(1);
    let max_chars = usize::try_from(budget.saturating_mul(4)).unwrap_or(usize::MAX);
    let mut chunks: Vec<Vec<String>> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut used = 0u64;
    for line in lines {
        let line = if text_tokens(line) > budget {
            let kept: String = line.chars().take(max_chars.saturating_sub(64)).collect();
            format!("{kept} [... cut]")
        } else {
            line.clone()
        };
        let tokens = text_tokens(&line);
        if used + tokens > budget && !current.is_empty() {
            chunks.push(std::mem::take(&mut current));
            used = 0;
        }
        used += tokens;
        current.push(line);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_keep_the_earliest_within_the_budget() {
        let quotes = vec![
            "[A]: one".to_string(),
            "[B]: two".to_string(),
            "[C]: three".to_string(),
        ];
        let summary = with_humans_words("S", &quotes, 17);
        let (rest, kept) = split_humans_words(&summary);
        assert_eq!(rest, "S");
        assert_eq!(kept, ["[A]: one", "[B]: two"]);
        assert_eq!(with_humans_words("S\n", &[], 100), "S");
        // A long first quote is cut to the budget rather than left out.
        let long = vec![format!("[A]: {}", "x".repeat(200))];
        let (_, kept) = split_humans_words(&with_humans_words("S", &long, 50));
        assert!(kept[0].starts_with(&format!("[A]: {}", "x".repeat(45))));
        assert!(kept[0].ends_with("more characters cut]"));
    }

    #[test]
    fn a_transcript_is_cut_into_pieces_that_fit() {
        let lines: Vec<String> = ["a".repeat(8), "b".repeat(8), "c".repeat(100)].into();
        let chunks = chunk_transcript(&lines, 4);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].len(), 2);
        assert!(
            chunks
                .iter()
                .flatten()
                .all(|l| text_tokens(l) <= 4 || l.ends_with("[... cut]"))
        );
        assert_eq!(chunk_transcript(&lines[..2], 10).len(), 1);
    }
}
