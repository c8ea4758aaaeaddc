//! Load on `/v1/rooms`: one room of 50 people and 5 bots, 200 event
//! streams following it, 1000 messages posted by the people, one in ten
//! naming a bot. It reports how long a message takes from its post to each
//! stream, and how long a named bot takes from the post to its first
//! streamed words over a model that answers at once (the server's own
//! wake-to-first-token overhead).
//!
//! ```text
//! cargo bench --bench rooms_load
//! cargo bench --bench rooms_load -- --streams 50 --messages 300 --rate 100
//! cargo bench --bench rooms_load --features nats -- --nats   # over a local nats-server
//! ```
//!
//! Runs once and stops by itself (two minutes at most), on loopback only.
//! The server (the rooms' routes behind the security layer, each person
//! with a token of their own, over a JSONL store in a temporary folder, or
//! with `--nats` a NATS JetStream store on a nats-server it starts)
//! runs on a runtime of its own threads; the people and the streams on
//! another. The people post at a steady rate (`--rate` messages a second,
//! 50 by default), each from their own token; the streams are real HTTP
//! connections parsed as a browser parses them, each opened with one of
//! the people's tokens; the posts start once every stream has received
//! the room's first entry. A message's delay to a stream runs from sending
//! its post to parsing its `chat` event; every stream must get every
//! message. A bot's delay runs from sending the post that names it to a
//! stream parsing the first `chat.chunk` of its answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/load.rs"]
mod load;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use roundtable::chat_runner::TurnLoop;
use roundtable::dispatch::{BotProfile, Participant, Trigger};
use roundtable::providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, Model, OPENAI_COMPLETIONS, Provider,
    ScriptStep, StreamOptions, script_events,
};
use roundtable::server::rooms::RoomsApi;
use roundtable::server::{AccessToken, Security, TokenUsers};
use roundtable::thread_stream::{JsonlStore, ThreadStore};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use load::{ms, percentile, rss_mib, server_cpu};

/// The whole run's limit.
const RUN_LIMIT: Duration = Duration::from_secs(120);
const PEOPLE: usize = 50;
const BOTS: usize = 5;
/// The name of the server runtime's threads.
const SERVER_THREADS: &str = "rooms-load-server";

/// One run's load (`cargo bench --bench rooms_load -- --help`).
#[derive(clap::Parser)]
struct Settings {
    /// SSE streams open on the room.
    #[arg(long, default_value_t = 200)]
    streams: usize,
    /// Messages the people post.
    #[arg(long, default_value_t = 1000)]
    messages: usize,
    /// Posts per second.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// Keep the room in a local nats-server instead of JSONL files.
    #[arg(long)]
    nats: bool,
    /// Passed by `cargo bench`.
    #[arg(long = "bench", hide = true)]
    _bench: bool,
}

fn token(person: usize) -> String {
    format!("rooms-load-person-{person:02}-token-0123456789")
}

/// A model that answers at once: about 300 characters in 4-character
/// deltas.
struct Instant300;

impl Provider for Instant300 {
    fn stream(&self, _model: &Model, _context: &Context, _options: &StreamOptions) -> EventStream {
        let mut reply = AssistantMessage::empty(OPENAI_COMPLETIONS, "mock", "m", 0);
        reply.content.push(AssistantBlock::text(
            "The build passes on the main branch; the flaky test was a race between the \
             writer and the reader of the log, fixed by waiting for the flush before \
             reading. Nothing else changed, and the benchmarks moved by less than their \
             noise. The docs say what the new option does and when to use it.",
        ));
        futures::stream::iter(script_events(ScriptStep::Reply(reply), 4)).boxed()
    }
}

/// The rooms API with five bots woken by name, over `store`, served
/// behind the security layer; its address.
async fn serve(store: Arc<dyn ThreadStore>) -> std::net::SocketAddr {
    let model = Model::new(OPENAI_COMPLETIONS, "mock", "m", "");
    let mut rooms = RoomsApi::builder(store);
    for b in 0..BOTS {
        let profile = BotProfile::new(Trigger::Mention, "You answer questions about the build.");
        let bot = Participant::bot(format!("bot{b}"), format!("Bot {b}"), profile);
        rooms = rooms.bot(bot, TurnLoop::new(Arc::new(Instant300), model.clone()));
    }
    let rooms = rooms.open().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut users = TokenUsers::new();
    for p in 0..PEOPLE {
        users = users.with(
            &AccessToken::new(&token(p)).unwrap(),
            format!("person{p:02}"),
        );
    }
    let app = Security::new(addr, users).protect(rooms.router());
    tokio::spawn(async move {
        axum::serve(listener.tap_io(|tcp| tcp.set_nodelay(true).unwrap()), app)
            .await
            .unwrap();
    });
    addr
}

/// When each message was posted, by its index.
type Posts = Mutex<HashMap<usize, Instant>>;

/// What one stream saw: each message's delay, and each bot turn's first
/// chunk (by trigger seq).
struct Seen {
    delays: Vec<Duration>,
    first_chunks: Vec<(u64, Instant)>,
    turns: HashMap<String, u64>,
}

/// Follows the room's events until `messages` human messages came and the
/// room has been quiet for a second (the last bots' answers); says on
/// `ready` when the room's first entry came (the stream follows the room).
async fn follow(
    http: reqwest::Client,
    url: String,
    token: String,
    posts: Arc<Posts>,
    messages: usize,
    ready: mpsc::Sender<()>,
) -> Seen {
    let response = http.get(url).bearer_auth(token).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut events = response.bytes_stream().eventsource();
    let mut seen = Seen {
        delays: Vec::with_capacity(messages),
        first_chunks: Vec::new(),
        turns: HashMap::new(),
    };
    let mut got = 0;
    let mut ready = Some(ready);
    loop {
        let next = if got < messages {
            events.next().await
        } else {
            match tokio::time::timeout(Duration::from_secs(1), events.next()).await {
                Ok(next) => next,
                Err(_) => break,
            }
        };
        let event = next.expect("the stream goes on").unwrap();
        let now = Instant::now();
        if let Some(ready) = ready.take() {
            ready.send(()).await.unwrap();
        }
        match event.event.as_str() {
            "chat" => {
                let entry: Value = serde_json::from_str(&event.data).unwrap();
                let text = entry["text"].as_str().unwrap_or_default();
                let Some(k) = text.split_whitespace().nth(1).and_then(|k| k.parse().ok()) else {
                    continue;
                };
                let sent = posts.lock().unwrap().get(&k).copied();
                seen.delays
                    .push(now - sent.expect("posted before it is seen"));
                got += 1;
            }
            "turn.started" => {
                let entry: Value = serde_json::from_str(&event.data).unwrap();
                let turn = entry["turn"].as_str().unwrap().to_string();
                seen.turns.insert(turn, entry["trigger"].as_u64().unwrap());
            }
            "chat.chunk" => {
                let entry: Value = serde_json::from_str(&event.data).unwrap();
                let turn = entry["turn"].as_str().unwrap_or_default();
                if let Some(trigger) = seen.turns.remove(turn) {
                    seen.first_chunks.push((trigger, now));
                }
            }
            _ => {}
        }
    }
    seen
}

fn main() {
    let settings = <Settings as clap::Parser>::parse();
    let started = Instant::now();
    let data = tempfile::tempdir().unwrap();
    let server = load::runtime(Some(SERVER_THREADS));
    let (store, _nats) = server.block_on(open_store(&settings, data.path()));
    let addr = server.block_on(serve(store));
    let clients = load::runtime(None);
    let run = run(&settings, format!("http://{addr}"));
    load::finish(clients, server, run, RUN_LIMIT, started);
}

/// The store the rooms live in, and the nats-server it needs, if any.
async fn open_store(
    settings: &Settings,
    data: &std::path::Path,
) -> (Arc<dyn ThreadStore>, Option<Box<dyn std::any::Any>>) {
    if settings.nats {
        #[cfg(feature = "nats")]
        {
            use roundtable::thread_stream::{NatsOptions, NatsStore};
            let server = roundtable_test_support::nats::NatsServer::start();
            let store = NatsStore::connect(&server.url(), NatsOptions::default()).await;
            let store: Arc<dyn ThreadStore> = Arc::new(store.unwrap());
            return (store, Some(Box::new(server)));
        }
        #[cfg(not(feature = "nats"))]
        panic!("--nats needs the `nats` feature");
    }
    (Arc::new(JsonlStore::open(data).await.unwrap()), None)
}

async fn run(settings: &Settings, base: String) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(PEOPLE)
        .build()
        .unwrap();
    let people: Vec<String> = (1..PEOPLE).map(|p| format!("person{p:02}")).collect();
    let bots: Vec<String> = (0..BOTS).map(|b| format!("bot{b}")).collect();
    let open = json!({"title": "Load", "humans": people, "bots": bots});
    let room: Value = http
        .post(format!("{base}/v1/rooms"))
        .bearer_auth(token(0))
        .json(&open)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = room["id"].as_str().expect("a room").to_string();
    let posts = Arc::new(Posts::default());
    let (ready, mut following) = mpsc::channel(settings.streams.max(1));
    let streams: Vec<_> = (0..settings.streams)
        .map(|s| {
            let url = format!("{base}/v1/rooms/{id}/events");
            let follow = follow(
                http.clone(),
                url,
                token(s % PEOPLE),
                posts.clone(),
                settings.messages,
                ready.clone(),
            );
            tokio::spawn(follow)
        })
        .collect();
    // The posts start once every stream follows the room.
    for _ in 0..settings.streams {
        following
            .recv()
            .await
            .expect("every stream follows the room");
    }
    println!(
        "{PEOPLE} people, {BOTS} bots, {} streams, {} messages at {}/s, {}",
        settings.streams,
        settings.messages,
        settings.rate,
        if settings.nats {
            "NATS JetStream"
        } else {
            "JSONL"
        },
    );
    let cpu = server_cpu(SERVER_THREADS);
    let seqs = post_all(settings, &http, &base, &id, &posts).await;
    let seen: Vec<Seen> = futures::future::join_all(streams)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let cpu = server_cpu(SERVER_THREADS).saturating_sub(cpu);
    report(&seen, &seqs, &posts);
    println!(
        "server CPU: {:.2} ms per message (its bots' turns and every stream's share included); RSS {:.0} MiB (server and clients)",
        ms(cpu) / settings.messages as f64,
        rss_mib(),
    );
}

/// Posts every message at the steady rate; the seq of each message that
/// names a bot, with its index.
async fn post_all(
    settings: &Settings,
    http: &reqwest::Client,
    base: &str,
    room: &str,
    posts: &Arc<Posts>,
) -> HashMap<u64, usize> {
    let every = Duration::from_secs_f64(1.0 / settings.rate);
    let mut tick = tokio::time::interval(every);
    let mut named = Vec::new();
    for k in 0..settings.messages {
        tick.tick().await;
        let named_bot = (k % 10 == 9).then(|| format!("bot{}", k / 10 % BOTS));
        let mentions: Vec<&String> = named_bot.iter().collect();
        let body = json!({"text": format!("message {k} about the build"), "mentions": mentions});
        let request = http
            .post(format!("{base}/v1/rooms/{room}/messages"))
            .bearer_auth(token(k % PEOPLE))
            .json(&body);
        let posts = posts.clone();
        let post = tokio::spawn(async move {
            posts.lock().unwrap().insert(k, Instant::now());
            let posted: Value = request.send().await.unwrap().json().await.unwrap();
            posted["seq"].as_u64().expect("posted")
        });
        if named_bot.is_some() {
            named.push((k, post));
        }
    }
    let mut seqs = HashMap::new();
    for (k, post) in named {
        seqs.insert(post.await.unwrap(), k);
    }
    seqs
}

fn report(seen: &[Seen], named: &HashMap<u64, usize>, posts: &Posts) {
    let mut delays: Vec<Duration> = seen.iter().flat_map(|s| s.delays.iter().copied()).collect();
    delays.sort();
    let sent = posts.lock().unwrap();
    let mut wakes: Vec<Duration> = seen
        .iter()
        .flat_map(|s| &s.first_chunks)
        .filter_map(|(trigger, at)| Some(*at - sent[named.get(trigger)?]))
        .collect();
    wakes.sort();
    println!(
        "post -> stream: {} deliveries, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        delays.len(),
        ms(percentile(&delays, 0.5)),
        ms(percentile(&delays, 0.99)),
        ms(*delays.last().unwrap()),
    );
    if wakes.is_empty() {
        println!("post -> first chunk of the named bot: none seen");
        return;
    }
    println!(
        "post -> first chunk of the named bot: {} turns x streams, p50 {:.1} ms, p99 {:.1} ms",
        wakes.len(),
        ms(percentile(&wakes, 0.5)),
        ms(percentile(&wakes, 0.99)),
    );
}
