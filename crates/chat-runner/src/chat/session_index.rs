//! The session index: which agent session each session key has, kept as
//! signals in an index thread so that a runner rebuilt over the same store
//! finds its sessions again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use roundtable_thread_stream::{EntryBody, Expect, NewEntry, Signal, ThreadId, ThreadStore};
use serde::{Deserialize, Serialize};

use crate::error::ChatError;
use crate::sync::lock;

/// The signal name of a session opened for a key (`signal.chat_session`).
pub const SESSION_SIGNAL: &str = "chat_session";
/// The signal name of a session reset (`signal.chat_reset`).
pub const RESET_SIGNAL: &str = "chat_reset";

/// The data of the index signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SessionRecord {
    key: String,
    session: Arc<str>,
}

/// Key -> active session, read from the index thread and kept in step with
/// it.
pub(crate) struct SessionIndex {
    thread: ThreadId,
    sessions: Mutex<HashMap<String, Arc<str>>>,
}

impl SessionIndex {
    /// Reads the index thread `thread` of `store`.
    pub(crate) async fn load(store: &dyn ThreadStore, thread: ThreadId) -> Result<Self, ChatError> {
        let mut sessions = HashMap::new();
        for entry in store.read_all(&thread).await? {
            let EntryBody::Signal(signal) = &entry.body else {
                continue;
            };
            let Ok(record) = signal.data.decode::<SessionRecord>() else {
                continue;
            };
            if signal.name == SESSION_SIGNAL {
                sessions.insert(record.key, record.session);
            } else if signal.name == RESET_SIGNAL
                && sessions.get(&record.key) == Some(&record.session)
            {
                sessions.remove(&record.key);
            }
        }
        Ok(Self {
            thread,
            sessions: Mutex::new(sessions),
        })
    }

    /// The index thread.
    pub(crate) fn thread(&self) -> &ThreadId {
        &self.thread
    }

    /// The active session of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<str>> {
        lock(&self.sessions).get(key).cloned()
    }

    /// Opens a new session (`chat-<uuid>`) for `key` and records it.
    pub(crate) async fn open(
        &self,
        store: &dyn ThreadStore,
        author: &Arc<str>,
        key: &str,
    ) -> Result<Arc<str>, ChatError> {
        let session: Arc<str> = Arc::from(format!("chat-{}", uuid::Uuid::now_v7()));
        self.record(store, author, SESSION_SIGNAL, key, &session)
            .await?;
        lock(&self.sessions).insert(key.to_string(), session.clone());
        Ok(session)
    }

    /// Ends `key`'s session `session`: the key has none until the next
    /// [`open`](Self::open).
    pub(crate) async fn reset(
        &self,
        store: &dyn ThreadStore,
        author: &Arc<str>,
        key: &str,
        session: &Arc<str>,
    ) -> Result<(), ChatError> {
        self.record(store, author, RESET_SIGNAL, key, session)
            .await?;
        lock(&self.sessions).remove(key);
        Ok(())
    }

    async fn record(
        &self,
        store: &dyn ThreadStore,
        author: &Arc<str>,
        name: &str,
        key: &str,
        session: &Arc<str>,
    ) -> Result<(), ChatError> {
        let record = SessionRecord {
            key: key.to_string(),
            session: session.clone(),
        };
        let signal = Signal::encode(name, &record)?;
        store
            .append(
                &self.thread,
                Expect::Any,
                vec![NewEntry::new(author.clone(), EntryBody::Signal(signal))],
            )
            .await?;
        Ok(())
    }
}
