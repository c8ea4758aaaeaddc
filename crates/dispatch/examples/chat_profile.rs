//! Times `build_messages` and `Projection::push` on the busy-chat sample
//! (`chat_workload(.., 7)`) with the dispatch crate alone: a measuring tool
//! for instruction and cache counts (criterion's harness is heavy under
//! callgrind) and for two builds run alternately.
//!
//! ```sh
//! cargo build --release -p roundtable-dispatch --example chat_profile
//! target/release/examples/chat_profile build 300   # 300 projections of 10k entries
//! target/release/examples/chat_profile push 100    # 10k pushes onto 100 copies of a 10k projection
//! target/release/examples/chat_profile split 300   # the projection and the drop of its messages, timed apart
//! target/release/examples/chat_profile build 30 100000   # the same on 100k entries
//! valgrind --tool=callgrind --cache-sim=yes --D1=32768,8,64 --LL=1048576,16,64 \
//!     --toggle-collect='chat_profile::project*' target/release/examples/chat_profile build 10
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use std::hint::black_box;
use std::time::Instant;

use roundtable_dispatch::{BotProfile, Participant, Projection, Roster, Trigger, build_messages};
use roundtable_test_support::samples::chat_workload;

#[inline(never)]
fn project(entries: &[roundtable_thread_stream::Entry], roster: &Roster) -> usize {
    let m = build_messages("bot-0", black_box(entries), roster);
    let n = m.len();
    drop(black_box(m));
    n
}

#[inline(never)]
fn push_all(p: &mut Projection, next: &[roundtable_thread_stream::Entry]) {
    for e in next {
        black_box(p.push(e));
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let runs: usize = std::env::args().nth(2).map_or(1000, |s| s.parse().unwrap());
    let len: usize = std::env::args()
        .nth(3)
        .map_or(10_000, |s| s.parse().unwrap());
    let w = chat_workload(if mode == "push" { 20_000 } else { len }, 7);
    let roster = Roster::new(
        w.humans
            .iter()
            .map(|(id, n)| Participant::human(id.as_str(), n.as_str()))
            .chain(w.bots.iter().map(|(id, n)| {
                Participant::bot(
                    id.as_str(),
                    n.as_str(),
                    BotProfile::new(Trigger::Mention, "You help."),
                )
            })),
    )
    .unwrap();
    println!(
        "size_of::<Entry>() = {}",
        std::mem::size_of::<roundtable_thread_stream::Entry>()
    );
    if mode == "push" {
        let (base, next) = w.entries.split_at(10_000);
        let mut p = Projection::new("bot-0", &roster);
        p.extend(base);
        let mut times = Vec::new();
        for _ in 0..runs {
            let mut q = p.clone();
            let t = Instant::now();
            push_all(&mut q, next);
            times.push(t.elapsed().as_nanos() as f64 / next.len() as f64);
            drop(q);
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "push: fastest {:.1} ns, median {:.1} ns",
            times[0],
            times[times.len() / 2]
        );
        return;
    }
    if mode == "split" {
        let (mut b, mut d) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let t = Instant::now();
            let m = build_messages("bot-0", black_box(&w.entries), &roster);
            let t2 = Instant::now();
            drop(black_box(m));
            d.push(t2.elapsed().as_nanos() as f64 / 1000.0);
            b.push((t2 - t).as_nanos() as f64 / 1000.0);
        }
        b.sort_by(|a, b| a.partial_cmp(b).unwrap());
        d.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "build {:.1}/{:.1} drop {:.1}/{:.1}",
            b[0],
            b[runs / 2],
            d[0],
            d[runs / 2]
        );
        return;
    }
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        black_box(project(&w.entries, &roster));
        times.push(t.elapsed().as_nanos() as f64 / 1000.0);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "build_messages chat {len}: fastest {:.1} us, median {:.1} us",
        times[0],
        times[times.len() / 2]
    );
}
