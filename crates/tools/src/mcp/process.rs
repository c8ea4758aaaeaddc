//! The child process of a stdio MCP server: started in a process group of
//! its own with the configured environment, its stderr kept (the last lines
//! explain most failures), and the whole group killed and reaped when it is
//! dropped.
//!
//! Killing the group, not just the child, matters: `npx` and `uvx` start
//! the real server as a grandchild, which would otherwise outlive the
//! toolset.

use std::collections::VecDeque;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Notify;

use crate::process_group::GroupGuard;
use crate::workspace::CommandEnv;

/// Lines of stderr kept.
const STDERR_LINES: usize = 40;
/// Characters kept of one stderr line.
const STDERR_LINE_CHARS: usize = 400;

/// A running stdio server.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Option<Child>,
    group: GroupGuard,
    pid: Option<u32>,
    stderr: StderrTail,
}

/// What a stdio server is started with.
pub(crate) struct Launch<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub base_env: &'a CommandEnv,
    pub env: &'a [(String, String)],
    pub cwd: Option<&'a Path>,
}

impl ServerProcess {
    /// Starts the server; returns it with the pipes the protocol runs over.
    pub(crate) fn spawn(launch: &Launch<'_>) -> std::io::Result<(Self, ChildStdout, ChildStdin)> {
        let mut command = Command::new(launch.command);
        command
            .args(launch.args)
            .env_clear()
            .envs(launch.base_env.vars())
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = launch.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn()?;
        let group = GroupGuard::new(&child);
        let missing = || std::io::Error::other("the child's pipes were not set up");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr = StderrTail::default();
        if let Some(pipe) = child.stderr.take() {
            tokio::spawn(stderr.clone().collect(pipe));
        } else {
            stderr.close();
        }
        let process = Self {
            pid: child.id(),
            child: Some(child),
            group,
            stderr,
        };
        Ok((process, stdout, stdin))
    }

    /// The process id of the server (the leader of its group).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The exit status, when the server has exited.
    pub(crate) fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Kills the server's group now.
    pub(crate) fn kill(&mut self) {
        self.group.kill();
    }

    /// Waits for the killed (or exited) server to be reaped.
    pub(crate) async fn reap(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.wait().await;
        }
    }

    /// What went wrong, as far as the process tells: its exit status, if it
    /// exited, and the last lines of its stderr, waiting a moment for stderr
    /// to end first (a server that exits writes its last words just before).
    pub(crate) async fn post_mortem(&mut self) -> PostMortem {
        // A server that closed the connection is usually on its way out, and
        // an exiting process closes its pipes a moment before it can be
        // reaped: without this wait the report would often miss the status.
        if let Some(child) = self.child.as_mut() {
            let _ = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
        }
        // An exiting or killed group closes the pipe at once; a grandchild
        // that escaped the group could keep it open, hence the bound.
        let bound = if self.exit_status().is_some() {
            Duration::from_millis(500)
        } else {
            Duration::from_millis(50)
        };
        self.stderr.closed(bound).await;
        PostMortem {
            exit: self.exit_status().map(describe_exit),
            stderr: self.stderr.text(),
        }
    }
}

/// How a server process ended, as far as it tells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PostMortem {
    /// "exited with status 3", "was killed by signal 9"; `None` while it runs.
    pub exit: Option<String>,
    /// The last lines of its stderr (empty when it wrote none).
    pub stderr: String,
}

impl std::fmt::Display for PostMortem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(exit) = &self.exit {
            write!(f, "the process {exit}")?;
            if !self.stderr.is_empty() {
                f.write_str("; ")?;
            }
        }
        if !self.stderr.is_empty() {
            write!(f, "its stderr ended with:\n{}", self.stderr)?;
        }
        Ok(())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.group.kill();
        // Reap the killed child so it does not linger as a zombie; without
        // a runtime, tokio's `kill_on_drop` reaps it later.
        if let Some(mut child) = self.child.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = child.wait().await;
            });
        }
    }
}

/// How long a post-mortem waits for a server that closed its connection to
/// exit. Only a server that closed it and lives on costs this wait.
const EXIT_GRACE: Duration = Duration::from_millis(500);

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => String::from("exited"),
    }
}

/// The last lines a process wrote to stderr.
#[derive(Debug, Clone, Default)]
struct StderrTail {
    state: Arc<Mutex<TailState>>,
    closed: Arc<Notify>,
}

#[derive(Debug, Default)]
struct TailState {
    lines: VecDeque<String>,
    closed: bool,
}

impl StderrTail {
    /// Reads `pipe` to its end, keeping the last lines.
    async fn collect(self, pipe: impl AsyncRead + Unpin) {
        let mut reader = BufReader::new(pipe);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    let text = text.trim_end();
                    let mut kept: String = text.chars().take(STDERR_LINE_CHARS).collect();
                    if kept.len() < text.len() {
                        kept.push('…');
                    }
                    let mut state = self.lock();
                    if state.lines.len() == STDERR_LINES {
                        state.lines.pop_front();
                    }
                    state.lines.push_back(kept);
                }
            }
        }
        self.close();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.closed.notify_waiters();
    }

    /// Waits until the pipe has ended, at most `bound`.
    async fn closed(&self, bound: Duration) {
        let notified = self.closed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.lock().closed {
            return;
        }
        let _ = tokio::time::timeout(bound, notified).await;
    }

    fn text(&self) -> String {
        let state = self.lock();
        let lines: Vec<&str> = state.lines.iter().map(String::as_str).collect();
        lines.join("\n")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TailState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch<'a>(script: &'a [String], env: &'a CommandEnv) -> Launch<'a> {
        Launch {
            command: "sh",
            args: script,
            base_env: env,
            env: &[],
            cwd: None,
        }
    }

    #[tokio::test]
    async fn a_process_that_exits_is_described_with_its_last_words() {
        let script = vec![
            "-c".to_string(),
            "for i in $(seq 1 60); do echo line $i >&2; done; exit 3".to_string(),
        ];
        let env = CommandEnv::host_without_secrets();
        let (mut process, _out, _in) = ServerProcess::spawn(&launch(&script, &env)).unwrap();
        // The exit status is known once the child is reaped; wait for it.
        process.child.as_mut().unwrap().wait().await.unwrap();
        let text = process.post_mortem().await.to_string();
        assert!(
            text.starts_with("the process exited with status 3; its stderr ended with:\nline 21\n"),
            "{text}"
        );
        assert!(text.ends_with("line 60"), "{text}");
    }

    #[tokio::test]
    async fn the_exit_status_is_reported_when_the_pipes_close_before_the_exit() {
        // Closing stdout first is what a dying server looks like from here:
        // the connection ends a moment before the process can be reaped.
        let script = vec![
            "-c".to_string(),
            "exec 1>&- 2>&-; sleep 0.1; exit 3".to_string(),
        ];
        let env = CommandEnv::host_without_secrets();
        let (mut process, _out, _in) = ServerProcess::spawn(&launch(&script, &env)).unwrap();
        let text = process.post_mortem().await;
        assert_eq!(text.exit.as_deref(), Some("exited with status 3"));
    }

    #[tokio::test]
    async fn the_environment_is_the_base_plus_the_entry() {
        let script = vec!["-c".to_string(), "echo \"$A:$B\" >&2".to_string()];
        let env = CommandEnv::exactly([("A", "base"), ("PATH", "/usr/bin:/bin")]);
        let extra = [("B".to_string(), "entry".to_string())];
        let mut l = launch(&script, &env);
        l.env = &extra;
        let (mut process, _out, _in) = ServerProcess::spawn(&l).unwrap();
        process.child.as_mut().unwrap().wait().await.unwrap();
        let text = process.post_mortem().await;
        assert_eq!(text.stderr, "base:entry");
        assert_eq!(text.exit.as_deref(), Some("exited with status 0"));
    }
}
