//! Real `nats-server -js` processes for the tests of everything stored in
//! NATS JetStream (the thread store, the sessions' blob store): on free
//! loopback ports, each with its own temporary store folder, killed when
//! dropped.
//!
//! The tests need the `nats-server` binary (Debian package `nats-server`) on
//! PATH or at `/usr/sbin/nats-server`; without it they fail and say so.

// A launcher that cannot start its server must fail the test that asked.
#![allow(clippy::panic)]

use std::fmt::Display;
use std::future::Future;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// Connects a client with `connect`, trying again while the server (or a
/// cluster's JetStream meta leader) is still coming up, for 30 s at most.
///
/// # Panics
///
/// When `connect` still fails after 30 s, with its last error.
pub async fn connect_when_up<T, E, F, Fut>(url: &str, connect: F) -> T
where
    E: Display,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match connect().await {
            Ok(client) => return client,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("cannot connect to NATS at {url}: {e}"),
        }
    }
}

/// The `nats-server` binary.
///
/// # Panics
///
/// When there is none on PATH or at `/usr/sbin/nats-server`, saying how to
/// get it.
pub fn nats_server_binary() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nats-server"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| {
            let debian = PathBuf::from("/usr/sbin/nats-server");
            debian.is_file().then_some(debian)
        })
        .unwrap_or_else(|| {
            panic!(
                "nats-server not found on PATH or at /usr/sbin/nats-server: \
                 the NATS tests need it (apt-get install nats-server)"
            )
        })
}

/// A running nats-server; killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    /// Its client port.
    pub port: u16,
    /// Its name (unique within a cluster).
    pub name: String,
    args: Vec<String>,
    /// Its JetStream store folder (kept for a restart).
    pub store_dir: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl NatsServer {
    /// A single JetStream server with a fresh store folder.
    ///
    /// # Panics
    ///
    /// When the server cannot be started.
    pub fn start() -> Self {
        let dir = temp_dir();
        // Another process may take the port between `free_port` and the
        // server's bind: then the server exits, and a fresh port is tried.
        for _ in 0..3 {
            let mut server = Self::new("solo".into(), free_port(), dir.path(), Vec::new());
            if server.try_spawn().is_ok() {
                server._dir = Some(dir);
                return server;
            }
        }
        let mut server = Self::launch("solo".into(), free_port(), dir.path(), Vec::new());
        server._dir = Some(dir);
        server
    }

    /// A JetStream cluster of `n` servers on loopback, each with its own store
    /// folder and routes to the others.
    ///
    /// # Panics
    ///
    /// When a server cannot be started.
    pub fn cluster(n: usize) -> Vec<Self> {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let routes = |me: usize| {
            ports
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != me)
                .map(|(_, (_, route))| format!("nats://127.0.0.1:{route}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        ports
            .iter()
            .enumerate()
            .map(|(i, (client, route))| {
                let dir = temp_dir();
                let extra = vec![
                    "--cluster_name".into(),
                    "roundtable-test".into(),
                    "--cluster".into(),
                    format!("nats://127.0.0.1:{route}"),
                    "--routes".into(),
                    routes(i),
                ];
                let mut server = Self::launch(format!("node-{i}"), *client, dir.path(), extra);
                server._dir = Some(dir);
                server
            })
            .collect()
    }

    fn launch(name: String, port: u16, store_dir: &Path, extra: Vec<String>) -> Self {
        let mut server = Self::new(name, port, store_dir, extra);
        server.spawn();
        server
    }

    fn new(name: String, port: u16, store_dir: &Path, extra: Vec<String>) -> Self {
        let mut args = vec![
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-n".into(),
            name.clone(),
            "-js".into(),
            "-sd".into(),
            store_dir.display().to_string(),
        ];
        args.extend(extra);
        Self {
            child: None,
            port,
            name,
            args,
            store_dir: store_dir.to_path_buf(),
            _dir: None,
        }
    }

    fn spawn(&mut self) {
        if let Err(why) = self.try_spawn() {
            panic!("{why}");
        }
    }

    /// Starts the process and waits until it listens. A server that exits
    /// first (its port taken) is an error, so a port some other process
    /// listens on is never mistaken for this server's.
    fn try_spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new(nats_server_binary())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start nats-server: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "nats-server {} exited ({status}) before listening on port {}",
                    self.name, self.port
                ));
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "nats-server {} did not listen on port {} within 10 s",
                    self.name, self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Listening, and still ours: it did not exit after a failed bind.
        std::thread::sleep(Duration::from_millis(20));
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "nats-server {} exited ({status}) on port {}",
                self.name, self.port
            ));
        }
        self.child = Some(child);
        Ok(())
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server at once (SIGKILL: no clean shutdown).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same store folder.
    ///
    /// # Panics
    ///
    /// When the server cannot be started again.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("cannot make a temporary folder: {e}"))
}
