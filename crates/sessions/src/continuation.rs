//! Where an open turn stands, read from what it stored, so that a process
//! may carry on a turn another one began (and stopped running):
//!
//! - a tool call whose result is stored is never run again;
//! - a call that may have started (no approval asked, or approved and
//!   marked [`CallStarted`]) but has no result is not run again either (it
//!   may have had side effects): it gets an error result saying the process
//!   running it stopped, which the model reads and decides on;
//! - the first call still waiting for its approval (or approved or denied,
//!   but not started) or for its question's answers, and every call after
//!   it, run again through the turn loop, which waits for the stored
//!   request or question rather than asking again;
//! - a model call that was streaming is made again from the last complete
//!   reply; a turn whose last reply answered without tools only needs
//!   closing.

use std::collections::HashSet;
use std::sync::Arc;

use roundtable_chat_runner::Resume;
use roundtable_chat_runner::lifecycle::records::{
    ApprovalDecidedRecord, ApprovalRequestedRecord, ApprovalVerdict,
};
use roundtable_providers::{AssistantMessage, Message, StopReason, ToolCall, now_millis};
use roundtable_thread_stream::{Entry, EntryBody, Expect, NewEntry, ToolResultEntry};
use roundtable_tools::ToolResult;

use crate::core::{EngineCore, entry_turn};
use crate::error::SessionError;
use crate::records::{CallStarted, QuestionAsked, SessionRecord};
use crate::runtime::SessionRuntime;

/// What a call that may have run, and has no result, is answered with.
pub(crate) const STOPPED_TEXT: &str = "The process running this call stopped before it \
    finished, so the call may or may not have taken effect. Check before running it again.";

/// Where an open turn stands.
pub(crate) enum Standing {
    /// Nothing of it is stored after its start: it runs from the start.
    Fresh,
    /// It goes on from `resume`; its conversation is the view up to `upto`;
    /// `asked` holds the calls among `resume.calls` whose question is
    /// already stored (`ask_user` waits for its answers without asking).
    Resumed {
        resume: Resume,
        upto: u64,
        asked: HashSet<Arc<str>>,
    },
    /// Its last reply answered without tools: it ends with that reply.
    Answered(StopReason),
}

/// Where turn `turn` (started at seq `started`) stands; the results of the
/// calls that may have run are stored on the way.
pub(crate) async fn standing(
    core: &EngineCore,
    runtime: &SessionRuntime,
    turn: &Arc<str>,
    started: u64,
) -> Result<Standing, SessionError> {
    let upto = runtime.refresh(&*core.store).await?.upto;
    if upto <= started {
        return Ok(Standing::Fresh);
    }
    let entries = core.store.read(&runtime.thread, started + 1..=upto).await?;
    let stored = TurnRecord::read(&core.agent, turn, &entries);
    let Some(last) = stored.last_reply else {
        return Ok(Standing::Fresh);
    };
    if last.stop_reason.is_failure() {
        let resume = Resume {
            rounds: stored.rounds,
            ..Resume::default()
        };
        let asked = HashSet::new();
        return Ok(Standing::Resumed {
            resume,
            upto,
            asked,
        });
    }
    let unanswered: Vec<ToolCall> = last
        .tool_calls()
        .filter(|c| !stored.answered.contains(&c.id))
        .cloned()
        .collect();
    if last.tool_calls().next().is_none() {
        return Ok(Standing::Answered(last.stop_reason));
    }
    let waiting = unanswered
        .iter()
        .position(|c| {
            let requested = stored.requested.contains(&c.id) && !stored.started.contains(&c.id);
            requested || stored.asked.contains(&c.id)
        })
        .unwrap_or(unanswered.len());
    let (stopped, calls) = unanswered.split_at(waiting);
    let upto = store_stopped(core, runtime, turn, stopped)
        .await?
        .unwrap_or(upto);
    let requested = calls
        .iter()
        .filter(|c| stored.requested.contains(&c.id))
        .map(|c| c.id.clone())
        .collect();
    let asked = calls
        .iter()
        .filter(|c| stored.asked.contains(&c.id))
        .map(|c| c.id.clone())
        .collect();
    let resume = Resume {
        rounds: stored.rounds,
        calls: calls.to_vec(),
        requested,
    };
    Ok(Standing::Resumed {
        resume,
        upto,
        asked,
    })
}

/// Takes out of `messages` the results the projection filled in for the
/// calls a resumed turn runs again (their real results follow).
pub(crate) fn without_filled_results(messages: &mut Vec<Message>, resume: &Resume) {
    if resume.calls.is_empty() {
        return;
    }
    let rerun: HashSet<&Arc<str>> = resume.calls.iter().map(|c| &c.id).collect();
    let last_reply = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant(_)))
        .unwrap_or(0);
    let mut index = 0;
    messages.retain(|m| {
        let keep = index <= last_reply
            || !matches!(m, Message::ToolResult(r) if rerun.contains(&r.tool_call_id));
        index += 1;
        keep
    });
}

/// What a turn stored, as far as carrying it on needs.
struct TurnRecord {
    /// Its model calls.
    rounds: u32,
    /// Its last reply.
    last_reply: Option<Arc<AssistantMessage>>,
    /// The calls with a stored result.
    answered: HashSet<Arc<str>>,
    /// The calls with a stored approval request.
    requested: HashSet<Arc<str>>,
    /// The calls that may have started running after their approval.
    started: HashSet<Arc<str>>,
    /// The `ask_user` calls whose question is stored.
    asked: HashSet<Arc<str>>,
}

impl TurnRecord {
    fn read(agent: &Arc<str>, turn: &Arc<str>, entries: &[Entry]) -> Self {
        let mut record = Self {
            rounds: 0,
            last_reply: None,
            answered: HashSet::new(),
            requested: HashSet::new(),
            started: HashSet::new(),
            asked: HashSet::new(),
        };
        for entry in entries {
            if entry_turn(entry) == Some(turn) {
                record.message(entry);
            } else if let EntryBody::Signal(_) = &entry.body {
                record.signal(agent, turn, entry);
            }
        }
        record
    }

    fn message(&mut self, entry: &Entry) {
        match &entry.body {
            EntryBody::Assistant(reply) => {
                self.rounds += 1;
                self.last_reply = Some(reply.message().clone());
            }
            EntryBody::ToolResult(result) => {
                self.answered.insert(result.message.tool_call_id.clone());
            }
            _ => {}
        }
    }

    fn signal(&mut self, agent: &Arc<str>, turn: &Arc<str>, entry: &Entry) {
        let body = &entry.body;
        if let Some(request) = ApprovalRequestedRecord::from_body(body) {
            if request.turn == *turn {
                self.requested.insert(request.call_id);
            }
        } else if let Some(asked) = QuestionAsked::from_body(body) {
            if asked.turn == *turn {
                self.asked.insert(asked.call_id);
            }
        } else if let Some(started) = CallStarted::from_body(body) {
            if started.turn == *turn {
                self.started.insert(started.call_id);
            }
        } else if let Some(decided) = ApprovalDecidedRecord::from_body(body) {
            // The agent's own approval (a tool approved for the session) is
            // followed by the call at once.
            let own = entry.author == *agent && decided.verdict == ApprovalVerdict::Approve;
            if decided.turn == *turn && own {
                self.started.insert(decided.call_id);
            }
        }
    }
}

/// Stores an error result for each of `calls` (they may have run, and are
/// not run again). The seq of the last one, when there were any.
async fn store_stopped(
    core: &EngineCore,
    runtime: &SessionRuntime,
    turn: &Arc<str>,
    calls: &[ToolCall],
) -> Result<Option<u64>, SessionError> {
    if calls.is_empty() {
        return Ok(None);
    }
    let entries = calls
        .iter()
        .map(|call| {
            let message = ToolResult::error(STOPPED_TEXT).into_message(call, now_millis());
            let body = EntryBody::ToolResult(ToolResultEntry {
                turn: Some(turn.clone()),
                message: Arc::new(message),
            });
            NewEntry::new(core.agent.clone(), body)
        })
        .collect();
    let stored = core
        .store
        .append(&runtime.thread, Expect::Any, entries)
        .await?;
    Ok(stored.last().map(|e| e.seq))
}
