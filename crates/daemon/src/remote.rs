//! `roundtable sessions`: an operator's look at a running daemon, through
//! its own API with the admin token, so the commands work the same on a
//! folder or a shared store and never race a running turn.

use serde_json::Value;

use crate::Failure;
use crate::cli::{SessionsArgs, SessionsCommand};
use crate::config::Config;

/// Runs one `sessions` command against the daemon of `config`.
pub(crate) async fn run(config: &Config, args: SessionsArgs) -> Result<(), Failure> {
    let base = args
        .url
        .clone()
        .unwrap_or_else(|| format!("http://{}", config.addr));
    let base = base.trim_end_matches('/');
    let token = admin_token(config)?;
    let client = reqwest::Client::new();
    let call = |method: reqwest::Method, path: String| {
        client
            .request(method, format!("{base}{path}"))
            .bearer_auth(&token)
    };
    match args.command {
        SessionsCommand::List {
            status,
            limit,
            cursor,
        } => {
            let mut path = format!("/v1/sessions?limit={limit}");
            for (name, value) in [("status", status), ("cursor", cursor)] {
                if let Some(value) = value {
                    path.push_str(&format!("&{name}={value}"));
                }
            }
            let body = send(call(reqwest::Method::GET, path)).await?;
            print_list(&body);
        }
        SessionsCommand::Show { id } => {
            let body = send(call(reqwest::Method::GET, format!("/v1/sessions/{id}"))).await?;
            let text = serde_json::to_string_pretty(&body).unwrap_or_default();
            println!("{text}");
        }
        SessionsCommand::Delete { id } => {
            send(call(reqwest::Method::DELETE, format!("/v1/sessions/{id}"))).await?;
            eprintln!("deleted {id}");
        }
    }
    Ok(())
}

/// `ROUNDTABLE_TOKEN`, or the token the daemon wrote in its data folder.
fn admin_token(config: &Config) -> Result<String, Failure> {
    if let Ok(token) = std::env::var(roundtable_server::token::TOKEN_ENV)
        && !token.is_empty()
    {
        return Ok(token);
    }
    let file = config.data.join("token");
    std::fs::read_to_string(&file)
        .map(|t| t.trim().to_string())
        .map_err(|e| {
            Failure::Usage(format!(
                "no admin token: set ROUNDTABLE_TOKEN or run this beside the data folder ({}: {e})",
                file.display()
            ))
        })
}

/// The JSON answer of a request, or the daemon's error in words.
async fn send(request: reqwest::RequestBuilder) -> Result<Value, Failure> {
    let response = request
        .send()
        .await
        .map_err(|e| Failure::Run(format!("the daemon does not answer: {e}")))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(body);
    }
    let message = body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no detail");
    Err(Failure::Run(format!("{status}: {message}")))
}

/// One line a session: id, status, last update, title.
fn print_list(body: &Value) {
    let sessions = body
        .get("sessions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for session in sessions {
        let field = |name: &str| {
            session
                .get(name)
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .unwrap_or_default()
        };
        println!(
            "{}\t{}\t{}\t{}",
            field("id"),
            field("status"),
            field("updated_at"),
            field("title")
        );
    }
    if let Some(cursor) = body.get("next_cursor").and_then(Value::as_str) {
        eprintln!("more: --cursor {cursor}");
    }
}
