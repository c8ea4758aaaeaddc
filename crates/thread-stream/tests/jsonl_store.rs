//! `JsonlStore`: the conformance suite (in each layout), then what only a
//! file store must do: survive torn writes, refuse a second process, report
//! corruption without touching the file, read back after a reopen everything
//! it acknowledged, keep to its layout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use conformance::{append_each, chat, check_batches, other, tid};
use roundtable_thread_stream::jsonl::FsyncPolicy;
use roundtable_thread_stream::{
    EntryBody, Expect, JsonlLayout, JsonlOptions, JsonlStore, MemoryStore, NewEntry, StoreError,
    ThreadStore,
};
use serde_json::json;

conformance_suite!(async {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path()).await.unwrap();
    (Arc::new(store) as Arc<dyn ThreadStore>, dir)
});

/// The conformance suite again, with a folder per thread.
mod folder_per_thread {
    use super::*;

    conformance_suite!(async {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open_with(dir.path(), options(&folders()))
            .await
            .unwrap();
        (Arc::new(store) as Arc<dyn ThreadStore>, dir)
    });

    mod deletion {
        use super::*;

        conformance_suite!(@deletion async {
            let dir = tempfile::tempdir().unwrap();
            let store = JsonlStore::open_with(dir.path(), options(&folders()))
                .await
                .unwrap();
            (Arc::new(store) as Arc<dyn ThreadStore>, dir)
        });
    }
}

mod deletion {
    use super::*;

    conformance_suite!(@deletion async {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::open(dir.path()).await.unwrap();
        (Arc::new(store) as Arc<dyn ThreadStore>, dir)
    });
}

/// A folder per thread, as the sessions engine keeps them.
fn folders() -> JsonlLayout {
    JsonlLayout::folder_per_thread("events.ndjson")
}

/// Every layout; the tests of what happens to files run in each.
fn layouts() -> [JsonlLayout; 2] {
    [JsonlLayout::FilePerThread, folders()]
}

fn options(layout: &JsonlLayout) -> JsonlOptions {
    JsonlOptions {
        layout: layout.clone(),
        ..JsonlOptions::default()
    }
}

async fn open(dir: &Path, layout: &JsonlLayout) -> JsonlStore {
    JsonlStore::open_with(dir, options(layout)).await.unwrap()
}

/// Where `layout` keeps `thread` under `root`, spelled out here rather than
/// asked of the store.
fn thread_file(root: &Path, layout: &JsonlLayout, thread: &str) -> PathBuf {
    match layout {
        JsonlLayout::FilePerThread => root.join(format!("{thread}.jsonl")),
        JsonlLayout::FolderPerThread { file_name } => root.join(thread).join(file_name),
    }
}

/// Puts `bytes` where `layout` keeps `thread`, as a crash might have left
/// them (the thread's folder too, if it has one).
fn put_thread_file(root: &Path, layout: &JsonlLayout, thread: &str, bytes: &[u8]) {
    let file = thread_file(root, layout, thread);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, bytes).unwrap();
}

/// Every file and folder under `root` (a file with its bytes), but the lock
/// file, which each open rewrites.
fn tree(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
        for item in std::fs::read_dir(dir).unwrap() {
            let path = item.unwrap().path();
            let name = path.strip_prefix(root).unwrap().to_path_buf();
            if name == Path::new(".lock") {
                continue;
            }
            if path.is_dir() {
                out.insert(name, None);
                walk(root, &path, out);
            } else {
                out.insert(name, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Writes `n` chat entries to thread `t` in a fresh store under `dir`, closes
/// it, and returns the file's bytes.
async fn write_thread(dir: &Path, layout: &JsonlLayout, n: usize) -> Vec<u8> {
    let store = open(dir, layout).await;
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
    std::fs::read(thread_file(dir, layout, "t")).unwrap()
}

#[tokio::test]
async fn a_file_cut_anywhere_inside_its_last_entry_keeps_every_earlier_entry() {
    for layout in layouts() {
        a_file_cut_anywhere_inside_its_last_entry_keeps_every_earlier_entry_in(&layout).await;
    }
}

async fn a_file_cut_anywhere_inside_its_last_entry_keeps_every_earlier_entry_in(
    layout: &JsonlLayout,
) {
    let source = tempfile::tempdir().unwrap();
    let full = write_thread(source.path(), layout, 4).await;
    // Where the last entry's line starts.
    let last_start = full[..full.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    for cut in last_start..full.len() {
        let dir = tempfile::tempdir().unwrap();
        put_thread_file(dir.path(), layout, "t", &full[..cut]);
        let store = open(dir.path(), layout).await;
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
        let reopened = open(dir.path(), layout).await;
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
    for layout in layouts() {
        a_batch_torn_by_a_crash_is_dropped_whole_in(&layout).await;
    }
}

async fn a_batch_torn_by_a_crash_is_dropped_whole_in(layout: &JsonlLayout) {
    let dir = tempfile::tempdir().unwrap();
    let file = thread_file(dir.path(), layout, "t");
    let store = open(dir.path(), layout).await;
    store
        .append(&tid("t"), Expect::Any, vec![chat("a", "alone")])
        .await
        .unwrap();
    let batch: Vec<NewEntry> = (0..3).map(|i| chat("bot", &format!("part {i}"))).collect();
    store.append(&tid("t"), Expect::Any, batch).await.unwrap();
    store.close().await.unwrap();
    let full = std::fs::read(&file).unwrap();
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
        std::fs::write(&file, &full[..cut]).unwrap();
        let store = open(dir.path(), layout).await;
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
async fn a_read_that_opens_a_thread_returns_what_the_same_read_does_once_it_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let layout = JsonlLayout::FilePerThread;
    let file = thread_file(dir.path(), &layout, "t");
    let store = open(dir.path(), &layout).await;
    for i in 1..=4 {
        store
            .append(&tid("t"), Expect::Any, vec![chat("a", &format!("m{i}"))])
            .await
            .unwrap();
    }
    let batch: Vec<NewEntry> = (0..3).map(|i| chat("bot", &format!("part {i}"))).collect();
    store.append(&tid("t"), Expect::Any, batch).await.unwrap();
    store.close().await.unwrap();
    let full = std::fs::read(&file).unwrap();
    // The whole file, and the file cut inside the batch's last line: the
    // batch is dropped on open, whichever call opens the thread.
    for bytes in [&full[..], &full[..full.len() - 3]] {
        for (from, to) in [(1, u64::MAX), (0, 2), (2, 3), (3, 2), (4, 6), (6, 100)] {
            std::fs::write(&file, bytes).unwrap();
            let opened_by_read = open(dir.path(), &layout).await;
            let read = opened_by_read.read(&tid("t"), from..=to).await.unwrap();
            opened_by_read.close().await.unwrap();
            std::fs::write(&file, bytes).unwrap();
            let opened_before = open(dir.path(), &layout).await;
            opened_before.last_seq(&tid("t")).await.unwrap();
            let expected = opened_before.read(&tid("t"), from..=to).await.unwrap();
            opened_before.close().await.unwrap();
            assert_eq!(read, expected, "{from}..={to} of {} bytes", bytes.len());
        }
    }
}

#[tokio::test]
async fn a_corrupt_line_in_the_middle_is_an_error_and_the_file_is_untouched() {
    for layout in layouts() {
        a_corrupt_line_in_the_middle_is_an_error_and_the_file_is_untouched_in(&layout).await;
    }
}

async fn a_corrupt_line_in_the_middle_is_an_error_and_the_file_is_untouched_in(
    layout: &JsonlLayout,
) {
    let dir = tempfile::tempdir().unwrap();
    let file = thread_file(dir.path(), layout, "t");
    let full = write_thread(dir.path(), layout, 3).await;
    let first_end = full.iter().position(|b| *b == b'\n').unwrap() + 1;
    let mut damaged = full[..first_end].to_vec();
    damaged.extend_from_slice(b"{\"seq\":2,\"garbage\n");
    damaged.extend_from_slice(&full[first_end..]);
    std::fs::write(&file, &damaged).unwrap();
    let store = open(dir.path(), layout).await;
    let err = store.read_all(&tid("t")).await.unwrap_err();
    match &err {
        StoreError::Corrupt { location, .. } => {
            assert_eq!(*location, format!("{}:2", file.display()))
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
        std::fs::read(&file).unwrap(),
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
    for (fsync, layout) in [
        FsyncPolicy::Always,
        FsyncPolicy::Batched(Duration::from_millis(5)),
        FsyncPolicy::Never,
    ]
    .into_iter()
    .flat_map(|fsync| layouts().map(|layout| (fsync, layout)))
    {
        let dir = tempfile::tempdir().unwrap();
        let options = JsonlOptions {
            fsync,
            layout: layout.clone(),
            ..JsonlOptions::default()
        };
        let store = JsonlStore::open_with(dir.path(), options).await.unwrap();
        for i in 0..10 {
            store
                .append(&tid("t"), Expect::Any, vec![chat("a", &i.to_string())])
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        store.sync().await.unwrap();
        store.close().await.unwrap();
        let again = open(dir.path(), &layout).await;
        assert_eq!(
            again.read_all(&tid("t")).await.unwrap().len(),
            10,
            "{fsync:?} {layout}"
        );
        assert_eq!(again.list_threads().await.unwrap(), vec![tid("t")]);
    }
}

#[tokio::test]
async fn thread_files_stay_inside_the_root() {
    for layout in layouts() {
        thread_files_stay_inside_the_root_in(&layout).await;
    }
}

async fn thread_files_stay_inside_the_root_in(layout: &JsonlLayout) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = open(&root, layout).await;
    for name in ["a", "team.general", "x-1_y"] {
        store
            .append(&tid(name), Expect::Any, vec![chat("a", "x")])
            .await
            .unwrap();
        assert!(thread_file(&root, layout, name).is_file());
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
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_last_entry_without_its_newline_is_kept_and_completed() {
    for layout in layouts() {
        let dir = tempfile::tempdir().unwrap();
        let full = write_thread(dir.path(), &layout, 2).await;
        let file = thread_file(dir.path(), &layout, "t");
        std::fs::write(&file, &full[..full.len() - 1]).unwrap();
        let store = open(dir.path(), &layout).await;
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
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 3, "{layout}");
        assert!(text.ends_with('\n'));
    }
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
                ..JsonlOptions::default()
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

#[tokio::test]
async fn a_folder_per_thread_lists_only_folders_holding_the_thread_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = open(root, &folders()).await;
    for name in ["a", "b"] {
        store
            .append(&tid(name), Expect::Any, vec![chat("a", "x")])
            .await
            .unwrap();
    }
    // Folders and files of the host's, beside the threads.
    std::fs::create_dir(root.join("no-thread")).unwrap();
    std::fs::write(root.join("no-thread/session.json"), "{}").unwrap();
    std::fs::create_dir(root.join("empty")).unwrap();
    std::fs::write(root.join("empty/events.ndjson"), "").unwrap();
    for hidden_or_invalid in [".hidden", "bad name"] {
        let line = std::fs::read(root.join("a/events.ndjson")).unwrap();
        std::fs::create_dir(root.join(hidden_or_invalid)).unwrap();
        std::fs::write(root.join(hidden_or_invalid).join("events.ndjson"), line).unwrap();
    }
    std::fs::create_dir_all(root.join("c/events.ndjson")).unwrap();
    std::fs::create_dir_all(root.join("nested/deeper")).unwrap();
    std::fs::write(root.join("nested/deeper/events.ndjson"), "x\n").unwrap();
    std::fs::write(root.join("notes.txt"), "x").unwrap();
    std::fs::write(root.join("d.jsonl"), "x\n").unwrap();
    std::fs::write(root.join("plain-file"), "x").unwrap();
    assert_eq!(
        store.list_threads().await.unwrap(),
        vec![tid("a"), tid("b")]
    );

    // A thread whose name a file of the host's already has is an error, and
    // the file stays as it is.
    let err = store
        .append(&tid("plain-file"), Expect::Any, vec![chat("a", "x")])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err}");
    assert_eq!(std::fs::read(root.join("plain-file")).unwrap(), b"x");
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_thread_folder_made_before_the_first_append_keeps_everything_else_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let folder = root.join("sess_1");
    // The host makes the session's folder and files before the store opens...
    std::fs::create_dir_all(folder.join("attachments")).unwrap();
    std::fs::write(folder.join("session.json"), r#"{"id":"sess_1"}"#).unwrap();
    std::fs::write(
        folder.join("attachments/img_01.png"),
        [0x89, b'P', b'N', b'G'],
    )
    .unwrap();
    let store = open(root, &folders()).await;
    // ...and after, before the thread's first entry.
    std::fs::create_dir_all(folder.join("artifacts/turn_1")).unwrap();
    std::fs::write(folder.join("artifacts/turn_1/out.txt"), "result").unwrap();
    let hosts_files = tree(&folder);

    let t = tid("sess_1");
    assert!(store.list_threads().await.unwrap().is_empty());
    assert_eq!(store.last_seq(&t).await.unwrap(), 0);
    let written = store
        .append(
            &t,
            Expect::LastSeq(0),
            vec![chat("alice", "hi"), chat("bot", "hello")],
        )
        .await
        .unwrap();
    assert_eq!(store.list_threads().await.unwrap(), vec![t.clone()]);
    store.close().await.unwrap();

    let reopened = open(root, &folders()).await;
    assert_eq!(reopened.read_all(&t).await.unwrap(), written);
    reopened.close().await.unwrap();
    let mut after = tree(&folder);
    assert!(after.remove(Path::new("events.ndjson")).is_some());
    assert_eq!(after, hosts_files, "the store touched only its thread file");
}

#[tokio::test]
async fn a_folder_opened_with_another_layout_is_refused_and_left_untouched() {
    let other_name = JsonlLayout::folder_per_thread("thread.jsonl");
    for (written_with, opened_with) in [
        (JsonlLayout::FilePerThread, folders()),
        (folders(), JsonlLayout::FilePerThread),
        (folders(), other_name.clone()),
        (other_name, folders()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_thread(dir.path(), &written_with, 2).await;
        let before = tree(dir.path());
        match JsonlStore::open_with(dir.path(), options(&opened_with)).await {
            Err(StoreError::LayoutMismatch {
                root,
                found,
                wanted,
            }) => {
                assert_eq!(root, dir.path());
                assert_eq!(found, written_with.to_string());
                assert_eq!(wanted, opened_with.to_string());
            }
            Err(e) => panic!("expected a layout mismatch, got {e}"),
            Ok(_) => panic!("{written_with} opened as {opened_with}"),
        }
        assert_eq!(
            tree(dir.path()),
            before,
            "the refused open changed the folder"
        );
        // The refused open let go of the folder; the right layout reads it.
        let store = open(dir.path(), &written_with).await;
        assert_eq!(store.list_threads().await.unwrap(), vec![tid("t")]);
        assert_eq!(store.read_all(&tid("t")).await.unwrap().len(), 2);
        store.close().await.unwrap();
    }

    // The first open records the layout, before any thread is written.
    let dir = tempfile::tempdir().unwrap();
    open(dir.path(), &folders()).await.close().await.unwrap();
    assert!(matches!(
        JsonlStore::open(dir.path()).await,
        Err(StoreError::LayoutMismatch { .. })
    ));
}

#[tokio::test]
async fn a_folder_without_a_layout_record_holding_thread_files_is_a_file_per_thread() {
    // As a store wrote it before folders recorded their layout.
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join(".layout");
    write_thread(dir.path(), &JsonlLayout::FilePerThread, 2).await;
    std::fs::remove_file(&record).unwrap();
    let before = tree(dir.path());
    assert!(matches!(
        JsonlStore::open_with(dir.path(), options(&folders())).await,
        Err(StoreError::LayoutMismatch { .. })
    ));
    assert_eq!(tree(dir.path()), before);
    let store = JsonlStore::open(dir.path()).await.unwrap();
    assert_eq!(store.read_all(&tid("t")).await.unwrap().len(), 2);
    store.close().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        "{\"layout\":\"file-per-thread\"}\n"
    );

    // One holding only the host's folders takes the layout it is opened with.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sess_1")).unwrap();
    std::fs::write(dir.path().join("sess_1/session.json"), "{}").unwrap();
    open(dir.path(), &folders()).await.close().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".layout")).unwrap(),
        "{\"layout\":\"folder-per-thread\",\"file_name\":\"events.ndjson\"}\n"
    );
}

#[tokio::test]
async fn a_thread_file_name_that_could_leave_the_thread_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    for bad in ["", "..", "../escape", "a/b"] {
        let layout = JsonlLayout::folder_per_thread(bad);
        assert!(matches!(
            JsonlStore::open_with(&root, options(&layout)).await,
            Err(StoreError::InvalidOptions(_))
        ));
    }
    assert!(!root.exists(), "a refused store made its folder");
}

/// How many descriptors this process holds on files under `root` (other
/// tests of this binary run beside this one: only `root`'s count).
fn files_open_under(root: &Path) -> usize {
    let root = root.canonicalize().unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.starts_with(&root))
        .count()
}

fn bounded(fsync: FsyncPolicy, max_idle_files: usize) -> JsonlOptions {
    JsonlOptions {
        fsync,
        max_idle_files,
        ..JsonlOptions::default()
    }
}

/// A server touches many threads over its life: it must not keep a
/// descriptor for each (past the process's limit every append would fail),
/// and a thread closed while idle reads back and appends on as before.
#[tokio::test]
async fn idle_thread_files_are_closed_beyond_the_bound_and_reopen_where_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open_with(dir.path(), bounded(FsyncPolicy::Always, 16))
        .await
        .unwrap();
    for i in 0..300 {
        store
            .append(&tid(&format!("t{i}")), Expect::Any, vec![chat("a", "hi")])
            .await
            .unwrap();
    }
    // The folder's lock file, and at most the bound plus its slack.
    let open = files_open_under(dir.path());
    assert!(open <= 1 + 16 + 2, "{open} files open under the store");
    // The first thread was closed long ago: it opens again where it was.
    let appended = store
        .append(&tid("t0"), Expect::LastSeq(1), vec![chat("a", "again")])
        .await
        .unwrap();
    assert_eq!(appended[0].seq, 2);
    let all = store.read(&tid("t0"), 1..=10).await.unwrap();
    assert_eq!(all.len(), 2);
}

/// A thread someone follows stays open however many others come and go:
/// its subscriber sees what is appended after the churn (a second open copy
/// of the thread would append where the subscriber never looks).
#[tokio::test]
async fn a_followed_thread_stays_open_while_others_are_closed() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open_with(dir.path(), bounded(FsyncPolicy::Never, 2))
        .await
        .unwrap();
    store
        .append(&tid("followed"), Expect::Any, vec![chat("a", "first")])
        .await
        .unwrap();
    let mut follow = store.subscribe(&tid("followed"), 1).await.unwrap();
    assert_eq!(follow.next().await.unwrap().unwrap().seq, 1);
    for i in 0..50 {
        store
            .append(&tid(&format!("t{i}")), Expect::Any, vec![chat("a", "hi")])
            .await
            .unwrap();
    }
    store
        .append(
            &tid("followed"),
            Expect::LastSeq(1),
            vec![chat("a", "second")],
        )
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), follow.next())
        .await
        .expect("the subscriber saw the append")
        .unwrap()
        .unwrap();
    assert_eq!(next.seq, 2);
}

/// With writes still waiting for the background fsync, a file stays open
/// (closing it would leave them to nobody); once synced, it may close.
#[tokio::test]
async fn a_file_waiting_for_its_fsync_stays_open_until_synced() {
    let dir = tempfile::tempdir().unwrap();
    let never_ticks = FsyncPolicy::Batched(Duration::from_secs(3600));
    let store = JsonlStore::open_with(dir.path(), bounded(never_ticks, 4))
        .await
        .unwrap();
    for i in 0..40 {
        store
            .append(&tid(&format!("t{i}")), Expect::Any, vec![chat("a", "hi")])
            .await
            .unwrap();
    }
    assert_eq!(files_open_under(dir.path()), 1 + 40);
    store.sync().await.unwrap();
    store.last_seq(&tid("t0")).await.unwrap();
    let open = files_open_under(dir.path());
    assert!(open <= 1 + 4 + 1, "{open} files open after the sync");
}

/// Appends from many tasks over more threads than the store keeps open:
/// every thread ends with gapless seqs and exactly the entries appended, as
/// a fresh store reads them from the files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_over_threads_that_close_and_reopen_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open_with(dir.path(), bounded(FsyncPolicy::Never, 0))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..60 {
                    let thread = tid(&format!("t{}", (task * 7 + i) % 20));
                    store
                        .append(
                            &thread,
                            Expect::Any,
                            vec![chat("a", &format!("{task}/{i}"))],
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
    store.close().await.unwrap();
    let reopened = JsonlStore::open(dir.path()).await.unwrap();
    let mut total = 0;
    for t in 0..20 {
        let entries = reopened
            .read(&tid(&format!("t{t}")), 1..=1000)
            .await
            .unwrap();
        let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=entries.len() as u64).collect::<Vec<_>>());
        total += entries.len();
    }
    assert_eq!(total, 8 * 60);
}

#[tokio::test]
async fn a_thread_s_file_maps_to_the_thread_and_no_other_path_does() {
    for layout in layouts() {
        a_thread_s_file_maps_to_the_thread_and_no_other_path_does_in(&layout).await;
    }
}

async fn a_thread_s_file_maps_to_the_thread_and_no_other_path_does_in(layout: &JsonlLayout) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = open(&root, layout).await;
    let thread = tid("sess_1");
    store
        .append(&thread, Expect::Any, vec![chat("a", "x")])
        .await
        .unwrap();
    let canonical_root = std::fs::canonicalize(&root).unwrap();
    let file = store.thread_file(&thread).unwrap();
    assert!(file.is_absolute());
    assert_eq!(file, thread_file(&canonical_root, layout, "sess_1"));
    assert_eq!(store.thread_of_file(&file), Some(thread.clone()));
    // The same file by another spelling: `..` and a relative path.
    let detour = root.join("..").join("store");
    let spelled = thread_file(&detour, layout, "sess_1");
    assert_eq!(store.thread_of_file(&spelled), Some(thread.clone()));
    // A thread that is not there yet has a file, but no file is a thread.
    let unborn = store.thread_file(&tid("sess_2")).unwrap();
    assert_eq!(store.thread_of_file(&unborn), None);
    // The folder itself, the layout record, a file of the right name in the
    // wrong place (outside, one folder deeper), a traversal out and back.
    let outside = dir.path().join("elsewhere");
    put_thread_file(&outside, layout, "sess_1", b"{}\n");
    let deeper = root.join("nested");
    put_thread_file(&deeper, layout, "sess_3", b"{}\n");
    for path in [
        root.clone(),
        root.join(".layout"),
        thread_file(&outside, layout, "sess_1"),
        thread_file(&deeper, layout, "sess_3"),
        root.join("..")
            .join("elsewhere")
            .join(thread_file(Path::new(""), layout, "sess_1")),
        PathBuf::from("/etc/passwd"),
    ] {
        assert_eq!(store.thread_of_file(&path), None, "{}", path.display());
    }
    // A link in the folder to a file outside it is not a thread's file,
    // whatever its name; a link from outside to a thread's file is that
    // file.
    #[cfg(unix)]
    {
        let linked = thread_file(&root, layout, "sess_9");
        std::fs::create_dir_all(linked.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(thread_file(&outside, layout, "sess_1"), &linked).unwrap();
        assert_eq!(store.thread_of_file(&linked), None);
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(&file, &alias).unwrap();
        assert_eq!(store.thread_of_file(&alias), Some(thread.clone()));
    }
    // Stores without files have none.
    let memory = MemoryStore::new();
    assert_eq!(memory.thread_file(&thread), None);
    assert_eq!(memory.thread_of_file(&file), None);
    store.close().await.unwrap();
}
