//! An interactive terminal chat over the `ChatRunner`: type a line, watch
//! the answer stream in, see tool calls as they run.
//!
//! ```text
//! cargo run --example chat
//! ```
//!
//! Offline by default: a scripted provider answers every line by first
//! reading the `chat` skill through the `read_skill` tool and then
//! replying, so the whole loop (tools, events, storage) runs without a key.
//! With `OPENAI_API_KEY` set it talks to OpenAI's chat completions API
//! (`OPENAI_BASE_URL` for another compatible server, `OPENAI_MODEL` for the
//! model, default `gpt-4o-mini`, `OPENAI_API=openai-responses` for the
//! Responses API); with `ANTHROPIC_API_KEY` to Anthropic (`ANTHROPIC_MODEL`,
//! default `claude-sonnet-4-5`); with `GEMINI_API_KEY` or `GOOGLE_API_KEY`
//! to Gemini (`GEMINI_MODEL`, default `gemini-2.5-flash`). `ROUNDTABLE_CHAT_MODEL`
//! / `ROUNDTABLE_MODEL` (`provider/id`) override the model through the
//! `chat` role (`examples/support/model.rs`, shared with the daemon). The
//! built-in tools are read-only: `read_skill` and the GitHub tools
//! (`GITHUB_TOKEN` is used when set).
//!
//! With `--mcp FILE` (and the `mcp` feature) the tools of the MCP servers in
//! FILE join them: the `{"mcpServers": {...}}` file other clients read
//! (`examples/support/mcp.rs`, shared with the daemon).
//!
//! ```text
//! cargo run --example chat --features mcp -- --mcp mcp.json
//! ```
//!
//! Each server's state is printed at start (failures with the end of their
//! stderr), and tools that need approval (every tool of a server that is
//! not trusted) ask at the terminal before they run. A server that adds or
//! removes tools is read again before the next turn, which prints what
//! changed. Built without the feature, `--mcp` says so and exits.
//!
//! Commands: `/reset` starts a new session, `/status` lists running turns,
//! `/quit` (or end of input) leaves. The session's JSONL log is written to
//! `ROUNDTABLE_CHAT_DIR` (default: a temporary folder, printed at start).
//! With `ROUNDTABLE_DATABASE_URL` set (and `--features postgres`) the
//! sessions are mirrored into PostgreSQL for dashboards.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::sync::Arc;

use async_trait::async_trait;
use roundtable::chat_runner::{
    ApprovalDecision, ApprovalRequest, Approver, ChatRunner, FnSink, OutputKind, TurnEvent,
    TurnOptions,
};
use roundtable::providers::{
    AssistantBlock, AssistantMessage, HttpProvider, Model, OPENAI_COMPLETIONS, Provider,
    RoleModels, ScriptedProvider, StopReason, ToolCall,
};
use roundtable::skills::load_skills;
use roundtable::thread_stream::{JsonlStore, ThreadStore};
use roundtable::tools::ToolRegistry;
use roundtable::tools::github::{GitHub, GitHubConfig};
use tokio::sync::Mutex;
use tokio::sync::mpsc::UnboundedReceiver;

#[path = "support/mcp.rs"]
mod mcp;
#[path = "support/mirror.rs"]
mod mirror;
#[path = "support/model.rs"]
mod model;

const SESSION_KEY: &str = "terminal";

/// The chat skill the offline demo reads, written to the state folder.
const CHAT_SKILL: &str = "---\nname: chat\ndescription: How to hold a friendly, useful \
conversation in a chat thread.\n---\n# Chat\n\nAnswer briefly, ask when unsure, and point \
code changes to the build workflow.\n";

enum Backend {
    Offline(Arc<ScriptedProvider>),
    Http,
}

fn pick_model() -> (Backend, Model) {
    match model::real_models("chat").into_iter().next() {
        Some(model) => (Backend::Http, model),
        None => (
            Backend::Offline(Arc::new(ScriptedProvider::new(
                Vec::<AssistantMessage>::new(),
            ))),
            Model::new(OPENAI_COMPLETIONS, "scripted", "offline", ""),
        ),
    }
}

/// Scripts the offline provider's two replies to `line`.
fn script(provider: &ScriptedProvider, line: &str, n: usize) {
    let mut lookup = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "offline", 0);
    let args = serde_json::json!({"name": "chat"});
    lookup.content.push(AssistantBlock::ToolCall(ToolCall::new(
        format!("call_{n}"),
        "read_skill",
        args.as_object().unwrap().clone(),
    )));
    lookup.stop_reason = StopReason::ToolUse;
    provider.push(lookup);
    let mut answer = AssistantMessage::empty(OPENAI_COMPLETIONS, "scripted", "offline", 0);
    answer.content.push(AssistantBlock::text(format!(
        "(offline) I read the chat skill first. You said: \"{line}\". \
         Set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY to talk to a real model."
    )));
    provider.push(answer);
}

/// The lines typed at the terminal, shared by the prompt loop and the
/// approver (which reads while a turn runs, when the loop does not).
type Lines = Arc<Mutex<UnboundedReceiver<String>>>;

/// Asks at the terminal before a gated tool call runs.
struct TerminalApprover {
    lines: Lines,
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let args = serde_json::to_string(&*request.call.arguments).unwrap_or_default();
        print!(
            "\n  [approve] {} ({}) {args}? [y/N] ",
            request.call.name, request.definition.kind
        );
        std::io::stdout().flush().unwrap();
        match self.lines.lock().await.recv().await {
            Some(answer) if answer.trim().eq_ignore_ascii_case("y") => ApprovalDecision::Approve,
            _ => ApprovalDecision::Deny {
                reason: Some("the user said no".into()),
            },
        }
    }
}

/// Options: `--mcp FILE`.
fn mcp_file() -> Option<std::path::PathBuf> {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mcp" => match args.next() {
                Some(path) => file = Some(path.into()),
                None => usage("--mcp needs a file"),
            },
            other => usage(&format!("unknown argument {other}")),
        }
    }
    file
}

fn usage(problem: &str) -> ! {
    eprintln!("{problem}\nusage: cargo run --example chat [--features mcp -- --mcp FILE]");
    std::process::exit(2)
}

fn printer() -> FnSink<impl Fn(TurnEvent) + Send + Sync> {
    FnSink(|event: TurnEvent| {
        let mut out = std::io::stdout().lock();
        match event {
            TurnEvent::OutputDelta {
                kind: OutputKind::Text,
                delta,
                ..
            } => {
                let _ = write!(out, "{delta}");
            }
            TurnEvent::ToolCallStarted {
                tool, arguments, ..
            } => {
                let args = serde_json::to_string(&*arguments).unwrap_or_default();
                let _ = writeln!(out, "\n  [tool] {tool} {args}");
            }
            TurnEvent::ToolCallCompleted { tool, result, .. } => {
                let text: String =
                    serde_json::to_value(&result.content).unwrap_or_default()[0]["text"]
                        .as_str()
                        .unwrap_or("")
                        .chars()
                        .take(72)
                        .collect();
                let mark = if result.is_error { "failed" } else { "ok" };
                let _ = writeln!(out, "  [tool] {tool} {mark}: {}", text.replace('\n', " "));
            }
            TurnEvent::ToolsChanged { change, .. } => {
                let list = |names: &[Arc<str>]| names.join(", ");
                let _ = writeln!(
                    out,
                    "\n  [tools] added: {}; removed: {}; changed: {}",
                    list(&change.added),
                    list(&change.removed),
                    list(&change.changed)
                );
            }
            TurnEvent::TurnFailed {
                finish_reason,
                error,
                ..
            } => {
                let _ = writeln!(out, "\n  [turn {finish_reason}] {error}");
            }
            _ => {}
        }
        let _ = out.flush();
    })
}

#[tokio::main]
async fn main() {
    let mcp_file = mcp_file();
    let (dir, _temp) = match std::env::var("ROUNDTABLE_CHAT_DIR") {
        Ok(dir) if !dir.is_empty() => (std::path::PathBuf::from(dir), None),
        _ => {
            let temp = tempfile::tempdir().unwrap();
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let skill_dir = dir.join("skills").join("chat");
    std::fs::create_dir_all(&skill_dir).unwrap();
    std::fs::write(skill_dir.join("SKILL.md"), CHAT_SKILL).unwrap();
    let skills = load_skills([dir.join("skills")]).skills;

    let (backend, model) = pick_model();
    let provider: Arc<dyn Provider> = match &backend {
        Backend::Offline(p) => p.clone(),
        Backend::Http => Arc::new(HttpProvider::new()),
    };
    let mut github_config = GitHubConfig::default();
    if let Ok(token) = std::env::var("GITHUB_TOKEN") {
        github_config = github_config.with_token(token);
    }
    let github = GitHub::new(github_config).unwrap();
    let mut tools = ToolRegistry::new();
    tools.register_all(github.toolset()).unwrap();
    let mcp_tools = match &mcp_file {
        Some(path) => Some(mcp::load(path).await.unwrap_or_else(|e| usage(&e))),
        None => None,
    };

    // Stdin is read on a plain thread and handed over line by line; the
    // approver reads from the same lines while a turn runs.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let lines: Lines = Arc::new(Mutex::new(rx));
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let store = Arc::new(JsonlStore::open(dir.join("sessions")).await.unwrap());
    let mirror = mirror::start(&(store.clone() as Arc<dyn ThreadStore>));
    let mut runner = ChatRunner::builder(provider, store.clone())
        .model(model.clone())
        .thinking(RoleModels::default().thinking("chat"))
        .agent_context_dir(dir.join("agent-context"))
        .skills(skills)
        .tools(tools)
        .approver(Arc::new(TerminalApprover {
            lines: lines.clone(),
        }));
    if let Some(source) = mcp_tools {
        runner = runner.tool_source(source);
    }
    let runner = runner
        .build()
        .await
        .unwrap_or_else(|e| usage(&e.to_string()));

    println!(
        "roundtable chat: model {}/{}, log in {}",
        model.provider,
        model.id,
        dir.join("sessions").display()
    );
    println!("type a message; /reset, /status, /quit");

    let sink = Arc::new(printer());
    let mut n = 0;
    print!("> ");
    std::io::stdout().flush().unwrap();
    loop {
        let Some(line) = lines.lock().await.recv().await else {
            break;
        };
        let line = line.trim().to_string();
        match line.as_str() {
            "" => {}
            "/quit" => break,
            "/reset" => match runner.reset(SESSION_KEY).await.unwrap() {
                Some(old) => println!("session {old} closed; the next message starts a new one"),
                None => println!("no session yet"),
            },
            "/status" => {
                println!("session: {:?}", runner.session_id(SESSION_KEY));
                println!("running turns: {}", runner.status().len());
            }
            _ => {
                n += 1;
                if let Backend::Offline(p) = &backend {
                    script(p, &line, n);
                }
                let options = TurnOptions {
                    sink: Some(sink.clone()),
                    ..TurnOptions::default()
                };
                let turn = runner.turn_with(SESSION_KEY, &line, options).await.unwrap();
                let o = &turn.outcome;
                println!(
                    "\n  [{} | {} round(s) | {} in / {} out tokens | ${:.6} | {} ms]",
                    o.finish_reason,
                    o.rounds,
                    o.usage.input,
                    o.usage.output,
                    o.usage.cost.total,
                    o.duration.as_millis()
                );
            }
        }
        print!("> ");
        std::io::stdout().flush().unwrap();
    }
    println!();
    mirror::finish(mirror, &*store).await;
}
