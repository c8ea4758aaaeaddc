//! Two `roundtable` daemons over one shared store serving the same rooms:
//! a room opened through one is served by the other, two people post
//! through different replicas at once while both replicas' bots race for
//! every wake, a roster or override change made through one replica holds
//! on the other, and each replica's event stream carries every entry once
//! and in order. At the end every wake was answered exactly once. And a
//! replica killed in the middle of a bot's turn: another closes the turn
//! as interrupted once its lease lapses and answers the wake again, once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "replicas/fleet.rs"]
#[allow(dead_code)]
mod fleet;
#[path = "replicas/model.rs"]
mod model;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};

use fleet::{ADMIN, Replica};

/// Messages each person sends, one after another.
const MESSAGES: usize = 6;

/// The bots of every replica: each person talks to one of them.
const BOTS: &str = r#"
[[bots]]
id = "helper"
name = "Helper"
persona = "You help."
trigger = "mention"

[[bots]]
id = "scribe"
name = "Scribe"
persona = "You take notes."
trigger = "mention"
"#;

#[test]
#[cfg(feature = "nats")]
fn two_replicas_over_nats_serve_one_room_and_answer_each_wake_once() {
    let nats = roundtable_test_support::nats::NatsServer::start();
    run(&format!("nats = \"{}\"", nats.url()));
}

#[test]
#[cfg(feature = "postgres")]
fn two_replicas_over_postgres_serve_one_room_and_answer_each_wake_once() {
    let server = roundtable_test_support::postgres::PostgresServer::start();
    run(&format!("postgres = \"{}\"", server.url()));
}

#[test]
#[cfg(feature = "nats")]
fn a_bot_turn_of_a_killed_replica_is_answered_by_another_over_nats() {
    let nats = roundtable_test_support::nats::NatsServer::start();
    take_over(&format!("nats = \"{}\"", nats.url()));
}

#[test]
#[cfg(feature = "postgres")]
fn a_bot_turn_of_a_killed_replica_is_answered_by_another_over_postgres() {
    let server = roundtable_test_support::postgres::PostgresServer::start();
    take_over(&format!("postgres = \"{}\"", server.url()));
}

/// Replica 0 runs a bot's slow answer and is killed mid-stream; replica 1,
/// started meanwhile, leaves the live turn alone, then closes it once its
/// lease lapses and answers the wake again.
fn take_over(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("workspaces");
    std::fs::create_dir_all(&root).unwrap();
    // Each reply takes about 8 s to stream: replica 1 starts well within it.
    let model = model::start_with(Duration::from_secs(1));
    let mut fleet: Vec<Replica> = (0..2)
        .map(|i| Replica::new(&dir.path().join(format!("r{i}")), store, &model, &root))
        .collect();
    for replica in &fleet {
        replica.append_config(BOTS);
    }
    fleet[0].start();
    let open = json!({"title": "Crash", "bots": ["helper"]});
    let base0 = fleet[0].base.clone();
    let (status, room) = call(&base0, ADMIN, "POST", "/v1/rooms", Some(open));
    assert_eq!(status, StatusCode::CREATED, "{room}");
    let id = room["id"].as_str().unwrap().to_string();
    let path = format!("/v1/rooms/{id}/messages");
    let body = json!({"text": "@helper summarise"});
    let (status, posted) = call(&base0, ADMIN, "POST", &path, Some(body));
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    let asked = posted["seq"].as_u64().unwrap();
    let first_chunk = |entries: &[Value]| entries.iter().any(|e| e["type"] == "chat.chunk");
    wait_for(&base0, &id, first_chunk);
    fleet[1].start();
    // The turn is live: replica 1 leaves it alone.
    std::thread::sleep(Duration::from_millis(500));
    let base1 = fleet[1].base.clone();
    let before = entries(&base1, &id);
    assert!(
        !before.iter().any(|e| e["type"] == "turn.failed"),
        "{before:#?}"
    );
    let killed = Instant::now();
    fleet[0].kill();
    wait_for(&base1, &id, |entries| {
        entries
            .iter()
            .filter(|e| e["type"] == "turn.started")
            .count()
            == 2
    });
    let taken_over = killed.elapsed();
    wait_for(&base1, &id, |entries| {
        entries.iter().any(|e| e["type"] == "turn.ended")
    });
    let entries = entries(&base1, &id);
    let lifecycle: Vec<(&str, Option<u64>)> = entries
        .iter()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("turn.")))
        .map(|e| (e["type"].as_str().unwrap(), e["trigger"].as_u64()))
        .collect();
    assert_eq!(
        lifecycle,
        [
            ("turn.started", Some(asked)),
            ("turn.failed", None),
            ("turn.started", Some(asked)),
            ("turn.ended", None),
        ],
        "{entries:#?}"
    );
    let failed = entries.iter().find(|e| e["type"] == "turn.failed").unwrap();
    assert_eq!(failed["reason"], "interrupted", "{failed}");
    // The lease lasts 2 s, renewed every 0.5 s.
    assert!(taken_over < Duration::from_secs(10), "{taken_over:?}");
    fleet[1].terminate();
}

/// A person of the scenario: their token and the replica they use.
#[derive(Clone)]
struct Person {
    token: String,
    base: String,
}

fn run(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let model = model::start_with(Duration::from_millis(10));
    let mut fleet: Vec<Replica> = (0..2)
        .map(|i| Replica::new(&dir.path().join(format!("r{i}")), store, &model, &root))
        .collect();
    for replica in &fleet {
        replica.append_config(BOTS);
    }
    let tokens = add_users(&fleet, &["alice", "bob", "carol"]);
    for replica in &mut fleet {
        replica.start();
    }
    let alice = Person {
        token: tokens[0].clone(),
        base: fleet[0].base.clone(),
    };
    let bob = Person {
        token: tokens[1].clone(),
        base: fleet[1].base.clone(),
    };
    let carol = tokens[2].clone();

    // Opened through replica 0, posted to through replica 1 at once.
    let open = json!({"title": "Launch", "humans": ["bob"], "bots": ["helper", "scribe"]});
    let (status, room) = call(&alice.base, &alice.token, "POST", "/v1/rooms", Some(open));
    assert_eq!(status, StatusCode::CREATED, "{room}");
    let id = room["id"].as_str().unwrap().to_string();

    let talks: Vec<_> = [(alice.clone(), "helper"), (bob.clone(), "scribe")]
        .into_iter()
        .map(|(person, bot)| {
            let id = id.clone();
            std::thread::spawn(move || talk(&person, &id, bot))
        })
        .collect();
    let asked: Vec<Vec<u64>> = talks.into_iter().map(|t| t.join().unwrap()).collect();

    check_changes(&fleet, &alice, &bob, &carol, &id);
    let entries = entries(&fleet[0].base, &id);
    check_answered_once(&entries, "helper", &asked[0]);
    check_answered_once(&entries, "scribe", &asked[1]);
    let last = entries.last().unwrap()["seq"].as_u64().unwrap();
    for replica in &fleet {
        let seen = stream(&replica.base, &id, last);
        let expected: Vec<u64> = (1..=last).collect();
        assert_eq!(seen, expected, "the stream of {} differs", replica.base);
    }
    for replica in &mut fleet {
        replica.terminate();
    }
}

/// Adds `users` through replica 0's config (users live in the shared
/// store, so every replica knows them); their tokens.
fn add_users(fleet: &[Replica], users: &[&str]) -> Vec<String> {
    users
        .iter()
        .map(|user| {
            let out = fleet[0].command(&["token", "add", user]);
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .collect()
}

/// Sends `MESSAGES` mentions of `bot`, each once answered; their seqs.
fn talk(person: &Person, room: &str, bot: &str) -> Vec<u64> {
    let mut asked = Vec::new();
    for m in 0..MESSAGES {
        let body = json!({"text": format!("@{bot} note {m}")});
        let path = format!("/v1/rooms/{room}/messages");
        let (status, posted) = call(&person.base, &person.token, "POST", &path, Some(body));
        assert_eq!(status, StatusCode::CREATED, "{posted}");
        let seq = posted["seq"].as_u64().unwrap();
        wait_for(&person.base, room, |entries| {
            entries.iter().any(|e| {
                e["type"] == "turn.ended" && e["author"] == bot && e["seq"].as_u64().unwrap() > seq
            })
        });
        asked.push(seq);
    }
    asked
}

/// Changes through one replica hold on the other: a mute set through
/// replica 0 keeps the bot quiet when the mention arrives through replica
/// 1, and a member added through replica 1 reads the room through replica 0
/// at once.
fn check_changes(fleet: &[Replica], alice: &Person, bob: &Person, carol: &str, id: &str) {
    let path = format!("/v1/rooms/{id}/overrides/scribe");
    let (status, room) = call(
        &alice.base,
        &alice.token,
        "PUT",
        &path,
        Some(json!({"mode": "mute"})),
    );
    assert_eq!(status, StatusCode::OK, "{room}");
    let room_path = format!("/v1/rooms/{id}");
    let (_, seen) = call(&bob.base, &bob.token, "GET", &room_path, None);
    assert_eq!(seen["overrides"]["scribe"], "mute", "{seen}");
    let body = json!({"text": "@scribe are you there?"});
    let posted = call(
        &bob.base,
        &bob.token,
        "POST",
        &format!("/v1/rooms/{id}/messages"),
        Some(body),
    )
    .1;
    let muted_seq = posted["seq"].as_u64().unwrap();

    let (status, _) = call(&fleet[0].base, carol, "GET", &room_path, None);
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "carol is not in the room yet"
    );
    let add = json!({"user": "carol"});
    let members = format!("/v1/rooms/{id}/members");
    let (status, room) = call(&bob.base, &bob.token, "POST", &members, Some(add));
    assert_eq!(status, StatusCode::OK, "{room}");
    let (status, room) = call(&fleet[0].base, carol, "GET", &room_path, None);
    assert_eq!(status, StatusCode::OK, "{room}");

    // Long enough for a turn over the mock model: none comes.
    std::thread::sleep(Duration::from_secs(2));
    let entries = entries(&fleet[1].base, id);
    assert!(
        !entries
            .iter()
            .any(|e| e["type"] == "turn.started" && e["trigger"].as_u64() == Some(muted_seq)),
        "a muted bot answered"
    );
}

/// Every mention of `bot` was answered by exactly one turn, which ended.
fn check_answered_once(entries: &[Value], bot: &str, asked: &[u64]) {
    let turns: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "turn.started" && e["author"] == bot)
        .collect();
    let triggers: Vec<u64> = turns
        .iter()
        .map(|e| e["trigger"].as_u64().unwrap())
        .collect();
    assert_eq!(triggers, asked, "{bot}'s turns");
    let ended = entries
        .iter()
        .filter(|e| e["type"] == "turn.ended" && e["author"] == bot)
        .count();
    assert_eq!(ended, asked.len(), "{bot}'s turns ended");
    assert!(
        !entries.iter().any(|e| e["type"] == "turn.failed"),
        "a turn failed"
    );
}

/// Waits until the room's entries (read through `base`) satisfy `done`.
fn wait_for(base: &str, room: &str, done: impl Fn(&[Value]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let entries = entries(base, room);
        if done(&entries) {
            return;
        }
        assert!(Instant::now() < deadline, "never answered: {entries:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every entry of the room, through `base`.
fn entries(base: &str, room: &str) -> Vec<Value> {
    let path = format!("/v1/rooms/{room}/entries?limit=1000");
    let (status, page) = call(base, ADMIN, "GET", &path, None);
    assert_eq!(status, StatusCode::OK, "{page}");
    page["entries"].as_array().cloned().unwrap_or_default()
}

/// The ids of the room's event stream through `base`, read until `last`.
fn stream(base: &str, room: &str, last: u64) -> Vec<u64> {
    let client = Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let response = client
        .get(format!("{base}/v1/rooms/{room}/events"))
        .bearer_auth(ADMIN)
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut ids = Vec::new();
    for line in BufReader::new(response).lines() {
        let line = line.unwrap();
        if let Some(id) = line.strip_prefix("id: ") {
            let id: u64 = id.parse().unwrap();
            ids.push(id);
            if id >= last {
                break;
            }
        }
    }
    ids
}

fn call(
    base: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let client = Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    fleet::send(
        &client,
        token,
        method,
        &format!("{base}{path}"),
        body.as_ref(),
    )
}
