//! Killing a child process together with everything it started.
//!
//! Commands and MCP servers are spawned as the leaders of their own process
//! group (`process_group(0)`), so a shell's background jobs or the `node`
//! that `npx` starts belong to the group. Killing the group, not just the
//! child, is what keeps them from outliving their caller.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;

/// Kills a child's process group when dropped (or when [`kill`](Self::kill)
/// is called first): a dropped future or a dropped toolset must not leave
/// the group running.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    /// A guard for `child`, which must have been spawned as the leader of
    /// its own process group. A child that has already been reaped has no
    /// id, and the guard then does nothing.
    pub(crate) fn new(child: &Child) -> Self {
        Self {
            pgid: child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(Pid::from_raw),
        }
    }

    /// Sends `SIGKILL` to the whole group, once.
    pub(crate) fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
