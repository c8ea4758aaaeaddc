//! A model call's retries on the thread: `signal.retry`
//! ([`RetryRecord`]), written by the turn's writer before each retry's wait,
//! so a client sees that a turn is waiting on its provider, and why, from
//! the stored thread alone.

use std::sync::Arc;

use roundtable_thread_stream::{EntryBody, Signal};
use serde::{Deserialize, Serialize};

use crate::lifecycle::signals::signal_data;

/// The signal name of a retry (`signal.retry`).
pub const RETRY: &str = "retry";

/// A model call that failed before its response started and is sent again
/// after a wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryRecord {
    /// The turn.
    pub turn: Arc<str>,
    /// The round (model call) being retried, from 1.
    pub round: u32,
    /// Which retry this is (1 for the first).
    pub attempt: u32,
    /// How many retries the provider allows.
    pub max_attempts: u32,
    /// The wait before it, in milliseconds.
    pub delay_ms: u64,
    /// Why the previous attempt failed.
    pub error: String,
}

impl RetryRecord {
    /// The record in `body`, if it is one.
    pub fn from_body(body: &EntryBody) -> Option<Self> {
        signal_data(body, RETRY)
    }

    /// The entry body of the record.
    pub fn to_body(&self) -> Result<EntryBody, serde_json::Error> {
        Ok(EntryBody::Signal(Signal::encode(RETRY, self)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_reads_back_from_its_entry() {
        let record = RetryRecord {
            turn: "turn_1".into(),
            round: 2,
            attempt: 1,
            max_attempts: 3,
            delay_ms: 1500,
            error: "503 overloaded".into(),
        };
        let body = record.to_body().unwrap();
        assert_eq!(RetryRecord::from_body(&body), Some(record));
        let EntryBody::Signal(signal) = &body else {
            panic!("{body:?}")
        };
        assert_eq!(&*signal.name, "retry");
    }
}
