//! `roundtable`: the service binary. `roundtable serve` runs the sessions
//! API (`/v1/sessions`), the rooms API (`/v1/rooms`, with the bots of the
//! configuration, or scripted ones with `--demo`), the chat API
//! (`/api/chat`) and the chat page with
//! logs, health routes, metrics and users' tokens; `roundtable token`
//! manages the tokens; `roundtable sessions` lets an operator look at and
//! delete sessions of a running daemon.
//!
//! Sessions are kept in the data folder (JSONL), or, for several daemons
//! behind a load balancer, in NATS JetStream (`nats = "nats://..."`) or in
//! a PostgreSQL database (`postgres = "postgres://user:password@host/db"`:
//! threads, files, the session index, chat settings and users in its
//! `roundtable` schema): every daemon on a shared store sees the same.
//!
//! Exit codes: 0 done, 1 a failure at run time (an unwritable data folder,
//! a store that cannot be opened), 2 a bad command line or configuration.

mod bots;
mod cli;
mod config;
mod demo;
mod models;
mod observe;
mod remote;
mod serve;
mod state;
mod users;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, TokenCommand};
use crate::config::Config;

/// A failure that ends the command, with its exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command line or the configuration cannot work (exit 2).
    Usage(String),
    /// Something failed while running (exit 1).
    Run(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(e) => Err(Failure::Run(format!("cannot start the runtime: {e}"))),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(problem)) => {
            eprintln!("roundtable: {problem}");
            ExitCode::from(2)
        }
        Err(Failure::Run(problem)) => {
            eprintln!("roundtable: {problem}");
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let data_flag = cli.data.clone();
    let config = || load_config(cli.config.as_deref(), data_flag.clone());
    match cli.command {
        Command::Serve(args) => {
            let mut config = config()?;
            args.apply(&mut config);
            config.check().map_err(|e| Failure::Usage(e.to_string()))?;
            if args.print_config {
                let shown = config
                    .masked_toml()
                    .map_err(|e| Failure::Run(e.to_string()))?;
                print!("{shown}");
                return Ok(());
            }
            serve::run(config, args.workflow_values, args.demo).await
        }
        Command::Token(command) => tokens(&config()?, command).await,
        Command::Sessions(args) => remote::run(&config()?, args).await,
    }
}

/// The config file's settings (with `data` from the flag when given).
fn load_config(file: Option<&std::path::Path>, data: Option<PathBuf>) -> Result<Config, Failure> {
    let data_dir = data.clone().unwrap_or_else(|| Config::default().data);
    let mut config = Config::load(file, &data_dir).map_err(|e| Failure::Usage(e.to_string()))?;
    if let Some(data) = data {
        config.data = data;
    }
    Ok(config)
}

/// `roundtable token ...`, on the users of the store the configuration
/// names (a shared store's table, else the data folder's file).
async fn tokens(config: &Config, command: TokenCommand) -> Result<(), Failure> {
    let data = &config.data;
    let users = state::users_of(config).await.map_err(Failure::Run)?;
    let failed = |e: users::UsersError| Failure::Run(e.to_string());
    match command {
        TokenCommand::Add { user } => {
            if matches!(users, users::Users::File(_)) {
                std::fs::create_dir_all(data).map_err(|e| {
                    Failure::Run(format!(
                        "cannot make the data folder {}: {e}",
                        data.display()
                    ))
                })?;
            }
            let (record, token) = users.add(&user).await.map_err(|e| match e {
                users::UsersError::BadUser(_) => Failure::Usage(e.to_string()),
                e => failed(e),
            })?;
            println!("{}", token.secret());
            eprintln!(
                "token {} for {} (shown once: only its hash is kept)",
                record.id, record.user
            );
        }
        TokenCommand::List => {
            for t in users.list().await.map_err(failed)? {
                println!("{}\t{}\t{}", t.id, t.user, t.created_at);
            }
        }
        TokenCommand::Revoke { which } => {
            let gone = users.revoke(&which).await.map_err(failed)?;
            if gone.is_empty() {
                return Err(Failure::Usage(format!("no token or user {which:?}")));
            }
            for t in gone {
                eprintln!("revoked {} of {}", t.id, t.user);
            }
        }
    }
    Ok(())
}
