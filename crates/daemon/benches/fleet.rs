//! Daemons sharing a NATS JetStream store, measured where users feel it:
//! how long after a daemon dies mid-turn another takes the turn over, and
//! how many turns a second one, two and three daemons serve. Runs once,
//! prints a table and stops:
//!
//! ```sh
//! cargo bench -p roundtable-daemon --bench fleet   # needs nats-server
//! ```
//!
//! The fleet's turn lease is [`TURN_LEASE`] renewed every
//! [`TURN_LEASE_RENEW`] (the daemon's defaults are 15 s and 5 s); the mock
//! model streams its replies in pieces with no pause in the throughput
//! runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(dead_code)]
#[path = "../tests/replicas/fleet.rs"]
mod fleet;
#[allow(dead_code)]
#[path = "../tests/replicas/model.rs"]
mod model;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fleet::{FleetClient, Replica, TURN_LEASE, TURN_LEASE_RENEW};
use reqwest::StatusCode;
use roundtable_test_support::nats::NatsServer;
use serde_json::json;

/// Takeovers measured.
const KILLS: usize = 20;
/// Clients of the throughput runs, each with a session of its own.
const CLIENTS: usize = 32;
/// How long each throughput run lasts.
const RUN: Duration = Duration::from_secs(10);

fn main() {
    let nats = NatsServer::start();
    let store = format!("nats = \"{}\"", nats.url());
    let dir = tempfile::tempdir().unwrap();
    let takeovers = takeovers(dir.path(), &store);
    println!(
        "fleet over NATS JetStream, turn_lease {TURN_LEASE}, renewed every {TURN_LEASE_RENEW}"
    );
    println!("| measure | p50 | p99 | max |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| kill -> takeover ({KILLS} kills) | {} | {} | {} |",
        ms(percentile(&takeovers, 50)),
        ms(percentile(&takeovers, 99)),
        ms(*takeovers.last().unwrap()),
    );
    println!(
        "| replicas | turns/s ({CLIENTS} clients, {} s) |",
        RUN.as_secs()
    );
    println!("| --- | --- |");
    for replicas in 1..=3 {
        let rate = throughput(&dir.path().join(format!("run{replicas}")), &store, replicas);
        println!("| {replicas} | {rate:.0} |");
    }
}

/// Kills the daemon running a turn, [`KILLS`] times, and times how long
/// until the other daemon says it carries the turn on; sorted.
fn takeovers(dir: &std::path::Path, store: &str) -> Vec<Duration> {
    let root = dir.join("workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let model = model::start_with(Duration::from_millis(40));
    let mut fleet: Vec<Replica> = (0..2)
        .map(|i| Replica::new(&dir.join(format!("k{i}")), store, &model, &root))
        .collect();
    for replica in &mut fleet {
        replica.start();
    }
    let client = FleetClient::new(fleet.iter().map(|r| r.base.clone()).collect());
    let mut taken = Vec::new();
    for kill in 0..KILLS {
        let victim = kill % 2;
        let survivor = 1 - victim;
        let session = session(&client, &root, victim, kill);
        let before = fleet[survivor].logs().matches(CARRIED).count();
        let body = json!({"parts": [{"type": "text", "text": format!("write k{kill}")}]});
        let path = format!("/v1/sessions/{session}/messages");
        let sent = client.call(victim, "POST", &path, Some(&body), None);
        assert_eq!(sent.replica, victim);
        // Mid-turn: the first reply streams for about 160 ms.
        std::thread::sleep(Duration::from_millis(100));
        fleet[victim].kill();
        let killed = Instant::now();
        while fleet[survivor].logs().matches(CARRIED).count() == before {
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "never taken over"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        taken.push(killed.elapsed());
        fleet[victim].start();
    }
    taken.sort();
    taken
}

const CARRIED: &str = "carrying on a turn whose process stopped";

fn session(client: &FleetClient, root: &std::path::Path, replica: usize, n: usize) -> String {
    let workspace = root.join(format!("w{n}"));
    std::fs::create_dir_all(&workspace).unwrap();
    let body = json!({
        "workspace_path": workspace,
        "approval_policy": {"require_for_kinds": [], "require_for_tools": []},
        "verify_policy": {"auto_verify": false},
    });
    let answer = client.call(replica, "POST", "/v1/sessions", Some(&body), None);
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer.body["id"].as_str().unwrap().to_string()
}

/// Turns a second that `replicas` daemons serve to [`CLIENTS`] clients,
/// each sending its session's messages one after another to its daemon.
fn throughput(dir: &std::path::Path, store: &str, replicas: usize) -> f64 {
    let root = dir.join("workspaces");
    std::fs::create_dir_all(&root).unwrap();
    let model = model::start_with(Duration::ZERO);
    let mut fleet: Vec<Replica> = (0..replicas)
        .map(|i| Replica::new(&dir.join(format!("t{i}")), store, &model, &root))
        .collect();
    for replica in &mut fleet {
        replica.start();
    }
    let client = FleetClient::new(fleet.iter().map(|r| r.base.clone()).collect());
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let replica = c % replicas;
            let id = session(&client, &root, replica, c);
            let (client, done, stop) = (client.clone(), done.clone(), stop.clone());
            std::thread::spawn(move || chat(&client, replica, &id, &done, &stop))
        })
        .collect();
    let started = Instant::now();
    std::thread::sleep(RUN);
    let turns = done.load(Ordering::SeqCst);
    let rate = turns as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    for replica in &mut fleet {
        replica.terminate();
    }
    rate
}

/// Sends messages to `session` on `replica` one after another, each once
/// its turn ended, counting the turns.
fn chat(
    client: &FleetClient,
    replica: usize,
    session: &str,
    done: &AtomicUsize,
    stop: &AtomicBool,
) {
    let body = json!({"parts": [{"type": "text", "text": "hello"}]});
    let path = format!("/v1/sessions/{session}");
    while !stop.load(Ordering::SeqCst) {
        let sent = client.call(
            replica,
            "POST",
            &format!("{path}/messages"),
            Some(&body),
            None,
        );
        let turn = sent.body["turn_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        loop {
            let info = client.call(replica, "GET", &path, None, None).body;
            if info["running_turn_id"].as_str() != Some(turn.as_str()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let index = (sorted.len() * p / 100).min(sorted.len() - 1);
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}
