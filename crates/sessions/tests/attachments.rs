//! Files in sessions: uploads checked against their content, messages that
//! refer to them (the model reads the content, the thread keeps the
//! reference), references that are refused before anything is stored, and
//! the artifacts a turn's tools keep in the session's blob store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use bytes::Bytes;
use roundtable_providers::{Message, ScriptedProvider};
use roundtable_sessions::blob::BlobPath;
use roundtable_sessions::{
    BlobStore, Caller, FolderBlobStore, SessionEngine, SessionErrorKind, SessionId, Submit,
};
use roundtable_thread_stream::{EntryBody, FileRef, ThreadId, ThreadStore};
use support::{Fixture, call, model, text};

const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R',
];

struct Setup {
    engine: SessionEngine,
    blobs: Arc<dyn BlobStore>,
    store: Arc<dyn ThreadStore>,
}

async fn engine_with_blobs(fx: &Fixture, provider: Arc<ScriptedProvider>) -> Setup {
    let blobs: Arc<dyn BlobStore> = Arc::new(FolderBlobStore::new(fx.data().join("blobs")));
    let store = fx.store().await;
    let engine = SessionEngine::builder(store.clone(), provider, model())
        .snapshot_dir(fx.data())
        .blob_store(blobs.clone())
        .build();
    Setup {
        engine,
        blobs,
        store,
    }
}

/// The text the model was sent in the last user message of `request`.
fn user_text(request: &roundtable_providers::Context) -> String {
    let Some(Message::User(user)) = request.messages.last() else {
        panic!("the request does not end with a user message: {request:?}");
    };
    user.content.to_text()
}

#[tokio::test]
async fn a_message_with_an_upload_shows_its_content_to_the_model() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("Seen.")]));
    let Setup { engine, store, .. } = engine_with_blobs(&fx, provider.clone()).await;
    let host = Caller::Host;
    let session = engine.create(&host, fx.unverified()).await.unwrap();

    let upload = engine
        .upload_attachment(
            &host,
            &session.id,
            Some("../../notes.txt"),
            "text/plain",
            Bytes::from_static(b"the launch code is 42\n"),
        )
        .await
        .unwrap();
    // The stored name is the store's, never the client's.
    assert_eq!(upload.reference.as_str(), "attachments/file_01.txt");
    assert_eq!(upload.filename.as_deref(), Some("notes.txt"));

    let submitted = engine
        .submit(
            &host,
            &session.id,
            Submit {
                files: vec![upload.file_ref()],
                ..Submit::text("What does the file say?")
            },
        )
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();

    let requests = provider.requests();
    let sent = user_text(&requests[0]);
    assert!(sent.contains("What does the file say?"), "{sent}");
    assert!(sent.contains("the launch code is 42"), "{sent}");

    // The thread keeps the reference, not the content.
    let entries = store
        .read_all(&ThreadId::new(&*session.id).unwrap())
        .await
        .unwrap();
    let chat = entries
        .iter()
        .find(|e| *e.id == *submitted.message_id.as_str())
        .unwrap();
    let EntryBody::Chat(chat) = &chat.body else {
        panic!("{chat:?}")
    };
    assert_eq!(chat.files, vec![upload.file_ref()]);
    assert!(chat.parts.is_empty());
}

#[tokio::test]
async fn uploads_and_references_that_are_wrong_are_refused_and_store_nothing() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("unused")]));
    let Setup {
        engine,
        blobs,
        store,
    } = engine_with_blobs(&fx, provider.clone()).await;
    let host = Caller::Host;
    let session = engine.create(&host, fx.unverified()).await.unwrap();
    let id = SessionId::parse(&session.id).unwrap();

    // A "PNG" that is text.
    let err = engine
        .upload_attachment(
            &host,
            &session.id,
            None,
            "image/png",
            Bytes::from_static(b"hello"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SessionErrorKind::Invalid, "{err}");
    assert!(
        blobs
            .list(&id, &BlobPath::attachments())
            .await
            .unwrap()
            .is_empty(),
        "a refused upload stored something"
    );
    // A real PNG is taken.
    let png = engine
        .upload_attachment(
            &host,
            &session.id,
            None,
            "image/png",
            Bytes::from_static(PNG),
        )
        .await
        .unwrap();
    assert_eq!(png.reference.as_str(), "attachments/img_01.png");

    let thread = ThreadId::new(&*session.id).unwrap();
    let before = store.read_all(&thread).await.unwrap().len();
    for (reference, kind) in [
        ("attachments/file_07.txt", SessionErrorKind::Invalid),
        ("../session.json", SessionErrorKind::Invalid),
        ("/etc/passwd", SessionErrorKind::Invalid),
        ("attachments/../../x", SessionErrorKind::Invalid),
        ("artifacts/turn_1/log.txt", SessionErrorKind::Invalid),
    ] {
        let err = engine
            .submit(
                &host,
                &session.id,
                Submit {
                    files: vec![FileRef {
                        reference: reference.into(),
                        mime_type: "text/plain".into(),
                    }],
                    ..Submit::text("look")
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), kind, "{reference}: {err}");
    }
    assert_eq!(store.read_all(&thread).await.unwrap().len(), before);
    assert!(provider.requests().is_empty());

    // Another user cannot upload into the session.
    let err = engine
        .upload_attachment(
            &Caller::User("mallory".into()),
            &session.id,
            None,
            "text/plain",
            Bytes::from_static(b"x"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SessionErrorKind::NotFound, "{err}");

    // An engine without a blob store refuses files, saying why.
    let bare = support::engine(store.clone(), provider.clone(), &fx.data());
    let err = bare
        .upload_attachment(
            &host,
            &session.id,
            None,
            "text/plain",
            Bytes::from_static(b"x"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SessionErrorKind::Invalid, "{err}");
    assert!(err.to_string().contains("blob store"), "{err}");
}

#[tokio::test]
async fn a_commands_full_output_is_kept_as_an_artifact_of_its_turn() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([
        call(
            "c1",
            "shell",
            serde_json::json!({"command": "for i in $(seq 1 20000); do echo line $i; done"}),
        ),
        text("Done."),
    ]));
    let Setup { engine, blobs, .. } = engine_with_blobs(&fx, provider.clone()).await;
    let host = Caller::Host;
    let session = engine.create(&host, fx.unverified_ungated()).await.unwrap();
    let submitted = engine
        .submit(&host, &session.id, Submit::text("count"))
        .await
        .unwrap();
    engine.idle(&session.id).await.unwrap();

    let id = SessionId::parse(&session.id).unwrap();
    let turn = submitted.turn_id.unwrap();
    let folder = BlobPath::parse(&format!("artifacts/{turn}")).unwrap();
    let kept = blobs.list(&id, &folder).await.unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let log = blobs.get(&id, &kept[0].path).await.unwrap();
    let log = String::from_utf8(log).unwrap();
    assert!(log.starts_with("line 1\n") && log.ends_with("line 20000\n"));
    // The model was told where the whole output is.
    let requests = provider.requests();
    let result = format!("{:?}", requests[1].messages.last().unwrap());
    assert!(result.contains(kept[0].path.as_str()), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_uploads_at_once_each_get_their_own_name() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("unused")]));
    let Setup { engine, blobs, .. } = engine_with_blobs(&fx, provider).await;
    let session = engine.create(&Caller::Host, fx.unverified()).await.unwrap();
    let id = SessionId::parse(&session.id).unwrap();

    let uploads = (0..100).map(|i| {
        let (engine, session) = (engine.clone(), session.id.clone());
        tokio::spawn(async move {
            let bytes = Bytes::from(format!("upload number {i}\n"));
            let stored = engine
                .upload_attachment(&Caller::Host, &session, None, "text/plain", bytes.clone())
                .await;
            (stored, bytes)
        })
    });
    let mut names = std::collections::BTreeSet::new();
    for upload in futures::future::join_all(uploads).await {
        let (stored, sent) = upload.unwrap();
        let stored = stored.unwrap_or_else(|e| panic!("an upload failed: {e}"));
        assert!(
            names.insert(stored.reference.to_string()),
            "{} was handed out twice",
            stored.reference
        );
        let kept = blobs.get(&id, &stored.reference).await.unwrap();
        assert_eq!(kept, sent, "{} holds another upload", stored.reference);
    }
    assert_eq!(names.len(), 100);
    let listed = blobs.list(&id, &BlobPath::attachments()).await.unwrap();
    assert_eq!(listed.len(), 100);
}
