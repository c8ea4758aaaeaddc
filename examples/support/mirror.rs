//! What the examples share for dashboards: with `ROUNDTABLE_DATABASE_URL`
//! set (a PostgreSQL URL), every thread of the example's store is mirrored
//! into PostgreSQL tables (entries, runs, tool executions, file mutations)
//! while it runs. Needs the `postgres` feature:
//! `ROUNDTABLE_DATABASE_URL=postgres://me@localhost/me cargo run --features postgres --example chat`.

use std::sync::Arc;

use roundtable::thread_stream::ThreadStore;

const URL_VAR: &str = "ROUNDTABLE_DATABASE_URL";

#[cfg(feature = "postgres")]
pub(crate) type Mirror = roundtable::thread_stream::PostgresMirror;

/// The mirror, started, or None when no database is configured.
#[cfg(feature = "postgres")]
pub(crate) fn start(store: &Arc<dyn ThreadStore>) -> Option<Mirror> {
    use roundtable::thread_stream::MirrorOptions;
    let url = std::env::var(URL_VAR).ok().filter(|u| !u.is_empty())?;
    let mirror = Mirror::start(store.clone(), &url, MirrorOptions::default())
        .unwrap_or_else(|e| panic!("{URL_VAR}: {e}"));
    mirror.follow_all();
    println!("(mirroring threads into PostgreSQL, schema `roundtable`)");
    Some(mirror)
}

/// Lets the mirror write what the store holds (a few seconds at most), then
/// stops it; what it could not write is mirrored by the next run.
#[cfg(feature = "postgres")]
pub(crate) async fn finish(mirror: Option<Mirror>, store: &dyn ThreadStore) {
    let Some(mirror) = mirror else { return };
    // Threads begun since the mirror last looked.
    for thread in store.list_threads().await.unwrap_or_default() {
        mirror.follow(&thread);
    }
    let caught_up = async {
        for thread in mirror.status().await.threads {
            if let Some(last) = thread.source_last {
                mirror.wait_for(&thread.thread, last).await;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), caught_up).await;
    mirror.shutdown().await;
}

#[cfg(not(feature = "postgres"))]
pub(crate) type Mirror = std::convert::Infallible;

#[cfg(not(feature = "postgres"))]
pub(crate) fn start(_: &Arc<dyn ThreadStore>) -> Option<Mirror> {
    if std::env::var_os(URL_VAR).is_some() {
        eprintln!(
            "{URL_VAR} is set, but this build lacks the `postgres` feature: nothing is mirrored"
        );
    }
    None
}

#[cfg(not(feature = "postgres"))]
pub(crate) async fn finish(_: Option<Mirror>, _: &dyn ThreadStore) {}
