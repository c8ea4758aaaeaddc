//! Replicas of the `roundtable` binary over one shared store, each with
//! its own address and data folder, killed and restarted at will.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::blocking::Client;
use roundtable_test_support::ports::free_port;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_roundtable");
pub(crate) const ADMIN: &str = "admin-token-0123456789abcdef";

/// How long a turn lease lasts in the fleet, and how often it is renewed.
pub(crate) const TURN_LEASE: &str = "2s";
pub(crate) const TURN_LEASE_RENEW: &str = "500ms";

/// One replica: its config, its process while it runs, its log.
pub(crate) struct Replica {
    config: PathBuf,
    log: PathBuf,
    pub(crate) base: String,
    child: Option<Child>,
}

impl Replica {
    /// A replica whose config names `store` (a `nats = ...` or
    /// `postgres = ...` line), the model at `model_url` and workspaces
    /// under `root`; not started.
    pub(crate) fn new(dir: &Path, store: &str, model_url: &str, root: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let port = free_port();
        let config = dir.join("roundtable.toml");
        let text = format!(
            r#"addr = "127.0.0.1:{port}"
data = "{data}"
workspace_root = "{root}"
chat_workspace = "{root}"
{store}

[limits]
shutdown_grace = "1s"
turn_lease = "{TURN_LEASE}"
turn_lease_renew = "{TURN_LEASE_RENEW}"

[[models]]
api = "openai-completions"
provider = "mock"
id = "m"
base_url = "{model_url}"
api_key = "test-key"
"#,
            data = dir.join("data").display(),
            root = root.display(),
        );
        std::fs::write(&config, text).unwrap();
        Self {
            config,
            log: dir.join("daemon.log"),
            base: format!("http://127.0.0.1:{port}"),
            child: None,
        }
    }

    /// Adds `text` (TOML tables such as `[[bots]]`) to the end of the
    /// replica's config; before [`start`](Self::start).
    #[allow(dead_code)]
    pub(crate) fn append_config(&self, text: &str) {
        let mut config = std::fs::read_to_string(&self.config).unwrap();
        config.push_str(text);
        std::fs::write(&self.config, config).unwrap();
    }

    /// The replica's config file.
    #[allow(dead_code)]
    pub(crate) fn config(&self) -> &Path {
        &self.config
    }

    /// Starts the process and waits until it is ready.
    pub(crate) fn start(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(BIN)
            .args(["--config", self.config.to_str().unwrap(), "serve"])
            .args(["--log-format", "json"])
            .env("ROUNDTABLE_TOKEN", ADMIN)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = Client::new();
        loop {
            let ready = client
                .get(format!("{}/readyz", self.base))
                .send()
                .is_ok_and(|r| r.status() == StatusCode::OK);
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "a replica never got ready:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the process where it stands (SIGKILL), as a crash would.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the process with SIGTERM and waits for it.
    pub(crate) fn terminate(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Runs `roundtable <args>` with this replica's config (a CLI command
    /// such as `token add`), and answers its output.
    #[allow(dead_code)]
    pub(crate) fn command(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(["--config", self.config.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap()
    }

    pub(crate) fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One request with `token`, answered as it is: the status and the body
/// as JSON (or as a string when it is not JSON).
pub(crate) fn send(
    client: &Client,
    token: &str,
    method: &str,
    url: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut request = client
        .request(method.parse().unwrap(), url)
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().unwrap();
    let status = response.status();
    let text = response.text().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// A client of the fleet: every call goes to one of `bases`, and a call a
/// dead replica cannot take goes to another.
#[derive(Clone)]
pub(crate) struct FleetClient {
    pub(crate) bases: Vec<String>,
    client: Client,
}

/// What a call answered.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
    /// Which replica answered.
    pub(crate) replica: usize,
}

impl FleetClient {
    /// One request to replica `replica` with `token`, answered as it is
    /// (no retry: for checks of what one replica says).
    #[allow(dead_code)]
    pub(crate) fn call_as(
        &self,
        replica: usize,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let url = format!("{}{path}", self.bases[replica]);
        send(&self.client, token, method, &url, body)
    }

    pub(crate) fn new(bases: Vec<String>) -> Self {
        let client = Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        Self { bases, client }
    }

    /// Sends a request to replica `first` (then, while replicas are down,
    /// to the next ones) until one answers; 5xx answers are tried again.
    pub(crate) fn call(
        &self,
        first: usize,
        method: &str,
        path: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> Answer {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut replica = first % self.bases.len();
        loop {
            let url = format!("{}{path}", self.bases[replica]);
            let mut request = self
                .client
                .request(method.parse().unwrap(), url)
                .bearer_auth(ADMIN);
            if let Some(body) = body {
                request = request.json(body);
            }
            if let Some(key) = key {
                request = request.header("Idempotency-Key", key);
            }
            if let Ok(response) = request.send() {
                let status = response.status();
                let text = response.text().unwrap_or_default();
                if !status.is_server_error() {
                    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
                    return Answer {
                        status,
                        body,
                        replica,
                    };
                }
            }
            assert!(
                Instant::now() < deadline,
                "no replica answered {method} {path}"
            );
            replica = (replica + 1) % self.bases.len();
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
