//! `JsonlStore`: the conformance suite, then what only a file store must do:
//! survive torn writes, refuse a second process, report corruption without
//! touching the file, read back after a reopen everything it acknowledged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;

use std::sync::Arc;
use std::time::Duration;

use conformance::{append_each, chat, check_batches, other, tid};
use roundtable_thread_stream::{
    EntryBody, Expect, FsyncPolicy, JsonlOptions, JsonlStore, MemoryStore, NewEntry, StoreError,
    ThreadStore,
};
use serde_json::json;

conformance_suite!(async {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    (Arc::new(store) as Arc<dyn ThreadStore>, dir)
});

/// Writes `n` chat entries to thread `t` in a fresh store under `dir`, closes
/// it, and returns the file's bytes.
async fn write_thread(dir: &std::path::Path, n: usize) -> Vec<u8> {
    let store = JsonlStore::open(dir).await.unwrap();
    for i in 1..=n {
        store
            .append(
                &tid("t"),
                Expect::Any,
                vec![chat("alice", &format!("message {i} ✓"))],
            )
            .await
            .unwrap();
    }
    store.close().await.unwrap();
    std::fs::read(dir.join("t.jsonl")).unwrap()
}

#[tokio::test]
async fn a_file_cut_anywhere_inside_its_last_entry_keeps_every_earlier_entry() {
    let source = tempfile::tempdir().unwrap();
    let full = write_thread(source.path(), 4).await;
    // Where the last entry's line starts.
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    for cut in last_start..full.len() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.jsonl"), &full[..cut]).unwrap();
        let store = JsonlStore::open(dir.path()).await.unwrap();
        let entries = store.read_all(&tid("t")).await.unwrap();
        // Cut right before the newline: the last entry is complete and kept.
        let kept = if cut == full.len() - 1 { 4 } else { 3 };
        assert_eq!(entries.len(), kept, "cut at byte {cut}");
        assert!(
            entries
                .iter()
                .enumerate()
                .all(|(i, e)| e.seq == i as u64 + 1)
        );
        // The store is appendable again and the file is whole.
        let next = store
            .append(
                &tid("t"),
                Expect::LastSeq(kept as u64),
                vec![chat("bob", "after")],
            )
            .await
            .unwrap();
        assert_eq!(next[0].seq, kept as u64 + 1);
        store.close().await.unwrap();
        let reopened = JsonlStore::open(dir.path()).await.unwrap();
        assert_eq!(
            reopened.read_all(&tid("t")).await.unwrap().len(),
            kept + 1,
            "cut at byte {cut}"
        );
        assert!(
            reopened.recoveries().is_empty(),
            "second open needed no recovery"
        );
        reopened.close().await.unwrap();
        // The recovery was reported when something was cut.
        if cut != last_start && cut != full.len() - 1 {
            assert_eq!(store.recoveries().len(), 1, "cut at byte {cut}");
        }
    }
}

#[tokio::test]
async fn a_batch_torn_by_a_crash_is_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    store
        .append(&tid("t"), Expect::Any, vec![chat("a", "alone")])
        .await
        .unwrap();
    let batch: Vec<NewEntry> = (0..3).map(|i| chat("bot", &format!("part {i}"))).collect();
    store.append(&tid("t"), Expect::Any, batch).await.unwrap();
    store.close().await.unwrap();
    let full = std::fs::read(dir.path().join("t.jsonl")).unwrap();
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(
            full.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    // Cut inside the batch's second and third lines, and between its lines.
    for cut in [
        line_starts[2],
        line_starts[2] + 10,
        line_starts[3],
        line_starts[3] + 5,
    ] {
        std::fs::write(dir.path().join("t.jsonl"), &full[..cut]).unwrap();
        let store = JsonlStore::open(dir.path()).await.unwrap();
        let entries = store.read_all(&tid("t")).await.unwrap();
        assert_eq!(
            entries.len(),
            1,
            "cut at {cut}: a partial batch must not survive"
        );
        assert_eq!(store.recoveries()[0].kept_len, line_starts[1] as u64);
        store.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_corrupt_line_in_the_middle_is_an_error_and_the_file_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let full = write_thread(dir.path(), 3).await;
    let first_end = full.iter().position(|b| *b == b'\n').unwrap() + 1;
    let mut damaged = full[..first_end].to_vec();
    damaged.extend_from_slice(b"{\"seq\":2,\"garbage\n");
    damaged.extend_from_slice(&full[first_end..]);
    std::fs::write(dir.path().join("t.jsonl"), &damaged).unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    let err = store.read_all(&tid("t")).await.unwrap_err();
    match &err {
        StoreError::Corrupt { location, .. } => {
            assert!(location.ends_with("t.jsonl:2"), "{location}")
        }
        other => panic!("expected corruption, got {other}"),
    }
    assert!(
        store
            .append(&tid("t"), Expect::Any, vec![chat("a", "x")])
            .await
            .is_err()
    );
    assert_eq!(
        std::fs::read(dir.path().join("t.jsonl")).unwrap(),
        damaged,
        "nothing stored was lost"
    );
    // Other threads of the folder still work.
    store
        .append(&tid("other"), Expect::Any, vec![chat("a", "fine")])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_second_store_on_the_folder_is_refused_with_the_holder_named() {
    let dir = tempfile::tempdir().unwrap();
    let first = JsonlStore::open(dir.path()).await.unwrap();
    match JsonlStore::open(dir.path()).await {
        Err(StoreError::Locked { holder, .. }) => {
            assert!(
                holder.contains(&format!("pid {}", std::process::id())),
                "{holder}"
            );
        }
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a second store opened a locked folder"),
    }
    first.close().await.unwrap();
    // Closing releases the folder.
    let second = JsonlStore::open(dir.path()).await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test]
async fn entries_survive_reopening_under_every_fsync_policy() {
    for fsync in [
        FsyncPolicy::Always,
        FsyncPolicy::Batched(Duration::from_millis(5)),
        FsyncPolicy::Never,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open_with(dir.path(), JsonlOptions { fsync })
            .await
            .unwrap();
        for i in 0..10 {
            store
                .append(&tid("t"), Expect::Any, vec![chat("a", &i.to_string())])
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        store.sync().await.unwrap();
        store.close().await.unwrap();
        let again = JsonlStore::open(dir.path()).await.unwrap();
        assert_eq!(
            again.read_all(&tid("t")).await.unwrap().len(),
            10,
            "{fsync:?}"
        );
        assert_eq!(again.list_threads().await.unwrap(), vec![tid("t")]);
    }
}

#[tokio::test]
async fn thread_files_stay_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = JsonlStore::open(&root).await.unwrap();
    for name in ["a", "team.general", "x-1_y"] {
        store
            .append(&tid(name), Expect::Any, vec![chat("a", "x")])
            .await
            .unwrap();
        assert!(root.join(format!("{name}.jsonl")).is_file());
    }
    // Ids that could name a path elsewhere never become ThreadIds at all.
    for bad in ["../escape", "/etc/passwd", "a/b", ".lock", "..", "a\0b"] {
        assert!(
            roundtable_thread_stream::ThreadId::new(bad).is_err(),
            "{bad}"
        );
    }
    let outside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, vec![std::ffi::OsString::from("store")]);
    // Files that are not threads are not listed.
    std::fs::write(root.join("notes.txt"), "x").unwrap();
    std::fs::write(root.join("bad name.jsonl"), "x").unwrap();
    assert_eq!(store.list_threads().await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_last_entry_without_its_newline_is_kept_and_completed() {
    let dir = tempfile::tempdir().unwrap();
    let full = write_thread(dir.path(), 2).await;
    std::fs::write(dir.path().join("t.jsonl"), &full[..full.len() - 1]).unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    assert_eq!(store.read_all(&tid("t")).await.unwrap().len(), 2);
    store
        .append(
            &tid("t"),
            Expect::LastSeq(2),
            vec![NewEntry::new("b", EntryBody::chat("three"))],
        )
        .await
        .unwrap();
    store.close().await.unwrap();
    let text = std::fs::read_to_string(dir.path().join("t.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.ends_with('\n'));
}

/// Runs only as the child of `a_second_process_is_refused_with_its_pid_named`:
/// holds the folder named by the environment until its stdin closes.
#[tokio::test]
#[ignore = "the child process of a_second_process_is_refused_with_its_pid_named"]
async fn lock_holder_child() {
    let dir = std::env::var("ROUNDTABLE_LOCK_HOLDER_DIR").expect("run by the parent test");
    let store = JsonlStore::open(&dir).await.unwrap();
    println!("holding");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_second_process_is_refused_with_its_pid_named() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_holder_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ROUNDTABLE_LOCK_HOLDER_DIR", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child exited before taking the lock"
        );
    }
    match JsonlStore::open(dir.path()).await {
        Err(StoreError::Locked { holder, root }) => {
            assert!(holder.contains(&format!("pid {}", child.id())), "{holder}");
            assert_eq!(root, dir.path());
        }
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("two processes opened one folder"),
    }
    drop(child.stdin.take()); // lets the child release the folder and exit
    assert!(child.wait().unwrap().success());
    JsonlStore::open(dir.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_entries_leave_the_file_as_it_was_and_a_reopen_reads_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let t = tid("poll");
    let store = JsonlStore::open(dir.path()).await.unwrap();
    store
        .append(&t, Expect::Any, vec![chat("alice", "vote please")])
        .await
        .unwrap();
    let file = dir.path().join("poll.jsonl");
    let refused = [
        vec![NewEntry::new(
            "bob",
            other("poll.vote", json!({"id": "v-1"})),
        )],
        vec![NewEntry::new("bob", other("poll.vote", json!({"more": 1})))],
        vec![
            chat("bob", "a"),
            NewEntry::new("bob", other("poll.vote", json!({"more": 0}))),
        ],
        vec![NewEntry::new("bob", other("chat", json!({})))],
    ];
    for entries in refused {
        let index = entries.len() - 1;
        let before = std::fs::read(&file).unwrap();
        let last = store.last_seq(&t).await.unwrap();
        let err = store
            .append(&t, Expect::LastSeq(last), entries)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidEntry { index: i, .. } if i == index),
            "{err}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), before, "the file changed");
    }
    // What is valid, however unusual, is kept; the refusals left no trace.
    let unusual = conformance::unusual_entries();
    store
        .append(&t, Expect::Any, unusual[..4].to_vec())
        .await
        .unwrap();
    for entry in &unusual[4..] {
        store
            .append(&t, Expect::Any, vec![entry.clone()])
            .await
            .unwrap();
    }
    let live = store.read_all(&t).await.unwrap();
    store.close().await.unwrap();

    let reopened = JsonlStore::open(dir.path()).await.unwrap();
    assert_eq!(reopened.read_all(&t).await.unwrap(), live);
    assert!(
        reopened.recoveries().is_empty(),
        "{:?}",
        reopened.recoveries()
    );
    reopened.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_entries_read_back_equal_after_a_reopen_and_the_memory_store_agrees() {
    let case = std::sync::atomic::AtomicU64::new(0);
    check_batches(128, |batches| {
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async move {
            let t = tid(&format!("prop-{n}"));
            let memory = MemoryStore::new();
            let (in_memory, memory_accepted) = append_each(&memory, &t, batches.clone()).await;

            let dir = tempfile::tempdir().unwrap();
            let options = JsonlOptions {
                fsync: FsyncPolicy::Never,
            };
            let store = JsonlStore::open_with(dir.path(), options.clone())
                .await
                .unwrap();
            let (written, accepted) = append_each(&store, &t, batches).await;
            proptest::prop_assert_eq!(&accepted, &memory_accepted);
            proptest::prop_assert_eq!(&written, &in_memory);
            proptest::prop_assert_eq!(&store.read_all(&t).await.unwrap(), &written);
            store.close().await.unwrap();

            let reopened = JsonlStore::open_with(dir.path(), options).await.unwrap();
            proptest::prop_assert_eq!(&reopened.read_all(&t).await.unwrap(), &written);
            proptest::prop_assert!(reopened.recoveries().is_empty());
            reopened.close().await.unwrap();
            Ok(())
        }
    });
}
