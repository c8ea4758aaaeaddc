//! A phase's gate: an approval request for the tool
//! [`PHASE_GATE_TOOL`] on the session's thread, decided like a gated tool
//! call ([`SessionEngine::decide`], from any process). The request names
//! the workflow, the phase and the attempt, and the turn that will run the
//! phase, so its events read like the phase's; being stored, it survives a
//! restart and a resumed runner waits for the same decision.

use std::sync::Arc;

use futures::StreamExt;
use roundtable_chat_runner::lifecycle::records::ApprovalRequestedRecord;
use roundtable_thread_stream::{Expect, NewEntry, StoreError};
use serde_json::json;

use crate::caller::Caller;
use crate::engine::SessionEngine;
use crate::error::SessionError;
use crate::events::{EventId, EventType};
use crate::records::PHASE_GATE_TOOL;
use crate::runtime::SessionRuntime;

/// What was decided about a gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GateVerdict {
    /// The phase may start.
    Approved,
    /// It may not; the decider's reason, if any.
    Denied(Option<String>),
}

/// The gate's call id for one attempt at one phase.
pub(crate) fn gate_call_id(workflow: &str, phase: &str, attempt: u32) -> Arc<str> {
    format!("gate-{workflow}-{phase}-{attempt}").into()
}

/// Writes the gate's request; returns its call id and its seq.
pub(crate) async fn request(
    engine: &SessionEngine,
    runtime: &SessionRuntime,
    workflow: &str,
    phase: &str,
    attempt: u32,
    turn: &Arc<str>,
) -> Result<(Arc<str>, u64), SessionError> {
    let core = engine.core();
    let call_id = gate_call_id(workflow, phase, attempt);
    let arguments = json!({"workflow": workflow, "phase": phase, "attempt": attempt});
    let record = ApprovalRequestedRecord {
        turn: turn.clone(),
        call_id: call_id.clone(),
        tool: PHASE_GATE_TOOL.into(),
        arguments: Arc::new(arguments.as_object().cloned().unwrap_or_default()),
    };
    let written = core
        .store
        .append(
            &runtime.thread,
            Expect::Any,
            vec![NewEntry::new(core.agent.clone(), record.to_body()?)],
        )
        .await?;
    let seq = written.first().map_or(0, |e| e.seq);
    Ok((call_id, seq))
}

/// Waits for the decision about gate `call_id`, asked at seq `asked`.
pub(crate) async fn decision(
    engine: &SessionEngine,
    caller: &Caller,
    session: &str,
    call_id: &str,
    asked: u64,
) -> Result<GateVerdict, SessionError> {
    let mut events = engine
        .subscribe(caller, session, Some(EventId::of_entry(asked)))
        .await?;
    while let Some(event) = events.next().await {
        let event = event?;
        let about_gate = event.data["tool_call_id"].as_str() == Some(call_id);
        match event.kind {
            EventType::ApprovalGranted if about_gate => return Ok(GateVerdict::Approved),
            EventType::ApprovalDenied if about_gate => {
                let reason = event.data["reason"].as_str().map(str::to_owned);
                return Ok(GateVerdict::Denied(reason));
            }
            _ => {}
        }
    }
    // The stream ends only when the store closes.
    Err(SessionError::Store(StoreError::Closed))
}
