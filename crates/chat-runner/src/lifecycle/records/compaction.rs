//! Compactions on the thread: each attempt leaves two records around its
//! `compaction` entry, so that whoever reads the thread (a client replaying
//! a session's events, a dashboard) sees when a summary was being written,
//! why, and how it ended, even when no summary came of it.
//!
//! - `signal.compaction_started` ([`CompactionStartedRecord`]): before the
//!   summarizer runs.
//! - `compaction`: the summary itself (on success).
//! - `signal.compaction_ended` ([`CompactionEndedRecord`]): what came of
//!   it.
//!
//! Inside a turn the turn's writer writes them from the loop's
//! `compaction_started` / `compaction_ended` events; a host's manual
//! compaction ([`Compactor::compact`](crate::compaction::Compactor::compact)) appends
//! them itself, without a turn.

use std::sync::Arc;

use roundtable_thread_stream::{EntryBody, Signal};
use serde::{Deserialize, Serialize};

use crate::event::CompactionReason;
use crate::lifecycle::signals::signal_data;

/// The signal name of a compaction's start (`signal.compaction_started`).
pub const COMPACTION_STARTED: &str = "compaction_started";

/// The signal name of a compaction's end (`signal.compaction_ended`).
pub const COMPACTION_ENDED: &str = "compaction_ended";

/// A compaction began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionStartedRecord {
    /// The turn it runs in (none for a host's manual compaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Arc<str>>,
    /// Why it runs.
    pub reason: CompactionReason,
    /// The estimated tokens of the request before compacting (for a
    /// manual compaction, of the conversation alone).
    pub tokens_before: u64,
}

/// A compaction ended: with its `compaction` entry just before (when
/// `covers_seq` is set), or without one (`error` says why).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionEndedRecord {
    /// The turn it ran in (none for a host's manual compaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Arc<str>>,
    /// Why it ran.
    pub reason: CompactionReason,
    /// The last seq the new summary covers, when one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covers_seq: Option<u64>,
    /// The estimated tokens of the request after compacting (for a manual
    /// compaction, of the conversation alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// It was cancelled.
    #[serde(default, skip_serializing_if = "is_false")]
    pub aborted: bool,
    /// The model request the context overflowed is sent again.
    #[serde(default, skip_serializing_if = "is_false")]
    pub will_retry: bool,
    /// What went wrong, or why automatic compaction stops for the bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_false(value: &bool) -> bool {
    !value
}

impl CompactionStartedRecord {
    /// The record in `body`, if it is one.
    pub fn from_body(body: &EntryBody) -> Option<Self> {
        signal_data(body, COMPACTION_STARTED)
    }

    /// The entry body of the record.
    pub fn to_body(&self) -> Result<EntryBody, serde_json::Error> {
        Ok(EntryBody::Signal(Signal::encode(COMPACTION_STARTED, self)?))
    }
}

impl CompactionEndedRecord {
    /// The record in `body`, if it is one.
    pub fn from_body(body: &EntryBody) -> Option<Self> {
        signal_data(body, COMPACTION_ENDED)
    }

    /// The entry body of the record.
    pub fn to_body(&self) -> Result<EntryBody, serde_json::Error> {
        Ok(EntryBody::Signal(Signal::encode(COMPACTION_ENDED, self)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_from_their_entries() {
        let started = CompactionStartedRecord {
            turn: Some("turn_1".into()),
            reason: CompactionReason::Threshold,
            tokens_before: 190_000,
        };
        let body = started.to_body().unwrap();
        assert_eq!(body.kind(), "signal.compaction_started");
        assert_eq!(CompactionStartedRecord::from_body(&body), Some(started));
        assert_eq!(CompactionEndedRecord::from_body(&body), None);

        let ended = CompactionEndedRecord {
            turn: None,
            reason: CompactionReason::Manual,
            covers_seq: Some(41),
            tokens_after: Some(20_500),
            aborted: false,
            will_retry: false,
            error: None,
        };
        let body = ended.to_body().unwrap();
        let EntryBody::Signal(signal) = &body else {
            panic!("a signal")
        };
        // Only what is set is written.
        assert_eq!(
            signal.data,
            serde_json::json!({"reason": "manual", "covers_seq": 41, "tokens_after": 20_500})
        );
        assert_eq!(CompactionEndedRecord::from_body(&body), Some(ended));
    }
}
