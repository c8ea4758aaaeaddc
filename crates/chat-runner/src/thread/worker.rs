//! A bot's worker on one thread: answers its wakes one at a time, each with
//! a claimed turn over the bot's projection.

use std::sync::Arc;
use std::time::Duration;

use roundtable_dispatch::{Wake, system_prompt};
use roundtable_providers::Message;
use roundtable_thread_stream::StoreError;
use roundtable_thread_stream::lease::Lease;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::bot_slot::BotSlot;
use super::compaction_view::BotViewSource;
use super::core::{BotRun, Busy, RunnerCore, ThreadState};
use super::lease;
use super::notice::RunnerNotice;
use crate::compaction::CompactionTarget;
use crate::event::FinishReason;
use crate::lifecycle::{Held, TurnWriter};
use crate::sync::lock;
use crate::turn::{TurnLoop, TurnOutcome, TurnRequest};

/// How many times a wake is tried when the store fails.
const ATTEMPTS: u32 = 3;

/// The pause before the second try (doubled before the third).
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// Hands `wake` to its bot's worker on `thread`, starting one if none runs.
pub(crate) fn enqueue(core: &Arc<RunnerCore>, thread: &Arc<ThreadState>, wake: Wake) {
    if core.cancel.is_cancelled() {
        return;
    }
    let slot = thread.slot(&wake.bot);
    if slot.push(wake) {
        let busy = Busy::begin(core);
        // Take a free permit here, in wake order, rather than in the spawned
        // worker: spawned tasks do not start in the order they were spawned,
        // and under the global limit the dispatcher's order (mentions first)
        // must decide who runs first.
        let permit = core.permits.clone().try_acquire_owned().ok();
        tokio::spawn(work(core.clone(), thread.clone(), slot, busy, permit));
    }
}

/// Frees the slot if its worker panics (a host's tool), so later wakes
/// start a new worker.
struct ReleaseOnPanic<'a>(&'a BotSlot);

impl Drop for ReleaseOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.release();
        }
    }
}

/// Answers the slot's wakes one at a time until none is pending.
async fn work(
    core: Arc<RunnerCore>,
    thread: Arc<ThreadState>,
    slot: Arc<BotSlot>,
    busy: Busy,
    mut first_permit: Option<OwnedSemaphorePermit>,
) {
    let _release = ReleaseOnPanic(&slot);
    while let Some(wake) = slot.next(core.cancel.is_cancelled()) {
        let permit = match first_permit.take() {
            Some(permit) => Some(permit),
            None => tokio::select! {
                permit = core.permits.clone().acquire_owned() => permit.ok(),
                () = core.cancel.cancelled() => None,
            },
        };
        let Some(_permit) = permit else {
            continue;
        };
        // A store error may be transient (a distributed store's hiccup):
        // try the wake again a few times before giving it up. The claim
        // makes a retry safe: a turn already started is not started twice.
        for attempt in 1..=ATTEMPTS {
            let Err(e) = answer(&core, &thread, &slot, &wake).await else {
                break;
            };
            core.notify(RunnerNotice::Error {
                thread: thread.id.clone(),
                bot: Some(slot.bot.clone()),
                message: e.to_string(),
            });
            if attempt == ATTEMPTS || core.cancel.is_cancelled() {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(RETRY_AFTER * attempt) => {}
                () = core.cancel.cancelled() => break,
            }
        }
    }
    drop(busy);
}

/// Claims `wake` and runs the bot's turn for it.
async fn answer(
    core: &RunnerCore,
    thread: &ThreadState,
    slot: &Arc<BotSlot>,
    wake: &Wake,
) -> Result<(), StoreError> {
    let Some(bot) = core.settings.bots.get(&slot.bot) else {
        return Ok(());
    };
    let answer = Answering { core, thread, slot };
    // The prompt first: a bot it cannot be built for (not a bot of the
    // roster) is reported and never claims a turn it could not run.
    let Some(system) = answer.system_prompt(bot) else {
        return Ok(());
    };
    let Some(turns) = answer.turn_loop(bot).await else {
        return Ok(());
    };
    let Some(claimed) = answer.claim(wake, &turns).await? else {
        return Ok(());
    };
    answer.run(&turns, claimed, system).await
}

/// A bot's answer to one wake on one thread, step by step.
struct Answering<'a> {
    core: &'a RunnerCore,
    thread: &'a ThreadState,
    slot: &'a Arc<BotSlot>,
}

/// A turn claimed for a wake: its id, the bot's conversation and the
/// lease that holds it (when runners share leases).
struct Claimed {
    turn: Arc<str>,
    messages: Vec<Message>,
    lease: Option<Lease>,
}

impl Answering<'_> {
    /// Tells the host the bot cannot answer, and why.
    fn error(&self, message: String) {
        self.core.notify(RunnerNotice::Error {
            thread: self.thread.id.clone(),
            bot: Some(self.slot.bot.clone()),
            message,
        });
    }

    /// The bot's system prompt on the thread, with its suffix and skills;
    /// `None` (reported) when the bot is not one of the roster.
    fn system_prompt(&self, bot: &BotRun) -> Option<String> {
        let context = lock(&self.thread.context).clone();
        let mut system = match system_prompt(&self.slot.bot, &self.thread.roster(), &context) {
            Ok(system) => system,
            Err(e) => {
                self.error(format!("no system prompt for this bot: {e}"));
                return None;
            }
        };
        for extra in [&bot.system_suffix, &bot.skills].into_iter().flatten() {
            system.push('\n');
            system.push_str(extra);
        }
        Some(system)
    }

    /// The turn loop with the tools of this turn, as the bot's sources list
    /// them now; `None` (reported) when they cannot be assembled.
    async fn turn_loop(&self, bot: &BotRun) -> Option<Arc<TurnLoop>> {
        let (turns, tools_change) = match bot.turns.for_turn().await {
            Ok(tools) => tools,
            Err(e) => {
                self.error(format!("the bot's tools cannot be assembled: {e}"));
                return None;
            }
        };
        if let Some(change) = tools_change {
            self.core.notify(RunnerNotice::ToolsChanged {
                thread: self.thread.id.clone(),
                bot: self.slot.bot.clone(),
                change,
            });
        }
        Some(turns)
    }

    /// Claims `wake` for a new turn and takes the bot's conversation;
    /// `None` when another turn answered it already (reported) or the
    /// runner is shutting down.
    async fn claim(&self, wake: &Wake, turns: &TurnLoop) -> Result<Option<Claimed>, StoreError> {
        let core = self.core;
        let thread = self.thread;
        let mut view = self.slot.view.lock().await;
        let turn: Arc<str> = Arc::from(uuid::Uuid::now_v7().to_string());
        let store = &*core.settings.store;
        let (lease, busy_for) = match &core.settings.leases {
            Some(leases) => {
                let taken = lease::take(leases, store, &thread.id, &mut view, wake, &core.cancel);
                let Some(taken) = taken.await? else {
                    return Ok(None);
                };
                // The bot's lease is this runner's: any open turn is dead.
                if let Err(error) = lease::close_dead_turns(store, &thread.id, &mut view).await {
                    leases.release(&taken).await;
                    return Err(error);
                }
                (Some(taken), Duration::ZERO)
            }
            // Another runner's open turn holds the bot for at most its timeout.
            None => {
                let limit = turns.limits().timeout;
                (
                    None,
                    limit.map_or(Duration::from_secs(600), |t| t + Duration::from_secs(5)),
                )
            }
        };
        let claimed = view
            .claim(store, &thread.id, wake, &turn, busy_for, &core.cancel)
            .await;
        if !matches!(claimed, Ok(true))
            && let (Some(leases), Some(lease)) = (&core.settings.leases, &lease)
        {
            leases.release(lease).await;
        }
        if !claimed? {
            if core.cancel.is_cancelled() {
                return Ok(None);
            }
            core.notify(RunnerNotice::AlreadyAnswered {
                thread: thread.id.clone(),
                bot: self.slot.bot.clone(),
                trigger: wake.trigger,
            });
            return Ok(None);
        }
        core.notify(RunnerNotice::TurnStarted {
            thread: thread.id.clone(),
            bot: self.slot.bot.clone(),
            turn: turn.clone(),
            trigger: wake.trigger,
        });
        let messages = view.projection.messages().to_vec();
        Ok(Some(Claimed {
            turn,
            messages,
            lease,
        }))
    }

    /// Runs the claimed turn, writing it into the thread as it goes, and
    /// closes it (as interrupted when the runner shut down meanwhile).
    async fn run(
        &self,
        turns: &TurnLoop,
        claimed: Claimed,
        system: String,
    ) -> Result<(), StoreError> {
        let (core, thread, slot) = (self.core, self.thread, self.slot);
        let settings = &core.settings;
        let Claimed {
            turn,
            messages,
            lease,
        } = claimed;
        let writer = TurnWriter::start(
            settings.store.clone(),
            thread.id.clone(),
            slot.bot.clone(),
            turn.clone(),
            Some(settings.chunk_interval),
        );
        let mut request = TurnRequest::new(messages)
            .with_system_prompt(system)
            .with_turn_id(turn.clone());
        if let Some(compactor) = &settings.compaction {
            let target = bot_target(core, thread, slot);
            request = request.with_compaction(compactor.turn_step(target, turns, writer.sink()));
        }
        let sink = writer.sink();
        let run = turns.run(request, core.cancel.child_token(), &sink);
        let outcome = match (&settings.leases, lease) {
            (Some(leases), Some(lease)) => {
                // The turn closes itself on shutdown: the lease is never
                // handed over, only released once the turn is closed.
                match leases.hold(lease, run, &CancellationToken::new()).await {
                    Held::Done(outcome, lease) => {
                        drop(sink);
                        let closed = self.close(writer, &outcome).await;
                        leases.release(&lease).await;
                        closed?;
                        outcome
                    }
                    // Another runner took the lease: the turn is its to close.
                    Held::Stopped(_) | Held::Lost => return Ok(()),
                }
            }
            (_, _) => {
                let outcome = run.await;
                drop(sink);
                self.close(writer, &outcome).await?;
                outcome
            }
        };
        self.finished(turn, &outcome);
        Ok(())
    }

    /// Closes the turn (as interrupted when the runner shut down meanwhile).
    async fn close(&self, writer: TurnWriter, outcome: &TurnOutcome) -> Result<(), StoreError> {
        // A failed append leaves the turn open; a restart closes it as
        // interrupted.
        if self.shut_down(outcome) {
            writer.end_interrupted(outcome).await
        } else {
            writer.end(outcome, Vec::new()).await
        }
    }

    /// Whether the runner shut down in the middle of the turn.
    fn shut_down(&self, outcome: &TurnOutcome) -> bool {
        self.core.cancel.is_cancelled() && !outcome.finish_reason.is_success()
    }

    /// Tells the host the turn finished.
    fn finished(&self, turn: Arc<str>, outcome: &TurnOutcome) {
        let (core, thread, slot) = (self.core, self.thread, self.slot);
        let shut_down = self.shut_down(outcome);
        core.notify(RunnerNotice::TurnFinished {
            thread: thread.id.clone(),
            bot: slot.bot.clone(),
            turn,
            finish_reason: if shut_down {
                FinishReason::Aborted
            } else {
                outcome.finish_reason
            },
        });
    }
}

/// What a compaction of `slot`'s bot on `thread` works on: its view as the
/// runner projects it.
pub(crate) fn bot_target(
    core: &RunnerCore,
    thread: &ThreadState,
    slot: &Arc<BotSlot>,
) -> CompactionTarget {
    CompactionTarget {
        thread: thread.id.clone(),
        bot: slot.bot.clone(),
        roster: thread.roster(),
        view: Arc::new(BotViewSource {
            slot: slot.clone(),
            store: core.settings.store.clone(),
            thread: thread.id.clone(),
        }),
    }
}
