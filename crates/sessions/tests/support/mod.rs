//! Test support for the sessions engine: a git workspace with a Makefile,
//! an engine over a JSONL store in a temp folder, and waiting for events.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use roundtable_providers::ScriptedProvider;
use roundtable_sessions::{
    Caller, CreateSession, EventType, SessionEngine, SessionEvent, SessionEvents, SessionInfo,
    Submit,
};
use roundtable_thread_stream::{JsonlOptions, JsonlStore, ThreadStore};
use roundtable_tools::{ApprovalPolicy, VerifyPolicy};

#[allow(unused_imports)]
pub(crate) use roundtable_test_support::scripted::{call, calls, model, text};
#[allow(unused_imports)]
pub(crate) use roundtable_test_support::workspace::{
    SessionFolders, init_git_workspace, status_patch,
};

/// A temp folder holding a git workspace (`ws/`) and the engine's data
/// (`data/`).
pub(crate) struct Fixture {
    folders: SessionFolders,
}

impl std::ops::Deref for Fixture {
    type Target = SessionFolders;

    fn deref(&self) -> &SessionFolders {
        &self.folders
    }
}

impl Fixture {
    /// A workspace whose `make test` passes once `status.txt` says `fixed`.
    pub(crate) fn new() -> Self {
        Self {
            folders: SessionFolders::new().unwrap(),
        }
    }

    /// The JSONL store of the fixture's data folder.
    pub(crate) async fn store(&self) -> Arc<dyn ThreadStore> {
        Arc::new(
            JsonlStore::open_with(self.data(), JsonlOptions::default())
                .await
                .unwrap(),
        )
    }

    /// A session request over the workspace with the default approvals and
    /// no auto-verify.
    pub(crate) fn unverified(&self) -> CreateSession {
        CreateSession {
            verify_policy: Some(VerifyPolicy {
                auto_verify: false,
                ..VerifyPolicy::default()
            }),
            ..CreateSession::new(self.workspace())
        }
    }

    /// A session request over the workspace gating nothing and not
    /// verifying.
    pub(crate) fn unverified_ungated(&self) -> CreateSession {
        CreateSession {
            approval_policy: Some(ApprovalPolicy::none()),
            ..self.unverified()
        }
    }

    /// A session request over the workspace, gating nothing.
    pub(crate) fn ungated(&self) -> CreateSession {
        CreateSession {
            approval_policy: Some(ApprovalPolicy::none()),
            ..CreateSession::new(self.workspace())
        }
    }
}

/// An engine over `store` answering with `provider`, snapshots in `data`.
pub(crate) fn engine(
    store: Arc<dyn ThreadStore>,
    provider: Arc<ScriptedProvider>,
    data: &Path,
) -> SessionEngine {
    SessionEngine::builder(store, provider, model())
        .snapshot_dir(data)
        .chunk_interval(Duration::from_millis(5))
        .build()
}

/// Reads `events` until one satisfies `until`; returns all read. Fails the
/// test after 20 s (a hang is a failure, not a slow pass).
pub(crate) async fn read_until(
    events: &mut SessionEvents,
    mut until: impl FnMut(&SessionEvent) -> bool,
) -> Vec<SessionEvent> {
    let mut seen = Vec::new();
    let reading = async {
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            let done = until(&event);
            seen.push(event);
            if done {
                return;
            }
        }
        panic!("the event stream ended");
    };
    tokio::time::timeout(Duration::from_secs(20), reading)
        .await
        .unwrap_or_else(|_| {
            let seen: Vec<String> = seen
                .iter()
                .map(|e| format!("{} {:?} {}", e.id, e.kind, e.data))
                .collect();
            panic!("no such event in 20 s; saw {seen:#?}")
        });
    seen
}

/// Subscribes to `session` from its start, then submits `text` as the
/// host: the events of what the message starts, none missed.
pub(crate) async fn submit_watched(
    engine: &SessionEngine,
    session: &str,
    text: &str,
) -> SessionEvents {
    let events = engine
        .subscribe(&Caller::Host, session, None)
        .await
        .unwrap();
    engine
        .submit(&Caller::Host, session, Submit::text(text))
        .await
        .unwrap();
    events
}

/// Waits for the first event of `kind`.
pub(crate) async fn wait_for(events: &mut SessionEvents, kind: EventType) -> SessionEvent {
    read_until(events, |e| e.kind == kind).await.pop().unwrap()
}

pub(crate) fn kinds(events: &[SessionEvent]) -> Vec<EventType> {
    events.iter().map(|e| e.kind).collect()
}

/// The session's events so far.
pub(crate) async fn all_events(engine: &SessionEngine, session: &SessionInfo) -> Vec<SessionEvent> {
    engine
        .events(&Caller::Host, &session.id, None)
        .await
        .unwrap()
}

/// Stops `runtime` where it stands, as a process crashes: its tasks are
/// dropped at their next await, never run to their end. Returns once its
/// threads have stopped, so that nothing it ran writes or reads afterwards
/// (a runtime shut down in the background goes on for a moment, and may
/// still see what the test does next).
pub(crate) fn crash(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(Duration::from_secs(10));
}

/// Lives one "process" on the JSONL store of `data`: runs `life` on a
/// runtime of its own, then [`crash`]es it, so the folder can be opened
/// again at once.
pub(crate) fn live_then_crash<T, F, Fut>(data: PathBuf, life: F) -> T
where
    T: Send + 'static,
    F: FnOnce(Arc<dyn ThreadStore>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    let (result, store) = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (result, store) = runtime.block_on(async move {
            let store: Arc<dyn ThreadStore> = Arc::new(JsonlStore::open(&data).await.unwrap());
            let handle = Arc::downgrade(&store);
            (life(store).await, handle)
        });
        crash(runtime);
        (result, store)
    })
    .join()
    .unwrap();
    assert_eq!(
        store.strong_count(),
        0,
        "the crashed runtime still holds its store"
    );
    result
}
