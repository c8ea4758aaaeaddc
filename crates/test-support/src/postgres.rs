//! Throwaway PostgreSQL servers: a fresh cluster in a temporary folder,
//! listening on a free loopback port, started and stopped by the test.
//!
//! The server binaries come from `ROUNDTABLE_POSTGRES_BIN` (a folder holding
//! `initdb` and `postgres`), else the newest `/usr/lib/postgresql/<version>/bin`
//! (Debian's `postgresql` package), else `PATH`.
//!
//! `initdb` and `postgres` refuse to run as root. As root the launcher runs
//! them as the `postgres` user (which Debian's package creates), or as
//! `nobody` when there is none, and hands them their folders; as any other
//! user it runs them as that user.
//!
//! A cluster is made once per user and server version (`initdb` takes about a
//! second) and kept as a template under the temporary folder; each server
//! starts from a copy of it. Every server runs under a small `sh` guard that
//! holds a pipe from the test process: when the test process ends, even
//! without unwinding, the pipe closes and the guard shuts the server down, so
//! no server outlives its test run.

// A launcher that cannot start its server must fail the test that asked.
#![allow(clippy::panic)]

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// The user every test server connects as (the cluster's superuser, trusted
/// on loopback).
pub const SUPERUSER: &str = "postgres";

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The line the server logs once it accepts connections.
const READY_LINE: &str = "database system is ready to accept connections";

/// Runs the server in the background and waits for it; a line on the guard's
/// standard input (a signal name) or its end (the test process is gone)
/// sends the server that signal (`INT`, a fast shutdown, by default).
const GUARD_SCRIPT: &str = r#"exec 3<&0
"$@" </dev/null &
server=$!
{ read how <&3; kill -"${how:-INT}" "$server" 2>/dev/null; } &
wait "$server"
"#;

/// A running (or stopped) throwaway PostgreSQL server. Dropping it shuts
/// the server down and removes its folder.
pub struct PostgresServer {
    port: u16,
    durable: bool,
    data: PathBuf,
    running: Option<Running>,
    // Last: the folder goes after the server has stopped.
    dir: tempfile::TempDir,
}

struct Running {
    guard: Child,
    control: ChildStdin,
}

impl PostgresServer {
    /// A fresh server tuned for tests: no fsync (a crash of the machine is
    /// not what tests exercise), everything else as PostgreSQL ships it.
    pub fn start() -> Self {
        Self::launch(false)
    }

    /// A fresh server with PostgreSQL's durability settings (fsync and
    /// synchronous commit on), for benchmarks that compare with other
    /// durable stores.
    pub fn start_durable() -> Self {
        Self::launch(true)
    }

    fn launch(durable: bool) -> Self {
        let user = server_user();
        let dir = tempfile::Builder::new()
            .prefix("roundtable-postgres-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot make a folder for a test server: {e}"));
        user.hand_over(dir.path());
        let data = dir.path().join("data");
        let copied = Command::new("cp")
            .arg("-a")
            .arg(template())
            .arg(&data)
            .status();
        if !copied.is_ok_and(|s| s.success()) {
            panic!("cannot copy the template cluster to {}", data.display());
        }
        let mut server = Self {
            port: 0,
            durable,
            data,
            running: None,
            dir,
        };
        // Another process may take the port between `free_port` and the
        // server's bind: the server then exits, and a fresh port is tried.
        let mut last_error = String::new();
        for _ in 0..3 {
            server.port = free_port();
            match server.try_spawn() {
                Ok(()) => return server,
                Err(why) => last_error = why,
            }
        }
        panic!("{last_error}");
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        self.database_url("postgres")
    }

    /// The URL of another database of this server.
    pub fn database_url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{database}", self.port)
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the server is running.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Stops the server with a fast shutdown (open connections are ended,
    /// committed data is kept) and waits until it has exited.
    pub fn stop(&mut self) {
        self.signal_and_wait("INT");
    }

    /// Stops the server at once without a checkpoint, as a crash would (the
    /// next start recovers from the write-ahead log).
    pub fn crash(&mut self) {
        self.signal_and_wait("QUIT");
    }

    /// Starts the stopped server again on the same port with the same data.
    pub fn start_again(&mut self) {
        if self.running.is_some() {
            return;
        }
        if let Err(why) = self.try_spawn() {
            panic!("{why}");
        }
    }

    fn signal_and_wait(&mut self, signal: &str) {
        if let Some(mut running) = self.running.take() {
            let _ = writeln!(running.control, "{signal}");
            drop(running.control);
            let _ = running.guard.wait();
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Starts the server and waits until it logs that it accepts
    /// connections. A server that exits first (its port taken) is an error,
    /// so a port another process listens on is never taken for this one.
    fn try_spawn(&mut self) -> Result<(), String> {
        let log_path = self.log_path();
        let ready_before = self.log().matches(READY_LINE).count();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let mut settings = vec![
            format!("port={}", self.port),
            "listen_addresses=127.0.0.1".to_string(),
            format!("unix_socket_directories={}", self.dir.path().display()),
            "max_connections=200".to_string(),
        ];
        if !self.durable {
            settings.extend(["fsync=off".to_string(), "full_page_writes=off".to_string()]);
        }
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARD_SCRIPT)
            .arg("postgres-guard")
            .arg(binary("postgres"))
            .arg("-D")
            .arg(&self.data)
            .current_dir(self.dir.path());
        for setting in &settings {
            command.arg("-c").arg(setting);
        }
        command
            .env("LC_ALL", "C")
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err);
        server_user().apply(&mut command);
        let mut guard = command
            .spawn()
            .map_err(|e| format!("cannot start postgres: {e}"))?;
        let Some(control) = guard.stdin.take() else {
            return Err("the server guard has no standard input".into());
        };
        let mut running = Running { guard, control };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = running.guard.try_wait() {
                return Err(format!(
                    "postgres exited ({status}) before accepting connections on port {}:\n{}",
                    self.port,
                    tail(&self.log())
                ));
            }
            if self.log().matches(READY_LINE).count() > ready_before {
                self.running = Some(running);
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = writeln!(running.control, "QUIT");
                let _ = running.guard.wait();
                return Err(format!(
                    "postgres did not accept connections on port {} within {START_TIMEOUT:?}:\n{}",
                    self.port,
                    tail(&self.log())
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last lines of a server log, for error messages.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The folder of the PostgreSQL server binaries (see the module docs).
///
/// # Panics
///
/// When no `initdb` is found: the tests that need a server cannot run, and
/// the message says how to install one.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("ROUNDTABLE_POSTGRES_BIN") {
            return PathBuf::from(dir);
        }
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let version = e.file_name().to_str()?.parse::<u32>().ok()?;
                let bin = e.path().join("bin");
                bin.join("initdb").is_file().then_some((version, bin))
            })
            .collect();
        versions.sort();
        if let Some((_, bin)) = versions.pop() {
            return bin;
        }
        std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths).find(|dir| dir.join("initdb").is_file())
            })
            .unwrap_or_else(|| {
                panic!(
                    "PostgreSQL's initdb not found in ROUNDTABLE_POSTGRES_BIN, \
                     /usr/lib/postgresql/*/bin or PATH: the PostgreSQL tests need a \
                     server (apt-get install postgresql)"
                )
            })
    })
}

fn binary(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// The server's major version, as `postgres --version` prints it.
fn server_version() -> String {
    let out = Command::new(binary("postgres")).arg("--version").output();
    let text = match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(out) => panic!("postgres --version failed: {}", out.status),
        Err(e) => panic!("cannot run {}: {e}", binary("postgres").display()),
    };
    // "postgres (PostgreSQL) 15.18 (Debian ...)"
    text.split_whitespace()
        .nth(2)
        .and_then(|v| v.split('.').next())
        .unwrap_or("unknown")
        .to_string()
}

/// The template cluster, made once per user and server version.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let user = server_user();
        let kept = std::env::temp_dir().join(format!(
            "roundtable-postgres-template-{}-{}",
            server_version(),
            user.name()
        ));
        let data = kept.join("data");
        // The template is renamed into place only once complete.
        if data.join("PG_VERSION").is_file() {
            return data;
        }
        let staging = tempfile::Builder::new()
            .prefix("roundtable-postgres-template-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot make a folder for the template cluster: {e}"));
        user.hand_over(staging.path());
        let mut initdb = Command::new(binary("initdb"));
        initdb
            .arg("-D")
            .arg(staging.path().join("data"))
            .args(["-A", "trust", "-U", SUPERUSER, "-E", "UTF8", "--locale=C"])
            .arg("--no-sync")
            .env("LC_ALL", "C")
            .current_dir(staging.path())
            .stdin(Stdio::null());
        user.apply(&mut initdb);
        match initdb.output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!(
                "initdb failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => panic!("cannot run {}: {e}", binary("initdb").display()),
        }
        let staged = staging.keep();
        // Another test process may have won the race: then use its template.
        if std::fs::rename(&staged, &kept).is_err() {
            let _ = std::fs::remove_dir_all(&staged);
        }
        if !data.join("PG_VERSION").is_file() {
            panic!("the template cluster {} is incomplete", data.display());
        }
        data
    })
}

/// Who runs `initdb` and `postgres`.
#[derive(Debug, Clone)]
enum ServerUser {
    /// The test's own user (not root).
    Me(String),
    /// Another user, because the test runs as root.
    Other { name: String, uid: u32, gid: u32 },
}

fn server_user() -> &'static ServerUser {
    static USER: OnceLock<ServerUser> = OnceLock::new();
    USER.get_or_init(|| {
        let me = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(0);
        if me != 0 {
            return ServerUser::Me(format!("uid{me}"));
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        for wanted in ["postgres", "nobody"] {
            for line in passwd.lines() {
                let fields: Vec<&str> = line.split(':').collect();
                if fields.len() >= 4
                    && fields[0] == wanted
                    && let (Ok(uid), Ok(gid)) = (fields[2].parse(), fields[3].parse())
                {
                    return ServerUser::Other {
                        name: wanted.to_string(),
                        uid,
                        gid,
                    };
                }
            }
        }
        panic!(
            "running as root, and neither a `postgres` nor a `nobody` user exists to run \
             the PostgreSQL server as (apt-get install postgresql creates `postgres`)"
        )
    })
}

impl ServerUser {
    fn name(&self) -> &str {
        match self {
            ServerUser::Me(name) | ServerUser::Other { name, .. } => name,
        }
    }

    /// Makes `command` run as this user.
    fn apply(&self, command: &mut Command) {
        if let ServerUser::Other { uid, gid, .. } = self {
            command.uid(*uid).gid(*gid);
        }
    }

    /// Gives this user a folder the launcher made.
    fn hand_over(&self, dir: &Path) {
        if let ServerUser::Other { uid, gid, .. } = self {
            std::os::unix::fs::chown(dir, Some(*uid), Some(*gid)).unwrap_or_else(|e| {
                panic!("cannot hand {} to the server user: {e}", dir.display())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one query with `psql`; its output, or None when it failed.
    fn query(server: &PostgresServer, sql: &str) -> Option<String> {
        let out = Command::new(binary("psql"))
            .args(["-X", "-A", "-t", "-c", sql])
            .arg(server.url())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn listens(port: u16) -> bool {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }

    #[test]
    fn a_server_starts_stops_and_starts_again_with_its_data() {
        let mut server = PostgresServer::start();
        let port = server.port();
        assert!(server.is_running());
        query(
            &server,
            "CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)",
        )
        .expect("the server answers");
        server.stop();
        assert!(!server.is_running());
        assert!(!listens(port), "a stopped server still listens");
        assert!(query(&server, "SELECT 1").is_none());
        server.start_again();
        assert_eq!(server.port(), port);
        assert_eq!(query(&server, "SELECT n FROM kept").as_deref(), Some("42"));
        server.crash();
        server.start_again();
        assert_eq!(query(&server, "SELECT n FROM kept").as_deref(), Some("42"));
        let dir = server.dir.path().to_path_buf();
        drop(server);
        assert!(!listens(port), "a dropped server still listens");
        assert!(!dir.exists(), "a dropped server's folder is left behind");
    }

    #[test]
    fn servers_are_independent() {
        let a = PostgresServer::start();
        let b = PostgresServer::start();
        assert_ne!(a.port(), b.port());
        query(&a, "CREATE TABLE only_in_a (n int)").expect("a answers");
        assert!(query(&b, "SELECT * FROM only_in_a").is_none());
    }
}
