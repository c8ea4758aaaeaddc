//! A terminal session in one shared thread: two humans typed at the prompt
//! and three bots.
//!
//! ```text
//! cargo run --example multi_bot            # type `alice: ...` or `bob: ...`
//! cargo run --example multi_bot -- --demo  # play a scripted conversation and exit
//! ```
//!
//! - **Archivist** (`mention`): wakes when named (`@archivist`) and has a
//!   read-only `lookup` tool over a small archive.
//! - **Chatty** (`always`): answers every message, and likes to ask
//!   `@archivist` to double-check: the loop guard ends their exchanges.
//! - **Rusty** (`ambient`, topics `rust` and `cargo`): the topic gate lets it
//!   join only conversations about Rust.
//!
//! Offline by default: the bots answer through a small scripted provider,
//! and the thread is a JSONL file under `./data` (`lobby.jsonl`, resumed on
//! the next run; the demo writes a fresh `demo-<time>.jsonl`). With
//! `OPENAI_API_KEY` (or `ANTHROPIC_API_KEY`) set, the bots use a real model
//! (`ROUNDTABLE_MODEL` picks it). Each bot's reply streams as it arrives;
//! tool calls and gate decisions are shown in brackets. With
//! `ROUNDTABLE_DATABASE_URL` set (and `--features postgres`) the thread is
//! mirrored into PostgreSQL for dashboards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use roundtable::chat_runner::{ThreadRunner, TurnLoop};
use roundtable::dispatch::{
    BotGate, BotProfile, Participant, Policy, Roster, Topic, TopicGate, Trigger,
};
use roundtable::providers::{
    ANTHROPIC_MESSAGES, AssistantBlock, AssistantMessage, Context, EventStream, HttpProvider,
    JsonObject, Message, Model, OPENAI_COMPLETIONS, Provider, ScriptStep, StopReason,
    StreamOptions, ToolCall, UserBlock, UserContent, now_millis, script_events,
};
use roundtable::thread_stream::{
    Entry, EntryBody, Expect, JsonlStore, NewEntry, ThreadId, ThreadStore,
};
use roundtable::tools::{
    Tool, ToolContext, ToolDefinition, ToolError, ToolKind, ToolRegistry, ToolResult,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;

#[path = "support/mirror.rs"]
mod mirror;

/// The demo's conversation: (speaker, text).
const DEMO: &[(&str, &str)] = &[
    (
        "alice",
        "@archivist where are the Q3 invoices? Please look up invoices",
    ),
    ("bob", "lunch at noon, anyone?"),
    ("alice", "is cargo check faster than cargo build for Rust?"),
];

#[tokio::main]
async fn main() {
    let demo = std::env::args().any(|a| a == "--demo");
    std::fs::create_dir_all("data").unwrap();
    let store: Arc<dyn ThreadStore> = Arc::new(JsonlStore::open("data").await.unwrap());
    let thread = if demo {
        ThreadId::new(format!("demo-{}", now_millis())).unwrap()
    } else {
        ThreadId::new("lobby").unwrap()
    };

    let roster = Roster::new([
        Participant::human("alice", "Alice"),
        Participant::human("bob", "Bob"),
        Participant::bot(
            "archivist",
            "Archivist",
            BotProfile::new(
                Trigger::Mention,
                "You are Archivist. You find documents with the lookup tool and answer in one sentence.",
            ),
        )
        .with_about("finds documents in the archive"),
        Participant::bot(
            "chatty",
            "Chatty",
            BotProfile::new(
                Trigger::Always,
                "You are Chatty, a friendly host. Answer in one short sentence.",
            ),
        )
        .with_about("keeps the conversation going"),
        Participant::bot(
            "rusty",
            "Rusty",
            BotProfile::new(
                Trigger::Ambient,
                "You are Rusty, a Rust expert. Answer in one or two sentences.",
            )
            .with_topics([Topic::keyword("rust"), Topic::keyword("cargo")]),
        )
        .with_about("answers Rust questions"),
    ])
    .unwrap();

    let mirror = mirror::start(&store);
    let (provider_for, model, online) = providers();
    // Gate decisions are printed by the same task as the thread, so a note
    // never lands in the middle of a bot's streamed line.
    let (notes_tx, notes_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tools = ToolRegistry::new();
    tools.register(Lookup).unwrap();
    let runner = ThreadRunner::builder(store.clone(), roster)
        .bot(
            "archivist",
            TurnLoop::new(provider_for("Archivist"), model.clone()).with_tools(Arc::new(tools)),
        )
        .bot(
            "chatty",
            TurnLoop::new(provider_for("Chatty"), model.clone()),
        )
        .bot("rusty", TurnLoop::new(provider_for("Rusty"), model.clone()))
        .policy(Policy {
            loop_events: 4,
            ..Policy::default()
        })
        .gate(Arc::new(ShowGate { notes: notes_tx }))
        .chunk_interval(Duration::from_millis(30))
        // One turn at a time keeps the terminal readable; a service would
        // let bots and threads run in parallel.
        .max_concurrent_turns(1)
        .build();

    println!(
        "roundtable multi_bot: thread {} in ./data ({}).",
        thread,
        if online {
            format!("model {}", model.id)
        } else {
            "offline, scripted bots".to_string()
        }
    );
    let before = store.last_seq(&thread).await.unwrap();
    let (shown_tx, shown) = watch::channel(before);
    tokio::spawn(show(
        store.clone(),
        thread.clone(),
        before + 1,
        notes_rx,
        shown_tx,
    ));
    runner.follow(&thread).await.unwrap();

    if demo {
        for (who, text) in DEMO {
            println!("\n{who}: {text}");
            say(&*store, &thread, who, text).await;
            settle(&runner, &*store, &thread, shown.clone()).await;
        }
        println!(
            "\n(the loop guard stopped the bots after 4 bot messages in a row; a human resets it)"
        );
        println!(
            "\nThe thread is data/{thread}.jsonl; one bot's view of it, as its model gets it:\n  cargo run --example project -- data/{thread}.jsonl archivist"
        );
    } else {
        println!(
            "Type `alice: ...` or `bob: ...` (a line without a name is Alice's); /quit to leave."
        );
        let (line_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lines() {
                let Ok(line) = line else { break };
                if line_tx.send(line).is_err() {
                    break;
                }
            }
        });
        loop {
            print!("> ");
            std::io::stdout().flush().unwrap();
            let Some(line) = lines.recv().await else {
                break;
            };
            let line = line.trim();
            if line == "/quit" {
                break;
            }
            if line.is_empty() {
                continue;
            }
            let (who, text) = match line.split_once(':') {
                Some((who, text)) if matches!(who.trim(), "alice" | "bob") => {
                    (who.trim(), text.trim())
                }
                _ => ("alice", line),
            };
            say(&*store, &thread, who, text).await;
            settle(&runner, &*store, &thread, shown.clone()).await;
        }
    }
    runner.shutdown().await;
    mirror::finish(mirror, &*store).await;
    store.close().await.unwrap();
}

async fn say(store: &dyn ThreadStore, thread: &ThreadId, who: &str, text: &str) {
    store
        .append(
            thread,
            Expect::Any,
            vec![NewEntry::new(who, EntryBody::chat(text))],
        )
        .await
        .unwrap();
}

/// Waits until the bots are done and everything is on screen.
async fn settle(
    runner: &ThreadRunner,
    store: &dyn ThreadStore,
    thread: &ThreadId,
    mut shown: watch::Receiver<u64>,
) {
    runner.idle().await.unwrap();
    let tip = store.last_seq(thread).await.unwrap();
    shown.wait_for(|&seq| seq >= tip).await.unwrap();
    println!();
}

/// Prints the thread as it grows (bots' chunks as they stream, tool calls
/// and results, failures) and the gate's notes.
async fn show(
    store: Arc<dyn ThreadStore>,
    thread: ThreadId,
    from: u64,
    mut notes: UnboundedReceiver<String>,
    shown: watch::Sender<u64>,
) {
    let mut entries = store.subscribe(&thread, from).await.unwrap();
    let mut screen = Screen::new(std::io::stdout());
    loop {
        tokio::select! {
            entry = entries.next() => {
                let Some(Ok(entry)) = entry else { break };
                screen.entry(&entry);
                shown.send_replace(entry.seq);
            }
            Some(note) = notes.recv() => screen.note(note),
        }
        screen.out.flush().unwrap();
    }
}

/// The terminal: at most one bot's line streams at a time, and notes that
/// arrive meanwhile wait until that line ends.
struct Screen<W: Write> {
    out: W,
    /// The turn whose text is streaming on the current line.
    streaming: Option<Arc<str>>,
    /// Notes held back until the streaming line ends.
    held: Vec<String>,
}

impl<W: Write> Screen<W> {
    fn new(out: W) -> Self {
        Self {
            out,
            streaming: None,
            held: Vec::new(),
        }
    }

    fn note(&mut self, note: String) {
        if self.streaming.is_some() {
            self.held.push(note);
        } else {
            write!(self.out, "\n  [{note}]").unwrap();
        }
    }

    /// Ends the streaming line, then prints the notes it held back.
    fn end_line(&mut self) {
        self.streaming = None;
        for note in std::mem::take(&mut self.held) {
            write!(self.out, "\n  [{note}]").unwrap();
        }
    }

    fn entry(&mut self, entry: &Entry) {
        let bot = &entry.author;
        match &entry.body {
            // Reasoning is not shown; the answer streams.
            EntryBody::Chunk(chunk) if chunk.kind.is_text() => {
                if self.streaming.as_deref() != Some(&*chunk.turn) {
                    self.end_line();
                    write!(self.out, "\n{bot}: ").unwrap();
                    self.streaming = Some(chunk.turn.clone());
                }
                write!(self.out, "{}", chunk.delta).unwrap();
            }
            EntryBody::Assistant(a) => {
                for call in a.message().tool_calls() {
                    self.end_line();
                    write!(
                        self.out,
                        "\n  [{bot} calls {}({})]",
                        call.name,
                        serde_json::Value::Object((*call.arguments).clone())
                    )
                    .unwrap();
                }
            }
            EntryBody::ToolResult(r) => {
                self.end_line();
                let text: String = r
                    .message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        UserBlock::Text(t) => Some(t.text.to_string()),
                        _ => None,
                    })
                    .collect();
                write!(self.out, "\n  [{} -> {text}]", r.message.tool_name).unwrap();
            }
            EntryBody::TurnEnded(_) => self.end_line(),
            EntryBody::TurnFailed(f) => {
                self.end_line();
                write!(self.out, "\n  [{bot}'s turn failed: {}]", f.reason).unwrap();
            }
            _ => {}
        }
    }
}

/// The topic gate, sending its decisions to the screen.
struct ShowGate {
    notes: UnboundedSender<String>,
}

#[async_trait]
impl BotGate for ShowGate {
    async fn admit(&self, bot: &Participant, event: &Entry) -> bool {
        let yes = TopicGate.admit(bot, event).await;
        let _ = self.notes.send(format!(
            "gate: {} {} seq {}",
            bot.id,
            if yes { "joins on" } else { "stays out of" },
            event.seq
        ));
        yes
    }
}

/// The archive's read-only `lookup` tool.
struct Lookup;

#[async_trait]
impl Tool for Lookup {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition::new(
            "lookup",
            "Finds where a document is kept in the archive. Read-only.",
            serde_json::json!({
                "type": "object",
                "properties": {"key": {"type": "string", "description": "what to look for"}},
                "required": ["key"]
            }),
            ToolKind::Read,
        )
    }

    async fn invoke(&self, _ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        let key = args
            .get("key")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_lowercase();
        let place = match key.as_str() {
            "invoices" => "/finance/2024/q3/invoices.pdf",
            "roadmap" => "/product/roadmap-2025.md",
            _ => "nowhere I know of",
        };
        Ok(ToolResult::text(format!("{key}: {place}")))
    }
}

type ProviderFor = Box<dyn Fn(&str) -> Arc<dyn Provider>>;

/// The bots' providers and model: a real one when a key is set, else the
/// offline scripted personas.
fn providers() -> (ProviderFor, Model, bool) {
    let chosen = std::env::var("ROUNDTABLE_MODEL").ok();
    if std::env::var("OPENAI_API_KEY").is_ok() {
        let id = chosen.unwrap_or_else(|| "gpt-4o-mini".into());
        let http: Arc<dyn Provider> = Arc::new(HttpProvider::new());
        let model = Model::new(
            OPENAI_COMPLETIONS,
            "openai",
            id,
            "https://api.openai.com/v1",
        );
        return (Box::new(move |_| http.clone()), model, true);
    }
    if std::env::var("ANTHROPIC_API_KEY").is_ok() {
        let id = chosen.unwrap_or_else(|| "claude-3-5-haiku-latest".into());
        let http: Arc<dyn Provider> = Arc::new(HttpProvider::new());
        let model = Model::new(
            ANTHROPIC_MESSAGES,
            "anthropic",
            id,
            "https://api.anthropic.com",
        );
        return (Box::new(move |_| http.clone()), model, true);
    }
    let model = Model::new(OPENAI_COMPLETIONS, "offline", "persona", "");
    (
        Box::new(|name| Arc::new(Persona(name.to_string())) as Arc<dyn Provider>),
        model,
        false,
    )
}

/// An offline bot: answers from what it was sent, streamed in small paced
/// deltas so that the terminal shows them arriving.
struct Persona(String);

impl Persona {
    fn reply(&self, context: &Context) -> AssistantMessage {
        let mut message =
            AssistantMessage::empty(OPENAI_COMPLETIONS, "offline", "persona", now_millis());
        // Everything said since the bot's last turn, `[Speaker]: text` a line.
        let heard = match context.messages.last() {
            Some(Message::ToolResult(r)) => {
                let found: String = r
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        UserBlock::Text(t) => Some(t.text.to_string()),
                        _ => None,
                    })
                    .collect();
                message
                    .content
                    .push(AssistantBlock::text(format!("Found it: {found}.")));
                return message;
            }
            Some(Message::User(user)) => match &user.content {
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
            _ => String::new(),
        };
        let last = heard.lines().last().unwrap_or("");
        let speaker = last
            .strip_prefix('[')
            .and_then(|rest| rest.split_once("]: "))
            .map_or("someone", |(speaker, _)| speaker);
        let text = match self.0.as_str() {
            "Archivist" => {
                // Others may have spoken after the request, before this turn.
                let asked = heard.lines().rev().find_map(|line| line.split_once("look up "));
                if let Some((_, key)) = asked {
                    let key = key.trim().trim_end_matches(['.', '?', '!']).to_string();
                    let mut args = serde_json::Map::new();
                    args.insert("key".into(), key.into());
                    message.content.push(AssistantBlock::ToolCall(ToolCall::new(
                        format!("call-{}", now_millis()),
                        "lookup",
                        args,
                    )));
                    message.stop_reason = StopReason::ToolUse;
                    return message;
                }
                format!("{speaker}, I double-checked: the archive agrees.")
            }
            "Chatty" => format!("Thanks, {speaker}! @archivist, can you double-check that?"),
            _ => "Rust tip: `cargo check` skips code generation, so it is much faster than `cargo build`.".to_string(),
        };
        message.content.push(AssistantBlock::text(text));
        message
    }
}

impl Provider for Persona {
    fn stream(&self, _model: &Model, context: &Context, _options: &StreamOptions) -> EventStream {
        let events = script_events(ScriptStep::Reply(self.reply(context)), 6);
        futures::stream::iter(events)
            .then(|event| async move {
                tokio::time::sleep(Duration::from_millis(12)).await;
                event
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roundtable::thread_stream::{Chunk, TurnEnded};

    fn entry(seq: u64, author: &str, body: EntryBody) -> Entry {
        NewEntry::new(author, body).into_entry(ThreadId::new("t").unwrap(), seq)
    }

    fn chunk(delta: &str) -> EntryBody {
        EntryBody::Chunk(Chunk::text(Arc::from("turn-1"), Arc::from(delta)))
    }

    #[test]
    fn a_note_waits_for_the_streaming_line_it_would_cut() {
        let mut screen = Screen::new(Vec::new());
        screen.entry(&entry(1, "chatty", chunk("Thanks, ")));
        screen.note(String::from("gate: rusty stays out of seq 15"));
        screen.entry(&entry(2, "chatty", chunk("Archivist!")));
        screen.entry(&entry(
            3,
            "chatty",
            EntryBody::TurnEnded(TurnEnded {
                turn: Arc::from("turn-1"),
                reason: "stop".into(),
            }),
        ));
        screen.note(String::from("gate: rusty joins on seq 16"));
        assert_eq!(
            String::from_utf8(screen.out).unwrap(),
            "\nchatty: Thanks, Archivist!\n  [gate: rusty stays out of seq 15]\n  [gate: rusty joins on seq 16]"
        );
    }
}
