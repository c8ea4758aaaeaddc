//! A session's conversation as its agent's model sees it, and how it is
//! compacted.
//!
//! The view is the session's thread in store order without what a retry
//! superseded: the failed turns' entries and the compactions written while
//! they ran (a summary of a superseded turn's work must not bring it back),
//! with the files of messages shown as the model reads them. Every turn
//! projects it, and the chat runner's [`Compactor`] compacts it: before
//! each model request of a turn when the request nears the model's window,
//! after a context overflow, and on demand ([`compact`]). A compaction's
//! `compaction_started` / `compaction_ended` records and its `compaction`
//! entry are the session's `compaction_started` / `compaction_ended`
//! events.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use roundtable_chat_runner::compaction::{
    CompactionReport, CompactionTarget, ConversationCount, ViewSource,
};
use roundtable_chat_runner::{CompactStep, TurnLoop, lifecycle::WriterSink};
use roundtable_dispatch::Roster;
use roundtable_thread_stream::{Entry, EntryBody, StoreError};
use tokio_util::sync::CancellationToken;

use crate::conversation::{ConversationSource, session_roster};
use crate::core::{EngineCore, entry_turn};
use crate::error::SessionError;
use crate::message_files::accepts_images;
use crate::models::ServedModel;
use crate::runtime::SessionRuntime;

/// The entries of a session its agent's model sees, read from the store
/// whenever asked (a compaction reads what the store holds then).
#[derive(Clone)]
pub(crate) struct SessionView {
    core: Arc<EngineCore>,
    runtime: Arc<SessionRuntime>,
    /// The turns a retry superseded (fixed while a turn runs: a retry
    /// starts only once the turn ended).
    superseded: Arc<HashSet<Arc<str>>>,
    /// The model the session's turns run on (what it reads shapes what is
    /// shown: images or notes).
    model: ServedModel,
}

impl ConversationSource for SessionView {
    fn superseded(&self) -> &Arc<HashSet<Arc<str>>> {
        SessionView::superseded(self)
    }

    fn shows_images(&self) -> bool {
        SessionView::shows_images(self)
    }

    fn range(
        &self,
        from: u64,
        upto: u64,
    ) -> impl Future<Output = Result<Vec<Entry>, StoreError>> + Send {
        SessionView::range(self, from, upto)
    }
}

impl SessionView {
    /// The view of `runtime`'s session for `model`, leaving out the turns
    /// in `superseded`.
    pub(crate) fn new(
        core: Arc<EngineCore>,
        runtime: Arc<SessionRuntime>,
        superseded: HashSet<Arc<str>>,
        model: ServedModel,
    ) -> Self {
        Self {
            core,
            runtime,
            superseded: Arc::new(superseded),
            model,
        }
    }

    /// Whether the model the view is for reads images (else the view
    /// shows notes of them).
    pub(crate) fn shows_images(&self) -> bool {
        accepts_images(&self.model.model.input)
    }

    /// The view's entries from seq `from` to seq `upto` (a turn started at
    /// `upto` is given those from 1). A range that starts after the first
    /// entry must not start inside a superseded turn.
    pub(crate) async fn range(&self, from: u64, upto: u64) -> Result<Vec<Entry>, StoreError> {
        if from > upto {
            return Ok(Vec::new());
        }
        let entries = self
            .core
            .store
            .read(&self.runtime.thread, from..=upto)
            .await?;
        Ok(self.shown(entries).await)
    }

    /// The turns the view leaves out.
    pub(crate) fn superseded(&self) -> &Arc<HashSet<Arc<str>>> {
        &self.superseded
    }

    async fn shown(&self, entries: Vec<Entry>) -> Vec<Entry> {
        let visible = without_superseded(entries, &self.core.agent, &self.superseded);
        let images = self.shows_images();
        self.core
            .files
            .show_in(&self.runtime.id, images, visible)
            .await
    }

    /// What the agent's compactions work on: this view, labelled by
    /// `roster`.
    pub(crate) fn target(&self, roster: Roster) -> CompactionTarget {
        CompactionTarget {
            thread: self.runtime.thread.clone(),
            bot: self.core.agent.clone(),
            roster,
            view: Arc::new(self.clone()),
        }
    }

    /// The compaction step of a turn run by `turns`, whose entries `writer`
    /// writes, on the conversation whose tokens `count` has counted.
    pub(crate) fn turn_step(
        &self,
        roster: Roster,
        turns: &TurnLoop,
        writer: WriterSink,
        count: ConversationCount,
    ) -> Arc<dyn CompactStep> {
        self.core
            .compactor
            .turn_step_counted(self.target(roster), turns, writer, count)
    }
}

#[async_trait]
impl ViewSource for SessionView {
    async fn view(&self) -> Result<Vec<Entry>, StoreError> {
        let entries = self.core.store.read_all(&self.runtime.thread).await?;
        Ok(self.shown(entries).await)
    }
}

/// `entries` without the entries of the `superseded` turns and the
/// compactions written while one of them ran (between its `turn.started`
/// and its end).
fn without_superseded(
    entries: Vec<Entry>,
    agent: &str,
    superseded: &HashSet<Arc<str>>,
) -> Vec<Entry> {
    if superseded.is_empty() {
        return entries;
    }
    let mut running: Option<Arc<str>> = None;
    entries
        .into_iter()
        .filter(|entry| {
            match &entry.body {
                EntryBody::TurnStarted(t) if &*entry.author == agent => {
                    running = Some(t.turn.clone());
                }
                EntryBody::TurnEnded(t) if running.as_ref() == Some(&t.turn) => running = None,
                EntryBody::TurnFailed(t) if running.as_ref() == Some(&t.turn) => running = None,
                EntryBody::Compaction(_) => {
                    return running.as_ref().is_none_or(|t| !superseded.contains(t));
                }
                _ => {}
            }
            entry_turn(entry).is_none_or(|t| !superseded.contains(t))
        })
        .collect()
}

/// Compacts `runtime`'s session now, stressing `focus` in the summary (a
/// caller's request, outside any turn; one that runs meanwhile keeps its
/// conversation until its next model request compacts or its next turn
/// reads the summary).
pub(crate) async fn compact(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    focus: Option<&str>,
) -> Result<CompactionReport, SessionError> {
    let (superseded, chosen) = {
        let state = runtime.refresh(&*core.store).await?;
        (state.superseded_turns(), state.model.clone())
    };
    let served = core.models.for_session(chosen.as_deref()).clone();
    let view = SessionView::new(core.clone(), runtime.clone(), superseded, served.clone());
    let roster = session_roster(&core.agent, &view.view().await?);
    let turns =
        TurnLoop::new(served.provider, served.model).with_options(core.stream_options.clone());
    let report = core
        .compactor
        .compact(
            &view.target(roster),
            &turns,
            &*core.store,
            focus,
            &CancellationToken::new(),
        )
        .await?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use roundtable_chat_runner::lifecycle::{turn_interrupted, turn_started_by};
    use roundtable_providers::{AssistantMessage, OPENAI_COMPLETIONS};
    use roundtable_thread_stream::{AssistantEntry, Compaction, NewEntry, ThreadId};

    use super::*;

    #[test]
    fn a_superseded_turn_takes_the_compactions_written_while_it_ran_with_it() {
        let agent: Arc<str> = "agent".into();
        let (t1, t2): (Arc<str>, Arc<str>) = ("turn_1".into(), "turn_2".into());
        let compaction = |upto| {
            EntryBody::Compaction(Compaction {
                summary: "S".into(),
                upto,
            })
        };
        let answer = |turn: &Arc<str>| {
            EntryBody::Assistant(AssistantEntry::new(
                Some(turn.clone()),
                Arc::new(AssistantMessage::empty(OPENAI_COMPLETIONS, "p", "m", 1)),
            ))
        };
        let bodies = vec![
            ("user", EntryBody::chat("hi")),
            ("agent", compaction(1)),
            ("agent", turn_started_by(&agent, &t1, 1, "message").body),
            ("agent", answer(&t1)),
            ("agent", compaction(4)),
            ("agent", turn_interrupted(&agent, &t1).body),
            ("agent", compaction(6)),
            ("agent", turn_started_by(&agent, &t2, 1, "retry").body),
            ("agent", answer(&t2)),
        ];
        let thread = ThreadId::new("sess_1").unwrap();
        let entries: Vec<Entry> = bodies
            .into_iter()
            .enumerate()
            .map(|(i, (author, body))| {
                NewEntry::new(author, body).into_entry(thread.clone(), i as u64 + 1)
            })
            .collect();
        let superseded: HashSet<Arc<str>> = [t1.clone()].into();
        let kept: Vec<u64> = without_superseded(entries.clone(), &agent, &superseded)
            .iter()
            .map(|e| e.seq)
            .collect();
        // The compactions before and after turn 1 stay; the one inside it
        // goes with its entries.
        assert_eq!(kept, [1, 2, 7, 8, 9]);
        assert_eq!(
            without_superseded(entries.clone(), &agent, &HashSet::new()).len(),
            entries.len()
        );
    }
}
