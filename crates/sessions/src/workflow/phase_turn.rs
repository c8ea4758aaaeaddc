//! A phase's turn: its prompt submitted as a message of the session, and
//! the wait for the turn that message starts to end.
//!
//! The message is submitted with an idempotency key naming the workflow,
//! the phase and the attempt, so its ids are known before it is sent
//! (`phase_started` and the gate name the turn) and a resumed runner that
//! submits again finds the message it already sent.

use std::sync::Arc;

use futures::StreamExt;
use roundtable_thread_stream::StoreError;

use crate::caller::Caller;
use crate::engine::SessionEngine;
use crate::error::SessionError;
use crate::events::{EventId, EventType};
use crate::ids::{MessageId, TurnId};
use crate::requests::Submit;

/// The message (and so the turn) of one attempt at one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PhaseMessage {
    /// The submit's idempotency key.
    pub(crate) key: String,
    /// The message's id.
    pub(crate) message_id: MessageId,
    /// The turn that answers it.
    pub(crate) turn: TurnId,
}

impl PhaseMessage {
    /// The message of `attempt` at `phase` of `workflow` in `session`.
    pub(crate) fn new(session: &str, workflow: &str, phase: &str, attempt: u32) -> Self {
        let key = format!("workflow\n{workflow}\n{phase}\n{attempt}");
        let message_id = MessageId::for_key(session, &key);
        let turn = TurnId::for_message(&message_id);
        Self {
            key,
            message_id,
            turn,
        }
    }

    /// The turn's id, as records carry it.
    pub(crate) fn turn_id(&self) -> Arc<str> {
        self.turn.as_arc().clone()
    }
}

/// How a phase's turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnEnd {
    /// It finished (`stop`, ...).
    Completed { finish_reason: String },
    /// It failed, was cancelled, or a restart interrupted it.
    Failed { reason: String, interrupted: bool },
    /// Its message was taken out of the queue before it ran.
    Withdrawn,
}

/// Submits `prompt` as `message` (again, harmlessly, when it was sent
/// before) and waits for its turn to end, reading the session's events
/// after `after`.
pub(crate) async fn run(
    engine: &SessionEngine,
    caller: &Caller,
    session: &str,
    message: &PhaseMessage,
    prompt: String,
    after: EventId,
) -> Result<TurnEnd, SessionError> {
    let submit = Submit {
        auto_run: Some(true),
        idempotency_key: Some(message.key.clone()),
        ..Submit::text(prompt)
    };
    match engine.submit(caller, session, submit).await {
        Ok(submitted) if submitted.turn_id.as_ref() != Some(&message.turn) => {
            return Err(SessionError::Conflict(format!(
                "the phase's message {} was not given its turn {}",
                message.message_id, message.turn
            )));
        }
        // Sent before with the prompt as it rendered then (its template or
        // the context changed across a restart): that message is the
        // phase's, as it always was.
        Ok(_) | Err(SessionError::KeyReused { .. }) => {}
        Err(e) => return Err(e),
    }
    let turn = message.turn.as_str();
    let mut events = engine.subscribe(caller, session, Some(after)).await?;
    while let Some(event) = events.next().await {
        let event = event?;
        let ours = event.turn_id.as_deref() == Some(turn);
        match event.kind {
            EventType::TurnCompleted if ours => {
                let finish_reason = event.data["finish_reason"]
                    .as_str()
                    .unwrap_or("stop")
                    .to_owned();
                return Ok(TurnEnd::Completed { finish_reason });
            }
            EventType::TurnFailed if ours => {
                let reason = event.data["reason"]
                    .as_str()
                    .unwrap_or("the turn failed")
                    .to_owned();
                let interrupted = event.data["interrupted"].as_bool().unwrap_or(false);
                return Ok(TurnEnd::Failed {
                    reason,
                    interrupted,
                });
            }
            EventType::QueueUpdated
                if event.data["message_id"].as_str() == Some(message.message_id.as_str())
                    && matches!(event.data["change"].as_str(), Some("removed" | "cleared")) =>
            {
                return Ok(TurnEnd::Withdrawn);
            }
            _ => {}
        }
    }
    // The stream ends only when the store closes.
    Err(SessionError::Store(StoreError::Closed))
}
