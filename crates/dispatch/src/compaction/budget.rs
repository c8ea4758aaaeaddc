//! When to compact and how much to keep, from a model's context window.

/// The most tokens kept free for the model's answer (pi's default reserve).
pub const DEFAULT_RESERVE_TOKENS: u64 = 16_384;

/// The most recent tokens kept in full after a compaction (pi's default).
pub const DEFAULT_KEEP_RECENT_TOKENS: u64 = 20_000;

/// The token budget of one bot's conversation with its model.
///
/// A request is compacted before it is sent when its estimate is above
/// [`threshold`](Self::threshold) (the window less the reserve); a
/// compaction keeps about `keep_recent_tokens` of the newest conversation
/// in full. For a small window both are a quarter of it, so a compaction
/// always has room to help.
///
/// ```
/// use roundtable_dispatch::compaction::CompactionBudget;
///
/// let large = CompactionBudget::for_window(200_000);
/// assert_eq!((large.reserve_tokens, large.keep_recent_tokens), (16_384, 20_000));
/// assert_eq!(large.threshold(), 183_616);
/// let small = CompactionBudget::for_window(8_000);
/// assert_eq!((small.reserve_tokens, small.keep_recent_tokens), (2_000, 2_000));
/// assert!(small.should_compact(6_001));
/// assert!(!CompactionBudget::for_window(0).should_compact(u64::MAX));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionBudget {
    /// The model's context window in tokens (0: unknown, never compact on
    /// the estimate).
    pub context_window: u64,
    /// Tokens kept free for the answer.
    pub reserve_tokens: u64,
    /// Tokens of the newest conversation kept in full.
    pub keep_recent_tokens: u64,
}

impl CompactionBudget {
    /// The budget of a window: reserve `min(16,384, window / 4)`, keep
    /// `min(20,000, window / 4)`.
    pub fn for_window(context_window: u64) -> Self {
        Self {
            context_window,
            reserve_tokens: DEFAULT_RESERVE_TOKENS.min(context_window / 4),
            keep_recent_tokens: DEFAULT_KEEP_RECENT_TOKENS.min(context_window / 4),
        }
    }

    /// Above this many tokens a request is compacted first.
    pub fn threshold(&self) -> u64 {
        self.context_window.saturating_sub(self.reserve_tokens)
    }

    /// Whether a request of `tokens` should be compacted before it is sent.
    pub fn should_compact(&self, tokens: u64) -> bool {
        self.context_window > 0 && tokens > self.threshold()
    }

    /// Whether a compacted request of `tokens` leaves enough room before
    /// the next compaction (half the reserve below the threshold). A
    /// compaction that leaves less would be followed by another almost at
    /// once, each costing a summary: the runner stops compacting that bot.
    pub fn well_under(&self, tokens: u64) -> bool {
        tokens.saturating_add(self.reserve_tokens / 2) <= self.threshold()
    }

    /// The most tokens a summary may take: four fifths of the reserve (as
    /// pi asks of its summarizer), at least 256.
    pub fn summary_max_tokens(&self) -> u64 {
        (self.reserve_tokens.saturating_mul(4) / 5).max(256)
    }
}
