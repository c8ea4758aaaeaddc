//! End-to-end tests of the multi-party `ThreadRunner` over the memory and
//! JSONL stores, with providers that answer from the request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use roundtable_chat_runner::{
    EntryObserver, FinishReason, ModelGate, RunnerNotice, ThreadRunner, TriggerOverride,
};
use roundtable_dispatch::{BotProfile, Halt, Participant, Policy, Trigger, WakeReason};
use roundtable_providers::{Message, ScriptedProvider};
use roundtable_test_support::echo_provider::EchoProvider;
use roundtable_test_support::messages::*;
use roundtable_test_support::roster::*;
use roundtable_test_support::runner::*;
use roundtable_test_support::scripted::*;
use roundtable_test_support::thread::*;
use roundtable_test_support::tools::*;
use roundtable_thread_stream::INTERRUPTED;
use roundtable_thread_stream::{
    Chunk, EntryBody, Expect, JsonlStore, MemoryStore, NewEntry, Signal, ThreadStore, TurnStarted,
};

fn started(entries: &[roundtable_thread_stream::Entry]) -> Vec<(String, TurnStarted)> {
    entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::TurnStarted(s) => Some((e.author.to_string(), s.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_wakes_only_the_named_bot_and_its_turn_is_in_the_thread() {
    let store = Arc::new(MemoryStore::new());
    let archivist = EchoProvider::new("Archivist");
    let coder = EchoProvider::new("Coder");
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("archivist", "Archivist", Trigger::Mention),
            bot("coder", "Coder", Trigger::Mention),
        ]),
    )
    .bot("archivist", turns(archivist.clone()))
    .bot("coder", turns(coder.clone()))
    .chunk_interval(Duration::ZERO)
    .build();
    let t = thread("support-1");
    runner.follow(&t).await.unwrap();
    let trigger = say(&*store, &t, "alice", "@archivist where is the Q3 report?").await;
    settle(&[&runner], &*store, &t).await;

    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    assert_eq!(
        answers(&entries),
        [(
            "archivist".to_string(),
            "Archivist: re [Alice]: @archivist where is the Q3 report?".to_string()
        )]
    );
    assert_eq!(coder.calls(), 0);
    let starts = started(&entries);
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].1.trigger, Some(trigger));
    assert_eq!(starts[0].1.depth, 1);
    assert_eq!(starts[0].1.reason.as_deref(), Some("mention"));
    // Usage and cost stay on the assistant entry; the turn ends with `stop`.
    let assistant = entries
        .iter()
        .find_map(|e| match &e.body {
            EntryBody::Assistant(a) => Some(a.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(assistant.turn.as_deref(), Some(&*starts[0].1.turn));
    assert_eq!(assistant.message().usage.output, 5);
    assert!(assistant.message().usage.cost.total > 0.0);
    assert!(
        entries
            .iter()
            .any(|e| matches!(&e.body, EntryBody::TurnEnded(x) if x.reason == "stop"))
    );
    // The answer streamed as chunks first.
    let chunks: String = entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Chunk(Chunk { delta, .. }) => Some(delta.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, assistant.message().text());
    // The bot saw a clean one-on-one conversation with its system prompt.
    let ctx = &archivist.contexts()[0];
    assert!(
        ctx.system_prompt
            .as_deref()
            .unwrap()
            .starts_with("You are Archivist.")
    );
    assert_eq!(ctx.messages.len(), 1);
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_always_bots_stop_at_the_loop_guard_and_wait_for_a_human() {
    let store = Arc::new(MemoryStore::new());
    let policy = Policy {
        loop_events: 4,
        ..Policy::default()
    };
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("ping", "Ping", Trigger::Always),
            bot("pong", "Pong", Trigger::Always),
        ]),
    )
    .bot("ping", turns(EchoProvider::new("Ping")))
    .bot("pong", turns(EchoProvider::new("Pong")))
    .policy(policy)
    .build();
    let t = thread("chatter");
    let mut notices = runner.notices();
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "hello bots").await;
    settle(&[&runner], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    let first = answers(&entries).len();
    // The guard stops the chain after `loop_events` bot messages; wakes
    // already under way when it trips may add one per bot.
    assert!((4..=6).contains(&first), "{first} bot messages");
    // The host is told why the bots went quiet.
    let mut halted = Vec::new();
    while let Ok(notice) = notices.try_recv() {
        if let RunnerNotice::Halted { trigger, halt, .. } = notice {
            halted.push((trigger, halt));
        }
    }
    assert!(!halted.is_empty(), "no halt notice");
    assert!(
        halted.iter().all(|(_, h)| *h == Halt::LoopGuard),
        "{halted:?}"
    );

    // A human resets the guard.
    say(&*store, &t, "alice", "again").await;
    settle(&[&runner], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    let second = answers(&entries).len() - first;
    assert!((4..=6).contains(&second), "{second} bot messages");
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_topic_gate_admits_ambient_bots_on_their_topics_only() {
    let store = Arc::new(MemoryStore::new());
    let rusty = EchoProvider::new("Rusty");
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            ambient("rusty", "Rusty", &["rust", "cargo"]),
        ]),
    )
    .bot("rusty", turns(rusty.clone()))
    .build();
    let t = thread("ambient");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "I trust the weather").await;
    settle(&[&runner], &*store, &t).await;
    assert_eq!(rusty.calls(), 0, "the gate said no");
    let seq = say(&*store, &t, "alice", "is Rust fast?").await;
    settle(&[&runner], &*store, &t).await;
    assert_eq!(rusty.calls(), 1, "the gate said yes");
    let entries = store.read_all(&t).await.unwrap();
    let starts = started(&entries);
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].1.trigger, Some(seq));
    assert_eq!(
        starts[0].1.reason.as_deref(),
        Some(WakeReason::Ambient.as_str())
    );
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_gate_asks_the_gating_prompt() {
    let store = Arc::new(MemoryStore::new());
    let sage = EchoProvider::new("Sage");
    let profile = BotProfile::new(Trigger::Ambient, "You are Sage.")
        .with_gating_prompt("Reply only to questions about philosophy.");
    let people = roster([
        human("alice", "Alice"),
        Participant::bot("sage", "Sage", profile),
    ]);
    // The gate's model says no, then yes.
    let gate_model = Arc::new(ScriptedProvider::new([text("No."), text("Yes")]));
    let gate = ModelGate::new(people.clone()).bot("sage", gate_model.clone(), model());
    let runner = ThreadRunner::builder(store.clone(), people)
        .bot("sage", turns(sage.clone()))
        .gate(Arc::new(gate))
        .build();
    let t = thread("gated");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "lunch at noon?").await;
    settle(&[&runner], &*store, &t).await;
    assert_eq!(sage.calls(), 0);
    say(&*store, &t, "alice", "what is virtue?").await;
    settle(&[&runner], &*store, &t).await;
    assert_eq!(sage.calls(), 1);
    let asked = gate_model.requests();
    assert_eq!(asked.len(), 2);
    assert!(
        asked[1]
            .system_prompt
            .as_deref()
            .unwrap()
            .contains("philosophy")
    );
    assert!(message_text(&asked[1].messages[0]).starts_with("[Alice]: what is virtue?"));
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fanout_cap_limits_how_many_bots_answer() {
    let store = Arc::new(MemoryStore::new());
    let names = ["a", "b", "c", "d"];
    let mut people = vec![human("alice", "Alice")];
    people.extend(
        names
            .iter()
            .map(|n| bot(n, &format!("Bot {n}"), Trigger::Always)),
    );
    let mut builder = ThreadRunner::builder(store.clone(), roster(people)).policy(Policy {
        max_fanout: 2,
        max_depth: 1,
        ..Policy::default()
    });
    for n in names {
        builder = builder.bot(n, turns(EchoProvider::new(n)));
    }
    let runner = builder.build();
    let t = thread("fanout");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "who is there?").await;
    settle(&[&runner], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    assert_eq!(answers(&entries).len(), 2, "only two bots answer");
    // Fairness: the next message wakes the two that were left out.
    say(&*store, &t, "alice", "anyone else?").await;
    settle(&[&runner], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    let mut who: Vec<String> = answers(&entries).into_iter().map(|(b, _)| b).collect();
    who.sort();
    assert_eq!(who, ["a", "b", "c", "d"]);
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_round_trip_stays_private_to_its_bot() {
    let store = Arc::new(MemoryStore::new());
    let archivist = EchoProvider::new("Archivist");
    let echo = EchoProvider::new("Echo");
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("archivist", "Archivist", Trigger::Mention),
            bot("echo", "Echo", Trigger::Mention),
        ]),
    )
    .bot(
        "archivist",
        turns(archivist.clone()).with_tools(lookup_tools()),
    )
    .bot("echo", turns(echo.clone()))
    .build();
    let t = thread("tools");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "@archivist look up invoices").await;
    settle(&[&runner], &*store, &t).await;
    say(&*store, &t, "alice", "@echo what did the archivist say?").await;
    settle(&[&runner], &*store, &t).await;

    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    // The archivist's tool call and result are in the thread, authored by it.
    let results: Vec<_> = entries
        .iter()
        .filter(|e| matches!(e.body, EntryBody::ToolResult(_)))
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(&*results[0].author, "archivist");
    assert_eq!(
        answers(&entries)[0],
        (
            "archivist".to_string(),
            "Archivist: found invoices is on shelf 7".to_string()
        )
    );
    // Its second model call saw its own call and result.
    let second = &archivist.contexts()[1];
    assert!(matches!(
        second.messages.last(),
        Some(Message::ToolResult(_))
    ));
    // Echo sees only the final text, labelled, and no tool traffic.
    let seen = &echo.contexts()[0].messages;
    assert!(seen.iter().all(|m| matches!(m, Message::User(_))));
    let text = message_text(&seen[0]);
    assert!(
        text.contains("[Archivist]: Archivist: found invoices is on shelf 7"),
        "{text}"
    );
    assert!(!text.contains("lookup"));
    // No chunk for the tool-calling message: the chunks are the final text.
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_is_recorded_and_the_next_wake_works() {
    let store = Arc::new(MemoryStore::new());
    let flaky = EchoProvider::new("Flaky");
    flaky.fail_next.store(1, Ordering::SeqCst);
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("flaky", "Flaky", Trigger::Always),
        ]),
    )
    .bot("flaky", turns(flaky.clone()))
    .build();
    let t = thread("flaky");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "first").await;
    settle(&[&runner], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    assert!(
        entries
            .iter()
            .any(|e| matches!(&e.body, EntryBody::TurnFailed(f) if f.reason.finish_reason() == Some(FinishReason::Error)))
    );
    assert!(answers(&entries).is_empty());

    say(&*store, &t, "alice", "second").await;
    settle(&[&runner], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    assert_eq!(
        answers(&entries),
        [("flaky".to_string(), "Flaky: re [Alice]: second".to_string())]
    );
    // The failed message is not in the bot's next projection.
    let ctx = flaky.contexts().last().cloned().unwrap();
    assert_eq!(ctx.messages.len(), 1);
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrides_change_one_bot_on_one_thread() {
    let store = Arc::new(MemoryStore::new());
    let helper = EchoProvider::new("Helper");
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("helper", "Helper", Trigger::Mention),
        ]),
    )
    .bot("helper", turns(helper.clone()))
    .build();
    let (loud, muted, capped) = (thread("loud"), thread("muted"), thread("capped"));
    runner.set_override(
        &loud,
        "helper",
        TriggerOverride::default().trigger(Trigger::Always),
    );
    runner.set_override(&muted, "helper", TriggerOverride::muted());
    runner.set_override(
        &capped,
        "helper",
        TriggerOverride::default().max_turns_per_hour(1),
    );
    for t in [&loud, &muted, &capped] {
        runner.follow(t).await.unwrap();
    }
    say(&*store, &loud, "alice", "no mention here").await;
    say(&*store, &muted, "alice", "@helper are you there?").await;
    say(&*store, &capped, "alice", "@helper one").await;
    for t in [&loud, &muted, &capped] {
        settle(&[&runner], &*store, t).await;
    }
    say(&*store, &capped, "alice", "@helper two").await;
    settle(&[&runner], &*store, &capped).await;

    let count = |entries: &[roundtable_thread_stream::Entry]| answers(entries).len();
    assert_eq!(
        count(&store.read_all(&loud).await.unwrap()),
        1,
        "always here"
    );
    assert_eq!(
        count(&store.read_all(&muted).await.unwrap()),
        0,
        "muted here"
    );
    assert_eq!(
        count(&store.read_all(&capped).await.unwrap()),
        1,
        "one turn an hour"
    );

    // Clearing the mute restores the roster's trigger on that thread.
    runner.clear_override(&muted, "helper");
    say(&*store, &muted, "alice", "@helper now?").await;
    settle(&[&runner], &*store, &muted).await;
    assert_eq!(count(&store.read_all(&muted).await.unwrap()), 1);
    runner.shutdown().await;
}

/// Mutes and unmutes `helper` on the signals `mute` and `unmute` of a
/// thread, as a host whose threads carry their own settings would.
struct MuteSignals;

impl EntryObserver for MuteSignals {
    fn observe(&self, runner: &ThreadRunner, entry: &roundtable_thread_stream::Entry) {
        match &entry.body {
            EntryBody::Signal(s) if s.name == "mute" => {
                runner.set_override(&entry.thread, "helper", TriggerOverride::muted());
            }
            EntryBody::Signal(s) if s.name == "unmute" => {
                runner.clear_override(&entry.thread, "helper");
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_changes_the_roster_in_the_threads_order() {
    let store = Arc::new(MemoryStore::new());
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("helper", "Helper", Trigger::Mention),
        ]),
    )
    .bot("helper", turns(EchoProvider::new("Helper")))
    .observer(Arc::new(MuteSignals))
    .build();
    let t = thread("settings");
    runner.follow(&t).await.unwrap();
    let chat = |text: &str| NewEntry::new("alice", EntryBody::chat(text));
    let signal = |name: &str| {
        let signal = Signal::encode(name, &serde_json::json!({})).unwrap();
        NewEntry::new("host", EntryBody::Signal(signal))
    };
    // One batch: the mute lands between two mentions, and only the second
    // is muted, however fast the follower reads.
    let first = vec![chat("@helper one"), signal("mute"), chat("@helper two")];
    store.append(&t, Expect::Any, first).await.unwrap();
    settle(&[&runner], &*store, &t).await;
    let second = vec![signal("unmute"), chat("@helper three")];
    store.append(&t, Expect::Any, second).await.unwrap();
    settle(&[&runner], &*store, &t).await;

    let entries = store.read_all(&t).await.unwrap();
    let seq_of = |text: &str| {
        entries
            .iter()
            .find(|e| matches!(&e.body, EntryBody::Chat(c) if c.text.ends_with(text)))
            .unwrap()
            .seq
    };
    let triggers: Vec<u64> = started(&entries)
        .iter()
        .filter_map(|(_, s)| s.trigger)
        .collect();
    assert_eq!(triggers, [seq_of("one"), seq_of("three")]);
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_with_its_own_roster_wakes_only_its_bots() {
    let store = Arc::new(MemoryStore::new());
    let helper = EchoProvider::new("Helper");
    let greeter = EchoProvider::new("Greeter");
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            bot("helper", "Helper", Trigger::Always),
            bot("greeter", "Greeter", Trigger::Always),
        ]),
    )
    .bot("helper", turns(helper.clone()))
    .bot("greeter", turns(greeter.clone()))
    .policy(Policy {
        max_depth: 1,
        ..Policy::default()
    })
    .build();
    let (small, full) = (thread("small"), thread("full"));
    runner.set_roster(
        &small,
        roster([
            human("alice", "Alice"),
            bot("helper", "Helper", Trigger::Always),
        ]),
    );
    runner.follow(&small).await.unwrap();
    runner.follow(&full).await.unwrap();
    // One thread after the other, so the helper's first context is the small thread's.
    say(&*store, &small, "alice", "hello").await;
    settle(&[&runner], &*store, &small).await;
    say(&*store, &full, "alice", "hello").await;
    settle(&[&runner], &*store, &full).await;
    let bots = |entries: &[roundtable_thread_stream::Entry]| {
        let mut bots: Vec<String> = answers(entries).into_iter().map(|(b, _)| b).collect();
        bots.sort();
        bots
    };
    assert_eq!(bots(&store.read_all(&small).await.unwrap()), ["helper"]);
    assert_eq!(
        bots(&store.read_all(&full).await.unwrap()),
        ["greeter", "helper"]
    );
    // The thread's roster labels its people: the bot saw Alice by name.
    let context = helper.contexts().into_iter().next().unwrap();
    assert!(message_text(context.messages.last().unwrap()).contains("[Alice]"));

    // A roster change takes effect from the next entry; overrides still apply.
    runner.set_roster(&small, roster([human("alice", "Alice")]));
    say(&*store, &small, "alice", "anyone?").await;
    settle(&[&runner], &*store, &small).await;
    assert_eq!(bots(&store.read_all(&small).await.unwrap()), ["helper"]);
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wakes_during_a_turn_coalesce_into_one_next_turn() {
    let store = Arc::new(MemoryStore::new());
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    let mut slow = EchoProvider::plain("Slow");
    slow.hold = Some(hold.clone());
    let slow = Arc::new(slow);
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("slow", "Slow", Trigger::Always),
        ]),
    )
    .bot("slow", turns(slow.clone()))
    .build();
    let mut notices = runner.notices();
    let t = thread("coalesce");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "one").await;
    // Wait for the first turn to be running, then say three more things.
    loop {
        if let RunnerNotice::TurnStarted { .. } = notices.recv().await.unwrap() {
            break;
        }
    }
    for text in ["two", "three", "four"] {
        say(&*store, &t, "alice", text).await;
    }
    hold.add_permits(10);
    settle(&[&runner], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    assert_eq!(
        slow.calls(),
        2,
        "one turn for the first message, one for the rest"
    );
    let last = slow.contexts()[1].messages.last().cloned().unwrap();
    assert_eq!(
        message_text(&last),
        "[Alice]: two\n[Alice]: three\n[Alice]: four"
    );
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_limit_caps_turns_running_at_once() {
    let store = Arc::new(MemoryStore::new());
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    let mut shared = EchoProvider::plain("Any");
    shared.hold = Some(hold.clone());
    let shared = Arc::new(shared);
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("a", "A", Trigger::Always),
            bot("b", "B", Trigger::Always),
        ]),
    )
    .bot("a", turns(shared.clone()))
    .bot("b", turns(shared.clone()))
    .policy(Policy {
        max_depth: 1,
        ..Policy::default()
    })
    .max_concurrent_turns(1)
    .build();
    let mut notices = runner.notices();
    let t = thread("limit");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "hi both").await;
    let mut finished = 0;
    while finished < 2 {
        match notices.recv().await.unwrap() {
            RunnerNotice::TurnStarted { .. } => {
                tokio::task::yield_now().await;
                hold.add_permits(1);
            }
            RunnerNotice::TurnFinished { .. } => finished += 1,
            _ => {}
        }
    }
    settle(&[&runner], &*store, &t).await;
    assert_eq!(shared.calls(), 2);
    assert_eq!(shared.max_in_flight.load(Ordering::SeqCst), 1);
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_closes_the_interrupted_turn_and_answers_once() {
    let dir = tempfile::tempdir().unwrap();
    let t = thread("restart");
    let people = || {
        roster([
            human("alice", "Alice"),
            bot("scribe", "Scribe", Trigger::Mention),
        ])
    };
    // A runner crashed mid-turn: the wake, its turn.started, a chunk and a
    // tool call with no result are in the file, no end.
    {
        let store = JsonlStore::open(dir.path()).await.unwrap();
        let trigger = say(&store, &t, "alice", "@scribe note this").await;
        let call = roundtable_providers::ToolCall::new("c1", "lookup", serde_json::Map::new());
        let mut partial = text("");
        partial.content = vec![roundtable_providers::AssistantBlock::ToolCall(call)];
        partial.stop_reason = roundtable_providers::StopReason::ToolUse;
        store
            .append(
                &t,
                Expect::Any,
                vec![
                    NewEntry::new(
                        "scribe",
                        EntryBody::TurnStarted(TurnStarted {
                            turn: "dead".into(),
                            trigger: Some(trigger),
                            depth: 1,
                            reason: Some("mention".into()),
                        }),
                    ),
                    NewEntry::new("scribe", EntryBody::Chunk(Chunk::text("dead", "Not"))),
                    NewEntry::new(
                        "scribe",
                        EntryBody::Assistant(roundtable_thread_stream::AssistantEntry::new(
                            Some("dead".into()),
                            partial,
                        )),
                    ),
                ],
            )
            .await
            .unwrap();
        store.close().await.unwrap();
    }
    for round in 0..2 {
        let store: Arc<dyn ThreadStore> = Arc::new(JsonlStore::open(dir.path()).await.unwrap());
        let scribe = EchoProvider::new("Scribe");
        let runner = ThreadRunner::builder(store.clone(), people())
            .bot("scribe", turns(scribe.clone()))
            .build();
        assert_eq!(runner.follow_all().await.unwrap(), std::slice::from_ref(&t));
        settle(&[&runner], &*store, &t).await;
        let entries = store.read_all(&t).await.unwrap();
        let failed: Vec<_> = entries
            .iter()
            .filter(|e| matches!(&e.body, EntryBody::TurnFailed(f) if f.reason == INTERRUPTED && &*f.turn == "dead"))
            .collect();
        assert_eq!(failed.len(), 1, "closed once");
        assert_eq!(answers(&entries).len(), 1, "answered once");
        if round == 0 {
            assert_eq!(scribe.calls(), 1);
            // The re-run projection back-fills the dangling call's result.
            let ctx = &scribe.contexts()[0];
            assert!(matches!(ctx.messages[2], Message::ToolResult(ref r) if r.is_error));
        } else {
            assert_eq!(scribe.calls(), 0, "nothing owed after the second restart");
        }
        runner.shutdown().await;
        store.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_interrupts_a_running_turn_and_a_restart_answers_it() {
    let store = Arc::new(MemoryStore::new());
    let t = thread("shutdown");
    let people = || {
        roster([
            human("alice", "Alice"),
            bot("slow", "Slow", Trigger::Always),
        ])
    };
    let mut stuck = EchoProvider::plain("Slow");
    stuck.hold = Some(Arc::new(tokio::sync::Semaphore::new(0)));
    let first = ThreadRunner::builder(store.clone(), people())
        .bot("slow", turns(Arc::new(stuck)))
        .build();
    let mut notices = first.notices();
    first.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "take your time").await;
    loop {
        if let RunnerNotice::TurnStarted { .. } = notices.recv().await.unwrap() {
            break;
        }
    }
    first.shutdown().await;
    let entries = store.read_all(&t).await.unwrap();
    assert!(
        entries
            .iter()
            .any(|e| matches!(&e.body, EntryBody::TurnFailed(f) if f.reason == INTERRUPTED))
    );
    assert!(matches!(
        notices.recv().await.unwrap(),
        RunnerNotice::TurnFinished {
            finish_reason: FinishReason::Aborted,
            ..
        }
    ));

    let quick = EchoProvider::new("Slow");
    let second = ThreadRunner::builder(store.clone(), people())
        .bot("slow", turns(quick.clone()))
        .build();
    second.follow(&t).await.unwrap();
    settle(&[&second], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    assert_eq!(answers(&entries).len(), 1);
    assert_eq!(quick.calls(), 1);
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runners_over_one_jsonl_store_never_answer_a_wake_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ThreadStore> = Arc::new(JsonlStore::open(dir.path()).await.unwrap());
    let people = roster([
        human("alice", "Alice"),
        human("bob", "Bob"),
        bot("x", "X", Trigger::Always),
        bot("y", "Y", Trigger::Mention),
    ]);
    let policy = Policy {
        max_depth: 1,
        ..Policy::default()
    };
    let (x1, y1, x2, y2) = (
        EchoProvider::new("X"),
        EchoProvider::new("Y"),
        EchoProvider::new("X"),
        EchoProvider::new("Y"),
    );
    let one = ThreadRunner::builder(store.clone(), people.clone())
        .bot("x", turns(x1.clone()))
        .bot("y", turns(y1.clone()))
        .policy(policy)
        .build();
    let two = ThreadRunner::builder(store.clone(), people)
        .bot("x", turns(x2.clone()))
        .bot("y", turns(y2.clone()))
        .policy(policy)
        .build();
    let t = thread("shared");
    one.follow(&t).await.unwrap();
    two.follow(&t).await.unwrap();
    let mut humans = Vec::new();
    for i in 0..6 {
        let who = if i % 2 == 0 { "alice" } else { "bob" };
        humans.push(say(&*store, &t, who, &format!("@y message {i}")).await);
        settle(&[&one, &two], &*store, &t).await;
    }
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    let starts = started(&entries);
    for bot in ["x", "y"] {
        // Every human message was answered by exactly one turn of each bot.
        let mine: Vec<u64> = starts
            .iter()
            .filter(|(b, _)| b == bot)
            .map(|(_, s)| s.trigger.unwrap())
            .collect();
        assert_eq!(mine, humans, "bot {bot}");
    }
    assert_eq!(x1.calls() + x2.calls(), 6);
    assert_eq!(y1.calls() + y2.calls(), 6);
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runners_racing_for_the_same_wakes_answer_each_once() {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let people = roster([human("alice", "Alice"), bot("x", "X", Trigger::Always)]);
    let policy = Policy {
        max_depth: 1,
        ..Policy::default()
    };
    let (x1, x2) = (EchoProvider::new("X"), EchoProvider::new("X"));
    let one = ThreadRunner::builder(store.clone(), people.clone())
        .bot("x", turns(x1.clone()))
        .policy(policy)
        .build();
    let two = ThreadRunner::builder(store.clone(), people)
        .bot("x", turns(x2.clone()))
        .policy(policy)
        .build();
    let t = thread("race");
    one.follow(&t).await.unwrap();
    two.follow(&t).await.unwrap();
    // Messages arrive in a burst: wakes coalesce, but every message is
    // covered by a turn that started after it, and no turn is doubled.
    for i in 0..20 {
        say(&*store, &t, "alice", &format!("burst {i}")).await;
    }
    settle(&[&one, &two], &*store, &t).await;
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    let starts: Vec<u64> = entries
        .iter()
        .filter(|e| matches!(e.body, EntryBody::TurnStarted(_)))
        .map(|e| e.seq)
        .collect();
    let last_human = entries
        .iter()
        .rev()
        .find(|e| &*e.author == "alice")
        .unwrap()
        .seq;
    assert!(
        starts.iter().any(|&s| s > last_human),
        "the last message is answered"
    );
    let mut triggers: Vec<u64> = started(&entries)
        .iter()
        .map(|(_, s)| s.trigger.unwrap())
        .collect();
    let n = triggers.len();
    triggers.dedup();
    assert_eq!(triggers.len(), n, "no trigger answered twice");
    assert_eq!(x1.calls() + x2.calls(), n);
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_bots_over_a_jsonl_store_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let t = thread("jsonl");
    let archivist = Arc::new(ScriptedProvider::new([text("Q3 is in /reports.")]));
    let helper = Arc::new(ScriptedProvider::new([
        text("Noted."),
        text("Noted again."),
    ]));
    {
        let store: Arc<dyn ThreadStore> = Arc::new(JsonlStore::open(dir.path()).await.unwrap());
        let runner = ThreadRunner::builder(
            store.clone(),
            roster([
                human("alice", "Alice"),
                bot("archivist", "Archivist", Trigger::Mention),
                bot("helper", "Helper", Trigger::Always),
            ]),
        )
        .bot("archivist", turns(archivist.clone()))
        .bot("helper", turns(helper.clone()))
        .policy(Policy {
            max_depth: 1,
            ..Policy::default()
        })
        .build();
        runner.follow(&t).await.unwrap();
        say(&*store, &t, "alice", "@archivist where is Q3?").await;
        settle(&[&runner], &*store, &t).await;
        say(&*store, &t, "alice", "thanks").await;
        settle(&[&runner], &*store, &t).await;
        runner.shutdown().await;
        store.close().await.unwrap();
    }
    let store = JsonlStore::open(dir.path()).await.unwrap();
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    let mut got = answers(&entries);
    got.sort();
    assert_eq!(
        got,
        [
            ("archivist".to_string(), "Q3 is in /reports.".to_string()),
            ("helper".to_string(), "Noted again.".to_string()),
            ("helper".to_string(), "Noted.".to_string()),
        ]
    );
    assert_eq!(archivist.remaining() + helper.remaining(), 0);
    // The helper's second turn saw the archivist's answer, labelled.
    let seen: Vec<String> = helper.requests()[1]
        .messages
        .iter()
        .map(message_text)
        .collect();
    let seen = seen.join("\n");
    assert!(seen.contains("[Archivist]: Q3 is in /reports."), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bots_compaction_stands_in_for_what_it_covers() {
    let store = Arc::new(MemoryStore::new());
    let t = thread("compacted");
    say(&*store, &t, "alice", "old news one").await;
    let upto = say(&*store, &t, "alice", "old news two").await;
    store
        .append(
            &t,
            Expect::Any,
            vec![NewEntry::new(
                "scribe",
                EntryBody::Compaction(roundtable_thread_stream::Compaction {
                    summary: "Alice shared old news.".into(),
                    upto,
                }),
            )],
        )
        .await
        .unwrap();
    let scribe = EchoProvider::new("Scribe");
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("scribe", "Scribe", Trigger::Mention),
        ]),
    )
    .bot("scribe", turns(scribe.clone()))
    .build();
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "@scribe anything new?").await;
    settle(&[&runner], &*store, &t).await;
    let seen: Vec<String> = scribe.contexts()[0]
        .messages
        .iter()
        .map(message_text)
        .collect();
    let seen = seen.join("\n");
    assert!(seen.contains("Alice shared old news."), "{seen}");
    assert!(!seen.contains("old news one"), "{seen}");
    assert!(seen.contains("[Alice]: @scribe anything new?"), "{seen}");
    runner.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wakes_written_while_no_runner_ran_are_answered_once_on_follow() {
    let store = Arc::new(MemoryStore::new());
    let t = thread("backlog");
    say(&*store, &t, "alice", "@scribe please note A").await;
    say(&*store, &t, "alice", "@scribe and B").await;
    say(&*store, &t, "alice", "anything about rust?").await;
    say(&*store, &t, "alice", "or the weather?").await;
    let people = || {
        roster([
            human("alice", "Alice"),
            bot("scribe", "Scribe", Trigger::Mention),
            ambient("rusty", "Rusty", &["rust"]),
        ])
    };
    for round in 0..2 {
        let (scribe, rusty) = (EchoProvider::new("Scribe"), EchoProvider::new("Rusty"));
        let runner = ThreadRunner::builder(store.clone(), people())
            .bot("scribe", turns(scribe.clone()))
            .bot("rusty", turns(rusty.clone()))
            .build();
        runner.follow(&t).await.unwrap();
        settle(&[&runner], &*store, &t).await;
        if round == 0 {
            // Both mentions coalesce into one turn that sees them both.
            assert_eq!(scribe.calls(), 1);
            let last = scribe.contexts()[0].messages.last().cloned().unwrap();
            assert!(message_text(&last).contains("[Alice]: @scribe and B"));
            // The gate admitted Rusty on its topic, not on the weather.
            assert_eq!(rusty.calls(), 1);
        } else {
            assert_eq!(scribe.calls() + rusty.calls(), 0, "nothing owed any more");
        }
        runner.shutdown().await;
    }
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    assert_eq!(answers(&entries).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_global_limit_turns_start_in_the_dispatchers_order() {
    // One turn at a time: the mentioned bot (first in the wake list) must
    // run before the `always` bot, whatever order the runtime starts tasks in.
    for round in 0..10 {
        let store = Arc::new(MemoryStore::new());
        let runner = ThreadRunner::builder(
            store.clone(),
            roster([
                human("alice", "Alice"),
                bot("chatty", "Chatty", Trigger::Always),
                bot("archivist", "Archivist", Trigger::Mention),
            ]),
        )
        .bot("chatty", turns(EchoProvider::new("Chatty")))
        .bot("archivist", turns(EchoProvider::new("Archivist")))
        .policy(Policy {
            max_depth: 1,
            ..Policy::default()
        })
        .max_concurrent_turns(1)
        .build();
        let t = thread("order");
        runner.follow(&t).await.unwrap();
        say(&*store, &t, "alice", "@archivist where is the report?").await;
        settle(&[&runner], &*store, &t).await;
        let order: Vec<String> = started(&store.read_all(&t).await.unwrap())
            .into_iter()
            .map(|(bot, _)| bot)
            .collect();
        assert_eq!(order, ["archivist", "chatty"], "round {round}");
        runner.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_with_skills_sees_their_catalogue_and_reads_one_on_demand() {
    use roundtable_providers::{AssistantBlock, StopReason, ToolCall};

    let dir = tempfile::tempdir().unwrap();
    let skill_dir = dir.path().join("skills").join("triage");
    std::fs::create_dir_all(&skill_dir).unwrap();
    std::fs::write(
        skill_dir.join("SKILL.md"),
        "---\nname: triage\ndescription: Sort incoming bug reports.\n---\n# Triage\nLabel by severity first.\n",
    )
    .unwrap();
    let skills = roundtable_skills::load_skills([dir.path().join("skills")]).skills;

    let mut call = text("");
    call.content.clear();
    let mut args = serde_json::Map::new();
    args.insert("name".into(), "triage".into());
    call.content.push(AssistantBlock::ToolCall(ToolCall::new(
        "s1",
        "read_skill",
        args,
    )));
    call.stop_reason = StopReason::ToolUse;
    let provider = Arc::new(ScriptedProvider::new([
        call,
        text("Severity first: this one is minor."),
    ]));
    let store = Arc::new(MemoryStore::new());
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("triager", "Triager", Trigger::Mention),
        ]),
    )
    .bot("triager", turns(provider.clone()))
    .skills("triager", skills)
    .unwrap()
    .build();
    let t = thread("skills");
    runner.follow(&t).await.unwrap();
    say(&*store, &t, "alice", "@triager new bug: the logo is blurry").await;
    settle(&[&runner], &*store, &t).await;

    let requests = provider.requests();
    let system = requests[0].system_prompt.clone().unwrap_or_default();
    assert!(system.contains("<name>triage</name>"), "{system}");
    assert!(system.contains("read_skill"), "{system}");
    assert_eq!(requests[0].tools[0].name, "read_skill");
    // The skill's text came back as the tool result, and only to this bot.
    let entries = store.read_all(&t).await.unwrap();
    check_turns(&entries);
    let result = entries
        .iter()
        .find_map(|e| match &e.body {
            EntryBody::ToolResult(r) => Some(r.message.clone()),
            _ => None,
        })
        .expect("a tool result entry");
    assert!(!result.is_error);
    assert!(message_text(&Message::ToolResult(result)).contains("Label by severity first."));
    assert_eq!(
        answers(&entries),
        [(
            "triager".to_string(),
            "Severity first: this one is minor.".to_string()
        )]
    );
    runner.shutdown().await;
}

/// `idle` once read the busy count before the follower picked a new entry
/// up and compared the tips after it had: right after an append it could
/// return before the turn the entry caused had even started. Many rounds,
/// since the window is narrow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_right_after_an_append_waits_for_the_turn_it_causes() {
    let store = Arc::new(MemoryStore::new());
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("archivist", "Archivist", Trigger::Mention),
        ]),
    )
    .bot("archivist", turns(EchoProvider::new("Archivist")))
    .build();
    for round in 0..300 {
        let t = thread(&format!("idle-{round}"));
        runner.follow(&t).await.unwrap();
        say(&*store, &t, "alice", "@archivist ping").await;
        runner.idle().await.unwrap();
        let entries = store.read_all(&t).await.unwrap();
        assert_eq!(answers(&entries).len(), 1, "round {round}");
        check_turns(&entries);
    }
    runner.shutdown().await;
}

/// A turn left open by a runner that died (its lease stops being renewed)
/// is left alone while the lease lives, then closed as interrupted by a
/// runner sharing the leases, which answers the wake again, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_runners_turn_is_closed_when_its_lease_lapses_and_answered_again() {
    use roundtable_chat_runner::lifecycle::TurnLeases;
    use roundtable_thread_stream::lease::{Leases, MemoryLeases};

    let store = Arc::new(MemoryStore::new());
    let leases = Arc::new(MemoryLeases::new());
    let ttl = Duration::from_millis(600);
    let runner = ThreadRunner::builder(
        store.clone(),
        roster([
            human("alice", "Alice"),
            bot("archivist", "Archivist", Trigger::Mention),
        ]),
    )
    .bot("archivist", turns(EchoProvider::new("Archivist")))
    .leases(TurnLeases::new(leases.clone()).timing(ttl, Duration::from_millis(100)))
    .chunk_interval(Duration::ZERO)
    .build();
    let t = thread("support-dead");
    runner.follow(&t).await.unwrap();

    // Another runner took the bot's lease and opened its turn for the
    // mention, in the same append, then died.
    let dead = leases
        .acquire("bot-turn.support-dead.archivist", "dead-runner", ttl)
        .await
        .unwrap();
    assert!(dead.is_some());
    let mention = NewEntry::new("alice", EntryBody::chat("@archivist where is Q3?"));
    let opened = NewEntry::new(
        "archivist",
        EntryBody::TurnStarted(TurnStarted {
            turn: "dead-turn".into(),
            trigger: Some(1),
            depth: 1,
            reason: None,
        }),
    );
    let written = store
        .append(&t, Expect::LastSeq(0), vec![mention, opened])
        .await
        .unwrap();
    assert_eq!(written[0].seq, 1);
    tokio::time::sleep(ttl / 2).await;
    let entries = store.read_all(&t).await.unwrap();
    assert_eq!(
        entries.len(),
        2,
        "the live turn is left alone: {entries:#?}"
    );

    let answered = async {
        loop {
            let entries = store.read_all(&t).await.unwrap();
            if entries
                .iter()
                .any(|e| matches!(e.body, EntryBody::TurnEnded(_)))
            {
                return entries;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), answered)
        .await
        .unwrap();
    settle(&[&runner], &*store, &t).await;
    let entries = &store.read_all(&t).await.unwrap();
    check_turns(entries);
    let failed: Vec<&str> = entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::TurnFailed(f) => Some(&*f.turn),
            _ => None,
        })
        .collect();
    assert_eq!(failed, ["dead-turn"]);
    let turns = started(entries);
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(turns[1].1.trigger, Some(1));
    assert_eq!(answers(entries).len(), 1, "answered once");
    runner.shutdown().await;
}
