//! Running the tool calls of one assistant message: approvals first, read
//! and network tools side by side, write and exec tools alone, results in
//! the order of the calls, and a result for every call whatever happens.

use std::sync::Arc;

use roundtable_providers::{ToolCall, ToolResultMessage, now_millis};
use roundtable_tools::{
    Artifacts, OutputLimit, ProgressSink, RegisteredTool, ToolContext, ToolError, ToolRegistry,
    ToolResult,
};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalDecision, ApprovalRequest, Approver};
use crate::event::{EventSink, TurnEvent};

/// How long a cancelled tool may take to stop before the turn stops waiting
/// for it.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// How a batch of calls ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallsEnd {
    /// Every call ran or was denied; the turn goes on.
    Done,
    /// The turn was cancelled (or timed out) while the calls were handled.
    Cancelled,
    /// A tool failed in a way that ends the turn.
    Fatal(String),
}

/// What runs the calls of one turn.
pub(crate) struct ToolRunner<'a> {
    pub(crate) turn: &'a Arc<str>,
    pub(crate) registry: &'a ToolRegistry,
    pub(crate) approver: &'a dyn Approver,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) sink: &'a dyn EventSink,
    pub(crate) artifacts: Option<&'a Arc<dyn Artifacts>>,
    /// The cancellation token of the calls that run alone: a child of the
    /// turn's, made with the first such call and kept for the next ones
    /// (a child token is allocated, linked into the turn's and unlinked
    /// again: most of the cost of a quick call). A tool that cancels its
    /// own token gets the next call a fresh one, so the turn, and the
    /// calls after it, go on as with a token of their own.
    pub(crate) lone_cancel: Option<CancellationToken>,
    /// Calls whose approval request is already stored (a resumed turn's):
    /// their request is not reported again.
    pub(crate) requested: Vec<Arc<str>>,
}

/// What the gate decided of a call.
enum Gate {
    /// The call runs: the policy does not gate it, or the approver agreed.
    Run,
    /// The call is answered without running.
    Settled(ToolResult),
}

impl<'a> ToolRunner<'a> {
    /// Runs `calls`, putting one result per call, in call order, into
    /// `results` (cleared first: a list the turn reuses every round).
    pub(crate) async fn run(
        &mut self,
        round: u32,
        calls: &[ToolCall],
        results: &mut Vec<Arc<ToolResultMessage>>,
    ) -> CallsEnd {
        results.clear();
        let mut end = CallsEnd::Done;
        // Each call's tool is looked up once: `tool` is the tool of
        // `calls[i]` (`None` for an unknown name), found when the previous
        // group was formed.
        let find = |call: &ToolCall| self.registry.find(&call.name);
        let mut i = 0;
        let mut tool = calls.first().and_then(find);
        while i < calls.len() {
            if end != CallsEnd::Done || self.cancel.is_cancelled() {
                if end == CallsEnd::Done {
                    end = CallsEnd::Cancelled;
                }
                // Once the calls stop running, none runs again: no tool
                // needs finding.
                results.push(self.settle(round, &calls[i], not_run(&end)));
                i += 1;
                continue;
            }
            // A group: one exclusive call, or a run of shareable calls.
            let next = calls.get(i + 1).map(find);
            let alone = !shareable(tool) || next.is_none_or(|next| !shareable(next));
            if alone {
                let (message, call_end) = self.run_alone(round, &calls[i], tool).await;
                results.push(message);
                end = call_end;
                i += 1;
                tool = next.flatten();
                continue;
            }
            // The group's calls with their tools; `tool` becomes the tool of
            // the call after it.
            let mut group = vec![(i, tool), (i + 1, next.flatten())];
            tool = None;
            for (k, call) in calls.iter().enumerate().skip(i + 2) {
                let found = find(call);
                if !shareable(found) {
                    tool = found;
                    break;
                }
                group.push((k, found));
            }
            end = self.run_group(round, calls, &group, results).await;
            i += group.len();
        }
        end
    }

    /// One call alone (the usual case): gated, then run, with no list of
    /// calls to join. Returns its result and how the calls go on.
    async fn run_alone(
        &mut self,
        round: u32,
        call: &ToolCall,
        tool: Option<RegisteredTool<'a>>,
    ) -> (Arc<ToolResultMessage>, CallsEnd) {
        match self.gate(call, tool).await {
            Gate::Run => {
                let cancel = self.lone_call_token();
                self.invoke(round, call, tool, cancel).await
            }
            Gate::Settled(result) => {
                let call_end = if self.cancel.is_cancelled() {
                    CallsEnd::Cancelled
                } else {
                    CallsEnd::Done
                };
                (self.settle(round, call, result), call_end)
            }
        }
    }

    /// A group of shareable calls (`group` holds each one's index in
    /// `calls` and its tool): approvals one at a time in call order, then
    /// the approved calls side by side. Adds their results, in call order,
    /// to `results`, and returns how the calls go on.
    async fn run_group(
        &self,
        round: u32,
        calls: &[ToolCall],
        group: &[(usize, Option<RegisteredTool<'a>>)],
        results: &mut Vec<Arc<ToolResultMessage>>,
    ) -> CallsEnd {
        let mut end = CallsEnd::Done;
        let mut slots: Vec<Option<Arc<ToolResultMessage>>> = vec![None; group.len()];
        // Approvals, one at a time in call order, before anything runs.
        let mut runnable = Vec::new();
        for (slot, &(k, found)) in group.iter().enumerate() {
            let call = &calls[k];
            if end != CallsEnd::Done {
                slots[slot] = Some(self.settle(round, call, not_run(&end)));
                continue;
            }
            match self.gate(call, found).await {
                Gate::Run => runnable.push((slot, k, found)),
                Gate::Settled(result) => {
                    if self.cancel.is_cancelled() {
                        end = CallsEnd::Cancelled;
                    }
                    slots[slot] = Some(self.settle(round, call, result));
                }
            }
        }
        if end == CallsEnd::Done {
            let runs = runnable.iter().map(|&(_, k, found)| {
                // Calls side by side each get a token of their own.
                let cancel = self.cancel.child_token();
                self.invoke(round, &calls[k], found, cancel)
            });
            let outcomes = futures::future::join_all(runs).await;
            for ((slot, ..), (message, call_end)) in runnable.into_iter().zip(outcomes) {
                slots[slot] = Some(message);
                if end == CallsEnd::Done {
                    end = call_end;
                }
            }
        } else {
            for (slot, k, ..) in runnable {
                slots[slot] = Some(self.settle(round, &calls[k], not_run(&end)));
            }
        }
        let first = group[0].0;
        results.extend(
            slots
                .into_iter()
                .zip(&calls[first..first + group.len()])
                .map(|(r, call)| r.unwrap_or_else(|| cancelled_message(call))),
        );
        end
    }

    /// Results for calls that will never run (their message failed).
    pub(crate) fn unrun(&self, round: u32, calls: &[ToolCall]) -> Vec<Arc<ToolResultMessage>> {
        calls
            .iter()
            .map(|call| self.settle(round, call, ToolResult::cancelled()))
            .collect()
    }

    /// Asks the approver when the policy gates the call (`tool` is the
    /// call's tool, `None` when the registry has none of that name).
    async fn gate(&self, call: &ToolCall, tool: Option<RegisteredTool<'a>>) -> Gate {
        let Some(tool) = tool.filter(RegisteredTool::needs_approval) else {
            return Gate::Run;
        };
        if !self.requested.contains(&call.id) {
            self.sink.emit(TurnEvent::ApprovalRequested {
                turn: self.turn.clone(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        let request = ApprovalRequest {
            turn: self.turn.clone(),
            call: call.clone(),
            definition: tool.definition().clone(),
        };
        let decision = tokio::select! {
            decision = self.approver.decide(&request) => decision,
            () = self.cancel.cancelled() => return Gate::Settled(ToolResult::cancelled()),
        };
        match decision {
            ApprovalDecision::Approve => {
                self.sink.emit(TurnEvent::ApprovalGranted {
                    turn: self.turn.clone(),
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    recorded: self.approver.records_decisions(),
                });
                Gate::Run
            }
            ApprovalDecision::Deny { reason } => {
                let result = ToolResult::denied(reason.as_deref());
                self.sink.emit(TurnEvent::ApprovalDenied {
                    turn: self.turn.clone(),
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    reason,
                    recorded: self.approver.records_decisions(),
                });
                Gate::Settled(result)
            }
        }
    }

    /// The token of a call that runs alone: the kept child of the turn's
    /// token, made anew when a tool cancelled it while the turn was not.
    fn lone_call_token(&mut self) -> CancellationToken {
        let turn = self.cancel;
        let token = match self.lone_cancel.take() {
            Some(token) if !token.is_cancelled() || turn.is_cancelled() => token,
            _ => turn.child_token(),
        };
        self.lone_cancel.insert(token).clone()
    }

    /// Runs one call the gate let through, with `cancel` (a child of the
    /// turn's token) as its token; a cancelled turn stops waiting for it.
    async fn invoke(
        &self,
        round: u32,
        call: &ToolCall,
        tool: Option<RegisteredTool<'a>>,
        cancel: CancellationToken,
    ) -> (Arc<ToolResultMessage>, CallsEnd) {
        self.sink.emit(TurnEvent::ToolCallStarted {
            turn: self.turn.clone(),
            round,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        // Built whole rather than with `ToolContext::new`, whose fresh token
        // would be replaced at once by the turn's child token.
        let ctx = ToolContext {
            call_id: call.id.clone(),
            cancel,
            progress: ProgressSink::none(),
            workspace_root: None,
            artifacts: self.artifacts.cloned(),
            output_limit: OutputLimit::default(),
        };
        let run = async {
            match tool {
                // The gate asked the policy (and the approver, when the
                // policy gates the call): asking the policy again would
                // only repeat its answer.
                Some(tool) => tool.invoke_approved(call, ctx).await,
                // The registry answers an unknown name with an error result.
                None => self.registry.invoke(call, ctx).await,
            }
        };
        tokio::pin!(run);
        let cancelled = || ToolError::Cancelled {
            tool: call.name.clone(),
            call_id: call.id.clone(),
        };
        // On cancellation the tool sees its token fire and gets a moment to
        // clean up (a command's process group is killed and reaped), so
        // that nothing it started outlives the turn's end.
        // The run is polled first: a tool that is done at once ends the
        // call without registering a waiter on the turn's token.
        let outcome = tokio::select! {
            biased;
            outcome = &mut run => outcome,
            () = self.cancel.cancelled() => {
                tokio::time::timeout(CANCEL_GRACE, &mut run)
                    .await
                    .unwrap_or_else(|_| Err(cancelled()))
            }
        };
        let (result, end) = match outcome {
            Ok(result) if self.cancel.is_cancelled() => (result, CallsEnd::Cancelled),
            Ok(result) => (result, CallsEnd::Done),
            Err(error @ ToolError::Cancelled { .. }) => (error.to_result(), CallsEnd::Cancelled),
            Err(error) => (error.to_result(), CallsEnd::Fatal(error.to_string())),
        };
        let counted = match &end {
            CallsEnd::Done if !result.ok => "error",
            CallsEnd::Done => "ok",
            CallsEnd::Cancelled => "cancelled",
            CallsEnd::Fatal(_) => "failed",
        };
        crate::telemetry::tool_call(&call.name, counted);
        (self.settle(round, call, result), end)
    }

    /// Turns a result into its message and reports it.
    fn settle(&self, round: u32, call: &ToolCall, result: ToolResult) -> Arc<ToolResultMessage> {
        let message = Arc::new(result.into_message(call, now_millis()));
        self.sink.emit(TurnEvent::ToolCallCompleted {
            turn: self.turn.clone(),
            round,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            result: message.clone(),
        });
        message
    }
}

/// Can the call of `tool` run beside others? An unknown tool only produces
/// an error result: harmless to share.
fn shareable(tool: Option<RegisteredTool<'_>>) -> bool {
    tool.is_none_or(|t| t.definition().kind.is_shareable())
}

/// The result of a call skipped because the turn is ending.
fn not_run(end: &CallsEnd) -> ToolResult {
    match end {
        CallsEnd::Fatal(error) => {
            ToolResult::error(format!("Tool call was not run: the turn ended ({error})"))
        }
        _ => ToolResult::cancelled(),
    }
}

fn cancelled_message(call: &ToolCall) -> Arc<ToolResultMessage> {
    Arc::new(ToolResult::cancelled().into_message(call, now_millis()))
}
