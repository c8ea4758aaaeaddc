//! Test support shared by roundtable's crates, benches and examples.
//!
//! Everything a test needs more than once lives here once, each part behind
//! the feature of the crates it needs:
//!
//! - always: [`scripted`] replies and the model they come from, reading
//!   [`messages`] (the history validator, a one-line rendering), free
//!   loopback [`ports`], the agentic sessions' git [`workspace`] and the
//!   temp folder holding it beside a data folder;
//! - `thread-stream`: [`thread`] fixtures (a thread built in memory, entry
//!   bodies, the benches' sample entries, the turn-lifecycle check) and
//!   bench [`samples`] (a busy multi-party thread built from a seed);
//! - `tools`: test [`tools`] (closures as tools, a tool that waits for its
//!   cancellation, the read-only `lookup`);
//! - `dispatch`: the standard cast and rosters ([`roster`]);
//! - `chat-runner`: for the runners' tests ([`runner`]), a provider that
//!   answers from the request ([`echo_provider`]), two runner processes
//!   over one store ([`runner_processes`]);
//! - `replay`: a loopback HTTP server replaying recorded wire streams and
//!   checking every request ([`replay`]);
//! - `nats`, `postgres`, `mcp`: launchers of real servers on loopback.
//!
//! The crate is a dev-dependency only and is never published.

#[cfg(feature = "chat-runner")]
pub mod echo_provider;
#[cfg(feature = "mcp")]
pub mod mcp_fixture;
pub mod messages;
#[cfg(feature = "nats")]
pub mod nats;
pub mod ports;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "replay")]
pub mod replay;
#[cfg(feature = "dispatch")]
pub mod roster;
#[cfg(feature = "chat-runner")]
pub mod runner;
#[cfg(feature = "chat-runner")]
pub mod runner_processes;
#[cfg(feature = "thread-stream")]
pub mod samples;
pub mod scripted;
#[cfg(feature = "thread-stream")]
pub mod thread;
#[cfg(feature = "tools")]
pub mod tools;
pub mod workspace;
