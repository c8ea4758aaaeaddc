//! For the runners' tests: a turn loop over a provider, an event recorder,
//! waiting for runners to settle, and the bots' answers in a thread.

// A runner or store that fails while a test waits on it must fail the test.
#![allow(clippy::panic)]

use std::sync::{Arc, Mutex};

use roundtable_chat_runner::{EventSink, ThreadRunner, TurnEvent, TurnLoop};
use roundtable_providers::Provider;
use roundtable_thread_stream::{Entry, EntryBody, ThreadId, ThreadStore};

use crate::scripted::model;

/// A turn loop over `provider` with the scripted [`model`], no tools.
pub fn turns(provider: Arc<dyn Provider>) -> TurnLoop {
    TurnLoop::new(provider, model())
}

/// Records every event it is sent.
#[derive(Default)]
pub struct Recorder(Mutex<Vec<TurnEvent>>);

impl EventSink for Recorder {
    fn emit(&self, event: TurnEvent) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }
}

impl Recorder {
    /// The events so far, in order.
    pub fn events(&self) -> Vec<TurnEvent> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The `type` of each event so far, as it serialises.
    pub fn types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| {
                serde_json::to_value(e)
                    .ok()
                    .and_then(|v| v["type"].as_str().map(str::to_string))
                    .unwrap_or_else(|| panic!("event without a type: {e:?}"))
            })
            .collect()
    }
}

/// Waits until every runner is idle and the thread stopped growing.
///
/// # Panics
///
/// When the store or a runner fails.
pub async fn settle(runners: &[&ThreadRunner], store: &dyn ThreadStore, thread: &ThreadId) {
    let last_seq = || async {
        store
            .last_seq(thread)
            .await
            .unwrap_or_else(|e| panic!("reading {thread}: {e}"))
    };
    loop {
        let before = last_seq().await;
        for r in runners {
            r.idle()
                .await
                .unwrap_or_else(|e| panic!("waiting for a runner: {e}"));
        }
        if last_seq().await == before {
            return;
        }
    }
}

/// The final texts of the bots' answers, in order: (bot, text).
pub fn answers(entries: &[Entry]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Assistant(a) if roundtable_dispatch::event::is_final(a.message()) => {
                Some((e.author.to_string(), a.message().text()))
            }
            _ => None,
        })
        .collect()
}
