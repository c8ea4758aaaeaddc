//! Reading a session's SSE stream from replicas: a client that reconnects
//! to another replica with `Last-Event-ID` whenever its connection ends,
//! and a reader of a whole stream from one replica.

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::blocking::Client;

use crate::fleet::ADMIN;

/// One event as a client reads it: its id (`seq` or `seq.sub`, as a pair
/// for ordering), its type (the envelope's `type`) and its JSON envelope.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub(crate) id: (u64, u64),
    pub(crate) kind: String,
    pub(crate) data: String,
}

fn parse_id(id: &str) -> (u64, u64) {
    match id.split_once('.') {
        Some((seq, sub)) => (seq.parse().unwrap(), sub.parse().unwrap()),
        None => (id.parse().unwrap(), 0),
    }
}

fn format_id(id: (u64, u64)) -> String {
    match id {
        (seq, 0) => seq.to_string(),
        (seq, sub) => format!("{seq}.{sub}"),
    }
}

/// Reads `session`'s events from `base` after `after`, for at most
/// `window`, into `into`; returns when the window ends or the connection
/// does.
fn read_window(
    base: &str,
    session: &str,
    after: Option<(u64, u64)>,
    window: Duration,
    into: &mut Vec<Event>,
) {
    let client = Client::builder().timeout(window).build().unwrap();
    let mut request = client
        .get(format!("{base}/v1/sessions/{session}/events"))
        .bearer_auth(ADMIN)
        .header("Accept", "text/event-stream");
    if let Some(after) = after {
        request = request.header("Last-Event-ID", format_id(after));
    }
    let response = match request.send() {
        Ok(response) => response,
        Err(_) => return,
    };
    if !response.status().is_success() {
        return;
    }
    let (mut id, mut data) = (None, String::new());
    for line in BufReader::new(response).lines() {
        let line = match line {
            Ok(line) => line,
            // The window is up, or the replica died.
            Err(_) => return,
        };
        if let Some(value) = line.strip_prefix("id:") {
            id = Some(parse_id(value.trim()));
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
        } else if line.is_empty() {
            if let Some(id) = id.take() {
                // The envelope's `type` names the event.
                let envelope: serde_json::Value = serde_json::from_str(&data).unwrap_or_default();
                into.push(Event {
                    id,
                    kind: envelope["type"].as_str().unwrap_or_default().to_string(),
                    data: std::mem::take(&mut data),
                });
            }
            data.clear();
        }
    }
}

/// Follows `session` until `stop` is set, reconnecting every `window`
/// (or when a replica dies) to the next replica with the last id seen.
pub(crate) fn follow(
    bases: Vec<String>,
    session: String,
    stop: Arc<AtomicBool>,
    window: Duration,
) -> Vec<Event> {
    let mut seen = Vec::new();
    let mut replica = 0;
    while !stop.load(Ordering::SeqCst) {
        let after = seen.last().map(|e: &Event| e.id);
        read_window(&bases[replica], &session, after, window, &mut seen);
        replica = (replica + 1) % bases.len();
        std::thread::sleep(Duration::from_millis(50));
    }
    // One last read from the start of what is missing.
    let after = seen.last().map(|e| e.id);
    read_window(&bases[replica], &session, after, window, &mut seen);
    seen
}

/// Every event of `session` that `base` serves within `window`.
pub(crate) fn read_all(base: &str, session: &str, window: Duration) -> Vec<Event> {
    let mut events = Vec::new();
    read_window(base, session, None, window, &mut events);
    events
}
