//! The dispatcher's rules, one table row each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use roundtable_dispatch::{Halt, Policy, WakeReason, dispatch, halt};
use roundtable_providers::StopReason;
use roundtable_test_support::roster::*;
use roundtable_test_support::thread::*;
use roundtable_thread_stream::{Entry, EntryBody};

use WakeReason::{Always, Ambient, Mention};

struct Case {
    name: &'static str,
    roster: &'static [&'static str],
    /// Writes the history, then the event (the last entry).
    thread: fn(&mut Thread),
    policy: Policy,
    /// `now` minus the event's `at`.
    later: i64,
    want: &'static [(&'static str, WakeReason, u32)],
}

const EVERYONE: &[&str] = &[
    "alice", "bob", "arch", "coder", "watch", "echo", "herald", "rusty", "poet",
];
const MENTION_ONLY: &[&str] = &["alice", "bob", "arch", "coder"];

fn default() -> Policy {
    Policy::default()
}

/// `n` final messages by bots in turns at depth 1, one second apart.
fn bot_chatter(t: &mut Thread, n: usize) {
    for i in 0..n {
        let bot = if i % 2 == 0 { "arch" } else { "coder" };
        let turn = format!("chatter-{i}");
        t.started(bot, &turn, 1);
        t.say(bot, "chatter", &turn);
    }
}

fn cases() -> Vec<Case> {
    vec![
        // ---- routing
        Case {
            name: "a @handle wakes that mention bot only",
            roster: MENTION_ONLY,
            thread: |t| {
                t.chat("alice", "@archive-bot where is the Q3 report?");
            },
            policy: default(),
            later: 0,
            want: &[("arch", Mention, 1)],
        },
        Case {
            name: "handles are matched as slugs",
            roster: MENTION_ONLY,
            thread: |t| {
                t.chat("alice", "hey @Archive_Bot!");
            },
            policy: default(),
            later: 0,
            want: &[("arch", Mention, 1)],
        },
        Case {
            name: "a structured mention wakes the bot",
            roster: MENTION_ONLY,
            thread: |t| {
                t.push("alice", chat_with("what do you think?", vec![], &["coder"]));
            },
            policy: default(),
            later: 0,
            want: &[("coder", Mention, 1)],
        },
        Case {
            name: "an @ inside a word is not a mention",
            roster: MENTION_ONLY,
            thread: |t| {
                t.chat("alice", "mail x@archive-bot please");
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "unnamed mention bots stay asleep",
            roster: MENTION_ONLY,
            thread: |t| {
                t.chat("alice", "hello everyone");
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "humans are never woken",
            roster: MENTION_ONLY,
            thread: |t| {
                t.push("alice", chat_with("@bob look", vec![], &["bob"]));
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "an always bot wakes on every chat",
            roster: &["alice", "watch"],
            thread: |t| {
                t.chat("alice", "hello");
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 1)],
        },
        Case {
            name: "an ambient bot is a candidate",
            roster: &["alice", "rusty"],
            thread: |t| {
                t.chat("alice", "hello");
            },
            policy: default(),
            later: 0,
            want: &[("rusty", Ambient, 1)],
        },
        Case {
            name: "a named always or ambient bot wakes as a mention",
            roster: &["alice", "watch", "rusty"],
            thread: |t| {
                t.chat("alice", "@rusty and @watcher");
            },
            policy: default(),
            later: 0,
            want: &[("watch", Mention, 1), ("rusty", Mention, 1)],
        },
        Case {
            name: "each bot wakes once however often it is named",
            roster: MENTION_ONLY,
            thread: |t| {
                t.push(
                    "alice",
                    chat_with("@coder @coder @CODER", vec![], &["coder", "coder"]),
                );
            },
            policy: default(),
            later: 0,
            want: &[("coder", Mention, 1)],
        },
        Case {
            name: "a bot is never woken by its own entry",
            roster: &["alice", "watch", "echo"],
            thread: |t| {
                t.started("watch", "w1", 1);
                t.say("watch", "I am @watcher", "w1");
            },
            policy: default(),
            later: 0,
            want: &[("echo", Always, 2)],
        },
        Case {
            name: "a bot's plain chat wakes like any chat",
            roster: MENTION_ONLY,
            thread: |t| {
                t.chat("arch", "@coder over to you");
            },
            policy: default(),
            later: 0,
            want: &[("coder", Mention, 2)],
        },
        Case {
            name: "an author missing from the roster counts as a human",
            roster: MENTION_ONLY,
            thread: |t| {
                t.chat("stranger", "@coder hi");
            },
            policy: default(),
            later: 0,
            want: &[("coder", Mention, 1)],
        },
        // ---- which entries are events
        Case {
            name: "a bot's final text wakes",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| {
                t.started("arch", "a1", 1);
                t.say("arch", "@coder please check", "a1");
            },
            policy: default(),
            later: 0,
            want: &[("coder", Mention, 2), ("watch", Always, 2)],
        },
        Case {
            name: "an assistant message with tool calls never wakes",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| {
                t.started("arch", "a1", 1);
                t.push(
                    "arch",
                    assistant_body(
                        "a1",
                        vec![text_block("@coder let me look"), call_block("c1")],
                        StopReason::ToolUse,
                        0,
                    ),
                );
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "a failed assistant message never wakes",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| {
                t.push(
                    "arch",
                    assistant_body("a1", vec![text_block("@coder")], StopReason::Error, 0),
                );
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "an assistant message with no text never wakes",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.push(
                    "arch",
                    assistant_body("a1", vec![thinking_block("hmm")], StopReason::Stop, 0),
                );
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "a tool result never wakes",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.result("arch", "c1", "@watcher done");
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "a chunk never wakes",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.push("arch", chunk("a1"));
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "a signal never wakes",
            roster: &["alice", "watch"],
            thread: |t| {
                t.push("alice", signal());
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "a compaction never wakes",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.push("arch", compaction("@watcher summary", 1));
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "lifecycle entries never wake",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.push("arch", ended("a1"));
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "unknown entry types never wake",
            roster: &["alice", "watch"],
            thread: |t| {
                t.push(
                    "alice",
                    EntryBody::Other {
                        kind: "poll".into(),
                        fields: Default::default(),
                    },
                );
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        // ---- hop limit
        Case {
            name: "a bot's entry wakes at its turn's depth + 1",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.started("arch", "a1", 3);
                t.started("arch", "a2", 5);
                t.say("arch", "done", "a1");
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 4)],
        },
        Case {
            name: "an entry without a known turn takes the author's latest turn",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.started("arch", "a1", 3);
                t.started("watch", "w1", 7);
                t.started("arch", "a2", 5);
                t.chat("arch", "plain words");
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 6)],
        },
        Case {
            name: "a bot entry with no turn in sight counts as depth 1",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.say("arch", "hello", "gone");
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 2)],
        },
        Case {
            name: "the deepest allowed wake still happens",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.started("arch", "a1", 7);
                t.say("arch", "hi", "a1");
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 8)],
        },
        Case {
            name: "nothing wakes beyond the maximum depth",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.started("arch", "a1", 8);
                t.say("arch", "@watcher hi", "a1");
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "the maximum depth is configurable",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.started("arch", "a1", 2);
                t.say("arch", "hi", "a1");
            },
            policy: Policy {
                max_depth: 2,
                ..default()
            },
            later: 0,
            want: &[],
        },
        Case {
            name: "a human entry starts again at depth 1",
            roster: &["alice", "arch", "watch"],
            thread: |t| {
                t.started("arch", "a1", 8);
                t.say("arch", "hi", "a1");
                t.chat("alice", "@archive-bot again");
            },
            policy: default(),
            later: 0,
            want: &[("arch", Mention, 1), ("watch", Always, 1)],
        },
        // ---- loop guard
        Case {
            name: "the loop guard stops the sixth bot event in a row",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| bot_chatter(t, 6),
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "five bot events in a row still wake",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| bot_chatter(t, 5),
            policy: default(),
            later: 0,
            want: &[("watch", Always, 2)],
        },
        Case {
            name: "a human entry resets the loop guard",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| {
                bot_chatter(t, 4);
                t.chat("bob", "carry on");
                bot_chatter(t, 3);
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 2)],
        },
        Case {
            name: "a human event is never stopped by the loop guard",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| {
                bot_chatter(t, 10);
                t.chat("alice", "stop it");
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 1)],
        },
        Case {
            name: "bot events older than the window do not count",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| {
                bot_chatter(t, 5);
                t.clock += 60_000;
                bot_chatter(t, 1);
            },
            policy: default(),
            later: 0,
            want: &[("watch", Always, 2)],
        },
        Case {
            name: "the window is measured from now",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| bot_chatter(t, 6),
            policy: default(),
            later: 55_000,
            want: &[("watch", Always, 2)],
        },
        Case {
            name: "tool traffic between bot events does not break the run",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| {
                bot_chatter(t, 3);
                t.result("arch", "c1", "x");
                t.push("alice", signal());
                bot_chatter(t, 3);
            },
            policy: default(),
            later: 0,
            want: &[],
        },
        Case {
            name: "the loop guard's count is configurable",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| bot_chatter(t, 2),
            policy: Policy {
                loop_events: 2,
                ..default()
            },
            later: 0,
            want: &[],
        },
        Case {
            name: "the loop guard's window is configurable",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| bot_chatter(t, 6),
            policy: Policy {
                loop_window: Duration::from_millis(500),
                ..default()
            },
            later: 0,
            want: &[("watch", Always, 2)],
        },
        Case {
            name: "a zero count turns the loop guard off",
            roster: &["alice", "arch", "coder", "watch"],
            thread: |t| bot_chatter(t, 20),
            policy: Policy {
                loop_events: 0,
                ..default()
            },
            later: 0,
            want: &[("watch", Always, 2)],
        },
        // ---- fanout cap and fairness
        Case {
            name: "mentions first, then always, then ambient, capped",
            roster: EVERYONE,
            thread: |t| {
                t.chat("alice", "@poet and @coder: rust?");
            },
            policy: default(),
            later: 0,
            want: &[
                ("coder", Mention, 1),
                ("poet", Mention, 1),
                ("watch", Always, 1),
            ],
        },
        Case {
            name: "ambient candidates fill what is left",
            roster: &["alice", "arch", "watch", "rusty", "poet"],
            thread: |t| {
                t.chat("alice", "@archive-bot hi");
            },
            policy: default(),
            later: 0,
            want: &[
                ("arch", Mention, 1),
                ("watch", Always, 1),
                ("rusty", Ambient, 1),
            ],
        },
        Case {
            name: "the cap is configurable",
            roster: EVERYONE,
            thread: |t| {
                t.chat("alice", "hi");
            },
            policy: Policy {
                max_fanout: 5,
                ..default()
            },
            later: 0,
            want: &[
                ("watch", Always, 1),
                ("echo", Always, 1),
                ("herald", Always, 1),
                ("rusty", Ambient, 1),
                ("poet", Ambient, 1),
            ],
        },
        Case {
            name: "a zero cap wakes nobody",
            roster: EVERYONE,
            thread: |t| {
                t.chat("alice", "@coder hi");
            },
            policy: Policy {
                max_fanout: 0,
                ..default()
            },
            later: 0,
            want: &[],
        },
        Case {
            name: "ties go to the least recently woken, never woken first",
            roster: &["alice", "watch", "echo", "herald"],
            thread: |t| {
                t.started("watch", "w1", 1);
                t.chat("alice", "hi");
            },
            policy: Policy {
                max_fanout: 2,
                ..default()
            },
            later: 0,
            want: &[("echo", Always, 1), ("herald", Always, 1)],
        },
        Case {
            name: "among woken bots the earliest latest wake goes first",
            roster: &["alice", "watch", "echo", "herald"],
            thread: |t| {
                t.started("herald", "h1", 1);
                t.started("watch", "w1", 1);
                t.started("echo", "e1", 1);
                t.started("herald", "h2", 1);
                t.chat("alice", "hi");
            },
            policy: Policy {
                max_fanout: 2,
                ..default()
            },
            later: 0,
            want: &[("watch", Always, 1), ("echo", Always, 1)],
        },
        Case {
            name: "fairness orders mentioned bots too",
            roster: MENTION_ONLY,
            thread: |t| {
                t.started("arch", "a1", 1);
                t.chat("alice", "@archive-bot @coder hi");
            },
            policy: Policy {
                max_fanout: 1,
                ..default()
            },
            later: 0,
            want: &[("coder", Mention, 1)],
        },
        Case {
            name: "last ties go by roster order",
            roster: &["alice", "herald", "echo", "watch"],
            thread: |t| {
                t.chat("alice", "hi");
            },
            policy: Policy {
                max_fanout: 2,
                ..default()
            },
            later: 0,
            want: &[("herald", Always, 1), ("echo", Always, 1)],
        },
    ]
}

#[test]
fn dispatcher_rules() {
    let mut failures = Vec::new();
    for case in cases() {
        let roster = cast(case.roster);
        let mut thread = Thread::new();
        (case.thread)(&mut thread);
        let (event, recent) = thread.entries.split_last().unwrap();
        let now = event.at + case.later;
        let wakes = dispatch(event, recent, &roster, &case.policy, now);
        let got: Vec<(&str, WakeReason, u32)> =
            wakes.iter().map(|w| (&*w.bot, w.reason, w.depth)).collect();
        if got != case.want {
            failures.push(format!(
                "{}:\n  want {:?}\n  got  {:?}",
                case.name, case.want, got
            ));
        }
        assert!(
            wakes.iter().all(|w| w.trigger == event.seq),
            "{}",
            case.name
        );
        // The history may include the event itself: same answer.
        let with_event = dispatch(event, &thread.entries, &roster, &case.policy, now);
        assert_eq!(with_event, wakes, "{}", case.name);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn reasons_are_written_as_turn_started_reasons() {
    assert_eq!(Mention.as_str(), "mention");
    assert_eq!(Always.as_str(), "always");
    assert_eq!(Ambient.as_str(), "ambient");
}

#[test]
fn only_recent_entries_before_the_event_count() {
    // Entries after the event (a caller passing a longer window) are ignored.
    let roster = cast(&["alice", "arch", "coder", "watch"]);
    let mut t = Thread::new();
    t.started("arch", "a1", 2);
    t.say("arch", "hi", "a1");
    let event: Entry = t.entries.last().unwrap().clone();
    t.started("arch", "a1", 8);
    bot_chatter(&mut t, 10);
    let wakes = dispatch(&event, &t.entries, &roster, &Policy::default(), event.at);
    assert_eq!(wakes.len(), 1);
    assert_eq!(wakes[0].depth, 3);
}

#[test]
fn halt_says_why_nobody_woke() {
    let roster = cast(&["alice", "arch", "coder", "watch"]);
    let halt_of = |t: &Thread, policy: &Policy| {
        let (event, recent) = t.entries.split_last().unwrap();
        halt(event, recent, &roster, policy, event.at)
    };
    let mut t = Thread::new();
    bot_chatter(&mut t, 6);
    assert_eq!(halt_of(&t, &Policy::default()), Some(Halt::LoopGuard));
    let mut t = Thread::new();
    bot_chatter(&mut t, 5);
    assert_eq!(halt_of(&t, &Policy::default()), None);
    let mut t = Thread::new();
    t.started("arch", "a1", 2);
    t.say("arch", "hi", "a1");
    let shallow = Policy {
        max_depth: 2,
        ..Policy::default()
    };
    assert_eq!(halt_of(&t, &shallow), Some(Halt::HopLimit));
    assert_eq!(Halt::LoopGuard.as_str(), "loop_guard");
    t.chat("alice", "hello");
    assert_eq!(halt_of(&t, &shallow), None);
}
