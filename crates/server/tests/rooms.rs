//! `/v1/rooms` over real HTTP and SSE: two people (alice and bob, each
//! with a token) and four scripted bots (Archivist wakes when named and
//! has a read-only `lookup` tool, Chatty answers everything and asks
//! Archivist to check, Rusty joins conversations about Rust, Clerk files
//! papers with a tool the room's members approve) in rooms kept in a JSONL
//! store. Every answer is checked against the OpenAPI document. The room
//! page is driven in headless Chromium in `rooms/page.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "rooms/page.rs"]
mod page;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use roundtable_chat_runner::TurnLoop;
use roundtable_dispatch::{BotProfile, Participant, Policy, Topic, Trigger};
use roundtable_providers::{
    AssistantMessage, Context, EventStream, Message, Model, Provider, ScriptStep, StreamOptions,
    script_events,
};
use roundtable_server::rooms::{RoomApprovals, RoomsApi, RoomsApiBuilder};
use roundtable_test_support::messages::{message_text, result_text};
use roundtable_test_support::tools::lookup_tools;
use roundtable_thread_stream::{JsonlStore, ThreadStore};
use roundtable_tools::ToolKind;
use serde_json::{Value, json};
use support::*;

const ALICE: &str = TOKEN;
const BOB: &str = BOB_TOKEN;

/// A scripted bot: it names whoever spoke last in its view; Chatty also
/// asks `@archivist` to check; Archivist looks up what it is asked to
/// ("look up <key>") and says what it found.
struct Voice {
    name: &'static str,
    calls: AtomicUsize,
}

impl Voice {
    fn new(name: &'static str) -> Arc<Self> {
        Arc::new(Self {
            name,
            calls: AtomicUsize::new(0),
        })
    }

    fn reply(&self, context: &Context) -> AssistantMessage {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let said = match context.messages.last() {
            Some(Message::ToolResult(r)) => {
                return text(&format!("{}: found {}", self.name, result_text(r)));
            }
            Some(m) => message_text(m),
            None => String::new(),
        };
        // Others may have spoken after the request and before this turn
        // began: a request is looked for in everything said since.
        let has = |tool: &str| context.tools.iter().any(|t| t.name == tool);
        let asked = |what: &str| said.lines().rev().find(|line| line.contains(what));
        if has("file") && asked("please file").is_some() {
            return call(&format!("{}-{n}", self.name), "file", json!({}));
        }
        if has("lookup")
            && let Some(line) = asked("look up ")
        {
            let at = line.find("look up ").unwrap_or_default();
            let key = line[at + 8..].trim_end_matches(['.', '?', '!']);
            return call(&format!("{}-{n}", self.name), "lookup", json!({"key": key}));
        }
        let last = said.lines().last().unwrap_or_default();
        let speaker = last
            .strip_prefix('[')
            .and_then(|rest| rest.split_once("]: "))
            .map_or("someone", |(speaker, _)| speaker);
        match self.name {
            "Chatty" => text(&format!(
                "Chatty: thanks {speaker}, @archivist can you check?"
            )),
            name => text(&format!("{name}: noted, {speaker}")),
        }
    }
}

impl Provider for Voice {
    fn stream(&self, _model: &Model, context: &Context, _options: &StreamOptions) -> EventStream {
        let events = script_events(ScriptStep::Reply(self.reply(context)), 8);
        futures::stream::iter(events).boxed()
    }
}

/// The three bots of the catalogue.
fn catalogue(rooms: RoomsApiBuilder) -> RoomsApiBuilder {
    let archivist = Participant::bot(
        "archivist",
        "Archivist",
        BotProfile::new(Trigger::Mention, "You keep the archive."),
    );
    let chatty = Participant::bot(
        "chatty",
        "Chatty",
        BotProfile::new(Trigger::Always, "You keep the conversation going."),
    );
    let rusty = Participant::bot(
        "rusty",
        "Rusty",
        BotProfile::new(Trigger::Ambient, "You answer Rust questions.")
            .with_topics([Topic::keyword("rust")]),
    );
    let clerk = Participant::bot(
        "clerk",
        "Clerk",
        BotProfile::new(Trigger::Mention, "You file papers, once a member agrees."),
    );
    let turns = |name| TurnLoop::new(Voice::new(name), model());
    let approvals = RoomApprovals::new();
    rooms
        .bot(archivist, turns("Archivist").with_tools(lookup_tools()))
        .bot(chatty, turns("Chatty"))
        .bot(rusty, turns("Rusty"))
        .bot(
            clerk,
            turns("Clerk")
                .with_tools(filing_tools())
                .with_approver(Arc::new(approvals.clone())),
        )
        .approvals(approvals)
}

/// How many times Clerk's `file` tool ran.
static FILED: AtomicUsize = AtomicUsize::new(0);

/// Clerk's `file` tool: a write, so every call waits for a member.
fn filing_tools() -> Arc<roundtable_tools::ToolRegistry> {
    let mut tools = roundtable_tools::ToolRegistry::new();
    let file = roundtable_test_support::tools::tool("file", ToolKind::Write, |_, _| async {
        FILED.fetch_add(1, Ordering::SeqCst);
        Ok(roundtable_tools::ToolResult::text("filed"))
    });
    tools.register(file).unwrap();
    Arc::new(tools)
}

/// A server with rooms in their own JSONL store, and the folders it uses.
struct Rooms {
    server: TestServer,
    rooms: RoomsApi,
    _fixture: Fixture,
    _folder: tempfile::TempDir,
}

impl Rooms {
    async fn start() -> Self {
        let fixture = Fixture::new();
        let folder = tempfile::tempdir().unwrap();
        let store: Arc<dyn ThreadStore> = Arc::new(JsonlStore::open(folder.path()).await.unwrap());
        let rooms = catalogue(RoomsApi::builder(store))
            .policy(Policy {
                loop_events: 4,
                ..Policy::default()
            })
            .chunk_interval(Duration::from_millis(2))
            .message_body_limit(32 * 1024)
            .open()
            .await
            .unwrap();
        let engine = fixture.engine(fixture.store().await, silent());
        let options = Options {
            rooms: Some(rooms.clone()),
            ..Options::default()
        };
        let server = TestServer::start_with(engine, options).await;
        Self {
            server,
            rooms,
            _fixture: fixture,
            _folder: folder,
        }
    }

    /// `method path` as the holder of `token`, with a JSON body.
    async fn call(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .server
            .http
            .request(method, self.server.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        send(request).await
    }

    async fn get(&self, token: &str, path: &str) -> (StatusCode, Value) {
        self.call(token, Method::GET, path, None).await
    }

    async fn post(&self, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(token, Method::POST, path, Some(body)).await
    }

    /// Opens a room as the holder of `token`; its id.
    async fn open(&self, token: &str, humans: &[&str], bots: &[&str]) -> String {
        let body = json!({"title": "Launch", "humans": humans, "bots": bots});
        let (status, room) = self.post(token, "/v1/rooms", body).await;
        assert_eq!(status, StatusCode::CREATED, "{room}");
        room["id"].as_str().unwrap().to_string()
    }

    /// Posts `text` as the holder of `token`; its seq.
    async fn say(&self, token: &str, room: &str, text: &str) -> u64 {
        let path = format!("/v1/rooms/{room}/messages");
        let (status, posted) = self.post(token, &path, json!({"text": text})).await;
        assert_eq!(status, StatusCode::CREATED, "{posted}");
        posted["seq"].as_u64().unwrap()
    }

    /// Every entry of the room, read page by page.
    async fn entries(&self, room: &str) -> Vec<Value> {
        let mut entries = Vec::new();
        loop {
            let path = format!("/v1/rooms/{room}/entries?after={}&limit=7", entries.len());
            let (status, page) = self.get(ALICE, &path).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            entries.extend(page["entries"].as_array().unwrap().iter().cloned());
            if !page["more"].as_bool().unwrap() {
                return entries;
            }
        }
    }

    /// The room's last seq.
    async fn last_seq(&self, room: &str) -> u64 {
        let (_, page) = self
            .get(ALICE, &format!("/v1/rooms/{room}/entries?limit=1"))
            .await;
        page["last_seq"].as_u64().unwrap()
    }

    /// Waits until the bots are done and the room stops growing (a halt is
    /// recorded just after the entry that caused it).
    async fn settle(&self, room: &str) {
        loop {
            self.rooms.idle().await.unwrap();
            let tip = self.last_seq(room).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.rooms.idle().await.unwrap();
            if self.last_seq(room).await == tip {
                return;
            }
        }
    }

    /// The room's event stream for the holder of `token`, after `after`.
    async fn events(&self, token: &str, room: &str, after: Option<u64>) -> Events {
        let mut request = self
            .server
            .http
            .get(self.server.url(&format!("/v1/rooms/{room}/events")))
            .bearer_auth(token);
        if let Some(after) = after {
            request = request.header("Last-Event-ID", after.to_string());
        }
        Events::open(request).await
    }
}

/// (author, trigger) of every `turn.started`.
fn turns(entries: &[Value]) -> Vec<(String, u64)> {
    of_type(entries, "turn.started")
        .map(|e| {
            (
                e["author"].as_str().unwrap().to_string(),
                e["trigger"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn of_type<'a>(entries: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    entries.iter().filter(move |e| e["type"] == kind)
}

/// The seqs of the loop guard's halts.
fn halts(entries: &[Value]) -> Vec<u64> {
    of_type(entries, "signal.room.halted")
        .filter(|e| e["data"]["halt"] == "loop_guard")
        .map(|e| e["data"]["trigger"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_and_three_bots_share_a_room_and_the_loop_guard_stops_the_bots() {
    let rooms = Rooms::start().await;
    let room = rooms
        .open(ALICE, &["bob"], &["archivist", "chatty", "rusty"])
        .await;
    let mut watching = rooms.events(BOB, &room, None).await;

    let asked = rooms
        .say(ALICE, &room, "@archivist please look up invoices")
        .await;
    rooms.settle(&room).await;
    let entries = rooms.entries(&room).await;
    // Archivist's tool call and its result are in the room.
    let result = of_type(&entries, "pi.tool_result")
        .next()
        .expect("a tool result");
    assert_eq!(result["author"], "archivist");
    assert!(
        result["message"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("shelf 7")
    );
    // Chatty and Archivist ping-pong until the loop guard stops them.
    let first = halts(&entries);
    assert!(first.iter().all(|&seq| seq > asked), "{first:?}");
    assert!(!first.is_empty(), "no halt in {entries:#?}");
    assert!(turns(&entries).iter().all(|(bot, _)| bot != "rusty"));

    // A person speaking resets the guard: Rusty joins on its topic.
    let rust = rooms.say(BOB, &room, "would Rust help here?").await;
    rooms.settle(&room).await;
    let entries = rooms.entries(&room).await;
    assert!(turns(&entries).contains(&("rusty".to_string(), rust)));
    assert!(
        halts(&entries).iter().any(|&seq| seq > rust),
        "no second halt"
    );

    // Bob's stream saw every entry once, in order, each named by its type.
    let last = rooms.last_seq(&room).await;
    let seen = watching.take(last as usize).await;
    for (i, message) in seen.iter().enumerate() {
        assert_eq!(message.id, (i + 1).to_string());
        assert_eq!(message.event, message.data["type"].as_str().unwrap());
    }
    let kinds: Vec<&str> = seen.iter().map(|m| m.event.as_str()).collect();
    for kind in [
        "signal.room.opened",
        "chat",
        "turn.started",
        "chat.chunk",
        "pi.assistant",
        "pi.tool_result",
        "turn.ended",
        "signal.room.halted",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    assert_eq!(seen[asked as usize - 1].data["author"], "alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_wake_the_right_bots() {
    let rooms = Rooms::start().await;
    let room = rooms.open(ALICE, &["bob"], &["archivist", "rusty"]).await;
    let path = format!("/v1/rooms/{room}/messages");
    let hello = rooms.say(ALICE, &room, "hello everyone").await;
    let named = rooms.say(ALICE, &room, "@Archivist hi").await;
    rooms.settle(&room).await;
    let topic = rooms.say(BOB, &room, "any rust tips?").await;
    rooms.settle(&room).await;
    let (status, both) = rooms
        .post(
            ALICE,
            &path,
            json!({"text": "@rusty, thoughts? and @bob", "mentions": ["archivist"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{both}");
    assert_eq!(both["mentions"], json!(["archivist", "rusty", "bob"]));
    rooms.settle(&room).await;

    let entries = rooms.entries(&room).await;
    let mut woken = turns(&entries);
    woken.sort();
    let both = both["seq"].as_u64().unwrap();
    let want = [
        ("archivist", named),
        ("archivist", both),
        ("rusty", topic),
        ("rusty", both),
    ];
    let want: Vec<(String, u64)> = want.iter().map(|(b, s)| (b.to_string(), *s)).collect();
    assert_eq!(woken, want);
    assert!(woken.iter().all(|(_, seq)| *seq != hello));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_members_see_a_room_and_nobody_posts_as_someone_else() {
    let rooms = Rooms::start().await;
    let room = rooms.open(ALICE, &[], &["chatty"]).await;
    let base = format!("/v1/rooms/{room}");
    // Bob is no member: the room does not exist for him.
    for path in [base.clone(), format!("{base}/entries")] {
        assert_error(
            &rooms.get(BOB, &path).await,
            StatusCode::NOT_FOUND,
            "not_found",
        );
    }
    let hi = json!({"text": "hi"});
    assert_error(
        &rooms
            .post(BOB, &format!("{base}/messages"), hi.clone())
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let (_, listed) = rooms.get(BOB, "/v1/rooms").await;
    assert_eq!(listed["rooms"], json!([]));
    let stream = rooms
        .server
        .http
        .get(rooms.server.url(&format!("{base}/events")))
        .bearer_auth(BOB);
    assert_error(&send(stream).await, StatusCode::NOT_FOUND, "not_found");

    // The author comes from the token: a body naming one is refused.
    let tip = rooms.last_seq(&room).await;
    let forged = json!({"text": "I am a bot", "author": "chatty"});
    let refused = rooms.post(ALICE, &format!("{base}/messages"), forged).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid_field");
    assert_eq!(rooms.last_seq(&room).await, tip);
    let seq = rooms.say(ALICE, &room, "hello").await;
    let entries = rooms.entries(&room).await;
    assert_eq!(entries[seq as usize - 1]["author"], "alice");

    // Once added, Bob sees it; once removed, his stream ends and it is gone.
    let (status, _) = rooms
        .post(ALICE, &format!("{base}/members"), json!({"user": "bob"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, listed) = rooms.get(BOB, "/v1/rooms").await;
    assert_eq!(
        (status, listed["rooms"][0]["id"].as_str()),
        (StatusCode::OK, Some(room.as_str()))
    );
    rooms.settle(&room).await;
    let mut watching = rooms
        .events(BOB, &room, Some(rooms.last_seq(&room).await))
        .await;
    let (status, _) = rooms
        .call(ALICE, Method::DELETE, &format!("{base}/members/bob"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(watching.next().await.event, "signal.room.left");
    assert!(watching.ended().await, "the stream outlived the membership");
    assert_error(
        &rooms.get(BOB, &base).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_after_any_seq_gives_exactly_the_rest() {
    let rooms = Rooms::start().await;
    let room = rooms.open(ALICE, &["bob"], &["chatty", "archivist"]).await;
    rooms.say(ALICE, &room, "good morning").await;
    rooms.say(BOB, &room, "@archivist look up minutes").await;
    rooms.settle(&room).await;
    let entries = rooms.entries(&room).await;
    let last = entries.len() as u64;
    assert_eq!(rooms.last_seq(&room).await, last);
    for after in 0..=last {
        let mut events = rooms.events(BOB, &room, Some(after)).await;
        let rest = events.take((last - after) as usize).await;
        let ids: Vec<u64> = rest.iter().map(|m| m.id.parse().unwrap()).collect();
        assert_eq!(
            ids,
            ((after + 1)..=last).collect::<Vec<_>>(),
            "after {after}"
        );
        for message in &rest {
            assert_eq!(
                message.data,
                entries[message.id.parse::<usize>().unwrap() - 1]
            );
        }
    }
    // From the tip on, the stream goes live.
    let mut events = rooms.events(BOB, &room, Some(last)).await;
    let next = rooms.say(ALICE, &room, "and now?").await;
    assert_eq!(events.next().await.id, next.to_string());
    // Reading back by `before` pages gives the same entries.
    let (_, page) = rooms
        .get(ALICE, &format!("/v1/rooms/{room}/entries?before=4&limit=2"))
        .await;
    let seqs: Vec<u64> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!((seqs, page["more"].as_bool()), (vec![2, 3], Some(true)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_mutes_a_bot_in_one_room_only() {
    let rooms = Rooms::start().await;
    let quiet = rooms.open(ALICE, &[], &["chatty"]).await;
    let loud = rooms.open(ALICE, &[], &["chatty"]).await;
    let path = format!("/v1/rooms/{quiet}/overrides/chatty");
    let (status, room) = rooms
        .call(ALICE, Method::PUT, &path, Some(json!({"mode": "mute"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{room}");
    assert_eq!(room["overrides"], json!({"chatty": "mute"}));
    let muted = rooms.say(ALICE, &quiet, "anyone there? @chatty").await;
    let heard = rooms.say(ALICE, &loud, "anyone there?").await;
    rooms.settle(&quiet).await;
    rooms.settle(&loud).await;
    assert!(turns(&rooms.entries(&quiet).await).is_empty());
    assert_eq!(
        turns(&rooms.entries(&loud).await),
        [("chatty".to_string(), heard)]
    );

    // Mention-only: Chatty answers when named, and no longer to everything.
    let body = Some(json!({"mode": "mention_only"}));
    assert_eq!(
        rooms.call(ALICE, Method::PUT, &path, body).await.0,
        StatusCode::OK
    );
    rooms.say(ALICE, &quiet, "plain words").await;
    let named = rooms.say(ALICE, &quiet, "@chatty now?").await;
    rooms.settle(&quiet).await;
    assert_eq!(
        turns(&rooms.entries(&quiet).await),
        [("chatty".to_string(), named)]
    );
    let (status, room) = rooms.call(ALICE, Method::DELETE, &path, None).await;
    assert_eq!((status, &room["overrides"]), (StatusCode::OK, &json!({})));
    assert!(muted < named);
    // An override names a bot of the room.
    let human = format!("/v1/rooms/{quiet}/overrides/alice");
    let refused = rooms
        .call(ALICE, Method::PUT, &human, Some(json!({"mode": "mute"})))
        .await;
    assert_error(&refused, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_a_typed_error_and_nothing_is_stored() {
    let rooms = Rooms::start().await;
    let unknown = json!({"title": "x", "bots": ["oracle"]});
    assert_error(
        &rooms.post(ALICE, "/v1/rooms", unknown).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    assert_eq!(rooms.get(ALICE, "/v1/rooms").await.1["rooms"], json!([]));
    let room = rooms.open(ALICE, &["bob"], &["archivist"]).await;
    let tip = rooms.last_seq(&room).await;
    let path = format!("/v1/rooms/{room}/messages");
    let cases = [
        (
            json!({"text": "hi", "mentions": ["carol"]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
        ),
        (
            json!({"text": "@chatty hi"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
        ),
        (
            json!({"text": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
        ),
        (
            json!({"text": "x".repeat(20_000)}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
        (
            json!({"text": "x".repeat(40_000)}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
        ),
    ];
    for (body, status, code) in cases {
        assert_error(&rooms.post(ALICE, &path, body).await, status, code);
    }
    let malformed = rooms
        .server
        .http
        .post(rooms.server.url(&path))
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .body("{\"text\": ");
    assert_error(
        &send(malformed).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    let plain = rooms
        .server
        .http
        .post(rooms.server.url(&path))
        .bearer_auth(ALICE)
        .body("hi");
    assert_error(
        &send(plain).await,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let members = format!("/v1/rooms/{room}/members");
    assert_error(
        &rooms.post(ALICE, &members, json!({"bot": "oracle"})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    assert_error(
        &rooms.post(ALICE, &members, json!({"user": "bob"})).await,
        StatusCode::CONFLICT,
        "conflict",
    );
    assert_error(
        &rooms.post(ALICE, &members, json!({"user": "a b"})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_field",
    );
    let stream = rooms
        .server
        .http
        .get(rooms.server.url(&format!("/v1/rooms/{room}/events")))
        .bearer_auth(ALICE)
        .header("Last-Event-ID", "seven");
    assert_error(
        &send(stream).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    assert_error(
        &rooms.get(ALICE, "/v1/rooms/room-nope").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(
        rooms.last_seq(&room).await,
        tip,
        "a refused request stored something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalogue_and_the_rooms_are_listed_and_paged() {
    let rooms = Rooms::start().await;
    let (status, bots) = rooms.get(BOB, "/v1/bots").await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["archivist", "chatty", "rusty", "clerk"]);
    assert_eq!(bots["bots"][2]["trigger"], "ambient");
    let mut opened = Vec::new();
    for _ in 0..5 {
        opened.push(rooms.open(ALICE, &[], &[]).await);
    }
    rooms.open(BOB, &[], &[]).await;
    let mut listed = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = rooms
            .get(ALICE, &format!("/v1/rooms?limit=2&cursor={cursor}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        listed.extend(
            page["rooms"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_str().unwrap().to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => break,
        }
    }
    opened.reverse();
    assert_eq!(listed, opened);
    let (_, room) = rooms.get(ALICE, &format!("/v1/rooms/{}", opened[0])).await;
    assert_eq!(
        room["members"],
        json!([{"id": "alice", "kind": "human", "name": "alice", "handle": "alice"}])
    );
    rooms.rooms.shutdown().await;
}

/// Waits until the room has an approval request after `after`; its call id.
async fn requested(rooms: &Rooms, room: &str, after: u64) -> String {
    for _ in 0..200 {
        let entries = rooms.entries(room).await;
        let asked = of_type(&entries, "signal.approval_requested")
            .find(|e| e["seq"].as_u64().unwrap() > after);
        if let Some(asked) = asked {
            return asked["data"]["call_id"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no approval request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_decide_a_bots_gated_calls() {
    let rooms = Rooms::start().await;
    let room = rooms.open(ALICE, &["bob"], &["clerk"]).await;
    let decide = format!("/v1/rooms/{room}/approvals");
    let mut watching = rooms.events(BOB, &room, None).await;

    // The request is in the room's stream and its state; bob approves.
    let asked = rooms.say(ALICE, &room, "@clerk please file this").await;
    let call = requested(&rooms, &room, asked).await;
    let (_, info) = rooms.get(BOB, &format!("/v1/rooms/{room}")).await;
    assert_eq!(info["pending_approvals"][0]["call_id"], call.as_str());
    assert_eq!(info["pending_approvals"][0]["bot"], "clerk");
    let approve = json!({"call_id": call, "decision": "approve"});
    let (status, info) = rooms.post(BOB, &decide, approve.clone()).await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["pending_approvals"], json!([]));
    let (status, again) = rooms.post(ALICE, &decide, approve).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    rooms.settle(&room).await;
    let filed = FILED.load(Ordering::SeqCst);
    assert_eq!(filed, 1);
    let entries = rooms.entries(&room).await;
    let decided = of_type(&entries, "signal.approval_decided").next().unwrap();
    assert_eq!(decided["author"], "bob");
    assert_eq!(decided["data"]["verdict"], "approve");
    let result = of_type(&entries, "pi.tool_result").next().unwrap();
    assert_eq!(result["message"]["content"][0]["text"], "filed");
    let last = rooms.last_seq(&room).await;
    let kinds: Vec<String> = watching
        .take(last as usize)
        .await
        .into_iter()
        .map(|m| m.event)
        .collect();
    assert!(
        kinds.iter().any(|k| k == "signal.approval_requested"),
        "{kinds:?}"
    );

    // A denial: the tool does not run and the bot reads the reason.
    let asked = rooms.say(BOB, &room, "@clerk please file that too").await;
    let call = requested(&rooms, &room, asked).await;
    let deny = json!({"call_id": call, "decision": "deny", "reason": "not yet"});
    let (status, _) = rooms.post(ALICE, &decide, deny).await;
    assert_eq!(status, StatusCode::OK);
    rooms.settle(&room).await;
    assert_eq!(FILED.load(Ordering::SeqCst), filed);
    let entries = rooms.entries(&room).await;
    let denied = of_type(&entries, "pi.tool_result").last().unwrap();
    assert!(denied.to_string().contains("not yet"), "{denied}");

    // Bad decisions are typed errors and store nothing.
    let before = rooms.last_seq(&room).await;
    let bad = [
        (
            json!({"call_id": "nope", "decision": "approve"}),
            StatusCode::NOT_FOUND,
        ),
        (
            json!({"call_id": call, "decision": "maybe"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!({"call_id": call}), StatusCode::UNPROCESSABLE_ENTITY),
    ];
    for (body, status) in bad {
        let (got, answer) = rooms.post(ALICE, &decide, body).await;
        assert_eq!(got, status, "{answer}");
    }
    let other = rooms.open(BOB, &[], &["clerk"]).await;
    let (status, _) = rooms
        .post(
            ALICE,
            &format!("/v1/rooms/{other}/approvals"),
            json!({"call_id": call, "decision": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a stranger decides nothing");
    assert_eq!(rooms.last_seq(&room).await, before);
}
