//! Attachments: every check of an upload's declared type against its bytes,
//! the size limit, the names uploads are stored under (never the client's),
//! and what a model is sent of each kind of file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use roundtable_providers::UserBlock;
use roundtable_sessions::attachments::{self, AttachmentLimits, resolve, resolve_bytes};
use roundtable_sessions::{
    AttachmentError, AttachmentRef, BlobPath, BlobStore, ErrorKind, FolderBlobStore, SessionError,
    SessionId,
};
use roundtable_thread_stream::FileRef;

/// The smallest files each magic-byte test recognises, with a tail.
fn png() -> Vec<u8> {
    [&b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..], &[7; 40]].concat()
}
fn jpeg() -> Vec<u8> {
    [&[0xFF, 0xD8, 0xFF, 0xE0][..], &[1; 40]].concat()
}
fn gif() -> Vec<u8> {
    [&b"GIF89a"[..], &[2; 40]].concat()
}
fn webp() -> Vec<u8> {
    [&b"RIFF\x24\0\0\0WEBPVP8 "[..], &[3; 40]].concat()
}
fn pdf() -> Vec<u8> {
    b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n1 0 obj\n".to_vec()
}
fn wav() -> Vec<u8> {
    [&b"RIFF\x24\0\0\0WAVEfmt "[..], &[0; 40]].concat()
}
fn mp3() -> Vec<u8> {
    [&[0xFF, 0xFB, 0x90, 0x64][..], &[0; 40]].concat()
}
fn mp3_tagged() -> Vec<u8> {
    [&b"ID3\x04\0\0\0\0\0\x0a"[..], &[0; 20]].concat()
}
fn ogg() -> Vec<u8> {
    [&b"OggS\0\x02"[..], &[0; 40]].concat()
}
fn zip() -> Vec<u8> {
    [&b"PK\x03\x04\x14\0"[..], &[0; 40]].concat()
}
/// Binary data no test recognises, and that is not UTF-8.
fn unknown() -> Vec<u8> {
    vec![0x00, 0x9F, 0x92, 0x96, 0xFE, 0x01, 0x02]
}

struct Fixture {
    dir: tempfile::TempDir,
    blobs: Arc<dyn BlobStore>,
    session: SessionId,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let blobs: Arc<dyn BlobStore> = Arc::new(FolderBlobStore::new(dir.path().join("sessions")));
    Fixture {
        dir,
        blobs,
        session: SessionId::generate(),
    }
}

impl Fixture {
    async fn upload(
        &self,
        filename: Option<&str>,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<AttachmentRef, SessionError> {
        self.upload_with(filename, mime, bytes, &AttachmentLimits::default())
            .await
    }

    async fn upload_with(
        &self,
        filename: Option<&str>,
        mime: &str,
        bytes: Vec<u8>,
        limits: &AttachmentLimits,
    ) -> Result<AttachmentRef, SessionError> {
        attachments::upload(
            self.blobs.as_ref(),
            &self.session,
            filename,
            mime,
            Bytes::from(bytes),
            limits,
        )
        .await
    }

    async fn stored(&self) -> Vec<String> {
        self.blobs
            .list(&self.session, &BlobPath::attachments())
            .await
            .unwrap()
            .into_iter()
            .map(|b| b.path.to_string())
            .collect()
    }
}

#[tokio::test]
async fn every_type_is_accepted_when_the_content_matches() {
    let f = fixture();
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        ("image/png", png(), "attachments/img_01.png", "image/png"),
        ("image/jpeg", jpeg(), "attachments/img_02.jpg", "image/jpeg"),
        ("image/jpg", jpeg(), "attachments/img_03.jpg", "image/jpeg"),
        ("image/gif", gif(), "attachments/img_04.gif", "image/gif"),
        (
            "IMAGE/WEBP",
            webp(),
            "attachments/img_05.webp",
            "image/webp",
        ),
        (
            "application/pdf",
            pdf(),
            "attachments/file_01.pdf",
            "application/pdf",
        ),
        ("audio/wav", wav(), "attachments/audio_01.wav", "audio/wav"),
        (
            "audio/x-wav",
            wav(),
            "attachments/audio_02.wav",
            "audio/wav",
        ),
        (
            "audio/mpeg",
            mp3(),
            "attachments/audio_03.mp3",
            "audio/mpeg",
        ),
        (
            "audio/mp3",
            mp3_tagged(),
            "attachments/audio_04.mp3",
            "audio/mpeg",
        ),
        ("audio/ogg", ogg(), "attachments/audio_05.ogg", "audio/ogg"),
        (
            "application/zip",
            zip(),
            "attachments/file_02.zip",
            "application/zip",
        ),
        (
            "text/plain; charset=utf-8",
            "héllo\n".into(),
            "attachments/file_03.txt",
            "text/plain",
        ),
        (
            "text/markdown",
            b"# T\n".to_vec(),
            "attachments/file_04.md",
            "text/markdown",
        ),
        (
            "text/csv",
            b"a,b\n".to_vec(),
            "attachments/file_05.csv",
            "text/csv",
        ),
        (
            "text/x-log",
            b"line\n".to_vec(),
            "attachments/file_06.txt",
            "text/x-log",
        ),
        (
            "application/json",
            br#"{"a":[1,2]}"#.to_vec(),
            "attachments/file_07.json",
            "application/json",
        ),
        // "Whatever it is": the bytes decide.
        (
            "application/octet-stream",
            png(),
            "attachments/img_06.png",
            "image/png",
        ),
        (
            "application/octet-stream",
            b"plain".to_vec(),
            "attachments/file_08.txt",
            "text/plain",
        ),
        (
            "application/octet-stream",
            unknown(),
            "attachments/file_09.bin",
            "application/octet-stream",
        ),
    ];
    for (declared, bytes, reference, mime) in cases {
        let size = bytes.len() as u64;
        let stored = f.upload(None, declared, bytes.clone()).await.unwrap();
        assert_eq!(stored.reference.as_str(), reference, "{declared}");
        assert_eq!(stored.mime_type, mime, "{declared}");
        assert_eq!(stored.size, size);
        assert_eq!(
            f.blobs.get(&f.session, &stored.reference).await.unwrap(),
            bytes
        );
        let file_ref = stored.file_ref();
        assert_eq!(
            (&*file_ref.reference, &*file_ref.mime_type),
            (reference, mime)
        );
    }
    let json =
        serde_json::to_value(f.upload(Some("x.png"), "image/png", png()).await.unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "ref": "attachments/img_07.png",
            "mime_type": "image/png",
            "size": png().len(),
            "filename": "x.png"
        })
    );
}

#[tokio::test]
async fn content_that_is_not_what_was_declared_is_refused_naming_both() {
    let f = fixture();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("image/jpeg", png(), "image/png"),
        ("image/png", jpeg(), "image/jpeg"),
        ("image/png", b"just text".to_vec(), "UTF-8 text"),
        ("image/gif", unknown(), "unrecognised binary data"),
        ("audio/wav", webp(), "image/webp"),
        ("image/webp", wav(), "audio/wav"),
        ("application/pdf", zip(), "application/zip"),
        ("audio/ogg", mp3(), "audio/mpeg"),
        ("application/zip", pdf(), "application/pdf"),
        // Text that is not UTF-8, or holds a NUL; binary declared as text.
        (
            "text/plain",
            b"caf\xE9".to_vec(),
            "unrecognised binary data",
        ),
        ("text/plain", b"a\0b".to_vec(), "unrecognised binary data"),
        ("text/plain", unknown(), "unrecognised binary data"),
        ("text/plain", png(), "image/png"),
        ("text/csv", mp3(), "audio/mpeg"),
        (
            "application/json",
            b"{not json".to_vec(),
            "UTF-8 text that is not valid JSON",
        ),
        ("application/json", jpeg(), "image/jpeg"),
    ];
    for (declared, bytes, detected) in cases {
        let err = f.upload(None, declared, bytes).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid, "{declared}: {err}");
        let SessionError::Attachment(AttachmentError::Mismatch {
            declared: d,
            detected: got,
        }) = &err
        else {
            panic!("{declared}: {err:?}");
        };
        assert_eq!((d.as_str(), *got), (declared, detected));
        let message = err.to_string();
        assert!(
            message.contains(declared) && message.contains(detected),
            "{message}"
        );
    }
    assert!(f.stored().await.is_empty(), "nothing refused is stored");
}

#[tokio::test]
async fn unknown_types_bad_mime_types_and_empty_files_are_refused() {
    let f = fixture();
    for declared in ["video/mp4", "image/svg+xml", "application/x-msdownload"] {
        let err = f.upload(None, declared, png()).await.unwrap_err();
        assert!(
            matches!(
                &err,
                SessionError::Attachment(AttachmentError::UnsupportedType { declared: d }) if d == declared
            ),
            "{declared}: {err:?}"
        );
        assert_eq!(err.kind(), ErrorKind::Invalid);
    }
    for declared in ["", "png", "image/", "image/png/x", "a b/c"] {
        let err = f.upload(None, declared, png()).await.unwrap_err();
        assert!(
            matches!(
                err,
                SessionError::Attachment(AttachmentError::InvalidMimeType { .. })
            ),
            "{declared:?}: {err:?}"
        );
    }
    let err = f.upload(None, "text/plain", Vec::new()).await.unwrap_err();
    assert!(
        matches!(err, SessionError::Attachment(AttachmentError::Empty)),
        "{err:?}"
    );
    assert!(f.stored().await.is_empty());
}

#[tokio::test]
async fn the_size_limit_is_enforced_before_anything_is_stored() {
    let f = fixture();
    let limits = AttachmentLimits {
        max_upload_bytes: 64,
        ..AttachmentLimits::default()
    };
    let at_limit = vec![b'x'; 64];
    let over = vec![b'x'; 65];
    f.upload_with(None, "text/plain", at_limit, &limits)
        .await
        .unwrap();
    let err = f
        .upload_with(None, "text/plain", over, &limits)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert!(
        matches!(
            err,
            SessionError::Attachment(AttachmentError::TooLarge {
                size: 65,
                limit: 64
            })
        ),
        "{err:?}"
    );
    assert_eq!(
        AttachmentLimits::default().max_upload_bytes,
        10 * 1024 * 1024
    );
    let err = f
        .upload(
            None,
            "application/octet-stream",
            vec![0; 10 * 1024 * 1024 + 1],
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TooLarge);
    assert_eq!(f.stored().await, ["attachments/file_01.txt"]);
}

#[tokio::test]
async fn names_come_from_the_store_never_from_the_client() {
    let f = fixture();
    for filename in [
        "../../etc/passwd",
        "a/b.png",
        "/etc/shadow",
        "..",
        "x/../../y.png",
        "C:\\Windows\\evil.png",
        "img_01.png",
        ".hidden",
        "name\nwith\0controls.png",
    ] {
        let stored = f.upload(Some(filename), "image/png", png()).await.unwrap();
        assert!(
            stored.reference.as_str().starts_with("attachments/img_"),
            "{filename:?} → {}",
            stored.reference
        );
        if let Some(shown) = &stored.filename {
            assert!(!shown.contains(['/', '\\', '\n', '\0']), "{shown:?}");
        }
    }
    assert_eq!(
        f.stored().await,
        (1..=9)
            .map(|n| format!("attachments/img_{n:02}.png"))
            .collect::<Vec<_>>()
    );
    // Nothing was written anywhere but the session's attachments.
    let mut everything = Vec::new();
    let mut stack = vec![f.dir.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                everything.push(path);
            }
        }
    }
    let attachments = f
        .dir
        .path()
        .join("sessions")
        .join(f.session.as_str())
        .join("attachments");
    assert_eq!(everything.len(), 9);
    assert!(
        everything
            .iter()
            .all(|p| p.parent() == Some(attachments.as_path()))
    );
}

#[tokio::test]
async fn numbers_continue_per_kind_from_what_is_stored() {
    let f = fixture();
    // A file stored earlier under a higher number, and names that are not
    // generated ones.
    for name in ["img_07.png", "img_x.png", "notes.txt"] {
        f.blobs
            .put_new(
                &f.session,
                &BlobPath::attachments().join(name).unwrap(),
                Bytes::from(png()),
            )
            .await
            .unwrap();
    }
    let image = f.upload(None, "image/gif", gif()).await.unwrap();
    let audio = f.upload(None, "audio/wav", wav()).await.unwrap();
    let text = f.upload(None, "text/plain", b"t".to_vec()).await.unwrap();
    assert_eq!(image.reference.as_str(), "attachments/img_08.gif");
    assert_eq!(audio.reference.as_str(), "attachments/audio_01.wav");
    assert_eq!(text.reference.as_str(), "attachments/file_01.txt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_uploads_each_get_their_own_name() {
    let f = Arc::new(fixture());
    let uploads: Vec<_> = (0..8u8)
        .map(|i| {
            let f = f.clone();
            tokio::spawn(async move {
                let mut bytes = png();
                bytes.push(i);
                (
                    f.upload(None, "image/png", bytes.clone()).await.unwrap(),
                    bytes,
                )
            })
        })
        .collect();
    let mut names = Vec::new();
    for upload in uploads {
        let (stored, bytes) = upload.await.unwrap();
        assert_eq!(
            f.blobs.get(&f.session, &stored.reference).await.unwrap(),
            bytes
        );
        names.push(stored.reference.to_string());
    }
    names.sort();
    let expected: Vec<String> = (1..=8)
        .map(|n| format!("attachments/img_{n:02}.png"))
        .collect();
    assert_eq!(names, expected);
}

fn text_of(block: &UserBlock) -> &str {
    match block {
        UserBlock::Text(text) => &text.text,
        other => panic!("not text: {other:?}"),
    }
}

#[tokio::test]
async fn images_are_shown_to_models_that_take_them_and_named_otherwise() {
    let f = fixture();
    let stored = f.upload(None, "image/png", png()).await.unwrap();
    let limits = AttachmentLimits::default();
    let blocks = resolve(
        f.blobs.as_ref(),
        &f.session,
        &stored.file_ref(),
        true,
        &limits,
    )
    .await
    .unwrap();
    let [label, UserBlock::Image(image)] = blocks.as_slice() else {
        panic!("{blocks:?}");
    };
    let size = png().len();
    assert_eq!(
        text_of(label),
        format!("[attachment attachments/img_01.png: image/png, {size} bytes]")
    );
    assert_eq!(&*image.mime_type, "image/png");
    assert_eq!(STANDARD.decode(&*image.data).unwrap(), png());

    let blocks = resolve(
        f.blobs.as_ref(),
        &f.session,
        &stored.file_ref(),
        false,
        &limits,
    )
    .await
    .unwrap();
    let [note] = blocks.as_slice() else {
        panic!("{blocks:?}");
    };
    assert_eq!(
        text_of(note),
        format!(
            "[attachment attachments/img_01.png: image/png, {size} bytes; \
             not shown: this model does not take images]"
        )
    );

    let small = AttachmentLimits {
        max_image_bytes: 10,
        ..limits
    };
    let path = stored.reference.clone();
    let blocks = resolve_bytes(&path, "image/png", &png(), true, &small);
    let [note] = blocks.as_slice() else {
        panic!("{blocks:?}");
    };
    assert!(
        text_of(note).contains("not shown: larger than the 10 bytes an image may have"),
        "{}",
        text_of(note)
    );
}

#[test]
fn text_is_inlined_and_cut_at_the_limit_with_a_marker() {
    let path = BlobPath::parse("attachments/file_01.md").unwrap();
    let limits = AttachmentLimits {
        max_inline_text_bytes: 6,
        ..AttachmentLimits::default()
    };
    let whole = resolve_bytes(&path, "text/markdown", "# hi\n".as_bytes(), true, &limits);
    assert_eq!(
        text_of(&whole[0]),
        "[attachment attachments/file_01.md: text/markdown, 5 bytes]\n# hi\n"
    );
    // "añoño" is 7 bytes; the cut falls inside the last "ñ".
    let cut = resolve_bytes(&path, "text/markdown", "añoño".as_bytes(), true, &limits);
    assert_eq!(cut.len(), 1);
    assert_eq!(
        text_of(&cut[0]),
        "[attachment attachments/file_01.md: text/markdown, 7 bytes]\nañoñ\n\
         [cut: the first 6 of 7 bytes shown; the whole file is attachments/file_01.md]"
    );
    let json = BlobPath::parse("attachments/file_02.json").unwrap();
    let blocks = resolve_bytes(&json, "application/json", b"{}", false, &limits);
    assert_eq!(
        text_of(&blocks[0]),
        "[attachment attachments/file_02.json: application/json, 2 bytes]\n{}"
    );
}

#[test]
fn audio_and_other_files_are_named_with_their_type_and_size() {
    let path = BlobPath::parse("attachments/audio_01.wav").unwrap();
    let limits = AttachmentLimits::default();
    for (bytes, mime) in [
        (wav(), "audio/wav"),
        (mp3(), "audio/mpeg"),
        (ogg(), "audio/ogg"),
        (pdf(), "application/pdf"),
        (zip(), "application/zip"),
        (unknown(), "application/octet-stream"),
    ] {
        let blocks = resolve_bytes(&path, mime, &bytes, true, &limits);
        let [note] = blocks.as_slice() else {
            panic!("{blocks:?}");
        };
        assert_eq!(
            text_of(note),
            format!(
                "[attachment attachments/audio_01.wav: {mime}, {} bytes; its content is not shown]",
                bytes.len()
            )
        );
    }
}

#[test]
fn the_type_a_model_is_sent_comes_from_the_bytes_not_the_message() {
    let path = BlobPath::parse("attachments/file_01.txt").unwrap();
    let limits = AttachmentLimits::default();
    // Text referred to as an image stays text.
    let blocks = resolve_bytes(&path, "image/png", b"not an image", true, &limits);
    assert_eq!(
        text_of(&blocks[0]),
        "[attachment attachments/file_01.txt: text/plain, 12 bytes]\nnot an image"
    );
    // A JPEG referred to as a PNG is sent as a JPEG.
    let blocks = resolve_bytes(&path, "image/png", &jpeg(), true, &limits);
    let [_, UserBlock::Image(image)] = blocks.as_slice() else {
        panic!("{blocks:?}");
    };
    assert_eq!(&*image.mime_type, "image/jpeg");
}

#[tokio::test]
async fn references_that_are_bad_or_missing_are_typed_errors() {
    let f = fixture();
    let limits = AttachmentLimits::default();
    let reference = |r: &str| FileRef {
        reference: r.into(),
        mime_type: "image/png".into(),
    };
    for bad in [
        "../../etc/passwd",
        "/etc/passwd",
        "attachments/../x",
        "session.json",
    ] {
        let err = resolve(f.blobs.as_ref(), &f.session, &reference(bad), true, &limits)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Invalid, "{bad}: {err}");
    }
    let err = resolve(
        f.blobs.as_ref(),
        &f.session,
        &reference("attachments/img_01.png"),
        true,
        &limits,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    // Another session's attachment is not this session's.
    let other = SessionId::generate();
    let stored = attachments::upload(
        f.blobs.as_ref(),
        &other,
        None,
        "image/png",
        Bytes::from(png()),
        &limits,
    )
    .await
    .unwrap();
    let err = resolve(
        f.blobs.as_ref(),
        &f.session,
        &stored.file_ref(),
        true,
        &limits,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}
