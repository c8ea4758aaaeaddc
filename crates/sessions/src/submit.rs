//! What a submit writes: the records a message needs first (the mode or
//! model it switches to, its idempotency key), then the message itself,
//! added to the conversation, queued behind a running turn, or starting a
//! turn; and what the driver does once that is stored.

use std::sync::Arc;

use roundtable_chat_runner::lifecycle::turn_started_by;
use roundtable_thread_stream::{Chat, Entry, NewEntry};

use crate::caller::Caller;
use crate::core::{EngineCore, chat_entry};
use crate::error::SessionError;
use crate::ids::{MessageId, SessionId, TurnId};
use crate::models::model_key;
use crate::records::{
    MessageKeyed, ModeChanged, ModelChanged, QueueAdded, QueueMode, SessionCreated, SessionMode,
    SessionRecord,
};
use crate::requests::{DEFAULT_USER, PlanAction, Submit, Submitted};
use crate::runtime::SessionRuntime;
use crate::state::{QueueChange, SessionState};
use crate::turn_driver;

/// A message's ids: its own (made from its idempotency key when it has
/// one, with the digest of what it asks), and the turn it would start.
pub(crate) struct MessageIds {
    pub(crate) message: MessageId,
    pub(crate) digest: Option<Arc<str>>,
    pub(crate) turn: TurnId,
}

impl MessageIds {
    /// The ids of `message` in session `session`.
    pub(crate) fn of(session: &SessionId, message: &Submit) -> Result<Self, SessionError> {
        let (message_id, digest) = match &message.idempotency_key {
            Some(key) => (
                MessageId::for_key(session.as_str(), key),
                Some(message.digest()?),
            ),
            None => (MessageId::generate(), None),
        };
        Ok(Self {
            turn: TurnId::for_message(&message_id),
            message: message_id,
            digest,
        })
    }
}

/// What a submit appends, and what it gives its caller once stored.
pub(crate) struct Placing {
    pub(crate) entries: Vec<NewEntry>,
    pub(crate) submitted: Submitted,
}

/// The entries that place `message` in the session at `state`: the
/// records it needs first, then the message, added (no `auto_run`),
/// queued (something runs or waits) or starting a turn.
pub(crate) fn place(
    core: &EngineCore,
    caller: &Caller,
    session: &str,
    state: &SessionState,
    message: &Submit,
    ids: &MessageIds,
) -> Result<Placing, SessionError> {
    let Some(created) = &state.created else {
        return Err(SessionError::UnknownSession(session.to_string()));
    };
    let (mode, executing, text) = mode_and_text(message, state)?;
    let auto_run = message.plan_action.is_some() || message.auto_run.unwrap_or(created.auto_run);
    let author = author_of(caller, message, created);
    let mut chat = Chat::new(text.as_str());
    chat.files = message.files.as_slice().into();
    let switch = ModeChanged { mode, executing };
    let mut entries = first_records(core, state, message, ids, &author, switch)?;
    let busy = state.running_turn().is_some() || !state.queue.is_empty();
    let submitted = if !auto_run {
        entries.push(chat_entry(&author, &ids.message, chat));
        Submitted {
            message_id: ids.message.clone(),
            turn_id: None,
            queued: None,
        }
    } else if busy {
        let item = queued_item(state, message, ids, author, chat);
        entries.push(NewEntry::new(core.agent.clone(), item.to_body()?));
        Submitted {
            message_id: ids.message.clone(),
            turn_id: (item.mode == QueueMode::FollowUp).then(|| ids.turn.clone()),
            queued: Some(item.mode),
        }
    } else {
        start_turn(core, state, message, ids, &author, chat, &mut entries);
        Submitted {
            message_id: ids.message.clone(),
            turn_id: Some(ids.turn.clone()),
            queued: None,
        }
    };
    Ok(Placing { entries, submitted })
}

/// Who a message is from: the author it names, else the caller, else the
/// session's owner, else [`DEFAULT_USER`].
fn author_of(caller: &Caller, message: &Submit, created: &SessionCreated) -> Arc<str> {
    message
        .author
        .clone()
        .or_else(|| caller.user_id().cloned())
        .or_else(|| created.owner.clone())
        .unwrap_or_else(|| Arc::from(DEFAULT_USER))
}

/// The records that go before the message: the mode it switches to
/// (`switch`, when it changes the mode or starts carrying the plan out),
/// the model it chooses when another, and its idempotency key.
fn first_records(
    core: &EngineCore,
    state: &SessionState,
    message: &Submit,
    ids: &MessageIds,
    author: &Arc<str>,
    switch: ModeChanged,
) -> Result<Vec<NewEntry>, SessionError> {
    let mut entries = Vec::new();
    let mode_changes = switch.mode != state.mode
        || (message.plan_action == Some(PlanAction::Execute)
            && !state.plan.as_ref().is_some_and(|p| p.executing));
    if mode_changes {
        entries.push(NewEntry::new(author.clone(), switch.to_body()?));
    }
    if let Some(model) = &message.model {
        let current = core.models.for_session(state.model.as_deref());
        if model_key(&current.model) != *model {
            let changed = ModelChanged {
                model: model.clone(),
            };
            entries.push(NewEntry::new(author.clone(), changed.to_body()?));
        }
    }
    if let Some(digest) = &ids.digest {
        let keyed = MessageKeyed {
            message: ids.message.as_arc().clone(),
            digest: digest.clone(),
        };
        entries.push(NewEntry::new(core.agent.clone(), keyed.to_body()?));
    }
    Ok(entries)
}

/// The queue record of a message that waits: as it asks (a follow-up by
/// default), except that a steer with no turn running to receive it waits
/// as a follow-up.
fn queued_item(
    state: &SessionState,
    message: &Submit,
    ids: &MessageIds,
    author: Arc<str>,
    chat: Chat,
) -> QueueAdded {
    let wanted = message.queue.unwrap_or(QueueMode::FollowUp);
    let mode = if state.running_turn().is_some() {
        wanted
    } else {
        QueueMode::FollowUp
    };
    let mut item = QueueAdded {
        id: ids.message.as_arc().clone(),
        mode,
        author,
        chat,
        queue: Default::default(),
    };
    item.queue = state.queue_snapshot(Some(QueueChange::Add(&item)));
    item
}

/// Appends the message and the `turn.started` of the turn it starts (its
/// trigger: the message's seq once `entries` are stored after `state`).
fn start_turn(
    core: &EngineCore,
    state: &SessionState,
    message: &Submit,
    ids: &MessageIds,
    author: &Arc<str>,
    chat: Chat,
    entries: &mut Vec<NewEntry>,
) {
    let chat_seq = state.upto + entries.len() as u64 + 1;
    entries.push(chat_entry(author, &ids.message, chat));
    let reason = match message.plan_action {
        Some(PlanAction::Execute) => "execute_plan",
        Some(PlanAction::Refine) => "refine_plan",
        None => "message",
    };
    entries.push(turn_started_by(
        &core.agent,
        ids.turn.as_arc(),
        chat_seq,
        reason,
    ));
}

/// Once a submit's entries are stored: folds them in (before the driver
/// starts: it reads nothing back), then starts the turn the submit
/// claimed, or resumes the queue.
pub(crate) async fn start_placed(
    core: &Arc<EngineCore>,
    runtime: &Arc<SessionRuntime>,
    stored: &[Entry],
    submitted: &Submitted,
    turn: &TurnId,
) {
    let state = runtime.absorb(stored).await;
    core.record(&runtime.id, &state).await;
    drop(state);
    if submitted.turn_id.is_some() && submitted.queued.is_none() {
        runtime.claim(turn.as_arc().clone());
        turn_driver::spawn(core.clone(), runtime.clone());
    } else if submitted.queued.is_some() {
        // A message that arrives after an abort resumes the queue the
        // aborted turn left waiting (an abort withdraws earlier requests,
        // see `cancel`).
        runtime.request_resume();
        turn_driver::spawn(core.clone(), runtime.clone());
    }
}

/// The mode a message puts the session in, whether a plan is being carried
/// out then, and the text the message is stored with: a plan action
/// decides all three.
fn mode_and_text(
    message: &Submit,
    state: &SessionState,
) -> Result<(SessionMode, bool, String), SessionError> {
    Ok(match message.plan_action {
        Some(PlanAction::Execute) if state.plan.is_none() => {
            return Err(SessionError::Conflict("there is no plan to execute".into()));
        }
        Some(PlanAction::Execute) => (
            SessionMode::Agent,
            true,
            non_empty(&message.text, "Execute the plan."),
        ),
        Some(PlanAction::Refine) => (
            SessionMode::Plan,
            false,
            format!("Revise the plan: {}", message.text.trim()),
        ),
        None => (
            message.mode.unwrap_or(state.mode),
            state.plan.as_ref().is_some_and(|p| p.executing),
            message.text.clone(),
        ),
    })
}

/// Refuses `message` when its idempotency key sent message `id` before
/// with another request (another `digest`); a message stored without a
/// digest takes any retry.
pub(crate) fn check_retry(
    state: &SessionState,
    message: &Submit,
    id: &MessageId,
    digest: Option<&str>,
) -> Result<(), SessionError> {
    match (
        state.key_digest(id.as_str()),
        digest,
        &message.idempotency_key,
    ) {
        (Some(stored), Some(digest), Some(key)) if stored != digest => {
            Err(SessionError::KeyReused { key: key.clone() })
        }
        _ => Ok(()),
    }
}

/// The ids a submit already returned for `message_id`.
pub(crate) fn already_submitted(state: &SessionState, message_id: MessageId) -> Submitted {
    let queued = state
        .queue
        .iter()
        .find(|q| *q.item.id == *message_id.as_str())
        .map(|q| q.item.mode);
    let turn = TurnId::for_message(&message_id);
    let ran = state
        .messages
        .get(message_id.as_str())
        .is_some_and(|m| m.answered);
    Submitted {
        turn_id: (ran || queued == Some(QueueMode::FollowUp)).then_some(turn),
        message_id,
        queued,
    }
}

/// `text`, or `default` when it is blank.
fn non_empty(text: &str, default: &str) -> String {
    if text.trim().is_empty() {
        default.to_string()
    } else {
        text.to_string()
    }
}
