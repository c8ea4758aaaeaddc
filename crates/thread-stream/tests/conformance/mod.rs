//! The store conformance suite: what every `ThreadStore` must do, written once
//! and run against each store by `conformance_suite!`.
//!
//! A store test file does:
//!
//! ```ignore
//! mod conformance;
//! conformance_suite!(async { (Arc::new(MemoryStore::new()) as Arc<dyn ThreadStore>, ()) });
//! ```
//!
//! where the second element keeps whatever the store needs alive (a temp dir,
//! a server) until the test ends.

#![allow(dead_code)]

pub(crate) mod arbitrary;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use roundtable_thread_stream::{
    Entry, EntryBody, Expect, InvalidEntry, NewEntry, StoreError, ThreadId, ThreadStore,
};
use serde_json::json;

/// Runs each test of the suite with a fresh store from `$make`.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@tests $make;
            appends_get_dense_seqs_from_one,
            a_batch_is_appended_whole_and_in_order,
            expect_last_seq_guards_appends,
            a_lost_race_writes_nothing,
            reads_clamp_to_what_exists,
            threads_are_independent,
            concurrent_appends_lose_nothing,
            occ_writers_racing_in_a_retry_loop_never_duplicate,
            subscribe_gives_history_then_live,
            subscribe_from_the_middle,
            subscribe_started_mid_append_has_no_gap_or_duplicate,
            every_subscriber_sees_the_same_order,
            subscribe_ends_when_the_store_closes,
            list_threads_is_sorted_and_skips_empty,
            entries_round_trip_unchanged,
            an_unknown_body_with_a_field_named_id_is_refused,
            an_unknown_body_with_a_field_named_more_is_refused,
            no_body_field_may_take_a_header_name,
            an_unknown_body_may_not_take_a_known_type,
            a_signal_needs_a_name,
            a_cost_that_is_not_a_number_is_refused,
            unusual_but_valid_entries_read_back_equal,
            acknowledged_entries_read_back_equal,
        );
    };
    (@deletion $make:expr) => {
        $crate::conformance_suite!(@tests $make; a_deleted_thread_is_gone);
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                // The guard keeps what the store needs alive until the end.
                let (store, _guard) = $make.await;
                conformance::$name(store).await;
            }
        )*
    };
}

pub(crate) fn tid(s: &str) -> ThreadId {
    ThreadId::new(s).unwrap()
}

pub(crate) fn chat(author: &str, text: &str) -> NewEntry {
    NewEntry::new(author, EntryBody::chat(text))
}

fn texts(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match &e.body {
            EntryBody::Chat(c) => c.text.to_string(),
            other => format!("<{}>", other.kind()),
        })
        .collect()
}

fn assert_dense(entries: &[Entry], from: u64) {
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(
            e.seq,
            from + i as u64,
            "seq gap or duplicate at position {i}"
        );
    }
}

/// Collects `n` entries from a subscription, failing if they take too long.
async fn take(stream: &mut roundtable_thread_stream::EntryStream, n: usize) -> Vec<Entry> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let next = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("subscription stalled");
        match next {
            Some(Ok(e)) => out.push(e),
            Some(Err(e)) => panic!("subscription error: {e}"),
            None => panic!("subscription ended after {} of {n} entries", out.len()),
        }
    }
    out
}

pub(crate) async fn appends_get_dense_seqs_from_one(store: Arc<dyn ThreadStore>) {
    let t = tid("dense");
    assert_eq!(store.last_seq(&t).await.unwrap(), 0);
    for i in 1..=5u64 {
        let written = store
            .append(&t, Expect::Any, vec![chat("alice", &format!("m{i}"))])
            .await
            .unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].seq, i);
        assert_eq!(written[0].thread, t);
        assert_eq!(&*written[0].author, "alice");
    }
    assert_eq!(store.last_seq(&t).await.unwrap(), 5);
    let all = store.read_all(&t).await.unwrap();
    assert_dense(&all, 1);
    assert_eq!(texts(&all), ["m1", "m2", "m3", "m4", "m5"]);
}

pub(crate) async fn a_batch_is_appended_whole_and_in_order(store: Arc<dyn ThreadStore>) {
    let t = tid("batch");
    store
        .append(&t, Expect::Any, vec![chat("a", "first")])
        .await
        .unwrap();
    let batch: Vec<NewEntry> = (0..10).map(|i| chat("bot", &format!("b{i}"))).collect();
    let written = store.append(&t, Expect::LastSeq(1), batch).await.unwrap();
    assert_eq!(
        written.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (2..=11).collect::<Vec<_>>()
    );
    let all = store.read_all(&t).await.unwrap();
    assert_eq!(all.len(), 11);
    assert_eq!(&all[1..], &written[..]);
    // An empty batch writes nothing but still checks the expectation.
    assert!(
        store
            .append(&t, Expect::LastSeq(11), vec![])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store.append(&t, Expect::LastSeq(3), vec![]).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.last_seq(&t).await.unwrap(), 11);
}

pub(crate) async fn expect_last_seq_guards_appends(store: Arc<dyn ThreadStore>) {
    let t = tid("occ");
    store
        .append(&t, Expect::LastSeq(0), vec![chat("a", "one")])
        .await
        .unwrap();
    let err = store
        .append(&t, Expect::LastSeq(0), vec![chat("b", "also one")])
        .await
        .unwrap_err();
    match err {
        StoreError::Conflict {
            thread,
            expected,
            actual,
        } => {
            assert_eq!(thread, t);
            assert_eq!((expected, actual), (0, 1));
        }
        other => panic!("expected a conflict, got {other}"),
    }
    store
        .append(&t, Expect::LastSeq(1), vec![chat("b", "two")])
        .await
        .unwrap();
    assert!(
        store
            .append(&t, Expect::LastSeq(5), vec![chat("c", "ahead")])
            .await
            .is_err()
    );
    assert_eq!(texts(&store.read_all(&t).await.unwrap()), ["one", "two"]);
}

pub(crate) async fn a_lost_race_writes_nothing(store: Arc<dyn ThreadStore>) {
    let t = tid("race");
    store
        .append(&t, Expect::Any, vec![chat("a", "base")])
        .await
        .unwrap();
    // Both writers read last seq 1; only one may win, the loser writes nothing.
    let s1 = store.clone();
    let s2 = store.clone();
    let (t1, t2) = (t.clone(), t.clone());
    let (r1, r2) = tokio::join!(
        async move {
            s1.append(
                &t1,
                Expect::LastSeq(1),
                vec![chat("x", "x1"), chat("x", "x2")],
            )
            .await
        },
        async move {
            s2.append(
                &t2,
                Expect::LastSeq(1),
                vec![chat("y", "y1"), chat("y", "y2")],
            )
            .await
        },
    );
    assert!(r1.is_ok() != r2.is_ok(), "exactly one writer wins");
    let loser = if r1.is_ok() { r2 } else { r1 };
    assert!(matches!(loser, Err(StoreError::Conflict { actual: 3, .. })));
    let all = store.read_all(&t).await.unwrap();
    assert_eq!(all.len(), 3);
    let winner = &all[1].author;
    assert!(
        all[1..].iter().all(|e| &e.author == winner),
        "batches never interleave"
    );
}

pub(crate) async fn reads_clamp_to_what_exists(store: Arc<dyn ThreadStore>) {
    let t = tid("ranges");
    let batch: Vec<NewEntry> = (1..=6).map(|i| chat("a", &format!("m{i}"))).collect();
    store.append(&t, Expect::Any, batch).await.unwrap();
    assert_eq!(
        texts(&store.read(&t, 2..=4).await.unwrap()),
        ["m2", "m3", "m4"]
    );
    assert_eq!(texts(&store.read(&t, 5..=100).await.unwrap()), ["m5", "m6"]);
    assert_eq!(texts(&store.read(&t, 0..=1).await.unwrap()), ["m1"]);
    assert!(store.read(&t, 7..=9).await.unwrap().is_empty());
    assert!(
        store
            .read(&tid("never-written"), 1..=10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub(crate) async fn threads_are_independent(store: Arc<dyn ThreadStore>) {
    let (a, b) = (tid("ind-a"), tid("ind-b"));
    store
        .append(&a, Expect::Any, vec![chat("x", "a1"), chat("x", "a2")])
        .await
        .unwrap();
    let w = store
        .append(&b, Expect::LastSeq(0), vec![chat("y", "b1")])
        .await
        .unwrap();
    assert_eq!(w[0].seq, 1);
    assert_eq!(texts(&store.read_all(&a).await.unwrap()), ["a1", "a2"]);
    assert_eq!(texts(&store.read_all(&b).await.unwrap()), ["b1"]);
}

pub(crate) async fn concurrent_appends_lose_nothing(store: Arc<dyn ThreadStore>) {
    let t = tid("concurrent");
    let writers = 16;
    let per_writer = 25;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                let entries = if i % 5 == 0 {
                    vec![
                        chat(&format!("w{w}"), &format!("w{w}-{i}a")),
                        chat(&format!("w{w}"), &format!("w{w}-{i}b")),
                    ]
                } else {
                    vec![chat(&format!("w{w}"), &format!("w{w}-{i}"))]
                };
                store.append(&t, Expect::Any, entries).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let all = store.read_all(&t).await.unwrap();
    let expected = writers * (per_writer + per_writer / 5);
    assert_eq!(all.len(), expected);
    assert_dense(&all, 1);
    let unique: HashSet<String> = texts(&all).into_iter().collect();
    assert_eq!(unique.len(), expected, "an entry was duplicated");
    // Each writer's entries appear in the order it wrote them.
    for w in 0..writers {
        let mine: Vec<String> = texts(&all)
            .into_iter()
            .filter(|s| s.starts_with(&format!("w{w}-")))
            .collect();
        let mut sorted = mine.clone();
        sorted.sort_by_key(|s| {
            let rest = &s[format!("w{w}-").len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            (digits.parse::<u32>().unwrap(), rest.ends_with('b'))
        });
        assert_eq!(mine, sorted, "writer {w}'s entries out of order");
    }
}

pub(crate) async fn occ_writers_racing_in_a_retry_loop_never_duplicate(
    store: Arc<dyn ThreadStore>,
) {
    let t = tid("occ-loop");
    let writers = 8;
    let per_writer = 10;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0u32;
            for i in 0..per_writer {
                loop {
                    let last = store.last_seq(&t).await.unwrap();
                    match store
                        .append(
                            &t,
                            Expect::LastSeq(last),
                            vec![chat("w", &format!("{w}-{i}"))],
                        )
                        .await
                    {
                        Ok(_) => break,
                        Err(StoreError::Conflict { .. }) => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            conflicts
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let all = store.read_all(&t).await.unwrap();
    assert_eq!(all.len(), writers * per_writer);
    assert_dense(&all, 1);
    let unique: HashSet<String> = texts(&all).into_iter().collect();
    assert_eq!(unique.len(), writers * per_writer);
}

pub(crate) async fn subscribe_gives_history_then_live(store: Arc<dyn ThreadStore>) {
    let t = tid("sub");
    store
        .append(
            &t,
            Expect::Any,
            vec![chat("a", "h1"), chat("a", "h2"), chat("a", "h3")],
        )
        .await
        .unwrap();
    let mut sub = store.subscribe(&t, 1).await.unwrap();
    let history = take(&mut sub, 3).await;
    assert_eq!(texts(&history), ["h1", "h2", "h3"]);
    store
        .append(&t, Expect::Any, vec![chat("b", "l1")])
        .await
        .unwrap();
    store
        .append(&t, Expect::Any, vec![chat("b", "l2"), chat("b", "l3")])
        .await
        .unwrap();
    let live = take(&mut sub, 3).await;
    assert_eq!(texts(&live), ["l1", "l2", "l3"]);
    assert_dense(&[history, live].concat(), 1);
    // A subscription to a thread nobody wrote yet waits for its first entry.
    let fresh = tid("sub-fresh");
    let mut sub = store.subscribe(&fresh, 1).await.unwrap();
    store
        .append(&fresh, Expect::Any, vec![chat("c", "first")])
        .await
        .unwrap();
    assert_eq!(texts(&take(&mut sub, 1).await), ["first"]);
}

pub(crate) async fn subscribe_from_the_middle(store: Arc<dyn ThreadStore>) {
    let t = tid("sub-mid");
    let batch: Vec<NewEntry> = (1..=5).map(|i| chat("a", &format!("m{i}"))).collect();
    store.append(&t, Expect::Any, batch).await.unwrap();
    let mut sub = store.subscribe(&t, 4).await.unwrap();
    let got = take(&mut sub, 2).await;
    assert_eq!(texts(&got), ["m4", "m5"]);
    // From beyond the end: only what comes later.
    let mut later = store.subscribe(&t, 7).await.unwrap();
    store
        .append(&t, Expect::Any, vec![chat("a", "m6"), chat("a", "m7")])
        .await
        .unwrap();
    assert_eq!(texts(&take(&mut later, 1).await), ["m7"]);
}

pub(crate) async fn subscribe_started_mid_append_has_no_gap_or_duplicate(
    store: Arc<dyn ThreadStore>,
) {
    let t = tid("sub-race");
    let total = 300usize;
    let writer = {
        let store = store.clone();
        let t = t.clone();
        tokio::spawn(async move {
            for i in 0..total {
                store
                    .append(&t, Expect::Any, vec![chat("w", &format!("{i}"))])
                    .await
                    .unwrap();
                if i % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    // Subscribers start at different moments while the writer runs.
    let mut readers = Vec::new();
    for k in 0..4u64 {
        let store = store.clone();
        let t = t.clone();
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(k * 3)).await;
            let mut sub = store.subscribe(&t, 1).await.unwrap();
            take(&mut sub, total).await
        }));
    }
    writer.await.unwrap();
    for r in readers {
        let got = r.await.unwrap();
        assert_dense(&got, 1);
        assert_eq!(
            texts(&got),
            (0..total).map(|i| i.to_string()).collect::<Vec<_>>()
        );
    }
}

pub(crate) async fn every_subscriber_sees_the_same_order(store: Arc<dyn ThreadStore>) {
    let t = tid("sub-order");
    let mut subs = Vec::new();
    for _ in 0..3 {
        subs.push(store.subscribe(&t, 1).await.unwrap());
    }
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                store
                    .append(&t, Expect::Any, vec![chat("w", &format!("{w}-{i}"))])
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stored = texts(&store.read_all(&t).await.unwrap());
    for mut sub in subs {
        assert_eq!(texts(&take(&mut sub, 80).await), stored);
    }
}

pub(crate) async fn subscribe_ends_when_the_store_closes(store: Arc<dyn ThreadStore>) {
    let t = tid("sub-close");
    store
        .append(&t, Expect::Any, vec![chat("a", "one"), chat("a", "two")])
        .await
        .unwrap();
    let mut sub = store.subscribe(&t, 1).await.unwrap();
    assert_eq!(texts(&take(&mut sub, 1).await), ["one"]);
    store.close().await.unwrap();
    // What was already stored is still delivered, then the stream ends.
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(20), sub.collect::<Vec<_>>())
        .await
        .expect("subscription did not end after close");
    let rest: Vec<Entry> = rest.into_iter().map(Result::unwrap).collect();
    assert_eq!(texts(&rest), ["two"]);
    assert!(matches!(
        store.append(&t, Expect::Any, vec![chat("a", "late")]).await,
        Err(StoreError::Closed)
    ));
}

/// For the stores that delete threads (`conformance_suite!(@deletion ...)`).
#[allow(dead_code)]
pub(crate) async fn a_deleted_thread_is_gone(store: Arc<dyn ThreadStore>) {
    let (gone, kept) = (tid("del-gone"), tid("del-kept"));
    for t in [&gone, &kept] {
        store
            .append(t, Expect::Any, vec![chat("a", "one"), chat("a", "two")])
            .await
            .unwrap();
    }
    let mut sub = store.subscribe(&gone, 1).await.unwrap();
    assert_eq!(texts(&take(&mut sub, 2).await), ["one", "two"]);
    store.delete_thread(&gone).await.unwrap();
    assert_eq!(store.last_seq(&gone).await.unwrap(), 0);
    assert!(store.read_all(&gone).await.unwrap().is_empty());
    let listed = store.list_threads().await.unwrap();
    assert!(
        !listed.contains(&gone) && listed.contains(&kept),
        "{listed:?}"
    );
    assert_eq!(texts(&store.read_all(&kept).await.unwrap()), ["one", "two"]);
    // Deleting it again, or a thread never written, is no error.
    store.delete_thread(&gone).await.unwrap();
    store.delete_thread(&tid("del-never")).await.unwrap();
    // The id starts over as a new thread.
    let again = store
        .append(&gone, Expect::LastSeq(0), vec![chat("a", "new")])
        .await
        .unwrap();
    assert_eq!(again[0].seq, 1);
    assert_eq!(texts(&store.read_all(&gone).await.unwrap()), ["new"]);
    drop(sub);
}

pub(crate) async fn list_threads_is_sorted_and_skips_empty(store: Arc<dyn ThreadStore>) {
    for name in ["list-c", "list-a", "list-b"] {
        store
            .append(&tid(name), Expect::Any, vec![chat("a", name)])
            .await
            .unwrap();
    }
    // Touched but never written: not listed.
    let _ = store.read_all(&tid("list-empty")).await.unwrap();
    let listed = store.list_threads().await.unwrap();
    let names: Vec<&str> = listed
        .iter()
        .map(ThreadId::as_str)
        .filter(|n| n.starts_with("list-"))
        .collect();
    assert_eq!(names, ["list-a", "list-b", "list-c"]);
}

pub(crate) async fn entries_round_trip_unchanged(store: Arc<dyn ThreadStore>) {
    use roundtable_providers::{AssistantBlock, AssistantMessage, ToolCall, ToolResultMessage};
    use roundtable_thread_stream::{AssistantEntry, Chunk, Signal, ToolResultEntry, TurnStarted};
    let t = tid("round-trip");
    let mut message = AssistantMessage::empty("anthropic-messages", "anthropic", "claude", 1);
    let mut args = serde_json::Map::new();
    args.insert("path".into(), "src/lib.rs".into());
    let call = ToolCall::new("call-1", "read_file", args);
    message
        .content
        .push(AssistantBlock::text("ünïcödé ✓ \"quoted\"\nnew line"));
    message.content.push(AssistantBlock::ToolCall(call.clone()));
    message.usage.cost.total = 0.00042;
    let bodies = vec![
        EntryBody::TurnStarted(TurnStarted {
            turn: "t1".into(),
            trigger: Some(1),
            depth: 1,
            reason: None,
        }),
        EntryBody::Assistant(AssistantEntry::new(Some("t1".into()), message)),
        EntryBody::ToolResult(ToolResultEntry {
            turn: Some("t1".into()),
            message: ToolResultMessage::text(&call, "fn main() {}", false, 2).into(),
        }),
        EntryBody::Chunk(Chunk::text("t1", "🎉")),
        EntryBody::Signal(Signal {
            name: "typing".into(),
            data: serde_json::json!({"who": "bot"}).into(),
        }),
    ];
    let news: Vec<NewEntry> = bodies
        .into_iter()
        .map(|b| NewEntry::new("bot", b))
        .collect();
    let written = store.append(&t, Expect::Any, news).await.unwrap();
    assert_eq!(store.read_all(&t).await.unwrap(), written);
}

/// An unknown body (`EntryBody::Other`) of type `kind` with `fields`.
pub(crate) fn other(kind: &str, fields: serde_json::Value) -> EntryBody {
    EntryBody::Other {
        kind: kind.into(),
        fields: Box::new(fields.as_object().cloned().unwrap_or_default()),
    }
}

/// Appends `entries` to `t`, which must refuse them whole with
/// `StoreError::InvalidEntry` for the entry at `index`, and returns why. The
/// thread must hold exactly what it held before, and take appends again.
pub(crate) async fn assert_refused(
    store: &dyn ThreadStore,
    t: &ThreadId,
    entries: Vec<NewEntry>,
    index: usize,
) -> InvalidEntry {
    let before = store.read_all(t).await.unwrap();
    let last = before.len() as u64;
    let err = store
        .append(t, Expect::LastSeq(last), entries)
        .await
        .expect_err("an entry that cannot read back was acknowledged");
    let reason = match err {
        StoreError::InvalidEntry {
            thread,
            index: at,
            source,
        } => {
            assert_eq!((&thread, at), (t, index), "{source}");
            source
        }
        other => panic!("expected an invalid entry, got {other}"),
    };
    assert_eq!(store.last_seq(t).await.unwrap(), last);
    assert_eq!(store.read_all(t).await.unwrap(), before);
    let next = store
        .append(t, Expect::LastSeq(last), vec![chat("a", "after")])
        .await
        .unwrap();
    assert_eq!(next[0].seq, last + 1);
    assert_eq!(store.read_all(t).await.unwrap(), [before, next].concat());
    reason
}

pub(crate) async fn an_unknown_body_with_a_field_named_id_is_refused(store: Arc<dyn ThreadStore>) {
    let t = tid("poll-id");
    store
        .append(&t, Expect::Any, vec![chat("a", "vote please")])
        .await
        .unwrap();
    let vote = NewEntry::new("bob", other("poll.vote", json!({"id": "v-1", "choice": 2})));
    let reason = assert_refused(&*store, &t, vec![vote], 0).await;
    assert_eq!(
        reason,
        InvalidEntry::HeaderField {
            kind: "poll.vote".into(),
            field: "id".into()
        }
    );
}

pub(crate) async fn an_unknown_body_with_a_field_named_more_is_refused(
    store: Arc<dyn ThreadStore>,
) {
    let t = tid("poll-more");
    // Alone (where the batch marker is absent) and inside a batch.
    let alone = NewEntry::new("bob", other("poll.vote", json!({"more": 3})));
    let reason = assert_refused(&*store, &t, vec![alone], 0).await;
    assert!(
        matches!(&reason, InvalidEntry::HeaderField { field, .. } if field == "more"),
        "{reason}"
    );
    let batch = vec![
        chat("bob", "first"),
        NewEntry::new("bob", other("poll.vote", json!({"more": 0}))),
        chat("bob", "third"),
    ];
    assert_refused(&*store, &t, batch, 1).await;
}

pub(crate) async fn no_body_field_may_take_a_header_name(store: Arc<dyn ThreadStore>) {
    let t = tid("poll-headers");
    for field in ["seq", "id", "thread", "author", "at", "more", "type"] {
        let entry = NewEntry::new("bob", other("poll.vote", json!({ field: "x" })));
        let reason = assert_refused(&*store, &t, vec![entry], 0).await;
        assert_eq!(
            reason,
            InvalidEntry::HeaderField {
                kind: "poll.vote".into(),
                field: field.into()
            }
        );
    }
}

pub(crate) async fn an_unknown_body_may_not_take_a_known_type(store: Arc<dyn ThreadStore>) {
    let t = tid("known-types");
    for kind in [
        "chat",
        "pi.assistant",
        "pi.tool_result",
        "chat.chunk",
        "signal.typing",
        "compaction",
        "turn.started",
        "turn.ended",
        "turn.failed",
    ] {
        // Fields the known body would read, or none at all.
        for fields in [json!({}), json!({"text": "hi", "turn": "t", "data": 1})] {
            let entry = NewEntry::new("bob", other(kind, fields));
            let reason = assert_refused(&*store, &t, vec![entry], 0).await;
            assert_eq!(reason, InvalidEntry::KnownKind { kind: kind.into() });
        }
    }
}

pub(crate) async fn a_signal_needs_a_name(store: Arc<dyn ThreadStore>) {
    use roundtable_thread_stream::Signal;
    let t = tid("unnamed-signal");
    let unnamed = NewEntry::new(
        "host",
        EntryBody::Signal(Signal {
            name: String::new(),
            data: json!({"on": true}).into(),
        }),
    );
    let reason = assert_refused(&*store, &t, vec![unnamed], 0).await;
    assert_eq!(reason, InvalidEntry::UnnamedSignal);
}

pub(crate) async fn a_cost_that_is_not_a_number_is_refused(store: Arc<dyn ThreadStore>) {
    use roundtable_providers::AssistantMessage;
    use roundtable_thread_stream::AssistantEntry;
    let t = tid("nan-cost");
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut message = AssistantMessage::empty("api", "provider", "model", 1);
        message.usage.cost.total = bad;
        let entry = NewEntry::new(
            "bot",
            EntryBody::Assistant(AssistantEntry::new(None, message)),
        );
        let reason = assert_refused(&*store, &t, vec![chat("bot", "ok"), entry], 1).await;
        assert_eq!(
            reason,
            InvalidEntry::NotFinite {
                field: "message.usage.cost.total"
            }
        );
    }
}

/// Entries at the edges of what is valid: types and fields next to the
/// reserved ones, numbers at their limits, floats that need every digit,
/// control characters in every string.
pub(crate) fn unusual_entries() -> Vec<NewEntry> {
    use roundtable_providers::AssistantMessage;
    use roundtable_thread_stream::{AssistantEntry, Compaction, Signal, TurnStarted};
    let odd = "nul \0, line\nbreak, \u{2028}, \"quote\" \\ 🎉";
    let mut message = AssistantMessage::empty("api", "provider", "model", i64::MIN);
    message.usage.input = u64::MAX;
    message.usage.cost.input = 1.0715660391465826e-75;
    message.usage.cost.output = 5e-324;
    message.usage.cost.cache_read = -0.0;
    message.usage.cost.cache_write = 1.7976931348623157e308;
    message.usage.cost.total = 0.1 + 0.2;
    let bodies = vec![
        other("", json!({})),
        other("signal.", json!({"data": 1})),
        other("signal", json!({"name": "x"})),
        other("Chat", json!({"text": "not a chat"})),
        other(
            "poll.vote",
            json!({
                "Seq": 1, "ids": 2, "at ": 3, "text": odd, "data": null, "kind": "k",
                "big": u64::MAX, "small": i64::MIN, "float": -1.81996730402717e-179,
                "nested": {"id": 1, "seq": 2, "type": "chat", "more": [1, 2.5]},
            }),
        ),
        EntryBody::Signal(Signal {
            name: odd.into(),
            data: serde_json::Value::Null.into(),
        }),
        EntryBody::Signal(Signal {
            name: "x".into(),
            data: json!([9.643915712060552e-234, "s", {"id": 1}]).into(),
        }),
        EntryBody::Assistant(AssistantEntry::new(Some(odd.into()), message)),
        EntryBody::Compaction(Compaction {
            summary: odd.into(),
            upto: u64::MAX,
        }),
        EntryBody::TurnStarted(TurnStarted {
            turn: "t".into(),
            trigger: Some(u64::MAX),
            depth: u32::MAX,
            reason: Some("".into()),
        }),
        EntryBody::chat(odd),
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| NewEntry {
            id: format!("{i} {odd}").into(),
            author: odd.into(),
            at: if i % 2 == 0 { i64::MAX } else { i64::MIN },
            body,
        })
        .collect()
}

pub(crate) async fn unusual_but_valid_entries_read_back_equal(store: Arc<dyn ThreadStore>) {
    let t = tid("unusual");
    let entries = unusual_entries();
    let mut written = store
        .append(&t, Expect::LastSeq(0), entries[..3].to_vec())
        .await
        .unwrap();
    for entry in &entries[3..] {
        written.extend(
            store
                .append(&t, Expect::Any, vec![entry.clone()])
                .await
                .unwrap(),
        );
    }
    assert_eq!(written.len(), entries.len());
    assert_eq!(store.read_all(&t).await.unwrap(), written);
    let mut sub = store.subscribe(&t, 1).await.unwrap();
    assert_eq!(take(&mut sub, written.len()).await, written);
}

/// Appends each batch to `t` in turn and returns what was acknowledged, and
/// which batches were. A refused batch must be refused as an invalid entry
/// (and, as [`assert_refused`] checks elsewhere, write nothing).
pub(crate) async fn append_each(
    store: &dyn ThreadStore,
    t: &ThreadId,
    batches: Vec<Vec<NewEntry>>,
) -> (Vec<Entry>, Vec<bool>) {
    let mut acknowledged = Vec::new();
    let mut accepted = Vec::new();
    for batch in batches {
        let valid = batch.iter().all(|e| e.body.check().is_ok());
        match store.append(t, Expect::Any, batch).await {
            Ok(written) => {
                assert!(valid, "a batch with an invalid entry was acknowledged");
                acknowledged.extend(written);
                accepted.push(true);
            }
            Err(StoreError::InvalidEntry { .. }) if !valid => accepted.push(false),
            Err(e) => panic!("append failed: {e}"),
        }
    }
    (acknowledged, accepted)
}

/// Runs a property over random batches with the runtime blocked in place:
/// proptest drives the cases (and shrinks a failure) synchronously.
/// `PROPTEST_CASES` overrides the number of cases.
pub(crate) fn check_batches<F, Fut>(cases: u32, property: F)
where
    F: Fn(Vec<Vec<NewEntry>>) -> Fut,
    Fut: std::future::Future<Output = Result<(), TestCaseError>>,
{
    let runtime = tokio::runtime::Handle::current();
    let config = ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let result = TestRunner::new(config).run(&arbitrary::batches(), |batches| {
        tokio::task::block_in_place(|| runtime.block_on(property(batches)))
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

pub(crate) async fn acknowledged_entries_read_back_equal(store: Arc<dyn ThreadStore>) {
    let case = std::sync::atomic::AtomicU64::new(0);
    check_batches(64, |batches| {
        let store = store.clone();
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async move {
            let t = tid(&format!("prop-{n}"));
            let (written, _) = append_each(&*store, &t, batches).await;
            proptest::prop_assert_eq!(&store.read_all(&t).await.unwrap(), &written);
            let mut sub = store.subscribe(&t, 1).await.unwrap();
            proptest::prop_assert_eq!(&take(&mut sub, written.len()).await, &written);
            Ok(())
        }
    });
}
