//! Compaction end to end: the chat runner and the thread runner over a
//! memory store, a scripted provider that also writes the summaries, and
//! the deterministic estimate (about four characters a token; scripted
//! replies report no usage, so every request is estimated by characters).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures::StreamExt;
use roundtable_chat_runner::compaction::{CompactionConfig, CompactionError};
use roundtable_chat_runner::lifecycle::records::{CompactionEndedRecord, CompactionStartedRecord};
use roundtable_chat_runner::{
    ChatError, ChatRunner, CompactionReason, FinishReason, ThreadRunner, TurnEvent, TurnLoop,
    TurnOptions,
};
use roundtable_dispatch::compaction::SUMMARY_SYSTEM_PROMPT;
use roundtable_dispatch::projection::COMPACTION_PREFIX;
use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger, build_messages};
use roundtable_providers::{
    AssistantBlock, AssistantMessage, Context, ErrorKind, EventStream, Message, Model,
    OPENAI_COMPLETIONS, Provider, ScriptStep, ScriptedProvider, StopReason, StreamOptions,
    ToolCall, UserBlock, UserContent,
};
use roundtable_test_support::messages::assert_history_valid;
use roundtable_test_support::runner::Recorder;
use roundtable_test_support::tools::tool;
use roundtable_thread_stream::{
    Entry, EntryBody, Expect, MemoryStore, NewEntry, ThreadId, ThreadStore,
};
use roundtable_tools::{ToolKind, ToolRegistry, ToolResult};

fn model() -> Model {
    Model::new(OPENAI_COMPLETIONS, "scripted", "m", "")
}

/// A reply with no usage reported, so requests are estimated by characters.
fn reply(text: &str) -> ScriptStep {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
    m.content.push(AssistantBlock::text(text));
    ScriptStep::Reply(m)
}

fn call(id: &str, name: &str) -> ScriptStep {
    let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
    m.content.push(AssistantBlock::ToolCall(ToolCall::new(
        id,
        name,
        serde_json::Map::new(),
    )));
    m.stop_reason = StopReason::ToolUse;
    ScriptStep::Reply(m)
}

fn overflow() -> ScriptStep {
    ScriptStep::Fail {
        kind: ErrorKind::ContextOverflow,
        message: AssistantMessage::failure(
            &model(),
            StopReason::Error,
            "prompt is too long: 210000 tokens > 200000 maximum",
            1,
        ),
    }
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

/// A window of 1,000 tokens: compact above 800, keep about 100 in full.
fn small_window() -> CompactionConfig {
    CompactionConfig::default()
        .with_context_window(1_000)
        .with_reserve_tokens(200)
        .with_keep_recent_tokens(100)
}

fn text_of(m: &Message) -> String {
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

fn all_text(context: &Context) -> String {
    context
        .messages
        .iter()
        .map(text_of)
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_summary_request(c: &Context) -> bool {
    c.system_prompt.as_deref() == Some(SUMMARY_SYSTEM_PROMPT)
}

fn summary_requests(provider: &ScriptedProvider) -> Vec<Context> {
    provider
        .requests()
        .into_iter()
        .filter(is_summary_request)
        .collect()
}

fn bot_requests(provider: &ScriptedProvider) -> Vec<Context> {
    provider
        .requests()
        .into_iter()
        .filter(|c| !is_summary_request(c))
        .collect()
}

fn compactions(entries: &[Entry]) -> Vec<(u64, u64, String)> {
    entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Compaction(c) => Some((e.seq, c.upto, c.summary.to_string())),
            _ => None,
        })
        .collect()
}

fn compaction_events(events: &[TurnEvent]) -> Vec<TurnEvent> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                TurnEvent::CompactionStarted { .. } | TurnEvent::CompactionEnded { .. }
            )
        })
        .cloned()
        .collect()
}

async fn chat_runner(
    provider: Arc<ScriptedProvider>,
    store: Arc<MemoryStore>,
    config: CompactionConfig,
) -> ChatRunner {
    ChatRunner::builder(provider, store)
        .model(model())
        .system_prompt("sys")
        .compaction(config)
        .build()
        .await
        .unwrap()
}

async fn turn(
    runner: &ChatRunner,
    prompt: &str,
) -> (roundtable_chat_runner::chat::ChatTurn, Vec<TurnEvent>) {
    let recorder = Arc::new(Recorder::default());
    let turn = runner
        .turn_with(
            "k",
            prompt,
            TurnOptions {
                sink: Some(recorder.clone()),
                ..TurnOptions::default()
            },
        )
        .await
        .unwrap();
    (turn, recorder.events())
}

#[tokio::test]
async fn a_second_compaction_summarises_the_first_summary_and_every_entry_in_between() {
    let provider = Arc::new(ScriptedProvider::new([
        reply(&sized("R1", 200)),
        reply(&sized("R2", 200)),
        reply("SUMMARY-ONE"),
        reply(&sized("R3", 200)),
        reply(&sized("R4", 200)),
        reply("SUMMARY-TWO"),
        reply(&sized("R5", 200)),
    ]));
    let store = Arc::new(MemoryStore::new());
    let runner = chat_runner(provider.clone(), store.clone(), small_window()).await;
    let p: Vec<String> = (1..=5).map(|i| sized(&format!("P{i}"), 1_000)).collect();

    for prompt in &p[..2] {
        let (_, events) = turn(&runner, prompt).await;
        assert!(compaction_events(&events).is_empty());
    }
    // The third request passes 800 tokens: the first two exchanges are
    // summarised, the newest prompt stays.
    let (third, events) = turn(&runner, &p[2]).await;
    assert_eq!(third.outcome.text, sized("R3", 200));
    let events = compaction_events(&events);
    assert!(matches!(
        &events[0],
        TurnEvent::CompactionStarted { reason: CompactionReason::Threshold, tokens_before, .. } if *tokens_before > 800
    ));
    let TurnEvent::CompactionEnded {
        covers_seq: Some(first_upto),
        tokens_after: Some(after),
        error: None,
        will_retry: false,
        ..
    } = &events[1]
    else {
        panic!("{events:?}");
    };
    assert!(*after < 700);
    let request = bot_requests(&provider).pop().unwrap();
    let sent = all_text(&request);
    assert!(sent.starts_with(COMPACTION_PREFIX));
    assert!(sent.contains("SUMMARY-ONE") && sent.contains(&p[2]));
    assert!(!sent.contains(&p[0]) && !sent.contains("R2 lorem"));

    let (_, events) = turn(&runner, &p[3]).await;
    assert!(
        compaction_events(&events).is_empty(),
        "{:?} {:#?}",
        compaction_events(&events),
        bot_requests(&provider).last().map(all_text)
    );
    let (_, events) = turn(&runner, &p[4]).await;
    assert_eq!(compaction_events(&events).len(), 2);

    let summaries = summary_requests(&provider);
    assert_eq!(summaries.len(), 2);
    let second = all_text(&summaries[1]);
    // The previous summary, and every entry after it up to the new cut.
    assert!(second.contains("<previous-summary>\nSUMMARY-ONE\n</previous-summary>"));
    for piece in [&p[2], &sized("R3", 200), &p[3], &sized("R4", 200)] {
        assert!(second.contains(piece.as_str()), "{piece} missing");
    }
    // Nothing the first summary covered, nothing kept in full.
    for piece in [&p[0], &p[1], &sized("R1", 200), &p[4]] {
        assert!(!second.contains(piece.as_str()), "{piece} summarised again");
    }

    let entries = store
        .read_all(&ChatRunner::session_thread(&runner.session_id("k").unwrap()).unwrap())
        .await
        .unwrap();
    let written = compactions(&entries);
    assert_eq!(written.len(), 2);
    assert_eq!(written[0].1, *first_upto);
    assert!(written[1].2.starts_with("SUMMARY-TWO"));
    // The second covers everything before the last prompt.
    let last_prompt = entries
        .iter()
        .rev()
        .find(|e| matches!(&e.body, EntryBody::Chat(c) if *c.text == *p[4]))
        .unwrap();
    assert_eq!(written[1].1, last_prompt.seq - 1);
    // The thread now projects to the second summary and the kept tail.
    let roster = Roster::new([Participant::bot(
        "assistant",
        "assistant",
        BotProfile::new(Trigger::Mention, ""),
    )])
    .unwrap();
    let projected = build_messages("assistant", &entries, &roster);
    assert!(text_of(&projected[0]).contains("SUMMARY-TWO"));
    assert!(text_of(&projected[0]).contains(&p[4]));
    assert_eq!(text_of(&projected[1]), sized("R5", 200));
    assert_history_valid(&projected);
}

fn session_entries_of(
    runner: &ChatRunner,
    store: &MemoryStore,
) -> impl std::future::Future<Output = Vec<Entry>> {
    let thread = ChatRunner::session_thread(&runner.session_id("k").unwrap()).unwrap();
    let store = store.clone();
    async move { store.read_all(&thread).await.unwrap() }
}

fn kinds(entries: &[Entry]) -> Vec<String> {
    entries.iter().map(|e| e.body.kind().to_string()).collect()
}

#[tokio::test]
async fn an_overflow_is_compacted_and_retried_once_and_the_refused_reply_stays_out() {
    let provider = Arc::new(ScriptedProvider::new([
        reply("first answer"),
        overflow(),
        reply("SUMMARY"),
        reply("second answer"),
    ]));
    let store = Arc::new(MemoryStore::new());
    let runner = chat_runner(provider.clone(), store.clone(), CompactionConfig::default()).await;
    turn(&runner, "first question").await;
    let (done, events) = turn(&runner, "second question").await;
    assert_eq!(done.outcome.finish_reason, FinishReason::Stop);
    assert_eq!(done.outcome.text, "second answer");
    assert_eq!(done.outcome.rounds, 2);
    let events = compaction_events(&events);
    assert!(
        matches!(
            events[..],
            [
                TurnEvent::CompactionStarted {
                    reason: CompactionReason::Overflow,
                    ..
                },
                TurnEvent::CompactionEnded {
                    reason: CompactionReason::Overflow,
                    covers_seq: Some(_),
                    will_retry: true,
                    error: None,
                    ..
                },
            ]
        ),
        "{events:?}"
    );

    let requests = bot_requests(&provider);
    assert_eq!(requests.len(), 3);
    let retried = &requests[2];
    assert!(all_text(retried).starts_with(COMPACTION_PREFIX));
    assert!(all_text(retried).contains("second question"));
    assert!(
        retried
            .messages
            .iter()
            .all(|m| !matches!(m, Message::Assistant(a) if a.stop_reason.is_failure()))
    );

    // The refused reply is stored (as a failed message), then the summary,
    // then the answer; the next projection leaves the refused reply out.
    let entries = session_entries_of(&runner, &store).await;
    let tail: Vec<String> = kinds(&entries).into_iter().rev().take(7).rev().collect();
    assert_eq!(
        tail,
        [
            "pi.assistant",
            "signal.compaction_started",
            "compaction",
            "signal.compaction_ended",
            "pi.assistant",
            "turn.ended",
            "signal.turn_result"
        ]
    );
    let ended = entries
        .iter()
        .find_map(|e| CompactionEndedRecord::from_body(&e.body))
        .unwrap();
    assert_eq!(ended.reason, CompactionReason::Overflow);
    assert!(ended.will_retry && ended.covers_seq.is_some());
    let roster = Roster::new([Participant::bot(
        "assistant",
        "assistant",
        BotProfile::new(Trigger::Mention, ""),
    )])
    .unwrap();
    let projected = build_messages("assistant", &entries, &roster);
    assert!(
        projected
            .iter()
            .all(|m| !matches!(m, Message::Assistant(a) if a.stop_reason.is_failure()))
    );
    assert_eq!(text_of(projected.last().unwrap()), "second answer");
}

#[tokio::test]
async fn a_second_overflow_in_the_same_turn_ends_it_with_the_models_error() {
    let provider = Arc::new(ScriptedProvider::new([
        reply("first answer"),
        overflow(),
        reply("SUMMARY"),
        overflow(),
    ]));
    let store = Arc::new(MemoryStore::new());
    let runner = chat_runner(provider.clone(), store.clone(), CompactionConfig::default()).await;
    turn(&runner, "first question").await;
    let (done, events) = turn(&runner, "second question").await;
    assert_eq!(done.outcome.finish_reason, FinishReason::Error);
    assert!(
        done.outcome
            .error
            .as_deref()
            .unwrap()
            .contains("prompt is too long")
    );
    let events = compaction_events(&events);
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(matches!(
        events[1],
        TurnEvent::CompactionEnded {
            will_retry: true,
            ..
        }
    ));
    let TurnEvent::CompactionEnded {
        will_retry: false,
        covers_seq: None,
        error: Some(error),
        ..
    } = &events[3]
    else {
        panic!("{events:?}");
    };
    assert!(error.contains("again"));
    // Exactly one summary and one retry: nothing left in the script.
    assert_eq!(summary_requests(&provider).len(), 1);
    assert_eq!(bot_requests(&provider).len(), 3);
    assert_eq!(provider.remaining(), 0);
    assert_eq!(
        compactions(&session_entries_of(&runner, &store).await).len(),
        1
    );
}

#[tokio::test]
async fn a_system_prompt_above_the_threshold_never_compacts_and_says_so_once() {
    let provider = Arc::new(ScriptedProvider::new([
        reply("one"),
        reply("two"),
        reply("three"),
    ]));
    let store = Arc::new(MemoryStore::new());
    let runner = ChatRunner::builder(provider.clone(), store.clone())
        .model(model())
        .system_prompt(sized("house rules", 4_000))
        .compaction(small_window())
        .build()
        .await
        .unwrap();
    let (done, events) = turn(&runner, "hello").await;
    assert_eq!(done.outcome.text, "one");
    let events = compaction_events(&events);
    let [
        TurnEvent::CompactionStarted { .. },
        TurnEvent::CompactionEnded {
            covers_seq: None,
            error: Some(error),
            ..
        },
    ] = &events[..]
    else {
        panic!("{events:?}");
    };
    assert!(error.contains("cannot help"), "{error}");
    for prompt in ["again", "and again"] {
        let (_, events) = turn(&runner, prompt).await;
        assert!(compaction_events(&events).is_empty());
    }
    assert!(summary_requests(&provider).is_empty());
    assert!(compactions(&session_entries_of(&runner, &store).await).is_empty());
}

#[tokio::test]
async fn the_trigger_fires_inside_a_tool_loop_and_keeps_the_last_call_with_its_result() {
    let (runner, provider, store) =
        two_fetches_runner(|call_id| sized(&format!("output of {call_id}"), 1_800)).await;
    let (done, events) = turn(&runner, "fetch twice").await;
    assert_eq!(done.outcome.text, "done");
    assert_eq!(done.outcome.rounds, 3);
    // Compacted before the third request, after the second call's result.
    let position = |pred: &dyn Fn(&TurnEvent) -> bool| events.iter().position(pred).unwrap();
    let started = position(&|e| matches!(e, TurnEvent::CompactionStarted { .. }));
    let second_result = position(
        &|e| matches!(e, TurnEvent::ToolCallCompleted { call_id, .. } if &**call_id == "c2"),
    );
    let third_reply = position(&|e| matches!(e, TurnEvent::OutputCompleted { round: 3, .. }));
    assert!(second_result < started && started < third_reply);

    let third = bot_requests(&provider).pop().unwrap();
    assert!(text_of(&third.messages[0]).starts_with(COMPACTION_PREFIX));
    let Message::Assistant(a) = &third.messages[1] else {
        panic!("{:?}", third.messages)
    };
    assert_eq!(a.tool_calls().next().map(|c| &*c.id), Some("c2"));
    assert!(matches!(&third.messages[2], Message::ToolResult(r) if &*r.tool_call_id == "c2"));
    assert_eq!(third.messages.len(), 3);
    assert_history_valid(&third.messages);
    let summary = all_text(&summary_requests(&provider)[0]);
    assert!(summary.contains("output of c1") && !summary.contains("output of c2"));

    // The compaction entry sits among the turn's entries, each written once.
    let entries = session_entries_of(&runner, &store).await;
    let turn_kinds: Vec<String> = kinds(&entries)
        .into_iter()
        .skip_while(|k| k != "turn.started")
        .collect();
    assert_eq!(
        turn_kinds,
        [
            "turn.started",
            "pi.assistant",
            "pi.tool_result",
            "pi.assistant",
            "pi.tool_result",
            "signal.compaction_started",
            "compaction",
            "signal.compaction_ended",
            "pi.assistant",
            "turn.ended",
            "signal.turn_result"
        ]
    );
    // The records say what the events said, with the turn's id.
    let started = entries
        .iter()
        .find_map(|e| CompactionStartedRecord::from_body(&e.body))
        .unwrap();
    assert_eq!(started.reason, CompactionReason::Threshold);
    assert!(started.tokens_before > 800);
    let ended = entries
        .iter()
        .find_map(|e| CompactionEndedRecord::from_body(&e.body))
        .unwrap();
    assert_eq!(started.turn, ended.turn);
    assert!(started.turn.is_some());
    assert_eq!(ended.covers_seq, Some(compactions(&entries)[0].1));
    assert!(ended.tokens_after.unwrap() < 800 && ended.error.is_none());
}

// The thread runner: each bot compacts its own view.

fn thread_roster() -> Roster {
    Roster::new([
        Participant::human("alice", "Alice").with_about("runs the release"),
        Participant::human("bob", "Bob"),
        Participant::bot(
            "scribe",
            "Scribe",
            BotProfile::new(Trigger::Mention, "You keep notes."),
        ),
        Participant::bot(
            "critic",
            "Critic",
            BotProfile::new(Trigger::Mention, "You review."),
        ),
    ])
    .unwrap()
}

async fn say(store: &MemoryStore, thread: &ThreadId, author: &str, text: &str) -> Entry {
    store
        .append(
            thread,
            Expect::Any,
            vec![NewEntry::new(author, EntryBody::chat(text))],
        )
        .await
        .unwrap()
        .remove(0)
}

/// The entries without `bot`'s compaction entries.
fn without_compactions_of(bot: &str, entries: &[Entry]) -> Vec<Entry> {
    entries
        .iter()
        .filter(|e| !(matches!(e.body, EntryBody::Compaction(_)) && &*e.author == bot))
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bots_compaction_leaves_the_other_bots_view_unchanged() {
    let scribe = Arc::new(ScriptedProvider::new([
        reply(&sized("S1", 200)),
        reply(&sized("S2", 200)),
        reply("SCRIBE-SUMMARY"),
        reply(&sized("S3", 200)),
    ]));
    let critic = Arc::new(ScriptedProvider::new([reply("critic says hi")]));
    let store = Arc::new(MemoryStore::new());
    let runner = ThreadRunner::builder(store.clone(), thread_roster())
        .bot("scribe", TurnLoop::new(scribe.clone(), model()))
        .bot("critic", TurnLoop::new(critic.clone(), model()))
        .compaction(small_window())
        .build();
    let thread = ThreadId::new("release").unwrap();
    runner.follow(&thread).await.unwrap();
    for (author, text) in [
        ("alice", format!("@scribe {}", sized("m1", 1_000))),
        ("bob", "@critic hello".to_string()),
        ("alice", format!("@scribe {}", sized("m3", 1_000))),
        ("alice", format!("@scribe {}", sized("m4", 1_000))),
    ] {
        say(&store, &thread, author, &text).await;
        runner.idle().await.unwrap();
    }
    let entries = store.read_all(&thread).await.unwrap();
    let written = compactions(&entries);
    assert_eq!(written.len(), 1, "{:?}", kinds(&entries));
    assert!(written[0].2.starts_with("SCRIBE-SUMMARY"));
    // The compaction was the scribe's, in its third turn, before its answer.
    let compaction = entries
        .iter()
        .find(|e| matches!(e.body, EntryBody::Compaction(_)))
        .unwrap();
    assert_eq!(&*compaction.author, "scribe");
    let last_request = bot_requests(&scribe).pop().unwrap();
    assert!(all_text(&last_request).starts_with(COMPACTION_PREFIX));
    assert!(all_text(&last_request).contains("m4 lorem"));
    // The first message is only in the summary (the humans' words quote it).
    assert!(
        last_request.messages[1..]
            .iter()
            .all(|m| !text_of(m).contains("m1 lorem"))
    );
    let summary = text_of(&last_request.messages[0]);
    assert!(summary.contains("> [Alice]: @scribe m1 lorem"));

    let roster = thread_roster();
    // The critic's view ignores the scribe's compaction entirely.
    assert_eq!(
        build_messages("critic", &entries, &roster),
        build_messages(
            "critic",
            &without_compactions_of("scribe", &entries),
            &roster
        )
    );
    // The scribe's view is its summary and what it kept, every call paired.
    let scribe_view = build_messages("scribe", &entries, &roster);
    assert!(text_of(&scribe_view[0]).contains("SCRIBE-SUMMARY"));
    assert_history_valid(&scribe_view);
    assert!(
        critic
            .requests()
            .iter()
            .all(|c| !all_text(c).contains(COMPACTION_PREFIX))
    );
    runner.shutdown().await;
}

/// A provider whose summary requests wait for a permit (and say when they
/// start), to hold a compaction in the middle.
struct HeldSummaries {
    inner: ScriptedProvider,
    started: tokio::sync::mpsc::UnboundedSender<()>,
    permits: Arc<tokio::sync::Semaphore>,
    running: Arc<std::sync::atomic::AtomicUsize>,
    most_at_once: Arc<std::sync::atomic::AtomicUsize>,
}

impl Provider for HeldSummaries {
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> EventStream {
        let events = self.inner.stream(model, context, options);
        if !is_summary_request(context) {
            return events;
        }
        use std::sync::atomic::Ordering;
        let (started, permits) = (self.started.clone(), self.permits.clone());
        let (running, most) = (self.running.clone(), self.most_at_once.clone());
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        most.fetch_max(now, Ordering::SeqCst);
        let _ = started.send(());
        Box::pin(
            futures::stream::once(async move {
                permits.acquire().await.unwrap().forget();
                running.fetch_sub(1, Ordering::SeqCst);
                events
            })
            .flatten(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_written_during_a_compaction_are_kept_and_compactions_of_one_bot_take_turns() {
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let most_at_once = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let provider = Arc::new(HeldSummaries {
        inner: ScriptedProvider::new([reply("SUMMARY-ONE"), reply("SUMMARY-TWO")]),
        started: started_tx,
        permits: permits.clone(),
        running: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        most_at_once: most_at_once.clone(),
    });
    let store = Arc::new(MemoryStore::new());
    let runner = ThreadRunner::builder(store.clone(), thread_roster())
        .bot("scribe", TurnLoop::new(provider.clone(), model()))
        .compaction(small_window())
        .build();
    let thread = ThreadId::new("notes").unwrap();
    for i in 1..=3 {
        say(&store, &thread, "alice", &sized(&format!("m{i}"), 600)).await;
    }
    let first = tokio::spawn({
        let (runner, thread) = (runner.clone(), thread.clone());
        async move { runner.compact(&thread, "scribe", None).await }
    });
    started.recv().await.unwrap();
    // While the first summary is being written: a new message, and a
    // second compaction of the same bot, which waits for the first.
    let arrived = say(&store, &thread, "bob", "arrived during the compaction").await;
    let second = tokio::spawn({
        let (runner, thread) = (runner.clone(), thread.clone());
        async move {
            runner
                .compact(&thread, "scribe", Some("what Bob said"))
                .await
        }
    });
    permits.add_permits(1);
    let first = first.await.unwrap().unwrap();
    assert!(first.covers_seq < arrived.seq);
    assert_eq!(first.covers_seq, 2);
    let entries = store.read_all(&thread).await.unwrap();
    let view = build_messages(
        "scribe",
        &entries[..first.entry_seq as usize],
        &thread_roster(),
    );
    assert!(
        all_text(&Context {
            messages: view,
            ..Context::default()
        })
        .contains("arrived during the compaction")
    );

    started.recv().await.unwrap();
    permits.add_permits(1);
    let second = second.await.unwrap().unwrap();
    assert!(second.entry_seq > first.entry_seq);
    // The second read the view after the first was written: it folds the
    // first summary in and takes m3, keeping Bob's message in full.
    let requests = summary_requests(&provider.inner);
    let request = all_text(&requests[1]);
    assert!(request.contains("<previous-summary>\nSUMMARY-ONE"));
    assert!(request.contains("m3 lorem") && !request.contains("m1 lorem"));
    assert!(!request.contains("arrived during"));
    assert!(request.contains("Stress in particular: what Bob said"));
    assert_eq!(most_at_once.load(std::sync::atomic::Ordering::SeqCst), 1);
    let entries = store.read_all(&thread).await.unwrap();
    let view = build_messages("scribe", &entries, &thread_roster());
    assert!(text_of(&view[0]).contains("SUMMARY-TWO"));
    assert!(text_of(&view[0]).contains("arrived during the compaction"));

    // Each manual compaction: its start, then its summary and its end.
    let around: Vec<String> = entries
        .iter()
        .filter(|e| &*e.author == "scribe")
        .map(|e| e.body.kind().to_string())
        .collect();
    assert_eq!(
        around,
        [
            "signal.compaction_started",
            "compaction",
            "signal.compaction_ended",
            "signal.compaction_started",
            "compaction",
            "signal.compaction_ended"
        ]
    );
    let ended: Vec<CompactionEndedRecord> = entries
        .iter()
        .filter_map(|e| CompactionEndedRecord::from_body(&e.body))
        .collect();
    assert_eq!(ended[0].covers_seq, Some(first.covers_seq));
    assert_eq!(ended[1].covers_seq, Some(second.covers_seq));
    assert!(
        ended
            .iter()
            .all(|r| r.turn.is_none() && r.reason == CompactionReason::Manual)
    );

    // Nothing left to compact: one message after the summary; nothing is
    // written.
    let third = runner.compact(&thread, "scribe", None).await;
    assert!(
        matches!(
            third,
            Err(ChatError::Compaction(CompactionError::NothingToCompact))
        ),
        "{third:?}"
    );
    assert_eq!(store.read_all(&thread).await.unwrap(), entries);
    assert!(matches!(
        runner.compact(&thread, "nobody", None).await,
        Err(ChatError::UnknownBot(_))
    ));
    runner.shutdown().await;
}

/// The summarizer's whole request for a multi-party thread, compared with
/// `tests/fixtures/summary_request.txt`. Run with `UPDATE_FIXTURES=1` to
/// write the fixture after an intended change, and read the diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summarizer_request_matches_its_golden_file() {
    use roundtable_providers::ToolResultMessage;
    use roundtable_thread_stream::{AssistantEntry, ToolResultEntry, TurnEnded};

    let provider = Arc::new(ScriptedProvider::new([reply("## Goal\nShip 2.0.")]));
    let store = Arc::new(MemoryStore::new());
    let runner = ThreadRunner::builder(store.clone(), thread_roster())
        .bot("scribe", TurnLoop::new(provider.clone(), model()))
        .compaction(CompactionConfig::default().with_keep_recent_tokens(1))
        .build();
    let thread = ThreadId::new("golden").unwrap();
    let assistant = |blocks: Vec<AssistantBlock>, stop| {
        let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
        m.content = blocks;
        m.stop_reason = stop;
        EntryBody::Assistant(AssistantEntry::new(Some("t1".into()), Arc::new(m)))
    };
    let mut read = ToolCall::new("c1", "read_file", serde_json::Map::new());
    Arc::make_mut(&mut read.arguments).insert("path".into(), "NOTES.md".into());
    let notes = format!("# 2.0\n- a new parser\n- {}", "x".repeat(2_100));
    let bodies = vec![
        (
            "alice",
            EntryBody::chat("@scribe check the release notes for 2.0. Never publish on a Friday."),
        ),
        (
            "scribe",
            assistant(vec![AssistantBlock::ToolCall(read)], StopReason::ToolUse),
        ),
        (
            "scribe",
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some("t1".into()),
                message: Arc::new(ToolResultMessage {
                    tool_call_id: "c1".into(),
                    tool_name: "read_file".into(),
                    content: vec![UserBlock::text(notes)],
                    details: None,
                    is_error: false,
                    timestamp: 1,
                }),
            }),
        ),
        (
            "scribe",
            assistant(
                vec![AssistantBlock::text("The notes list a new parser.")],
                StopReason::Stop,
            ),
        ),
        (
            "scribe",
            EntryBody::TurnEnded(TurnEnded {
                turn: "t1".into(),
                reason: "stop".into(),
            }),
        ),
        ("critic", {
            let mut m = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "m", 1);
            m.content.push(AssistantBlock::text("Looks right to me."));
            EntryBody::Assistant(AssistantEntry::new(Some("t2".into()), Arc::new(m)))
        }),
        ("bob", EntryBody::chat("@scribe when is the release?")),
        ("alice", EntryBody::chat("thanks all")),
    ];
    for (author, body) in bodies {
        store
            .append(&thread, Expect::Any, vec![NewEntry::new(author, body)])
            .await
            .unwrap();
    }
    let report = runner
        .compact(&thread, "scribe", Some("the release date"))
        .await
        .unwrap();
    assert_eq!(report.covers_seq, 7);
    assert_eq!(report.summarized, 5);

    let request = &provider.requests()[0];
    let got = format!(
        "SYSTEM:\n{}\n\nUSER:\n{}\n",
        request.system_prompt.as_deref().unwrap(),
        all_text(request)
    );
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/summary_request.txt");
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want =
        std::fs::read_to_string(&path).expect("the golden file (UPDATE_FIXTURES=1 writes it)");
    assert_eq!(got, want);

    // The summary stored: the model's, then the humans' own words.
    let entries = store.read_all(&thread).await.unwrap();
    let (_, upto, summary) = compactions(&entries).pop().unwrap();
    assert_eq!(upto, 7);
    assert_eq!(
        summary,
        "## Goal\nShip 2.0.\n\n## The humans' own words\n\n\
         > [Alice]: @scribe check the release notes for 2.0. Never publish on a Friday.\n\n\
         > [Bob]: @scribe when is the release?"
    );
    runner.shutdown().await;
}

/// A runner with a small window whose model calls `fetch` twice (`c1`,
/// then `c2`), is asked for one summary and answers "done"; a call's
/// result is `output` of its call id. Returns the runner, its provider and
/// its store.
async fn two_fetches_runner(
    output: impl Fn(&str) -> String + Send + Sync + 'static,
) -> (ChatRunner, Arc<ScriptedProvider>, Arc<MemoryStore>) {
    let provider = Arc::new(ScriptedProvider::new([
        call("c1", "fetch"),
        call("c2", "fetch"),
        reply("SUMMARY"),
        reply("done"),
    ]));
    let store = Arc::new(MemoryStore::new());
    let output = Arc::new(output);
    let mut tools = ToolRegistry::new();
    tools
        .register(tool("fetch", ToolKind::Read, move |ctx, _| {
            let text = output(&ctx.call_id);
            async move { Ok(ToolResult::text(text)) }
        }))
        .unwrap();
    let runner = ChatRunner::builder(provider.clone(), store.clone())
        .model(model())
        .system_prompt("sys")
        .tools(tools)
        .compaction(small_window())
        .build()
        .await
        .unwrap();
    (runner, provider, store)
}

/// A turn of two `fetch` calls whose results are `sizes` characters of a
/// two-byte letter (so their bytes are twice their characters), and the
/// turn's events and requests.
async fn fetch_turn(sizes: [usize; 2]) -> (Vec<TurnEvent>, Vec<Context>) {
    let (runner, provider, _) = two_fetches_runner(move |call_id| {
        "ü".repeat(if call_id == "c1" { sizes[0] } else { sizes[1] })
    })
    .await;
    let (_, events) = turn(&runner, "fetch twice").await;
    (events, bot_requests(&provider))
}

/// The estimate of a request as the turn's compaction step makes it.
fn estimate(request: &Context) -> u64 {
    let overhead =
        roundtable_dispatch::overhead_tokens(request.system_prompt.as_deref(), &request.tools);
    roundtable_dispatch::estimate_context(&request.messages, overhead, &model()).tokens
}

#[tokio::test]
async fn a_request_at_the_threshold_is_sent_and_one_token_more_compacts_first() {
    // Where the second request stands without the first result.
    let (_, requests) = fetch_turn([40, 4]).await;
    let base = estimate(&requests[1]) - 10;
    // At the threshold (800 tokens; its bytes bound it near 1,600): sent
    // as it is; the third request passes it and is compacted first.
    let at = 4 * usize::try_from(800 - base).unwrap();
    let (events, requests) = fetch_turn([at, 4]).await;
    assert_eq!(estimate(&requests[1]), 800);
    let started = events
        .iter()
        .position(|e| matches!(e, TurnEvent::CompactionStarted { .. }))
        .unwrap();
    let second_reply = events
        .iter()
        .position(|e| matches!(e, TurnEvent::OutputCompleted { round: 2, .. }))
        .unwrap();
    assert!(second_reply < started, "{events:?}");
    let TurnEvent::CompactionStarted {
        reason: CompactionReason::Threshold,
        tokens_before,
        ..
    } = &events[started]
    else {
        panic!("{events:?}")
    };
    let mut third = requests[1].messages.clone();
    third.extend(events.iter().filter_map(|e| match e {
        TurnEvent::OutputCompleted {
            round: 2, message, ..
        } => Some(Message::Assistant(message.clone())),
        TurnEvent::ToolCallCompleted {
            round: 2, result, ..
        } => Some(Message::ToolResult(result.clone())),
        _ => None,
    }));
    let third = Context {
        messages: third,
        ..requests[1].clone()
    };
    assert_eq!(*tokens_before, estimate(&third));
    // One character more (a token): compacted before the second request.
    let (events, requests) = fetch_turn([at + 1, 4]).await;
    let started = events
        .iter()
        .position(|e| matches!(e, TurnEvent::CompactionStarted { .. }))
        .unwrap();
    let first_result = events
        .iter()
        .position(|e| matches!(e, TurnEvent::ToolCallCompleted { round: 1, .. }))
        .unwrap();
    let second_reply = events
        .iter()
        .position(|e| matches!(e, TurnEvent::OutputCompleted { round: 2, .. }))
        .unwrap();
    assert!(
        first_result < started && started < second_reply,
        "{events:?}"
    );
    assert!(matches!(
        &events[started],
        TurnEvent::CompactionStarted {
            reason: CompactionReason::Threshold,
            tokens_before: 801,
            ..
        }
    ));
    assert!(estimate(&requests[1]) <= 801);
}
