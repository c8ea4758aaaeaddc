//! `build_messages`: one bot's clean one-on-one view of a shared thread.
//!
//! See the crate documentation for the rules. The work is done by `Core`,
//! which turns entries into messages one at a time in O(1) each (amortised):
//! a tool call gets a back-filled error result slot as soon as its assistant
//! message is projected, and the slot is overwritten in place when the real
//! result arrives, however many other entries came between. So the messages
//! are valid after every entry, and the full and incremental forms share the
//! same steps. (`build_messages` sees the whole thread at once, so it writes
//! the back-fill text only into slots still open at the end, and gathers a
//! run of user turns before making it one message.)

use std::collections::HashMap;
use std::sync::Arc;

use roundtable_providers::{
    AssistantBlock, AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, UserBlock,
    UserContent, UserMessage,
};
use roundtable_thread_stream::{Answer, AssistantEntry, Chat, Compaction, Entry, EntryBody};

use crate::authors::{AuthorCache, AuthorIndex, Authors};
use crate::event::is_final;
use crate::roster::Roster;

/// The text of the error result back-filled for a tool call that has none
/// (the same words pi-ai uses).
pub const MISSING_RESULT_TEXT: &str = "No result provided";

/// What comes before a compaction summary in the user turn that stands in for
/// the history it covers (as pi's coding agent words it).
pub const COMPACTION_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";

/// What comes after a compaction summary.
pub const COMPACTION_SUFFIX: &str = "\n</summary>";

/// The `api`, `provider` and `model` of the assistant message that stands for a
/// bot's own plain `chat` entry (written by a host on the bot's behalf, not by
/// a model).
pub const OWN_CHAT_SOURCE: (&str, &str, &str) = ("roundtable", "roundtable", "chat");

/// Projects `entries` (one thread, in seq order) into the messages the bot
/// `self_id` sends to its model.
///
/// The result depends only on the arguments: recomputing it gives the same
/// messages. Entries whose seq is not above the previous entry's are ignored.
/// [`Projection`] is the incremental form and gives the same result.
///
/// ```
/// use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger, build_messages};
/// use roundtable_providers::{Message, UserBlock, UserContent};
/// use roundtable_thread_stream::{EntryBody, NewEntry, ThreadId};
///
/// let roster = Roster::new([
///     Participant::human("u1", "Alice"),
///     Participant::human("u2", "Bob"),
///     Participant::bot("b1", "Archive Bot", BotProfile::new(Trigger::Mention, "You keep the archive.")),
/// ])?;
/// let thread = ThreadId::new("t")?;
/// let entries = vec![
///     NewEntry::new("u1", EntryBody::chat("@archive-bot where is the Q3 report?")).at(1).into_entry(thread.clone(), 1),
///     NewEntry::new("u2", EntryBody::chat("and Q2?")).at(2).into_entry(thread, 2),
/// ];
/// let messages = build_messages("b1", &entries, &roster);
/// // Two speakers in a row: one user message, one text block each.
/// assert_eq!(messages.len(), 1);
/// let Message::User(user) = &messages[0] else { unreachable!() };
/// let UserContent::Blocks(blocks) = &user.content else { unreachable!() };
/// assert_eq!(blocks, &[
///     UserBlock::text("[Alice]: @archive-bot where is the Q3 report?"),
///     UserBlock::text("[Bob]: and Q2?"),
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build_messages(self_id: &str, entries: &[Entry], roster: &Roster) -> Vec<Message> {
    // One pass. The bot's latest compaction decides where the projection
    // starts: on meeting one, the projection starts again from its summary
    // and the entries before it that it does not cover (a bot compacts
    // rarely, so a thread is read about once, not once to find the
    // compaction and again to project).
    let mut core = Core::new(self_id.into(), roster.clone());
    core.batch = true;
    // Room for the messages of a busy thread (about one per eight to twelve
    // entries: most entries are chunks and lifecycle, and a run of turns is
    // one message), so that they do not grow by copying from small sizes.
    core.messages.reserve(entries.len() / 8);
    // The entries stay borrowed for the whole call: their ids' addresses
    // name them (see `AuthorCache`).
    let mut authors = AuthorCache::new();
    let mut cutoff = 0;
    let mut last_seq = 0;
    for (i, e) in entries.iter().enumerate() {
        // In order (see `in_order`), past the compaction.
        if e.seq <= last_seq {
            continue;
        }
        last_seq = e.seq;
        let shown = match &e.body {
            EntryBody::Chat(c) => Shown::Chat(c),
            EntryBody::Assistant(a) => {
                // Told apart by the entry's answer, without reading the
                // message (see `apply_answer`).
                if e.seq > cutoff {
                    let author = authors.resolve(&mut core.authors, &e.author);
                    core.apply_answer(author, a, e.at);
                }
                continue;
            }
            EntryBody::ToolResult(r) => Shown::ToolResult(&r.message),
            EntryBody::Compaction(c)
                if authors.resolve(&mut core.authors, &e.author) == AuthorIndex::SELF =>
            {
                core.clear();
                cutoff = core.start_from(e, c);
                for earlier in in_order(&entries[..i]).filter(|x| x.seq > cutoff) {
                    if let Some(shown) = Shown::of(&earlier.body) {
                        let author = authors.resolve(&mut core.authors, &earlier.author);
                        core.apply(Who::Known(author), shown, earlier.at);
                    }
                }
                continue;
            }
            _ => continue,
        };
        if e.seq > cutoff {
            let author = authors.resolve(&mut core.authors, &e.author);
            core.apply_known(author, shown, e.at);
        }
    }
    core.finish()
}

/// The entries whose seq is above every earlier one's.
fn in_order(entries: &[Entry]) -> impl Iterator<Item = &Entry> {
    let mut last = 0;
    entries.iter().filter(move |e| {
        let fresh = e.seq > last;
        if fresh {
            last = e.seq;
        }
        fresh
    })
}

/// The user message a projection shows for `author`'s `chat` written at
/// `at`, on its own: `[Name]: text`, its text parts on the following lines,
/// its images as image blocks. (A projection merges it into a user message
/// just before it.) Hosts that add a message to a running turn give the
/// model this, so the turn sees exactly what later projections show.
///
/// ```
/// use roundtable_dispatch::{Participant, Roster};
/// use roundtable_dispatch::projection::labelled_chat;
/// use roundtable_thread_stream::Chat;
///
/// let roster = Roster::new([Participant::human("u1", "Alice")])?;
/// let message = labelled_chat(&roster, "u1", &Chat::new("use the staging server"), 0);
/// assert_eq!(message.content.to_text(), "[Alice]: use the staging server");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn labelled_chat(roster: &Roster, author: &str, chat: &Chat, at: i64) -> UserMessage {
    let mut text = String::new();
    write_label(&mut text, roster.name_of(author), &chat.text);
    append_text_parts(&mut text, &chat.parts);
    let images: Vec<UserBlock> = chat
        .parts
        .iter()
        .filter(|p| matches!(p, UserBlock::Image(_)))
        .cloned()
        .collect();
    if images.is_empty() {
        UserMessage::text(text, at)
    } else {
        let mut blocks = vec![UserBlock::Text(TextContent::new(Arc::<str>::from(text)))];
        blocks.extend(images);
        UserMessage::blocks(blocks, at)
    }
}

/// Writes `[name]: text` into `out` (replacing what it held).
fn write_label(out: &mut String, name: &str, text: &str) {
    out.clear();
    out.reserve(name.len() + text.len() + 4);
    out.push('[');
    out.push_str(name);
    out.push_str("]:");
    if !text.is_empty() {
        out.push(' ');
        out.push_str(text);
    }
}

/// Appends each text part of `parts` on a line of its own.
fn append_text_parts(out: &mut String, parts: &[UserBlock]) {
    for part in parts {
        if let UserBlock::Text(t) = part {
            out.push('\n');
            out.push_str(&t.text);
        }
    }
}

/// The incremental form of [`build_messages`]: push entries as they arrive,
/// read the messages whenever the bot takes a turn.
///
/// A push costs O(1) amortised; a compaction by the bot rebuilds from the
/// entries after it, so the projection keeps what it read of the entries it
/// shows: their seq, time and author, and the body's message or chat (its
/// text and tool arguments shared, not copied). At every point,
/// [`messages`](Self::messages) equals `build_messages` over the entries
/// pushed so far. Pushing an entry whose seq is not above the last one's does
/// nothing, so replaying an overlapping range (history, then live) is harmless.
///
/// ```
/// use roundtable_dispatch::{BotProfile, Participant, Projection, Roster, Trigger, build_messages};
/// use roundtable_thread_stream::{EntryBody, NewEntry, ThreadId};
///
/// let roster = Roster::new([
///     Participant::human("u1", "Alice"),
///     Participant::bot("b1", "Archive Bot", BotProfile::new(Trigger::Always, "You keep the archive.")),
/// ])?;
/// let thread = ThreadId::new("t")?;
/// let entries: Vec<_> = (1..=3)
///     .map(|seq| NewEntry::new("u1", EntryBody::chat(format!("message {seq}"))).at(seq as i64).into_entry(thread.clone(), seq))
///     .collect();
/// let mut projection = Projection::new("b1", &roster);
/// for e in &entries {
///     projection.push(e);
/// }
/// assert!(!projection.push(&entries[1])); // already seen
/// assert_eq!(projection.messages(), build_messages("b1", &entries, &roster).as_slice());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Projection {
    core: Core,
    /// What a later compaction may need to project again: the entries the
    /// projection shows, reduced to what it reads of them.
    kept: Vec<Kept>,
    last_seq: u64,
}

/// An entry the projection shows, kept for a later compaction: its author
/// by place (no shared id to count) and only the part of its body the
/// projection reads.
#[derive(Debug, Clone)]
struct Kept {
    seq: u64,
    at: i64,
    author: AuthorIndex,
    body: KeptBody,
}

/// The part of a kept entry's body the projection reads.
#[derive(Debug, Clone)]
enum KeptBody {
    Chat(Chat),
    Assistant(Arc<AssistantMessage>),
    ToolResult(Arc<ToolResultMessage>),
}

impl KeptBody {
    fn shown(&self) -> Shown<'_> {
        match self {
            KeptBody::Chat(c) => Shown::Chat(c),
            KeptBody::Assistant(m) => Shown::Assistant(m),
            KeptBody::ToolResult(m) => Shown::ToolResult(m),
        }
    }
}

/// The bodies a projection may show, by reference.
#[derive(Clone, Copy)]
enum Shown<'a> {
    Chat(&'a Chat),
    Assistant(&'a Arc<AssistantMessage>),
    ToolResult(&'a Arc<ToolResultMessage>),
}

impl<'a> Shown<'a> {
    fn of(body: &'a EntryBody) -> Option<Self> {
        match body {
            EntryBody::Chat(c) => Some(Shown::Chat(c)),
            EntryBody::Assistant(a) => Some(Shown::Assistant(a.message())),
            EntryBody::ToolResult(r) => Some(Shown::ToolResult(&r.message)),
            _ => None,
        }
    }

    fn to_kept(self) -> KeptBody {
        match self {
            Shown::Chat(c) => KeptBody::Chat(c.clone()),
            Shown::Assistant(m) => KeptBody::Assistant(m.clone()),
            Shown::ToolResult(m) => KeptBody::ToolResult(m.clone()),
        }
    }
}

/// True when the projection shows `shown` written by someone other than
/// the bot: a chat, or a final answer (thinking and tool traffic never are).
#[inline]
fn shows_other(shown: Shown<'_>) -> bool {
    match shown {
        Shown::Chat(_) => true,
        Shown::Assistant(m) => is_final(m),
        Shown::ToolResult(_) => false,
    }
}

/// Who wrote what the projection is given: an entry's id, or an author met
/// before.
#[derive(Clone, Copy)]
enum Who<'a> {
    Id(&'a Arc<str>),
    Known(AuthorIndex),
}

impl Projection {
    /// An empty projection for the bot `self_id`; `roster` gives the labels.
    pub fn new(self_id: impl Into<Arc<str>>, roster: &Roster) -> Self {
        Self {
            core: Core::new(self_id.into(), roster.clone()),
            kept: Vec::new(),
            last_seq: 0,
        }
    }

    /// Adds the next entry. Returns false (and changes nothing) when its seq is
    /// not above the last pushed one's.
    pub fn push(&mut self, entry: &Entry) -> bool {
        if entry.seq <= self.last_seq {
            return false;
        }
        self.last_seq = entry.seq;
        match &entry.body {
            EntryBody::Compaction(c) if self.core.authors.is_self_id(&entry.author) => {
                self.core.clear();
                let cutoff = self.core.start_from(entry, c);
                for k in self.kept.iter().filter(|k| k.seq > cutoff) {
                    self.core.apply(Who::Known(k.author), k.body.shown(), k.at);
                }
            }
            body => {
                if let Some(shown) = Shown::of(body)
                    && let Some(author) = self.core.apply(Who::Id(&entry.author), shown, entry.at)
                {
                    self.kept.push(Kept {
                        seq: entry.seq,
                        at: entry.at,
                        author,
                        body: shown.to_kept(),
                    });
                }
            }
        }
        true
    }

    /// Pushes every entry in turn.
    pub fn extend<'a>(&mut self, entries: impl IntoIterator<Item = &'a Entry>) {
        for e in entries {
            self.push(e);
        }
    }

    /// The bot's messages as of the last push.
    pub fn messages(&self) -> &[Message] {
        &self.core.messages
    }

    /// The messages, taking them out of the projection.
    pub fn into_messages(self) -> Vec<Message> {
        self.core.messages
    }

    /// The seq of the last entry pushed (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The bot whose view this is.
    pub fn self_id(&self) -> &str {
        self.core.authors.self_id()
    }
}

/// The projection's state machine: messages so far and the calls still
/// waiting for their results.
#[derive(Debug, Clone)]
struct Core {
    /// The bot itself, and the `[Name]: ` put before everyone else's words.
    authors: Authors,
    /// The messages (in `batch` mode, all but the user run being gathered).
    messages: Vec<Message>,
    /// Tool-call id -> index of its (still back-filled) result in `messages`.
    open_calls: HashMap<Arc<str>, usize>,
    /// Shared text of back-filled results and of own chat messages' source.
    missing_text: Arc<str>,
    /// The placeholder of open calls' results (`batch` only, made on first
    /// use).
    placeholder: Option<Arc<ToolResultMessage>>,
    /// Set by `build_messages`, which reads the messages only at
    /// [`finish`](Core::finish). Back-filled results are then made only
    /// when the call closes for good or at the end (never for a call whose
    /// result comes later: its slot holds `placeholder` until the result
    /// takes it), and a run of user turns is gathered in `run` and made one
    /// message when the run ends. The incremental form keeps its messages
    /// valid after every push instead.
    batch: bool,
    /// The blocks of the run of user turns being gathered (`batch` only).
    run: Vec<UserBlock>,
    /// The timestamp of the run's first turn.
    user_run_at: i64,
    own_chat_source: [Arc<str>; 3],
    /// Reused buffer for the labelled texts.
    scratch: String,
}

impl Core {
    fn new(self_id: Arc<str>, roster: Roster) -> Self {
        let (api, provider, model) = OWN_CHAT_SOURCE;
        Self {
            authors: Authors::new(self_id, roster),
            messages: Vec::new(),
            open_calls: HashMap::default(),
            missing_text: MISSING_RESULT_TEXT.into(),
            placeholder: None,
            batch: false,
            run: Vec::new(),
            user_run_at: 0,
            own_chat_source: [api.into(), provider.into(), model.into()],
            scratch: String::new(),
        }
    }

    fn clear(&mut self) {
        self.messages.clear();
        self.open_calls.clear();
        self.run.clear();
    }

    /// Adds a message that is not a user turn, after the user run it ends.
    fn push_message(&mut self, message: Message) {
        self.end_user_run();
        self.messages.push(message);
    }

    /// Ends the run of user turns being gathered (`batch` only): its blocks
    /// become one user message.
    fn end_user_run(&mut self) {
        if self.run.is_empty() {
            return;
        }
        let blocks = self.run.drain(..).collect();
        self.messages
            .push(Message::from(UserMessage::blocks(blocks, self.user_run_at)));
    }

    /// Adds a block already made to the user run (`batch` only).
    #[inline(always)]
    fn push_run_block(&mut self, block: UserBlock, at: i64) {
        if self.run.is_empty() {
            self.user_run_at = at;
        }
        self.run.push(block);
    }

    /// Adds `author`'s `body`, labelled, to the user run (`batch` only).
    #[inline(always)]
    fn gather_labelled(&mut self, author: AuthorIndex, body: &str, at: i64) {
        let text = self.labelled(author, body);
        self.push_run_block(UserBlock::Text(TextContent::new(text)), at);
    }

    /// `author`'s `[Name]: ` followed by `body`.
    #[inline]
    fn labelled(&mut self, author: AuthorIndex, body: &str) -> Arc<str> {
        self.scratch.clear();
        self.scratch.push_str(self.authors.label(author));
        self.scratch.push_str(body);
        Arc::from(self.scratch.as_str())
    }

    /// Starts from the bot's compaction `c` (entry `e`): its summary as a user
    /// turn. Returns the last seq it covers (never past the compaction itself).
    fn start_from(&mut self, e: &Entry, c: &Compaction) -> u64 {
        let text = format!("{COMPACTION_PREFIX}{}{COMPACTION_SUFFIX}", c.summary);
        self.push_user_turn(text.into(), e.at, &[]);
        c.upto.min(e.seq)
    }

    /// Projects what the known `author` wrote at `at` (for
    /// `build_messages`, which keeps nothing for a later compaction).
    /// Someone else's plain chat, the most common entry shown, is gathered
    /// here without the general path's bookkeeping.
    #[inline]
    fn apply_known(&mut self, author: AuthorIndex, shown: Shown<'_>, at: i64) {
        match shown {
            Shown::Chat(chat)
                if author != AuthorIndex::SELF
                    && chat.parts.is_empty()
                    && !chat.text.is_empty() =>
            {
                self.gather_labelled(author, &chat.text, at);
            }
            _ => {
                self.apply(Who::Known(author), shown, at);
            }
        }
    }

    /// Projects the known `author`'s assistant entry `a` (for
    /// `build_messages`). Someone else's message is told apart by the
    /// entry's [`Answer`] alone: an answer of one plain text (almost every
    /// answer) is gathered borrowed, a tool round or a failed message is
    /// skipped, and only the rare other shapes read the message. The bot's
    /// own final answer is shared without a scan for its tool calls.
    #[inline]
    fn apply_answer(&mut self, author: AuthorIndex, a: &AssistantEntry, at: i64) {
        let answer = a.answer();
        if author == AuthorIndex::SELF {
            if answer.is_final() {
                // No call to track: shared as it is.
                self.push_message(Message::Assistant(a.message().clone()));
            } else {
                self.apply(Who::Known(author), Shown::Assistant(a.message()), at);
            }
            return;
        }
        match answer {
            Answer::Text(body) => self.gather_labelled(author, body, at),
            Answer::Other => self.other(author, Shown::Assistant(a.message()), at),
            Answer::Intermediate => {}
        }
    }

    /// Adds `author`'s `[Name]: ` before `body` as a speaker turn.
    #[inline(always)]
    fn push_labelled(&mut self, author: AuthorIndex, body: &str, at: i64) {
        let text = self.labelled(author, body);
        self.push_user_text(text, at);
    }

    /// Projects what `author` wrote at `at`. Returns the author when the
    /// projection shows it or may show it (so a later compaction may need it
    /// again). Only the authors of what is shown are looked up.
    fn apply(&mut self, author: Who<'_>, shown: Shown<'_>, at: i64) -> Option<AuthorIndex> {
        let own = match author {
            Who::Id(id) => self.authors.is_self_id(id),
            Who::Known(index) => index == AuthorIndex::SELF,
        };
        if own {
            match shown {
                Shown::Chat(chat) => self.own_chat(chat, at),
                // A failed message (error, aborted) is an incomplete turn: its
                // partial tool calls never ran, and pi-ai would not replay it.
                Shown::Assistant(m) if !m.stop_reason.is_failure() => self.own_assistant(m),
                Shown::ToolResult(r) => self.own_result(r),
                Shown::Assistant(_) => return None,
            }
            return Some(AuthorIndex::SELF);
        }
        if !shows_other(shown) {
            return None;
        }
        let index = match author {
            Who::Id(id) => self.authors.find(id),
            Who::Known(index) => index,
        };
        self.other(index, shown, at);
        Some(index)
    }

    /// Projects what someone other than the bot wrote (see
    /// [`shows_other`]).
    #[inline(always)]
    fn other(&mut self, author: AuthorIndex, shown: Shown<'_>, at: i64) {
        match shown {
            Shown::Chat(chat) => self.labelled_turn(author, chat, at),
            Shown::Assistant(m) => self.other_assistant(author, m, at),
            Shown::ToolResult(_) => {}
        }
    }

    fn own_assistant(&mut self, message: &Arc<AssistantMessage>) {
        // Shared with the entry, not copied.
        self.push_message(Message::Assistant(message.clone()));
        for call in message.tool_calls() {
            let slot = self.messages.len();
            if let Some(older) = self.open_calls.insert(call.id.clone(), slot) {
                // An earlier call with the same id stays unanswered for good.
                self.fill_missing(older);
            }
            let back_fill = if self.batch {
                // Most calls are answered before the end: their slot holds
                // the shared placeholder until then (see `fill_missing`).
                Message::ToolResult(self.placeholder().clone())
            } else {
                Message::from(Self::missing_result(
                    call,
                    message.timestamp,
                    self.missing_content(),
                ))
            };
            self.messages.push(back_fill);
        }
    }

    /// The back-filled error result for `call`.
    fn missing_result(
        call: &ToolCall,
        timestamp: i64,
        content: Vec<UserBlock>,
    ) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content,
            details: None,
            is_error: true,
            timestamp,
        }
    }

    /// What stands in the slot of an open call's result in `batch` mode
    /// until the call is answered or closed for good: one message shared by
    /// every slot, never returned.
    fn placeholder(&mut self) -> &Arc<ToolResultMessage> {
        self.placeholder.get_or_insert_with(|| {
            Arc::new(ToolResultMessage {
                tool_call_id: Arc::from(""),
                tool_name: Arc::from(""),
                content: Vec::new(),
                details: None,
                is_error: true,
                timestamp: 0,
            })
        })
    }

    fn missing_content(&self) -> Vec<UserBlock> {
        vec![UserBlock::Text(TextContent::new(self.missing_text.clone()))]
    }

    /// Gives the back-filled result at `slot` its text, if it has none yet.
    fn fill_missing(&mut self, slot: usize) {
        let Some(Message::ToolResult(r)) = self.messages.get(slot) else {
            return;
        };
        if self.placeholder.as_ref().is_some_and(|p| Arc::ptr_eq(p, r)) {
            // `batch`: the back-fill is made now. Its call is the assistant
            // message's k-th, k the slot's distance past it (a message's
            // back-fills follow it, in the order of its calls).
            let owner = self.messages[..slot]
                .iter()
                .rposition(|m| matches!(m, Message::Assistant(_)));
            let made = owner.and_then(|i| match &self.messages[i] {
                Message::Assistant(a) => a
                    .tool_calls()
                    .nth(slot - i - 1)
                    .map(|call| Self::missing_result(call, a.timestamp, self.missing_content())),
                _ => None,
            });
            if let Some(made) = made {
                self.messages[slot] = Message::from(made);
            }
        }
    }

    /// Fills every back-fill still waiting (see `batch`) and returns
    /// the messages.
    fn finish(mut self) -> Vec<Message> {
        if self.batch {
            self.end_user_run();
            let open: Vec<usize> = self.open_calls.values().copied().collect();
            for slot in open {
                self.fill_missing(slot);
            }
        }
        self.messages
    }

    fn own_result(&mut self, result: &Arc<ToolResultMessage>) {
        // A result with no open call (unknown, already answered, or covered
        // by a compaction) is dropped: a provider rejects a result without its call.
        if let Some(slot) = self.open_calls.remove(&result.tool_call_id) {
            self.messages[slot] = Message::ToolResult(result.clone());
        }
    }

    /// A plain `chat` the bot itself wrote: its own words, so an assistant
    /// message (images become a short note: assistant messages carry none).
    fn own_chat(&mut self, chat: &Chat, at: i64) {
        let mut content = Vec::with_capacity(1 + chat.parts.len());
        if !chat.text.is_empty() {
            content.push(AssistantBlock::Text(TextContent::new(chat.text.clone())));
        }
        for part in &chat.parts {
            content.push(match part {
                UserBlock::Text(t) => AssistantBlock::Text(t.clone()),
                UserBlock::Image(i) => AssistantBlock::text(format!("[image: {}]", i.mime_type)),
            });
        }
        if content.is_empty() {
            return;
        }
        let [api, provider, model] = self.own_chat_source.clone();
        let mut message = AssistantMessage::empty(api, provider, model, at);
        message.content = content;
        self.push_message(Message::from(message));
    }

    /// Another bot's final answer: its text, labelled; thinking and tool
    /// traffic are never shown.
    #[inline(always)]
    fn other_assistant(&mut self, author: AuthorIndex, message: &AssistantMessage, at: i64) {
        if let [AssistantBlock::Text(t)] = message.content.as_slice() {
            // One text, as almost every answer.
            if !t.text.is_empty() {
                self.push_labelled(author, &t.text, at);
            }
        } else {
            self.other_assistant_blocks(author, message, at);
        }
    }

    /// [`other_assistant`](Self::other_assistant) for an answer of several
    /// blocks: its texts joined by newlines.
    fn other_assistant_blocks(&mut self, author: AuthorIndex, message: &AssistantMessage, at: i64) {
        let mut texts = message.content.iter().filter_map(|b| match b {
            AssistantBlock::Text(t) if !t.text.is_empty() => Some(&t.text),
            _ => None,
        });
        let Some(first) = texts.next() else {
            return;
        };
        let Some(second) = texts.next() else {
            // One text among other blocks.
            self.push_labelled(author, first, at);
            return;
        };
        write_label(&mut self.scratch, self.authors.name(author), first);
        for t in std::iter::once(second).chain(texts) {
            self.scratch.push('\n');
            self.scratch.push_str(t);
        }
        let text = Arc::from(self.scratch.as_str());
        self.push_user_turn(text, at, &[]);
    }

    /// Someone else's `chat`: `[Name]: text`, text parts on following lines,
    /// images as image blocks.
    #[inline(always)]
    fn labelled_turn(&mut self, author: AuthorIndex, chat: &Chat, at: i64) {
        if chat.parts.is_empty() && !chat.text.is_empty() {
            // Plain text, as almost every chat.
            self.push_labelled(author, &chat.text, at);
        } else {
            self.labelled_turn_parts(author, chat, at);
        }
    }

    /// [`labelled_turn`](Self::labelled_turn) for a chat with parts (or no
    /// text): one text made of the pieces, and the images.
    fn labelled_turn_parts(&mut self, author: AuthorIndex, chat: &Chat, at: i64) {
        write_label(&mut self.scratch, self.authors.name(author), &chat.text);
        append_text_parts(&mut self.scratch, &chat.parts);
        let text = Arc::from(self.scratch.as_str());
        self.push_user_turn(text, at, &chat.parts);
    }

    /// Adds a labelled speaker turn with no images: the common case of
    /// [`push_user_turn`](Self::push_user_turn), which `build_messages`
    /// gathers in its run.
    #[inline(always)]
    fn push_user_text(&mut self, text: Arc<str>, at: i64) {
        if self.batch {
            self.push_run_block(
                UserBlock::Text(TextContent {
                    text,
                    text_signature: None,
                }),
                at,
            );
        } else {
            self.push_user_turn(text, at, &[]);
        }
    }

    /// Adds a labelled speaker turn (and the images of `parts`), merged
    /// into the previous message if it is a user message.
    fn push_user_turn(&mut self, text: Arc<str>, at: i64, parts: &[UserBlock]) {
        let text = UserBlock::Text(TextContent {
            text,
            text_signature: None,
        });
        let images = parts
            .iter()
            .filter(|p| matches!(p, UserBlock::Image(_)))
            .cloned();
        if self.batch {
            self.push_run_block(text, at);
            if !parts.is_empty() {
                for image in images {
                    self.push_run_block(image, at);
                }
            }
            return;
        }
        if let Some(Message::User(user)) = self.messages.last_mut() {
            // Unshared unless a request still holds it: then copied once.
            let user = Arc::make_mut(user);
            match &mut user.content {
                UserContent::Blocks(blocks) => {
                    blocks.push(text);
                    if !parts.is_empty() {
                        blocks.extend(images);
                    }
                }
                UserContent::Text(t) => {
                    let mut blocks = vec![UserBlock::Text(TextContent::new(t.clone())), text];
                    blocks.extend(images);
                    user.content = UserContent::Blocks(blocks);
                }
            }
            return;
        }
        // Room for the turns that usually follow before the bot speaks.
        let mut blocks = Vec::with_capacity(4);
        blocks.push(text);
        blocks.extend(images);
        self.messages
            .push(Message::from(UserMessage::blocks(blocks, at)));
    }
}
