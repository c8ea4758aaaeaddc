//! `NatsStore` against a real `nats-server -js`: the store conformance suite
//! (each test on its own server), then what only a networked store must do:
//! survive a server restart under a subscription, fail clearly when nothing
//! listens, keep batches whole on the wire, and read back from another
//! connection and after a restart everything it acknowledged.

#![cfg(feature = "nats")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod nats_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use conformance::{append_each, chat, check_batches, tid};
use futures::StreamExt;
use nats_support::{connect, test_options};
use roundtable_test_support::nats::NatsServer;
use roundtable_test_support::ports::free_port;
use roundtable_thread_stream::{Entry, Expect, NatsStore, NewEntry, StoreError, ThreadStore};

conformance_suite!(async {
    let server = NatsServer::start();
    let store = connect(&server.url(), test_options()).await;
    (Arc::new(store) as Arc<dyn ThreadStore>, server)
});

mod deletion {
    use super::*;

    conformance_suite!(@deletion async {
        let server = NatsServer::start();
        let store = connect(&server.url(), test_options()).await;
        (Arc::new(store) as Arc<dyn ThreadStore>, server)
    });
}

async fn next(sub: &mut roundtable_thread_stream::EntryStream) -> Entry {
    tokio::time::timeout(Duration::from_secs(30), sub.next())
        .await
        .expect("subscription stalled")
        .expect("subscription ended")
        .expect("subscription failed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_survives_a_server_restart() {
    let mut server = NatsServer::start();
    let store = connect(&server.url(), test_options()).await;
    let t = tid("restart");
    for i in 1..=5 {
        store
            .append(&t, Expect::Any, vec![chat("a", &format!("before {i}"))])
            .await
            .unwrap();
    }
    let mut sub = store.subscribe(&t, 1).await.unwrap();
    for seq in 1..=5 {
        assert_eq!(next(&mut sub).await.seq, seq);
    }
    server.restart();
    // Appends retry through the reconnect; the batch lands once.
    store
        .append(
            &t,
            Expect::LastSeq(5),
            vec![chat("a", "after 6"), chat("a", "after 7")],
        )
        .await
        .unwrap();
    for i in 8..=10 {
        store
            .append(&t, Expect::Any, vec![chat("a", &format!("after {i}"))])
            .await
            .unwrap();
    }
    // The subscription resumes after seq 5: no gap, no repeat.
    for seq in 6..=10 {
        assert_eq!(next(&mut sub).await.seq, seq);
    }
    // What was stored before the restart is still there.
    let all = store.read_all(&t).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    // A second store (another host) sees the same thread.
    let other = connect(&server.url(), test_options()).await;
    assert_eq!(other.read_all(&t).await.unwrap(), all);
    assert_eq!(other.list_threads().await.unwrap(), vec![t.clone()]);
}

#[tokio::test]
async fn a_refused_connection_is_a_clear_error() {
    // Make sure the binary exists, so this test fails like the others without it.
    roundtable_test_support::nats::nats_server_binary();
    let url = format!("nats://127.0.0.1:{}", free_port());
    let started = Instant::now();
    let err = NatsStore::connect(&url, test_options())
        .await
        .err()
        .expect("connected to a port nobody listens on");
    assert!(started.elapsed() < Duration::from_secs(10));
    match err {
        StoreError::Backend(message) => {
            assert!(message.contains("cannot connect to NATS"), "{message}");
            assert!(message.contains(&url), "{message}");
        }
        other => panic!("expected a backend error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_are_found_from_a_cold_cache() {
    // A store that did not write the thread has no cached positions: reads
    // from the middle must still find the right batch.
    let server = NatsServer::start();
    let writer = connect(&server.url(), test_options()).await;
    let t = tid("cold");
    let mut n = 0;
    for size in [1usize, 3, 2, 5, 1, 1, 4, 2, 7, 1] {
        let batch = (0..size)
            .map(|_| {
                n += 1;
                chat("w", &format!("m{n}"))
            })
            .collect();
        writer.append(&t, Expect::Any, batch).await.unwrap();
        // Another thread in between, so stream and thread seqs differ.
        writer
            .append(&tid("noise"), Expect::Any, vec![chat("x", "noise")])
            .await
            .unwrap();
    }
    let all = writer.read_all(&t).await.unwrap();
    assert_eq!(all.len(), n);
    for from in 1..=n as u64 {
        let reader = connect(&server.url(), test_options()).await;
        let got = reader.read(&t, from..=from + 2).await.unwrap();
        let want: Vec<Entry> = all
            .iter()
            .filter(|e| e.seq >= from && e.seq <= from + 2)
            .cloned()
            .collect();
        assert_eq!(got, want, "from {from}");
        let mut sub = reader.subscribe(&t, from).await.unwrap();
        assert_eq!(next(&mut sub).await, all[from as usize - 1]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_reads_stream_through_a_consumer_and_match_short_ones() {
    let server = NatsServer::start();
    let writer = connect(&server.url(), test_options()).await;
    let t = tid("long");
    let mut written = Vec::new();
    for i in 0..120 {
        let batch = if i % 7 == 0 {
            vec![chat("w", "x"), chat("w", "y"), chat("w", "z")]
        } else {
            vec![chat("w", &format!("m{i}"))]
        };
        written.extend(writer.append(&t, Expect::Any, batch).await.unwrap());
        if i % 3 == 0 {
            writer
                .append(&tid("noise"), Expect::Any, vec![chat("x", "noise")])
                .await
                .unwrap();
        }
    }
    let reader = connect(&server.url(), test_options()).await;
    assert_eq!(reader.read_all(&t).await.unwrap(), written);
    for (from, to) in [(37u64, 80u64), (2, 2), (100, 1000), (1, 40)] {
        let want: Vec<Entry> = written
            .iter()
            .filter(|e| e.seq >= from && e.seq <= to)
            .cloned()
            .collect();
        assert_eq!(reader.read(&t, from..=to).await.unwrap(), want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_view_of_another_host_still_conflicts_at_the_server() {
    let server = NatsServer::start();
    let a = connect(&server.url(), test_options()).await;
    let b = connect(&server.url(), test_options()).await;
    let t = tid("stale");
    // B sees the thread empty, then A writes: B's next append must lose.
    assert!(
        b.append(&t, Expect::LastSeq(0), vec![])
            .await
            .unwrap()
            .is_empty()
    );
    a.append(&t, Expect::LastSeq(0), vec![chat("a", "a1")])
        .await
        .unwrap();
    let lost = b
        .append(&t, Expect::LastSeq(0), vec![chat("b", "b1")])
        .await;
    assert!(
        matches!(
            lost,
            Err(StoreError::Conflict {
                expected: 0,
                actual: 1,
                ..
            })
        ),
        "{lost:?}"
    );
    // The same once the thread is not empty: B wrote seq 2 and remembers it,
    // A appends seq 3, B's append expecting 2 must lose.
    b.append(&t, Expect::LastSeq(1), vec![chat("b", "b2")])
        .await
        .unwrap();
    a.append(&t, Expect::LastSeq(2), vec![chat("a", "a3")])
        .await
        .unwrap();
    let lost = b
        .append(&t, Expect::LastSeq(2), vec![chat("b", "b3")])
        .await;
    assert!(
        matches!(
            lost,
            Err(StoreError::Conflict {
                expected: 2,
                actual: 3,
                ..
            })
        ),
        "{lost:?}"
    );
    // Expect::Any from the stale view retries and lands after A's entry.
    let w = b
        .append(&t, Expect::Any, vec![chat("b", "b4")])
        .await
        .unwrap();
    assert_eq!(w[0].seq, 4);
    let all = a.read_all(&t).await.unwrap();
    let authors: Vec<&str> = all.iter().map(|e| &*e.author).collect();
    assert_eq!(authors, ["a", "b", "a", "b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_append_is_stored_once() {
    // A host that re-sends an append it is unsure about (same entries, same
    // ids) gets the batch as first stored, not a second copy.
    let server = NatsServer::start();
    let a = connect(&server.url(), test_options()).await;
    let b = connect(&server.url(), test_options()).await;
    let t = tid("retry");
    let batch = vec![chat("a", "one"), chat("a", "two")];
    let first = a.append(&t, Expect::Any, batch.clone()).await.unwrap();
    a.append(&t, Expect::Any, vec![chat("c", "later")])
        .await
        .unwrap();
    for store in [&a, &b] {
        let again = store.append(&t, Expect::Any, batch.clone()).await.unwrap();
        assert_eq!(again, first);
    }
    assert_eq!(a.last_seq(&t).await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_the_servers_max_payload_is_refused_whole() {
    let server = NatsServer::start();
    let store = connect(&server.url(), test_options()).await;
    let t = tid("huge");
    store
        .append(&t, Expect::Any, vec![chat("a", "small")])
        .await
        .unwrap();
    let big = "x".repeat(400 * 1024);
    let batch = (0..3).map(|_| chat("a", &big)).collect();
    let started = Instant::now();
    match store.append(&t, Expect::LastSeq(1), batch).await {
        Err(StoreError::Backend(message)) => assert!(message.contains("max payload"), "{message}"),
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5), "not retried");
    assert_eq!(store.last_seq(&t).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_cached_before_a_purge_are_looked_up_again() {
    // A store's cached batch positions hold until someone purges the stream
    // and the thread starts over: reads must then trust the server, not the
    // cache, and find every entry.
    let server = NatsServer::start();
    let a = connect(&server.url(), test_options()).await;
    let b = connect(&server.url(), test_options()).await;
    let t = tid("purged");
    // A knows the batches of seqs 1 and 3 (B wrote seq 2).
    a.append(&t, Expect::Any, vec![chat("a", "old 1")])
        .await
        .unwrap();
    b.append(&t, Expect::Any, vec![chat("b", "old 2")])
        .await
        .unwrap();
    a.append(&t, Expect::Any, vec![chat("a", "old 3")])
        .await
        .unwrap();
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stream = js.get_stream(test_options().stream).await.unwrap();
    stream.purge().await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 0);
    for i in 1..=5 {
        b.append(&t, Expect::Any, vec![chat("b", &format!("new {i}"))])
            .await
            .unwrap();
    }
    let texts = |entries: Vec<Entry>| -> Vec<(u64, String)> {
        entries
            .into_iter()
            .map(|e| match e.body {
                roundtable_thread_stream::EntryBody::Chat(c) => (e.seq, c.text.to_string()),
                other => panic!("unexpected body {other:?}"),
            })
            .collect()
    };
    assert_eq!(
        texts(a.read(&t, 2..=3).await.unwrap()),
        [(2, "new 2".to_string()), (3, "new 3".to_string())]
    );
    assert_eq!(texts(a.read_all(&t).await.unwrap()).len(), 5);
    let mut sub = a.subscribe(&t, 2).await.unwrap();
    assert_eq!(next(&mut sub).await.seq, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_first_entry_id_is_refused_not_swallowed() {
    // The server drops a second message with the same id as a retry; the
    // store must not report another batch under that id as stored.
    let server = NatsServer::start();
    let store = connect(&server.url(), test_options()).await;
    let t = tid("reused-id");
    let first = NewEntry {
        id: "same".into(),
        ..chat("a", "one")
    };
    let stored = store.append(&t, Expect::Any, vec![first]).await.unwrap();
    let second = NewEntry {
        id: "same".into(),
        ..chat("b", "two")
    };
    match store.append(&t, Expect::Any, vec![second]).await {
        Err(StoreError::DuplicateId { thread, id }) => {
            assert_eq!((thread, id.as_str()), (t.clone(), "same"));
        }
        other => panic!("expected a duplicate id, got {other:?}"),
    }
    assert_eq!(store.read_all(&t).await.unwrap(), stored);
    // The same append sent again is still a retry, stored once.
    let again = NewEntry {
        id: "same".into(),
        author: "a".into(),
        at: stored[0].at,
        body: stored[0].body.clone(),
    };
    assert_eq!(
        store.append(&t, Expect::Any, vec![again]).await.unwrap(),
        stored
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_entries_read_back_equal_from_another_connection_and_after_a_restart() {
    let mut server = NatsServer::start();
    let writer = connect(&server.url(), test_options()).await;
    let url = server.url();
    let case = std::sync::atomic::AtomicU64::new(0);
    let threads = std::sync::Mutex::new(Vec::new());
    check_batches(48, |batches| {
        let writer = writer.clone();
        let url = url.clone();
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let threads = &threads;
        async move {
            let t = tid(&format!("prop-{n}"));
            let (written, _) = append_each(&writer, &t, batches).await;
            proptest::prop_assert_eq!(&writer.read_all(&t).await.unwrap(), &written);
            let reader = connect(&url, test_options()).await;
            proptest::prop_assert_eq!(&reader.read_all(&t).await.unwrap(), &written);
            threads.lock().unwrap().push((t, written));
            Ok(())
        }
    });
    // The server reloads every stored batch from its disk.
    server.restart();
    let reader = connect(&server.url(), test_options()).await;
    for (t, written) in threads.into_inner().unwrap() {
        assert_eq!(reader.read_all(&t).await.unwrap(), written, "{t}");
    }
}

/// A store serving more threads than it keeps local state for: the threads
/// whose state was let go append and read on from where they were, and
/// concurrent appends to them lose nothing and repeat no seq.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_whose_local_state_was_let_go_append_and_read_on() {
    let server = NatsServer::start();
    let store = connect(&server.url(), test_options()).await;
    for i in 0..400 {
        store
            .append(&tid(&format!("t{i}")), Expect::Any, vec![chat("a", "hi")])
            .await
            .unwrap();
    }
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    store
                        .append(
                            &tid(&format!("t{i}")),
                            Expect::Any,
                            vec![chat("a", &task.to_string())],
                        )
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for i in 0..400 {
        let entries = store.read(&tid(&format!("t{i}")), 1..=100).await.unwrap();
        let expected = if i < 25 { 5 } else { 1 };
        let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=expected).collect::<Vec<u64>>(), "t{i}");
    }
}
