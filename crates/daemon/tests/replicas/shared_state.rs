//! Three replicas over one store share the daemon's state besides the
//! threads: a user's chat settings, the users and their tokens, and the
//! session index. What one replica is told, the others apply within
//! [`BOUND`].

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fleet::{ADMIN, FleetClient, Replica};
use crate::model;

/// How soon a change made through one replica applies on the others: the
/// README's bound (a second) with room for a loaded test machine.
const BOUND: Duration = Duration::from_secs(5);

/// Rounds of the race of two replicas on one user's settings.
const RACES: usize = 10;

/// Starts three replicas over `store` and runs every check.
pub(crate) fn run(store: &str) {
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
    settings_apply_on_every_replica(&client);
    users_and_revocations_apply_on_every_replica(&fleet, &client);
    sessions_are_listed_paged_on_every_replica(&client, &root);
    racing_settings_end_in_one_of_the_two(&client);
    for replica in &mut fleet {
        replica.terminate();
    }
}

/// Waits until `check` holds (within [`BOUND`]); how long it took.
fn within_bound(what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < BOUND, "{what} not within {BOUND:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    started.elapsed()
}

/// Saved on one replica, the settings answer on another and start a new
/// chat on a third with the saved system prompt.
fn settings_apply_on_every_replica(client: &FleetClient) {
    let saved = json!({"systemPrompt": "Answer in haiku.", "mode": "plan"});
    let (status, body) = client.call_as(0, ADMIN, "PUT", "/api/chat/settings", Some(&saved));
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = client.call_as(1, ADMIN, "GET", "/api/chat/settings", None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["overrides"], saved, "{body}");
    let (status, body) = client.call_as(2, ADMIN, "POST", "/api/chat/new", Some(&json!({})));
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["session"]["system_prompt"], "Answer in haiku.",
        "{body}"
    );
    assert_eq!(body["session"]["mode"], "plan", "{body}");
}

/// A token made through one replica opens the others; revoked through
/// another, every replica refuses it.
fn users_and_revocations_apply_on_every_replica(fleet: &[Replica], client: &FleetClient) {
    let added = fleet[0].command(&["token", "add", "alice@example.com"]);
    assert!(added.status.success(), "{added:?}");
    let token = String::from_utf8(added.stdout).unwrap().trim().to_string();
    for replica in 0..3 {
        let took = within_bound("a new token accepted", || {
            client
                .call_as(replica, &token, "GET", "/v1/sessions", None)
                .0
                == StatusCode::OK
        });
        eprintln!("a token added on replica 0 was accepted by {replica} after {took:?}");
    }
    // Stored hashed: the shared store never holds the token itself.
    let listed = fleet[2].command(&["token", "list"]);
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(listed.contains("alice@example.com"), "{listed}");
    assert!(!listed.contains(&token));
    let revoked = fleet[1].command(&["token", "revoke", "alice@example.com"]);
    assert!(revoked.status.success(), "{revoked:?}");
    for replica in 0..3 {
        let took = within_bound("a revoked token refused", || {
            client
                .call_as(replica, &token, "GET", "/v1/sessions", None)
                .0
                == StatusCode::UNAUTHORIZED
        });
        eprintln!("a token revoked on replica 1 was refused by {replica} after {took:?}");
    }
}

/// Sessions created on one replica are listed, a page at a time, by the
/// others.
fn sessions_are_listed_paged_on_every_replica(client: &FleetClient, root: &Path) {
    let mut created = Vec::new();
    for i in 0..5 {
        let workspace = root.join(format!("listed{i}"));
        std::fs::create_dir_all(&workspace).unwrap();
        let body = json!({"workspace_path": workspace});
        let (status, body) = client.call_as(0, ADMIN, "POST", "/v1/sessions", Some(&body));
        assert_eq!(status, StatusCode::CREATED, "{body}");
        created.push(body["id"].as_str().unwrap().to_string());
    }
    for replica in 1..3 {
        within_bound("sessions listed", || {
            let listed = list_paged(client, replica, 2);
            created.iter().all(|id| listed.contains(id))
        });
    }
}

/// Every session replica `replica` lists, following pages of `limit`.
fn list_paged(client: &FleetClient, replica: usize, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let after = cursor.map_or(String::new(), |c| format!("&cursor={c}"));
        let path = format!("/v1/sessions?limit={limit}{after}");
        let (status, body) = client.call_as(replica, ADMIN, "GET", &path, None);
        assert_eq!(status, StatusCode::OK, "{body}");
        let page = body["sessions"].as_array().unwrap();
        assert!(page.len() <= limit, "{body}");
        ids.extend(page.iter().map(|s| s["id"].as_str().unwrap().to_string()));
        match body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return ids,
        }
    }
}

/// Two replicas change one user's settings at once, again and again:
/// every change succeeds, and what is kept is one of the two whole.
fn racing_settings_end_in_one_of_the_two(client: &FleetClient) {
    let one = json!({"systemPrompt": "one", "maxRounds": 11, "autoVerify": true});
    let two = json!({"systemPrompt": "two", "maxRounds": 22, "autoVerify": false});
    for _ in 0..RACES {
        let racers: Vec<_> = [(0, one.clone()), (1, two.clone())]
            .into_iter()
            .map(|(replica, body)| {
                let client = client.clone();
                std::thread::spawn(move || {
                    client.call_as(replica, ADMIN, "PUT", "/api/chat/settings", Some(&body))
                })
            })
            .collect();
        for racer in racers {
            let (status, body) = racer.join().unwrap();
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        let (_, body) = client.call_as(2, ADMIN, "GET", "/api/chat/settings", None);
        let kept: &Value = &body["overrides"];
        let expected = |racer: &Value| {
            let mut all = json!({"mode": "plan"});
            for (k, v) in racer.as_object().unwrap() {
                all[k] = v.clone();
            }
            all
        };
        assert!(
            *kept == expected(&one) || *kept == expected(&two),
            "a mix was kept: {kept}"
        );
    }
}
