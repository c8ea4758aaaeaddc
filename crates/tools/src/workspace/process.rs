//! Running a command in the workspace: its own process group, a timeout, an
//! output cap, and the whole group killed on timeout, cancel or drop.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::CommandEnv;
use crate::ProgressSink;
use crate::ToolProgress;
use crate::process_group::GroupGuard;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this status code.
    Code(i32),
    /// A signal ended it.
    Signalled,
    /// It ran past its timeout and was killed.
    TimedOut,
    /// The call was cancelled and the command killed.
    Cancelled,
}

/// What a command printed (stdout and stderr interleaved), its tail kept.
#[derive(Debug)]
pub(crate) struct CommandOutput {
    pub exit: Exit,
    pub output: String,
    pub total_bytes: usize,
    pub omitted_bytes: usize,
}

impl CommandOutput {
    /// True when the command exited with status 0.
    pub fn success(&self) -> bool {
        self.exit == Exit::Code(0)
    }

    /// A one-line description of how the command ended.
    pub fn status_line(&self, timeout: Duration) -> String {
        match self.exit {
            Exit::Code(code) => format!("exit status {code}"),
            Exit::Signalled => String::from("killed by a signal"),
            Exit::TimedOut => format!("timed out after {} s and was killed", timeout.as_secs()),
            Exit::Cancelled => String::from("cancelled and killed"),
        }
    }

    /// The output with a note about omitted bytes when the cap was hit.
    pub fn output_with_note(&self) -> String {
        if self.omitted_bytes == 0 {
            self.output.clone()
        } else {
            format!(
                "[first {} of {} bytes of output omitted]\n{}",
                self.omitted_bytes, self.total_bytes, self.output
            )
        }
    }
}

/// A command to run from the workspace root.
pub(crate) struct Run<'a> {
    pub program: &'a str,
    pub args: &'a [&'a str],
    pub cwd: &'a Path,
    pub env: &'a CommandEnv,
    pub timeout: Duration,
    pub output_cap: usize,
    pub cancel: &'a CancellationToken,
    pub progress: Option<(&'a ProgressSink, Arc<str>)>,
}

#[derive(Default)]
struct Tail {
    buf: Vec<u8>,
    total: usize,
    omitted: usize,
}

impl Tail {
    fn push(&mut self, bytes: &[u8], cap: usize) {
        self.total += bytes.len();
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > cap.saturating_mul(2).max(1) {
            let drop = self.buf.len() - cap;
            self.buf.drain(..drop);
            self.omitted += drop;
        }
    }

    fn finish(mut self, cap: usize) -> (String, usize, usize) {
        if self.buf.len() > cap {
            let drop = self.buf.len() - cap;
            self.buf.drain(..drop);
            self.omitted += drop;
        }
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        (text, self.total, self.omitted)
    }
}

/// Runs the command to completion, timeout or cancellation.
pub(crate) async fn run(cmd: Run<'_>) -> std::io::Result<CommandOutput> {
    let mut child = Command::new(cmd.program)
        .args(cmd.args)
        .current_dir(cmd.cwd)
        .env_clear()
        .envs(cmd.env.vars())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let mut guard = GroupGuard::new(&child);
    let tail = Arc::new(Mutex::new(Tail::default()));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(pump(
            out,
            tail.clone(),
            cmd.output_cap,
            progress(&cmd),
        )));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(pump(
            err,
            tail.clone(),
            cmd.output_cap,
            progress(&cmd),
        )));
    }

    let exit = tokio::select! {
        status = child.wait() => match status?.code() {
            Some(code) => Exit::Code(code),
            None => Exit::Signalled,
        },
        () = tokio::time::sleep(cmd.timeout) => Exit::TimedOut,
        () = cmd.cancel.cancelled() => Exit::Cancelled,
    };
    // Whatever happened, nothing of the group outlives the call: background
    // children would otherwise keep running and hold the pipes open.
    guard.kill();
    if exit == Exit::TimedOut || exit == Exit::Cancelled {
        let _ = child.wait().await;
    }
    for reader in readers {
        // The group is dead, so the pipes close; a process that escaped the
        // group (setsid) could hold them, hence the bound.
        let abort = reader.abort_handle();
        if tokio::time::timeout(Duration::from_secs(2), reader)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
    let tail = std::mem::take(&mut *tail.lock().unwrap_or_else(|e| e.into_inner()));
    let (output, total_bytes, omitted_bytes) = tail.finish(cmd.output_cap);
    Ok(CommandOutput {
        exit,
        output,
        total_bytes,
        omitted_bytes,
    })
}

fn progress(cmd: &Run<'_>) -> Option<(ProgressSink, Arc<str>)> {
    cmd.progress
        .as_ref()
        .map(|(sink, id)| ((*sink).clone(), id.clone()))
}

async fn pump(
    mut reader: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Tail>>,
    cap: usize,
    progress: Option<(ProgressSink, Arc<str>)>,
) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&chunk[..n], cap);
                if let Some((sink, call_id)) = &progress {
                    sink.send(ToolProgress {
                        call_id: call_id.clone(),
                        parts: vec![roundtable_providers::UserBlock::text(
                            String::from_utf8_lossy(&chunk[..n]).into_owned(),
                        )],
                    });
                }
            }
        }
    }
}
