//! Running the summarizer: one call per piece of transcript, each folding
//! its piece into the summary so far, so that a transcript larger than the
//! summary model's window is still summarised (and the summarizer never
//! overflows the way the bot did).

use roundtable_dispatch::compaction::{
    SUMMARY_SYSTEM_PROMPT, SummaryInput, chunk_transcript, summary_prompt,
};
use roundtable_dispatch::{Roster, text_tokens};
use roundtable_providers::{
    Context, ErrorKind, Message, StopReason, UserMessage, complete, is_context_overflow, now_millis,
};
use tokio_util::sync::CancellationToken;

use super::config::SummaryModel;
use super::error::CompactionError;

/// How many times the pieces are halved after the summarizer refused one
/// as too large (the estimate was off for its tokenizer).
const HALVINGS: u32 = 3;

/// Window assumed for a summary model that states none.
const UNKNOWN_WINDOW: u64 = 128_000;

/// What to summarise.
pub(crate) struct SummaryJob<'a> {
    pub(crate) roster: &'a Roster,
    pub(crate) self_id: &'a str,
    /// The previous compaction's summary (its humans' words taken out).
    pub(crate) previous: Option<&'a str>,
    pub(crate) transcript: Vec<String>,
    pub(crate) files: Vec<String>,
    pub(crate) focus: Option<&'a str>,
    /// The most tokens the summary may take.
    pub(crate) max_tokens: u64,
}

/// Summarises `job` with `summarizer`: the transcript in pieces that fit the
/// summary model's window, each folded into the summary of the ones before.
pub(crate) async fn summarize(
    summarizer: &SummaryModel,
    job: &SummaryJob<'_>,
    cancel: &CancellationToken,
) -> Result<String, CompactionError> {
    let mut budget = piece_budget(summarizer, job)?;
    let mut summary = job.previous.map(str::to_string);
    let mut next = 0;
    let mut halvings = 0;
    let mut options = summarizer.options.clone();
    options.max_tokens = Some(job.max_tokens);
    options.cancel = cancel.clone();
    while next < job.transcript.len() || (next == 0 && job.transcript.is_empty()) {
        let piece = chunk_transcript(&job.transcript[next..], budget)
            .into_iter()
            .next()
            .unwrap_or_default();
        let context = piece_request(job, summary.as_deref(), &piece);
        let done = complete(&*summarizer.provider, &summarizer.model, &context, &options).await;
        if cancel.is_cancelled() || done.error == Some(ErrorKind::Aborted) {
            return Err(CompactionError::Aborted);
        }
        let overflow =
            done.error == Some(ErrorKind::ContextOverflow) || is_context_overflow(&done.message, 0);
        if overflow && halvings < HALVINGS && !piece.is_empty() {
            halvings += 1;
            budget /= 2;
            continue;
        }
        if done.error.is_some() || done.message.stop_reason == StopReason::Error {
            return Err(CompactionError::Summarizer(
                done.message
                    .error_message
                    .unwrap_or_else(|| "the summary model failed".to_string()),
            ));
        }
        let text = done.message.text();
        if text.trim().is_empty() {
            return Err(CompactionError::Summarizer(
                "the summary model answered with no text".to_string(),
            ));
        }
        summary = Some(text.trim().to_string());
        next += piece.len().max(1);
    }
    summary.ok_or_else(|| CompactionError::Summarizer("nothing was summarised".to_string()))
}

/// The tokens of transcript one call may carry: the summary model's window
/// less what every call sends besides its piece, and a tenth spare for the
/// estimate's error. Fails when too little is left.
fn piece_budget(summarizer: &SummaryModel, job: &SummaryJob<'_>) -> Result<u64, CompactionError> {
    let window = match summarizer.model.context_window {
        0 => UNKNOWN_WINDOW,
        window => window,
    };
    // What every call sends besides its piece: the system prompt, the
    // prompt's frame, the summary so far (at most the summary's size).
    let frame = text_tokens(&summary_prompt(&SummaryInput {
        roster: job.roster,
        self_id: job.self_id,
        previous: None,
        transcript: &[],
        files: &job.files,
        focus: job.focus,
    }));
    let previous = job.previous.map_or(0, text_tokens).max(job.max_tokens);
    let fixed = text_tokens(SUMMARY_SYSTEM_PROMPT) + frame + previous + job.max_tokens;
    // A tenth of the window spare, for the estimate's error.
    let budget = (window - window / 10).saturating_sub(fixed);
    if budget < 256 {
        return Err(CompactionError::Summarizer(format!(
            "the summary model's window ({window} tokens) cannot hold a summary of {} tokens and its instructions",
            job.max_tokens
        )));
    }
    Ok(budget)
}

/// The request folding `piece` of the transcript into `summary`, the
/// summary so far.
fn piece_request(job: &SummaryJob<'_>, summary: Option<&str>, piece: &[String]) -> Context {
    let prompt = summary_prompt(&SummaryInput {
        roster: job.roster,
        self_id: job.self_id,
        previous: summary,
        transcript: piece,
        files: &job.files,
        focus: job.focus,
    });
    Context {
        system_prompt: Some(SUMMARY_SYSTEM_PROMPT.to_string()),
        messages: vec![Message::from(UserMessage::text(prompt, now_millis()))],
        tools: Default::default(),
    }
}
