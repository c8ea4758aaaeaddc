//! The command line. Every `serve` flag also reads an environment
//! variable (shown by `--help`); a flag beats its variable, and both beat
//! the config file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, LogFormat};

/// roundtable: agentic sessions and chat over HTTP.
#[derive(Debug, Parser)]
#[command(name = "roundtable", version, about)]
pub(crate) struct Cli {
    /// The config file (default: roundtable.toml in the data folder, if
    /// present).
    #[arg(long, global = true, env = "ROUNDTABLE_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// The data folder.
    #[arg(long, global = true, env = "ROUNDTABLE_DATA")]
    pub(crate) data: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the sessions API, the rooms API, the chat API and the chat page.
    Serve(Box<ServeArgs>),
    /// Manage users' tokens (in the shared store the config names, else in
    /// the data folder; running daemons see the change within a second).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Look at and delete sessions of a running daemon (with the admin
    /// token: ROUNDTABLE_TOKEN, or the data folder's `token`).
    Sessions(SessionsArgs),
}

/// `roundtable serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Where to listen (IP:port).
    #[arg(long, env = "ROUNDTABLE_ADDR")]
    pub(crate) addr: Option<SocketAddr>,
    /// A NATS server whose JetStream holds the sessions (its value, which
    /// may hold a password, is not shown by --help).
    #[arg(long, env = "ROUNDTABLE_NATS", hide_env_values = true)]
    pub(crate) nats: Option<String>,
    /// A PostgreSQL database that holds the sessions
    /// (postgres://user:password@host/db; not shown by --help).
    #[arg(long, env = "ROUNDTABLE_POSTGRES", hide_env_values = true)]
    pub(crate) postgres: Option<String>,
    /// Serve /metrics here without a token (else on --addr, admin token).
    #[arg(long, env = "ROUNDTABLE_METRICS_ADDR")]
    pub(crate) metrics_addr: Option<SocketAddr>,
    /// Log lines as text or JSON.
    #[arg(long, value_enum, env = "ROUNDTABLE_LOG_FORMAT")]
    pub(crate) log_format: Option<LogFormat>,
    /// A log filter such as `info` or `roundtable_sessions=debug`
    /// (RUST_LOG wins).
    #[arg(long, env = "ROUNDTABLE_LOG")]
    pub(crate) log: Option<String>,
    /// An origin allowed to call from a browser (repeatable).
    #[arg(long = "allow-origin")]
    pub(crate) allowed_origins: Vec<String>,
    /// A host name requests may name besides the address (repeatable).
    #[arg(long = "allow-host")]
    pub(crate) allowed_hosts: Vec<String>,
    /// The folder every session's workspace must be inside.
    #[arg(long, env = "ROUNDTABLE_WORKSPACE_ROOT")]
    pub(crate) workspace_root: Option<PathBuf>,
    /// The workspace of chats started from /api/chat.
    #[arg(long, env = "ROUNDTABLE_CHAT_WORKSPACE")]
    pub(crate) chat_workspace: Option<PathBuf>,
    /// An {"mcpServers": {...}} file whose tools every session gets.
    #[arg(long, env = "ROUNDTABLE_MCP")]
    pub(crate) mcp: Option<PathBuf>,
    /// A workflow YAML that chat prompts with mode "harness" run.
    #[arg(long, env = "ROUNDTABLE_WORKFLOW")]
    pub(crate) workflow: Option<PathBuf>,
    /// A value for the workflow's prompt templates (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = key_value)]
    pub(crate) workflow_values: Vec<(String, String)>,
    /// How long running turns may go on after SIGTERM (e.g. 30s).
    #[arg(long, value_parser = humantime::parse_duration, env = "ROUNDTABLE_SHUTDOWN_GRACE")]
    pub(crate) shutdown_grace: Option<Duration>,
    /// Serve rooms with three scripted bots that need no model (instead of
    /// the configured [[bots]]), to see a room at work at once.
    #[arg(long)]
    pub(crate) demo: bool,
    /// Print the effective configuration (secrets masked) and exit.
    #[arg(long)]
    pub(crate) print_config: bool,
}

fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))
}

impl ServeArgs {
    /// `config` with what the flags and their variables set.
    pub(crate) fn apply(&self, config: &mut Config) {
        fn set<T: Clone>(target: &mut T, value: &Option<T>) {
            if let Some(value) = value {
                *target = value.clone();
            }
        }
        fn set_some<T: Clone>(target: &mut Option<T>, value: &Option<T>) {
            if value.is_some() {
                target.clone_from(value);
            }
        }
        set(&mut config.addr, &self.addr);
        set_some(&mut config.nats, &self.nats);
        set_some(&mut config.postgres, &self.postgres);
        set_some(&mut config.metrics_addr, &self.metrics_addr);
        set(&mut config.log.format, &self.log_format);
        set(&mut config.log.filter, &self.log);
        set_some(&mut config.workspace_root, &self.workspace_root);
        set_some(&mut config.chat_workspace, &self.chat_workspace);
        set_some(&mut config.mcp, &self.mcp);
        set_some(&mut config.workflow, &self.workflow);
        set(&mut config.limits.shutdown_grace, &self.shutdown_grace);
        config
            .allowed_origins
            .extend(self.allowed_origins.iter().cloned());
        config
            .allowed_hosts
            .extend(self.allowed_hosts.iter().cloned());
    }
}

/// `roundtable token ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Make a token for USER and print it (once: only its hash is kept).
    Add {
        /// The user's id.
        user: String,
    },
    /// List the tokens: id, user, creation time.
    List,
    /// Revoke a token by its id, or every token of a user.
    Revoke {
        /// A token id (tok_...) or a user id.
        which: String,
    },
}

/// `roundtable sessions ...`.
#[derive(Debug, Args)]
pub(crate) struct SessionsArgs {
    /// The daemon's base URL (default: http:// and the configured address).
    #[arg(long, env = "ROUNDTABLE_URL")]
    pub(crate) url: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: SessionsCommand,
}

/// The operator's session commands.
#[derive(Debug, Subcommand)]
pub(crate) enum SessionsCommand {
    /// The sessions, newest first.
    List {
        /// Only sessions with this status (active, waiting_approval, failed,
        /// completed, canceled, unreadable).
        #[arg(long)]
        status: Option<String>,
        /// How many at most.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Where the previous page ended (its `next_cursor`).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One session, as JSON.
    Show {
        /// The session's id.
        id: String,
    },
    /// Delete a session and its files (refused while a turn runs).
    Delete {
        /// The session's id.
        id: String,
    },
}
