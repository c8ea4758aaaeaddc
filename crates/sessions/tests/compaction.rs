//! Sessions compact like the chat runner: a long session's older part
//! becomes a summary its model reads instead, written as entries whose
//! events a client replays like any other. The scripted provider answers
//! (and writes the summaries); its replies report no usage, so every
//! request is estimated by characters (about four a token).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use roundtable_chat_runner::compaction::{CompactionConfig, CompactionError};
use roundtable_dispatch::compaction::SUMMARY_SYSTEM_PROMPT;
use roundtable_dispatch::overhead_tokens;
use roundtable_dispatch::projection::COMPACTION_PREFIX;
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, Message, OPENAI_COMPLETIONS, ScriptedProvider,
    StopReason, ToolCall, UserBlock, UserContent,
};
use roundtable_sessions::{
    Caller, EventType, SessionEngine, SessionError, SessionErrorKind, SessionEvent, SessionInfo,
    Submit,
};
use roundtable_thread_stream::{EntryBody, ThreadStore};
use support::*;

/// A final answer with no usage reported.
fn say(text: &str) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
    m.content.push(AssistantBlock::text(text));
    m
}

/// A `read_file` call with no usage reported.
fn read(id: &str, path: &str) -> AssistantMessage {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
    let args = serde_json::json!({ "path": path });
    m.content.push(AssistantBlock::ToolCall(ToolCall::new(
        id,
        "read_file",
        args.as_object().cloned().unwrap(),
    )));
    m.stop_reason = StopReason::ToolUse;
    m
}

/// `n` characters of text starting with `tag`.
fn sized(tag: &str, n: usize) -> String {
    let mut s = format!("{tag} ");
    while s.len() < n {
        s.push_str("lorem ");
    }
    s.truncate(n);
    s
}

fn text_of(m: &Message) -> String {
    let blocks = |blocks: &[UserBlock]| {
        blocks
            .iter()
            .filter_map(|b| match b {
                UserBlock::Text(t) => Some(t.text.to_string()),
                UserBlock::Image(_) => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    match m {
        Message::User(u) => match &u.content {
            UserContent::Text(t) => t.to_string(),
            UserContent::Blocks(b) => blocks(b),
        },
        Message::Assistant(a) => a.text(),
        Message::ToolResult(r) => blocks(&r.content),
    }
}

fn all_text(c: &Context) -> String {
    c.messages
        .iter()
        .map(text_of)
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_summary_request(c: &Context) -> bool {
    c.system_prompt.as_deref() == Some(SUMMARY_SYSTEM_PROMPT)
}

fn agent_requests(provider: &ScriptedProvider) -> Vec<Context> {
    provider
        .requests()
        .into_iter()
        .filter(|c| !is_summary_request(c))
        .collect()
}

/// Every tool call in `messages` is followed by its result, and every
/// result follows its call.
fn assert_calls_keep_their_results(messages: &[Message]) {
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        match m {
            Message::Assistant(a) => {
                assert!(open.is_empty(), "calls without results: {open:?}");
                open = a.tool_calls().map(|c| c.id.to_string()).collect();
            }
            Message::ToolResult(r) => {
                let at = open.iter().position(|id| **id == *r.tool_call_id);
                assert!(
                    at.is_some(),
                    "a result without its call: {}",
                    r.tool_call_id
                );
                open.remove(at.unwrap());
            }
            Message::User(_) => assert!(open.is_empty(), "calls without results: {open:?}"),
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

fn engine_with(
    store: Arc<dyn ThreadStore>,
    provider: Arc<ScriptedProvider>,
    config: CompactionConfig,
) -> SessionEngine {
    SessionEngine::builder(store, provider, model())
        .chunk_interval(Duration::from_millis(5))
        .compaction(config)
        .build()
}

/// Submits `text` and waits for its turn to end.
async fn turn(engine: &SessionEngine, caller: &Caller, session: &SessionInfo, text: &str) {
    engine
        .submit(caller, &session.id, Submit::text(text))
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();
}

fn of_kind(events: &[SessionEvent], kind: EventType) -> Vec<&SessionEvent> {
    events.iter().filter(|e| e.kind == kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_compacts_and_its_next_turn_reads_the_summary_and_the_kept_tail() {
    let fx = Fixture::new();
    let notes: String = (0..20)
        .map(|i| format!("{}\n", sized(&format!("note {i}"), 99)))
        .collect();
    std::fs::write(fx.workspace().join("notes.txt"), &notes).unwrap();
    let store = fx.store().await;
    let alice = Caller::user("alice");
    let p1 = sized("P1", 1_600);
    let p2 = sized("P2", 1_600);
    let provider = Arc::new(ScriptedProvider::new([
        say("R1"),
        say("R2"),
        read("c2", "notes.txt"),
        say("SUMMARY-ONE"),
        say("R3"),
        say("R4"),
    ]));

    // The first turn, by an engine that only compacts on demand, shows
    // what every request carries besides the conversation.
    let first = engine_with(
        store.clone(),
        provider.clone(),
        CompactionConfig::manual_only(),
    );
    let session = first.create(&alice, fx.unverified_ungated()).await.unwrap();
    turn(&first, &alice, &session, &p1).await;
    let request = &provider.requests()[0];
    let overhead = overhead_tokens(request.system_prompt.as_deref(), &request.tools);

    // From here on: compact above `overhead + 1,000` tokens, keeping about
    // 300 in full. A restarted engine over the same store.
    let engine = engine_with(
        store.clone(),
        provider.clone(),
        CompactionConfig::default()
            .with_context_window(overhead + 1_200)
            .with_reserve_tokens(200)
            .with_keep_recent_tokens(300),
    );
    turn(&engine, &alice, &session, &p2).await;
    assert!(
        of_kind(
            &all_events(&engine, &session).await,
            EventType::CompactionStarted
        )
        .is_empty()
    );

    // The third turn reads a long file: the request after the result
    // passes the threshold, and the older part is summarised.
    turn(&engine, &alice, &session, "Read notes.txt.").await;
    let requests = agent_requests(&provider);
    assert_eq!(requests.len(), 4);
    let after_compaction = &requests[3];
    let sent = all_text(after_compaction);
    assert!(sent.starts_with(COMPACTION_PREFIX), "{sent}");
    assert!(sent.contains("SUMMARY-ONE"));
    // The kept tail: the call with its result, whole.
    let Message::Assistant(call) = &after_compaction.messages[1] else {
        panic!("{:?}", after_compaction.messages)
    };
    assert_eq!(call.tool_calls().next().map(|c| &*c.id), Some("c2"));
    assert!(text_of(&after_compaction.messages[2]).contains("note 19"));
    assert_eq!(after_compaction.messages.len(), 3);
    assert_calls_keep_their_results(&after_compaction.messages);
    // The summarizer read the older part, the kept call not.
    let summarized = provider
        .requests()
        .into_iter()
        .find(is_summary_request)
        .unwrap();
    let summarized = all_text(&summarized);
    assert!(summarized.contains(&p1) && summarized.contains("R2"));
    assert!(!summarized.contains("note 19"));

    // The next turn's request: the summary, the kept tail, what followed.
    turn(&engine, &alice, &session, "Thanks.").await;
    let next = agent_requests(&provider).pop().unwrap();
    assert!(text_of(&next.messages[0]).contains("SUMMARY-ONE"));
    let rest: Vec<String> = next.messages[1..].iter().map(text_of).collect();
    assert!(
        rest.iter()
            .all(|m| !m.contains("P1 lorem") && !m.contains("P2 lorem"))
    );
    assert!(rest.iter().any(|m| m.contains("note 19")));
    assert!(rest.iter().any(|m| m == "R3"));
    assert!(rest.last().unwrap().contains("Thanks."));
    assert_calls_keep_their_results(&next.messages);
    assert_eq!(provider.remaining(), 0);

    // The events: one compaction, in the third turn, derived from its
    // records around the summary entry.
    let events = all_events(&engine, &session).await;
    let started = of_kind(&events, EventType::CompactionStarted);
    let ended = of_kind(&events, EventType::CompactionEnded);
    assert_eq!((started.len(), ended.len()), (1, 1));
    let (started, ended) = (started[0], ended[0]);
    assert_eq!(started.data["reason"], "threshold");
    assert!(started.data["tokens_before"].as_u64().unwrap() > overhead + 1_000);
    assert_eq!(started.turn_id, ended.turn_id);
    assert!(started.turn_id.is_some());
    assert!(ended.data["tokens_after"].as_u64().unwrap() < overhead + 1_000);
    assert_eq!(ended.data["error"], serde_json::Value::Null);
    let entries = store
        .read_all(&roundtable_thread_stream::ThreadId::new(&*session.id).unwrap())
        .await
        .unwrap();
    let summary = entries
        .iter()
        .find(|e| matches!(e.body, EntryBody::Compaction(_)))
        .unwrap();
    let EntryBody::Compaction(compaction) = &summary.body else {
        unreachable!()
    };
    assert_eq!(ended.data["covers_seq"], compaction.upto);
    assert!(started.id.seq < summary.seq && summary.seq < ended.id.seq);
    // Every event comes from a stored entry.
    for event in &events {
        assert!(entries.iter().any(|e| e.seq == event.id.seq));
    }

    // A client that resumes from an event before the compaction sees it
    // exactly once, live and from history alike, from a third engine.
    let resumed = engine_with(
        store.clone(),
        Arc::new(ScriptedProvider::new(Vec::<AssistantMessage>::new())),
        CompactionConfig::default(),
    );
    let before = events
        .iter()
        .filter(|e| e.kind == EventType::TurnStarted)
        .nth(2)
        .unwrap()
        .id;
    assert!(before < started.id);
    let last = events.last().unwrap().id;
    let mut stream = resumed
        .subscribe(&alice, &session.id, Some(before))
        .await
        .unwrap();
    let replayed = read_until(&mut stream, |e| e.id == last).await;
    assert_eq!(
        replayed,
        events[events.iter().position(|e| e.id == before).unwrap() + 1..]
    );
    assert_eq!(of_kind(&replayed, EventType::CompactionStarted).len(), 1);
    assert_eq!(of_kind(&replayed, EventType::CompactionEnded).len(), 1);
    let listed = resumed
        .events(&alice, &session.id, Some(before))
        .await
        .unwrap();
    assert_eq!(listed, replayed);
    // From an id after it: no compaction.
    let after = resumed
        .events(&alice, &session.id, Some(ended.id))
        .await
        .unwrap();
    assert!(of_kind(&after, EventType::CompactionStarted).is_empty());
    assert!(of_kind(&after, EventType::CompactionEnded).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_compacts_a_session_on_demand() {
    let fx = Fixture::new();
    let store = fx.store().await;
    let provider = Arc::new(ScriptedProvider::new([
        say("first answer"),
        say("second answer"),
        say("SUMMARY"),
        say("third answer"),
        say("SUMMARY-TWO"),
    ]));
    let engine = engine_with(
        store.clone(),
        provider.clone(),
        CompactionConfig::manual_only().with_keep_recent_tokens(1),
    );
    let alice = Caller::user("alice");
    let session = engine
        .create(&alice, fx.unverified_ungated())
        .await
        .unwrap();
    turn(&engine, &alice, &session, "first question").await;
    turn(&engine, &alice, &session, "second question").await;

    // Another user's session is not found.
    let refused = engine
        .compact(&Caller::user("bob"), &session.id, None)
        .await;
    assert!(
        matches!(refused, Err(SessionError::UnknownSession(_))),
        "{refused:?}"
    );

    let mut events = engine.subscribe(&alice, &session.id, None).await.unwrap();
    let report = engine
        .compact(&alice, &session.id, Some("the answers".into()))
        .await
        .unwrap();
    let seen = read_until(&mut events, |e| e.kind == EventType::CompactionEnded).await;
    let started = of_kind(&seen, EventType::CompactionStarted);
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].data["reason"], "manual");
    assert_eq!(started[0].turn_id, None);
    let ended = seen.last().unwrap();
    assert_eq!(ended.data["covers_seq"], report.covers_seq);
    assert_eq!(ended.id.seq, report.entry_seq + 1);
    let summary_request = provider
        .requests()
        .into_iter()
        .find(is_summary_request)
        .unwrap();
    let asked = all_text(&summary_request);
    assert!(asked.contains("first answer") && asked.contains("second question"));
    assert!(asked.contains("Stress in particular: the answers"));

    // The next turn reads the summary and the newest message in full.
    turn(&engine, &alice, &session, "third question").await;
    let request = agent_requests(&provider).pop().unwrap();
    assert!(text_of(&request.messages[0]).starts_with(COMPACTION_PREFIX));
    assert!(text_of(&request.messages[0]).contains("SUMMARY"));
    let rest: Vec<String> = request.messages[1..].iter().map(text_of).collect();
    assert!(rest.iter().all(|m| !m.contains("first answer")));
    assert_eq!(rest[0], "second answer");
    assert!(rest[1].contains("third question"));

    // Compacting again folds the first summary in and keeps the newest
    // message (the third answer)...
    let thread = roundtable_thread_stream::ThreadId::new(&*session.id).unwrap();
    let before = store.read_all(&thread).await.unwrap().len();
    let again = engine.compact(&alice, &session.id, None).await.unwrap();
    assert!(again.covers_seq > report.covers_seq);
    let now = store.read_all(&thread).await.unwrap().len();
    assert_eq!(now, before + 3);
    let folded = provider
        .requests()
        .into_iter()
        .filter(is_summary_request)
        .nth(1)
        .unwrap();
    assert!(all_text(&folded).contains("<previous-summary>\nSUMMARY"));
    // ...and then only one message is left after the summary: a conflict,
    // and nothing is written.
    let error = engine.compact(&alice, &session.id, None).await.unwrap_err();
    assert!(matches!(
        error,
        SessionError::Compaction(CompactionError::NothingToCompact)
    ));
    assert_eq!(error.kind(), SessionErrorKind::Conflict);
    assert_eq!(store.read_all(&thread).await.unwrap().len(), now);
}
