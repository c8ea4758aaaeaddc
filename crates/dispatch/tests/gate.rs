//! The bot gate: ambient candidates pass through it, nothing else does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Mutex;

use async_trait::async_trait;
use roundtable_dispatch::gate::gate_wakes;
use roundtable_dispatch::{BotGate, Participant, Policy, TopicGate, WakeReason, dispatch};
use roundtable_providers::StopReason;
use roundtable_test_support::roster::*;
use roundtable_test_support::thread::*;
use roundtable_thread_stream::Entry;

/// A gate that records whom it was asked about and admits only `yes`.
struct Recording {
    yes: &'static str,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl BotGate for Recording {
    async fn admit(&self, bot: &Participant, _event: &Entry) -> bool {
        self.asked.lock().unwrap().push(bot.id.to_string());
        &*bot.id == self.yes
    }
}

#[tokio::test]
async fn only_ambient_candidates_meet_the_gate() {
    let roster = cast(&["alice", "arch", "watch", "rusty", "poet"]);
    let mut t = Thread::new();
    let event = t.chat("alice", "@archive-bot hi");
    let policy = Policy {
        max_fanout: 4,
        ..Policy::default()
    };
    let wakes = dispatch(&event, &[], &roster, &policy, event.at);
    assert_eq!(wakes.len(), 4);
    let gate = Recording {
        yes: "poet",
        asked: Mutex::new(Vec::new()),
    };
    let kept = gate_wakes(wakes, &event, &roster, &gate).await;
    let kept: Vec<(&str, WakeReason)> = kept.iter().map(|w| (&*w.bot, w.reason)).collect();
    assert_eq!(
        kept,
        [
            ("arch", WakeReason::Mention),
            ("watch", WakeReason::Always),
            ("poet", WakeReason::Ambient)
        ]
    );
    let mut asked = gate.asked.into_inner().unwrap();
    asked.sort();
    assert_eq!(asked, ["poet", "rusty"]);
}

#[tokio::test]
async fn the_topic_gate_matches_the_event_text() {
    let roster = cast(&["alice", "arch", "rusty", "poet"]);
    let mut t = Thread::new();
    for (text, want) in [
        ("Is Rust fast?", vec!["rusty"]),
        ("I trust you", vec![]),
        ("nothing here", vec![]),
    ] {
        let event = t.chat("alice", text);
        let wakes = dispatch(&event, &[], &roster, &Policy::default(), event.at);
        let kept = gate_wakes(wakes, &event, &roster, &TopicGate).await;
        let kept: Vec<&str> = kept.iter().map(|w| &*w.bot).collect();
        assert_eq!(kept, want, "{text}");
    }
    // A bot's final text is matched too.
    let event = t.say("arch", "rust 1.95 is out", "a1");
    let rusty = roster.get("rusty").unwrap();
    assert!(TopicGate.admit(rusty, &event).await);
    // Entries that are not events match nothing.
    let event = t.push(
        "arch",
        assistant_body(
            "a1",
            vec![text_block("rust"), call_block("c1")],
            StopReason::ToolUse,
            0,
        ),
    );
    assert!(!TopicGate.admit(rusty, &event).await);
    // Humans have no topics.
    let alice = roster.get("alice").unwrap();
    assert!(!TopicGate.admits_text(alice, "rust"));
}
