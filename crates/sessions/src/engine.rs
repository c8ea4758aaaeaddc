//! The session engine: the calls a host (or an HTTP layer) makes, over a
//! thread store.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use roundtable_chat_runner::lifecycle::approvals::{ApprovalDecidedRecord, ApprovalVerdict};
use roundtable_chat_runner::lifecycle::turn_started_by;
use roundtable_chat_runner::{DEFAULT_CHUNK_INTERVAL, Limits};
use roundtable_providers::{Model, Provider, StreamOptions};
use roundtable_thread_stream::{Chat, Expect, FileRef, NewEntry, StoreError, ThreadStore};
use serde::{Deserialize, Serialize};

use crate::config::CreateSession;
use crate::core::{EngineCore, MAX_ATTEMPTS, chat_entry, turn_for_message};
use crate::error::SessionError;
use crate::events::{EventId, EventView, SessionEvent};
use crate::ids::{MessageId, SessionId, TurnId};
use crate::info::SessionInfo;
use crate::records::{CancelRequested, QueueAdded, QueueMode, SessionRecord};
use crate::state::SessionState;
use crate::turn_driver;

/// The default author of a session's agent entries.
pub const DEFAULT_AGENT: &str = "agent";

/// The default author of messages that name none.
pub const DEFAULT_USER: &str = "user";

/// Builds a [`SessionEngine`].
pub struct SessionEngineBuilder {
    store: Arc<dyn ThreadStore>,
    provider: Arc<dyn Provider>,
    model: Model,
    stream_options: StreamOptions,
    limits: Limits,
    agent_name: Arc<str>,
    chunk_interval: Duration,
    verify_attempts: u32,
    snapshot_dir: Option<PathBuf>,
    interrupt_open_turns_after: Duration,
}

impl std::fmt::Debug for SessionEngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionEngineBuilder")
            .field("model", &self.model.id)
            .finish_non_exhaustive()
    }
}

impl SessionEngineBuilder {
    /// Sets the stream options of every model call.
    pub fn stream_options(mut self, options: StreamOptions) -> Self {
        self.stream_options = options;
        self
    }

    /// Sets the limits of every turn (round cap, timeout).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The author of the agent's entries (default `agent`).
    pub fn agent_name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.agent_name = name.into();
        self
    }

    /// How long text deltas are held to share one `chat.chunk` entry
    /// (default 40 ms): the grain of `model_output_delta` events.
    pub fn chunk_interval(mut self, interval: Duration) -> Self {
        self.chunk_interval = interval;
        self
    }

    /// How many verifications a turn may run before it ends failed
    /// (default 3).
    pub fn verify_attempts(mut self, attempts: u32) -> Self {
        self.verify_attempts = attempts.max(1);
        self
    }

    /// Writes each session's `session.json` into `<dir>/<session id>/`
    /// (beside its thread, with the JSONL store's folder layout).
    pub fn snapshot_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.snapshot_dir = Some(dir.into());
        self
    }

    /// An open turn that no process of this engine runs counts as
    /// interrupted once it is at least this old (default zero: right when
    /// one engine serves the store). With several engines over one store,
    /// set it above the turns' timeout so that one engine never closes
    /// another's live turn.
    pub fn interrupt_open_turns_after(mut self, age: Duration) -> Self {
        self.interrupt_open_turns_after = age;
        self
    }

    /// The engine.
    pub fn build(self) -> SessionEngine {
        SessionEngine {
            core: Arc::new(EngineCore {
                store: self.store,
                provider: self.provider,
                model: self.model,
                stream_options: self.stream_options,
                limits: self.limits,
                agent: self.agent_name,
                chunk_interval: self.chunk_interval,
                verify_attempts: self.verify_attempts,
                snapshot_dir: self.snapshot_dir,
                interrupt_open_turns_after: self.interrupt_open_turns_after,
                runtimes: Mutex::new(HashMap::new()),
            }),
        }
    }
}

/// A message to add to a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Submit {
    /// What it says.
    pub text: String,
    /// Attachments it refers to (uploaded first).
    pub files: Vec<FileRef>,
    /// Who wrote it (default: the session's owner, or `user`).
    pub author: Option<Arc<str>>,
    /// Whether it starts a turn (default: the session's `auto_run`).
    pub auto_run: Option<bool>,
    /// Makes a retried submit return the same ids instead of adding the
    /// message twice.
    pub idempotency_key: Option<String>,
}

impl Submit {
    /// A message holding `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// What a submit did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The message's id.
    pub message_id: MessageId,
    /// The turn that answers it (already running, or to run once the
    /// running turn ends), if it runs one.
    pub turn_id: Option<TurnId>,
    /// How it waits, when a turn was running: it is delivered later.
    pub queued: Option<QueueMode>,
}

/// A decision about a gated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    /// Run this call.
    Approve,
    /// Run this call and every later call of the same tool in the session.
    ApproveSession,
    /// Do not run it.
    Deny,
}

impl ApprovalAction {
    fn verdict(self) -> ApprovalVerdict {
        match self {
            Self::Approve => ApprovalVerdict::Approve,
            Self::ApproveSession => ApprovalVerdict::ApproveSession,
            Self::Deny => ApprovalVerdict::Deny,
        }
    }
}

/// A stream of session events (history, then live).
pub type EventStream = Pin<Box<dyn Stream<Item = Result<SessionEvent, SessionError>> + Send>>;

/// The agentic-sessions engine: sessions are threads of `store`, turns run
/// in this process, and every call works from what the store holds, so
/// several engines over one store (NATS) serve the same sessions.
///
/// ```
/// use std::sync::Arc;
/// use roundtable_providers::{AssistantBlock, AssistantMessage, Model, ScriptedProvider, OPENAI_COMPLETIONS};
/// use roundtable_sessions::{CreateSession, SessionEngine, Submit};
/// use roundtable_thread_stream::MemoryStore;
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let mut reply = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
/// reply.content.push(AssistantBlock::text("Hello!"));
/// let engine = SessionEngine::builder(
///     Arc::new(MemoryStore::new()),
///     Arc::new(ScriptedProvider::new([reply])),
///     Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""),
/// )
/// .build();
/// let workspace = tempfile::tempdir().unwrap();
/// let session = engine.create(CreateSession::new(workspace.path())).await.unwrap();
/// let sent = engine.submit(&session.id, Submit::text("hi")).await.unwrap();
/// engine.idle(&session.id).await.unwrap();
/// assert!(sent.turn_id.is_some());
/// let info = engine.get(&session.id).await.unwrap();
/// assert_eq!(info.status, roundtable_sessions::SessionStatus::Completed);
/// # });
/// ```
#[derive(Clone)]
pub struct SessionEngine {
    core: Arc<EngineCore>,
}

impl std::fmt::Debug for SessionEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionEngine")
            .field("model", &self.core.model.id)
            .finish_non_exhaustive()
    }
}

impl SessionEngine {
    /// A builder over `store`, running turns on `provider` with `model`.
    pub fn builder(
        store: Arc<dyn ThreadStore>,
        provider: Arc<dyn Provider>,
        model: Model,
    ) -> SessionEngineBuilder {
        SessionEngineBuilder {
            store,
            provider,
            model,
            stream_options: StreamOptions::default(),
            limits: Limits::default(),
            agent_name: Arc::from(DEFAULT_AGENT),
            chunk_interval: DEFAULT_CHUNK_INTERVAL,
            verify_attempts: 3,
            snapshot_dir: None,
            interrupt_open_turns_after: Duration::ZERO,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ThreadStore> {
        &self.core.store
    }

    /// Creates a session: checks the workspace, fills in the defaults and
    /// writes the session's first entry.
    pub async fn create(&self, request: CreateSession) -> Result<SessionInfo, SessionError> {
        let created = request.resolve()?;
        let id = SessionId::generate();
        let thread = id.thread()?;
        let author = created
            .owner
            .clone()
            .unwrap_or_else(|| Arc::from(DEFAULT_USER));
        self.core
            .store
            .append(
                &thread,
                Expect::LastSeq(0),
                vec![NewEntry::new(author, created.to_body()?)],
            )
            .await?;
        let runtime = self.core.runtime(&id.to_string()).await?;
        let state = runtime.refresh(&*self.core.store).await?;
        self.core.write_snapshot(&runtime.id, &state);
        SessionInfo::from_state(runtime.id.as_str(), &state)
            .ok_or_else(|| SessionError::UnknownSession(id.to_string()))
    }

    /// Every session of the store, most recently active first.
    pub async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let mut sessions = Vec::new();
        for thread in self.core.store.list_threads().await? {
            if !thread.as_str().starts_with(SessionId::PREFIX) {
                continue;
            }
            match self.get(thread.as_str()).await {
                Ok(info) => sessions.push(info),
                // A thread named like a session that holds none is not one.
                Err(SessionError::UnknownSession(_) | SessionError::InvalidId { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        sessions.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.id.cmp(&a.id)));
        Ok(sessions)
    }

    /// A session's metadata and latest state.
    pub async fn get(&self, session: &str) -> Result<SessionInfo, SessionError> {
        let runtime = self.core.runtime(session).await?;
        let state = runtime.refresh(&*self.core.store).await?;
        SessionInfo::from_state(runtime.id.as_str(), &state)
            .ok_or_else(|| SessionError::UnknownSession(session.to_string()))
    }

    /// Adds a message. With `auto_run` it starts a turn, or queues the
    /// message to run as the next turn when one is running. An idempotency
    /// key makes a retried call return the same ids.
    pub async fn submit(&self, session: &str, message: Submit) -> Result<Submitted, SessionError> {
        let core = &self.core;
        let runtime = core.runtime(session).await?;
        let message_id = match &message.idempotency_key {
            Some(key) => idempotent_message_id(runtime.id.as_str(), key),
            None => MessageId::generate(),
        };
        let turn_id = turn_for_message(&message_id);
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*core.store).await?;
            if state.knows_message(message_id.as_str()) {
                return Ok(already_submitted(&state, message_id));
            }
            let Some(created) = &state.created else {
                return Err(SessionError::UnknownSession(session.to_string()));
            };
            let auto_run = message.auto_run.unwrap_or(created.auto_run);
            let author = message
                .author
                .clone()
                .or_else(|| created.owner.clone())
                .unwrap_or_else(|| Arc::from(DEFAULT_USER));
            let mut chat = Chat::new(message.text.as_str());
            chat.files = message.files.clone();
            let busy = state.running_turn().is_some() || !state.queue.is_empty();
            let (entries, outcome) = if !auto_run {
                (
                    vec![chat_entry(&author, &message_id, chat)],
                    Submitted {
                        message_id: message_id.clone(),
                        turn_id: None,
                        queued: None,
                    },
                )
            } else if busy {
                let item = QueueAdded {
                    id: message_id.as_arc().clone(),
                    mode: QueueMode::FollowUp,
                    author,
                    chat,
                };
                (
                    vec![NewEntry::new(core.agent.clone(), item.to_body()?)],
                    Submitted {
                        message_id: message_id.clone(),
                        turn_id: Some(turn_id.clone()),
                        queued: Some(QueueMode::FollowUp),
                    },
                )
            } else {
                (
                    vec![
                        chat_entry(&author, &message_id, chat),
                        turn_started_by(&core.agent, turn_id.as_arc(), state.upto + 1, "message"),
                    ],
                    Submitted {
                        message_id: message_id.clone(),
                        turn_id: Some(turn_id.clone()),
                        queued: None,
                    },
                )
            };
            let expect = Expect::LastSeq(state.upto);
            drop(state);
            match core.store.append(&runtime.thread, expect, entries).await {
                Ok(_) => {
                    if let Some(turn) = outcome
                        .turn_id
                        .as_ref()
                        .filter(|_| outcome.queued.is_none())
                    {
                        runtime.claim(turn.as_arc().clone());
                        turn_driver::spawn(core.clone(), runtime.clone());
                    } else if outcome.queued.is_some() {
                        // A new message also resumes a queue a cancelled
                        // turn left waiting; when a turn runs here, the
                        // driver takes the queue after it.
                        runtime.request_resume();
                        turn_driver::spawn(core.clone(), runtime.clone());
                    }
                    let state = runtime.refresh(&*core.store).await?;
                    core.write_snapshot(&runtime.id, &state);
                    return Ok(outcome);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(too_busy(session))
    }

    /// The session's events after `after` (all of them when `None`), then
    /// live ones as they are written, in order and exactly once. The
    /// stream reads the store at the caller's pace: a slow reader holds
    /// nothing in memory.
    pub async fn subscribe(
        &self,
        session: &str,
        after: Option<EventId>,
    ) -> Result<EventStream, SessionError> {
        let runtime = self.core.runtime(session).await?;
        let view = EventView::new(runtime.id.as_str(), self.core.agent.clone());
        // The entry of `after` may give more events after it: read it again.
        let from = after.map_or(1, |id| id.seq.max(1));
        let entries = self.core.store.subscribe(&runtime.thread, from).await?;
        let events = entries.flat_map(move |item| {
            let events: Vec<Result<SessionEvent, SessionError>> = match item {
                Ok(entry) => view
                    .events(&entry)
                    .into_iter()
                    .filter(|e| after.is_none_or(|after| e.id > after))
                    .map(Ok)
                    .collect(),
                Err(e) => vec![Err(SessionError::from(e))],
            };
            futures::stream::iter(events)
        });
        Ok(Box::pin(events))
    }

    /// The session's events after `after`, as stored now (no live part).
    pub async fn events(
        &self,
        session: &str,
        after: Option<EventId>,
    ) -> Result<Vec<SessionEvent>, SessionError> {
        let runtime = self.core.runtime(session).await?;
        let view = EventView::new(runtime.id.as_str(), self.core.agent.clone());
        let from = after.map_or(1, |id| id.seq.max(1));
        let tip = self.core.store.last_seq(&runtime.thread).await?;
        if from > tip {
            return Ok(Vec::new());
        }
        let entries = self.core.store.read(&runtime.thread, from..=tip).await?;
        Ok(entries
            .iter()
            .flat_map(|entry| view.events(entry))
            .filter(|e| after.is_none_or(|after| e.id > after))
            .collect())
    }

    /// Decides a gated call waiting in the session, from this process or
    /// any other over the same store. A call that is not waiting is an
    /// error: unknown ([`SessionError::NotFound`]) or already decided
    /// ([`SessionError::Conflict`]).
    pub async fn decide(
        &self,
        session: &str,
        call_id: &str,
        action: ApprovalAction,
        reason: Option<String>,
    ) -> Result<(), SessionError> {
        let core = &self.core;
        let runtime = core.runtime(session).await?;
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*core.store).await?;
            let Some(pending) = state.pending_approvals.get(call_id) else {
                return Err(if state.decided_calls.contains(call_id) {
                    SessionError::Conflict(format!("call {call_id} is already decided"))
                } else {
                    SessionError::NotFound(format!("no call {call_id} waits for approval"))
                });
            };
            let record = ApprovalDecidedRecord {
                turn: pending.turn_id.clone(),
                call_id: pending.tool_call_id.clone(),
                tool: pending.tool.clone(),
                verdict: action.verdict(),
                reason: reason.clone(),
            };
            let author = state
                .created
                .as_ref()
                .and_then(|c| c.owner.clone())
                .unwrap_or_else(|| Arc::from(DEFAULT_USER));
            let expect = Expect::LastSeq(state.upto);
            drop(state);
            match core
                .store
                .append(
                    &runtime.thread,
                    expect,
                    vec![NewEntry::new(author, record.to_body()?)],
                )
                .await
            {
                Ok(_) => {
                    let state = runtime.refresh(&*core.store).await?;
                    core.write_snapshot(&runtime.id, &state);
                    return Ok(());
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(too_busy(session))
    }

    /// Cancels the running turn: its model call, its tools (a command's
    /// whole process group) and any wait for an approval. The turn's
    /// `turn.failed` is written once its cleanup is done. Cancelling with
    /// nothing running is [`SessionError::Conflict`].
    pub async fn cancel(&self, session: &str, reason: Option<String>) -> Result<(), SessionError> {
        let core = &self.core;
        let runtime = core.runtime(session).await?;
        let state = runtime.refresh(&*core.store).await?;
        let Some(running) = state.running_turn() else {
            return Err(SessionError::Conflict(
                "no turn is running in the session".into(),
            ));
        };
        let turn = running.id.clone();
        drop(state);
        // The request is stored first, so its event comes before the
        // turn's end, wherever the turn runs.
        let record = CancelRequested {
            turn: turn.clone(),
            reason,
        };
        core.store
            .append(
                &runtime.thread,
                Expect::Any,
                vec![NewEntry::new(core.agent.clone(), record.to_body()?)],
            )
            .await?;
        if let Some(local) = runtime.local()
            && local.turn == turn
        {
            local.cancel.cancel();
        }
        // A turn nobody runs any more (its process is gone) is closed here.
        core.close_dead_turns(&runtime).await?;
        Ok(())
    }

    /// Runs a failed, cancelled or interrupted turn again: a new turn over
    /// the same messages (the failed turn's output stays in the log but the
    /// model no longer sees it). Returns the new turn's id.
    pub async fn retry(&self, session: &str, turn_id: &str) -> Result<TurnId, SessionError> {
        let core = &self.core;
        let runtime = core.runtime(session).await?;
        let new_turn = TurnId::generate();
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*core.store).await?;
            let Some(turn) = state.turn(turn_id) else {
                return Err(SessionError::NotFound(format!(
                    "no turn {turn_id} in the session"
                )));
            };
            if !turn.is_retryable() {
                return Err(SessionError::Conflict(format!(
                    "turn {turn_id} did not fail: only a failed, cancelled or interrupted turn is retried"
                )));
            }
            if state.running_turn().is_some() {
                return Err(SessionError::Conflict(
                    "a turn is running in the session".into(),
                ));
            }
            let Some(trigger) = turn.trigger else {
                return Err(SessionError::Conflict(format!(
                    "turn {turn_id} answers no message"
                )));
            };
            let expect = Expect::LastSeq(state.upto);
            drop(state);
            let started = turn_started_by(&core.agent, new_turn.as_arc(), trigger, "retry");
            match core
                .store
                .append(&runtime.thread, expect, vec![started])
                .await
            {
                Ok(_) => {
                    runtime.claim(new_turn.as_arc().clone());
                    turn_driver::spawn(core.clone(), runtime.clone());
                    return Ok(new_turn);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(too_busy(session))
    }

    /// Waits until this process runs nothing in the session (no turn, no
    /// queued turn it is about to start).
    pub async fn idle(&self, session: &str) -> Result<(), SessionError> {
        let runtime = self.core.runtime(session).await?;
        runtime.idle().await;
        Ok(())
    }

    /// After a restart: in every session, closes the turns no process runs
    /// any more as interrupted (expiring their pending approvals; `retry`
    /// runs them again) and starts the queued follow-ups. Returns the
    /// sessions it touched.
    pub async fn recover(&self) -> Result<Vec<SessionId>, SessionError> {
        let mut touched = Vec::new();
        for thread in self.core.store.list_threads().await? {
            if !thread.as_str().starts_with(SessionId::PREFIX) {
                continue;
            }
            let runtime = match self.core.runtime(thread.as_str()).await {
                Ok(runtime) => runtime,
                Err(SessionError::UnknownSession(_) | SessionError::InvalidId { .. }) => continue,
                Err(e) => return Err(e),
            };
            let closed = self.core.close_dead_turns(&runtime).await?;
            let queued = !runtime.refresh(&*self.core.store).await?.queue.is_empty();
            if queued {
                turn_driver::spawn(self.core.clone(), runtime.clone());
            }
            if closed || queued {
                touched.push(runtime.id.clone());
            }
        }
        Ok(touched)
    }
}

/// The ids a submit already returned for `message_id`.
fn already_submitted(state: &SessionState, message_id: MessageId) -> Submitted {
    let queued = state
        .queue
        .iter()
        .find(|q| *q.item.id == *message_id.as_str())
        .map(|q| q.item.mode);
    let turn = turn_for_message(&message_id);
    let ran = state
        .messages
        .get(message_id.as_str())
        .is_some_and(|m| state.turns.iter().any(|t| t.trigger == Some(m.seq)));
    Submitted {
        turn_id: (ran || queued.is_some()).then_some(turn),
        message_id,
        queued,
    }
}

/// The id of the message an idempotency key names in a session: the same
/// key always gives the same id.
fn idempotent_message_id(session: &str, key: &str) -> MessageId {
    let uuid = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("{session}\n{key}").as_bytes(),
    );
    MessageId::parse(&format!("{}{}", MessageId::PREFIX, uuid.simple()))
        .unwrap_or_else(|_| MessageId::generate())
}

fn too_busy(session: &str) -> SessionError {
    SessionError::Conflict(format!(
        "session {session} changed {MAX_ATTEMPTS} times while this call was made; try again"
    ))
}
