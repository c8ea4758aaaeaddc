//! Three `roundtable` daemons over one shared store, as a team runs them
//! behind a load balancer, while a chaos loop kills one at random mid-turn
//! and restarts it a moment later. Sessions run write tools that append to
//! a side-effect file, approvals are decided through a replica other than
//! the one the message went to, and SSE clients reconnect to another
//! replica with `Last-Event-ID` every few seconds (and whenever theirs
//! dies). At the end: every acknowledged message was answered exactly once,
//! no tool call ran twice, every turn ended, no approval was lost, every
//! client saw every stored event once and in order, and every replica
//! serves the same events.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "replicas/fleet.rs"]
mod fleet;
#[path = "replicas/model.rs"]
mod model;
#[path = "replicas/shared_state.rs"]
mod shared_state;
#[path = "replicas/sse.rs"]
mod sse;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use fleet::{FleetClient, Replica};
use sse::Event;

/// Sessions, the messages each sends one after another, and the tool
/// calls each message asks for.
const SESSIONS: usize = 6;
const MESSAGES: usize = 3;
const CALLS: usize = 2;
/// Kills of the chaos loop, and the pause before each.
const KILLS: usize = 6;
const BETWEEN_KILLS: Duration = Duration::from_millis(1200);
/// A killed replica starts again after this.
const DOWN_FOR: Duration = Duration::from_millis(300);

/// One session of the scenario: its id, workspace and whether its write
/// tools wait for approval.
struct Session {
    id: String,
    workspace: PathBuf,
    gated: bool,
}

#[test]
#[cfg(feature = "nats")]
fn three_replicas_over_nats_carry_every_turn_through_kills() {
    let nats = roundtable_test_support::nats::NatsServer::start();
    run_fleet(&format!("nats = \"{}\"", nats.url()));
}

#[test]
#[cfg(feature = "postgres")]
fn three_replicas_over_postgres_carry_every_turn_through_kills() {
    let server = roundtable_test_support::postgres::PostgresServer::start();
    run_fleet(&format!("postgres = \"{}\"", server.url()));
}

#[test]
#[cfg(feature = "nats")]
fn replicas_over_nats_share_settings_users_and_the_session_index() {
    let nats = roundtable_test_support::nats::NatsServer::start();
    shared_state::run(&format!("nats = \"{}\"", nats.url()));
}

#[test]
#[cfg(feature = "postgres")]
fn replicas_over_postgres_share_settings_users_and_the_session_index() {
    let server = roundtable_test_support::postgres::PostgresServer::start();
    shared_state::run(&format!("postgres = \"{}\"", server.url()));
}

fn run_fleet(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let model = model::start();
    let mut fleet: Vec<Replica> = (0..3)
        .map(|i| Replica::new(&dir.path().join(format!("r{i}")), store, &model, &root))
        .collect();
    for replica in &mut fleet {
        replica.start();
    }
    let client = FleetClient::new(fleet.iter().map(|r| r.base.clone()).collect());
    let sessions: Vec<Session> = (0..SESSIONS)
        .map(|i| create_session(&client, &root, i))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let followers: Vec<_> = sessions
        .iter()
        .map(|s| {
            let (bases, id, stop) = (client.bases.clone(), s.id.clone(), stop.clone());
            std::thread::spawn(move || sse::follow(bases, id, stop, Duration::from_secs(3)))
        })
        .collect();
    let fleet = Arc::new(Mutex::new(fleet));
    let chaos = {
        let fleet = fleet.clone();
        std::thread::spawn(move || chaos_loop(&fleet))
    };
    let started = Instant::now();
    let drivers: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (client, id, gated) = (client.clone(), s.id.clone(), s.gated);
            std::thread::spawn(move || drive_session(&client, i, &id, gated))
        })
        .collect();
    let answered: Vec<Vec<String>> = drivers.into_iter().map(|d| d.join().unwrap()).collect();
    let kills = chaos.join().unwrap();
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let followed: Vec<Vec<Event>> = followers.into_iter().map(|f| f.join().unwrap()).collect();

    std::thread::scope(|scope| {
        for (i, session) in sessions.iter().enumerate() {
            let (client, answered, followed) = (&client, &answered[i], &followed[i]);
            scope.spawn(move || check_session(client, session, answered, followed));
        }
    });
    let mut fleet = fleet.lock().unwrap();
    let carried: usize = fleet
        .iter()
        .map(|r| {
            r.logs()
                .matches("carrying on a turn whose process stopped")
                .count()
        })
        .sum();
    eprintln!("{SESSIONS} sessions, {kills} kills, {carried} turns carried on, in {took:?}");
    assert!(
        carried > 0,
        "no kill landed mid-turn: the run proves nothing"
    );
    for replica in fleet.iter_mut() {
        replica.terminate();
    }
}

fn create_session(client: &FleetClient, root: &Path, i: usize) -> Session {
    let workspace = root.join(format!("s{i}"));
    std::fs::create_dir_all(&workspace).unwrap();
    let gated = i.is_multiple_of(2);
    let approvals = if gated {
        json!({"require_for_kinds": ["write", "exec"], "require_for_tools": []})
    } else {
        json!({"require_for_kinds": [], "require_for_tools": []})
    };
    let body = json!({
        "workspace_path": workspace,
        "approval_policy": approvals,
        "verify_policy": {"auto_verify": false},
    });
    let answer = client.call(i, "POST", "/v1/sessions", Some(&body), None);
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    Session {
        id: answer.body["id"].as_str().unwrap().to_string(),
        workspace,
        gated,
    }
}

/// Kills a random replica [`KILLS`] times, each restarted after
/// [`DOWN_FOR`]; the number of kills.
fn chaos_loop(fleet: &Mutex<Vec<Replica>>) -> usize {
    for kill in 0..KILLS {
        std::thread::sleep(BETWEEN_KILLS);
        let victim = (kill * 7 + 3) % 3;
        fleet.lock().unwrap()[victim].kill();
        std::thread::sleep(DOWN_FOR);
        fleet.lock().unwrap()[victim].start();
    }
    KILLS
}

/// Sends the session's messages one after another (each acknowledged
/// once, under an idempotency key), deciding its approvals through another
/// replica; the ids of the turns the messages started.
fn drive_session(
    client: &FleetClient,
    session_index: usize,
    session: &str,
    gated: bool,
) -> Vec<String> {
    let mut turns = Vec::new();
    for m in 0..MESSAGES {
        let words: Vec<String> = (0..CALLS)
            .map(|c| format!("s{session_index}m{m}c{c}"))
            .collect();
        let body =
            json!({"parts": [{"type": "text", "text": format!("write {}", words.join(" "))}]});
        let key = format!("{session}-{m}");
        let sent = client.call(
            session_index + m,
            "POST",
            &format!("/v1/sessions/{session}/messages"),
            Some(&body),
            Some(&key),
        );
        assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.body);
        let turn = sent.body["turn_id"].as_str().unwrap().to_string();
        wait_answered(client, session, &turn, gated, sent.replica + 1);
        turns.push(turn);
    }
    turns
}

/// Waits until the session's turn `turn` ended, approving its calls
/// through replica `decider` (and the ones after it while it is down).
fn wait_answered(client: &FleetClient, session: &str, turn: &str, gated: bool, decider: usize) {
    // A turn ends within the lease time plus a bound, kills included.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = client.call(
            decider + 1,
            "GET",
            &format!("/v1/sessions/{session}"),
            None,
            None,
        );
        let info = got.body;
        // The turn is open from the message's acknowledgement on.
        if info["running_turn_id"].as_str() != Some(turn) {
            return;
        }
        if gated && let Some(pending) = info["pending_approvals"].as_array() {
            for approval in pending {
                let body = json!({
                    "tool_call_id": approval["tool_call_id"],
                    "action": "approve",
                });
                let decided = client.call(
                    decider,
                    "POST",
                    &format!("/v1/sessions/{session}/approve"),
                    Some(&body),
                    None,
                );
                assert!(
                    decided.status.is_success() || decided.status == StatusCode::CONFLICT,
                    "{}: {}",
                    decided.status,
                    decided.body
                );
            }
        }
        assert!(Instant::now() < deadline, "turn {turn} never ended: {info}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The end-of-run invariants of one session.
fn check_session(client: &FleetClient, session: &Session, turns: &[String], followed: &[Event]) {
    let stored = sse::read_all(&client.bases[0], &session.id, Duration::from_secs(2));
    // Every replica serves the same events.
    for base in &client.bases[1..] {
        let there = sse::read_all(base, &session.id, Duration::from_secs(2));
        assert_eq!(ids(&there), ids(&stored), "replica {base} differs");
    }
    // The client that reconnected saw each stored event once, in order.
    assert_eq!(
        ids(followed),
        ids(&stored),
        "the follower of {} missed or repeated",
        session.id
    );
    // Every message was answered exactly once: one turn each, completed.
    let count = |kind: &str| stored.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count("turn_started"), turns.len(), "{}", kinds(&stored));
    assert_eq!(count("turn_completed"), turns.len(), "{}", kinds(&stored));
    assert_eq!(count("turn_failed"), 0, "{}", kinds(&stored));
    // No approval was lost or asked twice.
    if session.gated {
        let asked = calls_of(&stored, "approval_requested");
        let granted = calls_of(&stored, "approval_granted");
        assert_eq!(
            asked.len(),
            HashSet::<&String>::from_iter(&asked).len(),
            "asked twice"
        );
        assert_eq!(
            HashSet::<&String>::from_iter(&asked),
            HashSet::from_iter(&granted),
            "an approval was lost"
        );
    }
    // No tool call ran twice.
    let side = std::fs::read_to_string(session.workspace.join("side.txt")).unwrap_or_default();
    let lines: Vec<&str> = side.lines().collect();
    let unique: HashSet<&&str> = lines.iter().collect();
    assert_eq!(unique.len(), lines.len(), "a call ran twice: {lines:?}");
}

fn ids(events: &[Event]) -> Vec<(u64, u64)> {
    events.iter().map(|e| e.id).collect()
}

fn kinds(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| e.kind.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The call ids of the events of `kind`.
fn calls_of(events: &[Event], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind == kind)
        .filter_map(|e| {
            let data: Value = serde_json::from_str(&e.data).ok()?;
            let id = data["tool_call_id"]
                .as_str()
                .or_else(|| data["data"]["tool_call_id"].as_str())?;
            Some(id.to_string())
        })
        .collect()
}
