//! Running the fixture as a stdio server, and finding its binary.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::ServiceExt;

use super::server::{FixtureOptions, FixtureServer, FixtureState};

/// The `mcp_fixture` binary, built on first use in this process.
///
/// `cargo test -p some-crate` builds only that crate's targets, so the
/// binary of this crate may be missing or out of date. The first call runs
/// `cargo build -p roundtable-test-support --features mcp --bin mcp_fixture`
/// (with the `cargo` that runs the tests, a no-op when the binary is fresh)
/// and takes the binary's path from cargo's own report, so a custom target
/// directory works too. `ROUNDTABLE_MCP_FIXTURE` names a binary to use
/// instead.
pub fn fixture_binary() -> Result<PathBuf, String> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY.get_or_init(build).clone()
}

fn build() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("ROUNDTABLE_MCP_FIXTURE") {
        return Ok(PathBuf::from(path));
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "roundtable-test-support",
            "--features",
            "mcp",
            "--bin",
            "mcp_fixture",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run cargo to build mcp_fixture: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building mcp_fixture failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["name"] == "mcp_fixture")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| String::from("cargo built mcp_fixture but named no executable"))
}

/// The `mcpServers` entry that starts the fixture binary with `options`.
pub fn stdio_entry(options: &FixtureOptions) -> Result<serde_json::Value, String> {
    Ok(serde_json::json!({
        "command": fixture_binary()?,
        "args": options.to_args(),
    }))
}

/// Serves the fixture on stdin and stdout (the binary's `main`).
pub async fn run_stdio(options: FixtureOptions) -> ExitCode {
    if let Some(path) = &options.touch_file
        && let Err(e) = std::fs::write(path, b"started\n")
    {
        eprintln!("fixture: cannot create {}: {e}", path.display());
        return ExitCode::from(2);
    }
    if let Some(code) = options.exit_at_start {
        eprintln!("fixture: missing FIXTURE_TOKEN, giving up before the handshake");
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if options.hang_at_start {
        eprintln!("fixture: warming up a cache that never fills");
        std::future::pending::<()>().await;
    }
    if let Some(path) = &options.wait_for_file {
        eprintln!("fixture: waiting for {}", path.display());
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    if options.stdout_noise {
        println!("fixture starting up (this line is not JSON-RPC)");
    }
    let server = FixtureServer::new(Arc::new(FixtureState::default()), &options);
    let service = match server.serve(rmcp::transport::stdio()).await {
        Ok(service) => service,
        Err(e) => {
            eprintln!("fixture: handshake failed: {e}");
            return ExitCode::from(3);
        }
    };
    match service.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fixture: {e}");
            ExitCode::from(4)
        }
    }
}
