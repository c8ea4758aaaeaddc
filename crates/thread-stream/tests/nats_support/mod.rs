//! What the NATS store's tests share besides the server launcher
//! (`roundtable_test_support::nats`): connecting a store to a server that
//! may still be starting, and options with short retry budgets.

#![allow(dead_code)]

use std::time::Duration;

use roundtable_test_support::nats::connect_when_up;
use roundtable_thread_stream::{NatsOptions, NatsStore};

/// Connects a store, retrying while the server (or a cluster's JetStream
/// meta leader) is still coming up.
pub(crate) async fn connect(url: &str, options: NatsOptions) -> NatsStore {
    connect_when_up(url, || NatsStore::connect(url, options.clone())).await
}

/// Options for tests: short retry budgets so a broken test fails quickly.
pub(crate) fn test_options() -> NatsOptions {
    NatsOptions {
        request_timeout: Duration::from_secs(2),
        retry_for: Duration::from_secs(30),
        ..NatsOptions::default()
    }
}
