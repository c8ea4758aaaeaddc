//! Running a session's turns in this process: the turn a call claimed,
//! then the queued follow-ups, one after another.
//!
//! A turn (the spec's agent loop): the session's messages projected from
//! its thread (a retried turn's failed predecessors left out), the system
//! prompt and tools of [`context`](crate::context), the stored approver,
//! auto-verify as a round-boundary hook, the turn's entries written as they
//! happen, and a watcher that hands the turn the decisions and cancel
//! requests other callers append.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use roundtable_chat_runner::lifecycle::{TurnWriter, turn_failed};
use roundtable_chat_runner::{TurnLoop, TurnRequest};
use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger, build_messages};
use roundtable_thread_stream::{Entry, FinishReason, TurnReason};

use crate::approver::StoredApprover;
use crate::context::agent_setup;
use crate::core::{EngineCore, entry_turn};
use crate::error::SessionError;
use crate::records::SessionCreated;
use crate::runtime::SessionRuntime;
use crate::state::TurnProgress;
use crate::verify::{AutoVerify, ChangeWatch, VERIFY_AUTHOR};
use crate::watch::{Decisions, watch_turn};

/// Starts driving the session's turns in this process: the running turn
/// when nobody runs it yet, then the queued follow-ups.
pub(crate) fn spawn(core: Arc<EngineCore>, runtime: Arc<SessionRuntime>) {
    runtime.set_busy(true);
    tokio::spawn(async move {
        let _driver = runtime.driver.lock().await;
        if let Err(error) = drive(&core, &runtime).await {
            report(&runtime, &error);
        }
        let state = runtime.cached().await;
        core.write_snapshot(&runtime.id, &state);
        drop(state);
        runtime.set_busy(false);
    });
}

async fn drive(core: &Arc<EngineCore>, runtime: &Arc<SessionRuntime>) -> Result<(), SessionError> {
    loop {
        let next = {
            let state = runtime.refresh(&*core.store).await?;
            state.running_turn().map(|t| (t.id.clone(), t.started_seq))
        };
        match next {
            // The open turn this process claimed (drivers take turns, so a
            // claimed turn still open has not run yet). Another open turn
            // is another process's, or a dead one `recover` closes.
            Some((turn, started)) if runtime.local().is_some_and(|l| l.turn == turn) => {
                let ran = run_turn(core, runtime, &turn, started).await;
                runtime.release(&turn);
                ran?;
            }
            Some(_) => return Ok(()),
            None => {
                let state = runtime.refresh(&*core.store).await?;
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
                // A cancelled turn keeps the queue waiting until the next
                // message; otherwise the next follow-up runs.
                if !queued || !went_well && !runtime.take_resume() {
                    return Ok(());
                }
                if core.start_next_follow_up(runtime).await?.is_none() {
                    return Ok(());
                }
            }
        }
    }
}

/// Runs turn `turn` (started at seq `started`) to its end.
async fn run_turn(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    turn: &Arc<str>,
    started: u64,
) -> Result<(), SessionError> {
    let turn = turn.clone();
    let store = &core.store;
    let (created, superseded, approved_tools, cancel_asked) = {
        let state = runtime.refresh(&**store).await?;
        let Some(created) = state.created.clone() else {
            return Err(SessionError::UnknownSession(runtime.id.to_string()));
        };
        (
            created,
            state.superseded_turns(),
            state.approved_tools.clone(),
            state.cancel_requested.contains(&turn),
        )
    };
    let entries = store.read(&runtime.thread, 1..=started).await?;
    let visible: Vec<Entry> = entries
        .into_iter()
        .filter(|e| entry_turn(e).is_none_or(|t| !superseded.contains(t)))
        .collect();
    let roster = session_roster(&core.agent, &visible);
    let messages = build_messages(&core.agent, &visible, &roster);

    let writer = TurnWriter::start(
        store.clone(),
        runtime.thread.clone(),
        core.agent.clone(),
        turn.clone(),
        Some(core.chunk_interval),
    );
    let setup = match agent_setup(&created).await {
        Ok(setup) => setup,
        Err(error) => {
            // The turn cannot run: it fails, saying why.
            let reason = TurnReason::failed(FinishReason::Error, error.to_string());
            writer
                .sink()
                .append(vec![turn_failed(&core.agent, &turn, reason)])
                .await?;
            return Ok(());
        }
    };

    let cancel = runtime
        .local()
        .filter(|l| l.turn == turn)
        .map_or_else(|| runtime.claim(turn.clone()), |l| l.cancel);
    if cancel_asked {
        cancel.cancel();
    }
    let decisions = Arc::new(Decisions::default());
    let watcher = watch_turn(
        store.clone(),
        runtime.thread.clone(),
        started + 1,
        turn.clone(),
        cancel.clone(),
        decisions.clone(),
    );
    let kinds = setup
        .tools
        .definitions()
        .map(|d| (d.name.clone(), d.kind))
        .collect();
    let changes = Arc::new(ChangeWatch::new(writer.sink(), kinds));
    let approver = StoredApprover {
        sink: writer.sink(),
        decisions,
        approved_tools: std::sync::Mutex::new(approved_tools),
        author: core.agent.clone(),
    };
    let verify = auto_verify(
        core,
        &created,
        &setup.workspace,
        &changes,
        &cancel,
        &roster,
        &turn,
    );
    if let Some(verify) = &verify {
        verify.look().await;
    }
    let turns = TurnLoop::new(core.provider.clone(), core.model.clone())
        .with_tools(Arc::new(setup.tools))
        .with_approver(Arc::new(approver))
        .with_limits(core.limits)
        .with_options(core.stream_options.clone());
    let mut request = TurnRequest::new(messages)
        .with_system_prompt(setup.system_prompt)
        .with_turn_id(turn.clone());
    if let Some(verify) = &verify {
        request = request.with_hooks(verify.clone());
    }
    let mut outcome = turns.run(request, cancel, &*changes).await;
    watcher.abort();
    if let Some(verify) = &verify
        && verify.exhausted()
        && outcome.error.is_none()
    {
        outcome.finish_reason = FinishReason::Error;
        outcome.error = Some(format!(
            "verification still fails after {} checks",
            core.verify_attempts
        ));
    }
    drop(changes);
    // A failed append leaves the turn open: `recover` (or the next
    // `cancel`) closes it as interrupted.
    writer
        .end(&outcome, Vec::new())
        .await
        .map_err(SessionError::from)
}

/// The auto-verify hook of a turn, when the session verifies.
fn auto_verify(
    core: &EngineCore,
    created: &SessionCreated,
    workspace: &roundtable_tools::workspace::Workspace,
    changes: &Arc<ChangeWatch>,
    cancel: &tokio_util::sync::CancellationToken,
    roster: &Roster,
    turn: &Arc<str>,
) -> Option<Arc<AutoVerify>> {
    let policy = &created.verify_policy;
    if !policy.auto_verify || policy.commands.is_empty() {
        return None;
    }
    Some(Arc::new(AutoVerify {
        workspace: workspace.clone(),
        changes: changes.clone(),
        artifacts: None,
        cancel: cancel.clone(),
        roster: roster.clone(),
        turn: turn.clone(),
        max_attempts: core.verify_attempts,
        attempts: AtomicU32::new(0),
        tree: std::sync::Mutex::new(None),
        exhausted: std::sync::atomic::AtomicBool::new(false),
    }))
}

/// The session's participants: its agent, and everyone who wrote in it
/// (named by their ids).
fn session_roster(agent: &Arc<str>, entries: &[Entry]) -> Roster {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut people = vec![Participant::bot(
        agent.clone(),
        agent.clone(),
        BotProfile::new(Trigger::Mention, ""),
    )];
    seen.insert(agent);
    for author in std::iter::once(VERIFY_AUTHOR).chain(entries.iter().map(|e| &*e.author)) {
        if seen.insert(author) {
            people.push(Participant::human(author, author));
        }
    }
    // Ids whose handles collide keep the agent alone: labels then show the
    // ids, which is all the names are anyway.
    match Roster::new(people.clone()) {
        Ok(roster) => roster,
        Err(_) => Roster::new(people.into_iter().take(1)).unwrap_or_else(|_| empty_roster()),
    }
}

/// A roster with nobody in it (labels then show authors' ids).
fn empty_roster() -> Roster {
    // Nobody means no duplicate: this cannot fail; were it to, an empty
    // roster is what it would have given.
    Roster::new(Vec::<Participant>::new()).unwrap_or_else(|_| empty_roster())
}

fn report(runtime: &SessionRuntime, error: &SessionError) {
    tracing::warn!(session = %runtime.id, %error, "a session's turn driver stopped");
}
