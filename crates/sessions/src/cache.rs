//! The live session runtimes: kept in memory while in use, dropped after an
//! idle time or when too many are kept (least recently used first), and
//! rebuilt from the thread when needed again. A runtime is never dropped
//! while this process runs one of its turns or its queue holds messages:
//! those are pinned.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moka::future::Cache;
use moka::policy::EvictionPolicy;

use crate::ids::SessionId;
use crate::runtime::SessionRuntime;

/// How long an unused runtime is kept by default.
pub const DEFAULT_RUNTIME_TTL: Duration = Duration::from_secs(600);

/// How many unused runtimes are kept at most by default.
pub const DEFAULT_MAX_RUNTIMES: u64 = 1000;

/// The runtimes of one engine.
pub(crate) struct RuntimeCache {
    /// Looked up at every call: hashed with `foldhash` (session ids are
    /// checked ids, not a flooding risk worth SipHash's cost).
    idle: Cache<SessionId, Arc<SessionRuntime>, foldhash::fast::RandomState>,
    pinned: Mutex<HashMap<SessionId, Arc<SessionRuntime>, foldhash::fast::RandomState>>,
}

impl RuntimeCache {
    /// A cache dropping runtimes unused for `ttl`, keeping at most `max`.
    pub(crate) fn new(ttl: Duration, max: u64) -> Self {
        Self {
            idle: Cache::builder()
                .time_to_idle(ttl)
                .max_capacity(max)
                .eviction_policy(EvictionPolicy::lru())
                .build_with_hasher(foldhash::fast::RandomState::default()),
            pinned: Mutex::new(HashMap::default()),
        }
    }

    /// The runtime of session `id`, if kept.
    pub(crate) async fn get(&self, id: &str) -> Option<Arc<SessionRuntime>> {
        if let Some(runtime) = lock(&self.pinned).get(id) {
            return Some(runtime.clone());
        }
        self.idle.get(id).await
    }

    /// Keeps `runtime` (unless one is kept already: that one is returned).
    pub(crate) async fn insert(&self, runtime: Arc<SessionRuntime>) -> Arc<SessionRuntime> {
        if let Some(kept) = lock(&self.pinned).get(&runtime.id) {
            return kept.clone();
        }
        self.idle
            .entry(runtime.id.clone())
            .or_insert(runtime)
            .await
            .into_value()
    }

    /// Keeps `runtime` whatever the idle time or count. It stays in the
    /// idle cache too (where it may expire meanwhile): a turn pins and
    /// unpins its runtime, and moving it out and back in each time would
    /// cost more than the turn's own bookkeeping.
    pub(crate) fn pin(&self, runtime: &Arc<SessionRuntime>) {
        lock(&self.pinned).insert(runtime.id.clone(), runtime.clone());
    }

    /// Lets `runtime` be dropped again once unused (put back in the idle
    /// cache if it expired there while pinned).
    pub(crate) async fn unpin(&self, runtime: &Arc<SessionRuntime>) {
        let removed = lock(&self.pinned).remove(&runtime.id);
        if let Some(runtime) = removed
            && !self.idle.contains_key(&runtime.id)
        {
            self.idle.insert(runtime.id.clone(), runtime).await;
        }
    }

    /// Drops session `id`'s runtime (the session was deleted).
    pub(crate) async fn forget(&self, id: &SessionId) {
        lock(&self.pinned).remove(id);
        self.idle.invalidate(id).await;
    }

    /// How many runtimes are kept (pinned and idle), after dropping those
    /// due.
    pub(crate) async fn len(&self) -> u64 {
        self.idle.run_pending_tasks().await;
        let pinned_only = lock(&self.pinned)
            .keys()
            .filter(|id| !self.idle.contains_key(*id))
            .count() as u64;
        pinned_only.saturating_add(self.idle.entry_count())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
