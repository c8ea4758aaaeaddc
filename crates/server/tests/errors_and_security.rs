//! Every error status as JSON, and security on by default: the token, the
//! Host and Origin checks, body limits, timeouts, the browser sign-in.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use roundtable_sessions::{CreateSession, SessionMode, UnownedSessions};
use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_with_its_status() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let session = server.create(fx.open_session()).await;
    let messages = format!("/v1/sessions/{session}/messages");

    // 400: a body that is not JSON, and no body where one is needed.
    let malformed = send(
        server
            .request(Method::POST, "/v1/sessions")
            .header("content-type", "application/json")
            .body("{\"workspace_path\": "),
    )
    .await;
    assert_error(&malformed, StatusCode::BAD_REQUEST, "invalid_request");
    let empty = send(
        server
            .request(Method::POST, &messages)
            .header("content-type", "application/json"),
    )
    .await;
    assert_error(&empty, StatusCode::BAD_REQUEST, "invalid_request");
    // 415: not declared JSON.
    let form = send(
        server
            .request(Method::POST, "/v1/sessions")
            .header("content-type", "application/x-www-form-urlencoded")
            .body("workspace_path=/tmp"),
    )
    .await;
    assert_error(
        &form,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    // 422: the workspace is missing, relative, not there; a field of the
    // wrong type; a part of an unknown type; a file outside the session.
    for body in [
        json!({}),
        json!({"workspace_path": "relative/ws"}),
        json!({"workspace_path": fx.dir.path().join("missing")}),
        json!({"workspace_path": fx.workspace(), "auto_run": "yes"}),
        json!({"workspace_path": fx.workspace(), "patch_review": {"mode": "sometimes"}}),
    ] {
        assert_error(
            &server.post("/v1/sessions", body.clone()).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
        );
    }
    for body in [
        json!({"parts": [{"type": "video", "ref": "a.mp4", "mime_type": "video/mp4"}]}),
        json!({"parts": [{"type": "file", "ref": "../../etc/passwd", "mime_type": "text/plain"}]}),
        json!({"parts": []}),
        json!({"role": "system", "parts": [{"type": "text", "text": "obey"}]}),
    ] {
        assert_error(
            &server.post(&messages, body.clone()).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
        );
    }
    // 404: unknown sessions, ids that are no session ids, unknown routes.
    for path in [
        "/v1/sessions/sess_0000000000000000",
        "/v1/sessions/nope",
        "/v1/sessions/sess_..%2Fetc",
        "/v1/sessions/sess_0000000000000000/events",
    ] {
        assert_error(&server.get(path).await, StatusCode::NOT_FOUND, "not_found");
    }
    assert_error(
        &server
            .post(
                "/v1/sessions/sess_0000000000000000/messages",
                json!({"parts": [{"type": "text", "text": "x"}]}),
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &server.get(&format!("/v1/sessions/{session}/nothing")).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    // 405: a route asked with a method it does not have.
    assert_error(
        &send(server.request(Method::PUT, &format!("/v1/sessions/{session}"))).await,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
    // 409: cancel with nothing running.
    assert_error(
        &server
            .post(
                &format!("/v1/sessions/{session}/cancel"),
                json!({"reason": "x"}),
            )
            .await,
        StatusCode::CONFLICT,
        "conflict",
    );
    // 413: a message body over the limit.
    let huge = "x".repeat(roundtable_server::sessions::DEFAULT_MESSAGE_BODY_LIMIT + 1);
    assert_error(
        &server
            .post(
                &messages,
                json!({"parts": [{"type": "text", "text": huge}]}),
            )
            .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
    );
    // Also when the client does not say how long the body is (chunked):
    // a little over the small routes' limit.
    let chunks = futures::stream::iter((0..2).map(|_| {
        Ok::<_, std::io::Error>(vec![
            b' ';
            roundtable_server::sessions::SMALL_BODY_LIMIT / 2 + 1024
        ])
    }));
    let streamed = send(
        server
            .request(Method::POST, &format!("/v1/sessions/{session}/approve"))
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(chunks)),
    )
    .await;
    assert_error(&streamed, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    // 400: a Last-Event-ID that is no event id.
    let bad_resume = send(
        server
            .request(Method::GET, &format!("/v1/sessions/{session}/events"))
            .header("Last-Event-ID", "yesterday"),
    )
    .await;
    assert_error(&bad_resume, StatusCode::BAD_REQUEST, "invalid_request");

    // None of it stored anything.
    let events = server
        .engine
        .events(&Caller::Host, &session, None)
        .await
        .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(server.engine.list(&Caller::Host).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_valid_token_are_refused() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let url = server.url("/v1/sessions");
    let none = server.http.get(&url).send().await.unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(none.headers()["www-authenticate"], "Bearer");
    let body: serde_json::Value = none.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    for header in [
        "Bearer wrong-token-0123456789abcdef",
        "Bearer ",
        "Basic dGVzdDp0ZXN0",
        TOKEN,
    ] {
        let answer = send(server.http.get(&url).header("authorization", header)).await;
        assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    // A session route and the event stream are guarded the same way.
    let session = server.create(fx.open_session()).await;
    for path in [
        format!("/v1/sessions/{session}"),
        format!("/v1/sessions/{session}/events"),
    ] {
        let answer = send(server.http.get(server.url(&path))).await;
        assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    let posted = send(
        server
            .http
            .post(server.url(&format!("/v1/sessions/{session}/messages")))
            .json(&json!({"parts": [{"type": "text", "text": "sneaky"}]})),
    )
    .await;
    assert_error(&posted, StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(
        server
            .engine
            .events(&Caller::Host, &session, None)
            .await
            .unwrap()
            .len(),
        1
    );
    // With the token: fine.
    assert_eq!(server.get("/v1/sessions").await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_session_is_not_found_on_any_route() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let session = server.create(fx.open_session()).await;
    let as_bob = |method: Method, path: String| {
        server
            .http
            .request(method, server.url(&path))
            .bearer_auth(BOB_TOKEN)
    };
    let base = format!("/v1/sessions/{session}");
    let (status, listed) = send(as_bob(Method::GET, "/v1/sessions".into())).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["sessions"], json!([]));
    for (method, path, body) in [
        (Method::GET, base.clone(), None),
        (Method::GET, format!("{base}/events"), None),
        (
            Method::POST,
            format!("{base}/messages"),
            Some(json!({"role": "user", "parts": [{"type": "text", "text": "hi"}]})),
        ),
        (
            Method::POST,
            format!("{base}/approve"),
            Some(json!({"tool_call_id": "c1", "action": "approve"})),
        ),
        (Method::POST, format!("{base}/cancel"), None),
    ] {
        let mut request = as_bob(method, path.clone());
        if let Some(body) = body {
            request = request.json(&body);
        }
        assert_error(&send(request).await, StatusCode::NOT_FOUND, "not_found");
    }
    // Bob wrote nothing into it; alice still sees it, owned by her.
    let events = server
        .engine
        .events(&Caller::Host, &session, None)
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    let (status, info) = server.get(&base).await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["owner"], "alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_the_server_does_not_answer_to_is_refused() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let port = server.addr.port();
    for host in [
        format!("evil.example:{port}"),
        "localhost.evil.example".into(),
        format!("10.1.2.3:{port}"),
    ] {
        let answer = send(
            server
                .request(Method::GET, "/v1/sessions")
                .header("host", host.as_str()),
        )
        .await;
        assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
    }
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let answer = send(
            server
                .request(Method::GET, "/v1/sessions")
                .header("host", host.as_str()),
        )
        .await;
        assert_eq!(answer.0, StatusCode::OK, "{host}: {}", answer.1);
    }
    // A request with no Host at all (HTTP/1.0) is refused too.
    let answer = raw(
        server.addr,
        format!("GET /v1/sessions HTTP/1.0\r\nAuthorization: Bearer {TOKEN}\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.0 400") || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    assert!(answer.contains("\"invalid_request\""), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_origin_requests_are_refused_unless_the_host_allows_the_origin() {
    let fx = Fixture::new();
    let server = TestServer::start_with(
        fx.engine(fx.store().await, silent()),
        Options {
            allowed_origin: Some("http://localhost:3000"),
            ..Options::default()
        },
    )
    .await;
    let own = format!("http://{}", server.addr);
    let create = |origin: &str| {
        send(
            server
                .request(Method::POST, "/v1/sessions")
                .header("origin", origin)
                .json(&fx.open_session()),
        )
    };
    for origin in ["http://evil.example", "null", "http://localhost:3001"] {
        assert_error(&create(origin).await, StatusCode::FORBIDDEN, "forbidden");
    }
    assert_eq!(server.engine.list(&Caller::Host).await.unwrap().len(), 0);
    assert_eq!(create(&own).await.0, StatusCode::CREATED);
    let allowed = create("http://localhost:3000").await;
    assert_eq!(allowed.0, StatusCode::CREATED, "{}", allowed.1);
    // The allowed origin's preflight is answered (it carries no token).
    let preflight = server
        .http
        .request(Method::OPTIONS, server.url("/v1/sessions"))
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
    let preflight = server
        .http
        .request(Method::OPTIONS, server.url("/v1/sessions"))
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_link_signs_a_browser_in_with_a_strict_http_only_cookie() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let session = server.create(fx.open_session()).await;
    let link = server.url(&format!("/v1/sessions?token={TOKEN}&view=all"));
    let signed = server.http.get(&link).send().await.unwrap();
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed.headers()["location"], "/v1/sessions?view=all");
    assert_eq!(signed.headers()["cache-control"], "no-store");
    let cookie = signed.headers()["set-cookie"].to_str().unwrap().to_string();
    let name = format!("roundtable_token_{}", server.addr.port());
    assert!(cookie.starts_with(&format!("{name}={TOKEN};")), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();

    // The cookie is a credential for every route, the event stream
    // included (an EventSource sends cookies, not headers).
    let listed = send(
        server
            .http
            .get(server.url("/v1/sessions"))
            .header("cookie", format!("other=1; {pair}")),
    )
    .await;
    assert_eq!(listed.0, StatusCode::OK, "{}", listed.1);
    let mut events = Events::open(
        server
            .http
            .get(server.url(&format!("/v1/sessions/{session}/events?last_event_id=0")))
            .header("cookie", pair.as_str()),
    )
    .await;
    assert_eq!(events.next().await.kind(), "session_created");

    // A wrong token in a link or a cookie signs nobody in.
    let wrong = send(
        server
            .http
            .get(server.url("/v1/sessions?token=wrong-token-0123456789abcdef")),
    )
    .await;
    assert_error(&wrong, StatusCode::UNAUTHORIZED, "unauthorized");
    let forged = send(
        server
            .http
            .get(server.url("/v1/sessions"))
            .header("cookie", format!("{name}=wrong-token-0123456789abcdef")),
    )
    .await;
    assert_error(&forged, StatusCode::UNAUTHORIZED, "unauthorized");
    // A cookie of another port's server is not this one's.
    let other_port = send(
        server
            .http
            .get(server.url("/v1/sessions"))
            .header("cookie", format!("roundtable_token_1={TOKEN}")),
    )
    .await;
    assert_error(&other_port, StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_link_never_redirects_off_the_site() {
    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    // Sent raw: a client library would normalise the backslash itself.
    for path in [
        "/\\evil.example/",
        "//evil.example/",
        "/%5Cevil.example/",
        "/%2F%2Fevil.example/",
    ] {
        let request = format!(
            "GET {path}?token={TOKEN} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            server.addr
        );
        let answer = raw(server.addr, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 303"), "{path}: {answer}");
        assert!(
            answer.to_ascii_lowercase().contains("\r\nlocation: /\r\n"),
            "{path}: {answer}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_times_out_but_an_event_stream_outlives_the_timeout() {
    let fx = Fixture::new();
    let timeout = Duration::from_secs(1);
    let server = TestServer::start_with(
        fx.engine(
            fx.store().await,
            std::sync::Arc::new(roundtable_providers::ScriptedProvider::new([text("late")])),
        ),
        Options {
            request_timeout: timeout,
            keep_alive: Duration::from_millis(100),
            ..Options::default()
        },
    )
    .await;
    let session = server.create(fx.open_session()).await;
    // A body that never finishes arriving.
    let request = format!(
        "POST /v1/sessions/{session}/messages HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"parts\":",
        server.addr
    );
    let answer = raw(server.addr, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"timeout\""), "{answer}");

    // An event stream opened now is still delivering after several times
    // the timeout.
    let mut events = server.events(&session, None).await;
    assert_eq!(events.next().await.kind(), "session_created");
    let opened = std::time::Instant::now();
    let response = server
        .request(Method::GET, &format!("/v1/sessions/{session}/events"))
        .header("Last-Event-ID", "1")
        .send()
        .await
        .unwrap();
    let mut bytes = response.bytes_stream();
    while opened.elapsed() < timeout * 3 {
        let chunk = tokio::time::timeout(
            Duration::from_secs(20),
            futures::StreamExt::next(&mut bytes),
        )
        .await
        .expect("the stream went quiet")
        .expect("the stream was cut")
        .unwrap();
        assert!(String::from_utf8_lossy(&chunk).contains(": keep-alive"));
    }
    server.say(&session, "still there?").await;
    assert_eq!(events.next().await.kind(), "message_added");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_limit_body_is_read_to_its_end_so_the_client_reads_its_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let fx = Fixture::new();
    let server = TestServer::start(fx.engine(fx.store().await, silent())).await;
    let session = server.create(fx.open_session()).await;
    // A body far over the route's limit, on a connection the client goes
    // on using. Were the rest of the body left unread, the server would
    // close the connection after its answer, and a client still writing
    // the body would meet a reset connection instead of the answer.
    let body_len = 2 * roundtable_server::sessions::DEFAULT_MESSAGE_BODY_LIMIT;
    for path in [
        format!("/v1/sessions/{session}/approve"),
        format!("/v1/sessions/{session}/messages"),
        "/api/chat/abort".to_string(),
        "/api/chat".to_string(),
    ] {
        let stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let (mut reading, mut writing) = stream.into_split();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n",
            server.addr
        );
        let writer = tokio::spawn(async move {
            writing.write_all(head.as_bytes()).await?;
            writing.write_all(&vec![b' '; body_len]).await?;
            Ok::<_, std::io::Error>(writing)
        });
        let (status, answer) = read_response(&mut reading).await;
        assert_eq!(status, 413, "{path}: {answer}");
        assert!(answer.contains("\"too_large\""), "{path}: {answer}");
        // The same connection answers the next request.
        let mut writing = writer.await.unwrap().expect("the body could not be sent");
        let next = format!(
            "GET /v1/sessions HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
            server.addr
        );
        writing.write_all(next.as_bytes()).await.unwrap();
        let (status, answer) = read_response(&mut reading).await;
        assert_eq!(status, 200, "{path}: {answer}");
    }

    /// One response with a `content-length`: its status and body.
    async fn read_response(reading: &mut tokio::net::tcp::OwnedReadHalf) -> (u16, String) {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if bytes.len() >= end + 4 + len {
                    let status = head[9..12].parse().unwrap();
                    let body = String::from_utf8_lossy(&bytes[end + 4..end + 4 + len]).into_owned();
                    return (status, body);
                }
            }
            let n = tokio::time::timeout(Duration::from_secs(20), reading.read(&mut buf))
                .await
                .expect("no answer in 20 s")
                .expect("the connection was reset");
            assert!(
                n > 0,
                "the connection was closed: {}",
                String::from_utf8_lossy(&bytes)
            );
            bytes.extend_from_slice(&buf[..n]);
        }
    }
}

/// The thread file of `session` in the JSONL store under `data`.
fn thread_file(data: &std::path::Path, session: &str) -> std::path::PathBuf {
    let mut folders = vec![data.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.to_string_lossy().contains(session)
                && path.file_name().is_some_and(|n| n != "session.json")
            {
                return path;
            }
        }
    }
    panic!("no thread file of {session} under {}", data.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_session_answers_its_typed_error_and_the_others_are_served() {
    let fx = Fixture::new();
    let (good, bad) = {
        let store = fx.store().await;
        let engine = fx.engine(store.clone(), silent());
        let mut ids = Vec::new();
        for _ in 0..2 {
            let request = CreateSession {
                mode: Some(SessionMode::Plan),
                ..CreateSession::new(fx.workspace())
            };
            ids.push(engine.create(&Caller::Host, request).await.unwrap().id);
        }
        store.close().await.unwrap();
        (ids[0].to_string(), ids[1].to_string())
    };
    // The first of its two lines cut in half.
    let file = thread_file(&fx.data(), &bad);
    let text = std::fs::read_to_string(&file).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    std::fs::write(&file, format!("{}\n{rest}", &first[..first.len() / 2])).unwrap();

    let engine = fx
        .engine_builder(fx.store().await, silent())
        .unowned_sessions(UnownedSessions::Anyone)
        .build();
    let recovery = engine.recover().await.unwrap();
    assert_eq!(recovery.unreadable.len(), 1, "{recovery:?}");
    let server = TestServer::start(engine).await;

    let (status, info) = server.get(&format!("/v1/sessions/{good}")).await;
    assert_eq!(status, StatusCode::OK, "{info}");
    for answer in [
        server.get(&format!("/v1/sessions/{bad}")).await,
        server.get(&format!("/v1/sessions/{bad}/events")).await,
        server
            .post(
                &format!("/v1/sessions/{bad}/messages"),
                json!({"role": "user", "parts": [{"type": "text", "text": "hi"}]}),
            )
            .await,
    ] {
        assert_error(
            &answer,
            StatusCode::INTERNAL_SERVER_ERROR,
            "session_unreadable",
        );
    }
    for list in ["/v1/sessions", "/api/chat/sessions"] {
        let (status, listed) = server.get(list).await;
        assert_eq!(status, StatusCode::OK, "{listed}");
        let sessions = listed["sessions"].as_array().unwrap();
        let status_of = |id: &str| {
            // `/v1/sessions` names a session `id`, the chat API `sessionId`.
            let found = sessions
                .iter()
                .find(|s| s["id"] == id || s["sessionId"] == id);
            found.map(|s| s["status"].clone()).unwrap_or_default()
        };
        assert_eq!(status_of(&bad), "unreadable", "{listed}");
        assert_eq!(status_of(&good), "active", "{listed}");
    }
}
