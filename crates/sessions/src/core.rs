//! What the engine's parts share: its settings, the session runtimes, and
//! the steps both the public calls and the turn driver take (closing dead
//! turns, starting the next queued follow-up, writing `session.json`).

use std::sync::Arc;
use std::time::Duration;

use roundtable_chat_runner::Limits;
use roundtable_chat_runner::compaction::Compactor;
use roundtable_chat_runner::lifecycle::records::{ApprovalDecidedRecord, ApprovalVerdict};
use roundtable_chat_runner::lifecycle::{turn_interrupted, turn_started_by};
use roundtable_providers::{StreamOptions, now_millis};
use roundtable_tools::workspace::CommandLimits;

use crate::models::ModelChoices;
use roundtable_thread_stream::{Chat, Entry, EntryBody, Expect, NewEntry, StoreError, ThreadStore};

use crate::cache::RuntimeCache;
use crate::caller::{Caller, UnownedSessions, may_use};
use crate::drivers::Drivers;
use crate::error::SessionError;
use crate::host_tools::HostTools;
use crate::ids::{MessageId, SessionId, TurnId};
use crate::index::SessionIndex;
use crate::message_files::SessionFiles;
use crate::records::{QuestionAnswered, QueueExit, QueueRemoved, SessionRecord};
use crate::recovery::unreadable;
use crate::runtime::SessionRuntime;
use crate::snapshot::Snapshots;
use crate::state::{QueueChange, SessionState, TurnProgress};
use roundtable_chat_runner::lifecycle::TurnLeases;

/// How many optimistic-concurrency conflicts in a row a call accepts
/// before it gives up (each retry has read what caused the conflict).
pub(crate) const MAX_ATTEMPTS: usize = 64;

/// What the engine's parts share.
pub(crate) struct EngineCore {
    pub(crate) store: Arc<dyn ThreadStore>,
    /// The models turns run on (the engine's own, and those it offers).
    pub(crate) models: ModelChoices,
    pub(crate) stream_options: StreamOptions,
    /// The limits of every turn, before a session's own.
    pub(crate) limits: Limits,
    /// The limits of the sessions' `shell` and `verify` commands.
    pub(crate) command_limits: CommandLimits,
    pub(crate) agent: Arc<str>,
    pub(crate) chunk_interval: Duration,
    pub(crate) verify_attempts: u32,
    /// Where `session.json` files go, when the engine keeps them.
    pub(crate) snapshots: Option<Snapshots>,
    pub(crate) interrupt_open_turns_after: Duration,
    pub(crate) unowned: UnownedSessions,
    pub(crate) runtimes: Arc<RuntimeCache>,
    pub(crate) files: SessionFiles,
    /// Compacts the sessions' conversations (one compaction at a time per
    /// session).
    pub(crate) compactor: Compactor,
    /// The host's tools every session's turns get, when it gave some.
    pub(crate) host_tools: Option<HostTools>,
    /// The turn drivers of this process, and how a stop halts them.
    pub(crate) drivers: Drivers,
    /// What listing sessions reads.
    pub(crate) index: SessionIndex,
    /// Sessions idle longer than this are deleted by a sweep.
    pub(crate) retention: Option<Duration>,
    /// The leases running turns are held by, when turns outlive their
    /// process.
    pub(crate) leases: Option<TurnLeases>,
}

impl EngineCore {
    /// The runtime of `session` (kept, or rebuilt from its thread), when
    /// `caller` may use the session: another user's session is unknown. A
    /// thread the store finds damaged is [`SessionError::Unreadable`].
    pub(crate) async fn runtime(
        &self,
        caller: &Caller,
        session: &str,
    ) -> Result<Arc<SessionRuntime>, SessionError> {
        // Looked up by the text: only a runtime to load needs an id made
        // (no invalid id is kept).
        let runtime = match self.runtimes.get(session).await {
            Some(runtime) => runtime,
            None => {
                let id = SessionId::parse(session)?;
                let loaded = match SessionRuntime::load(&*self.store, id).await {
                    Ok(loaded) => Arc::new(loaded),
                    Err(SessionError::Store(error @ StoreError::Corrupt { .. })) => {
                        return Err(unreadable(caller, self.unowned, session, &error));
                    }
                    Err(error) => return Err(error),
                };
                self.runtimes.insert(loaded).await
            }
        };
        let allowed = runtime
            .cached()
            .await
            .created
            .as_ref()
            .is_some_and(|created| may_use(caller, created, self.unowned));
        if !allowed {
            return Err(SessionError::UnknownSession(session.to_string()));
        }
        Ok(runtime)
    }

    /// Closes the session's open turns that no process runs any more
    /// (not this process's, and older than the engine's threshold), and
    /// expires their pending approvals. True when it closed one.
    pub(crate) async fn close_dead_turns(
        &self,
        runtime: &SessionRuntime,
    ) -> Result<bool, SessionError> {
        // With leases a dead process's turn is carried on, never closed.
        if self.leases.is_some() {
            return Ok(false);
        }
        self.close_turns_older_than(runtime, self.interrupt_open_turns_after)
            .await
    }

    /// Closes the session's open turns older than `age` that this process
    /// does not run, as interrupted, and expires their pending approvals
    /// and questions. True when it closed one.
    pub(crate) async fn close_turns_older_than(
        &self,
        runtime: &SessionRuntime,
        age: Duration,
    ) -> Result<bool, SessionError> {
        let stale_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        let mut closed = false;
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*self.store).await?;
            let local = runtime.local().map(|l| l.turn);
            let dead: Vec<Arc<str>> = state
                .turns
                .iter()
                .filter(|t| t.progress == TurnProgress::Running)
                .filter(|t| local.as_ref() != Some(&t.id))
                .filter(|t| now_millis().saturating_sub(t.started_at) >= stale_ms)
                .map(|t| t.id.clone())
                .collect();
            if dead.is_empty() {
                return Ok(closed);
            }
            let mut entries = Vec::new();
            for asked in state
                .pending_questions
                .values()
                .filter(|q| dead.contains(&q.turn))
            {
                let expired = QuestionAnswered {
                    turn: asked.turn.clone(),
                    call_id: asked.call_id.clone(),
                    answers: None,
                };
                entries.push(NewEntry::new(self.agent.clone(), expired.to_body()?));
            }
            for pending in state
                .pending_approvals
                .values()
                .filter(|p| dead.contains(&p.turn_id))
            {
                let record = ApprovalDecidedRecord {
                    turn: pending.turn_id.clone(),
                    call_id: pending.tool_call_id.clone(),
                    tool: pending.tool.clone(),
                    verdict: ApprovalVerdict::Expired,
                    reason: Some("the turn was interrupted before a decision".into()),
                };
                entries.push(NewEntry::new(self.agent.clone(), record.to_body()?));
            }
            for turn in &dead {
                entries.push(turn_interrupted(&self.agent, turn));
            }
            let expect = Expect::LastSeq(state.upto);
            drop(state);
            match self.store.append(&runtime.thread, expect, entries).await {
                Ok(_) => {
                    closed = true;
                    self.snapshot(runtime).await?;
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(closed)
    }

    /// Takes the oldest queued message as the next turn, when nothing
    /// runs: one append delivers it (`queue_removed`, its `chat` entry)
    /// and starts its turn. `None` when there is nothing to start (or
    /// another process started it).
    pub(crate) async fn start_next_queued(
        &self,
        runtime: &SessionRuntime,
    ) -> Result<Option<()>, SessionError> {
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*self.store).await?;
            if state.running_turn().is_some() {
                return Ok(None);
            }
            let Some(next) = state.queue.first().cloned() else {
                return Ok(None);
            };
            let id = MessageId::parse(&next.item.id)?;
            let turn = TurnId::for_message(&id);
            let taken = [next.item.id.clone()];
            let entries = vec![
                NewEntry::new(
                    self.agent.clone(),
                    QueueRemoved {
                        id: next.item.id.clone(),
                        exit: QueueExit::Delivered,
                        queue: state.queue_snapshot(Some(QueueChange::Remove(&taken))),
                    }
                    .to_body()?,
                ),
                chat_entry(&next.item.author, &id, next.item.chat.clone()),
                turn_started_by(&self.agent, turn.as_arc(), state.upto + 2, "follow_up"),
            ];
            let expect = Expect::LastSeq(state.upto);
            drop(state);
            match self.store.append(&runtime.thread, expect, entries).await {
                Ok(stored) => {
                    drop(runtime.absorb(&stored).await);
                    runtime.claim(turn.as_arc().clone());
                    return Ok(Some(()));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// Records `runtime`'s session as it is in the store now in the
    /// session index.
    pub(crate) async fn snapshot(&self, runtime: &SessionRuntime) -> Result<(), SessionError> {
        let state = runtime.refresh(&*self.store).await?;
        self.record(&runtime.id, &state).await;
        Ok(())
    }

    /// Records session `id` in `state` in the session index (derived data,
    /// which `recover` brings up to date: a failure fails no call, and is
    /// logged).
    pub(crate) async fn record(&self, id: &SessionId, state: &SessionState) {
        if let Err(error) = self.index.update(&*self.store, id, state).await {
            tracing::warn!(session = %id, %error, "session index not updated");
        }
    }

    /// [`record`](Self::record), and writes the session's `session.json`
    /// (when the engine keeps snapshots): when the session was created,
    /// and each time it settles.
    pub(crate) async fn record_settled(&self, id: &SessionId, state: &SessionState) {
        if let Some(snapshots) = &self.snapshots {
            snapshots.write(id, state);
        }
        self.record(id, state).await;
    }
}

/// The `chat` entry of a message.
pub(crate) fn chat_entry(author: &Arc<str>, id: &MessageId, chat: Chat) -> NewEntry {
    // Made whole: `NewEntry::new` would make an entry id to be replaced.
    NewEntry {
        id: id.as_arc().clone(),
        author: author.clone(),
        at: now_millis(),
        body: EntryBody::Chat(chat),
    }
}

/// A stored entry's turn, when it belongs to one.
pub(crate) fn entry_turn(entry: &Entry) -> Option<&Arc<str>> {
    match &entry.body {
        EntryBody::Assistant(a) => a.turn.as_ref(),
        EntryBody::ToolResult(r) => r.turn.as_ref(),
        EntryBody::Chunk(c) => Some(&c.turn),
        EntryBody::TurnStarted(t) => Some(&t.turn),
        EntryBody::TurnEnded(t) => Some(&t.turn),
        EntryBody::TurnFailed(t) => Some(&t.turn),
        _ => None,
    }
}
