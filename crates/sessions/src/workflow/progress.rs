//! How far a workflow got in a session, folded from the session's thread:
//! which phases completed, and where the last attempt at each phase stands.
//! Pure, like the session's state: the same entries give the same
//! progress in any process.

use std::collections::HashMap;
use std::sync::Arc;

use roundtable_chat_runner::lifecycle::records::{ApprovalDecidedRecord, ApprovalRequestedRecord};
use roundtable_skills::Workflow;
use roundtable_thread_stream::{Entry, EntryBody};

use crate::records::{PHASE_GATE_TOOL, PhaseCompleted, PhaseFailed, PhaseStarted, SessionRecord};

/// Where the last attempt at one phase stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttemptState {
    /// Its gate was asked at `seq` (call `call_id`) and waits.
    GatePending { call_id: Arc<str>, seq: u64 },
    /// Its gate was approved; the phase has not started.
    GateApproved,
    /// Its gate was denied, and nothing recorded the failure yet.
    GateDenied { reason: Option<String> },
    /// It started at `seq`, run by `turn`.
    Started { turn: Arc<str>, seq: u64 },
    /// It completed.
    Completed,
    /// It failed (`interrupted`: a restart stopped its turn).
    Failed { interrupted: bool },
}

/// The last attempt at one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PhaseAttempt {
    /// The attempt's number (from 1).
    pub(crate) attempt: u32,
    /// Where it stands.
    pub(crate) state: AttemptState,
}

/// One workflow's progress in one session.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkflowProgress {
    /// The last attempt at each phase, by phase name.
    pub(crate) phases: HashMap<Arc<str>, PhaseAttempt>,
    /// True when any workflow phase ever started in the session (its
    /// `AGENTS.md` is written then, once).
    pub(crate) session_started_phases: bool,
}

impl WorkflowProgress {
    /// The progress of workflow `workflow` after `entries` (the session's
    /// thread, in order).
    pub(crate) fn fold<'a>(workflow: &str, entries: impl IntoIterator<Item = &'a Entry>) -> Self {
        let mut progress = Self::default();
        // Gate call id -> phase, for the decisions.
        let mut gates: HashMap<Arc<str>, Arc<str>> = HashMap::new();
        for entry in entries {
            let EntryBody::Signal(_) = &entry.body else {
                continue;
            };
            let body = &entry.body;
            if let Some(started) = PhaseStarted::from_body(body) {
                progress.session_started_phases = true;
                if *started.workflow == *workflow {
                    progress.set(
                        &started.phase,
                        started.attempt,
                        AttemptState::Started {
                            turn: started.turn,
                            seq: entry.seq,
                        },
                    );
                }
            } else if let Some(done) = PhaseCompleted::from_body(body) {
                if *done.workflow == *workflow {
                    progress.set(&done.phase, done.attempt, AttemptState::Completed);
                }
            } else if let Some(failed) = PhaseFailed::from_body(body) {
                if *failed.workflow == *workflow {
                    let state = AttemptState::Failed {
                        interrupted: failed.interrupted,
                    };
                    progress.set(&failed.phase, failed.attempt, state);
                }
            } else if let Some(request) = ApprovalRequestedRecord::from_body(body) {
                if *request.tool != *PHASE_GATE_TOOL {
                    continue;
                }
                let of = |key: &str| request.arguments.get(key).and_then(|v| v.as_str());
                let attempt = request
                    .arguments
                    .get("attempt")
                    .and_then(|v| v.as_u64())
                    .and_then(|a| u32::try_from(a).ok());
                if let (Some(w), Some(phase), Some(attempt)) =
                    (of("workflow"), of("phase"), attempt)
                    && w == workflow
                {
                    let phase: Arc<str> = phase.into();
                    gates.insert(request.call_id.clone(), phase.clone());
                    progress.set(
                        &phase,
                        attempt,
                        AttemptState::GatePending {
                            call_id: request.call_id,
                            seq: entry.seq,
                        },
                    );
                }
            } else if let Some(decision) = ApprovalDecidedRecord::from_body(body)
                && let Some(phase) = gates.get(&decision.call_id)
                && let Some(last) = progress.phases.get_mut(phase)
                && matches!(&last.state, AttemptState::GatePending { call_id, .. } if *call_id == decision.call_id)
            {
                last.state = if decision.verdict.approves() {
                    AttemptState::GateApproved
                } else {
                    AttemptState::GateDenied {
                        reason: decision.reason,
                    }
                };
            }
        }
        progress
    }

    /// Records `state` for `phase`, unless an older attempt's record came
    /// late.
    fn set(&mut self, phase: &Arc<str>, attempt: u32, state: AttemptState) {
        match self.phases.get_mut(phase) {
            Some(last) if last.attempt > attempt => {}
            Some(last) => *last = PhaseAttempt { attempt, state },
            None => {
                self.phases
                    .insert(phase.clone(), PhaseAttempt { attempt, state });
            }
        }
    }

    /// The index of the first phase of `workflow` to run: the one after
    /// the last phase (in the workflow's order) that completed; the first
    /// when none did; the number of phases when the last one did.
    pub(crate) fn resume_index(&self, workflow: &Workflow) -> usize {
        workflow
            .phases
            .iter()
            .rposition(|phase| {
                self.phases
                    .get(phase.name.as_str())
                    .is_some_and(|last| last.state == AttemptState::Completed)
            })
            .map_or(0, |i| i + 1)
    }

    /// The last attempt at `phase`, if any.
    pub(crate) fn last_attempt(&self, phase: &str) -> Option<&PhaseAttempt> {
        self.phases.get(phase)
    }
}

#[cfg(test)]
mod tests {
    use roundtable_chat_runner::lifecycle::records::ApprovalVerdict;
    use roundtable_skills::workflow::{PhaseGate, WorkflowPhase};
    use roundtable_thread_stream::{NewEntry, ThreadId};

    use super::*;

    fn workflow(names: &[&str]) -> Workflow {
        Workflow {
            name: "wf".into(),
            description: None,
            phases: names
                .iter()
                .map(|name| WorkflowPhase {
                    name: (*name).into(),
                    skills: vec!["s".into()],
                    skill_dirs: Vec::new(),
                    prompt: None,
                    gate: PhaseGate::None,
                })
                .collect(),
        }
    }

    fn entries(bodies: Vec<EntryBody>) -> Vec<Entry> {
        let thread = ThreadId::new("sess_1").unwrap();
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, body)| NewEntry::new("agent", body).into_entry(thread.clone(), i as u64 + 1))
            .collect()
    }

    fn started(workflow: &str, phase: &str, attempt: u32) -> EntryBody {
        PhaseStarted {
            workflow: workflow.into(),
            phase: phase.into(),
            index: 0,
            attempt,
            turn: format!("turn_{phase}_{attempt}").into(),
            message_id: "msg_1".into(),
            skills: Vec::new(),
        }
        .to_body()
        .unwrap()
    }

    fn completed(phase: &str, attempt: u32) -> EntryBody {
        PhaseCompleted {
            workflow: "wf".into(),
            phase: phase.into(),
            attempt,
            turn: "turn_1".into(),
            finish_reason: "stop".into(),
        }
        .to_body()
        .unwrap()
    }

    fn failed(phase: &str, attempt: u32, interrupted: bool) -> EntryBody {
        PhaseFailed {
            workflow: "wf".into(),
            phase: phase.into(),
            attempt,
            turn: None,
            reason: "no".into(),
            interrupted,
        }
        .to_body()
        .unwrap()
    }

    fn gate(phase: &str, attempt: u32, call: &str) -> EntryBody {
        let arguments = serde_json::json!({"workflow": "wf", "phase": phase, "attempt": attempt});
        ApprovalRequestedRecord {
            turn: "turn_x".into(),
            call_id: call.into(),
            tool: PHASE_GATE_TOOL.into(),
            arguments: Arc::new(arguments.as_object().unwrap().clone()),
        }
        .to_body()
        .unwrap()
    }

    fn decided(call: &str, verdict: ApprovalVerdict) -> EntryBody {
        ApprovalDecidedRecord {
            turn: "turn_x".into(),
            call_id: call.into(),
            tool: PHASE_GATE_TOOL.into(),
            verdict,
            reason: Some("why".into()),
        }
        .to_body()
        .unwrap()
    }

    #[test]
    fn resumes_after_the_last_completed_phase() {
        let wf = workflow(&["a", "b", "c"]);
        let none = WorkflowProgress::fold("wf", &[]);
        assert_eq!(none.resume_index(&wf), 0);
        assert!(!none.session_started_phases);
        let progress = WorkflowProgress::fold(
            "wf",
            &entries(vec![
                started("wf", "a", 1),
                completed("a", 1),
                started("wf", "b", 1),
                failed("b", 1, false),
                started("other", "c", 1),
            ]),
        );
        assert_eq!(progress.resume_index(&wf), 1);
        assert_eq!(
            progress.last_attempt("b").unwrap().state,
            AttemptState::Failed { interrupted: false }
        );
        assert!(progress.last_attempt("c").is_none(), "another workflow's");
        let all = WorkflowProgress::fold(
            "wf",
            &entries(vec![
                completed("a", 1),
                completed("b", 1),
                completed("c", 2),
            ]),
        );
        assert_eq!(all.resume_index(&wf), 3);
    }

    #[test]
    fn another_workflows_phase_still_counts_for_agents_md() {
        let progress = WorkflowProgress::fold("wf", &entries(vec![started("other", "x", 1)]));
        assert!(progress.session_started_phases);
        assert!(progress.phases.is_empty());
    }

    #[test]
    fn gates_are_pending_until_decided() {
        let progress = WorkflowProgress::fold("wf", &entries(vec![gate("a", 1, "g1")]));
        assert_eq!(
            progress.last_attempt("a").unwrap().state,
            AttemptState::GatePending {
                call_id: "g1".into(),
                seq: 1
            }
        );
        let progress = WorkflowProgress::fold(
            "wf",
            &entries(vec![
                gate("a", 1, "g1"),
                decided("g1", ApprovalVerdict::Deny),
                failed("a", 1, false),
                gate("a", 2, "g2"),
                decided("g2", ApprovalVerdict::Approve),
            ]),
        );
        let last = progress.last_attempt("a").unwrap();
        assert_eq!(last.attempt, 2);
        assert_eq!(last.state, AttemptState::GateApproved);
        let denied = WorkflowProgress::fold(
            "wf",
            &entries(vec![
                gate("a", 1, "g1"),
                decided("g1", ApprovalVerdict::Expired),
            ]),
        );
        assert!(matches!(
            denied.last_attempt("a").unwrap().state,
            AttemptState::GateDenied { .. }
        ));
    }
}
