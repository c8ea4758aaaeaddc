//! Helpers shared by the thread-runner tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use roundtable_chat_runner::{ThreadRunner, TurnLoop};
use roundtable_dispatch::{BotProfile, Participant, Roster, Topic, Trigger};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, Message, Model, OPENAI_COMPLETIONS,
    Provider, ScriptStep, StreamOptions, ToolCall, Usage, UserBlock, UserContent, now_millis,
    script_events,
};
use roundtable_thread_stream::{Entry, EntryBody, Expect, NewEntry, ThreadId, ThreadStore};
use roundtable_tools::{
    Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolRegistry, ToolResult,
};

pub fn model() -> Model {
    Model::new(OPENAI_COMPLETIONS, "test", "m", "")
}

pub fn text_message(text: &str) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "test", "m", now_millis());
    m.content.push(AssistantBlock::text(text));
    m.usage = Usage {
        input: 10,
        output: 5,
        total_tokens: 15,
        ..Usage::default()
    };
    m.usage.cost.total = 0.001;
    m
}

/// The text of a message as a model would read it.
pub fn message_text(m: &Message) -> String {
    match m {
        Message::User(u) => match &u.content {
            UserContent::Text(t) => t.to_string(),
            UserContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    UserBlock::Text(t) => Some(t.text.to_string()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        },
        Message::Assistant(a) => a.text(),
        Message::ToolResult(r) => r
            .content
            .iter()
            .filter_map(|b| match b {
                UserBlock::Text(t) => Some(t.text.to_string()),
                _ => None,
            })
            .collect(),
    }
}

/// A provider that answers from the request: `"<name>: re <last line>"`;
/// with tools, a user turn containing "look up <key>" calls `lookup`, and a
/// tool result is answered with `"<name>: found <result>"`. Records every
/// context and how many calls run at once.
pub struct Smart {
    pub name: String,
    pub contexts: Mutex<Vec<Context>>,
    pub in_flight: Arc<AtomicUsize>,
    pub max_in_flight: AtomicUsize,
    pub fail_next: AtomicUsize,
    pub hold: Option<Arc<tokio::sync::Semaphore>>,
}

impl Smart {
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Self::plain(name))
    }

    pub fn plain(name: &str) -> Self {
        Self {
            name: name.to_string(),
            contexts: Mutex::new(Vec::new()),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: AtomicUsize::new(0),
            fail_next: AtomicUsize::new(0),
            hold: None,
        }
    }

    pub fn calls(&self) -> usize {
        self.contexts.lock().unwrap().len()
    }

    pub fn contexts(&self) -> Vec<Context> {
        self.contexts.lock().unwrap().clone()
    }

    fn reply(&self, context: &Context) -> AssistantMessage {
        match context.messages.last() {
            Some(Message::ToolResult(r)) => text_message(&format!(
                "{}: found {}",
                self.name,
                message_text(&Message::ToolResult(r.clone()))
            )),
            Some(m @ Message::User(_)) => {
                let text = message_text(m);
                let last = text.lines().last().unwrap_or_default().to_string();
                if !context.tools.is_empty()
                    && let Some(at) = last.find("look up ")
                {
                    let key = last[at + 8..].trim().to_string();
                    let mut args = serde_json::Map::new();
                    args.insert("key".into(), key.into());
                    let mut m =
                        AssistantMessage::empty(OPENAI_COMPLETIONS, "test", "m", now_millis());
                    m.content.push(AssistantBlock::ToolCall(ToolCall::new(
                        format!("call-{}", now_millis()),
                        "lookup",
                        args,
                    )));
                    m.stop_reason = roundtable_providers::StopReason::ToolUse;
                    return m;
                }
                text_message(&format!("{}: re {}", self.name, last))
            }
            _ => text_message(&format!("{}: hello", self.name)),
        }
    }
}

impl Provider for Smart {
    fn stream(&self, _model: &Model, context: &Context, options: &StreamOptions) -> EventStream {
        self.contexts.lock().unwrap().push(context.clone());
        let step = if self
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "test", "m", now_millis());
            m.error_message = Some("the provider is down".into());
            ScriptStep::Fail {
                kind: roundtable_providers::ErrorKind::Server,
                message: m,
            }
        } else {
            ScriptStep::Reply(self.reply(context))
        };
        let events = script_events(step, 3);
        let hold = self.hold.clone();
        let cancel = options.cancel.clone();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let in_flight = self.in_flight.clone();
        futures::stream::once(async move {
            let mut events = events;
            if let Some(hold) = hold {
                tokio::select! {
                    p = hold.acquire_owned() => { if let Ok(p) = p { p.forget(); } }
                    () = cancel.cancelled() => {
                        let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "test", "m", now_millis());
                        m.error_message = Some("Request was aborted".into());
                        events = script_events(ScriptStep::Fail { kind: roundtable_providers::ErrorKind::Aborted, message: m }, 3);
                    }
                }
            } else {
                tokio::task::yield_now().await;
            }
            in_flight.fetch_sub(1, Ordering::SeqCst);
            futures::stream::iter(events)
        })
        .flatten()
        .boxed()
    }
}

/// The read-only `lookup` tool: answers `"<key> is on shelf 7"`.
pub struct Lookup;

#[async_trait::async_trait]
impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup",
            "Looks a key up in the archive.",
            serde_json::json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
            ToolKind::Read,
        )
    }
    async fn invoke(
        &self,
        _ctx: ToolContext,
        args: roundtable_providers::JsonObject,
    ) -> Result<ToolResult, ToolError> {
        let key = args.get("key").and_then(|v| v.as_str()).unwrap_or("?");
        Ok(ToolResult::text(format!("{key} is on shelf 7")))
    }
}

pub fn lookup_tools() -> Arc<ToolRegistry> {
    let mut tools = ToolRegistry::new();
    tools.register(Lookup).unwrap();
    Arc::new(tools)
}

pub fn turns(provider: Arc<dyn Provider>) -> TurnLoop {
    TurnLoop::new(provider, model())
}

pub fn human(id: &str, name: &str) -> Participant {
    Participant::human(id, name)
}

pub fn bot(id: &str, name: &str, trigger: Trigger) -> Participant {
    Participant::bot(
        id,
        name,
        BotProfile::new(trigger, format!("You are {name}.")),
    )
}

pub fn ambient(id: &str, name: &str, topics: &[&str]) -> Participant {
    Participant::bot(
        id,
        name,
        BotProfile::new(Trigger::Ambient, format!("You are {name}."))
            .with_topics(topics.iter().map(|t| Topic::keyword(t))),
    )
}

pub fn roster(people: impl IntoIterator<Item = Participant>) -> Roster {
    Roster::new(people).unwrap()
}

pub fn thread(id: &str) -> ThreadId {
    ThreadId::new(id).unwrap()
}

pub async fn say(store: &dyn ThreadStore, thread: &ThreadId, who: &str, text: &str) -> u64 {
    let e = store
        .append(
            thread,
            Expect::Any,
            vec![NewEntry::new(who, EntryBody::chat(text))],
        )
        .await
        .unwrap();
    e[0].seq
}

/// Waits until every runner is idle and the thread stopped growing.
pub async fn settle(runners: &[&ThreadRunner], store: &dyn ThreadStore, thread: &ThreadId) {
    loop {
        let before = store.last_seq(thread).await.unwrap();
        for r in runners {
            r.idle().await.unwrap();
        }
        if store.last_seq(thread).await.unwrap() == before {
            return;
        }
    }
}

/// The final texts of the bots' answers, in order: (bot, text).
pub fn answers(entries: &[Entry]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Assistant(a) if roundtable_dispatch::is_final(&a.message) => {
                Some((e.author.to_string(), a.message.text()))
            }
            _ => None,
        })
        .collect()
}

/// Checks the lifecycle invariants of every turn in `entries`: each turn
/// starts once and ends once, its entries carry its id and lie between its
/// start and end, its chunks concatenate to the text of its assistant
/// messages, and a bot never has two turns open at once.
pub fn check_turns(entries: &[Entry]) {
    use std::collections::HashMap;
    let mut open: HashMap<String, String> = HashMap::new(); // bot -> turn
    let mut chunks: HashMap<String, String> = HashMap::new();
    let mut texts: HashMap<String, String> = HashMap::new();
    let mut ended: HashMap<String, bool> = HashMap::new();
    for e in entries {
        let bot = e.author.to_string();
        match &e.body {
            EntryBody::TurnStarted(s) => {
                assert!(
                    !open.contains_key(&bot),
                    "bot {bot} started {} with {} still open",
                    s.turn,
                    open[&bot]
                );
                assert!(
                    ended.insert(s.turn.to_string(), false).is_none(),
                    "turn started twice"
                );
                open.insert(bot, s.turn.to_string());
            }
            EntryBody::TurnEnded(x) => {
                assert_eq!(open.remove(&bot).as_deref(), Some(&*x.turn));
                ended.insert(x.turn.to_string(), true);
            }
            EntryBody::TurnFailed(x) => {
                assert_eq!(open.remove(&bot).as_deref(), Some(&*x.turn));
                ended.insert(x.turn.to_string(), true);
            }
            EntryBody::Chunk(c) => {
                assert_eq!(open.get(&bot).map(String::as_str), Some(&*c.turn));
                chunks
                    .entry(c.turn.to_string())
                    .or_default()
                    .push_str(&c.delta);
            }
            EntryBody::Assistant(a) => {
                let turn = a.turn.as_deref().unwrap();
                assert_eq!(open.get(&bot).map(String::as_str), Some(turn));
                texts
                    .entry(turn.to_string())
                    .or_default()
                    .push_str(&a.message.text());
            }
            EntryBody::ToolResult(r) => {
                assert_eq!(open.get(&bot).map(String::as_str), r.turn.as_deref());
            }
            _ => {}
        }
    }
    for (turn, text) in &texts {
        assert_eq!(
            chunks.get(turn).cloned().unwrap_or_default(),
            *text,
            "chunks of {turn}"
        );
    }
}
