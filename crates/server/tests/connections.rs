//! Connections a hostile client holds open: a silent one, one that sends
//! half a request head, one left idle after a request, and more of them
//! than the server takes. None of them may keep the server from answering
//! the clients that hold the token, and none of the bounds may cut an
//! event stream that is in progress.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use roundtable_server::ServeLimits;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The short head timeout of these tests.
const HEAD_TIMEOUT: Duration = Duration::from_millis(400);

/// A generous bound on how long the server takes to close a connection
/// past the head timeout (the tests never wait for it when it works).
const CLOSED_WITHIN: Duration = Duration::from_secs(10);

async fn server(max_connections: usize) -> (Fixture, TestServer) {
    let fx = Fixture::new();
    let engine = fx.engine(fx.store().await, silent());
    let options = Options {
        limits: ServeLimits {
            header_read_timeout: HEAD_TIMEOUT,
            max_connections,
            shutdown_grace: Duration::from_secs(1),
            ..ServeLimits::default()
        },
        ..Options::default()
    };
    let server = TestServer::start_with(engine, options).await;
    (fx, server)
}

/// Reads until the server closes the connection; what it sent. Fails the
/// test when it is still open after [`CLOSED_WITHIN`].
async fn closed_by_server(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(CLOSED_WITHIN, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server kept the connection open for {CLOSED_WITHIN:?}"
    );
    String::from_utf8_lossy(&got).into_owned()
}

/// A request of `GET /v1/sessions` with the token, kept alive.
fn list_request(addr: SocketAddr) -> String {
    format!("GET /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n")
}

/// Reads one response with a `content-length` body from `stream`.
async fn one_response(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("an answer in 10 s")
            .unwrap();
        assert!(n > 0, "closed before the answer ended");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|v| v.trim().parse().ok())
                .expect("a content-length");
            if body.len() >= length {
                return text.into_owned();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_after_the_head_timeout() {
    let (_fx, server) = server(64).await;
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    closed_by_server(&mut silent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_head_is_closed_after_the_head_timeout() {
    let (_fx, server) = server(64).await;
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "GET /v1/sessions HTTP/1.1\r\nHost: {}\r\nX-Partial: ",
        server.addr
    );
    half.write_all(head.as_bytes()).await.unwrap();
    closed_by_server(&mut half).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_in_keep_alive_is_closed_after_the_head_timeout() {
    let (_fx, server) = server(64).await;
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    // Two requests on the connection: it is kept alive between them.
    for _ in 0..2 {
        idle.write_all(list_request(server.addr).as_bytes())
            .await
            .unwrap();
        let answer = one_response(&mut idle).await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    }
    // Then nothing: closed, with nothing more sent.
    assert_eq!(closed_by_server(&mut idle).await, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_idle_connections_do_not_lock_out_a_client_with_the_token() {
    const MAX: usize = 8;
    let (_fx, server) = server(MAX).await;
    // More silent and half-sent connections than the server takes.
    let mut hostile = Vec::new();
    for n in 0..3 * MAX {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        if n % 2 == 1 {
            let head = format!(
                "GET /v1/sessions HTTP/1.1\r\nHost: {}\r\nX-Partial: ",
                server.addr
            );
            stream.write_all(head.as_bytes()).await.unwrap();
        }
        hostile.push(stream);
    }
    // The server answers at once, with a clear refusal while it is full
    // and with the answer once the hostile connections timed out.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let mut refused = 0;
    loop {
        let answer = send(http.get(server.url("/v1/sessions")).bearer_auth(TOKEN)).await;
        if answer.0 == StatusCode::OK {
            break;
        }
        assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "overloaded");
        refused += 1;
        assert!(
            started.elapsed() < CLOSED_WITHIN,
            "still refused after {CLOSED_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Those past the limit were refused with a JSON error, the others
    // closed after the head timeout.
    let mut overloaded = 0;
    for stream in &mut hostile {
        let answer = closed_by_server(stream).await;
        if !answer.is_empty() {
            assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
            assert!(answer.contains(r#""code":"overloaded""#), "{answer}");
            overloaded += 1;
        }
    }
    assert!(
        overloaded >= 2 * MAX - 1,
        "{overloaded} connections of {} refused; {refused} requests refused",
        3 * MAX
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_outlives_the_head_timeout() {
    let (fx, server) = server(64).await;
    let session = server.create(fx.open_session()).await;
    let mut events = server.events(&session, None).await;
    assert_eq!(events.next().await.kind(), "session_created");
    // Quiet for several head timeouts (the keep-alive comments come
    // every 15 s): the stream is still there.
    tokio::time::sleep(HEAD_TIMEOUT * 5).await;
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{session}/messages"),
            serde_json::json!({
                "role": "user",
                "parts": [{"type": "text", "text": "still there?"}],
                "auto_run": false,
            }),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(events.next().await.kind(), "message_added");
}

/// The SSE messages (`id`, `data`) whole in the raw bytes of a chunked
/// event stream's response, which may end in the middle of a chunk.
fn messages_in(raw: &[u8]) -> Vec<(String, serde_json::Value)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let mut rest = &raw[end + 4..];
    let mut body = Vec::new();
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..line_end]).unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        let start = line_end + 2;
        let take = size.min(rest.len() - start);
        body.extend_from_slice(&rest[start..start + take]);
        if take < size || rest.len() < start + size + 2 {
            break;
        }
        rest = &rest[start + size + 2..];
    }
    let body = String::from_utf8_lossy(&body);
    let mut messages = Vec::new();
    // The last piece has no blank line after it: cut short, or empty.
    let whole: Vec<&str> = body.split("\n\n").collect();
    for message in &whole[..whole.len() - 1] {
        let field = |name: &str| {
            message
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::to_owned)
        };
        if let (Some(id), Some(data)) = (field("id: "), field("data: ")) {
            messages.push((id, serde_json::from_str(&data).unwrap()));
        }
    }
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_closed_and_resumes_missing_nothing() {
    let fx = Fixture::new();
    let engine = fx.engine(fx.store().await, silent());
    let options = Options {
        limits: ServeLimits {
            write_stall_timeout: Duration::from_millis(250),
            send_buffer: 16 * 1024,
            ..ServeLimits::default()
        },
        ..Options::default()
    };
    let server = TestServer::start_with(engine, options).await;
    let session = server.create(fx.open_session()).await;
    // A client with a small window that reads nothing.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(server.addr).await.unwrap();
    let request = format!(
        "GET /v1/sessions/{session}/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
        server.addr
    );
    stalled.write_all(request.as_bytes()).await.unwrap();
    // Far more events than the buffers hold (each 4 KB of text): the
    // server's writes to it block.
    let notes = 120;
    for n in 0..notes {
        let (status, _) = server
            .post(
                &format!("/v1/sessions/{session}/messages"),
                serde_json::json!({
                    "parts": [{"type": "text", "text": format!("{n} {}", "x".repeat(4000))}],
                    "auto_run": false,
                }),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    // Many times the stall timeout: the server closed the connection
    // (what it had written is still delivered, then the end).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stalled.read_to_end(&mut raw))
        .await
        .expect("the server kept a stalled client")
        .unwrap();
    let first = messages_in(&raw);
    let stored = server
        .engine
        .events(&Caller::Host, &session, None)
        .await
        .unwrap();
    assert!(
        !first.is_empty() && first.len() < stored.len(),
        "read {} of {} events before the end",
        first.len(),
        stored.len()
    );
    // It resumes after the last event it read, and gets the rest.
    let (last, _) = first.last().unwrap();
    let mut resumed = server.events(&session, Some(last)).await;
    let rest = resumed.take(stored.len() - first.len()).await;
    let ids: Vec<String> = first
        .iter()
        .map(|(id, _)| id.clone())
        .chain(rest.iter().map(|m| m.id.clone()))
        .collect();
    let expected: Vec<String> = stored.iter().map(|e| e.id.to_string()).collect();
    assert_eq!(ids, expected);
    let datas: Vec<&serde_json::Value> = first
        .iter()
        .map(|(_, data)| data)
        .chain(rest.iter().map(|m| &m.data))
        .collect();
    for (got, event) in datas.iter().zip(&stored) {
        assert_eq!(**got, serde_json::to_value(event).unwrap());
    }
}
