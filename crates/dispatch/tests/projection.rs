//! The projection rules of `build_messages`, one scenario each, checked on
//! both the full and the incremental form.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use roundtable_dispatch::projection::{
    COMPACTION_PREFIX, COMPACTION_SUFFIX, MISSING_RESULT_TEXT, OWN_CHAT_SOURCE,
};
use roundtable_dispatch::{Projection, build_messages};
use roundtable_providers::{AssistantBlock, Message, StopReason, UserBlock};
use roundtable_test_support::messages::*;
use roundtable_test_support::roster::*;
use roundtable_test_support::thread::*;
use roundtable_thread_stream::EntryBody;

const CAST: &[&str] = &["alice", "bob", "arch", "coder", "watch"];

/// Projects for `arch` both ways, checks they agree, and renders.
fn project(t: &Thread) -> Vec<String> {
    let roster = cast(CAST);
    let full = build_messages("arch", &t.entries, &roster);
    let mut incremental = Projection::new("arch", &roster);
    incremental.extend(&t.entries);
    assert_eq!(incremental.messages(), full.as_slice());
    render(&full)
}

#[test]
fn other_speakers_are_labelled_and_merged_into_one_user_message() {
    let mut t = Thread::new();
    t.chat("alice", "@archive-bot where is Q3?");
    t.chat("bob", "and Q2");
    t.chat("alice", "");
    assert_eq!(
        project(&t),
        ["user: [Alice]: @archive-bot where is Q3? | [Bob]: and Q2 | [Alice]:"]
    );
}

#[test]
fn own_messages_pass_through_unchanged_and_share_text() {
    let mut t = Thread::new();
    t.chat("alice", "hi");
    let mine = t.push(
        "arch",
        assistant_body(
            "a1",
            vec![thinking_block("plan"), text_block("hello Alice")],
            StopReason::Stop,
            5,
        ),
    );
    let roster = cast(CAST);
    let messages = build_messages("arch", &t.entries, &roster);
    let EntryBody::Assistant(entry) = &mine.body else {
        unreachable!()
    };
    assert_eq!(messages[1], Message::Assistant(entry.message().clone()));
    // The text is shared with the entry, not copied.
    let (Message::Assistant(out), AssistantBlock::Text(original)) =
        (&messages[1], &entry.message().content[1])
    else {
        unreachable!()
    };
    let AssistantBlock::Text(projected) = &out.content[1] else {
        unreachable!()
    };
    assert!(std::ptr::eq(&*projected.text, &*original.text));
}

#[test]
fn tool_results_follow_their_call_even_when_others_spoke_between() {
    let mut t = Thread::new();
    t.chat("alice", "look it up");
    t.calls("arch", "a1", &["c1"]);
    t.chat("bob", "meanwhile...");
    t.result("arch", "c1", "found it");
    t.say("arch", "here it is", "a1");
    assert_eq!(
        project(&t),
        [
            "user: [Alice]: look it up",
            "assistant: call(c1)",
            "result c1: found it",
            "user: [Bob]: meanwhile...",
            "assistant: here it is",
        ]
    );
}

#[test]
fn a_missing_result_is_back_filled_once() {
    let mut t = Thread::new();
    t.calls("arch", "a1", &["c1", "c2"]);
    t.result("arch", "c2", "two");
    t.chat("alice", "hello?");
    let roster = cast(CAST);
    let mut incremental = Projection::new("arch", &roster);
    incremental.extend(&t.entries);
    let missing = format!("result! c1: {MISSING_RESULT_TEXT}");
    assert_eq!(
        render(incremental.messages()),
        [
            "assistant: call(c1), call(c2)",
            &missing,
            "result c2: two",
            "user: [Alice]: hello?"
        ]
    );
    // The result arrives late: it replaces the back-fill, nothing is duplicated.
    let late = t.result("arch", "c1", "one");
    incremental.push(&late);
    assert_eq!(
        project(&t),
        [
            "assistant: call(c1), call(c2)",
            "result c1: one",
            "result c2: two",
            "user: [Alice]: hello?",
        ]
    );
    assert_eq!(render(incremental.messages()), project(&t));
}

#[test]
fn results_come_in_call_order_and_match_their_own_message() {
    let mut t = Thread::new();
    t.calls("arch", "a1", &["c1", "c2"]);
    t.result("arch", "c2", "two");
    t.result("arch", "c1", "one");
    t.calls("arch", "a1", &["c3"]);
    t.chat("alice", "?");
    t.result("arch", "c3", "three");
    assert_eq!(
        project(&t),
        [
            "assistant: call(c1), call(c2)",
            "result c1: one",
            "result c2: two",
            "assistant: call(c3)",
            "result c3: three",
            "user: [Alice]: ?",
        ]
    );
}

#[test]
fn unknown_and_repeated_results_are_dropped() {
    let mut t = Thread::new();
    t.result("arch", "ghost", "no call for me");
    t.calls("arch", "a1", &["c1"]);
    t.result("arch", "c1", "first");
    t.result("arch", "c1", "second");
    assert_eq!(project(&t), ["assistant: call(c1)", "result c1: first"]);
}

#[test]
fn a_reused_call_id_answers_the_latest_call() {
    let mut t = Thread::new();
    t.calls("arch", "a1", &["call_0"]);
    t.calls("arch", "a1", &["call_0"]);
    t.result("arch", "call_0", "answer");
    let missing = format!("result! call_0: {MISSING_RESULT_TEXT}");
    assert_eq!(
        project(&t),
        [
            "assistant: call(call_0)",
            &missing,
            "assistant: call(call_0)",
            "result call_0: answer",
        ]
    );
}

#[test]
fn other_bots_show_only_their_final_text() {
    let mut t = Thread::new();
    t.chat("alice", "@coder @archive-bot go");
    t.push(
        "coder",
        assistant_body(
            "k1",
            vec![
                thinking_block("secret plan"),
                text_block("let me check"),
                call_block("k-c1"),
            ],
            StopReason::ToolUse,
            0,
        ),
    );
    t.result("coder", "k-c1", "secret output");
    t.push("coder", chunk("k1"));
    t.push(
        "coder",
        assistant_body(
            "k1",
            vec![
                thinking_block("secret"),
                text_block("It is in"),
                text_block("the vault."),
            ],
            StopReason::Stop,
            0,
        ),
    );
    t.push(
        "coder",
        assistant_body("k2", vec![text_block("broken")], StopReason::Error, 0),
    );
    assert_eq!(
        project(&t),
        ["user: [Alice]: @coder @archive-bot go | [Coder]: It is in\nthe vault."]
    );
}

#[test]
fn own_plain_chat_is_an_assistant_message() {
    let mut t = Thread::new();
    t.chat("arch", "Good morning, I keep the archive.");
    t.push("arch", chat_with("", vec![image("image/png")], &[]));
    let roster = cast(CAST);
    let messages = build_messages("arch", &t.entries, &roster);
    assert_eq!(
        render(&messages),
        [
            "assistant: Good morning, I keep the archive.",
            "assistant: [image: image/png]",
        ]
    );
    let Message::Assistant(m) = &messages[0] else {
        unreachable!()
    };
    assert_eq!(
        (&*m.api, &*m.provider, &*m.model),
        (OWN_CHAT_SOURCE.0, OWN_CHAT_SOURCE.1, OWN_CHAT_SOURCE.2)
    );
    assert_eq!(m.stop_reason, StopReason::Stop);
}

#[test]
fn noise_and_other_authors_compactions_are_skipped() {
    let mut t = Thread::new();
    t.started("arch", "a1", 1);
    t.push("arch", chunk("a1"));
    t.push("alice", signal());
    t.push("coder", compaction("coder's summary", 1));
    t.push("arch", ended("a1"));
    t.push(
        "alice",
        EntryBody::Other {
            kind: "poll".into(),
            fields: Default::default(),
        },
    );
    t.result("coder", "c9", "not mine");
    t.chat("alice", "only this");
    assert_eq!(project(&t), ["user: [Alice]: only this"]);
}

#[test]
fn own_latest_compaction_replaces_what_it_covers() {
    let mut t = Thread::new();
    t.chat("alice", "old question"); // 1
    t.calls("arch", "a1", &["c1"]); // 2
    t.push("arch", compaction("first summary", 1)); // 3
    t.chat("bob", "covered by the second summary"); // 4
    t.push("arch", compaction("second summary", 4)); // 5
    t.result("arch", "c1", "late result of a compacted call"); // 6
    t.chat("alice", "new question"); // 7
    let summary = format!(
        "user: {COMPACTION_PREFIX}second summary{COMPACTION_SUFFIX} | [Alice]: new question"
    );
    assert_eq!(project(&t), [summary]);
}

#[test]
fn a_compaction_never_covers_what_came_after_it() {
    let mut t = Thread::new();
    t.chat("alice", "before"); // 1
    t.push("arch", compaction("summary", 99)); // 2
    t.chat("alice", "after"); // 3
    let summary = format!("user: {COMPACTION_PREFIX}summary{COMPACTION_SUFFIX} | [Alice]: after");
    assert_eq!(project(&t), [summary]);
}

#[test]
fn a_later_compaction_with_a_smaller_range_shows_more_again() {
    let mut t = Thread::new();
    t.chat("alice", "one"); // 1
    t.chat("bob", "two"); // 2
    t.push("arch", compaction("big", 2)); // 3
    t.push("arch", compaction("small", 1)); // 4
    let summary = format!("user: {COMPACTION_PREFIX}small{COMPACTION_SUFFIX} | [Bob]: two");
    assert_eq!(project(&t), [summary]);
}

#[test]
fn images_pass_through_and_text_parts_join_the_speakers_block() {
    let mut t = Thread::new();
    t.push(
        "alice",
        chat_with(
            "see this",
            vec![image("image/png"), UserBlock::text("caption")],
            &[],
        ),
    );
    t.chat("bob", "nice");
    assert_eq!(
        project(&t),
        ["user: [Alice]: see this\ncaption | image(image/png) | [Bob]: nice"]
    );
}

#[test]
fn failed_own_messages_are_skipped_with_their_calls() {
    let mut t = Thread::new();
    t.chat("alice", "go");
    t.push(
        "arch",
        assistant_body(
            "a1",
            vec![text_block("half"), call_block("c1")],
            StopReason::Aborted,
            0,
        ),
    );
    t.result("arch", "c1", "never ran");
    t.say("arch", "retrying: done", "a2");
    assert_eq!(
        project(&t),
        ["user: [Alice]: go", "assistant: retrying: done"]
    );
}

#[test]
fn unknown_authors_are_labelled_by_id() {
    let mut t = Thread::new();
    t.chat("guest-7", "hello");
    assert_eq!(project(&t), ["user: [guest-7]: hello"]);
}

#[test]
fn entries_out_of_order_are_ignored_by_both_forms() {
    let mut t = Thread::new();
    t.chat("alice", "one");
    t.chat("bob", "two");
    let mut entries = t.entries.clone();
    entries.push(t.entries[0].clone());
    let roster = cast(CAST);
    let full = build_messages("arch", &entries, &roster);
    let mut incremental = Projection::new("arch", &roster);
    incremental.extend(&entries);
    assert_eq!(incremental.messages(), full.as_slice());
    assert_eq!(render(&full), ["user: [Alice]: one | [Bob]: two"]);
    assert_eq!(incremental.last_seq(), 2);
}

#[test]
fn recomputing_gives_the_same_messages() {
    let mut t = Thread::new();
    t.chat("alice", "a");
    t.calls("arch", "a1", &["c1"]);
    t.say("coder", "b", "k1");
    let roster = cast(CAST);
    assert_eq!(
        build_messages("arch", &t.entries, &roster),
        build_messages("arch", &t.entries, &roster)
    );
}
