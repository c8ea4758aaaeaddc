//! Fan-out of one session's events to many SSE clients: 1000 clients
//! follow one session over HTTP while a 20k-delta answer streams, and the
//! bench reports how late the events reach them and how much memory the
//! server holds.
//!
//! ```text
//! cargo bench --bench sse_fanout
//! cargo bench --bench sse_fanout -- --clients 200 --deltas 5000 --stalled 20
//! ```
//!
//! Runs once and stops by itself (a minute at most). The server is this
//! binary again in a child process (so its memory is measured alone): the
//! `/v1/sessions` routes behind the security layer, on a free loopback
//! port, over a JSONL store in a temporary folder, with a model that
//! streams the answer at 2000 deltas a second (the engine groups them into
//! one `model_output_delta` event every 40 ms, its default). The clients
//! are real HTTP connections whose events are parsed as a browser parses
//! them. A client's delay for an event is the time from the event's
//! timestamp (when its entry was written, in milliseconds) to the moment
//! the client parsed it; every client must receive the whole answer.
//!
//! Beside them, stalled clients (100 by default) open the same stream
//! with a 4 KiB receive buffer and read nothing until the answer is over:
//! the server must not hold their backlog in memory (the event stream
//! reads the store at its client's pace). The bench reports what the
//! server holds for them, then has them read: each must get the whole
//! answer too. `--stalled-buffer BYTES` sets their receive buffer (0: the
//! system's default, which lets the kernel hold far more for them); the
//! bench reports the kernel's TCP memory too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use roundtable::providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, Model, OPENAI_COMPLETIONS, Provider,
    ScriptStep, StreamOptions, script_events,
};
use roundtable::server::{AccessToken, HostToken, Security, ServeLimits, SessionsApi, serve};
use roundtable::sessions::SessionEngine;
use roundtable::thread_stream::JsonlStore;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Set in the child process: the data folder it serves.
const SERVER_ENV: &str = "ROUNDTABLE_SSE_BENCH_SERVER";
const TOKEN: &str = "sse-fanout-bench-token-0123456789";
/// Characters per delta.
const DELTA_CHARS: usize = 4;
/// Deltas released together, every `TICK`: 2000 deltas a second.
const DELTAS_PER_TICK: usize = 10;
const TICK: Duration = Duration::from_millis(5);
/// The whole run's limit.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// One run's load (`cargo bench --bench sse_fanout -- --help`).
#[derive(clap::Parser)]
struct Settings {
    /// Clients reading the session's events.
    #[arg(long, default_value_t = 1000)]
    clients: usize,
    /// Text deltas of the answer.
    #[arg(long, default_value_t = 20_000)]
    deltas: usize,
    /// Clients that connect and never read.
    #[arg(long, default_value_t = 100)]
    stalled: usize,
    /// The stalled clients' receive buffer; 0 leaves the system's default.
    #[arg(long, default_value_t = STALLED_RECEIVE_BUFFER)]
    stalled_buffer: u32,
    /// Passed by `cargo bench`.
    #[arg(long = "bench", hide = true)]
    _bench: bool,
}

/// The answer: `deltas` pieces of `DELTA_CHARS` characters.
fn answer(deltas: usize) -> String {
    let words = "the quick brown fox jumps over the lazy dog ";
    words.chars().cycle().take(deltas * DELTA_CHARS).collect()
}

fn main() {
    let settings = <Settings as clap::Parser>::parse();
    if let Ok(data) = std::env::var(SERVER_ENV) {
        return serve_child(data.into(), settings.deltas);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(settings));
}

// ---- the server (child process) ----

/// Streams the answer at a steady pace, whatever the context.
struct PacedModel {
    answer: String,
}

impl Provider for PacedModel {
    fn stream(&self, model: &Model, _context: &Context, _options: &StreamOptions) -> EventStream {
        let mut reply = AssistantMessage::empty(model.api.as_str(), "bench", "paced", 0);
        reply
            .content
            .push(AssistantBlock::text(self.answer.as_str()));
        let events = script_events(ScriptStep::Reply(reply), DELTA_CHARS);
        let batches: Vec<Vec<_>> = events.chunks(DELTAS_PER_TICK).map(<[_]>::to_vec).collect();
        let ticks = tokio::time::interval(TICK);
        Box::pin(
            futures::stream::unfold(
                (batches.into_iter(), ticks),
                |(mut rest, mut ticks)| async move {
                    let batch = rest.next()?;
                    ticks.tick().await;
                    Some((futures::stream::iter(batch), (rest, ticks)))
                },
            )
            .flatten(),
        )
    }
}

fn serve_child(data: std::path::PathBuf, deltas: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = Arc::new(JsonlStore::open(&data).await.unwrap());
        let engine = SessionEngine::builder(
            store,
            Arc::new(PacedModel {
                answer: answer(deltas),
            }),
            Model::new(OPENAI_COMPLETIONS, "bench", "paced", ""),
        )
        .snapshot_dir(&data)
        .build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let security = Security::new(addr, HostToken::new(AccessToken::new(TOKEN).unwrap()));
        let app = security.protect(SessionsApi::new(engine).router());
        println!("listening {addr}");
        // Serves until the parent closes stdin (or dies).
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {}
        });
        // The stalled clients are held for the whole run (not closed after
        // a stall), so that what they cost is measured.
        let limits = ServeLimits {
            max_connections: 4096,
            write_stall_timeout: RUN_LIMIT,
            ..ServeLimits::default()
        };
        let stop = async {
            let _ = stdin_closed.await;
        };
        serve(listener, app, limits, stop).await;
    });
}

// ---- the clients (parent process) ----

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    ts: String,
    #[serde(default)]
    data: Data,
}

#[derive(Deserialize, Default)]
struct Data {
    #[serde(default)]
    text: Option<String>,
}

/// What one client saw.
#[derive(Default)]
struct Seen {
    delta_delays_ms: Vec<f64>,
    completed_delay_ms: Option<f64>,
    /// The size of the `model_output_completed` message's data.
    completed_bytes: usize,
    text: String,
}

/// Milliseconds since midnight (UTC) now, with microseconds.
fn now_of_day_ms() -> f64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (since.as_micros() % 86_400_000_000) as f64 / 1000.0
}

/// Milliseconds since midnight of an RFC 3339 UTC time
/// (`2025-01-01T12:34:56.789Z`).
fn ts_of_day_ms(ts: &str) -> f64 {
    let time = &ts[11..23];
    let h: f64 = time[0..2].parse().unwrap();
    let m: f64 = time[3..5].parse().unwrap();
    let s: f64 = time[6..12].parse().unwrap();
    (h * 3600.0 + m * 60.0 + s) * 1000.0
}

fn delay_ms(ts: &str) -> f64 {
    let delay = now_of_day_ms() - ts_of_day_ms(ts);
    if delay < -43_200_000.0 {
        delay + 86_400_000.0
    } else {
        delay
    }
}

/// Follows the event stream until the session completes. A client holds
/// a permit of `gate` until it has the history, so that connections open
/// a few dozen at a time.
async fn follow(
    http: reqwest::Client,
    url: String,
    gate: Arc<tokio::sync::Semaphore>,
    connected: tokio::sync::mpsc::Sender<()>,
) -> Seen {
    let mut permit = Some(gate.acquire_owned().await.unwrap());
    let response = http.get(&url).bearer_auth(TOKEN).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let mut events = response.bytes_stream().eventsource();
    let mut seen = Seen::default();
    while let Some(event) = events.next().await {
        let event = event.unwrap();
        let envelope: Envelope = serde_json::from_str(&event.data).unwrap();
        match envelope.kind.as_str() {
            "session_created" => {
                permit.take();
                connected.send(()).await.unwrap();
            }
            "model_output_delta" => {
                seen.delta_delays_ms.push(delay_ms(&envelope.ts));
                seen.text
                    .push_str(envelope.data.text.as_deref().unwrap_or(""));
            }
            "model_output_completed" => {
                seen.completed_delay_ms = Some(delay_ms(&envelope.ts));
                seen.completed_bytes = event.data.len();
            }
            "session_completed" => break,
            _ => {}
        }
    }
    seen
}

/// The receive buffer of a stalled client: the kernel keeps the server's
/// socket from sending much more than this before the client reads.
const STALLED_RECEIVE_BUFFER: u32 = 4096;

/// A client that opens the event stream and reads nothing until told to:
/// a raw connection, since an HTTP client library reads ahead into
/// buffers of its own.
struct Stalled {
    socket: tokio::net::TcpStream,
}

impl Stalled {
    async fn open(addr: std::net::SocketAddr, path: &str, buffer: u32) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        if buffer > 0 {
            socket.set_recv_buffer_size(buffer).unwrap();
        }
        let mut socket = socket.connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
        socket.write_all(request.as_bytes()).await.unwrap();
        Self { socket }
    }

    /// Waits until the server has answered (without reading the answer).
    async fn answered(&self) {
        let mut first = [0; 1];
        let n = self.socket.peek(&mut first).await.unwrap();
        assert_eq!(n, 1, "the server closed a stalled client's stream");
    }

    /// Reads the stream until the session completes: the answer it got,
    /// and how many bytes of events it read.
    async fn drain(mut self) -> (String, usize) {
        let mut raw = Vec::new();
        let mut body = Vec::new();
        let mut head_done = false;
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = self.socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "the server closed a stalled client's stream");
            raw.extend_from_slice(&buf[..n]);
            if !head_done {
                let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                assert!(head.starts_with("http/1.1 200"), "{head}");
                assert!(head.contains("transfer-encoding: chunked"), "{head}");
                raw.drain(..end + 4);
                head_done = true;
            }
            if take_chunks(&mut raw, &mut body) {
                break;
            }
        }
        let read = body.len();
        let events: Vec<_> = futures::stream::iter([Ok::<_, std::convert::Infallible>(body)])
            .eventsource()
            .collect()
            .await;
        let mut text = String::new();
        for event in events {
            let envelope: Envelope = serde_json::from_str(&event.unwrap().data).unwrap();
            if envelope.kind == "model_output_delta" {
                text.push_str(envelope.data.text.as_deref().unwrap_or(""));
            }
        }
        (text, read)
    }
}

/// Moves the complete chunks of a chunked body from `raw` to `body`; true
/// once a chunk holds the session's completion (each SSE message is one
/// chunk).
fn take_chunks(raw: &mut Vec<u8>, body: &mut Vec<u8>) -> bool {
    let mut completed = false;
    loop {
        let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") else {
            return completed;
        };
        let size_text = String::from_utf8_lossy(&raw[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|_| panic!("not a chunk size: {size_text:?}"));
        assert!(size > 0, "the server ended a stalled client's stream");
        let start = line_end + 2;
        if raw.len() < start + size + 2 {
            return completed;
        }
        let chunk = &raw[start..start + size];
        let end = br#""type":"session_completed""#;
        completed |= chunk.windows(end.len()).any(|w| w == end);
        body.extend_from_slice(chunk);
        raw.drain(..start + size + 2);
    }
}

/// The memory the kernel holds for TCP sockets, all of them (the server's
/// send buffers and the clients' receive buffers), in MiB.
fn kernel_tcp_mib() -> f64 {
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    let pages: f64 = sockstat
        .lines()
        .find_map(|l| l.strip_prefix("TCP: "))
        .and_then(|l| l.split_whitespace().skip_while(|w| *w != "mem").nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

/// What the server's sockets on `port` have in their send queues (written,
/// not yet acknowledged by the client's kernel), in KiB.
fn send_queues_kib(port: u16) -> f64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!(":{port:04X}");
    let bytes: u64 = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            (fields.get(1)?.ends_with(&local)).then_some(())?;
            let tx = fields.get(4)?.split(':').next()?;
            u64::from_str_radix(tx, 16).ok()
        })
        .sum();
    bytes as f64 / 1024.0
}

/// `VmRSS` and `VmHWM` of process `pid`, in MiB.
fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU seconds process `pid` has used (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here;
    // the kernel counts them in 100ths of a second.
    (ticks(11) + ticks(12)) / 100.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn run(settings: Settings) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--deltas", &settings.deltas.to_string()])
        .env(SERVER_ENV, &data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let addr = line.strip_prefix("listening ").unwrap().to_string();
    let base = format!("http://{addr}/v1/sessions");

    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let created: serde_json::Value = http
        .post(&base)
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({
            "workspace_path": workspace,
            "verify_policy": {"auto_verify": false},
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = created["session_id"].as_str().unwrap().to_string();
    let (idle_rss, _) = memory_mib(pid);

    // Connect every client; each reports once it has the history.
    let (connected_tx, mut connected_rx) = tokio::sync::mpsc::channel(settings.clients);
    let connecting = Instant::now();
    let mut clients = Vec::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(64));
    for _ in 0..settings.clients {
        clients.push(tokio::spawn(follow(
            http.clone(),
            format!("{base}/{session}/events"),
            gate.clone(),
            connected_tx.clone(),
        )));
    }
    for _ in 0..settings.clients {
        tokio::time::timeout(RUN_LIMIT, connected_rx.recv())
            .await
            .expect("the clients did not connect in time")
            .unwrap();
    }
    let connect_time = connecting.elapsed();
    let (connected_rss, _) = memory_mib(pid);

    // The stalled clients: they get the response's head and the history's
    // first events into their small buffers, then nothing more.
    let socket_addr: std::net::SocketAddr = addr.parse().unwrap();
    let events_path = format!("/v1/sessions/{session}/events");
    let mut stalled = Vec::new();
    for _ in 0..settings.stalled {
        stalled.push(Stalled::open(socket_addr, &events_path, settings.stalled_buffer).await);
    }
    // Once the server has answered each of them, its memory holds what a
    // stalled client costs at rest.
    for client in &stalled {
        tokio::time::timeout(RUN_LIMIT, client.answered())
            .await
            .expect("a stalled client got no answer in time");
    }
    let (stalled_rss, _) = memory_mib(pid);
    let stalled_kernel = kernel_tcp_mib();

    // The answer streams.
    let cpu_before = cpu_seconds(pid);
    let own_pid = std::process::id();
    let clients_cpu_before = cpu_seconds(own_pid);
    let streaming = Instant::now();
    let sent = http
        .post(format!("{base}/{session}/messages"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"parts": [{"type": "text", "text": "Tell me everything."}]}))
        .send()
        .await
        .unwrap();
    assert!(sent.status().is_success(), "{}", sent.status());
    let all = futures::future::join_all(clients);
    let seen: Vec<Seen> = tokio::time::timeout(RUN_LIMIT.saturating_sub(started.elapsed()), all)
        .await
        .expect("the run did not finish in time")
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let stream_time = streaming.elapsed();
    let cpu = cpu_seconds(pid) - cpu_before;
    let clients_cpu = cpu_seconds(own_pid) - clients_cpu_before;
    let (_, hwm) = memory_mib(pid);
    // The answer is over and stored; the stalled clients have not read it.
    let (stalled_after_rss, _) = memory_mib(pid);
    let stalled_after_kernel = kernel_tcp_mib();
    let server_queued = send_queues_kib(socket_addr.port());
    let draining = Instant::now();
    let stalled_answers: Vec<(String, usize)> = tokio::time::timeout(
        RUN_LIMIT.saturating_sub(started.elapsed()),
        futures::future::join_all(stalled.into_iter().map(Stalled::drain)),
    )
    .await
    .expect("the stalled clients did not get the answer in time");
    let drain_time = draining.elapsed();

    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();

    let expected = answer(settings.deltas);
    let complete = seen.iter().filter(|s| s.text == expected).count();
    let stalled_complete = stalled_answers
        .iter()
        .filter(|(text, _)| *text == expected)
        .count();
    let stalled_backlog_kib = stalled_answers.first().map_or(0, |(_, read)| read / 1024);
    let mut delays: Vec<f64> = seen
        .iter()
        .flat_map(|s| s.delta_delays_ms.iter().copied())
        .collect();
    delays.sort_by(f64::total_cmp);
    let mut completed: Vec<f64> = seen.iter().filter_map(|s| s.completed_delay_ms).collect();
    completed.sort_by(f64::total_cmp);
    let events_per_client = seen.first().map_or(0, |s| s.delta_delays_ms.len());

    println!(
        "sse_fanout: {} clients, one session, {} deltas of {DELTA_CHARS} characters at {} deltas/s",
        settings.clients,
        settings.deltas,
        DELTAS_PER_TICK as u128 * 1000 / TICK.as_millis()
    );
    println!(
        "  connect + history, all clients: {:.2} s",
        connect_time.as_secs_f64()
    );
    println!(
        "  stream: {:.2} s, {events_per_client} model_output_delta events per client, {} delivered in all",
        stream_time.as_secs_f64(),
        delays.len()
    );
    println!(
        "  clients with the whole answer: {complete} of {}",
        settings.clients
    );
    println!(
        "  delta delivery delay: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&delays, 50.0),
        percentile(&delays, 90.0),
        percentile(&delays, 99.0),
        percentile(&delays, 100.0)
    );
    println!(
        "  model_output_completed ({} KiB envelope): p50 {:.1} ms, p99 {:.1} ms",
        seen.first().map_or(0, |s| s.completed_bytes) / 1024,
        percentile(&completed, 50.0),
        percentile(&completed, 99.0)
    );
    println!(
        "  server RSS: {idle_rss:.1} MiB idle, {connected_rss:.1} MiB with the clients connected, {hwm:.1} MiB peak"
    );
    println!(
        "  CPU while streaming: server {cpu:.2} s ({:.0}% of one core), clients {clients_cpu:.2} s ({:.0}%)",
        cpu / stream_time.as_secs_f64() * 100.0,
        clients_cpu / stream_time.as_secs_f64() * 100.0
    );
    let buffer = match settings.stalled_buffer {
        0 => "the system's default".to_string(),
        n => format!("{n} B"),
    };
    println!(
        "  {} stalled clients ({buffer} receive buffer): server RSS {stalled_rss:.1} MiB \
         once they are connected, {stalled_after_rss:.1} MiB once the answer is stored \
         and they have read none of its {stalled_backlog_kib} KiB of events",
        settings.stalled,
    );
    println!(
        "  kernel TCP memory (both ends): {stalled_kernel:.1} MiB once they are connected, \
         {stalled_after_kernel:.1} MiB once the answer is stored; the server's send queues \
         then hold {server_queued:.0} KiB",
    );
    println!(
        "  then they read: everything in {:.2} s, the whole answer for {stalled_complete} of {}",
        drain_time.as_secs_f64(),
        settings.stalled
    );
    assert_eq!(
        complete, settings.clients,
        "a client missed part of the answer"
    );
    assert_eq!(
        stalled_complete, settings.stalled,
        "a stalled client missed part of the answer"
    );
}
