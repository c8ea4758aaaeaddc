//! Runs a workflow's phases as turns of one agentic session, printing the
//! session's events as they come.
//!
//! ```text
//! cargo run --example workflow -- [FILE.yaml] [--workspace DIR] [--data DIR]
//!     [--session ID] [--set key=value]... [--symlink]
//! ```
//!
//! With no FILE it runs `examples/workflow/review.yaml`: three phases (a
//! skills-only triage, a template-only plan, and a gated fix with a
//! template and a skill) over the skills and `agent-context/` next to it.
//! Skills are looked up in `skills/` (then `.claude/skills/`) next to the
//! workflow file, templates relative to it, and `agent-context/*.md` there
//! becomes the workspace's `AGENTS.md`.
//!
//! The workspace defaults to a fresh temp folder holding a small sample
//! project; the session's thread goes to a JSONL store in `--data` (default:
//! a temp folder). Give the same `--data` and the printed `--session` to run
//! the workflow again on that session: it resumes after its last completed
//! phase. `--set key=value` adds to the prompts' context (the sample uses
//! `repo` and `file`).
//!
//! A gated phase asks at the terminal (`y` approves); when stdin is not a
//! terminal the example approves it itself and says so. Either way the
//! decision goes through `SessionEngine::decide`, as a client's would.
//!
//! Offline by default: a stand-in model reads the phase's primary skill
//! with `read_skill` and answers with a summary, so the whole flow runs
//! without a key. `OPENAI_API_KEY` (with `OPENAI_BASE_URL`, `OPENAI_MODEL`)
//! or `ANTHROPIC_API_KEY` selects a real provider (`examples/support/model.rs`,
//! shared with the chat example).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use roundtable::providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, HttpProvider, Message, Model,
    OPENAI_COMPLETIONS, Provider, ScriptStep, StopReason, StreamOptions, ToolCall, now_millis,
    script_events,
};
use roundtable::sessions::records::PHASE_GATE_TOOL;
use roundtable::sessions::{
    ApprovalAction, Caller, CreateSession, EventId, EventType, SessionEngine, SessionEvent,
    WorkflowRunner,
};
use roundtable::skills::{SkillLibrary, StageMode, Workflow};
use roundtable::thread_stream::{JsonlStore, ThreadStore};
use roundtable::tools::{ApprovalPolicy, VerifyPolicy};

#[path = "support/model.rs"]
mod model;

const USAGE: &str = "usage: cargo run --example workflow -- [FILE.yaml] [--workspace DIR] \
                     [--data DIR] [--session ID] [--set key=value]... [--symlink]";

/// The command line.
struct Options {
    file: PathBuf,
    workspace: Option<PathBuf>,
    data: Option<PathBuf>,
    session: Option<String>,
    context: serde_json::Map<String, serde_json::Value>,
    symlink: bool,
}

fn usage(problem: &str) -> ! {
    eprintln!("{problem}\n{USAGE}");
    std::process::exit(2)
}

fn options() -> Options {
    let mut options = Options {
        file: Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workflow/review.yaml"),
        workspace: None,
        data: None,
        session: None,
        context: serde_json::Map::new(),
        symlink: false,
    };
    let mut args = std::env::args().skip(1);
    let value = |args: &mut dyn Iterator<Item = String>, flag: &str| {
        args.next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--workspace" => options.workspace = Some(value(&mut args, &arg).into()),
            "--data" => options.data = Some(value(&mut args, &arg).into()),
            "--session" => options.session = Some(value(&mut args, &arg)),
            "--set" => {
                let pair = value(&mut args, &arg);
                let Some((key, val)) = pair.split_once('=') else {
                    usage(&format!("--set takes key=value, not {pair}"))
                };
                options.context.insert(key.into(), val.into());
            }
            "--symlink" => options.symlink = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            flag if flag.starts_with('-') => usage(&format!("unknown argument {flag}")),
            file => options.file = file.into(),
        }
    }
    options
}

/// A small project for the sample workflow to work on.
fn sample_workspace(dir: &Path) {
    std::fs::write(
        dir.join("README.md"),
        "# greet\n\n`./greet.sh NAME` greets NAME.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("greet.sh"),
        "#!/bin/sh\n# TODO: greet the given name instead of the world.\necho \"Hello, world\"\n",
    )
    .unwrap();
}

/// The model that answers offline: in a phase with skills it reads the
/// primary one with `read_skill`, then it sums up what the phase asked.
struct Offline;

impl Provider for Offline {
    fn stream(&self, model: &Model, context: &Context, _options: &StreamOptions) -> EventStream {
        let mut reply = AssistantMessage::for_model(model, now_millis());
        let asked = context.last_user_text();
        let asked = asked.strip_prefix("[user]: ").unwrap_or(&asked).to_owned();
        let waiting_for_tool = !matches!(context.messages.last(), Some(Message::ToolResult(_)));
        let offers_skills = context.tools.iter().any(|t| &*t.name == "read_skill");
        let primary = primary_skill(&asked, context.system_prompt.as_deref().unwrap_or(""));
        match primary {
            Some(skill) if offers_skills && waiting_for_tool => {
                let arguments = serde_json::json!({ "name": skill });
                reply.content.push(AssistantBlock::ToolCall(ToolCall::new(
                    format!("call_{}", now_millis()),
                    "read_skill",
                    arguments.as_object().cloned().unwrap_or_default(),
                )));
                reply.stop_reason = StopReason::ToolUse;
            }
            _ => {
                let first = asked.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                let read = primary
                    .filter(|_| offers_skills)
                    .map(|s| format!(" I read the {s} skill first."))
                    .unwrap_or_default();
                reply.content.push(AssistantBlock::text(format!(
                    "(offline) I would now work on: {first}{read} Set OPENAI_API_KEY or \
                     ANTHROPIC_API_KEY for a model that does the work."
                )));
            }
        }
        Box::pin(futures::stream::iter(script_events(
            ScriptStep::Reply(reply),
            24,
        )))
    }
}

/// The skill a phase points at: the nudge's `**name**`, else the first of
/// the catalogue.
fn primary_skill<'a>(asked: &'a str, system: &'a str) -> Option<&'a str> {
    let between = |text: &'a str, open: &str, close: &str| {
        let start = text.find(open)? + open.len();
        let end = text[start..].find(close)? + start;
        Some(&text[start..end])
    };
    asked
        .strip_prefix("Use the **")
        .and_then(|rest| rest.split("**").next())
        .or_else(|| between(system, "<name>", "</name>"))
}

/// One line for the events worth showing.
fn describe(event: &SessionEvent) -> Option<String> {
    let d = &event.data;
    let s = |key: &str| d[key].as_str().unwrap_or("").to_owned();
    let line = match event.kind {
        EventType::PhaseStarted => format!(
            "== phase {} (attempt {}) started; skills staged: {}",
            s("phase"),
            d["attempt"],
            d["skills"]
        ),
        EventType::PhaseCompleted => {
            format!("== phase {} completed ({})", s("phase"), s("finish_reason"))
        }
        EventType::PhaseFailed => format!("== phase {} FAILED: {}", s("phase"), s("reason")),
        EventType::ApprovalRequested if d["tool"] == PHASE_GATE_TOOL => format!(
            "?? phase {} waits for approval (gate {})",
            d["input"]["phase"].as_str().unwrap_or(""),
            s("tool_call_id")
        ),
        EventType::ApprovalGranted => format!("   approved: {}", s("tool_call_id")),
        EventType::ApprovalDenied => format!("   denied: {} {}", s("tool_call_id"), s("reason")),
        EventType::MessageAdded if d["role"] == "user" => {
            let text = d["parts"][0]["text"].as_str().unwrap_or("");
            format!("   > {}", text.replace('\n', "\n   > "))
        }
        EventType::ToolCallStarted => format!("   tool {} {}", s("tool"), d["input"]),
        EventType::ToolCallCompleted => {
            let output = s("output");
            let first = output.lines().next().unwrap_or("");
            format!(
                "   tool {} -> {} ({} lines)",
                s("tool"),
                first,
                output.lines().count()
            )
        }
        EventType::ModelOutputCompleted if !s("text").is_empty() => format!("   < {}", s("text")),
        EventType::TurnFailed => format!("   turn failed: {}", s("reason")),
        _ => return None,
    };
    Some(line)
}

/// Approves or denies the gate of `event`: at the terminal, or by itself
/// when there is none.
async fn decide_gate(engine: &SessionEngine, session: &str, event: &SessionEvent) {
    let call_id = event.data["tool_call_id"].as_str().unwrap_or("").to_owned();
    let phase = event.data["input"]["phase"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let approve = if std::io::stdin().is_terminal() {
        print!("   approve phase {phase}? [y/N] ");
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).ok();
            line.trim().eq_ignore_ascii_case("y")
        })
        .await
        .unwrap_or(false)
    } else {
        println!("   (stdin is not a terminal: approving phase {phase})");
        true
    };
    let action = if approve {
        ApprovalAction::Approve
    } else {
        ApprovalAction::Deny
    };
    let reason = (!approve).then(|| "denied at the terminal".to_owned());
    if let Err(e) = engine
        .decide(&Caller::Host, session, &call_id, action, reason)
        .await
    {
        eprintln!("cannot decide gate {call_id}: {e}");
    }
}

#[tokio::main]
async fn main() {
    let mut options = options();
    let base = options
        .file
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let workflow = match Workflow::load(&options.file, &SkillLibrary::new(&base)) {
        Ok(workflow) => workflow,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    };

    let temp = tempfile::tempdir().unwrap();
    let workspace = match &options.workspace {
        Some(dir) => dir.clone(),
        None => {
            let dir = temp.path().join("workspace");
            std::fs::create_dir_all(&dir).unwrap();
            sample_workspace(&dir);
            dir
        }
    };
    let data = options
        .data
        .clone()
        .unwrap_or_else(|| temp.path().join("data"));
    std::fs::create_dir_all(&data).unwrap();
    for (key, value) in [("repo", "greet"), ("file", "greet.sh")] {
        options.context.entry(key).or_insert(value.into());
    }

    let store: Arc<dyn ThreadStore> = Arc::new(JsonlStore::open(&data).await.unwrap());
    let (provider, model): (Arc<dyn Provider>, Model) =
        match model::real_models("agent").into_iter().next() {
            Some(model) => (Arc::new(HttpProvider::new()), model),
            None => (
                Arc::new(Offline),
                Model::new(OPENAI_COMPLETIONS, "offline", "offline", ""),
            ),
        };
    let engine = SessionEngine::builder(store, provider, model.clone())
        .snapshot_dir(&data)
        .build();
    engine.recover().await.unwrap();
    let session = match &options.session {
        Some(id) => id.clone(),
        None => {
            let request = CreateSession {
                // The sample project has no tests to run, and a workflow
                // phase is approved once, at its gate.
                verify_policy: Some(VerifyPolicy {
                    auto_verify: false,
                    ..VerifyPolicy::default()
                }),
                approval_policy: Some(ApprovalPolicy::none()),
                ..CreateSession::new(&workspace)
            };
            engine
                .create(&Caller::Host, request)
                .await
                .unwrap_or_else(|e| usage(&format!("cannot create the session: {e}")))
                .id
                .to_string()
        }
    };
    println!(
        "workflow {} ({} phases) in session {session}\n  workspace: {}\n  data: {} (model: {}/{})\n",
        workflow.name,
        workflow.phases.len(),
        workspace.display(),
        data.display(),
        model.provider,
        model.id,
    );

    // Print the session's events as they come; answer gates.
    let printed = Arc::new(Mutex::new(None::<EventId>));
    let mut events = engine
        .subscribe(&Caller::Host, &session, None)
        .await
        .unwrap();
    let printer = {
        let (engine, session, printed) = (engine.clone(), session.clone(), printed.clone());
        tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                if let Some(line) = describe(&event) {
                    println!("{line}");
                }
                *printed.lock().unwrap() = Some(event.id);
                if event.kind == EventType::ApprovalRequested
                    && event.data["tool"] == PHASE_GATE_TOOL
                {
                    decide_gate(&engine, &session, &event).await;
                }
            }
        })
    };

    let mut runner = WorkflowRunner::new(engine.clone(), workflow)
        .agent_context(base.join("agent-context"))
        .context(options.context.clone());
    if options.symlink {
        runner = runner.stage_mode(StageMode::Symlink);
    }
    let run = runner.run(&Caller::Host, &session).await;
    engine.idle(&session).await.unwrap();
    printer.abort();
    let _ = printer.await;
    // What the printer had not reached yet.
    let after = *printed.lock().unwrap();
    for event in engine.events(&Caller::Host, &session, after).await.unwrap() {
        if let Some(line) = describe(&event) {
            println!("{line}");
        }
    }

    println!();
    match run {
        Ok(run) if run.is_complete() => {
            if !run.already_completed.is_empty() {
                println!("already done before: {}", run.already_completed.join(", "));
            }
            if run.completed.is_empty() {
                println!("workflow complete: nothing was left to run");
            } else {
                println!("workflow complete: {}", run.completed.join(", "));
            }
        }
        Ok(run) => {
            let stop = run.stopped.unwrap();
            println!(
                "workflow stopped at phase {} (attempt {}): {}",
                stop.phase, stop.attempt, stop.reason
            );
        }
        Err(e) => {
            eprintln!("the workflow could not run: {e}");
            std::process::exit(1)
        }
    }
    if options.data.is_some() {
        println!(
            "run it again with --data {} --session {session} to resume",
            data.display()
        );
    }
}
