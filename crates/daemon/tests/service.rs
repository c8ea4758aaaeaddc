//! The `roundtable` binary as an operator runs it: a config file, users'
//! tokens made with `roundtable token`, health, readiness and metrics, two
//! users who cannot see each other's sessions, a SIGTERM during a running
//! turn (carried on after the restart), paging through hundreds of
//! sessions and deleting some, the refusals of bad configurations (a bad
//! bot catalogue among them), and a room of the `--demo` bots.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use roundtable_test_support::ports::free_port;
use roundtable_test_support::replay::{Replay, Reply};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");
const API_KEY: &str = "sk-test-key-that-must-never-be-logged";
const ADMIN: &str = "admin-token-0123456789abcdef";

const ANSWER: &str = r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"All done."},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}

data: [DONE]

"#;

/// A daemon process with its data folder and log.
struct Daemon {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Daemon {
    fn start(dir: &Path, config: &Path) -> Daemon {
        Self::start_with(dir, config, &[])
    }

    /// A daemon started with `extra` flags of `serve`.
    fn start_with(dir: &Path, config: &Path, extra: &[&str]) -> Daemon {
        let log = dir.join(format!("daemon-{}.log", free_port()));
        let child = Command::new(BIN)
            .args(["--config", config.to_str().unwrap(), "serve"])
            .args(["--log-format", "json"])
            .args(extra)
            .env("ROUNDTABLE_TOKEN", ADMIN)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let addr = config_addr(config);
        let daemon = Daemon {
            child,
            base: format!("http://{addr}"),
            log,
        };
        daemon.wait_healthy();
        daemon
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if reqwest::blocking::get(format!("{}/healthz", self.base))
                .is_ok_and(|r| r.status() == StatusCode::OK)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the daemon did not start: {}", self.logs());
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let client = reqwest::blocking::Client::new();
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let status = response.status();
        let text = response.text().unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Sends SIGTERM and waits for the exit.
    fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "no exit after SIGTERM: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config_addr(config: &Path) -> String {
    let text = std::fs::read_to_string(config).unwrap();
    let value: toml::Value = toml::from_str(&text).unwrap();
    value["addr"].as_str().unwrap().to_string()
}

fn write_config(dir: &Path, model_url: &str) -> PathBuf {
    let config = dir.join("roundtable.toml");
    let data = dir.join("data");
    let text = format!(
        r#"addr = "127.0.0.1:{port}"
data = "{data}"
chat_workspace = "{workspace}"

[limits]
shutdown_grace = "1s"
max_rounds = 50

[[models]]
api = "openai-completions"
provider = "mock"
id = "m"
base_url = "{model_url}"
api_key = "{API_KEY}"
"#,
        port = free_port(),
        data = data.display(),
        workspace = dir.display(),
    );
    std::fs::write(&config, text).unwrap();
    config
}

fn roundtable(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("ROUNDTABLE_TOKEN")
        .output()
        .unwrap()
}

fn add_user(config: &Path, user: &str) -> String {
    let out = roundtable(&["--config", config.to_str().unwrap(), "token", "add", user]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn new_session(daemon: &Daemon, token: &str, workspace: &Path) -> String {
    let (status, body) = daemon.call(
        "POST",
        "/v1/sessions",
        token,
        Some(json!({"workspace_path": workspace})),
    );
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().unwrap().to_string()
}

fn wait_for(daemon: &Daemon, token: &str, session: &str, what: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = daemon.call("GET", &format!("/v1/sessions/{session}"), token, None);
        if what(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "session never got there: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_operator_runs_the_service_for_two_users_and_stops_it_mid_turn() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // The first model call never answers (a turn that runs past the
    // grace); the ones after the restart answer.
    let model = runtime.block_on(Replay::start(vec![
        Reply::Stall,
        Reply::sse(ANSWER.into()),
        Reply::sse(ANSWER.into()),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &format!("{}/v1", model.base_url));
    let alice = add_user(&config, "alice");
    let bob = add_user(&config, "bob");
    let daemon = Daemon::start(dir.path(), &config);

    // Health needs no token; metrics need the admin's.
    assert_eq!(daemon.call("GET", "/readyz", "", None).0, StatusCode::OK);
    assert_eq!(
        daemon.call("GET", "/metrics", &alice, None).0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        daemon
            .call("GET", "/v1/sessions", "wrong-token-wrong-token", None)
            .0,
        StatusCode::UNAUTHORIZED
    );

    let (status, document) = daemon.call("GET", "/openapi.json", &alice, None);
    assert_eq!(status, StatusCode::OK);
    assert!(
        document["openapi"].as_str().unwrap().starts_with("3.1"),
        "{document}"
    );
    assert!(document["paths"]["/v1/sessions/{id}/messages"].is_object());

    // Each user sees their own sessions only; the admin sees both.
    let theirs = new_session(&daemon, &alice, dir.path());
    let bobs = new_session(&daemon, &bob, dir.path());
    assert_eq!(
        daemon
            .call("GET", &format!("/v1/sessions/{theirs}"), &bob, None)
            .0,
        StatusCode::NOT_FOUND
    );
    let listed = |token: &str| -> Vec<String> {
        let (_, body) = daemon.call("GET", "/v1/sessions", token, None);
        let list = body
            .get("sessions")
            .unwrap_or(&body)
            .as_array()
            .unwrap()
            .clone();
        list.iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed(&alice), vec![theirs.clone()]);
    assert_eq!(listed(&bob), vec![bobs]);
    assert_eq!(listed(ADMIN).len(), 2);

    // A turn that is still running when SIGTERM comes.
    let (status, body) = daemon.call(
        "POST",
        &format!("/v1/sessions/{theirs}/messages"),
        &alice,
        Some(json!({"role": "user", "parts": [{"type": "text", "text": "Do the long work."}]})),
    );
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_for(&daemon, &alice, &theirs, |s| {
        !s["running_turn_id"].is_null()
    });
    let (status, metrics) = daemon.call("GET", "/metrics", ADMIN, None);
    assert_eq!(status, StatusCode::OK);
    let metrics = metrics.as_str().unwrap().to_string();
    for name in [
        "roundtable_http_requests_total",
        "roundtable_turns_started_total",
        "roundtable_http_request_duration_seconds_bucket",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
    // A browser's sign-in link carries the token in its query.
    let _ = reqwest::blocking::get(format!("{}/?token={ADMIN}", daemon.base));

    let (exit, logs) = daemon.terminate();
    assert!(exit.success(), "{exit:?}\n{logs}");
    for secret in [ADMIN, alice.as_str(), bob.as_str(), API_KEY] {
        assert!(!logs.contains(secret), "a secret in the logs:\n{logs}");
    }
    for line in logs.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    assert!(
        logs.contains("\"turn started\"") && logs.contains("\"route\":\"/v1/sessions/{id}\""),
        "{logs}"
    );
    assert!(logs.contains("turn handed over by the stop"), "{logs}");

    // After a restart the turn is carried on (its model call made again),
    // and the session goes on.
    let daemon = Daemon::start(dir.path(), &config);
    let carried = wait_for(&daemon, &alice, &theirs, |s| s["running_turn_id"].is_null());
    assert_eq!(carried["status"], "completed", "{carried}");
    let (status, body) = daemon.call(
        "POST",
        &format!("/v1/sessions/{theirs}/messages"),
        &alice,
        Some(json!({"role": "user", "parts": [{"type": "text", "text": "Try again."}]})),
    );
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let done = wait_for(&daemon, &alice, &theirs, |s| s["status"] == "completed");
    assert!(done["running_turn_id"].is_null(), "{done}");
    let (exit, logs) = daemon.terminate();
    assert!(exit.success(), "{logs}");
    assert!(logs.contains("\"turn ended\""), "{logs}");
}

/// Every session `token` lists, following `next_cursor` pages of `limit`.
fn list_all(daemon: &Daemon, token: &str, limit: usize) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut pages = 0;
    let mut query = format!("?limit={limit}");
    loop {
        let (status, body) = daemon.call("GET", &format!("/v1/sessions{query}"), token, None);
        assert_eq!(status, StatusCode::OK, "{body}");
        let page = body["sessions"].as_array().unwrap();
        assert!(page.len() <= limit, "{} > {limit}", page.len());
        ids.extend(page.iter().map(|s| s["id"].as_str().unwrap().to_string()));
        pages += 1;
        match body["next_cursor"].as_str() {
            Some(cursor) => query = format!("?limit={limit}&cursor={cursor}"),
            None => return (ids, pages),
        }
    }
}

#[test]
fn a_user_pages_through_hundreds_of_sessions_and_deletes_some() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let daemon = Daemon::start(dir.path(), &config);
    let dave = add_user(&config, "dave");
    let erin = add_user(&config, "erin");
    let deadline = Instant::now() + Duration::from_secs(10);
    while daemon.call("GET", "/v1/sessions", &erin, None).0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "a new token never accepted");
        std::thread::sleep(Duration::from_millis(100));
    }
    let created: Vec<String> = (0..300)
        .map(|_| new_session(&daemon, &dave, dir.path()))
        .collect();
    let theirs = new_session(&daemon, &erin, dir.path());

    // Newest first, each once, only the caller's.
    let (listed, pages) = list_all(&daemon, &dave, 64);
    assert_eq!(pages, 5);
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(listed, newest_first);
    assert_eq!(list_all(&daemon, &erin, 64).0, vec![theirs.clone()]);
    let (status, body) = daemon.call("GET", "/v1/sessions?status=active&limit=1", &dave, None);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["sessions"][0]["id"], json!(created[299]));
    let (status, body) = daemon.call("GET", "/v1/sessions?limit=0", &dave, None);
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_request");

    // Deleted by its owner or the operator; unknown to anyone else.
    let gone = &created[150];
    let path = format!("/v1/sessions/{gone}");
    assert_eq!(
        daemon.call("DELETE", &path, &erin, None).0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        daemon.call("DELETE", &path, &dave, None).0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        daemon.call("GET", &path, &dave, None).0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        daemon.call("DELETE", &path, &dave, None).0,
        StatusCode::NOT_FOUND
    );
    assert!(!dir.path().join("data/sessions").join(gone).exists());
    let config_arg = config.to_str().unwrap();
    let by_operator = Command::new(BIN)
        .args(["--config", config_arg, "sessions", "delete", &created[0]])
        .env("ROUNDTABLE_TOKEN", ADMIN)
        .output()
        .unwrap();
    assert!(
        by_operator.status.success(),
        "{}",
        String::from_utf8_lossy(&by_operator.stderr)
    );
    let (listed, _) = list_all(&daemon, &dave, 100);
    assert_eq!(listed.len(), 298);
    assert!(!listed.contains(gone) && !listed.contains(&created[0]));

    // The operator's terminal view pages the same index.
    let page = Command::new(BIN)
        .args(["--config", config_arg, "sessions", "list", "--limit", "10"])
        .env("ROUNDTABLE_TOKEN", ADMIN)
        .output()
        .unwrap();
    assert!(page.status.success());
    let lines: Vec<String> = String::from_utf8(page.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 10);
    assert!(lines[0].starts_with(&theirs), "{lines:?}");
    assert!(String::from_utf8_lossy(&page.stderr).contains("--cursor"));
}

#[test]
fn a_revoked_token_is_refused_by_the_running_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let daemon = Daemon::start(dir.path(), &config);
    let carol = add_user(&config, "carol");
    let config_arg = config.to_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while daemon.call("GET", "/v1/sessions", &carol, None).0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "a new token never accepted");
        std::thread::sleep(Duration::from_millis(100));
    }
    let listed = roundtable(&["--config", config_arg, "token", "list"]);
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(
        listed.contains("carol") && !listed.contains(&carol),
        "{listed}"
    );
    assert!(
        roundtable(&["--config", config_arg, "token", "revoke", "carol"])
            .status
            .success()
    );
    while daemon.call("GET", "/v1/sessions", &carol, None).0 != StatusCode::UNAUTHORIZED {
        assert!(Instant::now() < deadline, "a revoked token still accepted");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bad_configurations_are_refused_with_their_reason_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!("data = \"{}\"\n[limits]\nmax_round = 5\n", data.display()),
    )
    .unwrap();
    let out = roundtable(&["--config", bad.to_str().unwrap(), "serve"]);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("line 3") && said.contains("max_round"),
        "{said}"
    );

    let out = roundtable(&[
        "serve",
        "--data",
        data.to_str().unwrap(),
        "--addr",
        "not-an-address",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--addr"));

    let out = roundtable(&[
        "serve",
        "--data",
        data.to_str().unwrap(),
        "--addr",
        "0.0.0.0:8787",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ROUNDTABLE_TOKEN"));
    assert!(!data.exists(), "a refused start wrote its data folder");

    // A data folder that cannot be written: a file stands in its place.
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, "not a folder").unwrap();
    let out = roundtable(&["serve", "--data", blocked.join("data").to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("cannot make the data folder"), "{said}");

    // The printed configuration masks the key.
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let out = roundtable(&[
        "--config",
        config.to_str().unwrap(),
        "serve",
        "--print-config",
    ]);
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        shown.contains("[[models]]") && !shown.contains(API_KEY),
        "{shown}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "--print-config wrote the data folder"
    );
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::io::Read;

    use roundtable_test_support::postgres::PostgresServer;

    use super::*;

    /// A password the test server (trusting loopback) never asks for: it
    /// must show up in no log and no printed configuration.
    const DB_PASSWORD: &str = "db-secret-hunter2";

    /// A config in `dir` whose sessions live in `server`'s database.
    fn write_postgres_config(dir: &Path, model_url: &str, server: &PostgresServer) -> PathBuf {
        let config = write_config(dir, model_url);
        let url = format!(
            "postgres://postgres:{DB_PASSWORD}@127.0.0.1:{}/postgres",
            server.port()
        );
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, format!("postgres = \"{url}\"\n{text}")).unwrap();
        config
    }

    /// The session's event stream from the start, read until it holds
    /// every one of `wanted` (or 30 s pass).
    fn events_until(daemon: &Daemon, session: &str, wanted: &[&str]) -> String {
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let mut stream = client
            .get(format!("{}/v1/sessions/{session}/events", daemon.base))
            .bearer_auth(ADMIN)
            .send()
            .unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        let mut text = String::new();
        let mut buffer = [0u8; 8192];
        while !wanted.iter().all(|w| text.contains(w)) {
            let read = stream
                .read(&mut buffer)
                .unwrap_or_else(|e| panic!("{e}; read so far:\n{text}"));
            assert!(read > 0, "the stream ended:\n{text}");
            text.push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
        text
    }

    fn listed(daemon: &Daemon) -> Vec<String> {
        list_all(daemon, ADMIN, 50).0
    }

    /// A new session with an uploaded text file (its ref) and a turn run
    /// to its end.
    fn session_with_a_file_and_a_turn(daemon: &Daemon, workspace: &Path) -> (String, String) {
        let session = new_session(daemon, ADMIN, workspace);
        let (status, upload) = daemon.call(
            "POST",
            &format!("/v1/sessions/{session}/attachments"),
            ADMIN,
            Some(json!({"filename": "notes.txt", "mime_type": "text/plain",
                        "data_base64": "a2VwdCBpbiBwb3N0Z3Jlcwo="})),
        );
        assert_eq!(status, StatusCode::CREATED, "{upload}");
        let file = upload["ref"].as_str().unwrap().to_string();
        let (status, body) = daemon.call(
            "POST",
            &format!("/v1/sessions/{session}/messages"),
            ADMIN,
            Some(json!({"role": "user", "parts": [{"type": "text", "text": "Read the notes."}]})),
        );
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        wait_for(daemon, ADMIN, &session, |s| s["status"] == "completed");
        (session, file)
    }

    #[test]
    fn daemons_keep_sessions_in_postgres_across_restarts_and_share_them() {
        let server = PostgresServer::start();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let model = runtime.block_on(Replay::start(vec![Reply::sse(ANSWER.into())]));
        let model_url = format!("{}/v1", model.base_url);
        let dir = tempfile::tempdir().unwrap();
        let config = write_postgres_config(dir.path(), &model_url, &server);
        let out = roundtable(&[
            "--config",
            config.to_str().unwrap(),
            "serve",
            "--print-config",
        ]);
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && shown.contains("postgres = "),
            "{shown}"
        );
        assert!(!shown.contains(DB_PASSWORD), "{shown}");

        // A session with an attachment and a turn run to its end.
        let daemon = Daemon::start(dir.path(), &config);
        let (session, file) = session_with_a_file_and_a_turn(&daemon, dir.path());
        let (exit, logs) = daemon.terminate();
        assert!(exit.success(), "{logs}");
        assert!(logs.contains("\"store\":\"postgres\""), "{logs}");
        assert!(
            !logs.contains(DB_PASSWORD),
            "the password in the logs:\n{logs}"
        );
        // Nothing of the sessions is in the data folder.
        assert!(
            !dir.path()
                .join("data/sessions")
                .join(&session)
                .join("events.ndjson")
                .exists()
        );

        // After a restart: the session, its events and its attachment.
        let daemon = Daemon::start(dir.path(), &config);
        assert_eq!(daemon.call("GET", "/readyz", "", None).0, StatusCode::OK);
        let found = wait_for(&daemon, ADMIN, &session, |s| s["status"] == "completed");
        assert!(found["running_turn_id"].is_null(), "{found}");
        assert_eq!(listed(&daemon), vec![session.clone()]);
        let events = events_until(
            &daemon,
            &session,
            &["session_created", "turn_started", "All done.", "settled"],
        );
        assert!(events.contains("Read the notes."), "{events}");
        let name = file.strip_prefix("attachments/").unwrap();
        let attachment = format!("/v1/sessions/{session}/attachments/{name}");
        let (status, bytes) = daemon.call("GET", &attachment, ADMIN, None);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(bytes, Value::String("kept in postgres\n".into()));

        // A second daemon on the same database lists it and serves its
        // file; a session made there shows in the first one's list.
        let other_dir = tempfile::tempdir().unwrap();
        let other_config = write_postgres_config(other_dir.path(), &model_url, &server);
        let other = Daemon::start(other_dir.path(), &other_config);
        assert_eq!(listed(&other), vec![session.clone()]);
        assert_eq!(other.call("GET", &attachment, ADMIN, None).1, bytes);
        let theirs = new_session(&other, ADMIN, other_dir.path());
        let deadline = Instant::now() + Duration::from_secs(30);
        while listed(&daemon) != vec![theirs.clone(), session.clone()] {
            assert!(Instant::now() < deadline, "{:?}", listed(&daemon));
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(listed(&other), vec![theirs, session]);
    }

    #[test]
    fn nats_and_postgres_together_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
        let out = roundtable(&[
            "--config",
            config.to_str().unwrap(),
            "serve",
            "--nats",
            "nats://127.0.0.1:4222",
            "--postgres",
            &format!("postgres://app:{DB_PASSWORD}@127.0.0.1:1/app"),
        ]);
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(said.contains("nats") && said.contains("postgres"), "{said}");
        assert!(!said.contains(DB_PASSWORD), "{said}");
        assert!(!dir.path().join("data").exists());
    }

    #[test]
    fn an_unreachable_database_fails_the_start_without_its_password() {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
        let port = free_port();
        let out = roundtable(&[
            "--config",
            config.to_str().unwrap(),
            "serve",
            "--postgres",
            &format!("postgres://app:{DB_PASSWORD}@127.0.0.1:{port}/app"),
        ]);
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(said.contains(&format!("127.0.0.1:{port}")), "{said}");
        assert!(!said.contains(DB_PASSWORD), "{said}");
    }
}

#[test]
fn a_bad_bot_catalogue_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let base = std::fs::read_to_string(&config).unwrap();
    let bot = |id: &str, extra: &str| {
        format!(
            "\n[[bots]]\nid = \"{id}\"\nname = \"{id}\"\npersona = \"p\"\ntrigger = \"mention\"\n{extra}\n"
        )
    };
    let cases = [
        (bot("a", "") + &bot("a", ""), "used twice"),
        (bot("a", "model = \"mock/other\""), "mock/other"),
        (bot("a", "").replace("mention", "sometimes"), "sometimes"),
    ];
    for (bots, reason) in cases {
        std::fs::write(&config, format!("{base}{bots}")).unwrap();
        let out = roundtable(&["--config", config.to_str().unwrap(), "serve"]);
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(said.contains(reason), "{reason}: {said}");
    }
    assert!(
        !dir.path().join("data").exists(),
        "a refused start wrote its data folder"
    );
}

#[test]
fn the_demo_bots_answer_in_a_room_until_the_loop_guard_stops_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "http://127.0.0.1:9/v1");
    let daemon = Daemon::start_with(dir.path(), &config, &["--demo"]);
    let (status, bots) = daemon.call("GET", "/v1/bots", ADMIN, None);
    assert_eq!(status, StatusCode::OK, "{bots}");
    let all = json!({"title": "Demo", "bots": ["archivist", "chatty", "rusty"]});
    let (status, room) = daemon.call("POST", "/v1/rooms", ADMIN, Some(all));
    assert_eq!(status, StatusCode::CREATED, "{room}");
    let id = room["id"].as_str().unwrap();
    let ask = json!({"text": "@archivist where are the Q3 invoices? Please look up invoices"});
    let (status, posted) = daemon.call(
        "POST",
        &format!("/v1/rooms/{id}/messages"),
        ADMIN,
        Some(ask),
    );
    assert_eq!(status, StatusCode::CREATED, "{posted}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let entries = loop {
        let (_, page) = daemon.call(
            "GET",
            &format!("/v1/rooms/{id}/entries?limit=1000"),
            ADMIN,
            None,
        );
        let entries = page["entries"].as_array().cloned().unwrap_or_default();
        if entries.iter().any(|e| e["type"] == "signal.room.halted") {
            break entries;
        }
        assert!(Instant::now() < deadline, "no halt: {page:#}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let found = entries
        .iter()
        .find(|e| e["type"] == "pi.tool_result")
        .unwrap();
    assert!(
        found.to_string().contains("/finance/2024/q3/invoices.pdf"),
        "{found}"
    );
    assert!(entries.iter().any(|e| e["author"] == "chatty"));
    assert_eq!(
        entries[posted["seq"].as_u64().unwrap() as usize - 1]["author"],
        "host"
    );
}
