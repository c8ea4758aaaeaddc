//! How a runner compacts: on or off, the budget (defaults from the bot's
//! model), the summary model, the loop breakers.

use std::sync::Arc;

use roundtable_dispatch::compaction::{CompactionBudget, TRANSCRIPT_CUT_CHARS};
use roundtable_providers::{Model, Provider, StreamOptions};

/// The most compactions one turn runs (the loop breaker for a conversation
/// that a compaction cannot shrink enough).
pub const DEFAULT_MAX_PER_TURN: u32 = 2;

/// How many characters of the humans' own words a summary carries
/// verbatim.
pub const DEFAULT_HUMANS_WORDS_CHARS: usize = 4_000;

/// A model that writes summaries instead of the bot's own (a cheaper one).
#[derive(Clone)]
pub struct SummaryModel {
    /// Its provider.
    pub provider: Arc<dyn Provider>,
    /// The model (its context window sizes the pieces a long transcript is
    /// folded in).
    pub model: Model,
    /// Stream options of its calls (key, thinking level); the output limit
    /// and cancellation are set per call.
    pub options: StreamOptions,
}

impl std::fmt::Debug for SummaryModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryModel")
            .field("model", &self.model.id)
            .finish_non_exhaustive()
    }
}

/// How a runner compacts its bots' conversations.
///
/// By default: automatically, before any model request whose estimate
/// passes the model's window less a reserve of `min(16k, window / 4)`
/// tokens, keeping about `min(20k, window / 4)` of the newest tokens in
/// full, with the bot's own model writing the summary, at most
/// [`DEFAULT_MAX_PER_TURN`] compactions a turn.
///
/// ```
/// use roundtable_chat_runner::compaction::CompactionConfig;
/// use roundtable_providers::{Model, OPENAI_COMPLETIONS};
///
/// let config = CompactionConfig::default().with_context_window(32_000);
/// let budget = config.budget(&Model::new(OPENAI_COMPLETIONS, "p", "m", ""));
/// assert_eq!(budget.threshold(), 32_000 - 8_000);
/// assert_eq!(budget.keep_recent_tokens, 8_000);
/// ```
#[derive(Clone, Debug)]
pub struct CompactionConfig {
    /// Compact before a model request on the estimate (and after a context
    /// overflow). Off: only a host's manual compaction runs.
    pub automatic: bool,
    /// The context window (default: the bot's model's).
    pub context_window: Option<u64>,
    /// The tokens kept free for the answer (default `min(16,384, window / 4)`).
    pub reserve_tokens: Option<u64>,
    /// The newest tokens kept in full (default `min(20,000, window / 4)`).
    pub keep_recent_tokens: Option<u64>,
    /// The model that writes summaries (default: the bot's own).
    pub summary_model: Option<SummaryModel>,
    /// The most compactions one turn runs.
    pub max_per_turn: u32,
    /// How many characters of a tool result, tool arguments or thinking the
    /// summarizer reads.
    pub tool_output_chars: usize,
    /// How many characters of the humans' messages a summary carries word
    /// for word (at most half of what the summary may take).
    pub humans_words_chars: usize,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            automatic: true,
            context_window: None,
            reserve_tokens: None,
            keep_recent_tokens: None,
            summary_model: None,
            max_per_turn: DEFAULT_MAX_PER_TURN,
            tool_output_chars: TRANSCRIPT_CUT_CHARS,
            humans_words_chars: DEFAULT_HUMANS_WORDS_CHARS,
        }
    }
}

impl CompactionConfig {
    /// Only manual compactions (a host's `compact` call).
    pub fn manual_only() -> Self {
        Self {
            automatic: false,
            ..Self::default()
        }
    }

    /// Sets the context window instead of the model's.
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the reserve.
    pub fn with_reserve_tokens(mut self, tokens: u64) -> Self {
        self.reserve_tokens = Some(tokens);
        self
    }

    /// Sets how many of the newest tokens stay in full.
    pub fn with_keep_recent_tokens(mut self, tokens: u64) -> Self {
        self.keep_recent_tokens = Some(tokens);
        self
    }

    /// Has another model write the summaries.
    pub fn with_summary_model(mut self, model: SummaryModel) -> Self {
        self.summary_model = Some(model);
        self
    }

    /// Sets the most compactions one turn runs.
    pub fn with_max_per_turn(mut self, n: u32) -> Self {
        self.max_per_turn = n;
        self
    }

    /// The budget of a bot whose model is `model`.
    pub fn budget(&self, model: &Model) -> CompactionBudget {
        let mut budget =
            CompactionBudget::for_window(self.context_window.unwrap_or(model.context_window));
        if let Some(reserve) = self.reserve_tokens {
            budget.reserve_tokens = reserve;
        }
        if let Some(keep) = self.keep_recent_tokens {
            budget.keep_recent_tokens = keep;
        }
        budget
    }
}
