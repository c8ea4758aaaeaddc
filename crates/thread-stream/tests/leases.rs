//! The lease conformance suite against each implementation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod lease_conformance;

mod memory {
    use std::sync::Arc;

    use roundtable_thread_stream::lease::MemoryLeases;

    use super::lease_conformance::{self, Replicas};
    use crate::lease_suite;

    lease_suite!(async { (Replicas::one(Arc::new(MemoryLeases::new())), ()) });
}
