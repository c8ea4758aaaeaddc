//! The `ThreadRunner` and its builder: the public surface of the
//! multi-party runner.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use roundtable_dispatch::{BotGate, Policy, Roster, ThreadContext, TopicGate};
use roundtable_skills::{ReadSkill, Skill, SkillReader, skills_prompt_section};
use roundtable_thread_stream::{ThreadId, ThreadStore};
use roundtable_tools::{LiveTools, ToolSource};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::core::{BotRun, Observe, RunnerCore, RunnerSettings};
use super::follow;
use super::notice::RunnerNotice;
use super::observer::EntryObserver;
use super::overrides::TriggerOverride;
use super::worker::bot_target;
use crate::compaction::{CompactionConfig, CompactionReport, Compactor};
use crate::error::ChatError;
use crate::lifecycle::TurnLeases;
use crate::live_loop::LiveTurnLoop;
use crate::sync::lock;
use crate::turn::TurnLoop;

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
    bots: HashMap<Arc<str>, BotSetup>,
    policy: Policy,
    gate: Arc<dyn BotGate>,
    max_concurrent_turns: usize,
    chunk_interval: Duration,
    recent_entries: usize,
    interrupt_open_turns_after: Duration,
    leases: Option<TurnLeases>,
    cancellation: CancellationToken,
    compaction: Option<CompactionConfig>,
    observer: Option<Arc<dyn EntryObserver>>,
}

/// A bot as the builder collects it.
struct BotSetup {
    turns: TurnLoop,
    sources: Vec<Arc<dyn ToolSource>>,
    /// The turn loop's registry with the sources, checked for clashes.
    live: Option<LiveTools>,
    system_suffix: Option<Arc<str>>,
    skills: Option<Arc<str>>,
}

impl BotSetup {
    /// Checks the bot's tools and sources for a shared name, and keeps
    /// them together.
    fn join_sources(&mut self) -> Result<(), ChatError> {
        if !self.sources.is_empty() {
            let base = (**self.turns.tools()).clone();
            self.live = Some(LiveTools::new(base, self.sources.clone())?);
        }
        Ok(())
    }
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
            BotSetup {
                turns,
                sources: Vec::new(),
                live: None,
                system_suffix: None,
                skills: None,
            },
        );
        self
    }

    /// Gives bot `id` tools whose list may change while the runner lives
    /// (an `McpToolset`), beside the tools of its turn loop, under that
    /// registry's approval policy and output limit. Each of the bot's turns
    /// starts with the tools the sources list then; the first after a
    /// change is announced with [`RunnerNotice::ToolsChanged`]. Call it
    /// after [`bot`](Self::bot); an error when a name is already taken (a
    /// clash that appears later fails the bot's turns with a
    /// [`RunnerNotice::Error`] until it goes).
    pub fn tool_source(mut self, id: &str, source: Arc<dyn ToolSource>) -> Result<Self, ChatError> {
        if let Some(bot) = self.bots.get_mut(id) {
            bot.sources.push(source);
            bot.join_sources()?;
        }
        Ok(self)
    }

    /// Appends `text` to the system prompt of bot `id` (after the persona,
    /// thread context and roster): a skills catalogue, house rules. Call it
    /// after [`bot`](Self::bot).
    pub fn system_suffix(mut self, id: &str, text: impl Into<Arc<str>>) -> Self {
        if let Some(bot) = self.bots.get_mut(id) {
            bot.system_suffix = Some(text.into());
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
            bot.join_sources()?;
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
        self.max_concurrent_turns = n.max(1);
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
        self.recent_entries = n.max(1);
        self
    }

    /// An open turn (a `turn.started` with no end) found when a thread is
    /// followed counts as interrupted once it is at least this old (default
    /// zero: any open turn, which is right when one runner serves the
    /// thread). With several runners over one store, set it above the
    /// turns' timeout so that a runner joining late leaves the others' live
    /// turns alone.
    pub fn interrupt_open_turns_after(mut self, age: Duration) -> Self {
        self.interrupt_open_turns_after = age;
        self
    }

    /// Holds every running bot turn by a lease in `leases` (one per thread
    /// and bot), so that runners in several processes over one store share
    /// the work safely: a runner renews the lease while its turn runs; when
    /// its process dies, the lease lapses, another runner closes the turn
    /// as interrupted and the wake is answered again by one of them.
    /// Following a thread then closes only the open turns whose lease it
    /// can take ([`interrupt_open_turns_after`](Self::interrupt_open_turns_after)
    /// no longer applies).
    pub fn leases(mut self, leases: TurnLeases) -> Self {
        self.leases = Some(leases);
        self
    }

    /// Ties the runner to a host's cancellation token: cancelling it shuts
    /// the runner down as [`shutdown`](ThreadRunner::shutdown) does.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// Compacts each bot's conversation when it nears the bot's model's
    /// window (and after a context overflow): the older part of the bot's
    /// view is summarised into a `compaction` entry of the bot, which only
    /// that bot's projection applies. [`ThreadRunner::compact`] compacts on
    /// demand.
    pub fn compaction(mut self, config: CompactionConfig) -> Self {
        self.compaction = Some(config);
        self
    }

    /// Shows every entry of the followed threads to `observer`, in order,
    /// before it is dispatched (see [`EntryObserver`]).
    pub fn observer(mut self, observer: Arc<dyn EntryObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The runner. It follows no thread until told to.
    pub fn build(self) -> ThreadRunner {
        let settings = RunnerSettings {
            store: self.store,
            roster: self.roster,
            bots: self
                .bots
                .into_iter()
                .map(|(id, bot)| {
                    let run = BotRun {
                        turns: LiveTurnLoop::new(bot.turns, bot.live),
                        system_suffix: bot.system_suffix,
                        skills: bot.skills,
                    };
                    (id, run)
                })
                .collect(),
            policy: self.policy,
            gate: self.gate,
            chunk_interval: self.chunk_interval,
            recent_entries: self.recent_entries,
            interrupt_open_turns_after: self.interrupt_open_turns_after,
            leases: self.leases,
            compaction: self.compaction.map(Compactor::new),
            observer: self.observer.map(|observer| -> Observe {
                Box::new(move |core, entry| {
                    observer.observe(&ThreadRunner::of(core.clone()), entry)
                })
            }),
        };
        ThreadRunner {
            core: Arc::new(RunnerCore::new(
                settings,
                self.max_concurrent_turns,
                self.cancellation,
            )),
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
///    With [leases](ThreadRunnerBuilder::leases), the bot's lease on the
///    thread is taken first and held while the turn runs.
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
/// turns are closed with `turn.failed {reason: "interrupted"}` (with
/// leases, only those whose lease lapsed) and the wakes still owed (no
/// turn of the bot after them, or only interrupted ones, retried once) are
/// answered.
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
///     EntryBody::Assistant(a) => Some(a.message().text()),
///     _ => None,
/// });
/// assert_eq!(answer.as_deref(), Some("It is in /reports/q3."));
/// runner.shutdown().await;
/// # });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ThreadRunner {
    core: Arc<RunnerCore>,
}

impl ThreadRunner {
    /// The runner whose shared state is `core` (for the follower's
    /// observer calls).
    pub(super) fn of(core: Arc<RunnerCore>) -> Self {
        Self { core }
    }
}

impl std::fmt::Debug for ThreadRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let settings = &self.core.settings;
        f.debug_struct("ThreadRunner")
            .field("bots", &settings.bots.keys().collect::<Vec<_>>())
            .field("policy", &settings.policy)
            .finish_non_exhaustive()
    }
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
            max_concurrent_turns: DEFAULT_MAX_TURNS,
            chunk_interval: DEFAULT_CHUNK_INTERVAL,
            recent_entries: DEFAULT_RECENT,
            interrupt_open_turns_after: Duration::ZERO,
            leases: None,
            cancellation: CancellationToken::new(),
            compaction: None,
            observer: None,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ThreadStore> {
        &self.core.settings.store
    }

    /// The roster (without per-thread rosters and overrides).
    pub fn roster(&self) -> &Roster {
        &self.core.settings.roster
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
        let state = self.core.thread_state(thread);
        *lock(&state.context) = context;
        if state.following.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        match follow::start(self.core.clone(), state.clone()).await {
            Ok(handle) => {
                self.core.add_follower(handle);
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
        let threads = self.core.settings.store.list_threads().await?;
        for thread in &threads {
            self.follow(thread).await?;
        }
        Ok(threads)
    }

    /// Sets how `bot` wakes on `thread` only (mode, mute, hourly cap), from
    /// the next entry on.
    pub fn set_override(&self, thread: &ThreadId, bot: &str, value: TriggerOverride) {
        self.core
            .thread_state(thread)
            .set_override(bot, Some(value));
    }

    /// Removes the override of `bot` on `thread`.
    pub fn clear_override(&self, thread: &ThreadId, bot: &str) {
        self.core.thread_state(thread).set_override(bot, None);
    }

    /// Gives `thread` a roster of its own instead of the runner's, from the
    /// next entry on: a host whose threads hold different people (rooms)
    /// builds the runner with every bot it runs and tells each thread who
    /// is in it. Only the bots of the thread's roster wake there, and its
    /// overrides still apply. Set it before [`follow`](Self::follow), so
    /// that the resume sees it. A bot's view made before a change keeps
    /// the labels of the roster it was made with (a newcomer is labelled
    /// by its id).
    pub fn set_roster(&self, thread: &ThreadId, roster: Roster) {
        self.core.thread_state(thread).set_base(roster);
    }

    /// Compacts `bot`'s conversation on `thread` now, stressing `focus` in
    /// the summary: the older part of its view becomes a `compaction`
    /// entry, the newest part stays in full. Waits for a compaction of the
    /// same bot and thread already running. Needs
    /// [`compaction`](ThreadRunnerBuilder::compaction).
    pub async fn compact(
        &self,
        thread: &ThreadId,
        bot: &str,
        focus: Option<&str>,
    ) -> Result<CompactionReport, ChatError> {
        let settings = &self.core.settings;
        let compactor = settings
            .compaction
            .as_ref()
            .ok_or(ChatError::CompactionOff)?;
        let (id, run) = settings
            .bots
            .get_key_value(bot)
            .ok_or_else(|| ChatError::UnknownBot(bot.to_string()))?;
        let state = self.core.thread_state(thread);
        let slot = state.slot(id);
        let target = bot_target(&self.core, &state, &slot);
        Ok(compactor
            .compact(
                &target,
                &run.turns.current(),
                &*settings.store,
                focus,
                &self.core.cancel,
            )
            .await?)
    }

    /// What the runner does, as it does it.
    pub fn notices(&self) -> broadcast::Receiver<RunnerNotice> {
        self.core.notices()
    }

    /// Waits until the runner has nothing left to do: every followed thread
    /// dispatched up to the store's tip, no gate call, no turn running or
    /// pending. (Another runner over the same store may still be writing.)
    pub async fn idle(&self) -> Result<(), ChatError> {
        let mut tick = self.core.activity().ticks();
        loop {
            tick.borrow_and_update();
            if self.quiet().await? {
                return Ok(());
            }
            if self.core.cancel.is_cancelled() {
                return Ok(());
            }
            tokio::select! {
                changed = tick.changed() => if changed.is_err() { return Ok(()) },
                () = self.core.cancel.cancelled() => return Ok(()),
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
        if self.core.activity().busy() != 0 {
            return Ok(false);
        }
        for (thread, tip) in tips {
            if self.core.settings.store.last_seq(&thread).await? != tip {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The tips of the followed threads, if each is processed up to its tip.
    async fn tips_if_processed(&self) -> Result<Option<Vec<(ThreadId, u64)>>, ChatError> {
        let threads = self.core.followed_threads();
        let mut tips = Vec::with_capacity(threads.len());
        for t in threads {
            let tip = self.core.settings.store.last_seq(&t.id).await?;
            if t.processed.load(Ordering::SeqCst) < tip {
                return Ok(None);
            }
            tips.push((t.id.clone(), tip));
        }
        Ok(Some(tips))
    }

    /// Stops: running turns are cancelled and closed as
    /// [`INTERRUPTED`](roundtable_thread_stream::INTERRUPTED) (a restart answers them again),
    /// pending wakes are dropped, followers stop. Returns when all of it is
    /// done. The store stays open.
    pub async fn shutdown(&self) {
        self.core.cancel.cancel();
        for follower in self.core.take_followers() {
            let _ = follower.await;
        }
        let mut tick = self.core.activity().ticks();
        while self.core.activity().busy() > 0 {
            if tick.changed().await.is_err() {
                break;
            }
        }
    }
}
