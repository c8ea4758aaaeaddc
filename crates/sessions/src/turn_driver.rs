//! Running a session's turns in this process: the turn a call claimed,
//! then the queued follow-ups, one after another, then `settled`.
//!
//! A turn (the spec's agent loop): the session's messages projected from
//! its thread (a retried turn's failed predecessors left out), the system
//! prompt and tools of [`context`](crate::context) (read tools only in plan
//! mode) with `ask_user` and `update_plan`, the stored approver, steering
//! messages and auto-verify at the round boundaries, compaction before every
//! model request ([`compaction`](crate::compaction)), the turn's entries
//! written as they happen, its provenance when it ends, and a watcher that
//! hands the turn the decisions, answers and cancel requests other callers
//! append.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32};

use async_trait::async_trait;
use roundtable_chat_runner::Resume;
use roundtable_chat_runner::lifecycle::{FlushedTurn, TurnWriter, WriterSink, turn_failed};
use roundtable_chat_runner::{TurnHooks, TurnInput, TurnOutcome, TurnRequest};
use roundtable_dispatch::Roster;
use roundtable_dispatch::projection::labelled_chat;
use roundtable_providers::Message;
use roundtable_providers::StopReason;
use roundtable_thread_stream::lease::Lease;
use roundtable_thread_stream::{
    EntryBody, Expect, FinishReason, NewEntry, StoreError, TurnEnded, TurnReason,
};
use roundtable_tools::Artifacts;
use tokio_util::sync::CancellationToken;

use crate::approver::StoredApprover;
use crate::blob::TurnArtifacts;
use crate::bound_turn::TurnBinding;
use crate::compaction::SessionView;
use crate::context::AgentSetup;
use crate::continuation::{self, Standing};
use crate::core::{EngineCore, MAX_ATTEMPTS};
use crate::error::SessionError;
use crate::host_tools::{no_host_tools, tools_changed};
use crate::ids::TurnId;
use crate::message_files::accepts_images;
use crate::models::ServedModel;
use crate::plan::mode_prompt;
use crate::provenance::RunLog;
use crate::records::{
    HostTool, LastTurn, QueueAdded, QueueExit, QueueMode, QueueRemoved, SessionCreated,
    SessionMode, SessionRecord, Settled, ToolsChanged,
};
use crate::runtime::SessionRuntime;
use crate::shutdown;
use crate::state::{QueueChange, SessionState, TurnProgress};
use crate::turn_lease;
use crate::turn_log;
use crate::turn_tools::TurnTools;
use crate::verify::{AutoVerify, ChangeWatch};
use crate::watch::{TurnInbox, watch_turn, while_watching};
use crate::working_tree::TurnTree;
use roundtable_chat_runner::lifecycle::{Held, TurnLeases};

/// Starts driving the session's turns in this process: the turn it
/// claimed, then the queued follow-ups. The runtime stays in memory while
/// it works. The turn's loop, writer and watcher share one ordinary task.
/// The runtime is pinned before the task starts, so a caller that looks it
/// up meanwhile (`idle`, a second `submit`) finds it among the pinned ones,
/// without the idle cache's lookup.
pub(crate) fn spawn(core: Arc<EngineCore>, runtime: Arc<SessionRuntime>) {
    spawn_with(core, runtime, None);
}

/// [`spawn`], for a turn another process began: this process took the
/// session's `lease` and has claimed the turn.
pub(crate) fn carry_on(core: Arc<EngineCore>, runtime: Arc<SessionRuntime>, lease: Lease) {
    spawn_with(core, runtime, Some(lease));
}

fn spawn_with(core: Arc<EngineCore>, runtime: Arc<SessionRuntime>, lease: Option<Lease>) {
    runtime.set_busy(true);
    core.runtimes.pin(&runtime);
    let tasks = core.drivers.tasks.clone();
    tasks.spawn(async move {
        let driver = runtime.driver.lock().await;
        let done_here = match &core.leases {
            None => drive_unleased(&core, &runtime).await,
            Some(leases) => drive_leased(&core, &runtime, leases, lease).await,
        };
        if done_here && let Err(error) = settle(&core, &runtime).await {
            report(&runtime, &error);
        }
        let state = runtime.cached().await;
        core.record_settled(&runtime.id, &state).await;
        let queued = !state.queue.is_empty();
        drop(state);
        drop(driver);
        // A runtime whose queue holds messages stays: they are owed a run.
        if !queued {
            core.runtimes.unpin(&runtime).await;
        }
        runtime.set_busy(false);
    });
}

/// Drives the session's turns with no lease. A stop past its grace drops
/// the turn where it is and closes it as a crash recovery would. True:
/// the session's turns are this process's to settle.
async fn drive_unleased(core: &Arc<EngineCore>, runtime: &Arc<SessionRuntime>) -> bool {
    let halted = tokio::select! {
        biased;
        () = core.drivers.halt.cancelled() => true,
        driven = drive(core, runtime) => {
            if let Err(error) = driven {
                report(runtime, &error);
            }
            false
        }
    };
    if halted && let Err(error) = shutdown::close_halted(core, runtime).await {
        report(runtime, &error);
    }
    true
}

/// Drives the session's turns while holding its lease (`given`, or taken
/// here). A stop past its grace hands the lease over, leaving the turn open
/// for another process to carry on; a lease lost drops the turn where it
/// is, for its new holder. True when the session's turns are this
/// process's to settle.
async fn drive_leased(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    leases: &TurnLeases,
    given: Option<Lease>,
) -> bool {
    let lease = match given {
        Some(lease) => lease,
        None => match leases.acquire(&turn_lease::key_of(&runtime.id)).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                // Another process took the session's turn over: it runs it.
                forget_claim(runtime);
                return false;
            }
            Err(error) => {
                fail_unleased(core, runtime, &error.to_string()).await;
                return true;
            }
        },
    };
    match leases
        .hold(lease, drive(core, runtime), &core.drivers.halt)
        .await
    {
        Held::Done(driven, lease) => {
            if let Err(error) = driven {
                report(runtime, &error);
            }
            leases.release(&lease).await;
            true
        }
        Held::Stopped(lease) => {
            forget_claim(runtime);
            core.drivers.halted(runtime.id.clone());
            leases.hand_over(&lease).await;
            false
        }
        Held::Lost => {
            forget_claim(runtime);
            false
        }
    }
}

/// Forgets the turn this process claimed (another process runs it).
fn forget_claim(runtime: &SessionRuntime) {
    if let Some(local) = runtime.local() {
        runtime.release(&local.turn);
    }
}

/// Fails the turn this process claimed but could not take the lease of:
/// running it unleased could run it twice.
async fn fail_unleased(core: &EngineCore, runtime: &SessionRuntime, error: &str) {
    let Some(local) = runtime.local() else {
        return;
    };
    runtime.release(&local.turn);
    let reason = TurnReason::failed(
        FinishReason::Error,
        format!("the turn's lease could not be taken: {error}"),
    );
    let failed = turn_failed(&core.agent, &local.turn, reason);
    if let Err(error) = core
        .store
        .append(&runtime.thread, Expect::Any, vec![failed])
        .await
    {
        report(runtime, &error.into());
    }
}

async fn drive(core: &Arc<EngineCore>, runtime: &Arc<SessionRuntime>) -> Result<(), SessionError> {
    loop {
        // One look at the state decides: the claimed turn, or what follows
        // when none is open.
        let state = runtime.refresh(&*core.store).await?;
        let next = state.running_turn().map(|t| (t.id.clone(), t.started_seq));
        match next {
            // The open turn this process claimed (drivers take turns, so a
            // claimed turn still open has not run yet). Another open turn
            // is another process's, or a dead one `recover` closes.
            Some((turn, started)) if runtime.local().is_some_and(|l| l.turn == turn) => {
                drop(state);
                // Boxed: a turn's future is large (the turn loop, the
                // writer, the watcher), and the driver's would otherwise be
                // as large, copied whole each time it is moved to be spawned.
                let ran = Box::pin(run_turn(core, runtime, &turn, started)).await;
                runtime.release(&turn);
                ran?;
                requeue_late_steers(core, runtime).await?;
            }
            Some(_) => return Ok(()),
            None => {
                let went_well = match state.last_turn().map(|t| &t.progress) {
                    None | Some(TurnProgress::Ended(_)) => true,
                    Some(TurnProgress::Failed(reason)) => {
                        !reason.is_interrupted()
                            && reason.finish_reason() != Some(FinishReason::Aborted)
                    }
                    Some(TurnProgress::Running) => false,
                };
                let queued = !state.queue.is_empty();
                drop(state);
                // An aborted turn keeps the queue waiting until the next
                // message; otherwise the next queued message runs.
                if !queued || !went_well && !runtime.take_resume() || core.drivers.stopping() {
                    return Ok(());
                }
                if core.start_next_queued(runtime).await?.is_none() {
                    return Ok(());
                }
            }
        }
    }
}

/// Steering messages still queued when a turn ended came too late for it:
/// they become follow-ups, in their place, never lost.
async fn requeue_late_steers(
    core: &EngineCore,
    runtime: &SessionRuntime,
) -> Result<(), SessionError> {
    for _ in 0..MAX_ATTEMPTS {
        let state = runtime.refresh(&*core.store).await?;
        let late: Vec<QueueAdded> = state
            .queued(QueueMode::Steer)
            .map(|q| QueueAdded {
                mode: QueueMode::FollowUp,
                ..q.item.clone()
            })
            .collect();
        if late.is_empty() {
            return Ok(());
        }
        let mut snapshot_state = state.clone();
        let mut entries = Vec::new();
        for mut item in late {
            item.queue = snapshot_state.queue_snapshot(Some(QueueChange::Add(&item)));
            if let Some(queued) = snapshot_state
                .queue
                .iter_mut()
                .find(|q| q.item.id == item.id)
            {
                queued.item.mode = QueueMode::FollowUp;
            }
            entries.push(NewEntry::new(core.agent.clone(), item.to_body()?));
        }
        let expect = Expect::LastSeq(state.upto);
        drop(state);
        match core.store.append(&runtime.thread, expect, entries).await {
            Ok(stored) => {
                drop(runtime.absorb(&stored).await);
                return Ok(());
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Says `settled` when nothing runs and nothing is queued (once): after a
/// turn whose closing append could not say it (see [`close_turn`]), a turn
/// that could not start, or the queue's last change.
async fn settle(core: &EngineCore, runtime: &SessionRuntime) -> Result<(), SessionError> {
    for _ in 0..MAX_ATTEMPTS {
        let state = runtime.refresh(&*core.store).await?;
        if state.settled || !state.is_quiet_but(None) {
            return Ok(());
        }
        let expect = Expect::LastSeq(state.upto);
        let settled = settled_entry(core, last_turn_of(&state))?;
        drop(state);
        match core
            .store
            .append(&runtime.thread, expect, vec![settled])
            .await
        {
            Ok(stored) => {
                drop(runtime.absorb(&stored).await);
                return Ok(());
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The agent's `signal.settled` entry, naming how the last turn closed.
fn settled_entry(core: &EngineCore, last_turn: Option<LastTurn>) -> Result<NewEntry, SessionError> {
    let settled = Settled { last_turn };
    Ok(NewEntry::new(core.agent.clone(), settled.to_body()?))
}

/// How the state's last turn closed, for [`Settled`] (none when no turn
/// ran, or the last one still runs).
fn last_turn_of(state: &SessionState) -> Option<LastTurn> {
    let last = state.last_turn()?;
    let (ended, reason) = match &last.progress {
        TurnProgress::Ended(reason) => (true, reason),
        TurnProgress::Failed(reason) => (false, reason),
        TurnProgress::Running => return None,
    };
    Some(LastTurn {
        turn: last.id.clone(),
        ended,
        reason: reason.to_string(),
    })
}

/// How `outcome` closes its turn, for the [`Settled`] appended with it
/// (the reason its `turn.ended` or `turn.failed` stores).
fn closing_turn(outcome: &TurnOutcome) -> LastTurn {
    let (ended, reason) = match &outcome.error {
        None => (true, TurnReason::finished(outcome.finish_reason)),
        Some(error) => (
            false,
            TurnReason::failed(outcome.finish_reason, error.clone()),
        ),
    };
    LastTurn {
        turn: outcome.turn_id.clone(),
        ended,
        reason: reason.to_string(),
    }
}

/// Appends the closing entries of `turn` (`then` after its end), and
/// `settled` in the same append when nothing else runs and nothing is
/// queued: one append where closing and then [`settle`] take two. The
/// append expects the seq the check saw, so an entry another caller
/// appends meanwhile (a queued message) makes it check again. When the
/// checks keep losing (or the state cannot be read), the entries go
/// without `settled`, and `settle` decides after the driver's work.
async fn close_turn(
    core: &EngineCore,
    runtime: &SessionRuntime,
    turn: &str,
    flushed: &FlushedTurn,
    outcome: &TurnOutcome,
    then: Vec<NewEntry>,
) -> Result<(), SessionError> {
    let settled = settled_entry(core, Some(closing_turn(outcome)))?;
    for _ in 0..MAX_ATTEMPTS {
        // A read that fails costs only the fold: the turn still closes.
        let Ok(state) = runtime.refresh(&*core.store).await else {
            break;
        };
        if !state.is_quiet_but(Some(turn)) {
            break;
        }
        let expect = Expect::LastSeq(state.upto);
        drop(state);
        let mut closing = then.clone();
        closing.push(settled.clone());
        match flushed.end(outcome, closing, expect).await {
            Ok(()) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(flushed.end(outcome, then, Expect::Any).await?)
}

/// Closes a turn another process began whose last stored reply answered
/// without tools: it ends with that reply.
async fn close_answered(
    core: &EngineCore,
    runtime: &SessionRuntime,
    turn: &Arc<str>,
    stop: StopReason,
) -> Result<(), SessionError> {
    let finish = if stop == StopReason::Length {
        FinishReason::Length
    } else {
        FinishReason::Stop
    };
    let ended = NewEntry::new(
        core.agent.clone(),
        EntryBody::TurnEnded(TurnEnded {
            turn: turn.clone(),
            reason: TurnReason::finished(finish),
        }),
    );
    core.store
        .append(&runtime.thread, Expect::Any, vec![ended])
        .await?;
    Ok(())
}

/// The model the session chose, when this engine does not offer it: a
/// turn begun on it elsewhere cannot be carried on here.
async fn missing_model(core: &EngineCore, runtime: &SessionRuntime) -> Option<String> {
    let chosen = runtime.cached().await.model.clone()?;
    core.models
        .find(&chosen)
        .is_none()
        .then_some(chosen.to_string())
}

/// What a turn reads of its session's state when it starts.
struct TurnStart {
    created: SessionCreated,
    /// The turns a retry superseded (left out of the turn's view).
    superseded: HashSet<Arc<str>>,
    /// The tools approved for the session.
    approved_tools: HashSet<Arc<str>>,
    /// Whether a cancel was asked before the turn ran.
    cancel_asked: bool,
    mode: SessionMode,
    /// Whether plan mode's plan is being carried out.
    executing: bool,
    /// The seq of the message that started the turn.
    trigger: Option<u64>,
    /// The host's tools the session's previous turn had.
    host_before: Vec<HostTool>,
    /// The model the session chose (`provider/id`), if not the engine's.
    chosen_model: Option<String>,
}

impl TurnStart {
    /// Reads them from the runtime's state, refreshed.
    async fn read(
        core: &EngineCore,
        runtime: &SessionRuntime,
        turn: &Arc<str>,
    ) -> Result<Self, SessionError> {
        let state = runtime.refresh(&*core.store).await?;
        let Some(created) = state.created.clone() else {
            return Err(SessionError::UnknownSession(runtime.id.to_string()));
        };
        let trigger = state.turn(turn).and_then(|t| t.trigger);
        Ok(Self {
            created,
            superseded: state.superseded_turns(),
            approved_tools: state.approved_tools.clone(),
            cancel_asked: state.cancel_requested.contains(turn),
            mode: state.mode,
            executing: state.plan.as_ref().is_some_and(|p| p.executing),
            trigger,
            host_before: state.host_tools.clone(),
            chosen_model: state.model.clone(),
        })
    }
}

/// A turn's parts, read and built before its writer starts.
struct TurnParts {
    turn: Arc<str>,
    /// The seq of the turn's `turn.started`.
    started: u64,
    start: TurnStart,
    /// The model the turn runs on, to its end.
    served: ServedModel,
    /// The id of the message that started the turn.
    message_id: Option<Arc<str>>,
    /// When the turn started (milliseconds since the epoch).
    started_at: i64,
    view: SessionView,
    roster: Roster,
    /// The conversation up to the turn's start (a resumed turn's: up to
    /// what it stored).
    messages: Vec<Message>,
    artifacts: Option<Arc<dyn Artifacts>>,
    /// Where a turn another process began goes on from.
    resume: Option<Resume>,
    /// The `ask_user` calls of a resumed turn whose question is stored.
    asked: HashSet<Arc<str>>,
}

/// What a turn's end reads of its run: the working tree, the run's log
/// (and the change watch the log reads) and its verification.
struct TurnRun {
    tree: Arc<TurnTree>,
    changes: Arc<ChangeWatch>,
    log: RunLog<Arc<ChangeWatch>>,
    verify: Option<Arc<AutoVerify>>,
    /// The run's provenance names its message and start.
    message_id: Option<Arc<str>>,
    started_at: i64,
}

/// Runs turn `turn` (started at seq `started`) to its end.
async fn run_turn(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    turn: &Arc<str>,
    started: u64,
) -> Result<(), SessionError> {
    let resume = match continuation::standing(core, runtime, turn, started).await? {
        Standing::Fresh => None,
        Standing::Resumed {
            resume,
            upto,
            asked,
        } => Some((resume, upto, asked)),
        Standing::Answered(reason) => return close_answered(core, runtime, turn, reason).await,
    };
    if resume.is_some()
        && let Some(missing) = missing_model(core, runtime).await
    {
        let reason = format!("the session's model {missing} is not configured here");
        let failed = turn_failed(
            &core.agent,
            turn,
            TurnReason::failed(FinishReason::Error, reason),
        );
        core.store
            .append(&runtime.thread, Expect::Any, vec![failed])
            .await?;
        return Ok(());
    }
    let parts = prepare_turn(core, runtime, turn, started, resume).await?;
    // The writer hands the runtime's state what it stores (the driver's
    // refreshes read back only what others appended), and its loop runs
    // in this task, beside the turn: the turn's events reach it without
    // waking another thread.
    let (writer, writing) = TurnWriter::start_inline(
        core.store.clone(),
        runtime.thread.clone(),
        core.agent.clone(),
        parts.turn.clone(),
        Some(core.chunk_interval),
        Some(runtime.clone()),
    );
    let stop = writer.sink();
    // Boxed: the turn's work is a large future (tens of KB), which the
    // join below and the driver's own future would otherwise hold inline
    // and copy whole at each move.
    let turn_work = Box::pin(work_turn(core, runtime, parts, writer));
    let turn_work = async {
        let ran = turn_work.await;
        // A turn that stopped before closing its writer (an error) still
        // has what it sent written.
        stop.finish();
        ran
    };
    let (ran, ()) = futures::future::join(turn_work, writing.run()).await;
    ran
}

/// Reads what turn `turn` starts from and builds its conversation: the
/// session's state, the model (the one chosen when the turn starts is the
/// turn's to the end), the triggering message, the view and its messages.
async fn prepare_turn(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    turn: &Arc<str>,
    started: u64,
    resume: Option<(Resume, u64, HashSet<Arc<str>>)>,
) -> Result<TurnParts, SessionError> {
    let mut start = TurnStart::read(core, runtime, turn).await?;
    let served = core
        .models
        .for_session(start.chosen_model.as_deref())
        .clone();
    let (resume, upto, asked) = match resume {
        Some((resume, upto, asked)) => (Some(resume), upto, asked),
        None => (None, started, HashSet::new()),
    };
    turn_log::started(&runtime.id, turn, &served.model);
    let message_id = trigger_message(core, runtime, start.trigger).await?;
    let started_at = roundtable_providers::now_millis();
    let superseded = std::mem::take(&mut start.superseded);
    let view = SessionView::new(core.clone(), runtime.clone(), superseded, served.clone());
    let (roster, mut messages) = runtime.conversation.upto(&view, &core.agent, upto).await?;
    if let Some(resume) = &resume {
        continuation::without_filled_results(&mut messages, resume);
    }
    let artifacts = turn_artifacts(core, runtime, turn);
    Ok(TurnParts {
        turn: turn.clone(),
        started,
        start,
        served,
        message_id,
        started_at,
        view,
        roster,
        messages,
        artifacts,
        resume,
        asked,
    })
}

/// The turn's work beside its writer: the agent's setup, the turn's tools,
/// approver and hooks, the turn loop while the watcher follows the thread,
/// then the turn's end.
async fn work_turn(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    parts: TurnParts,
    writer: TurnWriter,
) -> Result<(), SessionError> {
    let Some(setup) = setup_or_fail(core, runtime, &parts, &writer).await? else {
        return Ok(());
    };
    let cancel = turn_cancel(runtime, &parts.turn, parts.start.cancel_asked);
    let inbox = Arc::new(TurnInbox::default());
    let watching = watch_turn(
        core.store.clone(),
        runtime.thread.clone(),
        parts.started + 1,
        parts.turn.clone(),
        cancel.clone(),
        inbox.clone(),
    );
    let tree = Arc::new(TurnTree::new(setup.workspace.clone(), cancel.clone()));
    let binding = TurnBinding {
        turn: parts.turn.clone(),
        sink: writer.sink(),
        inbox: inbox.clone(),
        tree: tree.clone(),
        asked: parts.asked.clone(),
    };
    let tools = bind_tools(core, runtime, &setup, &parts, binding)?;
    let changes = Arc::new(ChangeWatch::new(writer.sink(), tools.kinds.clone()));
    let log = RunLog::new(changes.clone());
    let verify = verify_hook(core, &parts, &changes, &tree, &cancel);
    let hooks = session_hooks(core, runtime, &parts, writer.sink(), verify.clone());
    let system_prompt = system_prompt_for(&setup, parts.start.mode, parts.start.executing);
    let approver = stored_approver(
        core,
        runtime,
        writer.sink(),
        inbox,
        parts.start.approved_tools,
    );
    let turns = tools.turns.clone().with_approver(Arc::new(approver));
    let compaction = parts.view.turn_step(
        parts.roster,
        &turns,
        writer.sink(),
        runtime.conversation.count(),
    );
    let request = TurnRequest {
        artifacts: parts.artifacts,
        resume: parts.resume,
        ..TurnRequest::new(parts.messages)
            .with_system_prompt(system_prompt)
            .with_turn_id(parts.turn.clone())
            .with_hooks(hooks)
            .with_compaction(compaction)
    };
    // The watcher follows the thread while the turn loop runs (in this
    // task), and stops with it.
    let mut outcome = while_watching(turns.run(request, cancel.clone(), &log), watching).await;
    fail_unverified(&mut outcome, verify.as_deref(), core.verify_attempts);
    let run = TurnRun {
        tree,
        changes,
        log,
        verify,
        message_id: parts.message_id,
        started_at: parts.started_at,
    };
    finish_turn(
        core,
        runtime,
        &parts.turn,
        &parts.served,
        run,
        writer,
        outcome,
    )
    .await
}

/// The turn's tools and loop (the loop under the session's limits over
/// the engine's), bound to the turn while the returned tools live.
fn bind_tools(
    core: &EngineCore,
    runtime: &SessionRuntime,
    setup: &Arc<AgentSetup>,
    parts: &TurnParts,
    binding: TurnBinding,
) -> Result<TurnTools, SessionError> {
    let created = &parts.start.created;
    runtime.tools.for_turn(
        setup,
        parts.start.mode,
        &parts.served,
        &core.agent,
        binding,
        |turns| {
            turns
                .with_limits(created.limits.over(core.limits))
                .with_options(core.stream_options.clone())
        },
    )
}

/// The turn's auto-verify hook, with the turn's artifacts, when the
/// session verifies.
fn verify_hook(
    core: &EngineCore,
    parts: &TurnParts,
    changes: &Arc<ChangeWatch>,
    tree: &Arc<TurnTree>,
    cancel: &CancellationToken,
) -> Option<Arc<AutoVerify>> {
    let created = &parts.start.created;
    match parts.start.mode {
        SessionMode::Agent => auto_verify(
            core,
            created,
            changes,
            tree,
            cancel,
            &parts.roster,
            &parts.turn,
        )
        .map(|verify| {
            Arc::new(AutoVerify {
                artifacts: parts.artifacts.clone(),
                ..verify
            })
        }),
        // Plan mode changes nothing: there is nothing to verify.
        SessionMode::Plan => None,
    }
}

/// What the session adds at the turn's round boundaries: steering
/// messages shown as the turn's model reads them, and verification.
fn session_hooks(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    parts: &TurnParts,
    sink: WriterSink,
    verify: Option<Arc<AutoVerify>>,
) -> Arc<SessionHooks> {
    Arc::new(SessionHooks {
        verify,
        steering: Steering {
            core: core.clone(),
            runtime: runtime.clone(),
            sink,
            roster: parts.roster.clone(),
            accepts_images: accepts_images(&parts.served.model.input),
        },
    })
}

/// The turn's approver: it records decisions on the session's thread and
/// starts from the tools approved for the session.
fn stored_approver(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    sink: WriterSink,
    inbox: Arc<TurnInbox>,
    approved_tools: HashSet<Arc<str>>,
) -> StoredApprover {
    StoredApprover {
        sink,
        inbox,
        approved_tools: std::sync::Mutex::new(approved_tools),
        author: core.agent.clone(),
        session: (core.clone(), runtime.clone()),
    }
}

/// The agent's setup for the turn, with the record of changed host tools
/// appended first; `None` when the setup fails, after failing the turn
/// with the reason.
async fn setup_or_fail(
    core: &EngineCore,
    runtime: &SessionRuntime,
    parts: &TurnParts,
    writer: &TurnWriter,
) -> Result<Option<Arc<AgentSetup>>, SessionError> {
    let (created, turn) = (&parts.start.created, &parts.turn);
    match turn_setup(core, runtime, created, turn, &parts.start.host_before).await {
        Ok((setup, tools_changed)) => {
            if let Some(changed) = tools_changed {
                let entry = NewEntry::new(core.agent.clone(), changed.to_body()?);
                writer.sink().append(vec![entry]).await?;
            }
            Ok(Some(setup))
        }
        Err(error) => {
            // The turn cannot run: it fails, saying why.
            let reason = TurnReason::failed(FinishReason::Error, error.to_string());
            writer
                .sink()
                .append(vec![turn_failed(&core.agent, turn, reason)])
                .await?;
            Ok(None)
        }
    }
}

/// The turn's cancellation: the one its claim made in this process (or a
/// new claim), already cancelled when a cancel was asked before it ran.
fn turn_cancel(runtime: &SessionRuntime, turn: &Arc<str>, cancel_asked: bool) -> CancellationToken {
    let cancel = runtime
        .local()
        .filter(|l| l.turn == *turn)
        .map_or_else(|| runtime.claim(turn.clone()), |l| l.cancel);
    if cancel_asked {
        cancel.cancel();
    }
    cancel
}

/// The setup's system prompt, with plan mode's instructions when the
/// session is in plan mode or carries a plan out.
fn system_prompt_for(setup: &AgentSetup, mode: SessionMode, executing: bool) -> String {
    let mut system_prompt = setup.system_prompt.clone();
    if let Some(extra) = mode_prompt(mode, executing) {
        system_prompt.push_str("\n\n");
        system_prompt.push_str(extra);
    }
    system_prompt
}

/// Fails a turn that ended well while verification still fails after its
/// last check.
fn fail_unverified(outcome: &mut TurnOutcome, verify: Option<&AutoVerify>, attempts: u32) {
    if let Some(verify) = verify
        && verify.exhausted()
        && outcome.error.is_none()
    {
        outcome.finish_reason = FinishReason::Error;
        outcome.error = Some(format!("verification still fails after {attempts} checks"));
    }
}

/// Ends a turn that ran: looks at the working tree, then closes the turn
/// with the run's provenance. A failed append leaves the turn open:
/// `recover` (or the next `cancel`) closes it as interrupted.
async fn finish_turn(
    core: &EngineCore,
    runtime: &SessionRuntime,
    turn: &Arc<str>,
    served: &ServedModel,
    run: TurnRun,
    writer: TurnWriter,
    outcome: TurnOutcome,
) -> Result<(), SessionError> {
    // `git` runs only when a tool that may change the workspace ran.
    let (git_before, git_after) = run.tree.before_and_after().await;
    if run.tree.may_have_changed() {
        // The kept setup (repository bundle, AGENTS.md, skills) may be out
        // of date.
        runtime.setup.invalidate();
    }
    let outcome_text = match &outcome.error {
        None => TurnReason::finished(outcome.finish_reason),
        Some(error) => TurnReason::failed(outcome.finish_reason, error.clone()),
    }
    .to_string();
    let provenance = run.log.provenance(
        turn.clone(),
        run.message_id,
        run.started_at,
        outcome_text,
        git_before,
        git_after,
        run.verify.as_ref().map(|v| v.runs()).unwrap_or_default(),
        outcome.usage,
    );
    let then = vec![NewEntry::new(core.agent.clone(), provenance.to_body()?)];
    drop(run.log);
    drop(run.changes);
    turn_log::ended(&runtime.id, &served.model, &outcome);
    let flushed = writer.flushed(&outcome).await?;
    close_turn(core, runtime, turn, &flushed, &outcome, then).await
}

/// The agent's setup for a turn (the host's tools as their sources list
/// them now among its tools; kept in the runtime between turns), and the
/// record of how those host tools differ from the ones of the session's
/// previous turn (`before`), if they do.
async fn turn_setup(
    core: &EngineCore,
    runtime: &SessionRuntime,
    created: &SessionCreated,
    turn: &Arc<str>,
    before: &[HostTool],
) -> Result<(Arc<AgentSetup>, Option<ToolsChanged>), SessionError> {
    let host = match &core.host_tools {
        Some(host) => host.for_turn().await?,
        None => no_host_tools(),
    };
    let setup = runtime
        .setup
        .setup(created, &host, core.command_limits)
        .await?;
    Ok((setup, tools_changed(turn, before, &host)))
}

/// The id of the message at seq `trigger` (the state keeps no ids of
/// messages: one entry is read).
async fn trigger_message(
    core: &EngineCore,
    runtime: &SessionRuntime,
    trigger: Option<u64>,
) -> Result<Option<Arc<str>>, SessionError> {
    let Some(seq) = trigger else {
        return Ok(None);
    };
    let entries = core.store.read(&runtime.thread, seq..=seq).await?;
    Ok(entries
        .into_iter()
        .find(|e| matches!(e.body, roundtable_thread_stream::EntryBody::Chat(_)))
        .map(|e| e.id))
}

/// What the session adds at a turn's round boundaries: steering messages
/// before a model call, verification after an answer.
struct SessionHooks {
    verify: Option<Arc<AutoVerify>>,
    steering: Steering,
}

#[async_trait]
impl TurnHooks for SessionHooks {
    async fn before_model_call(&self, _turn: &Arc<str>, _round: u32) -> Vec<TurnInput> {
        self.steering.deliver().await.unwrap_or_default()
    }

    async fn after_answer(&self, turn: &Arc<str>, round: u32) -> Vec<TurnInput> {
        match &self.verify {
            Some(verify) => verify.after_answer(turn, round).await,
            None => Vec::new(),
        }
    }
}

/// Delivers queued steering messages into the running turn.
struct Steering {
    core: Arc<EngineCore>,
    runtime: Arc<SessionRuntime>,
    sink: WriterSink,
    roster: Roster,
    /// Whether the turn's model reads images (else it reads notes of them).
    accepts_images: bool,
}

impl Steering {
    /// Takes the queued steering messages out of the queue (one append,
    /// after everything the turn wrote so far) and returns them as the
    /// turn's next inputs; their `chat` entries follow from the writer.
    async fn deliver(&self) -> Result<Vec<TurnInput>, SessionError> {
        let store = &*self.core.store;
        for _ in 0..MAX_ATTEMPTS {
            // Most rounds find no steering message: nothing to wait for.
            if self
                .runtime
                .refresh(store)
                .await?
                .queued(QueueMode::Steer)
                .next()
                .is_none()
            {
                return Ok(Vec::new());
            }
            // Everything the turn produced so far is written first, so the
            // messages land after the tool results they follow.
            self.sink.append(Vec::new()).await?;
            let state = self.runtime.refresh(store).await?;
            let steers: Vec<QueueAdded> = state
                .queued(QueueMode::Steer)
                .map(|q| q.item.clone())
                .collect();
            if steers.is_empty() {
                return Ok(Vec::new());
            }
            let mut taken: Vec<Arc<str>> = Vec::new();
            let mut entries = Vec::new();
            for item in &steers {
                taken.push(item.id.clone());
                let removed = QueueRemoved {
                    id: item.id.clone(),
                    exit: QueueExit::Delivered,
                    queue: state.queue_snapshot(Some(QueueChange::Remove(&taken))),
                };
                entries.push(NewEntry::new(self.core.agent.clone(), removed.to_body()?));
            }
            let expect = Expect::LastSeq(state.upto);
            drop(state);
            match store.append(&self.runtime.thread, expect, entries).await {
                Ok(stored) => {
                    drop(self.runtime.absorb(&stored).await);
                    let accepts_images = self.accepts_images;
                    let mut inputs = Vec::with_capacity(steers.len());
                    for item in steers {
                        let shown = self
                            .core
                            .files
                            .show(&self.runtime.id, accepts_images, &item.chat)
                            .await;
                        inputs.push(TurnInput {
                            message: labelled_chat(
                                &self.roster,
                                &item.author,
                                &shown,
                                roundtable_providers::now_millis(),
                            ),
                            author: item.author,
                            id: Some(item.id),
                            chat: item.chat,
                        });
                    }
                    return Ok(inputs);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Vec::new())
    }
}

/// Where the turn's tools keep their artifacts: the session's blob store,
/// when the engine has one.
fn turn_artifacts(
    core: &EngineCore,
    runtime: &SessionRuntime,
    turn: &Arc<str>,
) -> Option<Arc<dyn Artifacts>> {
    let blobs = core.files.blobs.clone()?;
    let turn = TurnId::parse(turn).ok()?;
    Some(Arc::new(TurnArtifacts::new(
        blobs,
        runtime.id.clone(),
        turn,
    )))
}

/// The auto-verify hook of a turn, when the session verifies (without
/// artifacts: the caller adds the turn's).
fn auto_verify(
    core: &EngineCore,
    created: &SessionCreated,
    changes: &Arc<ChangeWatch>,
    tree: &Arc<TurnTree>,
    cancel: &tokio_util::sync::CancellationToken,
    roster: &Roster,
    turn: &Arc<str>,
) -> Option<AutoVerify> {
    let policy = &created.verify_policy;
    if !policy.auto_verify || policy.commands.is_empty() {
        return None;
    }
    Some(AutoVerify {
        workspace: tree.workspace().clone(),
        changes: changes.clone(),
        artifacts: None,
        cancel: cancel.clone(),
        roster: roster.clone(),
        turn: turn.clone(),
        max_attempts: core.verify_attempts,
        attempts: AtomicU32::new(0),
        turn_tree: tree.clone(),
        last_look: std::sync::Mutex::new(None),
        exhausted: AtomicBool::new(false),
        runs: std::sync::Mutex::new(Vec::new()),
    })
}

fn report(runtime: &SessionRuntime, error: &SessionError) {
    tracing::warn!(session = %runtime.id, %error, "a session's turn driver stopped");
}
