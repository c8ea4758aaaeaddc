//! The compactor: one compaction at a time per (thread, bot), from the
//! bot's view to its `compaction` entry and the compacted conversation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use roundtable_dispatch::compaction::{
    CHARS_PER_TOKEN, CompactionCut, ViewSplit, files_touched, humans_words, plan_cut, project_view,
    split_humans_words, split_view, transcript, with_humans_words,
};
use roundtable_dispatch::{Roster, estimate_context};
use roundtable_providers::{Message, Model};
use roundtable_thread_stream::{
    Compaction, Entry, EntryBody, Expect, NewEntry, ThreadId, ThreadStore,
};
use tokio_util::sync::CancellationToken;

use super::config::{CompactionConfig, SummaryModel};
use super::error::CompactionError;
use super::summarizer::{SummaryJob, summarize};
use super::view_source::ViewSource;
use crate::event::CompactionReason;
use crate::lifecycle::WriterSink;
use crate::lifecycle::records::{CompactionEndedRecord, CompactionStartedRecord};
use crate::sync::lock;
use crate::turn::TurnLoop;

/// Whose conversation a compaction shrinks: a bot on a thread, the roster
/// that labels the others, and where its view is read.
#[derive(Clone)]
pub struct CompactionTarget {
    /// The thread.
    pub thread: ThreadId,
    /// The bot (the author of its entries and of the `compaction` entry).
    pub bot: Arc<str>,
    /// The participants, for labels.
    pub roster: Roster,
    /// The bot's view, as its runner projects it.
    pub view: Arc<dyn ViewSource>,
}

impl std::fmt::Debug for CompactionTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionTarget")
            .field("thread", &self.thread)
            .field("bot", &self.bot)
            .finish_non_exhaustive()
    }
}

/// What a compaction wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionReport {
    /// The seq of the `compaction` entry.
    pub entry_seq: u64,
    /// The last seq its summary covers (its `upto`).
    pub covers_seq: u64,
    /// How many messages (units: a call with its results counts once) the
    /// summary took in besides the previous summary.
    pub summarized: usize,
    /// Their estimated tokens.
    pub covered_tokens: u64,
    /// The estimated tokens of the messages kept in full.
    pub kept_tokens: u64,
}

/// A compaction's result inside the crate: the report and the bot's
/// conversation after it.
pub(crate) struct Compacted {
    pub(crate) report: CompactionReport,
    pub(crate) messages: Vec<Message>,
}

/// Where the `compaction` entry goes: through a running turn's writer (in
/// order with the turn's own entries; the turn's step reports the start and
/// end as events, which the writer records), or straight to the store,
/// between the `compaction_started` and `compaction_ended` records the
/// compactor appends itself.
#[derive(Clone, Copy)]
pub(crate) enum Output<'a> {
    Turn(&'a WriterSink),
    Store(&'a dyn ThreadStore),
}

/// What a compaction is asked to do.
pub(crate) struct Job<'a> {
    pub(crate) keep_recent_tokens: u64,
    pub(crate) max_summary_tokens: u64,
    pub(crate) focus: Option<&'a str>,
    /// The fixed part of the requests and the threshold: a compaction
    /// whose kept part alone passes the threshold is refused.
    pub(crate) must_fit: Option<(u64, u64)>,
}

/// What the compactor keeps about one bot on one thread.
#[derive(Default)]
pub(crate) struct BotCompaction {
    /// Held while a compaction of the bot's view runs.
    running: tokio::sync::Mutex<()>,
    /// Automatic compaction stopped for the bot (it could not help, or
    /// did not bring the requests well under the threshold).
    pub(crate) automatic_off: AtomicBool,
}

/// Compacts bots' conversations: a summary of the older part of a bot's
/// view, written as a `compaction` entry of the bot, stands in for it from
/// then on (see `roundtable_dispatch::split_view` for the units and
/// `plan_cut` for where it cuts).
///
/// One compactor serves a runner's bots on every thread; it runs one
/// compaction at a time per (thread, bot). Entries that arrive during one
/// land after the seq it covers and are kept. A runner gives each turn a
/// step ([`turn_step`](Self::turn_step)) that the turn loop asks before
/// every model request; hosts compact on demand with
/// [`compact`](Self::compact).
#[derive(Clone)]
pub struct Compactor {
    inner: Arc<Inner>,
}

/// What the compactor keeps per (thread, bot). Looked up at every turn's
/// start: hashed with `foldhash` (thread ids and bot names are the
/// runner's own, not a flooding risk worth SipHash's cost).
type BotStates = HashMap<(ThreadId, Arc<str>), Arc<BotCompaction>, foldhash::fast::RandomState>;

/// How many (thread, bot) states the compactor keeps before it forgets
/// those that hold nothing worth keeping.
const BOTS_KEPT: usize = 256;

/// Once more than [`BOTS_KEPT`] (and an eighth, so the scan runs once
/// every so many new bots) are kept, forgets the states nobody is using
/// (no turn or compaction holds them) whose automatic compaction is still
/// on: they then hold nothing a later turn needs. A state whose automatic
/// compaction stopped is kept, since forgetting it would turn compaction
/// back on. A runner serving many threads over its life then keeps a state
/// only for the bots it is serving now.
fn forget_idle_bots(bots: &mut BotStates) {
    if bots.len() <= BOTS_KEPT + BOTS_KEPT / 8 {
        return;
    }
    bots.retain(|_, bot| Arc::strong_count(bot) > 1 || bot.automatic_off.load(Ordering::SeqCst));
}

struct Inner {
    config: CompactionConfig,
    bots: Mutex<BotStates>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// A compactor with `config`.
    pub fn new(config: CompactionConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                bots: Mutex::new(HashMap::default()),
            }),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &CompactionConfig {
        &self.inner.config
    }

    /// Compacts `target`'s view now (a host's manual call, outside a turn),
    /// keeping about the budget's newest tokens in full and stressing
    /// `focus` in the summary. Appends to `store` a `compaction_started`
    /// record once the cut is planned (nothing is written when there is
    /// nothing to compact), then the `compaction` entry with its
    /// `compaction_ended` record in one append, or that record alone with
    /// the error. A success turns automatic compaction back on for the bot
    /// if it had stopped.
    pub async fn compact(
        &self,
        target: &CompactionTarget,
        turns: &TurnLoop,
        store: &dyn ThreadStore,
        focus: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<CompactionReport, CompactionError> {
        let budget = self.config().budget(turns.model());
        let job = Job {
            keep_recent_tokens: budget.keep_recent_tokens,
            max_summary_tokens: budget.summary_max_tokens(),
            focus,
            must_fit: None,
        };
        let done = self
            .run(target, turns, Output::Store(store), &job, cancel)
            .await?;
        self.bot(target)
            .automatic_off
            .store(false, Ordering::SeqCst);
        Ok(done.report)
    }

    /// Whether automatic compaction stopped for `bot` on `thread` (it could
    /// not help, or did not bring the requests well under the threshold);
    /// a manual compaction that succeeds turns it back on.
    pub fn automatic_stopped(&self, thread: &ThreadId, bot: &str) -> bool {
        lock(&self.inner.bots)
            .get(&(thread.clone(), Arc::from(bot)))
            .is_some_and(|b| b.automatic_off.load(Ordering::SeqCst))
    }

    /// What the compactor keeps about `target`'s bot.
    pub(crate) fn bot(&self, target: &CompactionTarget) -> Arc<BotCompaction> {
        let mut bots = lock(&self.inner.bots);
        let bot = bots
            .entry((target.thread.clone(), target.bot.clone()))
            .or_default()
            .clone();
        forget_idle_bots(&mut bots);
        bot
    }

    /// One compaction: read the view, cut it, summarise the previous summary
    /// and the units between the previous cut and this one, write the
    /// entry, and return the bot's conversation after it.
    pub(crate) async fn run(
        &self,
        target: &CompactionTarget,
        turns: &TurnLoop,
        out: Output<'_>,
        job: &Job<'_>,
        cancel: &CancellationToken,
    ) -> Result<Compacted, CompactionError> {
        let bot = self.bot(target);
        let _running = tokio::select! {
            guard = bot.running.lock() => guard,
            () = cancel.cancelled() => return Err(CompactionError::Aborted),
        };
        let plan = Plan::read(target, job).await?;
        let model = turns.model();
        if let Output::Store(store) = out {
            let messages = project_view(&target.bot, &plan.view, &target.roster);
            let started = CompactionStartedRecord {
                turn: None,
                reason: CompactionReason::Manual,
                tokens_before: estimate_context(&messages, 0, model).tokens,
            };
            append_record(store, target, started.to_body()).await?;
        }
        let summary = match self.summary(target, turns, &plan, job, cancel).await {
            Ok(summary) => summary,
            Err(error) => {
                if let Output::Store(store) = out {
                    let ended = manual_ended(None, None, Some(&error));
                    append_record(store, target, ended.to_body()).await?;
                }
                return Err(error);
            }
        };
        plan.write(target, out, summary, model).await
    }

    /// The new summary: the previous one and the units the cut covers,
    /// summarised, then the humans' own words.
    async fn summary(
        &self,
        target: &CompactionTarget,
        turns: &TurnLoop,
        plan: &Plan,
        job: &Job<'_>,
        cancel: &CancellationToken,
    ) -> Result<String, CompactionError> {
        let me = &*target.bot;
        let view = &plan.view;
        let covered = &plan.split.units[plan.cut.covered_units.clone()];
        let config = self.config();
        let (previous, mut quotes) = match &plan.split.summary {
            Some(summary) => {
                let (rest, quotes) = split_humans_words(summary);
                (Some(rest), quotes)
            }
            None => (None, Vec::new()),
        };
        quotes.extend(humans_words(me, view, covered, &target.roster));
        let summary_job = SummaryJob {
            roster: &target.roster,
            self_id: me,
            previous,
            transcript: transcript(me, view, covered, &target.roster, config.tool_output_chars),
            files: files_touched(me, view, covered),
            focus: job.focus,
            max_tokens: job.max_summary_tokens,
        };
        let summarizer = config
            .summary_model
            .clone()
            .unwrap_or_else(|| SummaryModel {
                provider: turns.provider().clone(),
                model: turns.model().clone(),
                options: turns.options().clone(),
            });
        let summary = summarize(&summarizer, &summary_job, cancel).await?;
        // The quotes take at most half of what the summary may.
        let quote_chars =
            usize::try_from(job.max_summary_tokens.saturating_mul(CHARS_PER_TOKEN) / 2)
                .unwrap_or(usize::MAX)
                .min(config.humans_words_chars);
        let summary = with_humans_words(&summary, &quotes, quote_chars);
        if cancel.is_cancelled() {
            return Err(CompactionError::Aborted);
        }
        Ok(summary)
    }
}

/// A compaction's cut, planned over the bot's view as read.
struct Plan {
    view: Vec<Entry>,
    /// The view's units and its latest summary.
    split: ViewSplit,
    cut: CompactionCut,
}

impl Plan {
    /// Reads `target`'s view and plans the cut that keeps about the job's
    /// newest tokens in full. Fails when there is nothing to compact, or
    /// when the kept part alone would not fit the job's threshold.
    async fn read(target: &CompactionTarget, job: &Job<'_>) -> Result<Self, CompactionError> {
        let view = target.view.view().await?;
        let split = split_view(&target.bot, &view, &target.roster);
        let cut = plan_cut(&view, &split, job.keep_recent_tokens)
            .ok_or(CompactionError::NothingToCompact)?;
        if let Some((overhead_tokens, threshold)) = job.must_fit
            && overhead_tokens.saturating_add(cut.kept_tokens) > threshold
        {
            return Err(CompactionError::CannotHelp {
                overhead_tokens,
                kept_tokens: cut.kept_tokens,
                threshold,
            });
        }
        Ok(Self { view, split, cut })
    }

    /// Writes the `compaction` entry of `summary` to `out` (with its
    /// `compaction_ended` record when straight to the store) and returns
    /// the report with the bot's conversation after it.
    async fn write(
        self,
        target: &CompactionTarget,
        out: Output<'_>,
        summary: String,
        model: &Model,
    ) -> Result<Compacted, CompactionError> {
        let cut = self.cut;
        let entry = NewEntry::new(
            target.bot.clone(),
            EntryBody::Compaction(Compaction {
                summary: summary.into(),
                upto: cut.upto,
            }),
        );
        // The conversation after it, from the view and the entry where it
        // will stand (entries written meanwhile come after both).
        let mut view = self.view;
        let next_seq = view
            .iter()
            .map(|e| e.seq)
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        view.push(entry.clone().into_entry(target.thread.clone(), next_seq));
        let messages = project_view(&target.bot, &view, &target.roster);
        let stored = match out {
            Output::Turn(writer) => writer.append(vec![entry]).await?,
            Output::Store(store) => {
                let tokens_after = estimate_context(&messages, 0, model).tokens;
                let record = manual_ended(Some(cut.upto), Some(tokens_after), None);
                let record = NewEntry::new(target.bot.clone(), record_body(record.to_body())?);
                store
                    .append(&target.thread, Expect::Any, vec![entry, record])
                    .await?
            }
        };
        let Some(stored) = stored.into_iter().next() else {
            return Err(CompactionError::Store(
                roundtable_thread_stream::StoreError::Backend(
                    "the compaction entry was not written".to_string(),
                ),
            ));
        };
        Ok(Compacted {
            report: CompactionReport {
                entry_seq: stored.seq,
                covers_seq: cut.upto,
                summarized: cut.covered_units.len(),
                covered_tokens: cut.covered_tokens,
                kept_tokens: cut.kept_tokens,
            },
            messages,
        })
    }
}

/// The `compaction_ended` record of a manual compaction.
fn manual_ended(
    covers_seq: Option<u64>,
    tokens_after: Option<u64>,
    error: Option<&CompactionError>,
) -> CompactionEndedRecord {
    CompactionEndedRecord {
        turn: None,
        reason: CompactionReason::Manual,
        covers_seq,
        tokens_after,
        aborted: matches!(error, Some(CompactionError::Aborted)),
        will_retry: false,
        error: error.map(ToString::to_string),
    }
}

/// Appends a record of the compaction of `target`'s bot to `store`.
async fn append_record(
    store: &dyn ThreadStore,
    target: &CompactionTarget,
    body: Result<EntryBody, serde_json::Error>,
) -> Result<(), CompactionError> {
    let record = NewEntry::new(target.bot.clone(), record_body(body)?);
    store
        .append(&target.thread, Expect::Any, vec![record])
        .await?;
    Ok(())
}

/// A record's body: the records hold strings and numbers only, so encoding
/// cannot fail; were it to, the compaction stops with the error.
fn record_body(body: Result<EntryBody, serde_json::Error>) -> Result<EntryBody, CompactionError> {
    body.map_err(|e| CompactionError::Summarizer(format!("encoding a compaction record: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bots_nobody_uses_are_forgotten_unless_their_automatic_compaction_stopped() {
        let compactor = Compactor::new(CompactionConfig::default());
        let target = |thread: usize| CompactionTarget {
            thread: ThreadId::new(format!("t{thread}")).unwrap(),
            bot: "bot".into(),
            roster: Roster::default(),
            view: Arc::new(crate::compaction::StoreView::new(
                Arc::new(roundtable_thread_stream::MemoryStore::new()),
                ThreadId::new(format!("t{thread}")).unwrap(),
            )),
        };
        // One bot in use, one whose automatic compaction stopped.
        let in_use = compactor.bot(&target(0));
        compactor
            .bot(&target(1))
            .automatic_off
            .store(true, Ordering::SeqCst);
        for thread in 2..2000 {
            compactor.bot(&target(thread));
        }
        let kept = lock(&compactor.inner.bots).len();
        assert!(kept <= BOTS_KEPT + BOTS_KEPT / 8 + 1, "{kept} kept");
        // The one in use is the same state still; the stopped one still
        // says so.
        assert!(Arc::ptr_eq(&in_use, &compactor.bot(&target(0))));
        assert!(compactor.automatic_stopped(&ThreadId::new("t1").unwrap(), "bot"));
    }
}
