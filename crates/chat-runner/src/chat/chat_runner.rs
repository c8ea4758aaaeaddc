//! The one-on-one `ChatRunner`: session keys to agent sessions, history,
//! per-key serialisation, and a thread per session in the store.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use roundtable_dispatch::compaction::project_view;
use roundtable_providers::{
    Message, Model, ModelRef, Provider, RoleModels, StreamOptions, ThinkingLevel, UserMessage,
    now_millis,
};
use roundtable_skills::{ReadSkill, Skill, load_agent_context};
use roundtable_thread_stream::{Entry, EntryBody, Expect, NewEntry, Signal, ThreadId, ThreadStore};
use roundtable_tools::{LiveTools, ToolRegistry, ToolSource, ToolsChange};
use tokio_util::sync::CancellationToken;

use super::history::{ChatPair, HistoryWindow, pair_messages, pairs_from_entries};
use super::prompt::{DEFAULT_CHAT_INSTRUCTIONS, SCREENING_FLAGS_INSTRUCTIONS, chat_system_prompt};
use super::roster::session_roster;
use super::session_index::SessionIndex;
use super::turn_result::{TURN_RESULT_SIGNAL, TurnResultRecord};
use crate::approval::{Approver, DenyAll};
use crate::compaction::{
    CompactionConfig, CompactionError, CompactionReport, CompactionTarget, Compactor, StoreView,
};
use crate::error::ChatError;
use crate::event::{EventSink, NullSink, TurnEvent};
use crate::lifecycle::{TurnLedger, TurnWriter, WriterSink, turn_interrupted, turn_started};
use crate::limits::Limits;
use crate::live_loop::LiveTurnLoop;
use crate::sync::lock;
use crate::turn::{TurnLoop, TurnOutcome, TurnRequest};

/// The role whose model and thinking level the chat surface uses.
pub const CHAT_ROLE: &str = "chat";

/// The default id of the thread mapping session keys to sessions.
pub const DEFAULT_INDEX_THREAD: &str = "chat-sessions";

/// A turn running now, as [`ChatRunner::status`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningTurn {
    /// The surface's key (a chat thread id).
    pub session_key: String,
    /// The agent session (and its thread id).
    pub session_id: Arc<str>,
    /// The turn's id.
    pub turn_id: Arc<str>,
    /// When it started, in Unix milliseconds.
    pub started_at: i64,
}

/// What a [`ChatRunner::turn`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatTurn {
    /// The agent session the turn ran in.
    pub session_id: Arc<str>,
    /// The turn's outcome (answer, finish reason, messages, usage).
    pub outcome: TurnOutcome,
}

/// Per-turn options of [`ChatRunner::turn_with`].
#[derive(Clone, Default)]
pub struct TurnOptions {
    /// Who wrote the prompt (the `chat` entry's author); the runner's user
    /// author when `None`.
    pub author: Option<Arc<str>>,
    /// Cancels the turn.
    pub cancel: CancellationToken,
    /// Receives the turn's events.
    pub sink: Option<Arc<dyn EventSink>>,
}

/// Builds a [`ChatRunner`].
pub struct ChatRunnerBuilder {
    provider: Arc<dyn Provider>,
    store: Arc<dyn ThreadStore>,
    model: Option<Model>,
    thinking: ThinkingLevel,
    stream_options: StreamOptions,
    system_prompt: Option<String>,
    chat_instructions: String,
    screening_flags: bool,
    agent_context_dir: Option<PathBuf>,
    skills: Vec<Skill>,
    tools: ToolRegistry,
    tool_sources: Vec<Arc<dyn ToolSource>>,
    approver: Arc<dyn Approver>,
    limits: Limits,
    history: HistoryWindow,
    index_thread: String,
    agent_name: Arc<str>,
    user_name: Arc<str>,
    compaction: Option<CompactionConfig>,
}

impl ChatRunnerBuilder {
    /// Sets the model (instead of role resolution).
    pub fn model(mut self, model: Model) -> Self {
        self.model = Some(model);
        self
    }

    /// Sets the thinking level.
    pub fn thinking(mut self, thinking: ThinkingLevel) -> Self {
        self.thinking = thinking;
        self
    }

    /// Resolves the model and thinking level of the `chat` role with the
    /// providers' role resolution (role, default, environment); `make`
    /// turns the resolved `provider/id` into a [`Model`]. Leaves the model
    /// unset when the role resolves to none.
    pub fn roles(mut self, roles: &RoleModels, make: impl FnOnce(ModelRef) -> Model) -> Self {
        if let Some(model) = roles.model(CHAT_ROLE) {
            self.model = Some(make(model));
        }
        self.thinking = roles.thinking(CHAT_ROLE);
        self
    }

    /// Sets the stream options of every model call (output limit, key...);
    /// the thinking level is set by [`thinking`](Self::thinking).
    pub fn stream_options(mut self, options: StreamOptions) -> Self {
        self.stream_options = options;
        self
    }

    /// Uses this system prompt as is, instead of building one from the
    /// agent context, the chat instructions and the skills catalogue.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Replaces the chat instructions of the built system prompt (default
    /// [`DEFAULT_CHAT_INSTRUCTIONS`]): the host's policy for its chat, such
    /// as where to send requests the chat's tools cannot carry out.
    pub fn chat_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.chat_instructions = instructions.into();
        self
    }

    /// Whether the built system prompt tells the model that messages
    /// prefixed `[flag: ...]` were flagged by the host's screening and are
    /// data ([`SCREENING_FLAGS_INSTRUCTIONS`], after the chat instructions).
    /// Off by default: only a host that screens its messages marks them.
    pub fn screening_flags(mut self, screening_flags: bool) -> Self {
        self.screening_flags = screening_flags;
        self
    }

    /// The `agent-context/` folder whose `*.md` files open the system prompt
    /// (read once, at build).
    pub fn agent_context_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.agent_context_dir = Some(dir.into());
        self
    }

    /// The curated chat skills: listed in the prompt's catalogue and offered
    /// through the `read_skill` tool.
    pub fn skills(mut self, skills: impl IntoIterator<Item = Skill>) -> Self {
        self.skills.extend(skills);
        self
    }

    /// More tools (merged with `read_skill`; names must be unique). The
    /// registry's approval policy and output limit apply to every tool.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Adds tools whose list may change while the runner lives (an
    /// `McpToolset`): each turn starts with the tools the sources list
    /// then, and the first turn after a change reports it with a
    /// [`TurnEvent::ToolsChanged`]. The registry of
    /// [`tools`](Self::tools) keeps its approval policy and output limit
    /// over them. A name already taken is an error at
    /// [`build`](Self::build), or fails the turn that first sees it.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.tool_sources.push(source);
        self
    }

    /// Wires the read-only GitHub toolset.
    #[cfg(feature = "github")]
    pub fn github(mut self, github: &roundtable_tools::github::GitHub) -> Result<Self, ChatError> {
        self.tools.register_all(github.toolset())?;
        Ok(self)
    }

    /// Sets the approver of gated calls (default: deny them all).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// Sets the limits (default: 8 rounds, 120 s).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the history window (default: the last 50 pairs).
    pub fn history(mut self, history: HistoryWindow) -> Self {
        self.history = history;
        self
    }

    /// Replaces the pair window by the agent's projection of the whole
    /// session thread (tool traffic included), compacted when a request
    /// nears the model's window or the model refuses it as too large: the
    /// older part becomes a summary in a `compaction` entry, the newest
    /// part stays in full. [`ChatRunner::compact`] compacts on demand.
    pub fn compaction(mut self, config: CompactionConfig) -> Self {
        self.compaction = Some(config);
        self
    }

    /// Sets the id of the session index thread.
    pub fn index_thread(mut self, id: impl Into<String>) -> Self {
        self.index_thread = id.into();
        self
    }

    /// The author of the agent's entries (default `assistant`).
    pub fn agent_name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.agent_name = name.into();
        self
    }

    /// The default author of prompts (default `user`).
    pub fn user_name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.user_name = name.into();
        self
    }

    /// Builds the system prompt and the tools, and reads the session index
    /// from the store.
    pub async fn build(self) -> Result<ChatRunner, ChatError> {
        let model = self.model.ok_or(ChatError::NoModel)?;
        let system_prompt = match self.system_prompt {
            Some(prompt) => prompt,
            None => {
                let context = match &self.agent_context_dir {
                    Some(dir) => load_agent_context(dir)?,
                    None => String::new(),
                };
                let mut instructions = self.chat_instructions;
                if self.screening_flags {
                    instructions.push_str("\n\n");
                    instructions.push_str(SCREENING_FLAGS_INSTRUCTIONS);
                }
                chat_system_prompt(&context, &instructions, &self.skills)
            }
        };
        let mut tools = self.tools;
        let read_skill = ReadSkill::new(&self.skills);
        if read_skill.names().next().is_some() {
            tools.register(read_skill)?;
        }
        let mut options = self.stream_options;
        options.thinking = self.thinking;
        let live = match self.tool_sources.is_empty() {
            true => None,
            false => Some(LiveTools::new(tools.clone(), self.tool_sources)?),
        };
        let turns = TurnLoop::new(self.provider, model)
            .with_tools(Arc::new(tools))
            .with_approver(self.approver)
            .with_limits(self.limits)
            .with_options(options);
        let turns = LiveTurnLoop::new(turns, live);

        let index = ThreadId::new(&self.index_thread)?;
        let sessions = SessionIndex::load(&*self.store, index).await?;
        Ok(ChatRunner {
            core: Arc::new(ChatCore {
                turns,
                system_prompt,
                store: self.store,
                sessions,
                agent: self.agent_name,
                user: self.user_name,
                history: self.history,
                compactor: self.compaction.map(Compactor::new),
                slots: Mutex::new(HashMap::new()),
                running: Mutex::new(BTreeMap::new()),
            }),
        })
    }
}

/// The low-latency one-on-one chat runner: one agent session per session
/// key (a chat thread), turns serialised per key, history replayed as
/// prompt/answer pairs, and every turn's full trace in the session's thread.
///
/// - [`turn`](Self::turn) resolves the key to its session (minting one for
///   a new key), replays the last pairs (50 by default, see
///   [`HistoryWindow`]), runs the [`TurnLoop`] and stores the trace (see
///   the crate docs for the entries).
/// - Turns on one key run strictly one after another, in arrival order;
///   different keys run in parallel; a turn that fails, panics or is dropped
///   releases the next.
/// - [`reset`](Self::reset) ends a key's session: its next turn starts a
///   fresh session (a new thread) with empty history.
/// - [`status`](Self::status) lists the turns running now.
///
/// The key-to-session map lives in an index thread of the same store, so a
/// runner rebuilt over the same store (a JSONL folder) finds its sessions
/// and their history again.
///
/// ```
/// use std::sync::Arc;
/// use roundtable_chat_runner::ChatRunner;
/// use roundtable_providers::{
///     AssistantBlock, AssistantMessage, Model, ScriptedProvider, OPENAI_COMPLETIONS,
/// };
/// use roundtable_thread_stream::MemoryStore;
///
/// let mut reply = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 0);
/// reply.content.push(AssistantBlock::text("Hi! How can I help?"));
/// let provider = Arc::new(ScriptedProvider::new([reply]));
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let runner = ChatRunner::builder(provider, Arc::new(MemoryStore::new()))
///     .model(Model::new(OPENAI_COMPLETIONS, "scripted", "m", ""))
///     .build()
///     .await
///     .unwrap();
/// let turn = runner.turn("slack-C1-1700000000.1", "hello").await.unwrap();
/// assert_eq!(turn.outcome.text, "Hi! How can I help?");
/// assert_eq!(runner.session_id("slack-C1-1700000000.1"), Some(turn.session_id));
/// # });
/// ```
#[derive(Clone)]
pub struct ChatRunner {
    core: Arc<ChatCore>,
}

impl std::fmt::Debug for ChatRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatRunner")
            .field("turns", &self.core.turns.current())
            .field("index", self.core.sessions.thread())
            .finish_non_exhaustive()
    }
}

/// What every clone of a [`ChatRunner`] shares.
struct ChatCore {
    /// The turn loop; its tools move between turns when the host gave
    /// tool sources.
    turns: LiveTurnLoop,
    system_prompt: String,
    store: Arc<dyn ThreadStore>,
    sessions: SessionIndex,
    agent: Arc<str>,
    user: Arc<str>,
    history: HistoryWindow,
    /// Compacts the sessions' conversations, when on (the history is then
    /// the projection of the session thread, not the pair window).
    compactor: Option<Compactor>,
    /// Key -> the lock that serialises its turns, holding the cached pairs.
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<KeySlot>>>>,
    running: Mutex<BTreeMap<Arc<str>, RunningTurn>>,
}

/// The state behind one key's lock: the session's pairs once read.
#[derive(Default)]
struct KeySlot {
    cached: Option<(Arc<str>, Vec<ChatPair>)>,
}

/// Hands the turn's events to its writer (all but text deltas, which a chat
/// session does not store) and every event to the host's sink.
struct Tee<'a> {
    writer: WriterSink,
    host: &'a dyn EventSink,
}

impl EventSink for Tee<'_> {
    fn emit(&self, event: TurnEvent) {
        if !matches!(event, TurnEvent::OutputDelta { .. }) {
            self.writer.emit(event.clone());
        }
        self.host.emit(event);
    }
}

/// A session's history as a turn starts: the replayable pairs, the
/// agent's ledger of turns and the thread's entries (the ledger and the
/// entries are empty when the pairs came from the cache).
struct SessionHistory {
    pairs: Vec<ChatPair>,
    ledger: TurnLedger,
    entries: Vec<Entry>,
}

/// A turn of a [`ChatRunner`] from its opening entries to its closing
/// ones: its session, thread, id, start and prompt, and the loop it runs on.
struct OpenTurn<'a> {
    runner: &'a ChatRunner,
    turns: Arc<TurnLoop>,
    session_id: Arc<str>,
    thread: ThreadId,
    turn_id: Arc<str>,
    started_at: i64,
    prompt: Arc<str>,
}

impl<'a> OpenTurn<'a> {
    /// Lists the turn as running under `key` until the guard drops.
    fn track(&self, key: &str) -> RunningGuard<'a> {
        let running = &self.runner.core.running;
        lock(running).insert(
            self.turn_id.clone(),
            RunningTurn {
                session_key: key.to_string(),
                session_id: self.session_id.clone(),
                turn_id: self.turn_id.clone(),
                started_at: self.started_at,
            },
        );
        RunningGuard {
            running,
            turn: self.turn_id.clone(),
        }
    }
}

impl OpenTurn<'_> {
    /// Appends the turn's opening entries: `turn.interrupted` for the turns
    /// a stopped process left open (per `ledger`), the prompt by `author`
    /// and `turn.started`. Returns them as stored.
    async fn open(&self, ledger: &TurnLedger, author: Arc<str>) -> Result<Vec<Entry>, ChatError> {
        let core = &*self.runner.core;
        // Turns a stopped process left open are closed first.
        let mut opening: Vec<NewEntry> = ledger
            .open()
            .map(|open| turn_interrupted(&core.agent, &open.turn))
            .collect();
        opening.extend([
            NewEntry::new(author, EntryBody::chat(self.prompt.clone())).at(self.started_at),
            turn_started(&core.agent, &self.turn_id, None).at(self.started_at),
        ]);
        Ok(core
            .store
            .append(&self.thread, Expect::Any, opening)
            .await?)
    }

    /// The turn's request: the windowed pairs and the prompt, or with
    /// compaction the projection of the whole thread (`opened` included)
    /// and the compaction step.
    fn request(
        &self,
        history: &mut SessionHistory,
        opened: Vec<Entry>,
        writer: &TurnWriter,
    ) -> TurnRequest {
        let core = &*self.runner.core;
        let request = match &core.compactor {
            None => {
                let pairs = core.history.select(&history.pairs);
                let mut messages = pair_messages(pairs, self.turns.model());
                messages.push(Message::from(UserMessage::text(
                    self.prompt.clone(),
                    self.started_at,
                )));
                TurnRequest::new(messages)
            }
            Some(compactor) => {
                let entries = &mut history.entries;
                entries.extend(opened);
                let target = self.runner.target(&self.thread, entries);
                let messages = project_view(&core.agent, entries, &target.roster);
                TurnRequest::new(messages).with_compaction(compactor.turn_step(
                    target,
                    &self.turns,
                    writer.sink(),
                ))
            }
        };
        request
            .with_system_prompt(core.system_prompt.clone())
            .with_turn_id(self.turn_id.clone())
    }

    /// Runs the turn, its events going to `writer` and to `sink`, the
    /// tools' change (if any) first.
    async fn run(
        &self,
        request: TurnRequest,
        cancel: CancellationToken,
        sink: &dyn EventSink,
        writer: &TurnWriter,
        tools_change: Option<ToolsChange>,
    ) -> TurnOutcome {
        let tee = Tee {
            writer: writer.sink(),
            host: sink,
        };
        if let Some(change) = tools_change {
            tee.emit(TurnEvent::ToolsChanged {
                turn: self.turn_id.clone(),
                change,
            });
        }
        self.turns.run(request, cancel, &tee).await
    }

    /// Closes the turn in the thread with its result record, and caches the
    /// session's pairs in `slot`, with the turn's own when it is
    /// replayable.
    async fn close(
        self,
        slot: &mut KeySlot,
        writer: TurnWriter,
        outcome: TurnOutcome,
        mut pairs: Vec<ChatPair>,
    ) -> Result<ChatTurn, ChatError> {
        let core = &*self.runner.core;
        let model = self.turns.model();
        let record = TurnResultRecord::new(&outcome, format!("{}/{}", model.provider, model.id));
        let result = Signal::encode(TURN_RESULT_SIGNAL, &record)?;
        // A failed append leaves the turn open; the session's next turn
        // closes it.
        writer
            .end(
                &outcome,
                vec![NewEntry::new(core.agent.clone(), EntryBody::Signal(result))],
            )
            .await?;
        if record.replayable() {
            pairs.push(ChatPair {
                prompt: self.prompt,
                answer: Arc::from(outcome.text.as_str()),
                at: self.started_at,
            });
        }
        slot.cached = Some((self.session_id.clone(), pairs));
        Ok(ChatTurn {
            session_id: self.session_id,
            outcome,
        })
    }
}

/// Removes a turn from the running list however the turn ends.
struct RunningGuard<'a> {
    running: &'a Mutex<BTreeMap<Arc<str>, RunningTurn>>,
    turn: Arc<str>,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        lock(self.running).remove(&self.turn);
    }
}

impl ChatRunner {
    /// A builder over `provider` and `store`.
    pub fn builder(provider: Arc<dyn Provider>, store: Arc<dyn ThreadStore>) -> ChatRunnerBuilder {
        ChatRunnerBuilder {
            provider,
            store,
            model: None,
            thinking: ThinkingLevel::Off,
            stream_options: StreamOptions::default(),
            system_prompt: None,
            chat_instructions: DEFAULT_CHAT_INSTRUCTIONS.to_string(),
            screening_flags: false,
            agent_context_dir: None,
            skills: Vec::new(),
            tools: ToolRegistry::new(),
            tool_sources: Vec::new(),
            approver: Arc::new(DenyAll),
            limits: Limits::default(),
            history: HistoryWindow::default(),
            index_thread: DEFAULT_INDEX_THREAD.to_string(),
            agent_name: Arc::from("assistant"),
            user_name: Arc::from("user"),
            compaction: None,
        }
    }

    /// The system prompt, built once at construction.
    pub fn system_prompt(&self) -> &str {
        &self.core.system_prompt
    }

    /// The turn loop (model, tools, limits) the last turn started with.
    pub fn turn_loop(&self) -> Arc<TurnLoop> {
        self.core.turns.current()
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ThreadStore> {
        &self.core.store
    }

    /// The active session of `key`, if it has one.
    pub fn session_id(&self, key: &str) -> Option<Arc<str>> {
        self.core.sessions.get(key)
    }

    /// The thread of a session id.
    pub fn session_thread(session_id: &str) -> Result<ThreadId, ChatError> {
        Ok(ThreadId::new(session_id)?)
    }

    /// The turns running now, oldest first.
    pub fn status(&self) -> Vec<RunningTurn> {
        let mut turns: Vec<_> = lock(&self.core.running).values().cloned().collect();
        turns.sort_by_key(|t| t.started_at);
        turns
    }

    /// Runs one turn for `prompt` on the session of `key`.
    pub async fn turn(&self, key: &str, prompt: &str) -> Result<ChatTurn, ChatError> {
        self.turn_with(key, prompt, TurnOptions::default()).await
    }

    /// Runs one turn with an author, a cancellation token and an event sink.
    pub async fn turn_with(
        &self,
        key: &str,
        prompt: &str,
        options: TurnOptions,
    ) -> Result<ChatTurn, ChatError> {
        let core = &*self.core;
        let slot = self.slot(key);
        let mut slot = slot.lock().await;
        // The tools of this turn: the sources' lists as they are now.
        let (turns, tools_change) = core.turns.for_turn().await?;

        let session_id = match self.session_id(key) {
            Some(id) => id,
            None => core.sessions.open(&*core.store, &core.agent, key).await?,
        };
        let thread = ThreadId::new(&*session_id)?;
        let mut history = self
            .session_history(&mut slot, &session_id, &thread)
            .await?;

        let turn = OpenTurn {
            runner: self,
            turns,
            session_id,
            thread,
            turn_id: Arc::from(uuid::Uuid::now_v7().to_string()),
            started_at: now_millis(),
            prompt: Arc::from(prompt),
        };
        let _running = turn.track(key);
        let author = options.author.unwrap_or_else(|| core.user.clone());
        let opened = turn.open(&history.ledger, author).await?;

        // Messages are stored as they complete, not when the turn ends.
        let writer = TurnWriter::start(
            core.store.clone(),
            turn.thread.clone(),
            core.agent.clone(),
            turn.turn_id.clone(),
            None,
        );
        let request = turn.request(&mut history, opened, &writer);
        let sink: Arc<dyn EventSink> = options.sink.unwrap_or_else(|| Arc::new(NullSink));
        let outcome = turn
            .run(request, options.cancel, &*sink, &writer, tools_change)
            .await;
        turn.close(&mut slot, writer, outcome, history.pairs).await
    }

    /// The history of the session a turn is about to run in. With
    /// compaction the whole thread is the history; else the pairs are
    /// cached in `slot` between turns (and taken from it here).
    async fn session_history(
        &self,
        slot: &mut KeySlot,
        session_id: &Arc<str>,
        thread: &ThreadId,
    ) -> Result<SessionHistory, ChatError> {
        let core = &*self.core;
        Ok(match slot.cached.take() {
            Some((cached_for, pairs)) if cached_for == *session_id && core.compactor.is_none() => {
                SessionHistory {
                    pairs,
                    ledger: TurnLedger::default(),
                    entries: Vec::new(),
                }
            }
            _ => {
                let entries = core.store.read_all(thread).await?;
                SessionHistory {
                    pairs: pairs_from_entries(&entries),
                    ledger: TurnLedger::read(&core.agent, &entries),
                    entries,
                }
            }
        })
    }

    /// The replayable history of `key`'s active session (all pairs, before
    /// windowing); empty without a session. Waits for a turn running on
    /// `key` to finish, like a turn would.
    pub async fn history(&self, key: &str) -> Result<Vec<ChatPair>, ChatError> {
        let slot = self.slot(key);
        let slot = slot.lock().await;
        let Some(session_id) = self.session_id(key) else {
            return Ok(Vec::new());
        };
        if let Some((cached_for, pairs)) = &slot.cached
            && *cached_for == session_id
        {
            return Ok(pairs.clone());
        }
        let thread = ThreadId::new(&*session_id)?;
        Ok(pairs_from_entries(
            &self.core.store.read_all(&thread).await?,
        ))
    }

    /// Deactivates `key`'s session (after any turn running on it): the next
    /// turn starts a new session, in a new thread, with empty history.
    /// Returns the session that was reset, if there was one.
    pub async fn reset(&self, key: &str) -> Result<Option<Arc<str>>, ChatError> {
        let slot = self.slot(key);
        let mut slot = slot.lock().await;
        let Some(session) = self.session_id(key) else {
            return Ok(None);
        };
        self.core
            .sessions
            .reset(&*self.core.store, &self.core.agent, key, &session)
            .await?;
        slot.cached = None;
        Ok(Some(session))
    }

    /// Compacts the conversation of `key`'s session now (after any turn
    /// running on it), stressing `focus` in the summary: the older part
    /// becomes a `compaction` entry, the newest part stays in full. Needs
    /// [`compaction`](ChatRunnerBuilder::compaction).
    pub async fn compact(
        &self,
        key: &str,
        focus: Option<&str>,
    ) -> Result<CompactionReport, ChatError> {
        let core = &*self.core;
        let compactor = core.compactor.as_ref().ok_or(ChatError::CompactionOff)?;
        let slot = self.slot(key);
        let _slot = slot.lock().await;
        let Some(session_id) = self.session_id(key) else {
            return Err(CompactionError::NothingToCompact.into());
        };
        let thread = ThreadId::new(&*session_id)?;
        let entries = core.store.read_all(&thread).await?;
        let target = self.target(&thread, &entries);
        let cancel = CancellationToken::new();
        Ok(compactor
            .compact(&target, &core.turns.current(), &*core.store, focus, &cancel)
            .await?)
    }

    /// What a compaction of a session works on: the agent's view of the
    /// session thread (all of it, in store order).
    fn target(&self, thread: &ThreadId, entries: &[Entry]) -> CompactionTarget {
        let core = &*self.core;
        CompactionTarget {
            thread: thread.clone(),
            bot: core.agent.clone(),
            roster: session_roster(&core.agent, entries),
            view: Arc::new(StoreView::new(core.store.clone(), thread.clone())),
        }
    }

    fn slot(&self, key: &str) -> Arc<tokio::sync::Mutex<KeySlot>> {
        lock(&self.core.slots)
            .entry(key.to_string())
            .or_default()
            .clone()
    }
}
