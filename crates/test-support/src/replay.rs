//! A loopback HTTP server that replays recorded wire streams to the
//! provider adapters and checks every request it receives against the
//! request invariants (valid roles, no tool result without its call and no
//! call without its result), so every test checks them for free.

// A server that cannot bind, or a request that breaks the invariants, must
// fail the test that started it.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod later_apis;

/// How a streamed reply ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum End {
    /// The body ends properly.
    Clean,
    /// The connection drops in the middle of a chunk: a transport error.
    Broken,
    /// The server keeps the connection open until the client goes away.
    Hang,
}

/// One reply of the server.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream`, the body sent in these network chunks.
    Stream {
        /// The body's network chunks, flushed one by one.
        chunks: Vec<Vec<u8>>,
        /// The pause between two chunks.
        pause: Duration,
        /// How the body ends.
        end: End,
    },
    /// `200 application/json` with this body instead of a stream.
    Json(String),
    /// Read the request, then say nothing until the client goes away.
    Stall,
    /// An error status.
    Status {
        /// The status code.
        status: u16,
        /// Extra headers (`Retry-After`...).
        headers: Vec<(String, String)>,
        /// The JSON body.
        body: String,
    },
    /// The reply this makes when the request has arrived (for headers that
    /// depend on the time, such as a `Retry-After` date).
    Later(fn() -> Reply),
}

impl Reply {
    /// The whole body in one chunk.
    pub fn sse(body: Vec<u8>) -> Self {
        Reply::Stream {
            chunks: vec![body],
            pause: Duration::ZERO,
            end: End::Clean,
        }
    }

    /// The body in chunks of `size` bytes, flushed one by one.
    pub fn sse_chunked(body: &[u8], size: usize, pause: Duration, end: End) -> Self {
        Reply::Stream {
            chunks: body.chunks(size).map(<[u8]>::to_vec).collect(),
            pause,
            end,
        }
    }

    /// An error status with a JSON body.
    pub fn status(status: u16, headers: &[(&str, &str)], body: &str) -> Self {
        Reply::Status {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.to_string(),
        }
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// When the server had read the whole request.
    pub at: Instant,
    /// The request's path (`/v1/chat/completions`).
    pub path: String,
    /// Its headers, names in lower case.
    pub headers: HashMap<String, String>,
    /// Its JSON body (`null` when it was not JSON).
    pub body: Value,
}

/// The replay server.
pub struct Replay {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl Replay {
    /// Starts a server on 127.0.0.1 (a free port) that answers the n-th
    /// connection with the n-th reply (and 500 once they run out).
    pub async fn start(replies: Vec<Reply>) -> Replay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let violations = Arc::new(Mutex::new(Vec::new()));
        let (r, v) = (requests.clone(), violations.clone());
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let reply = replies.lock().unwrap().pop_front();
                let (r, v) = (r.clone(), v.clone());
                tokio::spawn(async move {
                    let _ = serve(socket, reply, r, v).await;
                });
            }
        });
        Replay {
            base_url: format!("http://{addr}"),
            requests,
            violations,
        }
    }

    /// Every request received so far; fails the test if any broke the
    /// request invariants.
    pub fn requests(&self) -> Vec<Recorded> {
        let violations = self.violations.lock().unwrap().clone();
        assert!(
            violations.is_empty(),
            "request invariants violated: {violations:?}"
        );
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    reply: Option<Reply>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    violations: Arc<Mutex<Vec<String>>>,
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    let problems = check_request(&request.path, &request.body);
    requests.lock().unwrap().push(request);
    if !problems.is_empty() {
        violations.lock().unwrap().extend(problems.iter().cloned());
        let text = format!("request invariants violated: {problems:?}");
        return write_status(&mut socket, 400, &[], &text).await;
    }
    let reply = match reply {
        Some(Reply::Later(make)) => Some(make()),
        other => other,
    };
    match reply {
        Some(Reply::Later(_)) => write_status(&mut socket, 500, &[], "nested Later").await,
        None => write_status(&mut socket, 500, &[], "{\"error\":\"no more replies\"}").await,
        Some(Reply::Stall) => drain(&mut socket).await,
        Some(Reply::Status {
            status,
            headers,
            body,
        }) => write_status(&mut socket, status, &headers, &body).await,
        Some(Reply::Json(body)) => write_status(&mut socket, 200, &[], &body).await,
        Some(Reply::Stream { chunks, pause, end }) => {
            write_stream(&mut socket, &chunks, pause, end).await
        }
    }
}

/// Reads one request: its head, then as much body as `content-length`
/// says; None when the client hung up before the head ended.
async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or_default()
        .to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = socket.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body: Value = serde_json::from_slice(&buf[header_end..]).unwrap_or(Value::Null);
    Ok(Some(Recorded {
        at: Instant::now(),
        path,
        headers,
        body,
    }))
}

/// Reads until the client goes away.
async fn drain(socket: &mut TcpStream) -> std::io::Result<()> {
    let mut sink = [0u8; 64];
    while socket.read(&mut sink).await? > 0 {}
    Ok(())
}

/// Sends a `200 text/event-stream` reply in `chunks`, ending as `end` says.
async fn write_stream(
    socket: &mut TcpStream,
    chunks: &[Vec<u8>],
    pause: Duration,
    end: End,
) -> std::io::Result<()> {
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    socket.flush().await?;
    for (i, chunk) in chunks.iter().enumerate() {
        if i > 0 && !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(chunk);
        frame.extend_from_slice(b"\r\n");
        socket.write_all(&frame).await?;
        socket.flush().await?;
    }
    match end {
        End::Clean => socket.write_all(b"0\r\n\r\n").await?,
        End::Broken => {
            // Announce 64 bytes, send 5, and hang up.
            socket.write_all(b"40\r\ndata:").await?;
            socket.flush().await?;
        }
        End::Hang => drain(socket).await?,
    }
    socket.shutdown().await
}

async fn write_status(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Status\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.shutdown().await
}

/// The request invariants every adapter must keep, whatever the history:
/// valid roles; every tool result answers a call of the assistant turn just
/// before it; every call of a turn is answered before the conversation goes
/// on.
pub fn check_request(path: &str, body: &Value) -> Vec<String> {
    if path.ends_with("/responses") {
        return later_apis::check_responses(body);
    }
    if path.contains(":streamGenerateContent") {
        return later_apis::check_gemini(body);
    }
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return vec![format!("{path}: no messages array")];
    };
    if path.ends_with("/messages") {
        check_anthropic(messages)
    } else {
        check_openai(messages)
    }
}

/// Anthropic: user/assistant only; tool_result blocks in the user message
/// right after the assistant message with the tool_use.
fn check_anthropic(messages: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut pending: HashSet<String> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let blocks = m
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let of_type = |t: &str| -> Vec<String> {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some(t))
                .map(|b| {
                    b.get(if t == "tool_use" { "id" } else { "tool_use_id" })
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        };
        match role {
            "user" => {
                let results: HashSet<String> = of_type("tool_result").into_iter().collect();
                for id in &results {
                    if !pending.contains(id) {
                        problems.push(format!(
                            "message {i}: tool_result {id} without its tool_use"
                        ));
                    }
                }
                for id in &pending {
                    if !results.contains(id) {
                        problems.push(format!(
                            "message {i}: tool_use {id} without its tool_result"
                        ));
                    }
                }
                pending.clear();
            }
            "assistant" => {
                if !pending.is_empty() {
                    problems.push(format!("message {i}: tool_use {pending:?} without results"));
                }
                pending = of_type("tool_use").into_iter().collect();
            }
            other => problems.push(format!("message {i}: invalid role {other:?}")),
        }
    }
    if !pending.is_empty() {
        problems.push(format!("tool_use {pending:?} without results at the end"));
    }
    problems
}

/// OpenAI chat completions: every `tool` message answers a call of the
/// assistant message before it, and every call is answered before the next
/// other message.
fn check_openai(messages: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut pending: HashSet<String> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        match role {
            "tool" => {
                let id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !pending.remove(id) {
                    problems.push(format!("message {i}: tool result {id} without its call"));
                }
            }
            "system" | "developer" | "user" | "assistant" => {
                if !pending.is_empty() {
                    problems.push(format!("message {i}: calls {pending:?} without results"));
                    pending.clear();
                }
                if role == "assistant" {
                    for call in m
                        .get("tool_calls")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
                        if id.is_empty() {
                            problems.push(format!("message {i}: tool call without id"));
                        }
                        pending.insert(id.to_string());
                    }
                }
            }
            other => problems.push(format!("message {i}: invalid role {other:?}")),
        }
    }
    if !pending.is_empty() {
        problems.push(format!("calls {pending:?} without results at the end"));
    }
    problems
}
