//! A session's state, folded from its thread: status, turns, pending
//! approvals, messages. Pure: the same entries always give the same state,
//! so any process over the same store agrees on it, and a restart recovers
//! it by reading the thread.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use roundtable_chat_runner::lifecycle::records::{
    ApprovalDecidedRecord, ApprovalRequestedRecord, ApprovalVerdict,
};
use roundtable_providers::JsonObject;
use roundtable_thread_stream::{Entry, EntryBody, FinishReason, TurnReason};
use serde::{Deserialize, Serialize};

use crate::ids::MessageId;
use crate::records::{
    MessageKeyed, ModeChanged, PlanStep, PlanUpdated, QuestionAnswered, QuestionAsked, QueueAdded,
    QueueMode, QueueRemoved, QueueSnapshot, QueuedText, SessionCreated, SessionMode, SessionRecord,
    StepStatus,
};

/// Where a session stands, as the spec names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Nothing has gone wrong: a turn runs, or none has run yet, or the
    /// session waits for the next message.
    Active,
    /// A running turn waits for a decision about a gated call.
    WaitingApproval,
    /// The last turn failed (an error, a timeout, an interruption).
    Failed,
    /// The last turn finished.
    Completed,
    /// The last turn was cancelled.
    Canceled,
    /// The session's thread cannot be read (the store finds it damaged):
    /// it is listed so, and every call naming it fails with
    /// [`SessionError::Unreadable`](crate::SessionError::Unreadable).
    Unreadable,
}

/// How one turn stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnProgress {
    /// Started, not closed.
    Running,
    /// Closed by `turn.ended`.
    Ended(TurnReason),
    /// Closed by `turn.failed`.
    Failed(TurnReason),
}

/// One turn of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnInfo {
    /// The turn's id.
    pub id: Arc<str>,
    /// The seq of its `turn.started`.
    pub started_seq: u64,
    /// When it started (Unix ms).
    pub started_at: i64,
    /// The seq of the message it answers, if a message started it.
    pub trigger: Option<u64>,
    /// How it stands.
    pub progress: TurnProgress,
}

impl TurnInfo {
    /// True when the turn failed or was cancelled or interrupted: a turn
    /// that may be retried.
    pub fn is_retryable(&self) -> bool {
        matches!(self.progress, TurnProgress::Failed(_))
    }
}

/// A gated call waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingApproval {
    /// The turn asking.
    pub turn_id: Arc<str>,
    /// The call's id.
    pub tool_call_id: Arc<str>,
    /// The tool's name.
    pub tool: Arc<str>,
    /// The call's arguments (for a patch, the diff to review).
    pub input: JsonObject,
    /// When it was asked (Unix ms).
    pub requested_at: i64,
}

/// A message of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    /// Its seq in the thread.
    pub seq: u64,
    /// Who wrote it.
    pub author: Arc<str>,
    /// True once a turn started to answer it.
    pub answered: bool,
}

/// A change to the queue, for [`SessionState::queue_snapshot`].
#[derive(Debug, Clone, Copy)]
pub enum QueueChange<'a> {
    /// A message added (or moved to another queue).
    Add(&'a QueueAdded),
    /// Messages taken out.
    Remove(&'a [Arc<str>]),
}

/// A message waiting in the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedMessage {
    /// The seq of its `queue_added` entry.
    pub seq: u64,
    /// When it was queued (Unix ms).
    pub at: i64,
    /// The queued message.
    pub item: QueueAdded,
}

/// The session's plan and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanState {
    /// True once agent mode carries the plan out.
    pub executing: bool,
    /// Steps done.
    pub completed: usize,
    /// Steps in all.
    pub total: usize,
    /// The steps, in order.
    pub steps: Vec<PlanStep>,
}

impl PlanState {
    fn of(steps: Vec<PlanStep>, executing: bool) -> Self {
        Self {
            executing,
            completed: steps
                .iter()
                .filter(|s| s.status == StepStatus::Completed)
                .count(),
            total: steps.len(),
            steps,
        }
    }
}

/// How many characters of a message a session's title keeps.
pub const TITLE_CHARS: usize = 80;

/// The title a message's `text` gives a session: its first line that is
/// not blank, trimmed, and cut to [`TITLE_CHARS`] characters (the last of
/// them an ellipsis when it was longer); none when the text is blank.
fn title_of(text: &str) -> Option<Arc<str>> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    match line.char_indices().nth(TITLE_CHARS - 1) {
        Some((cut, _)) if line[cut..].chars().nth(1).is_some() => {
            Some(Arc::from(format!("{}…", line[..cut].trim_end())))
        }
        _ => Some(Arc::from(line)),
    }
}

/// Everything the session's thread says about where it stands.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    /// The session's settings (its first entry); none once the session is
    /// being deleted.
    pub created: Option<SessionCreated>,
    /// True once the session's deletion began ([`SessionDeleted`]).
    ///
    /// [`SessionDeleted`]: crate::records::SessionDeleted
    pub deleted: bool,
    /// What the session is about, for lists: the first line of its first
    /// message with text, cut to [`TITLE_CHARS`] characters.
    pub title: Option<Arc<str>>,
    /// When the session was created (Unix ms).
    pub created_at: i64,
    /// When its last entry was written (Unix ms).
    pub updated_at: i64,
    /// The last seq folded in.
    pub upto: u64,
    /// The messages sent with an idempotency key, by id (the `chat`
    /// entries' ids): the only ids a submit asks about. Other messages are
    /// not kept, so a long session's state does not grow with them; what
    /// is needed of one is read from the thread.
    pub messages: HashMap<Arc<str>, MessageInfo>,
    /// The turns the engine still decides with, in the order they started:
    /// the open ones, the failed ones (a retry runs them again, and they
    /// may be superseded), and the last one (the session's status). A turn
    /// that ended well and is not the last is dropped, so the state does
    /// not grow with the session's turns; a call about one reads the
    /// thread.
    pub turns: Vec<TurnInfo>,
    /// Gated calls waiting for a decision, by call id.
    pub pending_approvals: BTreeMap<Arc<str>, PendingApproval>,
    /// Calls already decided (or expired).
    pub decided_calls: HashSet<Arc<str>>,
    /// Tools approved for the rest of the session.
    pub approved_tools: HashSet<Arc<str>>,
    /// Turns a caller asked to cancel.
    pub cancel_requested: HashSet<Arc<str>>,
    /// Messages waiting to be delivered, in arrival order.
    pub queue: Vec<QueuedMessage>,
    /// Questions waiting for an answer, by call id.
    pub pending_questions: BTreeMap<Arc<str>, QuestionAsked>,
    /// Questions already answered (or expired).
    pub answered_questions: HashSet<Arc<str>>,
    /// How the agent works now.
    pub mode: SessionMode,
    /// The model the session chose for its turns (`provider/id`), when it
    /// chose one: none runs on the engine's own.
    pub model: Option<String>,
    /// The plan, when the model wrote one.
    pub plan: Option<PlanState>,
    /// True when the last session-level entry says nothing runs and nothing
    /// is queued (`signal.settled`).
    pub settled: bool,
    /// The seq of each run's provenance record (`signal.provenance`),
    /// oldest first (a run's id and record are read from the thread when
    /// asked for).
    pub provenance: Vec<u64>,
    /// The host tools the session's last turn that stored them got (see
    /// [`ToolsChanged`](crate::records::ToolsChanged)).
    pub host_tools: Vec<crate::records::HostTool>,
    /// The kept turns that a later turn answering the same message
    /// followed (superseded, should they have failed).
    followed: HashSet<Arc<str>>,
    /// The last message sent with an idempotency key: the one a new turn
    /// almost always answers.
    last_keyed: Option<Arc<str>>,
    /// The request digest of each message sent with an idempotency key,
    /// by message id (see [`MessageKeyed`]).
    key_digests: HashMap<Arc<str>, Arc<str>>,
}

impl SessionState {
    /// The state after `entries` (a thread read from its first entry).
    pub fn fold<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Self {
        let mut state = Self::default();
        for entry in entries {
            state.apply(entry);
        }
        state
    }

    /// Folds in one entry (entries must come in seq order; older seqs are
    /// ignored, so folding an entry twice changes nothing).
    pub fn apply(&mut self, entry: &Entry) {
        if entry.seq <= self.upto {
            return;
        }
        self.upto = entry.seq;
        self.updated_at = entry.at;
        match &entry.body {
            EntryBody::Chat(chat) => {
                self.settled = false;
                if self.title.is_none() {
                    self.title = title_of(&chat.text);
                }
            }
            EntryBody::TurnStarted(_) => self.settled = false,
            _ => {}
        }
        match &entry.body {
            EntryBody::Chat(_) if MessageId::is_for_key(&entry.id) => {
                self.last_keyed = Some(entry.id.clone());
                self.messages.insert(
                    entry.id.clone(),
                    MessageInfo {
                        seq: entry.seq,
                        author: entry.author.clone(),
                        answered: false,
                    },
                );
            }
            EntryBody::TurnStarted(started) => {
                if let Some(trigger) = started.trigger {
                    self.answer_message(&started.turn, trigger);
                    for turn in self.turns.iter().filter(|t| t.trigger == Some(trigger)) {
                        self.followed.insert(turn.id.clone());
                    }
                }
                self.turns.push(TurnInfo {
                    id: started.turn.clone(),
                    started_seq: entry.seq,
                    started_at: entry.at,
                    trigger: started.trigger,
                    progress: TurnProgress::Running,
                });
            }
            EntryBody::TurnEnded(ended) => {
                self.close(&ended.turn, TurnProgress::Ended(ended.reason.clone()));
            }
            EntryBody::TurnFailed(failed) => {
                self.close(&failed.turn, TurnProgress::Failed(failed.reason.clone()));
            }
            EntryBody::Signal(_) => self.apply_signal(entry),
            _ => {}
        }
    }

    fn apply_signal(&mut self, entry: &Entry) {
        let body = &entry.body;
        if let Some(created) = SessionCreated::from_body(body) {
            if self.created.is_none() && !self.deleted {
                self.created = Some(created);
                self.created_at = entry.at;
            }
        } else if let Some(request) = ApprovalRequestedRecord::from_body(body) {
            if !self.decided_calls.contains(&request.call_id) {
                self.pending_approvals.insert(
                    request.call_id.clone(),
                    PendingApproval {
                        turn_id: request.turn,
                        tool_call_id: request.call_id,
                        tool: request.tool,
                        input: request.arguments,
                        requested_at: entry.at,
                    },
                );
            }
        } else if let Some(decision) = ApprovalDecidedRecord::from_body(body) {
            self.pending_approvals.remove(&decision.call_id);
            self.decided_calls.insert(decision.call_id.clone());
            if decision.verdict == ApprovalVerdict::ApproveSession {
                self.approved_tools.insert(decision.tool);
            }
        } else if let Some(cancel) = crate::records::CancelRequested::from_body(body) {
            self.cancel_requested.insert(cancel.turn);
        } else if crate::records::SessionDeleted::is_signal_of(body) {
            // Every call then finds no session.
            self.created = None;
            self.deleted = true;
        } else if crate::records::Settled::from_body(body).is_some() {
            self.settled = true;
        } else if crate::records::Provenance::is_signal_of(body) {
            // Only the seq is kept, and the readers of a run's record
            // (`provenance`, `runs`) read it and skip one that does not
            // read as a record: the fold does not read it a first time.
            self.provenance.push(entry.seq);
        } else if let Some(item) = QueueAdded::from_body(body) {
            self.settled = false;
            let queued = QueuedMessage {
                seq: entry.seq,
                at: entry.at,
                item,
            };
            // An id already queued moves to the other queue in its place.
            match self.queue.iter_mut().find(|q| q.item.id == queued.item.id) {
                Some(old) => old.item.mode = queued.item.mode,
                None => self.queue.push(queued),
            }
        } else if let Some(removed) = QueueRemoved::from_body(body) {
            self.queue.retain(|q| q.item.id != removed.id);
        } else if let Some(asked) = QuestionAsked::from_body(body) {
            if !self.answered_questions.contains(&asked.call_id) {
                self.pending_questions.insert(asked.call_id.clone(), asked);
            }
        } else if let Some(answered) = QuestionAnswered::from_body(body) {
            self.pending_questions.remove(&answered.call_id);
            self.answered_questions.insert(answered.call_id);
        } else if let Some(changed) = ModeChanged::from_body(body) {
            self.mode = changed.mode;
            if let Some(plan) = &mut self.plan {
                plan.executing = changed.executing;
            }
        } else if let Some(changed) = crate::records::ModelChanged::from_body(body) {
            self.model = Some(changed.model);
        } else if let Some(changed) = crate::records::ToolsChanged::from_body(body) {
            self.host_tools = changed.tools;
        } else if let Some(plan) = PlanUpdated::from_body(body) {
            let executing = self.plan.as_ref().is_some_and(|p| p.executing);
            self.plan = Some(PlanState::of(plan.steps, executing));
        } else if let Some(keyed) = MessageKeyed::from_body(body) {
            self.key_digests.insert(keyed.message, keyed.digest);
        }
    }

    fn close(&mut self, turn: &Arc<str>, progress: TurnProgress) {
        if let Some(info) = self.turns.iter_mut().rev().find(|t| t.id == *turn)
            && info.progress == TurnProgress::Running
        {
            info.progress = progress;
            // A closed turn waits for nothing any more.
            self.pending_approvals
                .retain(|_, pending| pending.turn_id != *turn);
            self.pending_questions
                .retain(|_, asked| asked.turn != *turn);
            self.cancel_requested.remove(turn);
            self.forget_ended_turns();
        }
    }

    /// Drops the turns that ended well, but the last one: nothing asks
    /// about them any more (see [`turns`](Self::turns)).
    fn forget_ended_turns(&mut self) {
        let last = self.turns.len().saturating_sub(1);
        let mut i = 0;
        let followed = &mut self.followed;
        self.turns.retain(|t| {
            let keep = i == last || !matches!(t.progress, TurnProgress::Ended(_));
            i += 1;
            if !keep {
                followed.remove(&t.id);
            }
            keep
        });
    }

    /// Marks the message at seq `trigger`, when it is one sent with an
    /// idempotency key, as answered by `turn`: the message just sent, or
    /// the one the turn's id is derived from (a queued follow-up's). A
    /// retried turn answers a message answered before.
    fn answer_message(&mut self, turn: &str, trigger: u64) {
        let answer =
            |messages: &mut HashMap<Arc<str>, MessageInfo>, id: &str| match messages.get_mut(id) {
                Some(message) if message.seq == trigger => {
                    message.answered = true;
                    true
                }
                _ => false,
            };
        if let Some(last) = &self.last_keyed
            && answer(&mut self.messages, last)
        {
            return;
        }
        // The derived id is spelled out only when the message just sent is
        // not the one.
        if let Some(suffix) = turn.strip_prefix(crate::ids::TurnId::PREFIX) {
            answer(
                &mut self.messages,
                &format!("{}{suffix}", MessageId::PREFIX),
            );
        }
    }

    /// The kept turn with this id (see [`turns`](Self::turns)).
    pub fn turn(&self, id: &str) -> Option<&TurnInfo> {
        self.turns.iter().rev().find(|t| &*t.id == id)
    }

    /// Whether nothing is queued and no turn runs but `except` (a turn
    /// about to close): what `settled` says once `except` has closed.
    pub(crate) fn is_quiet_but(&self, except: Option<&str>) -> bool {
        self.queue.is_empty()
            && self
                .turns
                .iter()
                .all(|t| t.progress != TurnProgress::Running || Some(&*t.id) == except)
    }

    /// The turn running now, if any (the latest one still open).
    pub fn running_turn(&self) -> Option<&TurnInfo> {
        self.turns
            .iter()
            .rev()
            .find(|t| t.progress == TurnProgress::Running)
    }

    /// The queued messages of `mode`, oldest first.
    pub fn queued(&self, mode: QueueMode) -> impl Iterator<Item = &QueuedMessage> {
        self.queue.iter().filter(move |q| q.item.mode == mode)
    }

    /// The queue as it would be with `change` applied (`None`: as it is):
    /// what a queue record carries.
    pub fn queue_snapshot(&self, change: Option<QueueChange<'_>>) -> QueueSnapshot {
        let mut items: Vec<(&Arc<str>, QueueMode, &Arc<str>)> = self
            .queue
            .iter()
            .map(|q| (&q.item.id, q.item.mode, &q.item.chat.text))
            .collect();
        match change {
            Some(QueueChange::Add(added)) => {
                match items.iter_mut().find(|(id, _, _)| **id == added.id) {
                    Some(item) => item.1 = added.mode,
                    None => items.push((&added.id, added.mode, &added.chat.text)),
                }
            }
            Some(QueueChange::Remove(ids)) => items.retain(|(id, _, _)| !ids.contains(id)),
            None => {}
        }
        let texts = |mode: QueueMode| {
            items
                .iter()
                .filter(|(_, m, _)| *m == mode)
                .map(|(id, _, text)| QueuedText {
                    id: (*id).clone(),
                    text: (*text).clone(),
                })
                .collect()
        };
        QueueSnapshot {
            steering: texts(QueueMode::Steer),
            follow_up: texts(QueueMode::FollowUp),
        }
    }

    /// True when `id` (one an idempotency key gives) names a message of
    /// the session, delivered or queued.
    pub fn knows_message(&self, id: &str) -> bool {
        self.messages.contains_key(id) || self.queue.iter().any(|q| &*q.item.id == id)
    }

    /// The digest of the request that sent message `id` with an
    /// idempotency key, when one was stored (see [`MessageKeyed`]).
    pub fn key_digest(&self, id: &str) -> Option<&str> {
        self.key_digests.get(id).map(|d| &**d)
    }

    /// The last turn that started.
    pub fn last_turn(&self) -> Option<&TurnInfo> {
        self.turns.last()
    }

    /// Turns whose output the model no longer sees: failed turns a later
    /// turn retried (a turn answering the same message).
    pub fn superseded_turns(&self) -> HashSet<Arc<str>> {
        self.turns
            .iter()
            .filter(|t| t.is_retryable() && self.followed.contains(&t.id))
            .map(|t| t.id.clone())
            .collect()
    }

    /// Where the session stands.
    pub fn status(&self) -> SessionStatus {
        match self.last_turn().map(|t| &t.progress) {
            None => SessionStatus::Active,
            Some(TurnProgress::Running) if !self.pending_approvals.is_empty() => {
                SessionStatus::WaitingApproval
            }
            Some(TurnProgress::Running) => SessionStatus::Active,
            Some(TurnProgress::Ended(_)) => SessionStatus::Completed,
            Some(TurnProgress::Failed(reason))
                if reason.finish_reason() == Some(FinishReason::Aborted) =>
            {
                SessionStatus::Canceled
            }
            Some(TurnProgress::Failed(_)) => SessionStatus::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use roundtable_chat_runner::lifecycle::{turn_interrupted, turn_started, turn_started_by};
    use roundtable_thread_stream::{NewEntry, ThreadId, TurnEnded, TurnFailed};

    use super::*;

    fn entries(bodies: Vec<(&str, EntryBody)>) -> Vec<Entry> {
        let thread = ThreadId::new("sess_1").unwrap();
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, (author, body))| {
                NewEntry::new(author, body).into_entry(thread.clone(), i as u64 + 1)
            })
            .collect()
    }

    #[test]
    fn a_title_is_the_first_line_of_the_first_message_with_text() {
        assert_eq!(
            title_of("  \n\n  Fix the build  \nthen more"),
            Some("Fix the build".into())
        );
        assert_eq!(title_of(" \n\t"), None);
        let exact = "é".repeat(TITLE_CHARS);
        assert_eq!(title_of(&exact).as_deref(), Some(exact.as_str()));
        let long = format!("{exact}x");
        let cut = title_of(&long).unwrap();
        assert_eq!(cut.chars().count(), TITLE_CHARS);
        assert!(cut.ends_with('…'), "{cut}");
        assert!(long.starts_with(cut.trim_end_matches('…')));

        let state = SessionState::fold(&entries(vec![
            ("user", EntryBody::chat("")),
            (
                "user",
                EntryBody::chat("Why does CI fail?\nIt did not yesterday."),
            ),
            ("user", EntryBody::chat("And the lint?")),
        ]));
        assert_eq!(state.title.as_deref(), Some("Why does CI fail?"));
    }

    fn request(turn: &str, call: &str) -> EntryBody {
        ApprovalRequestedRecord {
            turn: turn.into(),
            call_id: call.into(),
            tool: "shell".into(),
            arguments: Arc::default(),
        }
        .to_body()
        .unwrap()
    }

    fn decision(turn: &str, call: &str, verdict: ApprovalVerdict) -> EntryBody {
        ApprovalDecidedRecord {
            turn: turn.into(),
            call_id: call.into(),
            tool: "shell".into(),
            verdict,
            reason: None,
        }
        .to_body()
        .unwrap()
    }

    #[test]
    fn status_follows_the_last_turn() {
        let agent: Arc<str> = "agent".into();
        let t1: Arc<str> = "turn_1".into();
        let mut state = SessionState::default();
        assert_eq!(state.status(), SessionStatus::Active);
        let all = entries(vec![
            ("user", EntryBody::chat("hi")),
            ("agent", turn_started(&agent, &t1, None).body),
            ("agent", request("turn_1", "c1")),
            (
                "agent",
                EntryBody::TurnEnded(TurnEnded {
                    turn: t1.clone(),
                    reason: "stop".into(),
                }),
            ),
        ]);
        state.apply(&all[0]);
        state.apply(&all[1]);
        assert_eq!(state.status(), SessionStatus::Active);
        assert_eq!(state.running_turn().map(|t| &*t.id), Some("turn_1"));
        state.apply(&all[2]);
        assert_eq!(state.status(), SessionStatus::WaitingApproval);
        state.apply(&all[3]);
        assert_eq!(state.status(), SessionStatus::Completed);
        assert!(
            state.pending_approvals.is_empty(),
            "a closed turn waits for nothing"
        );
        // Folding an entry again changes nothing.
        state.apply(&all[1]);
        assert_eq!(state.turns.len(), 1);
    }

    #[test]
    fn approvals_are_pending_until_decided_and_session_approvals_are_kept() {
        let state = SessionState::fold(&entries(vec![
            ("agent", request("turn_1", "c1")),
            ("agent", request("turn_1", "c2")),
            (
                "user",
                decision("turn_1", "c1", ApprovalVerdict::ApproveSession),
            ),
        ]));
        assert_eq!(
            state
                .pending_approvals
                .keys()
                .map(|k| &**k)
                .collect::<Vec<_>>(),
            ["c2"]
        );
        assert!(state.decided_calls.contains("c1"));
        assert!(state.approved_tools.contains("shell"));
    }

    #[test]
    fn a_retried_turn_is_superseded_and_statuses_name_how_turns_failed() {
        let agent: Arc<str> = "agent".into();
        let (t1, t2): (Arc<str>, Arc<str>) = ("turn_1".into(), "turn_2".into());
        let state = SessionState::fold(&entries(vec![
            ("user", EntryBody::chat("hi")),
            ("agent", turn_started_by(&agent, &t1, 1, "message").body),
            ("agent", turn_interrupted(&agent, &t1).body),
        ]));
        assert_eq!(state.status(), SessionStatus::Failed);
        assert!(state.turn("turn_1").unwrap().is_retryable());
        assert!(state.superseded_turns().is_empty());

        let state = SessionState::fold(&entries(vec![
            ("user", EntryBody::chat("hi")),
            ("agent", turn_started_by(&agent, &t1, 1, "message").body),
            (
                "agent",
                EntryBody::TurnFailed(TurnFailed {
                    turn: t1.clone(),
                    reason: TurnReason::failed(FinishReason::Aborted, "cancelled"),
                }),
            ),
            ("agent", turn_started_by(&agent, &t2, 1, "retry").body),
        ]));
        assert_eq!(
            state.superseded_turns().into_iter().collect::<Vec<_>>(),
            vec![t1]
        );
        assert_eq!(state.status(), SessionStatus::Active);
    }

    #[test]
    fn turns_that_ended_well_are_dropped_but_the_last_and_retries_stay_known() {
        let agent: Arc<str> = "agent".into();
        let ended = |turn: &Arc<str>| {
            EntryBody::TurnEnded(TurnEnded {
                turn: turn.clone(),
                reason: "stop".into(),
            })
        };
        let (t1, t2, t3, t4): (Arc<str>, Arc<str>, Arc<str>, Arc<str>) = (
            "turn_1".into(),
            "turn_2".into(),
            "turn_3".into(),
            "turn_4".into(),
        );
        let state = SessionState::fold(&entries(vec![
            ("user", EntryBody::chat("hi")),
            ("agent", turn_started_by(&agent, &t1, 1, "message").body),
            ("agent", ended(&t1)),
            ("user", EntryBody::chat("and then?")),
            ("agent", turn_started_by(&agent, &t2, 4, "message").body),
            ("agent", turn_interrupted(&agent, &t2).body),
            ("agent", turn_started_by(&agent, &t3, 4, "retry").body),
            ("agent", ended(&t3)),
            ("user", EntryBody::chat("thanks")),
            ("agent", turn_started_by(&agent, &t4, 9, "message").body),
            ("agent", ended(&t4)),
        ]));
        // The failed turn (retryable) and the last one are kept.
        let kept: Vec<&str> = state.turns.iter().map(|t| &*t.id).collect();
        assert_eq!(kept, ["turn_2", "turn_4"]);
        assert_eq!(state.status(), SessionStatus::Completed);
        // The retry that superseded turn 2 is gone; turn 2 stays superseded.
        assert_eq!(
            state.superseded_turns().into_iter().collect::<Vec<_>>(),
            vec![t2]
        );
    }

    #[test]
    fn a_keyed_message_is_answered_once_its_turn_starts() {
        let agent: Arc<str> = "agent".into();
        let id = MessageId::for_key("sess_1", "k1");
        let turn = crate::ids::TurnId::for_message(&id);
        let mut chat = NewEntry::new("user", EntryBody::chat("hi"));
        chat.id = id.as_arc().clone();
        let thread = ThreadId::new("sess_1").unwrap();
        let mut state = SessionState::default();
        state.apply(&chat.into_entry(thread.clone(), 1));
        assert!(!state.messages[id.as_str()].answered);
        let started = turn_started_by(&agent, turn.as_arc(), 1, "message");
        state.apply(&started.into_entry(thread, 2));
        assert!(state.messages[id.as_str()].answered);
    }
}
