//! The turn lifecycle on a thread: what a turn's writer stores, in order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_chat_runner::lifecycle::records::{
    ApprovalDecidedRecord, ApprovalRequestedRecord, ApprovalVerdict,
};
use roundtable_chat_runner::lifecycle::{TurnWriteLoop, TurnWriter, turn_started};
use roundtable_chat_runner::{ApproveAll, TurnHooks, TurnInput, TurnLoop, TurnRequest};
use roundtable_providers::{Message, ScriptedProvider, UserMessage};
use roundtable_test_support::scripted::*;
use roundtable_test_support::tools::*;
use roundtable_thread_stream::{
    Chat, EntryBody, Expect, MemoryStore, NewEntry, ThreadId, ThreadStore,
};
use roundtable_tools::{ApprovalPolicy, ToolKind, ToolRegistry, ToolResult};
use tokio_util::sync::CancellationToken;

struct OneSteer;

#[async_trait]
impl TurnHooks for OneSteer {
    async fn before_model_call(&self, _turn: &Arc<str>, round: u32) -> Vec<TurnInput> {
        if round != 2 {
            return Vec::new();
        }
        vec![TurnInput {
            author: "alice".into(),
            id: Some("msg_steer".into()),
            chat: Chat::new("use the staging server"),
            message: UserMessage::text("[Alice]: use the staging server", 3),
        }]
    }
}

/// Alice's `prompt` on `thread`, and the bot's turn `turn_1` started on it:
/// the thread as a runner leaves it before the turn's writer starts.
async fn open_turn(
    store: &Arc<dyn ThreadStore>,
    thread: &ThreadId,
    prompt: &str,
) -> (Arc<str>, Arc<str>) {
    let bot: Arc<str> = Arc::from("bot");
    let turn: Arc<str> = Arc::from("turn_1");
    store
        .append(
            thread,
            Expect::Any,
            vec![
                NewEntry::new("alice", roundtable_thread_stream::EntryBody::chat(prompt)),
                turn_started(&bot, &turn, None),
            ],
        )
        .await
        .unwrap();
    (bot, turn)
}

#[tokio::test]
async fn a_turn_stores_its_approvals_inputs_and_messages_in_the_order_they_happened() {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let thread = ThreadId::new("t").unwrap();
    let mut tools = ToolRegistry::new().with_approval_policy(ApprovalPolicy::default());
    tools
        .register(tool("deploy", ToolKind::Exec, |_, _| async {
            Ok(ToolResult::text("deployed"))
        }))
        .unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[("c1", "deploy", serde_json::json!({}))]),
        text("Deployed to staging."),
    ]));
    let turns = TurnLoop::new(provider, model())
        .with_tools(Arc::new(tools))
        .with_approver(Arc::new(ApproveAll));

    let (bot, turn) = open_turn(&store, &thread, "deploy it").await;
    let writer = TurnWriter::start(
        store.clone(),
        thread.clone(),
        bot.clone(),
        turn.clone(),
        None,
    );
    let sink = writer.sink();
    let request = TurnRequest::new(vec![Message::from(UserMessage::text("deploy it", 1))])
        .with_turn_id(turn.clone())
        .with_hooks(Arc::new(OneSteer));
    let outcome = turns.run(request, CancellationToken::new(), &sink).await;
    // Entries appended through the sink land after what the turn wrote.
    let noted = sink
        .append(vec![NewEntry::new(bot.clone(), EntryBody::chat("(noted)"))])
        .await
        .unwrap();
    assert_eq!(noted.len(), 1);
    writer.end(&outcome, Vec::new()).await.unwrap();

    let entries = store.read_all(&thread).await.unwrap();
    let kinds: Vec<String> = entries.iter().map(|e| e.body.kind().to_string()).collect();
    assert_eq!(
        kinds,
        [
            "chat",
            "turn.started",
            "pi.assistant",
            "signal.approval_requested",
            "signal.approval_decided",
            "pi.tool_result",
            "chat",
            "pi.assistant",
            "chat",
            "turn.ended",
        ]
    );
    assert_eq!(noted[0].seq, 9);
    let requested = ApprovalRequestedRecord::from_body(&entries[3].body).unwrap();
    assert_eq!((&*requested.call_id, &*requested.tool), ("c1", "deploy"));
    let decided = ApprovalDecidedRecord::from_body(&entries[4].body).unwrap();
    assert_eq!(decided.verdict, ApprovalVerdict::Approve);
    // The steering message is stored as its author wrote it, with its id.
    assert_eq!(&*entries[6].author, "alice");
    assert_eq!(&*entries[6].id, "msg_steer");
    let EntryBody::Chat(chat) = &entries[6].body else {
        panic!("a chat entry")
    };
    assert_eq!(&*chat.text, "use the staging server");
}

/// Collects what a writer reports as stored.
#[derive(Default)]
struct Collected(std::sync::Mutex<Vec<roundtable_thread_stream::Entry>>);

impl roundtable_chat_runner::lifecycle::StoredEntries for Collected {
    fn stored(&self, entries: &[roundtable_thread_stream::Entry]) {
        self.0.lock().unwrap().extend_from_slice(entries);
    }
}

#[tokio::test]
async fn an_inline_writer_stores_the_same_turn_and_reports_every_entry_as_stored() {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let thread = ThreadId::new("t").unwrap();
    let mut tools = ToolRegistry::new();
    tools
        .register(tool("lookup", ToolKind::Read, |_, _| async {
            Ok(ToolResult::text("found"))
        }))
        .unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        calls(&[("c1", "lookup", serde_json::json!({}))]),
        text("Found it."),
    ]));
    let turns = TurnLoop::new(provider, model()).with_tools(Arc::new(tools));
    let (bot, turn) = open_turn(&store, &thread, "look it up").await;

    let seen = Arc::new(Collected::default());
    let (writer, writing) = TurnWriter::start_inline(
        store.clone(),
        thread.clone(),
        bot.clone(),
        turn.clone(),
        None,
        Some(seen.clone()),
    );
    let sink = writer.sink();
    // The write loop runs in this task, beside the turn and its end.
    let run_and_end = async {
        let request = TurnRequest::new(vec![Message::from(UserMessage::text("look it up", 1))])
            .with_turn_id(turn.clone());
        let outcome = turns.run(request, CancellationToken::new(), &sink).await;
        drop(sink);
        writer.end(&outcome, Vec::new()).await
    };
    let ((), ended) = futures::join!(writing.run(), run_and_end);
    ended.unwrap();

    let entries = store.read_all(&thread).await.unwrap();
    let kinds: Vec<String> = entries.iter().map(|e| e.body.kind().to_string()).collect();
    assert_eq!(
        kinds,
        [
            "chat",
            "turn.started",
            "pi.assistant",
            "pi.tool_result",
            "pi.assistant",
            "turn.ended",
        ]
    );
    // Everything the turn's writer stored was reported, once, in order,
    // the closing entry included; what was there before was not.
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen, entries[2..].to_vec());
}

/// A writer of turn `turn_1` on a fresh thread `t`, whose text deltas are
/// held 5 ms (the thread holds Alice's `hi` and the turn's start).
async fn chunking_writer() -> (
    Arc<dyn ThreadStore>,
    ThreadId,
    Arc<str>,
    Arc<str>,
    TurnWriter,
    TurnWriteLoop,
) {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let thread = ThreadId::new("t").unwrap();
    let (bot, turn) = open_turn(&store, &thread, "hi").await;
    let (writer, writing) = TurnWriter::start_inline(
        store.clone(),
        thread.clone(),
        bot.clone(),
        turn.clone(),
        Some(std::time::Duration::from_millis(5)),
        None,
    );
    (store, thread, bot, turn, writer, writing)
}

/// A text delta for `turn`.
fn delta(turn: &Arc<str>, text: &str) -> roundtable_chat_runner::TurnEvent {
    roundtable_chat_runner::TurnEvent::OutputDelta {
        turn: turn.clone(),
        round: 1,
        kind: roundtable_chat_runner::OutputKind::Text,
        delta: text.into(),
    }
}

#[tokio::test]
async fn held_text_is_written_when_its_time_is_up_and_when_every_sink_is_gone() {
    use roundtable_chat_runner::EventSink;

    let (store, thread, _, turn, writer, writing) = chunking_writer().await;
    let sink = writer.sink();
    let drive = async {
        // Two deltas held together, written as one chunk once the
        // interval is up, with no other event to carry them.
        sink.emit(delta(&turn, "Hel"));
        sink.emit(delta(&turn, "lo"));
        let mut chunks = 0;
        // Waited for, not timed: a loaded machine may take its time.
        for _ in 0..2000 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            chunks = store.read_all(&thread).await.unwrap().len() - 2;
            if chunks > 0 {
                break;
            }
        }
        assert_eq!(chunks, 1, "the held text was written once its time was up");
        // More text, then every sink (the writer's own too) goes without
        // closing the writer: the loop writes what it holds and stops.
        sink.emit(delta(&turn, " again"));
        drop(sink);
        drop(writer);
    };
    // The loop returning at all is the test of its stop.
    let ((), ()) = futures::join!(writing.run(), drive);
    let texts: Vec<String> = store
        .read_all(&thread)
        .await
        .unwrap()
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Chunk(chunk) => Some(chunk.delta.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hello", " again"]);
}

#[tokio::test]
async fn a_closed_writer_drops_late_events_and_refuses_late_appends() {
    use roundtable_chat_runner::EventSink;

    let (store, thread, bot, turn, writer, writing) = chunking_writer().await;
    let late = writer.sink();
    let close = async {
        let outcome = roundtable_chat_runner::TurnOutcome {
            turn_id: turn.clone(),
            text: String::new(),
            finish_reason: roundtable_thread_stream::FinishReason::Stop,
            error: None,
            messages: Vec::new(),
            usage: Default::default(),
            rounds: 0,
            duration: std::time::Duration::ZERO,
        };
        writer.end(&outcome, Vec::new()).await.unwrap();
        // The turn is over: what a leftover sink sends is not written.
        late.emit(delta(&turn, "too late"));
        let refused = late.append(vec![NewEntry::new(bot.clone(), EntryBody::chat("late"))]);
        assert!(
            refused.await.is_err(),
            "an append after the close is an error"
        );
    };
    let ((), ()) = futures::join!(writing.run(), close);
    let kinds: Vec<String> = store
        .read_all(&thread)
        .await
        .unwrap()
        .iter()
        .map(|e| e.body.kind().to_string())
        .collect();
    assert_eq!(kinds, ["chat", "turn.started", "turn.ended"]);
}
