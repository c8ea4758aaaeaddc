//! roundtable: embeddable libraries for LLM chat where one thread holds many
//! humans and many bots.
//!
//! This facade re-exports the workspace's crates, each behind a feature of the
//! same name (all on by default). Hosts that want one crate can depend on it
//! alone (`roundtable-thread-stream`, `roundtable-providers`, ...).

#[cfg(feature = "chat-runner")]
pub use roundtable_chat_runner as chat_runner;
#[cfg(feature = "dispatch")]
pub use roundtable_dispatch as dispatch;
#[cfg(feature = "providers")]
pub use roundtable_providers as providers;
#[cfg(feature = "server")]
pub use roundtable_server as server;
#[cfg(feature = "sessions")]
pub use roundtable_sessions as sessions;
#[cfg(feature = "skills")]
pub use roundtable_skills as skills;
#[cfg(feature = "thread-stream")]
pub use roundtable_thread_stream as thread_stream;
#[cfg(feature = "tools")]
pub use roundtable_tools as tools;
