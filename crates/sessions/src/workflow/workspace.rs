//! Preparing the session's workspace for a phase: the phase's skills
//! staged in `.agents/skills/` (and nothing else there), and the agent
//! context written to `AGENTS.md` once per session.
//!
//! The session's agent reads both at the start of every turn (its system
//! prompt carries `AGENTS.md` and the catalogue of the staged skills, and
//! `read_skill` reads them), so what a phase's turn sees is what the phase
//! declared.

use std::path::{Path, PathBuf};

use roundtable_skills::agent_context::write_agents_md;
use roundtable_skills::stage::stage_dirs;
use roundtable_skills::workflow::WorkflowPhase;
use roundtable_skills::{SkillsError, StageMode};

/// Stages `phase`'s skills in `workspace` after clearing what an earlier
/// phase staged; with `agent_context` set and `first_of_session` true,
/// writes `AGENTS.md` first. Returns the staged directories.
pub(crate) fn prepare(
    workspace: &Path,
    phase: &WorkflowPhase,
    mode: StageMode,
    agent_context: Option<&Path>,
    first_of_session: bool,
) -> Result<Vec<PathBuf>, SkillsError> {
    if first_of_session && let Some(dir) = agent_context {
        write_agents_md(dir, workspace)?;
    }
    stage_dirs(workspace, &phase.skill_dirs, mode)
}

#[cfg(test)]
mod tests {
    use roundtable_skills::agent_context::AGENTS_FILE;
    use roundtable_skills::workflow::PhaseGate;

    use super::*;

    fn skill(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::create_dir_all(dir.join("references")).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: d\n---\n"),
        )
        .unwrap();
        std::fs::write(dir.join("scripts/run.sh"), "echo hi\n").unwrap();
        std::fs::write(dir.join("references/guide.md"), "# Guide\n").unwrap();
        dir
    }

    fn phase(dirs: Vec<PathBuf>) -> WorkflowPhase {
        WorkflowPhase {
            name: "p".into(),
            skills: Vec::new(),
            skill_dirs: dirs,
            prompt: None,
            gate: PhaseGate::None,
        }
    }

    #[test]
    fn each_phase_sees_only_its_skills_and_agents_md_is_written_once() {
        let host = tempfile::tempdir().unwrap();
        let context = host.path().join("agent-context");
        std::fs::create_dir_all(&context).unwrap();
        std::fs::write(context.join("rules.md"), "Be careful.\n").unwrap();
        let review = skill(host.path(), "pr-review");
        let triage = skill(host.path(), "issue-triage");
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path();

        for mode in [StageMode::Symlink, StageMode::Copy] {
            let staged = prepare(
                ws,
                &phase(vec![review.clone(), triage.clone()]),
                mode,
                Some(&context),
                true,
            )
            .unwrap();
            assert_eq!(staged.len(), 2);
            assert!(ws.join(".agents/skills/pr-review/scripts/run.sh").is_file());
            assert!(
                ws.join(".agents/skills/issue-triage/references/guide.md")
                    .is_file()
            );
            assert_eq!(
                std::fs::read_to_string(ws.join(AGENTS_FILE)).unwrap(),
                "Be careful."
            );

            // The next phase: one skill; AGENTS.md is not written again.
            std::fs::write(context.join("rules.md"), "Changed.\n").unwrap();
            prepare(
                ws,
                &phase(vec![triage.clone()]),
                mode,
                Some(&context),
                false,
            )
            .unwrap();
            assert!(!ws.join(".agents/skills/pr-review").exists());
            assert!(ws.join(".agents/skills/issue-triage/SKILL.md").is_file());
            assert_eq!(
                std::fs::read_to_string(ws.join(AGENTS_FILE)).unwrap(),
                "Be careful."
            );

            // A phase without skills sees no staging folder at all.
            prepare(ws, &phase(Vec::new()), mode, Some(&context), false).unwrap();
            assert!(!ws.join(".agents/skills").exists());
            std::fs::write(context.join("rules.md"), "Be careful.\n").unwrap();
        }
        // The host's skills are untouched by the clearing.
        assert!(review.join("scripts/run.sh").is_file());
    }
}
