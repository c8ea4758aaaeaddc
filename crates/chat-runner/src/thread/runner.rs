//! The `ThreadRunner`: its configuration, its shared state and its public
//! surface.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use roundtable_dispatch::{BotGate, Policy, Roster, ThreadContext, TopicGate};
use roundtable_skills::{ReadSkill, Skill, SkillReader, skills_prompt_section};
use roundtable_thread_stream::{ThreadId, ThreadStore};
use tokio::sync::{Semaphore, broadcast, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::ChatError;
use crate::turn::TurnLoop;

use super::follow;
use super::notice::RunnerNotice;
use super::overrides::{TriggerOverride, effective_roster};
use super::slot::Slot;

/// How long text deltas are held so that tiny ones share one `chat.chunk`
/// entry (a finished assistant message flushes at once).
pub const DEFAULT_CHUNK_INTERVAL: Duration = Duration::from_millis(40);

/// The default global cap on turns running at once.
const DEFAULT_MAX_TURNS: usize = 16;

/// How many of a thread's latest entries the dispatcher is shown.
const DEFAULT_RECENT: usize = 256;

/// Builds a [`ThreadRunner`].
pub struct ThreadRunnerBuilder {
    store: Arc<dyn ThreadStore>,
    roster: Roster,
    bots: HashMap<Arc<str>, BotRun>,
    policy: Policy,
    gate: Arc<dyn BotGate>,
    max_turns: usize,
    chunk_interval: Duration,
    recent: usize,
    stale_after: Duration,
    cancel: CancellationToken,
}

impl std::fmt::Debug for ThreadRunnerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadRunnerBuilder")
            .field("bots", &self.bots.keys().collect::<Vec<_>>())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl ThreadRunnerBuilder {
    /// Runs bot `id` of the roster with this turn loop (provider, model,
    /// tools, approver, limits). Bots of the roster with no turn loop here
    /// are never run by this runner (another host may run them); their
    /// messages still wake the bots it runs.
    pub fn bot(mut self, id: impl Into<Arc<str>>, turns: TurnLoop) -> Self {
        self.bots.insert(
            id.into(),
            BotRun {
                turns,
                suffix: None,
                skills: None,
            },
        );
        self
    }

    /// Appends `text` to the system prompt of bot `id` (after the persona,
    /// thread context and roster): a skills catalogue, house rules. Call it
    /// after [`bot`](Self::bot).
    pub fn system_suffix(mut self, id: &str, text: impl Into<Arc<str>>) -> Self {
        if let Some(bot) = self.bots.get_mut(id) {
            bot.suffix = Some(text.into());
        }
        self
    }

    /// Gives bot `id` skills, as the one-on-one chat runner does: their
    /// `<available_skills>` catalogue joins the bot's system prompt and
    /// `read_skill` joins its tools, so the model loads a skill's
    /// instructions only when it needs them. Call it after
    /// [`bot`](Self::bot); a bot this runner does not run is left alone. An
    /// error if the bot's tools already hold a tool named `read_skill`.
    pub fn skills(
        mut self,
        id: &str,
        skills: impl IntoIterator<Item = Skill>,
    ) -> Result<Self, ChatError> {
        let skills: Vec<Skill> = skills.into_iter().collect();
        if let Some(bot) = self.bots.get_mut(id) {
            let mut tools = (**bot.turns.tools()).clone();
            tools.register(ReadSkill::new(&skills))?;
            bot.turns = bot.turns.clone().with_tools(Arc::new(tools));
            bot.skills = Some(skills_prompt_section(&skills, SkillReader::ReadSkillTool).into());
        }
        Ok(self)
    }

    /// Sets the dispatcher's policy (loop guard, hop limit, fanout cap).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the gate of ambient candidates (default: [`TopicGate`]; a
    /// [`ModelGate`](crate::ModelGate) asks a model).
    pub fn gate(mut self, gate: Arc<dyn BotGate>) -> Self {
        self.gate = gate;
        self
    }

    /// At most `n` turns run at once over every thread and bot (default 16).
    pub fn max_concurrent_turns(mut self, n: usize) -> Self {
        self.max_turns = n.max(1);
        self
    }

    /// How long text deltas are held to share one `chat.chunk` entry
    /// (default [`DEFAULT_CHUNK_INTERVAL`]; zero writes each batch of
    /// deltas as soon as the writer gets to it).
    pub fn chunk_interval(mut self, interval: Duration) -> Self {
        self.chunk_interval = interval;
        self
    }

    /// How many of a thread's latest entries the dispatcher sees (default
    /// 256; it must cover the loop guard's window).
    pub fn recent_entries(mut self, n: usize) -> Self {
        self.recent = n.max(1);
        self
    }

    /// An open turn (a `turn.started` with no end) found when a thread is
    /// followed counts as interrupted once it is at least this old (default
    /// zero: any open turn, which is right when one runner serves the
    /// thread). With several runners over one store, set it above the
    /// turns' timeout so that a runner joining late leaves the others' live
    /// turns alone.
    pub fn interrupt_open_turns_after(mut self, age: Duration) -> Self {
        self.stale_after = age;
        self
    }

    /// Ties the runner to a host's cancellation token: cancelling it shuts
    /// the runner down as [`shutdown`](ThreadRunner::shutdown) does.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// The runner. It follows no thread until told to.
    pub fn build(self) -> ThreadRunner {
        let (notices, _) = broadcast::channel(1024);
        let (tick, _) = watch::channel(0);
        ThreadRunner {
            inner: Arc::new(Inner {
                store: self.store,
                roster: self.roster,
                bots: self.bots,
                policy: self.policy,
                gate: self.gate,
                permits: Arc::new(Semaphore::new(self.max_turns)),
                cancel: self.cancel,
                chunk_interval: self.chunk_interval,
                recent: self.recent,
                stale_after: self.stale_after,
                threads: Mutex::new(HashMap::new()),
                activity: Activity {
                    busy: AtomicUsize::new(0),
                    tick,
                },
                notices,
                followers: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// The multi-party thread runner: many humans and bots in shared threads,
/// each bot answering from its own projection of the thread.
///
/// For every entry appended to a thread it follows, the runner runs the
/// [dispatcher](roundtable_dispatch::dispatch) (mention and `always`
/// routing, loop guard, hop limit, fanout cap), then the gate for ambient
/// candidates, then a turn for each woken bot:
///
/// 1. **Claim.** The bot reads the thread up to its tip and appends
///    `turn.started {trigger, depth, reason}` with `Expect::LastSeq(tip)`. On
///    a conflict it reads the new entries and gives up if a turn of the same
///    bot started after the event (this runner's or another's over the same
///    store), else tries again. So two runners never both answer one wake.
/// 2. **Turn.** [`build_messages`](roundtable_dispatch::build_messages) over
///    everything up to the claim (kept incrementally) and the bot's system
///    prompt (persona, thread context, roster) go to its [`TurnLoop`]. Each
///    assistant message and tool result is appended as it completes
///    (`pi.assistant` / `pi.tool_result`, authored by the bot, with the turn
///    id; usage and cost are on the assistant entries); text deltas are
///    appended as `chat.chunk` entries, coalesced. Then `turn.ended`
///    (reason: the finish reason) or `turn.failed` (reason: the error).
/// 3. **Serialisation.** A bot runs one turn at a time per thread; wakes
///    that arrive meanwhile are coalesced into one next turn, which sees
///    them all in its projection. Different bots and threads run in
///    parallel, at most [`max_concurrent_turns`](ThreadRunnerBuilder::max_concurrent_turns)
///    at once.
///
/// The bot's final text is a new event: it may wake other bots, within the
/// loop guard and hop limit. Following a thread first resumes it: open
/// turns are closed with `turn.failed {reason: "interrupted"}` and the
/// wakes still owed (no turn of the bot after them, or only interrupted
/// ones, retried once) are answered.
///
/// Text deltas stream as chunks as they come; a model that writes text and
/// then calls tools in one message has that text chunked too (the runner
/// cannot know a message will call tools until it ends). A turn whose
/// messages before the last carry no text has chunks that concatenate to
/// its final text.
///
/// ```
/// use std::sync::Arc;
/// use roundtable_chat_runner::{ThreadRunner, TurnLoop};
/// use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger};
/// use roundtable_providers::{AssistantBlock, AssistantMessage, Model, ScriptedProvider, OPENAI_COMPLETIONS};
/// use roundtable_thread_stream::{EntryBody, Expect, MemoryStore, NewEntry, ThreadId, ThreadStore};
///
/// let roster = Roster::new([
///     Participant::human("alice", "Alice"),
///     Participant::bot("archivist", "Archivist", BotProfile::new(Trigger::Mention, "You keep the archive.")),
/// ])?;
/// let mut reply = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
/// reply.content.push(AssistantBlock::text("It is in /reports/q3."));
/// let model = Model::new(OPENAI_COMPLETIONS, "scripted", "m", "");
/// let store = Arc::new(MemoryStore::new());
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let runner = ThreadRunner::builder(store.clone(), roster)
///     .bot("archivist", TurnLoop::new(Arc::new(ScriptedProvider::new([reply])), model))
///     .build();
/// let thread = ThreadId::new("support-42").unwrap();
/// runner.follow(&thread).await.unwrap();
/// store.append(&thread, Expect::Any, vec![NewEntry::new("alice", EntryBody::chat("@archivist where is Q3?"))]).await.unwrap();
/// runner.idle().await.unwrap();
/// let entries = store.read_all(&thread).await.unwrap();
/// let answer = entries.iter().find_map(|e| match &e.body {
///     EntryBody::Assistant(a) => Some(a.message.text()),
///     _ => None,
/// });
/// assert_eq!(answer.as_deref(), Some("It is in /reports/q3."));
/// runner.shutdown().await;
/// # });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ThreadRunner {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ThreadRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadRunner")
            .field("bots", &self.inner.bots.keys().collect::<Vec<_>>())
            .field("policy", &self.inner.policy)
            .finish_non_exhaustive()
    }
}

/// One bot this runner runs.
pub(crate) struct BotRun {
    pub(crate) turns: TurnLoop,
    pub(crate) suffix: Option<Arc<str>>,
    /// The skills section of the system prompt, when the bot has skills.
    pub(crate) skills: Option<Arc<str>>,
}

/// Counts the work in flight (resumes, gate calls, bot workers) and ticks
/// whenever something changes, for [`ThreadRunner::idle`].
pub(crate) struct Activity {
    busy: AtomicUsize,
    tick: watch::Sender<u64>,
}

impl Activity {
    pub(crate) fn begin(&self) {
        self.busy.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn end(&self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
        self.bump();
    }

    pub(crate) fn bump(&self) {
        self.tick.send_modify(|t| *t = t.wrapping_add(1));
    }
}

/// Ends one piece of work when dropped, so that a task that panics (a host's
/// gate or tool) still lets [`ThreadRunner::idle`] and shutdown finish.
pub(crate) struct Busy(pub(crate) Arc<Inner>);

impl Busy {
    pub(crate) fn begin(inner: &Arc<Inner>) -> Self {
        inner.activity.begin();
        Self(inner.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.activity.end();
    }
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) roster: Roster,
    pub(crate) bots: HashMap<Arc<str>, BotRun>,
    pub(crate) policy: Policy,
    pub(crate) gate: Arc<dyn BotGate>,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) cancel: CancellationToken,
    pub(crate) chunk_interval: Duration,
    pub(crate) recent: usize,
    pub(crate) stale_after: Duration,
    pub(crate) threads: Mutex<HashMap<ThreadId, Arc<ThreadState>>>,
    pub(crate) activity: Activity,
    pub(crate) notices: broadcast::Sender<RunnerNotice>,
    pub(crate) followers: Mutex<Vec<JoinHandle<()>>>,
}

impl Inner {
    pub(crate) fn notify(&self, notice: RunnerNotice) {
        // No subscriber is fine.
        let _ = self.notices.send(notice);
    }
}

/// What the runner keeps about one thread.
pub(crate) struct ThreadState {
    pub(crate) id: ThreadId,
    pub(crate) context: Mutex<ThreadContext>,
    overrides: Mutex<HashMap<Arc<str>, TriggerOverride>>,
    roster: Mutex<Roster>,
    /// The last seq the follower has dispatched.
    pub(crate) processed: AtomicU64,
    pub(crate) following: std::sync::atomic::AtomicBool,
    slots: Mutex<HashMap<Arc<str>, Arc<Slot>>>,
}

impl ThreadState {
    fn new(id: ThreadId, roster: Roster) -> Self {
        Self {
            context: Mutex::new(ThreadContext::new(id.as_str())),
            id,
            overrides: Mutex::new(HashMap::new()),
            roster: Mutex::new(roster),
            processed: AtomicU64::new(0),
            following: std::sync::atomic::AtomicBool::new(false),
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The roster the dispatcher sees here (overrides applied).
    pub(crate) fn roster(&self) -> Roster {
        lock(&self.roster).clone()
    }

    /// The override of `bot` here, if any.
    pub(crate) fn override_of(&self, bot: &str) -> Option<TriggerOverride> {
        lock(&self.overrides).get(bot).copied()
    }

    /// The worker slot of `bot` here.
    pub(crate) fn slot(&self, bot: &Arc<str>) -> Arc<Slot> {
        lock(&self.slots)
            .entry(bot.clone())
            .or_insert_with(|| Arc::new(Slot::new(bot.clone(), &self.roster())))
            .clone()
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is a single insert, remove or replace: a poisoned lock
    // still holds consistent data.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ThreadRunner {
    /// A builder over `store` for the participants of `roster`.
    pub fn builder(store: Arc<dyn ThreadStore>, roster: Roster) -> ThreadRunnerBuilder {
        ThreadRunnerBuilder {
            store,
            roster,
            bots: HashMap::new(),
            policy: Policy::default(),
            gate: Arc::new(TopicGate),
            max_turns: DEFAULT_MAX_TURNS,
            chunk_interval: DEFAULT_CHUNK_INTERVAL,
            recent: DEFAULT_RECENT,
            stale_after: Duration::ZERO,
            cancel: CancellationToken::new(),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ThreadStore> {
        &self.inner.store
    }

    /// The roster (without per-thread overrides).
    pub fn roster(&self) -> &Roster {
        &self.inner.roster
    }

    /// Starts following `thread` with a bare thread context (its id).
    pub async fn follow(&self, thread: &ThreadId) -> Result<(), ChatError> {
        self.follow_with(thread, ThreadContext::new(thread.as_str()))
            .await
    }

    /// Starts following `thread`: resumes it (closes open turns as
    /// interrupted, schedules the wakes still owed), then answers every new
    /// entry. Returns once the resume is scheduled. Following a thread
    /// already followed only updates its context.
    pub async fn follow_with(
        &self,
        thread: &ThreadId,
        context: ThreadContext,
    ) -> Result<(), ChatError> {
        let state = self.thread_state(thread);
        *lock(&state.context) = context;
        if state.following.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        match follow::start(self.inner.clone(), state.clone()).await {
            Ok(handle) => {
                lock(&self.inner.followers).push(handle);
                Ok(())
            }
            Err(e) => {
                state.following.store(false, Ordering::SeqCst);
                Err(e.into())
            }
        }
    }

    /// Follows every thread the store lists (a restart: each is resumed).
    pub async fn follow_all(&self) -> Result<Vec<ThreadId>, ChatError> {
        let threads = self.inner.store.list_threads().await?;
        for thread in &threads {
            self.follow(thread).await?;
        }
        Ok(threads)
    }

    /// Sets how `bot` wakes on `thread` only (mode, mute, hourly cap), from
    /// the next entry on.
    pub fn set_override(&self, thread: &ThreadId, bot: &str, value: TriggerOverride) {
        let state = self.thread_state(thread);
        let mut overrides = lock(&state.overrides);
        overrides.insert(Arc::from(bot), value);
        *lock(&state.roster) = effective_roster(&self.inner.roster, &overrides);
    }

    /// Removes the override of `bot` on `thread`.
    pub fn clear_override(&self, thread: &ThreadId, bot: &str) {
        let state = self.thread_state(thread);
        let mut overrides = lock(&state.overrides);
        overrides.remove(bot);
        *lock(&state.roster) = effective_roster(&self.inner.roster, &overrides);
    }

    /// What the runner does, as it does it.
    pub fn notices(&self) -> broadcast::Receiver<RunnerNotice> {
        self.inner.notices.subscribe()
    }

    /// Waits until the runner has nothing left to do: every followed thread
    /// dispatched up to the store's tip, no gate call, no turn running or
    /// pending. (Another runner over the same store may still be writing.)
    pub async fn idle(&self) -> Result<(), ChatError> {
        let mut tick = self.inner.activity.tick.subscribe();
        loop {
            tick.borrow_and_update();
            if self.quiet().await? {
                return Ok(());
            }
            if self.inner.cancel.is_cancelled() {
                return Ok(());
            }
            tokio::select! {
                changed = tick.changed() => if changed.is_err() { return Ok(()) },
                () = self.inner.cancel.cancelled() => return Ok(()),
            }
        }
    }

    /// Whether nothing is left to do right now.
    ///
    /// The order of the checks is what makes the answer right. A follower
    /// counts a wake's work as busy *before* it marks the entry processed, so
    /// once every followed thread is processed up to the tips read here, the
    /// work of those entries is either counted or done; reading the busy
    /// count only then sees it. Work that finished may have appended more, so
    /// the tips must still be the same afterwards. (Checking the busy count
    /// first would race: zero before a new entry is picked up, then the entry
    /// processed, and its turn counted, by the time the tips are compared.)
    async fn quiet(&self) -> Result<bool, ChatError> {
        let Some(tips) = self.tips_if_processed().await? else {
            return Ok(false);
        };
        if self.inner.activity.busy.load(Ordering::SeqCst) != 0 {
            return Ok(false);
        }
        for (thread, tip) in tips {
            if self.inner.store.last_seq(&thread).await? != tip {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The tips of the followed threads, if each is processed up to its tip.
    async fn tips_if_processed(&self) -> Result<Option<Vec<(ThreadId, u64)>>, ChatError> {
        let threads: Vec<Arc<ThreadState>> = lock(&self.inner.threads)
            .values()
            .filter(|t| t.following.load(Ordering::SeqCst))
            .cloned()
            .collect();
        let mut tips = Vec::with_capacity(threads.len());
        for t in threads {
            let tip = self.inner.store.last_seq(&t.id).await?;
            if t.processed.load(Ordering::SeqCst) < tip {
                return Ok(None);
            }
            tips.push((t.id.clone(), tip));
        }
        Ok(Some(tips))
    }

    /// Stops: running turns are cancelled and closed as
    /// [`INTERRUPTED`](crate::INTERRUPTED) (a restart answers them again),
    /// pending wakes are dropped, followers stop. Returns when all of it is
    /// done. The store stays open.
    pub async fn shutdown(&self) {
        self.inner.cancel.cancel();
        let followers = std::mem::take(&mut *lock(&self.inner.followers));
        for f in followers {
            let _ = f.await;
        }
        let mut tick = self.inner.activity.tick.subscribe();
        while self.inner.activity.busy.load(Ordering::SeqCst) > 0 {
            if tick.changed().await.is_err() {
                break;
            }
        }
    }

    fn thread_state(&self, thread: &ThreadId) -> Arc<ThreadState> {
        lock(&self.inner.threads)
            .entry(thread.clone())
            .or_insert_with(|| {
                Arc::new(ThreadState::new(thread.clone(), self.inner.roster.clone()))
            })
            .clone()
    }
}
