//! The fixture MCP server over stdio, for tests that start it as a real
//! child process. Arguments: see `FixtureOptions::to_args`.

use std::process::ExitCode;

use roundtable_test_support::mcp_fixture::{FixtureOptions, run_stdio};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match FixtureOptions::from_args(std::env::args().skip(1)) {
        Ok(options) => run_stdio(options).await,
        Err(e) => {
            eprintln!("mcp_fixture: {e}");
            ExitCode::from(64)
        }
    }
}
