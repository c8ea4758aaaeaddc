//! Property tests over random threads: several humans and bots, interleaved
//! tool calls, missing and late results, compactions, noise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::time::Duration;

use proptest::prelude::*;
use roundtable_dispatch::compaction::{plan_cut, project_view, split_view};
use roundtable_dispatch::projection::{MISSING_RESULT_TEXT, OWN_CHAT_SOURCE};
use roundtable_dispatch::{
    BotProfile, Participant, Policy, Projection, Roster, Topic, Trigger, build_messages, dispatch,
};
use roundtable_providers::{AssistantBlock, Message, StopReason, UserBlock, UserContent};
use roundtable_test_support::messages::render;
use roundtable_test_support::thread::*;
use roundtable_thread_stream::{Entry, EntryBody};

const HUMANS: [&str; 3] = ["h0", "h1", "h2"];
const BOTS: [&str; 4] = ["b0", "b1", "b2", "b3"];

fn roster() -> Roster {
    let mut people: Vec<Participant> = HUMANS
        .iter()
        .map(|id| Participant::human(*id, format!("Human {id}")))
        .collect();
    let triggers = [
        Trigger::Mention,
        Trigger::Always,
        Trigger::Ambient,
        Trigger::Always,
    ];
    for (id, trigger) in BOTS.iter().zip(triggers) {
        people.push(Participant::bot(
            *id,
            format!("Bot {id}"),
            BotProfile::new(trigger, "p").with_topics([Topic::keyword("rust")]),
        ));
    }
    Roster::new(people).unwrap()
}

/// One step of a random thread.
#[derive(Debug, Clone)]
enum Op {
    Chat {
        author: usize,
        mention: Option<usize>,
        image: bool,
    },
    Assistant {
        bot: usize,
        calls: usize,
        text: bool,
        thinking: bool,
        stop: usize,
        reuse_id: bool,
    },
    Result {
        bot: usize,
        pick: usize,
    },
    Compaction {
        bot: usize,
        upto: u64,
    },
    Started {
        bot: usize,
        depth: u32,
    },
    Noise {
        author: usize,
        kind: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..7usize, proptest::option::of(0..7usize), any::<bool>())
            .prop_map(|(author, mention, image)| Op::Chat { author, mention, image }),
        4 => (0..4usize, 0..4usize, any::<bool>(), any::<bool>(), 0..6usize, any::<bool>())
            .prop_map(|(bot, calls, text, thinking, stop, reuse_id)| Op::Assistant {
                bot, calls, text, thinking, stop, reuse_id
            }),
        4 => (0..4usize, 0..8usize).prop_map(|(bot, pick)| Op::Result { bot, pick }),
        1 => (0..4usize, 0..60u64).prop_map(|(bot, upto)| Op::Compaction { bot, upto }),
        1 => (0..4usize, 0..10u32).prop_map(|(bot, depth)| Op::Started { bot, depth }),
        2 => (0..7usize, 0..4usize).prop_map(|(author, kind)| Op::Noise { author, kind }),
    ]
}

fn participant(i: usize) -> &'static str {
    if i < HUMANS.len() {
        HUMANS[i]
    } else {
        BOTS[i - HUMANS.len()]
    }
}

/// Turns ops into a thread. Every bot's thinking and tool results carry the
/// word "secret" so leaks are easy to spot.
fn materialise(ops: &[Op], step_ms: i64) -> Vec<Entry> {
    let mut t = Thread::new();
    let mut calls: Vec<Vec<String>> = vec![Vec::new(); BOTS.len()];
    let mut next_call = 0;
    for op in ops {
        t.clock += step_ms;
        let at = t.clock;
        match *op {
            Op::Chat {
                author,
                mention,
                image: with_image,
            } => {
                let mut text = format!("message {}", t.next_seq());
                if let Some(m) = mention {
                    let kind = if m < HUMANS.len() { "human" } else { "bot" };
                    text.push_str(&format!(" @{kind}-{}", participant(m)));
                }
                let parts = if with_image {
                    vec![image("image/png")]
                } else {
                    vec![]
                };
                t.push_at(participant(author), chat_with(&text, parts, &[]), at);
            }
            Op::Assistant {
                bot,
                calls: n,
                text,
                thinking,
                stop,
                reuse_id,
            } => {
                let mut blocks = Vec::new();
                if thinking {
                    blocks.push(thinking_block(&format!("secret thinking of {}", BOTS[bot])));
                }
                if text {
                    blocks.push(text_block(&format!("said by {} about rust", BOTS[bot])));
                }
                for _ in 0..n {
                    let id = if reuse_id && !calls[bot].is_empty() {
                        calls[bot][0].clone()
                    } else {
                        next_call += 1;
                        format!("c{next_call}")
                    };
                    calls[bot].push(id.clone());
                    blocks.push(call_block(&id));
                }
                let stop = [
                    StopReason::Stop,
                    StopReason::ToolUse,
                    StopReason::Stop,
                    StopReason::Length,
                    StopReason::Error,
                    StopReason::Aborted,
                ][stop];
                t.push_at(BOTS[bot], assistant_body("turn", blocks, stop, at), at);
            }
            Op::Result { bot, pick } => {
                let id = if calls[bot].is_empty() || pick == 7 {
                    "ghost".to_owned()
                } else {
                    calls[bot][pick % calls[bot].len()].clone()
                };
                t.push_at(
                    BOTS[bot],
                    result_body(&id, &format!("secret result for {}", BOTS[bot]), at),
                    at,
                );
            }
            Op::Compaction { bot, upto } => {
                t.push_at(BOTS[bot], compaction("summary", upto), at);
            }
            Op::Started { bot, depth } => {
                t.push_at(
                    BOTS[bot],
                    EntryBody::TurnStarted(roundtable_thread_stream::TurnStarted {
                        turn: "turn".into(),
                        trigger: None,
                        depth,
                        reason: None,
                    }),
                    at,
                );
            }
            Op::Noise { author, kind } => {
                let body = match kind {
                    0 => chunk("turn"),
                    1 => signal(),
                    2 => ended("turn"),
                    _ => EntryBody::Other {
                        kind: "x.y".into(),
                        fields: Default::default(),
                    },
                };
                t.push_at(participant(author), body, at);
            }
        }
    }
    t.entries
}

fn thread() -> impl Strategy<Value = Vec<Entry>> {
    (proptest::collection::vec(op(), 0..60), 0..20_000i64)
        .prop_map(|(ops, step)| materialise(&ops, step))
}

/// Checks every invariant of one bot's projection.
fn check_projection(me: &str, entries: &[Entry], messages: &[Message]) -> Result<(), String> {
    // The cut made by the bot's latest compaction.
    let cutoff = entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Compaction(c) if &*e.author == me => Some(c.upto.min(e.seq)),
            _ => None,
        })
        .next_back()
        .unwrap_or(0);
    let own_results: Vec<_> = entries
        .iter()
        .filter(|e| &*e.author == me)
        .filter_map(|e| match &e.body {
            EntryBody::ToolResult(r) => Some(&r.message),
            _ => None,
        })
        .collect();

    let mut i = 0;
    let mut own_assistants = Vec::new();
    while i < messages.len() {
        match &messages[i] {
            Message::Assistant(a) => {
                let synthetic = &*a.api == OWN_CHAT_SOURCE.0;
                if !synthetic {
                    own_assistants.push(a);
                }
                // Its tool results follow, exactly, in call order.
                let calls: Vec<&str> = a.tool_calls().map(|c| &*c.id).collect();
                for (k, id) in calls.iter().enumerate() {
                    match messages.get(i + 1 + k) {
                        Some(Message::ToolResult(r)) if &*r.tool_call_id == *id => {
                            let backfill =
                                r.is_error && r.content == [UserBlock::text(MISSING_RESULT_TEXT)];
                            if !backfill && !own_results.contains(&r) {
                                return Err(format!("foreign tool result at {}", i + 1 + k));
                            }
                        }
                        other => return Err(format!("dangling call {id} at {i}: {other:?}")),
                    }
                }
                i += 1 + calls.len();
            }
            Message::ToolResult(r) => {
                return Err(format!("result {} without its call at {i}", r.tool_call_id));
            }
            Message::User(u) => {
                if matches!(messages.get(i + 1), Some(Message::User(_))) {
                    return Err(format!("two user messages in a row at {i}"));
                }
                let UserContent::Blocks(blocks) = &u.content else {
                    return Err("user content should be blocks".into());
                };
                for b in blocks {
                    if let UserBlock::Text(t) = b
                        && t.text.contains("secret")
                    {
                        return Err(format!("thinking or tool traffic leaked: {}", t.text));
                    }
                }
                i += 1;
            }
        }
    }

    // Own messages, in order: exactly the bot's non-failed assistant entries
    // after the cut.
    let expected: Vec<_> = entries
        .iter()
        .filter(|e| &*e.author == me && e.seq > cutoff)
        .filter_map(|e| match &e.body {
            EntryBody::Assistant(a) if !a.message().stop_reason.is_failure() => Some(a.message()),
            _ => None,
        })
        .collect();
    if own_assistants != expected {
        return Err("own assistant messages are not the bot's own, in order".into());
    }
    // No assistant message but the bot's own shows thinking or calls of others.
    for a in &own_assistants {
        for b in &a.content {
            if let AssistantBlock::Thinking(t) = b
                && !t.thinking.ends_with(me)
            {
                return Err(format!("someone else's thinking: {}", t.thinking));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn projection_invariants_hold_for_every_bot(entries in thread()) {
        let roster = roster();
        for me in BOTS {
            let full = build_messages(me, &entries, &roster);
            if let Err(problem) = check_projection(me, &entries, &full) {
                return Err(TestCaseError::fail(format!("{me}: {problem}")));
            }
            prop_assert_eq!(&build_messages(me, &entries, &roster), &full);
        }
    }

    #[test]
    fn incremental_equals_full_at_every_step(entries in thread(), replay in 0..8usize) {
        let roster = roster();
        for me in BOTS {
            let mut incremental = Projection::new(me, &roster);
            for (n, e) in entries.iter().enumerate() {
                prop_assert!(incremental.push(e));
                // Replaying an earlier entry changes nothing.
                if n >= replay {
                    prop_assert!(!incremental.push(&entries[n - replay]));
                }
                let full = build_messages(me, &entries[..=n], &roster);
                prop_assert_eq!(incremental.messages(), full.as_slice());
            }
        }
    }

    #[test]
    fn dispatcher_is_deterministic_and_within_its_limits(
        entries in thread(),
        fanout in 0..6usize,
        loop_events in 0..8usize,
        max_depth in 1..10u32,
        window_s in 1..120u64,
        later in 0..90_000i64,
    ) {
        prop_assume!(!entries.is_empty());
        let roster = roster();
        let policy = Policy {
            loop_events,
            loop_window: Duration::from_secs(window_s),
            max_depth,
            max_fanout: fanout,
        };
        let (event, recent) = entries.split_last().unwrap();
        let now = event.at + later;
        let wakes = dispatch(event, recent, &roster, &policy, now);
        prop_assert_eq!(&dispatch(event, recent, &roster, &policy, now), &wakes);
        prop_assert!(wakes.len() <= fanout);
        let bots: HashSet<&str> = wakes.iter().map(|w| &*w.bot).collect();
        prop_assert_eq!(bots.len(), wakes.len(), "a bot woke twice");
        for w in &wakes {
            prop_assert!(roster.is_bot(&w.bot));
            prop_assert!(w.bot != event.author, "woken by its own entry");
            prop_assert!(w.depth >= 1 && w.depth <= max_depth);
            prop_assert_eq!(w.trigger, event.seq);
        }
        prop_assert!(wakes.windows(2).all(|p| p[0].reason <= p[1].reason));
        if roundtable_dispatch::event::event_text(event).is_none() && !matches!(event.body, EntryBody::Chat(_)) {
            prop_assert!(wakes.is_empty());
        }
    }
}

/// A view of `entries` as a runner placing turns where they started may
/// take them: other authors' entries each held back by up to `delays[i]`
/// places (the bot's own keep their order).
fn view_order(me: &str, entries: &[Entry], delays: &[usize]) -> Vec<Entry> {
    let mut keyed: Vec<(usize, usize, &Entry)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let delay = if &*e.author == me {
                0
            } else {
                delays.get(i).copied().unwrap_or(0)
            };
            (i + delay, i, e)
        })
        .collect();
    keyed.sort_by_key(|(key, i, _)| (*key, *i));
    keyed.into_iter().map(|(_, _, e)| e.clone()).collect()
}

/// Messages as a list of items: each block of a user message, each
/// assistant message, each tool result (merging of user turns aside).
fn items(messages: &[Message]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        match m {
            Message::User(u) => match &u.content {
                UserContent::Text(t) => out.push(format!("user: {t}")),
                UserContent::Blocks(blocks) => {
                    for b in blocks {
                        out.push(format!("user: {}", render_block(b)));
                    }
                }
            },
            other => out.extend(render(std::slice::from_ref(other))),
        }
    }
    out
}

fn render_block(b: &UserBlock) -> String {
    match b {
        UserBlock::Text(t) => t.text.to_string(),
        UserBlock::Image(i) => format!("image({})", i.mime_type),
    }
}

/// No call without its result right after it, no result without its call.
fn paired(messages: &[Message]) -> Result<(), String> {
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::Assistant(a) => {
                let calls: Vec<&str> = a.tool_calls().map(|c| &*c.id).collect();
                for (k, id) in calls.iter().enumerate() {
                    match messages.get(i + 1 + k) {
                        Some(Message::ToolResult(r)) if &*r.tool_call_id == *id => {}
                        other => return Err(format!("call {id} without its result: {other:?}")),
                    }
                }
                i += 1 + calls.len();
            }
            Message::ToolResult(r) => {
                return Err(format!("result {} without its call", r.tool_call_id));
            }
            Message::User(_) => i += 1,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Invariant 10 for any thread, any view order and any budget: after a
    /// compaction at the planned cut, every tool call in the projection
    /// keeps its result, and what follows the summary is exactly what the
    /// kept entries show on their own, unchanged from before.
    #[test]
    fn a_compaction_never_drops_a_kept_message_nor_parts_a_call_from_its_result(
        entries in thread(),
        delays in proptest::collection::vec(prop_oneof![6 => Just(0usize), 1 => 1..12usize], 60),
        keep in 0..400u64,
    ) {
        let roster = roster();
        for me in BOTS {
            let view = view_order(me, &entries, &delays);
            let split = split_view(me, &view, &roster);
            let Some(cut) = plan_cut(&view, &split, keep) else { continue };
            prop_assert!(cut.covered_units.end >= 1 && cut.covered_units.end < split.units.len());
            prop_assert!(split.units[cut.covered_units.clone()].iter().all(|u| !u.open));
            prop_assert!(split.units[cut.covered_units.end..].iter().all(|u| u.first() >= cut.covered_positions));
            prop_assert!(split.units[cut.covered_units.clone()].iter().all(|u| u.last() < cut.covered_positions));

            let mut after = view.clone();
            let last_seq = view.iter().map(|e| e.seq).max().unwrap_or(0);
            after.push(Entry {
                seq: last_seq + 1,
                id: "new-compaction".into(),
                thread: view[0].thread.clone(),
                author: me.into(),
                at: 0,
                body: compaction("NEW SUMMARY", cut.upto),
            });
            let before = project_view(me, &view, &roster);
            let compacted = project_view(me, &after, &roster);
            if let Err(problem) = paired(&compacted) {
                return Err(TestCaseError::fail(format!("{me}: {problem}")));
            }
            // What the kept entries show on their own (older compactions
            // left out, so none of them applies).
            let kept: Vec<Entry> = view[cut.covered_positions..]
                .iter()
                .filter(|e| !(matches!(e.body, EntryBody::Compaction(_)) && &*e.author == me))
                .cloned()
                .collect();
            let alone = items(&project_view(me, &kept, &roster));
            let shown = items(&compacted);
            prop_assert!(shown[0].contains("NEW SUMMARY"));
            prop_assert_eq!(&shown[1..], alone.as_slice(), "{}: the kept part changed", me);
            let old = items(&before);
            prop_assert!(old.ends_with(&alone), "{}: the kept part was not shown before", me);
            // The next split starts where this cut ended, with the kept units.
            let next = split_view(me, &after, &roster);
            prop_assert_eq!(next.tail_start, cut.covered_positions);
            prop_assert_eq!(&next.units[..], &split.units[cut.covered_units.end..]);
        }
    }
}
