//! The conformance suite against `MemoryStore`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;

use std::sync::Arc;

use roundtable_thread_stream::{MemoryStore, ThreadStore};

conformance_suite!(async { (Arc::new(MemoryStore::new()) as Arc<dyn ThreadStore>, ()) });
conformance_suite!(@deletion async { (Arc::new(MemoryStore::new()) as Arc<dyn ThreadStore>, ()) });
