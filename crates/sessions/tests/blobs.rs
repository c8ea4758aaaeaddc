//! The blob stores: one conformance run against each store (the folder
//! store, the NATS object store against a real nats-server, the PostgreSQL
//! table against a throwaway PostgreSQL server), the folder
//! store's refusal of planted symlinks, write-once under racing writers,
//! and a turn's artifacts over a store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use roundtable_sessions::blob::{BlobError, BlobInfo, BlobPath, TurnArtifacts};
use roundtable_sessions::{
    BlobStore, FolderBlobStore, SessionError, SessionErrorKind, SessionId, TurnId,
};
use roundtable_tools::{ArtifactName, Artifacts};

fn path(text: &str) -> BlobPath {
    BlobPath::parse(text).unwrap()
}

fn infos(list: &[BlobInfo]) -> Vec<(&str, u64)> {
    list.iter().map(|b| (b.path.as_str(), b.size)).collect()
}

/// Bytes that differ everywhere (so a chunk out of place would show).
fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect::<Vec<u8>>()
        .into()
}

/// What every store must do. `stores` are handles on one store (several
/// connections or instances over the same storage): writers race across
/// them.
async fn conformance(stores: &[Arc<dyn BlobStore>]) {
    let store = &stores[0];
    let a = SessionId::generate();
    let b = SessionId::generate();

    // Put and get, including an empty blob and one of several chunks.
    let text = path("attachments/file_01.txt");
    store
        .put_new(&a, &text, Bytes::from_static(b"hello"))
        .await
        .unwrap();
    assert_eq!(store.get(&a, &text).await.unwrap(), b"hello");
    let empty = path("attachments/file_02.txt");
    store.put_new(&a, &empty, Bytes::new()).await.unwrap();
    assert_eq!(store.get(&a, &empty).await.unwrap(), b"");
    let big = pattern(300 * 1024 + 7, 3);
    let log = path("artifacts/turn_1/shell-call_1.log");
    store.put_new(&a, &log, big.clone()).await.unwrap();
    assert_eq!(store.get(&a, &log).await.unwrap(), big);
    let deep = path("artifacts/turn_10/sub/x.svg");
    store
        .put_new(&a, &deep, Bytes::from_static(b"<svg/>"))
        .await
        .unwrap();

    // Write-once: the second put is refused and changes nothing.
    let err = store
        .put_new(&a, &text, Bytes::from_static(b"other"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BlobError::AlreadyExists { path, session } if *path == text && *session == a),
        "{err}"
    );
    assert_eq!(store.get(&a, &text).await.unwrap(), b"hello");
    assert_eq!(
        SessionError::from(err).kind(),
        SessionErrorKind::Conflict,
        "a taken name that reaches a caller"
    );

    // Not found: a missing path, a missing folder, another session's blob.
    for (session, missing) in [
        (&a, "attachments/nope.txt"),
        (&a, "artifacts/turn_2/x.log"),
        (&b, "attachments/file_01.txt"),
    ] {
        let err = store.get(session, &path(missing)).await.unwrap_err();
        assert!(
            matches!(err, BlobError::NotFound { .. }),
            "{missing}: {err}"
        );
        assert_eq!(SessionError::from(err).kind(), SessionErrorKind::NotFound);
    }

    // Listings: sorted, by whole segments, per session.
    let attachments = store.list(&a, &BlobPath::attachments()).await.unwrap();
    assert_eq!(
        infos(&attachments),
        [
            ("attachments/file_01.txt", 5),
            ("attachments/file_02.txt", 0)
        ]
    );
    let artifacts = store.list(&a, &path("artifacts")).await.unwrap();
    assert_eq!(
        infos(&artifacts),
        [
            ("artifacts/turn_1/shell-call_1.log", big.len() as u64),
            ("artifacts/turn_10/sub/x.svg", 6)
        ]
    );
    let turn_1 = store.list(&a, &path("artifacts/turn_1")).await.unwrap();
    assert_eq!(turn_1.len(), 1, "{turn_1:?}");
    let one = store.list(&a, &text).await.unwrap();
    assert_eq!(infos(&one), [("attachments/file_01.txt", 5)]);
    assert!(
        store
            .list(&a, &path("artifacts/turn_2"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list(&b, &BlobPath::attachments())
            .await
            .unwrap()
            .is_empty()
    );

    // A path that names a blob folder rather than a blob is refused.
    for folder in ["attachments", "artifacts"] {
        let err = store
            .put_new(&a, &path(folder), Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::InvalidPath(_)), "{err}");
        assert_eq!(SessionError::from(err).kind(), SessionErrorKind::Invalid);
        let err = store.get(&a, &path(folder)).await.unwrap_err();
        assert!(matches!(err, BlobError::InvalidPath(_)), "{err}");
    }

    // Racing writers of one path across the handles: exactly one wins, and
    // its bytes are what is stored.
    let raced = path("attachments/img_01.png");
    let writers: Vec<_> = (0..8u8)
        .map(|i| {
            let store = stores[usize::from(i) % stores.len()].clone();
            let (session, raced) = (b.clone(), raced.clone());
            tokio::spawn(async move {
                let bytes = pattern(200 * 1024, i);
                (store.put_new(&session, &raced, bytes.clone()).await, bytes)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for writer in writers {
        match writer.await.unwrap() {
            (Ok(()), bytes) => winners.push(bytes),
            (Err(BlobError::AlreadyExists { .. }), _) => {}
            (Err(err), _) => panic!("a racing writer failed: {err}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one writer wins");
    for handle in stores {
        assert_eq!(handle.get(&b, &raced).await.unwrap(), winners[0]);
    }

    // A turn's artifacts: numbered when a name is taken, read back by
    // their reference.
    let sink = TurnArtifacts::new(store.clone(), b.clone(), TurnId::parse("turn_7").unwrap());
    let name = ArtifactName::new("shell-call_1.log").unwrap();
    let first = sink.store(&name, b"one".to_vec()).await.unwrap();
    let second = sink.store(&name, b"two".to_vec()).await.unwrap();
    assert_eq!(first, "artifacts/turn_7/shell-call_1.log");
    assert_eq!(second, "artifacts/turn_7/shell-call_1-2.log");
    assert_eq!(store.get(&b, &path(&second)).await.unwrap(), b"two");

    // Deleting a session's blobs leaves the other session's.
    store.delete_session(&a).await.unwrap();
    assert!(
        store
            .list(&a, &BlobPath::attachments())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.list(&a, &path("artifacts")).await.unwrap().is_empty());
    let err = store.get(&a, &text).await.unwrap_err();
    assert!(matches!(err, BlobError::NotFound { .. }), "{err}");
    assert_eq!(store.list(&b, &path("artifacts")).await.unwrap().len(), 2);
    store.delete_session(&a).await.unwrap();
    store.delete_session(&SessionId::generate()).await.unwrap();
    // The name is free again.
    store
        .put_new(&a, &text, Bytes::from_static(b"again"))
        .await
        .unwrap();
    assert_eq!(store.get(&a, &text).await.unwrap(), b"again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_folder_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    // Several instances on one folder, as several processes would be.
    let stores: Vec<Arc<dyn BlobStore>> = (0..3)
        .map(|_| Arc::new(FolderBlobStore::new(&root)) as Arc<dyn BlobStore>)
        .collect();
    conformance(&stores).await;
    // No temporary file is left behind, raced writes included.
    assert!(hidden_files(&root).is_empty(), "{:?}", hidden_files(&root));
}

/// Every hidden file below `dir`.
fn hidden_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            found.push(name);
        } else if entry.file_type().unwrap().is_dir() {
            found.extend(hidden_files(&entry.path()));
        }
    }
    found
}

/// A session folder with a secret outside it.
struct Planted {
    _dir: tempfile::TempDir,
    store: FolderBlobStore,
    session: SessionId,
    folder: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn planted() -> Planted {
    let dir = tempfile::tempdir().unwrap();
    let session = SessionId::generate();
    let folder = dir.path().join("sessions").join(session.as_str());
    std::fs::create_dir_all(&folder).unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("file_01.txt"), "secret").unwrap();
    Planted {
        store: FolderBlobStore::new(dir.path().join("sessions")),
        _dir: dir,
        session,
        folder,
        outside,
    }
}

fn outside_untouched(p: &Planted) {
    let names: Vec<_> = std::fs::read_dir(&p.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["file_01.txt"]);
    assert_eq!(
        std::fs::read_to_string(p.outside.join("file_01.txt")).unwrap(),
        "secret"
    );
}

#[tokio::test]
async fn a_planted_attachments_link_is_never_followed() {
    let p = planted();
    std::os::unix::fs::symlink(&p.outside, p.folder.join("attachments")).unwrap();
    let secret = path("attachments/file_01.txt");

    let err = p.store.get(&p.session, &secret).await.unwrap_err();
    assert!(matches!(err, BlobError::Io { .. }), "{err}");
    assert!(err.to_string().contains("symlink"), "{err}");
    for name in ["attachments/file_01.txt", "attachments/file_02.txt"] {
        let err = p
            .store
            .put_new(&p.session, &path(name), Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::Io { .. }), "{name}: {err}");
        assert_eq!(SessionError::from(err).kind(), SessionErrorKind::Internal);
    }
    let listed = p
        .store
        .list(&p.session, &BlobPath::attachments())
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    // Deleting the session's blobs removes the link, not what it points to.
    p.store.delete_session(&p.session).await.unwrap();
    assert!(std::fs::symlink_metadata(p.folder.join("attachments")).is_err());
    outside_untouched(&p);
}

#[tokio::test]
async fn a_planted_file_link_is_never_read_nor_written_through() {
    let p = planted();
    std::fs::create_dir(p.folder.join("attachments")).unwrap();
    std::os::unix::fs::symlink(
        p.outside.join("file_01.txt"),
        p.folder.join("attachments/file_01.txt"),
    )
    .unwrap();
    // A dangling one, where a write would create the target.
    std::os::unix::fs::symlink(
        p.outside.join("created.txt"),
        p.folder.join("attachments/file_02.txt"),
    )
    .unwrap();

    let err = p
        .store
        .get(&p.session, &path("attachments/file_01.txt"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    for name in ["attachments/file_01.txt", "attachments/file_02.txt"] {
        let err = p
            .store
            .put_new(&p.session, &path(name), Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, BlobError::AlreadyExists { .. }),
            "{name}: {err}"
        );
    }
    let listed = p
        .store
        .list(&p.session, &BlobPath::attachments())
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    p.store.delete_session(&p.session).await.unwrap();
    outside_untouched(&p);
}

#[tokio::test]
async fn a_session_folder_that_is_a_link_is_refused() {
    let p = planted();
    let other = SessionId::generate();
    let linked = p.folder.parent().unwrap().join(other.as_str());
    std::os::unix::fs::symlink(&p.outside, &linked).unwrap();
    let err = p
        .store
        .put_new(&other, &path("attachments/x.txt"), Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    let err = p
        .store
        .get(&other, &path("attachments/file_01.txt"))
        .await
        .unwrap_err();
    assert!(matches!(err, BlobError::Io { .. }), "{err}");
    assert!(
        p.store
            .list(&other, &BlobPath::attachments())
            .await
            .is_err()
    );
    assert!(p.store.delete_session(&other).await.is_err());
    outside_untouched(&p);
}

#[tokio::test]
async fn the_session_folder_keeps_its_other_files() {
    let p = planted();
    std::fs::write(p.folder.join("events.ndjson"), "{}\n").unwrap();
    std::fs::write(p.folder.join("session.json"), "{}").unwrap();
    // A temporary file a crashed write left, and a name no blob has.
    std::fs::create_dir(p.folder.join("attachments")).unwrap();
    std::fs::write(p.folder.join("attachments/.x.1.2.3.tmp"), "partial").unwrap();
    std::fs::write(p.folder.join("attachments/a b.txt"), "odd").unwrap();
    let mine = path("attachments/file_01.txt");
    p.store
        .put_new(&p.session, &mine, Bytes::from_static(b"mine"))
        .await
        .unwrap();
    let listed = p
        .store
        .list(&p.session, &BlobPath::attachments())
        .await
        .unwrap();
    assert_eq!(infos(&listed), [("attachments/file_01.txt", 4)]);
    assert_eq!(
        std::fs::read(p.folder.join("attachments/file_01.txt")).unwrap(),
        b"mine"
    );
    p.store.delete_session(&p.session).await.unwrap();
    assert!(!p.folder.join("attachments").exists());
    assert!(p.folder.join("events.ndjson").is_file());
    assert!(p.folder.join("session.json").is_file());
}

#[cfg(feature = "nats")]
mod nats {
    use std::time::Duration;

    use roundtable_sessions::blob::{NatsBlobOptions, NatsBlobStore};
    use roundtable_test_support::nats::{NatsServer, connect_when_up};

    use super::*;

    fn options(bucket: &str) -> NatsBlobOptions {
        NatsBlobOptions {
            bucket: bucket.into(),
            request_timeout: Duration::from_secs(2),
            ..NatsBlobOptions::default()
        }
    }

    /// Opens the store, retrying while the server's JetStream comes up.
    async fn open(url: &str, bucket: &str) -> NatsBlobStore {
        connect_when_up(url, || NatsBlobStore::connect(url, options(bucket))).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_nats_store_conforms() {
        let server = NatsServer::start();
        // Three connections, as three server processes would have.
        let mut stores: Vec<Arc<dyn BlobStore>> = Vec::new();
        for _ in 0..3 {
            stores.push(Arc::new(open(&server.url(), "BLOBS").await));
        }
        conformance(&stores).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_losing_writer_leaves_nothing_and_another_process_reads_the_winner() {
        let server = NatsServer::start();
        let url = server.url();
        let mut stores = Vec::new();
        for _ in 0..4 {
            stores.push(open(&url, "RACE").await);
        }
        let session = SessionId::generate();
        let raced = path("attachments/img_01.png");
        let writers: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(i, store)| {
                let (store, session, raced) = (store.clone(), session.clone(), raced.clone());
                tokio::spawn(
                    async move { store.put_new(&session, &raced, pattern(100, i as u8)).await },
                )
            })
            .collect();
        let mut won = 0;
        for writer in writers {
            match writer.await.unwrap() {
                Ok(()) => won += 1,
                Err(BlobError::AlreadyExists { .. }) => {}
                Err(err) => panic!("{err}"),
            }
        }
        assert_eq!(won, 1);

        // The bucket holds the winner's one chunk and its metadata: the
        // losers purged their chunks.
        let client = async_nats::connect(&url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let mut stream = js.get_stream("OBJ_RACE").await.unwrap();
        assert_eq!(stream.info().await.unwrap().state.messages, 2);

        // The object is one the object store's own API reads, digest
        // checked; and an object its last-writer-wins put wrote is one
        // this store refuses to write over.
        let bucket = js.get_object_store("RACE").await.unwrap();
        let name = format!("{session}/{raced}");
        let mut object = bucket.get(&name).await.unwrap();
        assert!(object.info().digest.is_some());
        let mut read = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut object, &mut read)
            .await
            .unwrap();
        assert_eq!(read, stores[0].get(&session, &raced).await.unwrap());
        let foreign = path("attachments/file_01.txt");
        bucket
            .put(
                format!("{session}/{foreign}").as_str(),
                &mut &b"put by another client"[..],
            )
            .await
            .unwrap();
        let err = stores[1]
            .put_new(&session, &foreign, Bytes::from_static(b"mine"))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::AlreadyExists { .. }), "{err}");
        assert_eq!(
            stores[2].get(&session, &foreign).await.unwrap(),
            b"put by another client"
        );

        // A name whose object another client deleted is free again.
        let deleted = path("attachments/file_02.txt");
        let deleted_name = format!("{session}/{deleted}");
        bucket
            .put(deleted_name.as_str(), &mut &b"short-lived"[..])
            .await
            .unwrap();
        bucket.delete(&deleted_name).await.unwrap();
        let err = stores[0].get(&session, &deleted).await.unwrap_err();
        assert!(matches!(err, BlobError::NotFound { .. }), "{err}");
        stores[0]
            .put_new(&session, &deleted, Bytes::from_static(b"mine now"))
            .await
            .unwrap();
        assert_eq!(
            stores[3].get(&session, &deleted).await.unwrap(),
            b"mine now"
        );

        // A new process finds the bucket and the blobs.
        drop(stores);
        let again = open(&url, "RACE").await;
        let listed = again
            .list(&session, &BlobPath::attachments())
            .await
            .unwrap();
        assert_eq!(
            infos(&listed),
            [
                ("attachments/file_01.txt", 21),
                ("attachments/file_02.txt", 8),
                ("attachments/img_01.png", 100)
            ]
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_and_bad_options_are_typed_errors() {
        let port = roundtable_test_support::ports::free_port();
        let err = NatsBlobStore::connect(&format!("nats://127.0.0.1:{port}"), options("B"))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::Backend { .. }), "{err}");
        assert!(err.to_string().contains(&port.to_string()), "{err}");
        assert_eq!(SessionError::from(err).kind(), SessionErrorKind::Internal);
        for bad in [
            NatsBlobOptions {
                bucket: "a.b".into(),
                ..NatsBlobOptions::default()
            },
            NatsBlobOptions {
                replicas: 0,
                ..NatsBlobOptions::default()
            },
            NatsBlobOptions {
                chunk_size: 0,
                ..NatsBlobOptions::default()
            },
        ] {
            let err = NatsBlobStore::connect("nats://127.0.0.1:1", bad)
                .await
                .unwrap_err();
            assert!(err.to_string().contains("invalid options"), "{err}");
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::time::Duration;

    use roundtable_sessions::blob::PostgresBlobStore;
    use roundtable_test_support::postgres::PostgresServer;
    use roundtable_thread_stream::PostgresOptions;

    use super::*;

    fn options(schema: &str) -> PostgresOptions {
        PostgresOptions {
            schema: schema.into(),
            connect_timeout: Duration::from_secs(2),
            ..PostgresOptions::default()
        }
    }

    async fn open(server: &PostgresServer, schema: &str) -> PostgresBlobStore {
        PostgresBlobStore::connect(&server.url(), options(schema))
            .await
            .unwrap_or_else(|e| panic!("cannot open the blob store: {e}\n{}", server.log()))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_postgres_store_conforms() {
        let server = PostgresServer::start();
        // Three connections, as three daemons would have.
        let mut stores: Vec<Arc<dyn BlobStore>> = Vec::new();
        for _ in 0..3 {
            stores.push(Arc::new(open(&server, "roundtable").await));
        }
        conformance(&stores).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blobs_outlive_a_server_restart_and_schemas_keep_apart() {
        let mut server = PostgresServer::start();
        let store = open(&server, "one").await;
        let other = open(&server, "two").await;
        let session = SessionId::generate();
        let file = path("attachments/file_01.txt");
        store
            .put_new(&session, &file, Bytes::from_static(b"kept"))
            .await
            .unwrap();
        let err = other.get(&session, &file).await.unwrap_err();
        assert!(matches!(err, BlobError::NotFound { .. }), "{err}");

        // The connection is lost with the server; the next calls open a
        // new one.
        server.stop();
        server.start_again();
        assert_eq!(store.get(&session, &file).await.unwrap(), b"kept");
        let err = store
            .put_new(&session, &file, Bytes::from_static(b"other"))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::AlreadyExists { .. }), "{err}");
        let again = open(&server, "one").await;
        let listed = again
            .list(&session, &BlobPath::attachments())
            .await
            .unwrap();
        assert_eq!(infos(&listed), [("attachments/file_01.txt", 4)]);
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_typed_error_without_the_password() {
        let port = roundtable_test_support::ports::free_port();
        let url = format!("postgres://app:hunter2@127.0.0.1:{port}/app");
        let err = PostgresBlobStore::connect(&url, options("roundtable"))
            .await
            .unwrap_err();
        assert!(matches!(err, BlobError::Backend { .. }), "{err}");
        let said = err.to_string();
        assert!(said.contains(&port.to_string()), "{said}");
        assert!(!said.contains("hunter2"), "{said}");
        assert_eq!(SessionError::from(err).kind(), SessionErrorKind::Internal);
    }
}
