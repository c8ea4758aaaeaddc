//! The session engine: the calls a host (or an HTTP layer) makes, over a
//! thread store. Every call names its [`Caller`]; another user's session
//! is unknown to it. (`SessionEngine::builder` lives with the builder, in
//! `builder.rs`.)

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use roundtable_chat_runner::compaction::CompactionReport;
use roundtable_chat_runner::lifecycle::records::ApprovalDecidedRecord;
use roundtable_chat_runner::lifecycle::turn_started_by;
use roundtable_providers::Model;
use roundtable_skills::SkillDiagnostic;
use roundtable_thread_stream::{Expect, NewEntry, StoreError, ThreadStore};

use crate::attachments::AttachmentRef;
use crate::caller::Caller;
use crate::compaction;
use crate::config::CreateSession;
use crate::context::setup_diagnostics;
use crate::core::{EngineCore, MAX_ATTEMPTS};
use crate::error::SessionError;
use crate::events::{EventId, EventView, SessionEvent};
use crate::ids::{SessionId, TurnId};
use crate::info::ProviderCircuit;
use crate::info::SessionInfo;
use crate::models::model_key;
use crate::questions::check_answers;
use crate::records::{
    CancelRequested, ModeChanged, Provenance, QuestionAnswered, QuestionReply, QueueExit,
    QueueRemoved, SessionMode, SessionRecord,
};
use crate::recovery::{Recovery, UnreadableSession};
use crate::requests::{ApprovalAction, DEFAULT_USER, Placed, Submit, Submitted};
use crate::runtime::SessionRuntime;
use crate::shutdown::{self, Stopped};
use crate::state::{QueueChange, SessionState};
use crate::submit::{self, MessageIds, already_submitted, check_retry};
use crate::takeover;
use crate::turn_driver;

/// A stream of session events (history, then live).
pub type SessionEvents = Pin<Box<dyn Stream<Item = Result<SessionEvent, SessionError>> + Send>>;

/// The agentic-sessions engine: sessions are threads of `store`, turns run
/// in this process, and every call works from what the store holds, so
/// several engines over one store (NATS) serve the same sessions.
///
/// ```
/// use std::sync::Arc;
/// use roundtable_providers::{AssistantBlock, AssistantMessage, Model, ScriptedProvider, OPENAI_COMPLETIONS};
/// use roundtable_sessions::{Caller, CreateSession, SessionEngine, SessionStatus, Submit};
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
/// let alice = Caller::user("alice");
/// let workspace = tempfile::tempdir().unwrap();
/// let session = engine.create(&alice, CreateSession::new(workspace.path())).await.unwrap();
/// let sent = engine.submit(&alice, &session.id, Submit::text("hi")).await.unwrap();
/// engine.idle(&session.id).await.unwrap();
/// assert!(sent.turn_id.is_some());
/// let info = engine.get(&alice, &session.id).await.unwrap();
/// assert_eq!(info.status, SessionStatus::Completed);
/// // Another user does not see it.
/// assert!(engine.get(&Caller::user("bob"), &session.id).await.is_err());
/// # });
/// ```
#[derive(Clone)]
pub struct SessionEngine {
    core: Arc<EngineCore>,
}

impl std::fmt::Debug for SessionEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionEngine")
            .field("model", &self.core.models.own().model.id)
            .finish_non_exhaustive()
    }
}

impl SessionEngine {
    pub(crate) fn from_core(core: EngineCore) -> Self {
        Self {
            core: Arc::new(core),
        }
    }

    /// What the engine's parts share (the workflow runner drives sessions
    /// through it).
    pub(crate) fn core(&self) -> &Arc<EngineCore> {
        &self.core
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ThreadStore> {
        &self.core.store
    }

    /// The limits uploads are held to (a server sizes its upload route's
    /// body limit from them).
    pub fn attachment_limits(&self) -> &crate::AttachmentLimits {
        &self.core.files.limits
    }

    /// Creates a session: checks the workspace, fills in the defaults and
    /// writes the session's first entry. A user's session belongs to them.
    pub async fn create(
        &self,
        caller: &Caller,
        mut request: CreateSession,
    ) -> Result<SessionInfo, SessionError> {
        if let Some(user) = caller.user_id() {
            match &request.owner {
                Some(owner) if owner != user => {
                    return Err(SessionError::InvalidField {
                        field: "owner",
                        reason: "a user creates sessions of their own only".into(),
                    });
                }
                _ => request.owner = Some(user.clone()),
            }
        }
        let created = request.resolve()?;
        let id = SessionId::generate();
        let thread = id.thread()?;
        let author = created
            .owner
            .clone()
            .unwrap_or_else(|| Arc::from(DEFAULT_USER));
        let mut entries = vec![NewEntry::new(author.clone(), created.to_body()?)];
        if let Some(mode) = request.mode.filter(|m| *m != SessionMode::Agent) {
            let changed = ModeChanged {
                mode,
                executing: false,
            };
            entries.push(NewEntry::new(author, changed.to_body()?));
        }
        self.core
            .store
            .append(&thread, Expect::LastSeq(0), entries)
            .await?;
        let runtime = self.core.runtime(&Caller::Host, id.as_str()).await?;
        let state = runtime.refresh(&*self.core.store).await?;
        self.core.record_settled(&runtime.id, &state).await;
        SessionInfo::from_state(runtime.id.as_str(), &state)
            .ok_or_else(|| SessionError::UnknownSession(id.to_string()))
    }

    /// Stores a file a client uploads into `session`'s attachments, after
    /// checking it (size, and the declared MIME type against the content:
    /// see [`attachments`](crate::attachments)). A message then refers to
    /// it by the returned reference ([`Submit::files`]).
    pub async fn upload_attachment(
        &self,
        caller: &Caller,
        session: &str,
        filename: Option<&str>,
        mime_type: &str,
        bytes: bytes::Bytes,
    ) -> Result<AttachmentRef, SessionError> {
        let core = &self.core;
        let runtime = core.runtime(caller, session).await?;
        let blobs = core.files.store()?;
        crate::attachments::upload(
            &**blobs,
            &runtime.id,
            filename,
            mime_type,
            bytes,
            &core.files.limits,
            &core.files.numbers,
        )
        .await
        .map_err(SessionError::from)
    }

    /// A file of the session for `caller` to read back: an uploaded
    /// attachment (`attachments/<name>`) or a turn's artifact
    /// (`artifacts/<turn>/<path>`, such as a verification's whole log). The
    /// path is checked as a [`BlobPath`](crate::blob::BlobPath) before anything is
    /// read; one that no session can hold is
    /// [`NotFound`](SessionError::NotFound), like a missing file.
    pub async fn read_file(
        &self,
        caller: &Caller,
        session: &str,
        path: &str,
    ) -> Result<crate::StoredFile, SessionError> {
        let core = &self.core;
        let runtime = core.runtime(caller, session).await?;
        let blobs = core.files.store()?;
        crate::stored_file::read(&**blobs, &runtime.id, path).await
    }

    /// The models sessions may choose for their turns ([`Submit::model`],
    /// by [`model_key`]): the engine's own first, then those the host
    /// offered ([`SessionEngineBuilder::offer_model`]).
    ///
    /// [`SessionEngineBuilder::offer_model`]: crate::SessionEngineBuilder::offer_model
    pub fn models(&self) -> Vec<Model> {
        self.core
            .models
            .all()
            .map(|m| Model::clone(&m.model))
            .collect()
    }

    /// A session's metadata and latest state.
    pub async fn get(&self, caller: &Caller, session: &str) -> Result<SessionInfo, SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        let state = runtime.refresh(&*self.core.store).await?;
        let mut info = SessionInfo::from_state(runtime.id.as_str(), &state)
            .ok_or_else(|| SessionError::UnknownSession(session.to_string()))?;
        let served = self.core.models.for_session(state.model.as_deref());
        info.provider_circuit = ProviderCircuit::of(served.provider.breaker_state(&served.model));
        Ok(info)
    }

    /// Adds a message. With `auto_run` it starts a turn; while a turn runs
    /// it is queued instead, as a steering message for the running turn's
    /// next round boundary or as a follow-up for the turn after (see
    /// [`Submit::queue`]), or refused (see [`Submit::if_idle`]). An
    /// idempotency key makes a retried call return the same ids. A plan
    /// action carries out or refines the plan.
    pub async fn submit(
        &self,
        caller: &Caller,
        session: &str,
        message: Submit,
    ) -> Result<Submitted, SessionError> {
        let placed = self.submit_placed(caller, session, message).await?;
        Ok(placed.submitted)
    }

    /// [`submit`](Self::submit), also saying where the message's entries
    /// went: a caller that follows its message's events reads them from
    /// there, and sees nothing written before it.
    pub async fn submit_placed(
        &self,
        caller: &Caller,
        session: &str,
        message: Submit,
    ) -> Result<Placed, SessionError> {
        let core = &self.core;
        core.drivers.check_running()?;
        let runtime = core.runtime(caller, session).await?;
        let ids = MessageIds::of(&runtime.id, &message)?;
        core.files.check(&runtime.id, &message.files).await?;
        self.check_model(message.model.as_deref())?;
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*core.store).await?;
            if state.knows_message(ids.message.as_str()) {
                check_retry(&state, &message, &ids.message, ids.digest.as_deref())?;
                let submitted = already_submitted(&state, ids.message);
                return Ok(Placed::at(submitted, state.upto));
            }
            if message.if_idle && state.running_turn().is_some() {
                return Err(SessionError::Busy(session.to_string()));
            }
            let placing = submit::place(core, caller, session, &state, &message, &ids)?;
            let after = state.upto;
            drop(state);
            match core
                .store
                .append(&runtime.thread, Expect::LastSeq(after), placing.entries)
                .await
            {
                Ok(stored) => {
                    let submitted = placing.submitted;
                    submit::start_placed(core, &runtime, &stored, &submitted, &ids.turn).await;
                    return Ok(Placed::at(submitted, after));
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
    /// nothing in memory. Closing the stream aborts nothing.
    pub async fn subscribe(
        &self,
        caller: &Caller,
        session: &str,
        after: Option<EventId>,
    ) -> Result<SessionEvents, SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
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
        caller: &Caller,
        session: &str,
        after: Option<EventId>,
    ) -> Result<Vec<SessionEvent>, SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
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
        caller: &Caller,
        session: &str,
        call_id: &str,
        action: ApprovalAction,
        reason: Option<String>,
    ) -> Result<(), SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        self.append_checked(&runtime, caller, |state| {
            let Some(pending) = state.pending_approvals.get(call_id) else {
                return Err(if state.decided_calls.contains(call_id) {
                    SessionError::Conflict(format!("call {call_id} is already decided"))
                } else {
                    SessionError::NotFound(format!("no call {call_id} waits for approval"))
                });
            };
            ApprovalDecidedRecord {
                turn: pending.turn_id.clone(),
                call_id: pending.tool_call_id.clone(),
                tool: pending.tool.clone(),
                verdict: action.verdict(),
                reason: reason.clone(),
            }
            .to_body()
            .map(|body| vec![body])
            .map_err(SessionError::from)
        })
        .await
    }

    /// Answers an `ask_user` call waiting in the session (from any
    /// process). The answers must fit the questions; a call that is not
    /// waiting is unknown ([`SessionError::NotFound`]) or already answered
    /// ([`SessionError::Conflict`]).
    pub async fn answer(
        &self,
        caller: &Caller,
        session: &str,
        call_id: &str,
        answers: Vec<QuestionReply>,
    ) -> Result<(), SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        self.append_checked(&runtime, caller, |state| {
            let Some(asked) = state.pending_questions.get(call_id) else {
                return Err(if state.answered_questions.contains(call_id) {
                    SessionError::Conflict(format!("question {call_id} is already answered"))
                } else {
                    SessionError::NotFound(format!("no question {call_id} waits for an answer"))
                });
            };
            check_answers(&asked.questions, &answers)?;
            QuestionAnswered {
                turn: asked.turn.clone(),
                call_id: asked.call_id.clone(),
                answers: Some(answers.clone()),
            }
            .to_body()
            .map(|body| vec![body])
            .map_err(SessionError::from)
        })
        .await
    }

    /// Cancels (aborts) the running turn: its model call, a pending retry
    /// wait, its tools (a command's whole process group) and any wait for
    /// an approval or an answer. The turn's `turn.failed` is written once
    /// its cleanup is done. Queued messages stay queued. Cancelling with
    /// nothing running is [`SessionError::Conflict`].
    pub async fn cancel(
        &self,
        caller: &Caller,
        session: &str,
        reason: Option<String>,
    ) -> Result<(), SessionError> {
        let core = &self.core;
        let runtime = core.runtime(caller, session).await?;
        let state = runtime.refresh(&*core.store).await?;
        let Some(running) = state.running_turn() else {
            return Err(SessionError::Conflict(
                "no turn is running in the session".into(),
            ));
        };
        let turn = running.id.clone();
        drop(state);
        // The queue waits after an abort: requests to resume it made
        // before now are withdrawn (a message submitted later renews it).
        runtime.withdraw_resume();
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

    /// Removes one queued message (`Some(id)`), or clears the queue
    /// (`None`). Removing a message that is not queued is
    /// [`SessionError::NotFound`].
    pub async fn unqueue(
        &self,
        caller: &Caller,
        session: &str,
        message_id: Option<&str>,
    ) -> Result<(), SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        self.append_checked(&runtime, &Caller::Host, |state| {
            let ids: Vec<Arc<str>> = match message_id {
                Some(id) => match state.queue.iter().find(|q| &*q.item.id == id) {
                    Some(q) => vec![q.item.id.clone()],
                    None => {
                        return Err(SessionError::NotFound(format!("no message {id} is queued")));
                    }
                },
                None => state.queue.iter().map(|q| q.item.id.clone()).collect(),
            };
            let exit = if message_id.is_some() {
                QueueExit::Removed
            } else {
                QueueExit::Cleared
            };
            let mut bodies = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                let removed = QueueRemoved {
                    id: id.clone(),
                    exit,
                    queue: state.queue_snapshot(Some(QueueChange::Remove(&ids[..=i]))),
                };
                bodies.push(removed.to_body()?);
            }
            Ok(bodies)
        })
        .await
    }

    /// Runs a failed, cancelled or interrupted turn again: a new turn over
    /// the same messages (the failed turn's output stays in the log but the
    /// model no longer sees it). Returns the new turn's id.
    pub async fn retry(
        &self,
        caller: &Caller,
        session: &str,
        turn_id: &str,
    ) -> Result<TurnId, SessionError> {
        let core = &self.core;
        core.drivers.check_running()?;
        let runtime = core.runtime(caller, session).await?;
        let new_turn = TurnId::generate();
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*core.store).await?;
            let Some(turn) = state.turn(turn_id) else {
                drop(state);
                // The state keeps no turn that ended well but the last.
                return Err(if started_in(&*core.store, &runtime, turn_id).await? {
                    not_retryable(turn_id)
                } else {
                    SessionError::NotFound(format!("no turn {turn_id} in the session"))
                });
            };
            if !turn.is_retryable() {
                return Err(not_retryable(turn_id));
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

    /// Compacts the session's conversation now, stressing `focus` in the
    /// summary: the older part becomes a summary the model reads instead,
    /// the newest part (about the compaction budget's kept tokens) stays in
    /// full, and no tool call is parted from its result. Its
    /// `compaction_started` and `compaction_ended` events follow from the
    /// entries it writes. Sessions also compact on their own before a model
    /// request that nears the window (see
    /// [`SessionEngineBuilder::compaction`](crate::SessionEngineBuilder::compaction)).
    /// A session too short to compact is [`SessionError::Compaction`]
    /// with [`CompactionError::NothingToCompact`](roundtable_chat_runner::compaction::CompactionError::NothingToCompact)
    /// (kind conflict), and nothing is written.
    pub async fn compact(
        &self,
        caller: &Caller,
        session: &str,
        focus: Option<String>,
    ) -> Result<CompactionReport, SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        compaction::compact(&self.core, &runtime, focus.as_deref()).await
    }

    /// The provenance of one run (its turn's id).
    pub async fn provenance(
        &self,
        caller: &Caller,
        session: &str,
        run_id: &str,
    ) -> Result<Provenance, SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        let seqs = runtime.refresh(&*self.core.store).await?.provenance.clone();
        // The state keeps the records' seqs only: they are read, newest
        // first (the run asked about is most often a recent one).
        for seq in seqs.into_iter().rev() {
            for entry in self.core.store.read(&runtime.thread, seq..=seq).await? {
                if let Some(provenance) = Provenance::from_body(&entry.body)
                    && &*provenance.run_id == run_id
                {
                    return Ok(provenance);
                }
            }
        }
        Err(SessionError::NotFound(format!(
            "no run {run_id} in the session"
        )))
    }

    /// The provenance of every run of the session, oldest first.
    pub async fn runs(
        &self,
        caller: &Caller,
        session: &str,
    ) -> Result<Vec<Provenance>, SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        let seqs = runtime.refresh(&*self.core.store).await?.provenance.clone();
        let mut runs = Vec::with_capacity(seqs.len());
        for seq in seqs {
            for entry in self.core.store.read(&runtime.thread, seq..=seq).await? {
                if let Some(provenance) = Provenance::from_body(&entry.body) {
                    runs.push(provenance);
                }
            }
        }
        Ok(runs)
    }

    /// Waits until this process runs nothing in the session (no turn, no
    /// queued turn it is about to start). For hosts and tests: the host
    /// knows which sessions exist, so this takes no caller.
    pub async fn idle(&self, session: &str) -> Result<(), SessionError> {
        let runtime = self.core.runtime(&Caller::Host, session).await?;
        runtime.idle().await;
        Ok(())
    }

    /// How many session runtimes this engine keeps in memory now.
    pub async fn cached_runtimes(&self) -> u64 {
        self.core.runtimes.len().await
    }

    /// After a restart: in every session, closes the turns no process runs
    /// any more as interrupted (expiring their pending approvals and
    /// questions; `retry` runs them again) and starts the queued messages.
    /// Session by session: one that cannot be read is reported in the
    /// answer and the others are recovered. Fails only when the store
    /// cannot list its threads.
    ///
    /// It also brings the session index up to date (entries of threads gone
    /// dropped, every other entry made from the session's state), and
    /// finishes deletions a crash cut short.
    pub async fn recover(&self) -> Result<Recovery, SessionError> {
        let mut recovery = Recovery::default();
        let threads = self.core.store.list_threads().await?;
        let live: std::collections::HashSet<&str> = threads.iter().map(|t| t.as_str()).collect();
        self.core.index.retain(&*self.core.store, &live).await?;
        for thread in &threads {
            if !thread.as_str().starts_with(SessionId::PREFIX) {
                continue;
            }
            match self.recover_session(thread.as_str()).await {
                Ok(Some(touched)) => recovery.touched.push(touched),
                Ok(None) => {}
                Err(SessionError::Unreadable { session, reason }) => {
                    let core = &self.core;
                    if let Err(error) = core.index.put_unreadable(&*core.store, &session).await {
                        tracing::warn!(session, %error, "session index not updated");
                    }
                    recovery.unreadable.push(UnreadableSession {
                        id: session,
                        reason,
                    });
                }
                Err(error) => {
                    tracing::error!(session = thread.as_str(), %error, "not recovered");
                    recovery.unreadable.push(UnreadableSession {
                        id: thread.as_str().to_string(),
                        reason: format!("recovering it failed ({:?})", error.kind()),
                    });
                }
            }
        }
        Ok(recovery)
    }

    /// Carries on, until the engine stops, the turns whose process stopped
    /// (with [`leases`](crate::SessionEngineBuilder::leases); returns at
    /// once without): every renewal interval it looks for lapsed turn
    /// leases and takes them over. A host runs it beside the engine, e.g.
    /// `tokio::spawn(engine.take_over_turns())`.
    pub fn take_over_turns(&self) -> impl Future<Output = ()> + Send + 'static {
        takeover::run(self.core.clone())
    }

    /// Stops the engine's turns for a shutdown: new messages and retries
    /// are refused ([`SessionError::ShuttingDown`]), running turns get
    /// `grace` to finish, and those still running then are closed as
    /// interrupted, as [`recover`](Self::recover) closes the turns of a
    /// process that died (with leases: handed over, so that another
    /// process carries them on at once). Queued follow-ups stay queued for
    /// the next start.
    pub async fn shutdown(&self, grace: std::time::Duration) -> Stopped {
        shutdown::stop(&self.core, grace).await
    }

    /// Recovers one session (see [`recover`](Self::recover)); its id when
    /// it closed a turn or resumed the queue.
    async fn recover_session(&self, session: &str) -> Result<Option<SessionId>, SessionError> {
        let runtime = match self.core.runtime(&Caller::Host, session).await {
            Ok(runtime) => runtime,
            Err(SessionError::UnknownSession(_)) => {
                crate::erase::finish_deletion(&self.core, session).await?;
                return Ok(None);
            }
            Err(SessionError::InvalidId(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let closed = self.core.close_dead_turns(&runtime).await?;
        let state = runtime.refresh(&*self.core.store).await?;
        self.core.record_settled(&runtime.id, &state).await;
        let queued = !state.queue.is_empty();
        let local = runtime.local().map(|l| l.turn);
        let open_elsewhere = state
            .running_turn()
            .is_some_and(|t| local.as_ref() != Some(&t.id));
        drop(state);
        if let Some(leases) = &self.core.leases
            && (open_elsewhere || queued)
        {
            // Taken over when no live process holds the session's lease.
            let taken = takeover::take_over(&self.core, leases, &runtime.id).await?;
            return Ok(taken.then(|| runtime.id.clone()));
        }
        if queued {
            runtime.request_resume();
            turn_driver::spawn(self.core.clone(), runtime.clone());
        }
        Ok((closed || queued).then(|| runtime.id.clone()))
    }

    /// Refuses a `model` (a [`model_key`]) that is none of the engine's.
    fn check_model(&self, model: Option<&str>) -> Result<(), SessionError> {
        let models = &self.core.models;
        match model {
            Some(model) if models.find(model).is_none() => {
                let offered: Vec<String> = models.all().map(|m| model_key(&m.model)).collect();
                Err(SessionError::InvalidField {
                    field: "model",
                    reason: format!(
                        "{model} is not a model of this engine (it offers {})",
                        offered.join(", ")
                    ),
                })
            }
            _ => Ok(()),
        }
    }

    /// Appends what `make` builds from the current state, with optimistic
    /// concurrency: on a conflict the state is read again and `make` asked
    /// again, so its checks always hold against what is stored.
    async fn append_checked(
        &self,
        runtime: &SessionRuntime,
        caller: &Caller,
        make: impl Fn(&SessionState) -> Result<Vec<roundtable_thread_stream::EntryBody>, SessionError>,
    ) -> Result<(), SessionError> {
        let core = &self.core;
        for _ in 0..MAX_ATTEMPTS {
            let state = runtime.refresh(&*core.store).await?;
            let bodies = make(&state)?;
            let author = caller
                .user_id()
                .cloned()
                .or_else(|| state.created.as_ref().and_then(|c| c.owner.clone()))
                .unwrap_or_else(|| Arc::from(DEFAULT_USER));
            let entries = bodies
                .into_iter()
                .map(|body| NewEntry::new(author.clone(), body))
                .collect();
            let expect = Expect::LastSeq(state.upto);
            drop(state);
            match core.store.append(&runtime.thread, expect, entries).await {
                Ok(stored) => {
                    let state = runtime.absorb(&stored).await;
                    core.record(&runtime.id, &state).await;
                    return Ok(());
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(too_busy(runtime.id.as_str()))
    }
}

/// Where a session's thread lives on disk, and what its agent setup finds
/// wrong: what a host shows beside a session, without opening its files.
impl SessionEngine {
    /// The absolute path of `session`'s thread file, when the store keeps
    /// threads in files (the JSONL store: `<root>/<id>.jsonl`, or
    /// `<root>/<id>/<file>` with a folder per thread); `None` for the other
    /// stores, and for an id that is no session id. It names the file of
    /// any session id: call it for a session the caller may see.
    pub fn session_file(&self, session: &str) -> Option<PathBuf> {
        let id = SessionId::parse(session).ok()?;
        self.core.store.thread_file(&id.thread().ok()?)
    }

    /// The session whose thread file `path` is, as the store resolves it
    /// ([`ThreadStore::thread_of_file`]: links followed, and only a thread
    /// file inside the store's folder counts); `None` for any other path,
    /// and on stores without files. The file is never opened. Whether the
    /// caller may use the session is for the calls that take its id.
    pub fn session_of_file(&self, path: &Path) -> Option<SessionId> {
        let thread = self.core.store.thread_of_file(path)?;
        SessionId::parse(thread.as_str()).ok()
    }

    /// What building `session`'s agent setup finds wrong in its workspace:
    /// skills staged in `.agents/skills` that are dropped or warned about,
    /// and an AGENTS.md that cannot be read or is cut. Empty when all is
    /// well. As the files are now: from the session's kept agent setup
    /// while the workspace looks as it did when the setup was built (a few
    /// `stat` calls tell), else read again.
    pub async fn setup_diagnostics(
        &self,
        caller: &Caller,
        session: &str,
    ) -> Result<Vec<SkillDiagnostic>, SessionError> {
        let runtime = self.core.runtime(caller, session).await?;
        let root = match &runtime.cached().await.created {
            Some(created) => created.workspace_path.clone(),
            None => return Err(SessionError::UnknownSession(session.to_string())),
        };
        if let Some(kept) = runtime.setup.current_diagnostics(&root) {
            return Ok(kept);
        }
        // Loading skills reads files: off the async threads.
        tokio::task::spawn_blocking(move || setup_diagnostics(&root))
            .await
            .map_err(|e| SessionError::Setup(format!("reading the agent setup failed: {e}")))
    }
}

/// The error of a retry of a turn that did not fail.
fn not_retryable(turn_id: &str) -> SessionError {
    SessionError::Conflict(format!(
        "turn {turn_id} did not fail: only a failed, cancelled or interrupted turn is retried"
    ))
}

/// True when turn `turn_id` started in `runtime`'s session (its thread is
/// read: for a turn the state no longer keeps).
async fn started_in(
    store: &dyn roundtable_thread_stream::ThreadStore,
    runtime: &SessionRuntime,
    turn_id: &str,
) -> Result<bool, SessionError> {
    Ok(store.read_all(&runtime.thread).await?.iter().any(|e| {
        matches!(&e.body, roundtable_thread_stream::EntryBody::TurnStarted(t) if &*t.turn == turn_id)
    }))
}

fn too_busy(session: &str) -> SessionError {
    SessionError::Conflict(format!(
        "session {session} changed {MAX_ATTEMPTS} times while this call was made; try again"
    ))
}
