//! What the load benches (`chat_load`, `rooms_load`) measure the same
//! way: percentiles, the process's memory, the server threads' CPU time.

use std::time::Duration;

/// The value at `p` (0 to 1) of `sorted`, nearest rank.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The process's resident memory (server and clients), in MiB (0 where
/// `/proc` does not say).
pub(crate) fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The CPU time (user and system) used so far by the threads whose name
/// starts with `threads` (the server runtime's), from
/// `/proc/self/task/*/stat` (zero where `/proc` does not say). A blocking
/// thread that exited takes its time with it: they live 10 s idle.
pub(crate) fn server_cpu(threads: &str) -> Duration {
    let ticks_per_s = 100.0; // USER_HZ on Linux
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    // The kernel keeps 15 bytes of a thread's name.
    let prefix = &threads[..15.min(threads.len())];
    let mut ticks = 0u64;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ...`: comm may hold spaces, so split at the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        // utime and stime: fields 14 and 15 of the line, 12 and 13 after comm.
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += field(11) + field(12);
    }
    Duration::from_secs_f64(ticks as f64 / ticks_per_s)
}

/// `d` in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
