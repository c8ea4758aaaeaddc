//! Test support shared by roundtable's crates, benches and examples.
//!
//! Everything a test needs more than once lives here once: builders of
//! scripted replies and models, thread fixtures, and launchers of the real
//! servers the tests start on loopback. The crate is a dev-dependency only
//! and is never published.

#[cfg(feature = "mcp")]
pub mod mcp_fixture;
#[cfg(feature = "nats")]
pub mod nats;
pub mod ports;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod scripted;
