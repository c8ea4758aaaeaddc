//! Running a command in the workspace: its own process group, a timeout, an
//! output cap, and the whole group killed on timeout, cancel or drop.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::CommandEnv;
use crate::ProgressSink;
use crate::context::ToolProgress;
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
    /// The whole output as bytes, when [`Run::keep_full`] asked for it.
    pub full: Option<Vec<u8>>,
}

impl CommandOutput {
    /// True when the command exited with status 0.
    pub(crate) fn success(&self) -> bool {
        self.exit == Exit::Code(0)
    }

    /// A one-line description of how the command ended.
    pub(crate) fn status_line(&self, timeout: Duration) -> String {
        match self.exit {
            Exit::Code(code) => format!("exit status {code}"),
            Exit::Signalled => String::from("killed by a signal"),
            Exit::TimedOut => format!("timed out after {} s and was killed", timeout.as_secs()),
            Exit::Cancelled => String::from("cancelled and killed"),
        }
    }

    /// The output with a note about omitted bytes when the cap was hit.
    pub(crate) fn output_with_note(&self) -> String {
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

/// A command to run.
pub(crate) struct Run<'a> {
    /// A program name looked up on the PATH, or a path.
    pub program: &'a OsStr,
    pub args: &'a [&'a str],
    pub cwd: &'a Path,
    pub env: &'a CommandEnv,
    pub timeout: Duration,
    pub output_cap: usize,
    /// Also keep the whole output, up to this many bytes (beyond it, its
    /// beginning and its tail), for an artifact.
    pub keep_full: Option<usize>,
    pub cancel: &'a CancellationToken,
    pub progress: Option<(&'a ProgressSink, Arc<str>)>,
}

/// The output as it arrives: its tail (at most `cap` bytes once finished)
/// and, when the whole output is wanted, its first `head_cap` bytes.
struct Capture {
    cap: usize,
    tail: Vec<u8>,
    total: usize,
    omitted: usize,
    head: Option<(Vec<u8>, usize)>,
}

impl Capture {
    fn new(cap: usize, head_cap: Option<usize>) -> Self {
        Self {
            cap,
            tail: Vec::new(),
            total: 0,
            omitted: 0,
            head: head_cap.map(|head_cap| (Vec::new(), head_cap)),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len());
        if let Some((head, head_cap)) = &mut self.head {
            let room = head_cap.saturating_sub(head.len()).min(bytes.len());
            head.extend_from_slice(&bytes[..room]);
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > self.cap.saturating_mul(2).max(1) {
            let drop = self.tail.len() - self.cap;
            self.tail.drain(..drop);
            self.omitted += drop;
        }
    }

    /// The tail as text, the byte counts, and the whole output when kept:
    /// the head and the tail joined, exact when they meet, with a note of
    /// the bytes between them when they do not.
    fn finish(mut self) -> (String, usize, usize, Option<Vec<u8>>) {
        if self.tail.len() > self.cap {
            let drop = self.tail.len() - self.cap;
            self.tail.drain(..drop);
            self.omitted += drop;
        }
        let full = self.head.take().map(|(mut head, _)| {
            // `omitted` bytes precede the tail; the head holds the first ones.
            if self.omitted <= head.len() {
                head.extend_from_slice(&self.tail[head.len() - self.omitted..]);
            } else {
                let gap = self.omitted - head.len();
                head.extend_from_slice(
                    format!("\n[{gap} bytes of output omitted here]\n").as_bytes(),
                );
                head.extend_from_slice(&self.tail);
            }
            head
        });
        let text = String::from_utf8_lossy(&self.tail).into_owned();
        (text, self.total, self.omitted, full)
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
    let capture = Arc::new(Mutex::new(Capture::new(cmd.output_cap, cmd.keep_full)));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(pump(out, capture.clone(), progress(&cmd))));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(pump(err, capture.clone(), progress(&cmd))));
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
    let capture = std::mem::replace(
        &mut *capture.lock().unwrap_or_else(|e| e.into_inner()),
        Capture::new(0, None),
    );
    let (output, total_bytes, omitted_bytes, full) = capture.finish();
    Ok(CommandOutput {
        exit,
        output,
        total_bytes,
        omitted_bytes,
        full,
    })
}

fn progress(cmd: &Run<'_>) -> Option<(ProgressSink, Arc<str>)> {
    cmd.progress
        .as_ref()
        .map(|(sink, id)| ((*sink).clone(), id.clone()))
}

async fn pump(
    mut reader: impl AsyncRead + Unpin,
    capture: Arc<Mutex<Capture>>,
    progress: Option<(ProgressSink, Arc<str>)>,
) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                capture
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&chunk[..n]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(cap: usize, head_cap: usize, chunks: &[&[u8]]) -> (String, Vec<u8>) {
        let mut capture = Capture::new(cap, Some(head_cap));
        for chunk in chunks {
            capture.push(chunk);
        }
        let (tail, _, _, full) = capture.finish();
        (tail, full.unwrap())
    }

    #[test]
    fn the_whole_output_is_exact_while_head_and_tail_meet() {
        let output: Vec<u8> = (0..5000u32)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let chunks: Vec<&[u8]> = output.chunks(7).collect();
        for (cap, head_cap) in [
            (100, 100_000),
            (100, 10),
            (1000, 22_000),
            (0, 23_890),
            (5, 0),
        ] {
            let (tail, full) = captured(cap, head_cap, &chunks);
            if head_cap + cap >= output.len() {
                assert_eq!(full, output, "cap {cap}, head {head_cap}");
            }
            assert!(output.ends_with(tail.as_bytes()));
            assert_eq!(tail.len(), cap.min(output.len()));
        }
    }

    #[test]
    fn beyond_the_head_the_gap_is_marked_and_the_tail_kept() {
        let (tail, full) = captured(4, 6, &[b"abcdefghij", b"klmnopqrst"]);
        assert_eq!(tail, "qrst");
        assert_eq!(full, b"abcdef\n[10 bytes of output omitted here]\nqrst");
        // Without a head asked for, nothing more is kept.
        let mut capture = Capture::new(4, None);
        capture.push(b"abcdefgh");
        assert!(capture.finish().3.is_none());
    }
}
