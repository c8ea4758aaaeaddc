//! PostgreSQL: a thread store for hosts that already run PostgreSQL
//! ([`PostgresStore`]), and a mirror of any store's threads into tables a
//! dashboard can query ([`PostgresMirror`]).
//!
//! How the store keeps its promises is told on [`PostgresStore`], how the
//! mirror works on [`PostgresMirror`]; the modules:
//!
//! - `schema.rs`: the store's tables; `migrations.rs`: the runner that
//!   applies embedded migrations (the sessions' too);
//! - `connection.rs`: connecting, and telling a lost connection from an error;
//! - `options.rs`: the store's settings; `session.rs`: the connection and
//!   the reads its handles, subscriptions and leases share; `store.rs`: the
//!   store;
//!   `listener.rs` and `subscription.rs`: how subscribers are woken and read;
//! - `mirror.rs` (followers and status), `mirror_writer.rs` (transactions),
//!   `derive.rs` (the derived rows of an entry), `patch_stats.rs` (what a
//!   patch changes).

pub(crate) mod connection;
mod derive;
mod listener;
mod migrations;
mod mirror;
mod mirror_writer;
mod options;
mod patch_stats;
mod schema;
pub(crate) mod session;
mod store;
mod subscription;

pub use connection::{backoff, connect, connect_config, describe, is_transient};
pub use derive::{DeriveOptions, DerivedRow, derive_rows};
pub use migrations::{Migration, Migrations};
pub use mirror::{MirrorOptions, MirrorStatus, MirrorThreadStatus, PostgresMirror};
pub use options::PostgresOptions;
pub use patch_stats::FileChange;
pub use store::PostgresStore;
