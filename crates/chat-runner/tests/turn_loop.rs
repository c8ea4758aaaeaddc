//! The turn loop against the scripted provider: tool round trips, the round
//! cap, timeout, cancellation, approvals, tool scheduling and failures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use roundtable_chat_runner::{
    ApprovalDecision, ApprovalRequest, ApproveAll, Approver, FinishReason, FnSink, Limits,
    NullSink, TurnEvent, TurnLoop, TurnRequest,
};
use roundtable_providers::{
    ErrorKind, Message, ScriptStep, ScriptedProvider, StopReason, UserMessage,
};
use roundtable_test_support::messages::*;
use roundtable_test_support::runner::Recorder;
use roundtable_test_support::scripted::*;
use roundtable_test_support::tools::*;
use roundtable_tools::{ApprovalPolicy, ToolError, ToolKind, ToolRegistry, ToolResult};
use tokio_util::sync::CancellationToken;

fn request(prompt: &str) -> TurnRequest {
    TurnRequest::new(vec![Message::from(UserMessage::text(prompt, 1))]).with_system_prompt("sys")
}

fn echo() -> FnTool {
    tool("echo", ToolKind::Read, |_, args| async move {
        Ok(ToolResult::text(format!(
            "echo {}",
            args.get("v").and_then(|v| v.as_str()).unwrap_or("")
        )))
    })
}

fn looped(provider: ScriptedProvider, tools: ToolRegistry) -> (Arc<ScriptedProvider>, TurnLoop) {
    let provider = Arc::new(provider);
    let turns = TurnLoop::new(provider.clone(), model()).with_tools(Arc::new(tools));
    (provider, turns)
}

#[tokio::test]
async fn a_tool_round_trip_feeds_the_result_back() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    let (provider, turns) = looped(
        ScriptedProvider::new([
            calls(&[("c1", "echo", serde_json::json!({"v": "hi"}))]),
            text("The tool said hi."),
        ]),
        tools,
    );
    let sink = Recorder::default();
    let out = turns
        .run(request("say hi"), CancellationToken::new(), &sink)
        .await;

    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.text, "The tool said hi.");
    assert_eq!(out.rounds, 2);
    assert_eq!(out.error, None);
    assert_eq!(out.messages.len(), 3);
    assert_history_valid(&out.messages);
    assert_eq!(result_text(tool_results(&out.messages)[0]), "echo hi");
    // Usage and cost summed over both rounds.
    assert_eq!(out.usage.input, 20);
    assert_eq!(out.usage.output, 10);
    assert!((out.usage.cost.total - 0.002).abs() < 1e-12);

    // The second call saw the system prompt, the tools and the tool result.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].system_prompt.as_deref(), Some("sys"));
    assert_eq!(requests[1].tools[0].name, "echo");
    assert_eq!(requests[1].messages.len(), 3);
    assert!(matches!(requests[1].messages[2], Message::ToolResult(_)));

    let types = sink.types();
    assert_eq!(types.first().map(String::as_str), Some("turn_started"));
    assert_eq!(types.last().map(String::as_str), Some("turn_completed"));
    assert!(types.iter().any(|t| t == "output_delta"));
    let started = types.iter().position(|t| t == "tool_call_started").unwrap();
    let completed = types
        .iter()
        .position(|t| t == "tool_call_completed")
        .unwrap();
    assert!(started < completed);
    assert_eq!(types.iter().filter(|t| *t == "output_completed").count(), 2);
    // Deltas of the final round concatenate to the answer.
    let streamed: String = sink
        .events()
        .iter()
        .filter_map(|e| match e {
            TurnEvent::OutputDelta {
                round: 2, delta, ..
            } => Some(delta.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "The tool said hi.");
}

#[tokio::test]
async fn the_round_cap_defaults_to_eight_and_ends_with_max_rounds() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    let script: Vec<_> = (0..12)
        .map(|i| call(&format!("c{i}"), "echo", serde_json::json!({})))
        .collect();
    let (provider, turns) = looped(ScriptedProvider::new(script), tools);
    let out = turns
        .run(request("loop"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::MaxRounds);
    assert_eq!(out.rounds, 8);
    assert_eq!(provider.requests().len(), 8);
    // The last round's calls still got their results.
    assert_eq!(tool_results(&out.messages).len(), 8);
    assert_history_valid(&out.messages);
    assert_eq!(
        serde_json::to_value(FinishReason::MaxRounds).unwrap(),
        "max-rounds"
    );
}

#[tokio::test]
async fn a_lower_round_cap_is_honoured() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    let (provider, turns) = looped(
        ScriptedProvider::new([
            call("a", "echo", serde_json::json!({})),
            call("b", "echo", serde_json::json!({})),
            text("never"),
        ]),
        tools,
    );
    let turns = turns.with_limits(Limits::default().with_max_rounds(2));
    let sink = Recorder::default();
    let out = turns
        .run(request("loop"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::MaxRounds);
    assert_eq!(out.rounds, 2);
    assert_eq!(provider.remaining(), 1);
    let last = serde_json::to_value(sink.events().last().unwrap()).unwrap();
    assert_eq!(last["type"], "turn_completed");
    assert_eq!(last["finish_reason"], "max-rounds");
    assert_eq!(last["rounds"], 2);
}

#[tokio::test]
async fn the_timeout_cancels_a_running_tool_and_ends_with_timeout() {
    let mut tools = ToolRegistry::new();
    tools.register(blocker("wait", ToolKind::Read)).unwrap();
    let (_, turns) = looped(
        ScriptedProvider::new([call("w", "wait", serde_json::json!({})), text("never")]),
        tools,
    );
    let turns = turns.with_limits(Limits::default().with_timeout(Some(Duration::from_millis(50))));
    let sink = Recorder::default();
    let out = turns
        .run(request("wait"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Timeout);
    assert_history_valid(&out.messages);
    let results = tool_results(&out.messages);
    assert_eq!(results.len(), 1);
    assert!(results[0].is_error);
    assert!(matches!(
        sink.events().last(),
        Some(TurnEvent::TurnFailed {
            finish_reason: FinishReason::Timeout,
            ..
        })
    ));
}

#[tokio::test]
async fn a_tool_cancelling_its_own_token_leaves_the_turn_and_later_calls_alone() {
    let mut tools = ToolRegistry::new();
    tools
        .register(tool("quitter", ToolKind::Read, |ctx, _| async move {
            ctx.cancel.cancel();
            Ok(ToolResult::text("gave up on my own"))
        }))
        .unwrap();
    tools.register(echo()).unwrap();
    let (_, turns) = looped(
        ScriptedProvider::new([
            calls(&[("q1", "quitter", serde_json::json!({}))]),
            calls(&[("e1", "echo", serde_json::json!({"v": "still here"}))]),
            calls(&[("q2", "quitter", serde_json::json!({}))]),
            calls(&[("e2", "echo", serde_json::json!({"v": "again"}))]),
            text("done"),
        ]),
        tools,
    );
    let cancel = CancellationToken::new();
    let out = turns
        .run(request("go"), cancel.clone(), &Recorder::default())
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop, "{:?}", out.error);
    assert!(!cancel.is_cancelled());
    let results = tool_results(&out.messages);
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| !r.is_error));
    assert_eq!(result_text(results[1]), "echo still here");
    assert_eq!(result_text(results[3]), "echo again");
}

#[tokio::test]
async fn cancellation_mid_stream_ends_aborted_with_the_partial_message() {
    let long = "word ".repeat(200);
    let (_, turns) = looped(
        ScriptedProvider::new([text(&long)])
            .with_pacing(Duration::from_millis(1))
            .with_chunk_chars(2),
        ToolRegistry::new(),
    );
    let cancel = CancellationToken::new();
    let seen = AtomicUsize::new(0);
    let sink = FnSink(|e: TurnEvent| {
        if matches!(e, TurnEvent::OutputDelta { .. }) && seen.fetch_add(1, Ordering::SeqCst) == 3 {
            cancel.cancel();
        }
    });
    let out = turns.run(request("talk"), cancel.clone(), &sink).await;
    assert_eq!(out.finish_reason, FinishReason::Aborted);
    assert!(out.error.is_some());
    assert_eq!(out.messages.len(), 1);
    let Message::Assistant(a) = &out.messages[0] else {
        panic!()
    };
    assert_eq!(a.stop_reason, StopReason::Aborted);
    assert!(long.starts_with(&a.text()) && a.text().len() < long.len());
}

#[tokio::test]
async fn cancellation_mid_tool_answers_every_call() {
    let mut tools = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    tools
        .register(blocker("slow_read", ToolKind::Read))
        .unwrap();
    tools.register(echo()).unwrap();
    let ran_write = Arc::new(AtomicUsize::new(0));
    let counter = ran_write.clone();
    tools
        .register(tool("write", ToolKind::Write, move |_, _| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(ToolResult::text("written"))
            }
        }))
        .unwrap();
    let (_, turns) = looped(
        ScriptedProvider::new([
            calls(&[
                ("r1", "slow_read", serde_json::json!({})),
                ("r2", "echo", serde_json::json!({"v": "x"})),
                ("w1", "write", serde_json::json!({})),
            ]),
            text("never"),
        ]),
        tools,
    );
    let cancel = CancellationToken::new();
    let sink = FnSink(|e: TurnEvent| {
        if matches!(&e, TurnEvent::ToolCallStarted { call_id, .. } if &**call_id == "r1") {
            cancel.cancel();
        }
    });
    let out = turns.run(request("go"), cancel.clone(), &sink).await;
    assert_eq!(out.finish_reason, FinishReason::Aborted);
    assert_history_valid(&out.messages);
    let results = tool_results(&out.messages);
    let ids: Vec<_> = results.iter().map(|r| r.tool_call_id.to_string()).collect();
    assert_eq!(ids, ["r1", "r2", "w1"]);
    assert!(results[0].is_error);
    // The write after the cancellation never ran.
    assert_eq!(ran_write.load(Ordering::SeqCst), 0);
    assert!(results[2].is_error);
}

/// An approver that logs and answers from a script.
struct Scripted {
    log: Arc<Mutex<Vec<String>>>,
    deny: bool,
}

#[async_trait]
impl Approver for Scripted {
    async fn decide(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.log
            .lock()
            .unwrap()
            .push(format!("decide {}", request.call.name));
        tokio::task::yield_now().await;
        if self.deny {
            ApprovalDecision::Deny {
                reason: Some("not today".into()),
            }
        } else {
            ApprovalDecision::Approve
        }
    }
}

fn gated_setup(deny: bool) -> (TurnLoop, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tools = ToolRegistry::new(); // default policy gates write and exec
    let tool_log = log.clone();
    tools
        .register(tool("rm", ToolKind::Write, move |_, _| {
            let log = tool_log.clone();
            async move {
                log.lock().unwrap().push("run rm".into());
                Ok(ToolResult::text("removed"))
            }
        }))
        .unwrap();
    let (_, turns) = looped(
        ScriptedProvider::new([call("c1", "rm", serde_json::json!({})), text("done")]),
        tools,
    );
    let turns = turns.with_approver(Arc::new(Scripted {
        log: log.clone(),
        deny,
    }));
    (turns, log)
}

#[tokio::test]
async fn an_approved_call_runs_only_after_its_approval() {
    let (turns, log) = gated_setup(false);
    let sink = Recorder::default();
    let out = turns
        .run(request("rm"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(*log.lock().unwrap(), ["decide rm", "run rm"]);
    let types = sink.types();
    let requested = types
        .iter()
        .position(|t| t == "approval_requested")
        .unwrap();
    let granted = types.iter().position(|t| t == "approval_granted").unwrap();
    let started = types.iter().position(|t| t == "tool_call_started").unwrap();
    assert!(requested < granted && granted < started);
    assert!(!tool_results(&out.messages)[0].is_error);
}

#[tokio::test]
async fn a_denied_call_never_runs_and_the_model_reads_why() {
    let (turns, log) = gated_setup(true);
    let sink = Recorder::default();
    let out = turns
        .run(request("rm"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.text, "done");
    assert_eq!(*log.lock().unwrap(), ["decide rm"]);
    let result = tool_results(&out.messages)[0];
    assert!(result.is_error);
    assert!(result_text(result).contains("not today"));
    let types = sink.types();
    assert!(types.iter().any(|t| t == "approval_denied"));
    assert!(!types.iter().any(|t| t == "tool_call_started"));
}

#[tokio::test]
async fn without_an_approver_gated_calls_are_denied() {
    let mut tools = ToolRegistry::new();
    tools.register(blocker("sh", ToolKind::Exec)).unwrap();
    let (_, turns) = looped(
        ScriptedProvider::new([call("c", "sh", serde_json::json!({})), text("ok")]),
        tools,
    );
    let out = turns
        .run(request("run"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert!(tool_results(&out.messages)[0].is_error);
}

#[tokio::test]
async fn cancelling_while_waiting_for_approval_answers_the_call() {
    struct Never;
    #[async_trait]
    impl Approver for Never {
        async fn decide(&self, _: &ApprovalRequest) -> ApprovalDecision {
            futures::future::pending().await
        }
    }
    let mut tools = ToolRegistry::new();
    tools.register(blocker("rm", ToolKind::Write)).unwrap();
    let (_, turns) = looped(
        ScriptedProvider::new([call("c", "rm", serde_json::json!({}))]),
        tools,
    );
    let turns = turns.with_approver(Arc::new(Never));
    let cancel = CancellationToken::new();
    let sink = FnSink(|e: TurnEvent| {
        if matches!(e, TurnEvent::ApprovalRequested { .. }) {
            cancel.cancel();
        }
    });
    let out = turns.run(request("rm"), cancel.clone(), &sink).await;
    assert_eq!(out.finish_reason, FinishReason::Aborted);
    assert_history_valid(&out.messages);
    assert_eq!(tool_results(&out.messages).len(), 1);
}

#[tokio::test]
async fn a_provider_error_mid_turn_keeps_history_valid() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    let mut broken = calls(&[("c2", "echo", serde_json::json!({"v": "half"}))]);
    broken.error_message = Some("upstream 500".into());
    let (_, turns) = looped(
        ScriptedProvider::new([
            ScriptStep::Reply(call("c1", "echo", serde_json::json!({}))),
            ScriptStep::Fail {
                kind: ErrorKind::Server,
                message: broken,
            },
        ]),
        tools,
    );
    let sink = Recorder::default();
    let out = turns
        .run(request("go"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Error);
    assert_eq!(out.error.as_deref(), Some("upstream 500"));
    assert_eq!(out.rounds, 2);
    assert_history_valid(&out.messages);
    // The failed message's call was never run but has a result.
    let results = tool_results(&out.messages);
    assert_eq!(results.len(), 2);
    assert!(results[1].is_error);
    let last = serde_json::to_value(sink.events().last().unwrap()).unwrap();
    assert_eq!(last["type"], "turn_failed");
    assert_eq!(last["finish_reason"], "error");
}

#[tokio::test]
async fn a_fatal_tool_error_ends_the_turn_and_answers_the_rest() {
    let mut tools = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    tools
        .register(tool("broken", ToolKind::Write, |_, _| async {
            Err(ToolError::Fatal {
                tool: "broken".into(),
                message: "disk gone".into(),
            })
        }))
        .unwrap();
    tools.register(echo()).unwrap();
    let (_, turns) = looped(
        ScriptedProvider::new([
            calls(&[
                ("a", "broken", serde_json::json!({})),
                ("b", "echo", serde_json::json!({})),
            ]),
            text("never"),
        ]),
        tools,
    );
    let out = turns
        .run(request("go"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Error);
    assert!(out.error.unwrap().contains("disk gone"));
    assert_history_valid(&out.messages);
    assert!(tool_results(&out.messages).iter().all(|r| r.is_error));
}

#[tokio::test]
async fn read_tools_run_side_by_side_and_results_keep_call_order() {
    // Two reads that each wait for the other: they only finish together.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut tools = ToolRegistry::new();
    for name in ["left", "right"] {
        let barrier = barrier.clone();
        let label = name.to_string();
        tools
            .register(tool(name, ToolKind::Read, move |_, _| {
                let barrier = barrier.clone();
                let label = label.clone();
                async move {
                    barrier.wait().await;
                    Ok(ToolResult::text(label))
                }
            }))
            .unwrap();
    }
    let (_, turns) = looped(
        ScriptedProvider::new([
            calls(&[
                ("2", "right", serde_json::json!({})),
                ("1", "left", serde_json::json!({})),
            ]),
            text("ok"),
        ]),
        tools,
    );
    let turns = turns.with_limits(Limits::default().with_timeout(Some(Duration::from_secs(10))));
    let out = turns
        .run(request("go"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    let results = tool_results(&out.messages);
    let order: Vec<_> = results.iter().map(|r| result_text(r)).collect();
    assert_eq!(order, ["right", "left"]);
}

#[tokio::test]
async fn write_tools_run_one_at_a_time_in_call_order() {
    let active = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tools = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    for name in ["w1", "w2", "w3"] {
        let (active, peak, log) = (active.clone(), peak.clone(), log.clone());
        let label = name.to_string();
        tools
            .register(tool(name, ToolKind::Write, move |_, _| {
                let (active, peak, log, label) =
                    (active.clone(), peak.clone(), log.clone(), label.clone());
                async move {
                    let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    for _ in 0..5 {
                        tokio::task::yield_now().await;
                    }
                    log.lock().unwrap().push(label.clone());
                    active.fetch_sub(1, Ordering::SeqCst);
                    Ok(ToolResult::text(label))
                }
            }))
            .unwrap();
    }
    let (_, turns) = looped(
        ScriptedProvider::new([
            calls(&[
                ("a", "w2", serde_json::json!({})),
                ("b", "w1", serde_json::json!({})),
                ("c", "w3", serde_json::json!({})),
            ]),
            text("ok"),
        ]),
        tools,
    );
    let out = turns
        .run(request("go"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(peak.load(Ordering::SeqCst), 1);
    assert_eq!(*log.lock().unwrap(), ["w2", "w1", "w3"]);
    let order: Vec<_> = tool_results(&out.messages)
        .iter()
        .map(|r| result_text(r))
        .collect();
    assert_eq!(order, ["w2", "w1", "w3"]);
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_result_and_the_turn_goes_on() {
    let (_, turns) = looped(
        ScriptedProvider::new([call("x", "nope", serde_json::json!({})), text("sorry")]),
        ToolRegistry::new(),
    );
    let out = turns
        .with_approver(Arc::new(ApproveAll))
        .run(request("go"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert!(tool_results(&out.messages)[0].is_error);
}

/// Hooks that hand out scripted inputs: one list per call, in order.
#[derive(Default)]
struct ScriptedHooks {
    before: Mutex<Vec<Vec<roundtable_chat_runner::TurnInput>>>,
    after: Mutex<Vec<Vec<roundtable_chat_runner::TurnInput>>>,
    rounds_asked: Mutex<Vec<(&'static str, u32)>>,
}

fn input(author: &str, text: &str) -> roundtable_chat_runner::TurnInput {
    roundtable_chat_runner::TurnInput {
        author: author.into(),
        id: Some(format!("msg_{text}").into()),
        chat: roundtable_thread_stream::Chat::new(text),
        message: UserMessage::text(format!("[{author}]: {text}"), 2),
    }
}

#[async_trait]
impl roundtable_chat_runner::TurnHooks for ScriptedHooks {
    async fn before_model_call(
        &self,
        _turn: &Arc<str>,
        round: u32,
    ) -> Vec<roundtable_chat_runner::TurnInput> {
        self.rounds_asked.lock().unwrap().push(("before", round));
        let mut before = self.before.lock().unwrap();
        if before.is_empty() {
            Vec::new()
        } else {
            before.remove(0)
        }
    }

    async fn after_answer(
        &self,
        _turn: &Arc<str>,
        round: u32,
    ) -> Vec<roundtable_chat_runner::TurnInput> {
        self.rounds_asked.lock().unwrap().push(("after", round));
        let mut after = self.after.lock().unwrap();
        if after.is_empty() {
            Vec::new()
        } else {
            after.remove(0)
        }
    }
}

#[tokio::test]
async fn a_hook_adds_a_message_between_a_tool_round_and_the_next_model_call() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    let (provider, turns) = looped(
        ScriptedProvider::new([
            calls(&[("c1", "echo", serde_json::json!({"v": "hi"}))]),
            text("Done, and noted."),
        ]),
        tools,
    );
    let hooks = Arc::new(ScriptedHooks::default());
    hooks
        .before
        .lock()
        .unwrap()
        .push(vec![input("alice", "also check the docs")]);
    let sink = Recorder::default();
    let out = turns
        .run(
            request("go").with_hooks(hooks.clone()),
            CancellationToken::new(),
            &sink,
        )
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    // The second model call saw the tool result, then the added message.
    let second = &provider.requests()[1];
    assert_eq!(second.messages.len(), 4);
    assert!(matches!(second.messages[2], Message::ToolResult(_)));
    let Message::User(added) = &second.messages[3] else {
        panic!("the added message is a user message")
    };
    assert_eq!(added.content.to_text(), "[alice]: also check the docs");
    assert_history_valid(&out.messages);
    // The event carries what is stored and what the model read.
    let added: Vec<_> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            TurnEvent::InputAdded {
                round,
                author,
                chat,
                ..
            } => Some((round, author.to_string(), chat.text.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(
        added,
        vec![(2, "alice".to_string(), "also check the docs".to_string())]
    );
    // Asked before round 2 and after the final answer of round 2.
    assert_eq!(
        *hooks.rounds_asked.lock().unwrap(),
        vec![("before", 2), ("after", 2)]
    );
}

#[tokio::test]
async fn a_hook_after_the_answer_makes_the_turn_go_on_within_the_round_cap() {
    let (provider, turns) = looped(
        ScriptedProvider::new([text("first try"), text("fixed"), text("never asked")]),
        ToolRegistry::new(),
    );
    let turns = turns.with_limits(Limits {
        max_rounds: 2,
        ..Limits::default()
    });
    let hooks = Arc::new(ScriptedHooks::default());
    {
        let mut after = hooks.after.lock().unwrap();
        after.push(vec![input("verify", "make test failed")]);
        after.push(vec![input("verify", "make test failed again")]);
    }
    let out = turns
        .run(
            request("fix it").with_hooks(hooks.clone()),
            CancellationToken::new(),
            &NullSink,
        )
        .await;
    // Round 1 answered, the hook sent it back; round 2 is the cap, so the
    // hook is not asked after it and the turn ends with the answer.
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.text, "fixed");
    assert_eq!(out.rounds, 2);
    assert_eq!(provider.requests().len(), 2);
    assert_eq!(
        *hooks.rounds_asked.lock().unwrap(),
        vec![("after", 1), ("before", 2)]
    );
}

/// Hooks that never answer.
struct StuckHooks;

#[async_trait]
impl roundtable_chat_runner::TurnHooks for StuckHooks {
    async fn after_answer(
        &self,
        _turn: &Arc<str>,
        _round: u32,
    ) -> Vec<roundtable_chat_runner::TurnInput> {
        futures::future::pending().await
    }
}

#[tokio::test]
async fn cancelling_while_a_hook_runs_ends_the_turn_aborted() {
    let (_provider, turns) = looped(ScriptedProvider::new([text("answer")]), ToolRegistry::new());
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        stop.cancel();
    });
    let out = turns
        .run(
            request("hi").with_hooks(Arc::new(StuckHooks)),
            cancel,
            &NullSink,
        )
        .await;
    assert_eq!(out.finish_reason, FinishReason::Aborted);
    assert_eq!(out.text, "answer");
}

#[tokio::test]
async fn retries_are_reported_in_their_round_before_its_output() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    let (provider, turns) = looped(
        ScriptedProvider::new([
            calls(&[("c1", "echo", serde_json::json!({"v": "a"}))]),
            text("done"),
        ]),
        tools,
    );
    provider.retry_next_call(2, Duration::from_millis(1), "503: overloaded");
    let sink = Recorder::default();
    let out = turns
        .run(request("go"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.rounds, 2);

    let events = sink.events();
    let retries: Vec<(usize, u32, u32)> = events
        .iter()
        .enumerate()
        .filter_map(|(at, e)| match e {
            TurnEvent::Retrying { round, attempt, .. } => Some((at, *round, *attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
        vec![(1, 1), (1, 2)]
    );
    let first_output = events
        .iter()
        .position(|e| matches!(e, TurnEvent::OutputDelta { .. }))
        .unwrap();
    assert!(retries.iter().all(|r| r.0 < first_output));
}

#[tokio::test]
async fn cancelling_during_a_retry_wait_ends_the_turn_aborted() {
    let (provider, turns) = looped(ScriptedProvider::new([text("never")]), ToolRegistry::new());
    provider.retry_next_call(1, Duration::from_secs(600), "429: slow down");
    let cancel = CancellationToken::new();
    let sink = FnSink(|e: TurnEvent| {
        if matches!(e, TurnEvent::Retrying { .. }) {
            cancel.cancel();
        }
    });
    let out = turns.run(request("go"), cancel.clone(), &sink).await;
    assert_eq!(out.finish_reason, FinishReason::Aborted);
    assert_eq!(out.rounds, 1);
    let Message::Assistant(a) = &out.messages[0] else {
        panic!("{:?}", out.messages)
    };
    assert_eq!(a.stop_reason, StopReason::Aborted);
}

/// A call whose stream went silent for the idle timeout, after streaming
/// `partial` (nothing when empty).
fn stalled(partial: &str) -> ScriptStep {
    let mut message = roundtable_providers::AssistantMessage::failure(
        &model(),
        StopReason::Error,
        "stream stalled: no data for 0.2 s",
        1,
    );
    if !partial.is_empty() {
        message
            .content
            .push(roundtable_providers::AssistantBlock::text(partial));
    }
    ScriptStep::Fail {
        kind: ErrorKind::Timeout,
        message,
    }
}

#[tokio::test]
async fn a_stalled_call_is_sent_again_and_the_turn_goes_on() {
    let (provider, turns) = looped(
        ScriptedProvider::new([stalled(""), stalled(""), text("back").into()]),
        ToolRegistry::new(),
    );
    let turns = turns.with_limits(Limits::default().with_stall_retries(2));
    let sink = Recorder::default();
    let out = turns
        .run(request("hi"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_eq!(out.text, "back");
    // One round, three calls: the stalled ones left nothing in the turn.
    assert_eq!(out.rounds, 1);
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(out.messages.len(), 1);
    let retries: Vec<_> = sink
        .events()
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Retrying {
                round,
                attempt,
                max_attempts,
                delay_ms,
                error,
                ..
            } => Some((*round, *attempt, *max_attempts, *delay_ms, error.clone())),
            _ => None,
        })
        .collect();
    let why = "stream stalled: no data for 0.2 s".to_string();
    assert_eq!(retries, [(1, 1, 2, 0, why.clone()), (1, 2, 2, 0, why)]);
    // The requests sent again are the round's own.
    let requests = provider.requests();
    assert_eq!(requests[0].messages, requests[2].messages);
}

#[tokio::test]
async fn a_call_that_keeps_stalling_fails_the_turn_saying_so() {
    let (provider, turns) = looped(
        ScriptedProvider::new([stalled(""), stalled(""), stalled(""), text("never").into()]),
        ToolRegistry::new(),
    );
    let turns = turns.with_limits(Limits::default().with_stall_retries(2));
    let out = turns
        .run(request("hi"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Error);
    assert_eq!(
        out.error.as_deref(),
        Some("stream stalled: no data for 0.2 s (3 attempts)")
    );
    assert_eq!(provider.remaining(), 1);
    assert_history_valid(&out.messages);
}

#[tokio::test]
async fn a_stall_after_output_streamed_is_not_sent_again() {
    let (provider, turns) = looped(
        ScriptedProvider::new([stalled("half an ans"), text("never").into()]),
        ToolRegistry::new(),
    );
    let turns = turns.with_limits(Limits::default().with_stall_retries(2));
    let sink = Recorder::default();
    let out = turns
        .run(request("hi"), CancellationToken::new(), &sink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Error);
    assert_eq!(
        out.error.as_deref(),
        Some("stream stalled: no data for 0.2 s (after part of the reply had streamed)")
    );
    assert_eq!(provider.remaining(), 1);
    assert!(!sink.types().iter().any(|t| t == "retrying"));
    // What streamed stays the turn's, in the failed message.
    assert_eq!(out.text, "half an ans");
}

#[tokio::test]
async fn without_stall_retries_a_stall_fails_the_turn_at_once() {
    let (provider, turns) = looped(
        ScriptedProvider::new([stalled(""), text("never").into()]),
        ToolRegistry::new(),
    );
    let out = turns
        .run(request("hi"), CancellationToken::new(), &NullSink)
        .await;
    assert_eq!(out.finish_reason, FinishReason::Error);
    assert_eq!(
        out.error.as_deref(),
        Some("stream stalled: no data for 0.2 s")
    );
    assert_eq!(provider.remaining(), 1);
}

#[tokio::test]
async fn a_spent_budget_ends_the_turn_after_the_rounds_tools_ran() {
    let mut tools = ToolRegistry::new();
    tools.register(echo()).unwrap();
    let script: Vec<_> = (0..10)
        .map(|i| call(&format!("c{i}"), "echo", serde_json::json!({})))
        .collect();
    // Every scripted round uses 15 tokens and costs 0.001 USD.
    for budget in [
        roundtable_chat_runner::limits::Budget {
            max_tokens: Some(40),
            ..Default::default()
        },
        roundtable_chat_runner::limits::Budget {
            max_cost_usd: Some(0.0025),
            ..Default::default()
        },
    ] {
        let (provider, turns) = looped(ScriptedProvider::new(script.clone()), tools.clone());
        let turns = turns.with_limits(Limits::default().with_budget(Some(budget)));
        let sink = Recorder::default();
        let out = turns
            .run(request("loop"), CancellationToken::new(), &sink)
            .await;
        assert_eq!(out.finish_reason, FinishReason::Budget, "{budget:?}");
        assert_eq!(out.error, None);
        assert_eq!(out.rounds, 3);
        assert_eq!(provider.requests().len(), 3);
        // The last round's call still got its result.
        assert_eq!(tool_results(&out.messages).len(), 3);
        assert_history_valid(&out.messages);
        let last = serde_json::to_value(sink.events().last().unwrap()).unwrap();
        assert_eq!(last["type"], "turn_completed");
        assert_eq!(last["finish_reason"], "budget");
    }
}
