//! Compaction's pure side on hand-written threads: units, cuts, the
//! transcript a summarizer reads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use roundtable_dispatch::compaction::{
    TRANSCRIPT_CUT_CHARS, files_touched, humans_words, plan_cut, split_view, transcript,
};
use roundtable_providers::{AssistantBlock, StopReason, ToolCall};
use roundtable_test_support::roster::*;
use roundtable_test_support::thread::*;

#[test]
fn a_call_still_waiting_for_its_result_is_never_covered() {
    let roster = cast(&["alice", "arch"]);
    let mut t = Thread::new();
    t.chat("alice", "first");
    t.chat("alice", "second");
    t.calls("arch", "t1", &["c1"]); // the turn is still open: no result yet
    t.chat("alice", "third");
    let split = split_view("arch", &t.entries, &roster);
    assert_eq!(split.units.len(), 4);
    assert!(split.units[2].open);
    let cut = plan_cut(&t.entries, &split, 0).unwrap();
    // The budget asks to keep the newest unit only; the open call and
    // everything after it stay.
    assert_eq!(cut.covered_units, 0..2);
    assert_eq!(cut.upto, 2);

    // Once its turn is over, a call without a result is answered by a
    // back-fill for good: nothing is waiting any more.
    t.push("arch", ended("t1"));
    let split = split_view("arch", &t.entries, &roster);
    assert!(!split.units[2].open);
    assert_eq!(plan_cut(&t.entries, &split, 0).unwrap().covered_units, 0..3);
}

#[test]
fn a_call_and_a_late_result_are_one_unit_and_the_cut_goes_around_them() {
    let roster = cast(&["alice", "bob", "arch"]);
    let mut t = Thread::new();
    t.calls("arch", "t1", &["c1"]); // 1
    t.chat("alice", "meanwhile"); // 2
    t.result("arch", "c1", "found it"); // 3
    t.chat("bob", "thanks"); // 4
    t.push("arch", ended("t1")); // 5
    t.chat("alice", "next question"); // 6
    let split = split_view("arch", &t.entries, &roster);
    let positions: Vec<_> = split.units.iter().map(|u| u.positions.clone()).collect();
    assert_eq!(positions, [vec![0, 2], vec![1], vec![3], vec![5]]);
    // Keeping Alice's "meanwhile" and what follows would cut between the
    // call and its result: the cut goes after the result instead.
    let keep = split.units[1..].iter().map(|u| u.tokens).sum();
    let cut = plan_cut(&t.entries, &split, keep).unwrap();
    assert_eq!(cut.covered_units, 0..2);
    assert_eq!(cut.upto, 3);
    assert_eq!(cut.covered_positions, 3);
    // Keeping only the newest: the lifecycle entry before it is covered too.
    let cut = plan_cut(&t.entries, &split, 0).unwrap();
    assert_eq!(cut.covered_units, 0..3);
    assert_eq!((cut.upto, cut.covered_positions), (5, 5));
}

#[test]
fn a_transcript_labels_every_speaker_and_cuts_long_tool_output() {
    let roster = cast(&["alice", "arch", "coder"]);
    let mut t = Thread::new();
    t.chat("alice", "@arch read the config, and never touch prod");
    let mut call = ToolCall::new("c1", "read_file", serde_json::Map::new());
    std::sync::Arc::make_mut(&mut call.arguments).insert("path".into(), "conf/app.toml".into());
    t.push(
        "arch",
        assistant_body(
            "t1",
            vec![
                thinking_block("the file is small"),
                AssistantBlock::ToolCall(call),
            ],
            StopReason::ToolUse,
            0,
        ),
    );
    t.result("arch", "c1", &"x".repeat(TRANSCRIPT_CUT_CHARS + 5));
    t.say("arch", "It says port 8080.", "t1");
    t.say("coder", "I agree.", "t2");
    let split = split_view("arch", &t.entries, &roster);
    let lines = transcript(
        "arch",
        &t.entries,
        &split.units,
        &roster,
        TRANSCRIPT_CUT_CHARS,
    );
    assert_eq!(
        lines[0],
        "[Alice]: @arch read the config, and never touch prod"
    );
    assert_eq!(lines[1], "[you, thinking]: the file is small");
    assert_eq!(lines[2], "[you called read_file]: path=\"conf/app.toml\"");
    assert!(lines[3].starts_with("[result of lookup]: xxxx"));
    assert!(lines[3].ends_with("[... 5 more characters cut]"));
    assert_eq!(lines[4], "[you]: It says port 8080.");
    assert_eq!(lines[5], "[bot:coder]: I agree.");
    assert_eq!(
        humans_words("arch", &t.entries, &split.units, &roster),
        ["[Alice]: @arch read the config, and never touch prod"]
    );
    assert_eq!(
        files_touched("arch", &t.entries, &split.units),
        ["read_file: conf/app.toml"]
    );
}
