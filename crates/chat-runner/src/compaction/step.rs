//! The compaction step of one turn: asked by the turn loop before every
//! model request, it compacts when the estimate passes the threshold, and
//! after a context overflow compacts harder so the request can be retried.
//!
//! The loop breakers live here: at most `max_per_turn` compactions a turn,
//! one overflow retry a turn, no automatic compaction of a bot whose fixed
//! part alone passes the threshold or whose compaction did not bring the
//! request well under it (each said once, in a `compaction_ended` event).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use roundtable_dispatch::compaction::{CompactionBudget, RunningCount};
use roundtable_providers::{Context, Message};

use super::compactor::{BotCompaction, Compacted, CompactionTarget, Compactor, Job, Output};
use super::error::CompactionError;
use crate::compact_step::{CompactStep, ContextCheck};
use crate::event::{CompactionReason, TurnEvent};
use crate::lifecycle::WriterSink;
use crate::sync::lock;
use crate::turn::TurnLoop;

/// The running token count of one conversation, shared by the turns that
/// carry it on.
///
/// When the provider reports no usage, the step estimates every request
/// whole; with a running count it counts each message once, when a request
/// first carries it (`roundtable_dispatch::RunningCount`), not once a
/// request. A turn's step always keeps one for the turn's rounds; a runner
/// that keeps a conversation from turn to turn gives every turn's step the
/// same one ([`Compactor::turn_step_counted`]), so what earlier turns
/// counted is not counted again. The estimates are the same either way.
#[derive(Clone, Debug, Default)]
pub struct ConversationCount(Arc<Mutex<RunningCount>>);

impl Compactor {
    /// The step for one turn of `target`'s bot, run by `turns`, whose
    /// entries `writer` writes: give it to the turn's
    /// [`TurnRequest::with_compaction`](crate::TurnRequest::with_compaction).
    /// Before each model request it compacts when the estimate passes the
    /// threshold; after a context overflow it compacts with a smaller kept
    /// part so the request can be sent again (once a turn). Its
    /// `compaction_started` / `compaction_ended` events reach the writer,
    /// which records them around the `compaction` entry.
    pub fn turn_step(
        &self,
        target: CompactionTarget,
        turns: &TurnLoop,
        writer: WriterSink,
    ) -> Arc<dyn CompactStep> {
        self.turn_step_counted(target, turns, writer, ConversationCount::default())
    }

    /// [`turn_step`](Self::turn_step) for a turn that carries on a kept
    /// conversation whose tokens `count` has counted so far.
    pub fn turn_step_counted(
        &self,
        target: CompactionTarget,
        turns: &TurnLoop,
        writer: WriterSink,
        count: ConversationCount,
    ) -> Arc<dyn CompactStep> {
        Arc::new(TurnCompaction::new(
            self.clone(),
            target,
            turns.clone(),
            writer,
            count,
        ))
    }
}

/// The compaction step of one turn.
struct TurnCompaction {
    compactor: Compactor,
    target: CompactionTarget,
    turns: TurnLoop,
    writer: WriterSink,
    budget: CompactionBudget,
    /// What the compactor keeps about the bot (looked up once a turn).
    bot: Arc<BotCompaction>,
    /// The conversation's tokens counted so far.
    count: ConversationCount,
    /// Compactions run in this turn.
    done: AtomicU32,
    /// The turn has had its one overflow retry.
    retried: AtomicBool,
    /// No more automatic compaction in this turn (nothing could be cut, or
    /// the turn's compactions are used up); said once.
    gave_up: AtomicBool,
}

impl TurnCompaction {
    fn new(
        compactor: Compactor,
        target: CompactionTarget,
        turns: TurnLoop,
        writer: WriterSink,
        count: ConversationCount,
    ) -> Self {
        let budget = compactor.config().budget(turns.model());
        let bot = compactor.bot(&target);
        Self {
            compactor,
            target,
            turns,
            writer,
            budget,
            bot,
            count,
            done: AtomicU32::new(0),
            retried: AtomicBool::new(false),
            gave_up: AtomicBool::new(false),
        }
    }

    /// `estimate_context` of `messages`, counting only what the
    /// conversation's count has not counted.
    fn estimate(
        &self,
        messages: &[Message],
        overhead: u64,
    ) -> roundtable_dispatch::ContextEstimate {
        lock(&self.count.0).estimate(messages, overhead, self.turns.model())
    }

    fn ended(
        &self,
        check: &ContextCheck<'_>,
        covers_seq: Option<u64>,
        tokens_after: Option<u64>,
        error: Option<String>,
    ) {
        check.sink.emit(TurnEvent::CompactionEnded {
            turn: check.turn.clone(),
            reason: check.reason,
            covers_seq,
            tokens_after,
            aborted: check.cancel.is_cancelled(),
            will_retry: check.reason == CompactionReason::Overflow && covers_seq.is_some(),
            error,
        });
    }

    /// Whether the request surely stays under the threshold, from an upper
    /// bound of its estimate: what the conversation's count has counted,
    /// the new messages' bytes and the fixed part's bound
    /// (`RunningCount::upper_bound`). Most requests are far under it, and
    /// this spares them the estimate (the characters of every new text, the
    /// arguments of every tool call serialised, the prompt hashed); the
    /// estimate decides the others, so the decisions are the estimate's.
    fn surely_fits(&self, context: &Context) -> bool {
        if self.budget.context_window == 0 {
            return true;
        }
        let overhead = self.turns.fixed_tokens_bound(context);
        let bound =
            lock(&self.count.0).upper_bound(&context.messages, overhead, self.turns.model());
        !self.budget.should_compact(bound)
    }
}

#[async_trait]
impl CompactStep for TurnCompaction {
    async fn check(&self, check: ContextCheck<'_>) -> Option<Vec<Message>> {
        let config = self.compactor.config();
        // What needs no estimate is answered first, and the rest is a
        // future of its own: most checks end here, and the future the
        // trait boxes stays small.
        match check.reason {
            CompactionReason::Threshold => {
                if !config.automatic
                    || self.bot.automatic_off.load(Ordering::SeqCst)
                    || self.gave_up.load(Ordering::SeqCst)
                    || self.surely_fits(check.context)
                {
                    return None;
                }
            }
            CompactionReason::Overflow => {
                if !config.automatic {
                    return None;
                }
            }
            CompactionReason::Manual => return None,
        }
        Box::pin(self.compact(check)).await
    }
}

impl TurnCompaction {
    /// [`CompactStep::check`] of a request that may need compacting.
    async fn compact(&self, check: ContextCheck<'_>) -> Option<Vec<Message>> {
        let context = check.context;
        let mut fixed = None;
        let before = self.tokens_before(context, &mut fixed);
        // `check` answered every other reason not to compact.
        if check.reason == CompactionReason::Threshold && !self.budget.should_compact(before) {
            return None;
        }
        check.sink.emit(TurnEvent::CompactionStarted {
            turn: check.turn.clone(),
            reason: check.reason,
            tokens_before: before,
        });
        let overhead = match self.may_compact(&check, fixed) {
            Ok(overhead) => overhead,
            Err(error) => {
                self.ended(&check, None, None, Some(error));
                return None;
            }
        };
        // Everything the turn did so far is in the thread before the view
        // is read, so the cut can cover it.
        if let Err(error) = self.writer.append(Vec::new()).await {
            self.ended(&check, None, None, Some(error.to_string()));
            return None;
        }
        let keep = match check.reason {
            // The request did not fit: keep less of it.
            CompactionReason::Overflow => self.budget.keep_recent_tokens / 2,
            _ => self.budget.keep_recent_tokens,
        };
        let job = Job {
            keep_recent_tokens: keep,
            max_summary_tokens: self.budget.summary_max_tokens(),
            focus: None,
            must_fit: Some((overhead, self.budget.threshold())),
        };
        let out = Output::Turn(&self.writer);
        let compacted = self
            .compactor
            .run(&self.target, &self.turns, out, &job, check.cancel)
            .await;
        self.compacted(&check, compacted, overhead)
    }

    /// The request's estimated tokens. The fixed part (system prompt, tool
    /// schemas) is counted only when needed, and noted in `fixed` when it
    /// is: most requests are estimated from the provider's count of the
    /// previous one, which includes it. Without such a count the estimate
    /// is the fixed part plus the messages, as `estimate_context` would
    /// add them.
    fn tokens_before(&self, context: &Context, fixed: &mut Option<u64>) -> u64 {
        let estimate = self.estimate(&context.messages, 0);
        if estimate.from_usage {
            estimate.tokens
        } else {
            let overhead = *fixed.insert(self.turns.fixed_tokens(context));
            overhead.saturating_add(estimate.tokens)
        }
    }

    /// The loop breakers, asked once a compaction has started: one overflow
    /// retry a turn, at most `max_per_turn` compactions a turn, none for a
    /// bot whose fixed part alone passes the threshold. Returns the fixed
    /// part's tokens (`fixed` when already counted) when the compaction may
    /// go on, or why it may not.
    fn may_compact(&self, check: &ContextCheck<'_>, fixed: Option<u64>) -> Result<u64, String> {
        let config = self.compactor.config();
        if check.reason == CompactionReason::Overflow && self.retried.swap(true, Ordering::SeqCst) {
            return Err(
                "the model refused the request as too large again after a compaction: \
                 recovery is tried once a turn"
                    .to_string(),
            );
        }
        if self.done.load(Ordering::SeqCst) >= config.max_per_turn {
            self.gave_up.store(true, Ordering::SeqCst);
            return Err(format!(
                "this turn already compacted {} times: no more compaction until the next turn",
                config.max_per_turn
            ));
        }
        let overhead = fixed.unwrap_or_else(|| self.turns.fixed_tokens(check.context));
        let threshold = self.budget.threshold();
        if overhead > threshold {
            self.bot.automatic_off.store(true, Ordering::SeqCst);
            let error = CompactionError::CannotHelp {
                overhead_tokens: overhead,
                kept_tokens: 0,
                threshold,
            };
            return Err(format!(
                "{error}; automatic compaction stops for this bot here"
            ));
        }
        Ok(overhead)
    }

    /// Reports how a compaction the step ran ended, and returns the
    /// compacted conversation when it succeeded. A compaction that did not
    /// bring the request well under the threshold, or could not help,
    /// stops automatic compaction (for the bot, or for the turn).
    fn compacted(
        &self,
        check: &ContextCheck<'_>,
        compacted: Result<Compacted, CompactionError>,
        overhead: u64,
    ) -> Option<Vec<Message>> {
        match compacted {
            Ok(compacted) => {
                self.done.fetch_add(1, Ordering::SeqCst);
                // Counted here, the compacted conversation is not counted
                // again by the next request's check.
                let after = self.estimate(&compacted.messages, overhead).tokens;
                let mut note = None;
                if check.reason == CompactionReason::Threshold && !self.budget.well_under(after) {
                    self.bot.automatic_off.store(true, Ordering::SeqCst);
                    let threshold = self.budget.threshold();
                    note = Some(format!(
                        "compacting left about {after} tokens for a threshold of {threshold}: \
                         automatic compaction stops for this bot here"
                    ));
                }
                self.ended(check, Some(compacted.report.covers_seq), Some(after), note);
                Some(compacted.messages)
            }
            Err(error) => {
                if matches!(
                    error,
                    CompactionError::NothingToCompact | CompactionError::CannotHelp { .. }
                ) {
                    self.gave_up.store(true, Ordering::SeqCst);
                }
                self.ended(check, None, None, Some(error.to_string()));
                None
            }
        }
    }
}
