//! A fixture MCP server for tests of MCP clients (feature `mcp`), written
//! with the `rmcp` SDK's server side.
//!
//! Its tools cover what a client must handle: `echo`, `image`, `fail` (a
//! tool error), `wait` (until cancelled) and `cancellations` (how many
//! were), `add_tool` (changes the tool list and says so), annotated
//! read-only (`lookup`, `fetch_page`) and destructive (`delete_everything`)
//! tools, `progress`, `exit` (the process dies mid-call), `resources`,
//! `structured`, `spawn_child`, `env`, `lines`, `ask_model` and `ask_user`
//! (sampling and elicitation requests to the client) and `find_user` (a
//! schema with a root `anyOf`). [`FixtureOptions`] add colliding names, a server
//! that hangs or exits at start, noise on stdout, and start-up ordering.
//!
//! Over stdio it runs as a real child process, the `mcp_fixture` binary,
//! which [`fixture_binary`] builds on first use; over streamable HTTP,
//! [`HttpFixture`] serves it on a loopback port inside the test process.

mod http;
mod launch;
mod server;

pub use http::{HttpFixture, SilentHttpServer};
pub use launch::{fixture_binary, run_stdio, stdio_entry};
pub use server::{FixtureOptions, FixtureServer, FixtureState, RED_PIXEL_PNG};
