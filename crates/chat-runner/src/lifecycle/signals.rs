//! Reading a lifecycle record back from its `signal.*` entry.

use roundtable_thread_stream::EntryBody;

/// The data of the signal `name` in `body`, when it reads as a `T`.
pub(crate) fn signal_data<T: serde::de::DeserializeOwned>(
    body: &EntryBody,
    name: &str,
) -> Option<T> {
    match body {
        EntryBody::Signal(signal) if signal.name == name => signal.data.decode().ok(),
        _ => None,
    }
}
