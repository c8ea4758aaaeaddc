//! What the load benches (`chat_load`, `rooms_load`) share: a runtime
//! for the server and one for its clients, the run's end, and what they
//! measure the same way (percentiles, the process's memory, the server
//! threads' CPU time).

use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

/// A two-thread runtime; `threads` names its threads when given (the
/// server's, whose CPU time [`server_cpu`] counts).
pub(crate) fn runtime(threads: Option<&str>) -> Runtime {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2).enable_all();
    if let Some(name) = threads {
        builder.thread_name(name);
    }
    builder.build().unwrap()
}

/// Runs `run` on `clients` within `limit` (a run past it fails the
/// bench), stops both runtimes and says how long it all took since
/// `started`.
pub(crate) fn finish(
    clients: Runtime,
    server: Runtime,
    run: impl Future<Output = ()>,
    limit: Duration,
    started: Instant,
) {
    clients.block_on(async {
        tokio::time::timeout(limit, run)
            .await
            .expect("the run took longer than its limit")
    });
    drop(clients);
    server.shutdown_timeout(Duration::from_secs(5));
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
}

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
