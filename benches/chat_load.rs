//! Load on `/api/chat`: 200 chats at once, each a real HTTP request whose
//! NDJSON answer is read line by line, against a scripted model with no
//! latency, so what is measured is the server, the engine and the store.
//!
//! ```text
//! cargo bench --bench chat_load
//! cargo bench --bench chat_load -- --clients 50 --rounds 3
//! ```
//!
//! Runs once and stops by itself (two minutes at most), on loopback only.
//! The server (everything a daemon serves, `app_router` behind the
//! security layer, over a JSONL store in a temporary folder laid out as the
//! daemon lays it out (a folder per session with its `events.ndjson`,
//! `session.json` and files), the engine's default settings) runs on a runtime of its own threads; the clients on
//! another. Each round, every client sends one prompt at the same moment:
//! in the first round each starts a new session, in the next ones it
//! continues its session. A request's time to first delta runs from
//! sending it to parsing its first `delta` line; its duration, to the end
//! of its stream (the session settled). Every stream must carry the whole
//! answer and end settled. The process's resident memory is printed after
//! each round, with the server's CPU time per turn (user and system time
//! of the server runtime's threads, its blocking threads included, over
//! the round's turns).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/load.rs"]
mod load;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
use futures::StreamExt;
use roundtable::providers::{AssistantMessage, ScriptedProvider};
use roundtable::server::{
    AccessToken, ChatApi, ChatSettings, HostToken, Security, SessionsApi, app_router,
};
use roundtable::sessions::{FolderBlobStore, SessionEngine};
use roundtable::thread_stream::{JsonlLayout, JsonlOptions, JsonlStore};
use roundtable_test_support::scripted::{model, text};

use load::{ms, percentile, rss_mib, server_cpu};
use serde_json::{Value, json};

const TOKEN: &str = "chat-load-bench-token-0123456789";
/// The whole run's limit.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// One run's load (`cargo bench --bench chat_load -- --help`).
#[derive(clap::Parser)]
struct Settings {
    /// Concurrent chats.
    #[arg(long, default_value_t = 200)]
    clients: usize,
    /// Prompts each chat sends.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Passed by `cargo bench`.
    #[arg(long = "bench", hide = true)]
    _bench: bool,
}

/// The answer to the `i`-th prompt: about 300 characters, so about 19
/// deltas from the scripted model.
fn answer(i: usize) -> String {
    format!(
        "Answer {i}: the build passes on the main branch, the flaky test was a race between \
         the writer and the reader of the log, fixed by waiting for the flush before reading. \
         Nothing else changed; the benchmarks moved by less than their noise, and the docs \
         say what the new option does and when to use it."
    )
}

/// One request's figures.
struct Measured {
    first_delta: Duration,
    total: Duration,
    session: String,
}

/// Sends one prompt and reads its stream to the end.
async fn chat(http: &reqwest::Client, url: &str, session: Option<&str>, prompt: &str) -> Measured {
    let mut body = json!({"message": prompt});
    if let Some(session) = session {
        body["sessionId"] = json!(session);
    }
    let sent = Instant::now();
    let response = http
        .post(url)
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    let mut bytes = response.bytes_stream();
    let mut buffer = Vec::new();
    let mut first_delta = None;
    let mut text = String::new();
    let mut last = Value::Null;
    let mut session = String::new();
    while let Some(chunk) = bytes.next().await {
        buffer.extend_from_slice(&chunk.unwrap());
        while let Some(at) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=at).collect();
            let event: Value = serde_json::from_slice(&line).unwrap();
            match event["type"].as_str() {
                Some("delta") => {
                    first_delta.get_or_insert_with(|| sent.elapsed());
                    text.push_str(event["text"].as_str().unwrap());
                }
                Some("start") => session = event["sessionId"].as_str().unwrap().to_string(),
                Some("error") => panic!("the stream failed: {event}"),
                _ => {}
            }
            last = event;
        }
    }
    assert_eq!(last["type"], "done", "the stream ends with its turn's done");
    assert!(text.starts_with("Answer "), "{text}");
    Measured {
        first_delta: first_delta.expect("no delta"),
        total: sent.elapsed(),
        session,
    }
}

/// Streamed lines go out as they are written: without `TCP_NODELAY`, a
/// small write waits for the client's delayed ACK of the previous one
/// (40 ms on Linux).
fn no_delay(tcp: &mut tokio::net::TcpStream) {
    let _ = tcp.set_nodelay(true);
}

/// The name of the server runtime's threads, by which their CPU time is
/// told from the clients'.
const SERVER_THREADS: &str = "chat-load-server";

fn main() {
    let settings = <Settings as clap::Parser>::parse();
    let started = Instant::now();
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let replies: Vec<AssistantMessage> = (0..settings.clients * settings.rounds)
        .map(|i| text(&answer(i)))
        .collect();

    // The server, on its own runtime.
    let server = load::runtime(Some(SERVER_THREADS));
    // The scripted provider keeps every request it is sent (for tests):
    // they are dropped after each round, so that the RSS column shows what
    // the server keeps.
    let provider = Arc::new(ScriptedProvider::new(replies));
    let engine_provider = provider.clone();
    let data_dir = data.path().to_path_buf();
    let workspace_dir = workspace.path().to_path_buf();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    server.spawn(async move {
        // The daemon's layout: a folder per session holding its
        // `events.ndjson`, `session.json` and files.
        let options = JsonlOptions {
            layout: JsonlLayout::folder_per_thread("events.ndjson"),
            ..JsonlOptions::default()
        };
        let store = Arc::new(JsonlStore::open_with(&data_dir, options).await.unwrap());
        let engine = SessionEngine::builder(store, engine_provider, model())
            .snapshot_dir(&data_dir)
            .blob_store(Arc::new(FolderBlobStore::new(&data_dir)))
            .build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let chat = ChatApi::new(engine.clone())
            .workspace(workspace_dir)
            .settings(ChatSettings {
                auto_verify: Some(false),
                ..ChatSettings::default()
            });
        let app = Security::new(addr, HostToken::new(AccessToken::new(TOKEN).unwrap()))
            .protect(app_router(SessionsApi::new(engine), chat));
        addr_tx.send(addr).unwrap();
        axum::serve(listener.tap_io(no_delay), app).await.unwrap();
    });
    let addr = addr_rx.recv().unwrap();
    let url = format!("http://{addr}/api/chat");

    let clients = load::runtime(None);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(settings.clients)
        .build()
        .unwrap();
    let run = async {
        let mut sessions: Vec<Option<String>> = vec![None; settings.clients];
        let mut first_deltas = Vec::new();
        let mut totals = Vec::new();
        let mut busy = Duration::ZERO;
        println!(
            "{} clients, {} rounds, server at {addr}",
            settings.clients, settings.rounds
        );
        println!(
            "round  wall (ms)  req/s   ttfd p50  ttfd p99  total p99 (ms)  RSS (MiB)  server CPU/turn (ms)"
        );
        let mut server_total = Duration::ZERO;
        for round in 0..settings.rounds {
            let wall = Instant::now();
            let cpu_before = server_cpu(SERVER_THREADS);
            let requests = sessions.iter().enumerate().map(|(i, session)| {
                let http = http.clone();
                let url = url.clone();
                let session = session.clone();
                tokio::spawn(async move {
                    let prompt = format!("round {round}, client {i}: how is the build?");
                    chat(&http, &url, session.as_deref(), &prompt).await
                })
            });
            let measured: Vec<Measured> = futures::future::join_all(requests)
                .await
                .into_iter()
                .map(Result::unwrap)
                .collect();
            let wall = wall.elapsed();
            let server_used = server_cpu(SERVER_THREADS).saturating_sub(cpu_before);
            server_total += server_used;
            busy += wall;
            provider.take_requests();
            let mut ttfd: Vec<Duration> = measured.iter().map(|m| m.first_delta).collect();
            let mut total: Vec<Duration> = measured.iter().map(|m| m.total).collect();
            ttfd.sort();
            total.sort();
            println!(
                "{round:>5}  {:>9.0}  {:>5.0}  {:>8.1}  {:>8.1}  {:>14.1}  {:>9.1}  {:>20.2}",
                ms(wall),
                measured.len() as f64 / wall.as_secs_f64(),
                ms(percentile(&ttfd, 0.5)),
                ms(percentile(&ttfd, 0.99)),
                ms(percentile(&total, 0.99)),
                rss_mib(),
                ms(server_used) / measured.len() as f64,
            );
            for (slot, m) in sessions.iter_mut().zip(&measured) {
                *slot = Some(m.session.clone());
            }
            first_deltas.extend(ttfd);
            totals.extend(total);
        }
        first_deltas.sort();
        totals.sort();
        let requests = first_deltas.len();
        println!(
            "server CPU: {:.2} ms per turn over all rounds",
            ms(server_total) / requests as f64
        );
        println!(
            "all: {requests} requests in {:.1} s of rounds: {:.0} req/s; time to first delta p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; stream p50 {:.1} ms, p99 {:.1} ms",
            busy.as_secs_f64(),
            requests as f64 / busy.as_secs_f64(),
            ms(percentile(&first_deltas, 0.5)),
            ms(percentile(&first_deltas, 0.99)),
            ms(*first_deltas.last().unwrap()),
            ms(percentile(&totals, 0.5)),
            ms(percentile(&totals, 0.99)),
        );
    };
    load::finish(clients, server, run, RUN_LIMIT, started);
}
