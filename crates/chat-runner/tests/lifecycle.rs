//! The turn lifecycle on a thread: what a turn's writer stores, in order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_chat_runner::lifecycle::approvals::{
    ApprovalDecidedRecord, ApprovalRequestedRecord, ApprovalVerdict,
};
use roundtable_chat_runner::lifecycle::{TurnWriter, turn_started};
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

    let bot: Arc<str> = Arc::from("bot");
    let turn: Arc<str> = Arc::from("turn_1");
    store
        .append(
            &thread,
            Expect::Any,
            vec![
                NewEntry::new(
                    "alice",
                    roundtable_thread_stream::EntryBody::chat("deploy it"),
                ),
                turn_started(&bot, &turn, None),
            ],
        )
        .await
        .unwrap();
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
