//! Uploads over HTTP: `POST /v1/sessions/{id}/attachments` as JSON with
//! base64 and as multipart, checked by the engine (types against content,
//! sizes), stored in the session's folder under the engine's names, and
//! messages that refer to them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use base64::Engine;
use reqwest::{Method, StatusCode};
use roundtable_providers::{Message as ModelMessage, ScriptedProvider};
use roundtable_sessions::AttachmentLimits;
use serde_json::{Value, json};
use support::*;

/// The first bytes of a PNG: enough for the content check.
const PNG: &[u8] = &[
    0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, b'I', b'H', b'D', b'R',
];

const BOUNDARY: &str = "roundtable-test-boundary";

/// A part of a multipart body: name, file name, type, content.
type Part<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// A `multipart/form-data` body, written out as a browser writes it.
fn multipart(parts: &[Part<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, filename, mime_type, content) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let mut disposition = format!("Content-Disposition: form-data; name=\"{name}\"");
        if let Some(filename) = filename {
            disposition.push_str(&format!("; filename=\"{filename}\""));
        }
        body.extend_from_slice(format!("{disposition}\r\n").as_bytes());
        if let Some(mime_type) = mime_type {
            body.extend_from_slice(format!("Content-Type: {mime_type}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

async fn upload_multipart(
    server: &TestServer,
    session: &str,
    parts: &[Part<'_>],
) -> (StatusCode, Value) {
    send(
        server
            .request(Method::POST, &format!("/v1/sessions/{session}/attachments"))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(multipart(parts)),
    )
    .await
}

async fn upload_json(
    server: &TestServer,
    session: &str,
    filename: Option<&str>,
    mime_type: &str,
    content: &[u8],
) -> (StatusCode, Value) {
    let data = base64::engine::general_purpose::STANDARD.encode(content);
    server
        .post(
            &format!("/v1/sessions/{session}/attachments"),
            json!({"filename": filename, "mime_type": mime_type, "data_base64": data}),
        )
        .await
}

/// The names of the files in the session's attachments folder.
fn stored(fx: &Fixture, session: &str) -> Vec<String> {
    let folder = fx.data().join(session).join("attachments");
    let mut names: Vec<String> = match std::fs::read_dir(&folder) {
        Ok(dir) => dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_uploads_as_json_or_multipart_and_lands_in_the_session_folder() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let session = server.create(fx.open_session()).await;

    let (status, image) = upload_json(&server, &session, Some("shot.png"), "image/png", PNG).await;
    assert_eq!(status, StatusCode::CREATED, "{image}");
    assert_eq!(
        image,
        json!({"ref": "attachments/img_01.png", "mime_type": "image/png", "size": PNG.len(), "filename": "shot.png"})
    );

    // Multipart: the part's own name and type.
    let log = b"line one\nline two\n";
    let (status, text) = upload_multipart(
        &server,
        &session,
        &[("file", Some("../build.log"), Some("text/plain"), log)],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{text}");
    assert_eq!(text["ref"], "attachments/file_01.txt");
    assert_eq!(text["mime_type"], "text/plain");
    assert_eq!(text["size"], log.len());
    // The client's name is for display; it never reaches a path.
    assert_eq!(text["filename"], "build.log");

    // Multipart with the type and name in parts of their own (a client
    // that cannot type a part), before or after the file.
    let (status, second) = upload_multipart(
        &server,
        &session,
        &[
            ("mime_type", None, None, b"image/png"),
            ("file", Some("blob"), Some("application/octet-stream"), PNG),
            ("filename", None, None, b"again.png"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    assert_eq!(second["ref"], "attachments/img_02.png");
    assert_eq!(second["filename"], "again.png");

    assert_eq!(
        stored(&fx, &session),
        ["file_01.txt", "img_01.png", "img_02.png"]
    );
    let on_disk = std::fs::read(fx.data().join(&session).join("attachments/img_01.png")).unwrap();
    assert_eq!(on_disk, PNG);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_referring_to_an_upload_is_answered_by_a_turn_that_read_it() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("It says 42.")]));
    let server = TestServer::start(fx.engine(fx.store().await, provider.clone())).await;
    let session = server.create(fx.open_session()).await;
    let (status, upload) = upload_multipart(
        &server,
        &session,
        &[(
            "file",
            Some("notes.txt"),
            Some("text/plain"),
            b"the launch code is 42\n",
        )],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{upload}");

    let mut events = server.events(&session, None).await;
    let (status, sent) = server
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"role": "user", "parts": [
                {"type": "text", "text": "What does the file say?"},
                {"type": "file", "ref": upload["ref"], "mime_type": "text/plain"},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{sent}");
    let seen = events.until("session_completed").await;
    let added = seen.iter().find(|m| m.kind() == "message_added").unwrap();
    assert_eq!(
        added.data["data"]["parts"],
        json!([
            {"type": "text", "text": "What does the file say?"},
            {"type": "file", "ref": "attachments/file_01.txt", "mime_type": "text/plain"},
        ])
    );
    let answer = seen
        .iter()
        .find(|m| m.kind() == "model_output_completed")
        .unwrap();
    assert_eq!(answer.data["turn_id"], sent["turn_id"]);

    // The model was sent the file's content with the message.
    let requests = provider.requests();
    let Some(ModelMessage::User(user)) = requests[0].messages.last() else {
        panic!("{:?}", requests[0].messages);
    };
    let shown = user.content.to_text();
    assert!(shown.contains("What does the file say?"), "{shown}");
    assert!(shown.contains("the launch code is 42"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_uploads_and_references_are_refused_and_store_nothing() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let session = server.create(fx.open_session()).await;
    let uploads = format!("/v1/sessions/{session}/attachments");

    // A type that does not match the content, over both encodings: the
    // engine's Invalid kind, 422.
    let text_as_png = upload_json(&server, &session, None, "image/png", b"not an image").await;
    assert_error(
        &text_as_png,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    let png_as_text = upload_multipart(
        &server,
        &session,
        &[(
            "file",
            Some("a.txt"),
            Some("text/plain"),
            &[0xff, 0xfe, 0x00],
        )],
    )
    .await;
    assert_error(
        &png_as_text,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    // What cannot be read as an upload.
    let not_base64 = server
        .post(
            &uploads,
            json!({"mime_type": "text/plain", "data_base64": "%%%"}),
        )
        .await;
    assert_error(
        &not_base64,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    let no_type = server.post(&uploads, json!({"data_base64": "aGk="})).await;
    assert_error(&no_type, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    let no_file = upload_multipart(
        &server,
        &session,
        &[("mime_type", None, None, b"text/plain")],
    )
    .await;
    assert_error(&no_file, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    let untyped = upload_multipart(&server, &session, &[("file", Some("a"), None, b"hi")]).await;
    assert_error(&untyped, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    let two_files = upload_multipart(
        &server,
        &session,
        &[
            ("file", Some("a.txt"), Some("text/plain"), b"a"),
            ("file", Some("b.txt"), Some("text/plain"), b"b"),
        ],
    )
    .await;
    assert_error(
        &two_files,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    let stray = upload_multipart(
        &server,
        &session,
        &[
            ("file", Some("a.txt"), Some("text/plain"), b"a"),
            ("path", None, None, b"/etc/passwd"),
        ],
    )
    .await;
    assert_error(&stray, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    let plain = send(
        server
            .request(Method::POST, &uploads)
            .header("content-type", "text/plain")
            .body("hello"),
    )
    .await;
    assert_error(
        &plain,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let broken = send(
        server
            .request(Method::POST, &uploads)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .body(format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ncut"
            )),
    )
    .await;
    assert_error(&broken, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(stored(&fx, &session), Vec::<String>::new());

    // Another user's session is not found, and gets nothing.
    let as_bob = send(
        server
            .http
            .post(server.url(&uploads))
            .bearer_auth(BOB_TOKEN)
            .json(&json!({"mime_type": "text/plain", "data_base64": "aGk="})),
    )
    .await;
    assert_error(&as_bob, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(stored(&fx, &session), Vec::<String>::new());

    // Messages naming files that are not uploads of the session: a file
    // never uploaded, paths out of the session's folder, the session's own
    // files that are not attachments, another session's upload.
    let other = server.create(fx.open_session()).await;
    let (status, theirs) = upload_json(&server, &other, None, "text/plain", b"other").await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    let before = server
        .engine
        .events(&Caller::Host, &session, None)
        .await
        .unwrap()
        .len();
    for reference in [
        "attachments/file_09.txt",
        "../other/attachments/file_01.txt",
        "/etc/passwd",
        "attachments/../session.json",
        "session.json",
        "artifacts/turn_x/shell.log",
    ] {
        let answer = server
            .post(
                &format!("/v1/sessions/{session}/messages"),
                json!({"role": "user", "parts": [
                    {"type": "text", "text": "read this"},
                    {"type": "file", "ref": reference, "mime_type": "text/plain"},
                ]}),
            )
            .await;
        assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    }
    // `attachments/file_01.txt` exists in the other session only.
    let answer = server
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"role": "user", "parts": [
                {"type": "file", "ref": theirs["ref"], "mime_type": "text/plain"},
            ]}),
        )
        .await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    let after = server
        .engine
        .events(&Caller::Host, &session, None)
        .await
        .unwrap()
        .len();
    assert_eq!(after, before, "a refused message stored something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_upload_is_413_from_the_route_or_from_the_engine() {
    let fx = Fixture::new();
    let engine = fx
        .engine_builder(fx.store().await, silent())
        .attachment_limits(AttachmentLimits {
            max_upload_bytes: 64 * 1024,
            ..AttachmentLimits::default()
        })
        .build();
    let server = TestServer::start_with(
        engine,
        Options {
            attachment_body_limit: Some(256 * 1024),
            ..Options::default()
        },
    )
    .await;
    let session = server.create(fx.open_session()).await;

    // Within the route's limit, over the engine's.
    let big = vec![b'a'; 100 * 1024];
    let over_engine = upload_multipart(
        &server,
        &session,
        &[("file", Some("big.txt"), Some("text/plain"), &big)],
    )
    .await;
    assert_error(&over_engine, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    // Over the route's limit, both encodings.
    let huge = vec![b'a'; 300 * 1024];
    let over_route = upload_multipart(
        &server,
        &session,
        &[("file", Some("huge.txt"), Some("text/plain"), &huge)],
    )
    .await;
    assert_error(&over_route, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let over_route = upload_json(&server, &session, None, "text/plain", &huge).await;
    assert_error(&over_route, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    assert_eq!(stored(&fx, &session), Vec::<String>::new());

    // The other routes keep their small limits: a message is not an upload.
    let long = "x".repeat(2 * 1024 * 1024);
    let answer = server
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"role": "user", "parts": [{"type": "text", "text": long}]}),
        )
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "too_large");

    // Just under the engine's limit is taken.
    let fits = vec![b'a'; 64 * 1024];
    let (status, taken) = upload_json(&server, &session, None, "text/plain", &fits).await;
    assert_eq!(status, StatusCode::CREATED, "{taken}");
    assert_eq!(stored(&fx, &session), ["file_01.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upload_route_is_sized_from_the_engines_limit() {
    let fx = Fixture::new();
    // Above the old fixed route limit of 14 MiB once in base64.
    let max = 11 * 1024 * 1024;
    let engine = fx
        .engine_builder(fx.store().await, silent())
        .attachment_limits(AttachmentLimits {
            max_upload_bytes: max,
            ..AttachmentLimits::default()
        })
        .build();
    let server = TestServer::start(engine).await;
    let session = server.create(fx.open_session()).await;

    // A file at the engine's limit fits in base64 JSON and in multipart.
    let at_limit = vec![b'a'; max];
    let (status, body) =
        upload_json(&server, &session, Some("big.txt"), "text/plain", &at_limit).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = upload_multipart(
        &server,
        &session,
        &[("file", Some("big2.txt"), Some("text/plain"), &at_limit)],
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // One byte more is the engine's refusal (the route let it through).
    let over = vec![b'a'; max + 1];
    let refused = upload_json(&server, &session, Some("over.txt"), "text/plain", &over).await;
    assert_error(&refused, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    assert_eq!(stored(&fx, &session).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_in_the_attachments_is_a_bad_reference_naming_no_server_path() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let session = server.create(fx.open_session()).await;
    let (status, upload) = upload_json(&server, &session, None, "text/plain", b"mine").await;
    assert_eq!(status, StatusCode::CREATED, "{upload}");
    let secret = fx.dir.path().join("secret.txt");
    std::fs::write(&secret, "not for the model").unwrap();
    let attachments = fx.data().join(&session).join("attachments");
    std::os::unix::fs::symlink(&secret, attachments.join("file_99.txt")).unwrap();

    let (status, body) = server
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"role": "user", "parts": [
                {"type": "file", "ref": "attachments/file_99.txt", "mime_type": "text/plain"},
            ]}),
        )
        .await;
    assert_error(
        &(status, body.clone()),
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("attachments/file_99.txt"), "{body}");
    assert!(
        !message.contains(&*fx.dir.path().to_string_lossy()),
        "{body}"
    );
}
