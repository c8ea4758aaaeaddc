//! What a session's agent is told and given (the spec's agent-loop steps 1
//! and 2): the system prompt (the session's instructions, the workspace's
//! AGENTS.md, a small repository bundle, the catalogue of the skills staged
//! in `.agents/skills`) and the tools (the workspace toolset confined to
//! the workspace, `read_skill` when skills are staged, the host's tools).

use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

use roundtable_skills::{
    LoadedSkills, ReadSkill, SkillDiagnostic, SkillReader, load_skills_from_dir,
    skills_prompt_section,
};
use roundtable_tools::workspace::{CommandLimits, Workspace};
use roundtable_tools::{ApprovalPolicy, PatchReviewPolicy, Tool, ToolContext, ToolRegistry};

use crate::error::SessionError;
use crate::patch_review::AutoReviewedPatch;
use crate::records::SessionCreated;

/// The instructions every session's agent starts from, before the session's
/// own.
const AGENT_PROMPT: &str = "\
You are a coding agent working in a repository through your tools. Read \
before you change, change with `apply_patch`, and run commands with `shell`. \
Paths are relative to the workspace root. Some tools wait for a human's \
approval; a denied call says why. When you are done, answer with a short \
summary of what you changed.";

/// How many lines of the repository listing the prompt carries.
const BUNDLE_LINES: usize = 80;

/// The longest AGENTS.md the prompt carries, in bytes.
const AGENTS_MD_MAX: usize = 32 * 1024;

/// The agent's tools and prompt for one turn.
pub(crate) struct AgentSetup {
    pub(crate) workspace: Workspace,
    pub(crate) tools: ToolRegistry,
    pub(crate) system_prompt: String,
    /// What building it found wrong (see [`setup_diagnostics`]).
    pub(crate) diagnostics: Vec<SkillDiagnostic>,
}

/// Builds the tools and the system prompt of `created`'s session; `host`
/// holds the host's tools of this turn, which run under the session's
/// approval policy like its own (a name they share is an error), and
/// `commands` bounds the commands of its `shell` and `verify`.
pub(crate) async fn agent_setup(
    created: &SessionCreated,
    host: &ToolRegistry,
    commands: CommandLimits,
) -> Result<AgentSetup, SessionError> {
    let workspace = Workspace::open(&created.workspace_path)?
        .with_verify_policy(created.verify_policy.clone())
        .with_command_limits(commands);
    let mut policy: ApprovalPolicy = created.approval_policy.clone();
    if created.patch_review == PatchReviewPolicy::Request {
        policy = policy.with_tool("apply_patch");
    }
    let mut tools = ToolRegistry::new().with_approval_policy(policy);
    let toolset = workspace.toolset();
    if created.patch_review == PatchReviewPolicy::Auto {
        tools.register_all(AutoReviewedPatch::wrap_in(toolset))?;
    } else {
        tools.register_all(toolset)?;
    }

    let root = workspace.root().path().to_path_buf();
    let files = SetupFiles::read(&root);
    let diagnostics = files.diagnostics;
    let skills = files.skills.skills;
    if !skills.is_empty() {
        tools.register(ReadSkill::new(&skills))?;
    }
    tools.merge(host.clone())?;

    let mut prompt = String::from(AGENT_PROMPT);
    if let Some(own) = &created.system_prompt {
        prompt.push_str("\n\n");
        prompt.push_str(own.trim());
    }
    if let Some(agents_md) = files.agents_md.text {
        let _ = write!(prompt, "\n\n# AGENTS.md\n\n{agents_md}");
    }
    if let Some(bundle) = repository_bundle(&tools).await {
        let _ = write!(prompt, "\n\n# Repository\n\n{bundle}");
    }
    prompt.push_str(&skills_prompt_section(&skills, SkillReader::ReadSkillTool));
    Ok(AgentSetup {
        workspace,
        tools,
        system_prompt: prompt,
        diagnostics,
    })
}

/// The files of the workspace a session's agent setup reads: the skills
/// staged in `.agents/skills` and AGENTS.md, with what is wrong with them.
struct SetupFiles {
    /// The staged skills (their findings are in `diagnostics`).
    skills: LoadedSkills,
    agents_md: AgentsMd,
    /// The skills dropped or warned about (no such folder is no finding: a
    /// workspace need not stage skills), and an AGENTS.md that cannot be
    /// read or is cut.
    diagnostics: Vec<SkillDiagnostic>,
}

impl SetupFiles {
    fn read(root: &Path) -> Self {
        let folder = root.join(".agents").join("skills");
        let mut skills = if folder.exists() {
            load_skills_from_dir(&folder)
        } else {
            LoadedSkills::default()
        };
        let agents_md = read_agents_md(root);
        let mut diagnostics = std::mem::take(&mut skills.diagnostics);
        diagnostics.extend(agents_md.problem.clone());
        Self {
            skills,
            agents_md,
            diagnostics,
        }
    }
}

/// The workspace's AGENTS.md as the prompt carries it, and what is wrong
/// with it.
struct AgentsMd {
    /// The text, cut to a sane size; `None` when there is none to carry.
    text: Option<String>,
    /// Why the file is left out or cut, when it is.
    problem: Option<SkillDiagnostic>,
}

/// The workspace's AGENTS.md, cut to a sane size. A missing file is no
/// problem; one that cannot be read, or is cut, is.
fn read_agents_md(root: &Path) -> AgentsMd {
    let path = root.join("AGENTS.md");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return AgentsMd {
                text: None,
                problem: None,
            };
        }
        Err(e) => {
            return AgentsMd {
                text: None,
                problem: Some(SkillDiagnostic::dropped(
                    path,
                    format!("AGENTS.md cannot be read, so the agent is not given it: {e}"),
                )),
            };
        }
    };
    let text = text.trim();
    if text.len() <= AGENTS_MD_MAX {
        return AgentsMd {
            text: (!text.is_empty()).then(|| text.to_string()),
            problem: None,
        };
    }
    let mut end = AGENTS_MD_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    AgentsMd {
        text: Some(format!("{}\n[… AGENTS.md cut]", &text[..end])),
        problem: Some(SkillDiagnostic::warning(
            path,
            format!(
                "AGENTS.md is {} bytes: the agent is given its first {AGENTS_MD_MAX}",
                text.len()
            ),
        )),
    }
}

/// What building a session's agent setup in the workspace `root` finds
/// wrong, read as [`agent_setup`] reads it ([`SetupFiles`]).
pub(crate) fn setup_diagnostics(root: &Path) -> Vec<SkillDiagnostic> {
    SetupFiles::read(root).diagnostics
}

/// The top of the repository's listing (`repo_tree`), so the model knows
/// the layout before its first call.
async fn repository_bundle(tools: &ToolRegistry) -> Option<String> {
    let tree: &Arc<dyn Tool> = tools.get("repo_tree")?;
    let result = tree
        .invoke(ToolContext::new("context-bundle"), Arc::default())
        .await
        .ok()?;
    if !result.ok {
        return None;
    }
    let text = result.text_content();
    let mut lines: Vec<&str> = text.lines().take(BUNDLE_LINES + 1).collect();
    if lines.len() > BUNDLE_LINES {
        lines.truncate(BUNDLE_LINES);
        lines.push("[… more files]");
    }
    Some(lines.join("\n"))
}

/// A session's [`AgentSetup`], kept between its turns: building it walks
/// the workspace (the repository bundle), loads the skills and reads
/// AGENTS.md, which would otherwise be paid again by every turn.
///
/// What it was built from may change: the turn driver drops it after a
/// turn that ran a tool that may change the workspace, and a stamp of the
/// workspace (AGENTS.md, the root folder, the skills folder: a few `stat`
/// calls) is compared before every use, so an edit made outside the
/// session's turns is seen too.
///
/// The host's tools are part of the setup too: their registry is rebuilt
/// (a new `Arc`) only when a source's list moved, so the kept setup is used
/// while it was built with the very registry of this turn.
#[derive(Default)]
pub(crate) struct SetupCache {
    kept: std::sync::Mutex<Option<KeptSetup>>,
}

/// A setup and what it was built from.
struct KeptSetup {
    stamp: WorkspaceStamp,
    host: Arc<ToolRegistry>,
    setup: Arc<AgentSetup>,
}

impl SetupCache {
    /// The setup of `created`'s session with `host`'s tools: the kept one
    /// while the workspace looks the same and the host's tools are the
    /// same, else built anew (and kept).
    pub(crate) async fn setup(
        &self,
        created: &SessionCreated,
        host: &Arc<ToolRegistry>,
        commands: CommandLimits,
    ) -> Result<Arc<AgentSetup>, SessionError> {
        let stamp = WorkspaceStamp::of(&created.workspace_path);
        if let Some(kept) = &*self.lock()
            && kept.stamp == stamp
            && Arc::ptr_eq(&kept.host, host)
        {
            return Ok(kept.setup.clone());
        }
        // The stamp is taken before building: a change made meanwhile
        // makes the next turn build again.
        // Boxed: building walks the workspace and loads the skills, a large
        // future that would otherwise make every turn's future as large
        // (copied whole each time it moves), though most turns keep theirs.
        let setup = Arc::new(Box::pin(agent_setup(created, host, commands)).await?);
        *self.lock() = Some(KeptSetup {
            stamp,
            host: host.clone(),
            setup: setup.clone(),
        });
        Ok(setup)
    }

    /// What the kept setup found wrong, while the workspace `root` looks as
    /// it did when it was built (the same stamp the turns compare): the
    /// answer reading the files again would give, without reading them.
    pub(crate) fn current_diagnostics(&self, root: &Path) -> Option<Vec<SkillDiagnostic>> {
        let stamp = WorkspaceStamp::of(root);
        let kept = self.lock();
        let kept = kept.as_ref().filter(|kept| kept.stamp == stamp)?;
        Some(kept.setup.diagnostics.clone())
    }

    /// Drops the kept setup (the workspace may have changed).
    pub(crate) fn invalidate(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<KeptSetup>> {
        // Every update is one replace: a poisoned lock holds a whole value.
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What a setup was built from, as cheaply seen as possible: the
/// modification time and length of AGENTS.md, and the modification times
/// of the workspace root (a file added or removed at the top) and of the
/// staged skills' folder.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WorkspaceStamp {
    agents_md: Option<(std::time::SystemTime, u64)>,
    root: Option<std::time::SystemTime>,
    skills: Option<std::time::SystemTime>,
}

impl WorkspaceStamp {
    fn of(root: &Path) -> Self {
        let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
        Self {
            agents_md: std::fs::metadata(root.join("AGENTS.md"))
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len()))),
            root: modified(root),
            skills: modified(&root.join(".agents").join("skills")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roundtable_skills::DiagnosticKind;

    use super::*;

    #[test]
    fn a_workspace_without_skills_or_agents_md_has_nothing_wrong() {
        let root = tempfile::tempdir().unwrap();
        assert!(setup_diagnostics(root.path()).is_empty());
    }

    #[test]
    fn dropped_skills_and_an_agents_md_cut_or_unreadable_are_found() {
        let root = tempfile::tempdir().unwrap();
        let broken = root.path().join(".agents/skills/broken");
        std::fs::create_dir_all(&broken).unwrap();
        std::fs::write(broken.join("SKILL.md"), "---\nname: broken\n---\n").unwrap();
        std::fs::write(root.path().join("AGENTS.md"), "é".repeat(AGENTS_MD_MAX)).unwrap();
        let found = setup_diagnostics(root.path());
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].kind, DiagnosticKind::Dropped);
        assert!(found[0].path.ends_with("broken/SKILL.md"));
        assert_eq!(found[1].kind, DiagnosticKind::Warning);
        assert!(found[1].path.ends_with("AGENTS.md"));
        // The prompt still carries the part that fits.
        let text = read_agents_md(root.path()).text.unwrap();
        assert!(text.ends_with("[… AGENTS.md cut]"));

        // An AGENTS.md that is no file cannot be read: it is left out.
        std::fs::remove_file(root.path().join("AGENTS.md")).unwrap();
        std::fs::create_dir(root.path().join("AGENTS.md")).unwrap();
        let read = read_agents_md(root.path());
        assert!(read.text.is_none());
        assert_eq!(read.problem.unwrap().kind, DiagnosticKind::Dropped);
    }
}
