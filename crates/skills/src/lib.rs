//! Skills for roundtable bots: reusable instructions an agent pulls in on
//! demand, and the agent-context layer every agent reads.
//!
//! A skill is a directory `skills/<name>/` holding a `SKILL.md` (YAML
//! frontmatter with `name` and `description`, then Markdown) and any helper
//! files. Only names and descriptions reach the model, as an
//! `<available_skills>` catalogue in the system prompt; the model reads a
//! full SKILL.md when a task matches (progressive disclosure). This crate
//! loads and validates skills, renders the catalogue, resolves names, stages
//! skill directories into an agent's workspace and builds phase prompts. It
//! never runs a skill.
//!
//! ```
//! use roundtable_skills::{available_skills_xml, load_skills, DiagnosticKind};
//!
//! let root = tempfile::tempdir().unwrap();
//! let dir = root.path().join("pr-review");
//! std::fs::create_dir(&dir).unwrap();
//! std::fs::write(
//!     dir.join("SKILL.md"),
//!     "---\nname: pr-review\ndescription: Review pull requests.\n---\n# PR review\n",
//! )
//! .unwrap();
//! let broken = root.path().join("broken");
//! std::fs::create_dir(&broken).unwrap();
//! std::fs::write(broken.join("SKILL.md"), "---\nname: broken\n---\n").unwrap();
//!
//! let loaded = load_skills([root.path()]);
//! assert_eq!(loaded.skills.len(), 1);
//! assert_eq!(loaded.diagnostics[0].kind, DiagnosticKind::Dropped);
//! assert!(available_skills_xml(loaded.listed()).contains("<name>pr-review</name>"));
//! ```
//!
//! The root holds what a host loads and shows skills with; the rest is
//! reached through its module ([`agent_context`], [`stage`], [`phase`],
//! [`workflow`], [`validate`], ...).
//!
//! - Loading: [`load_skills`], [`load::load_skill_file`], [`Skill::from_markdown`]
//!   give skills plus [`SkillDiagnostic`]s; one bad file never fails a load.
//!   Discovery matches pi-coding-agent (ignore files honoured, bare Markdown
//!   files at the top of a root loaded); so do the name rules, except that a
//!   missing name drops the skill (the format requires one) and an unsafe
//!   name is refused.
//! - Validation: [`validate::validate_name`], [`validate::validate_name_safety`].
//! - Catalogue: [`available_skills_xml`], [`skills_prompt_section`].
//! - The `read_skill` tool: [`ReadSkill`], a `roundtable_tools::Tool`.
//! - By name: [`SkillLibrary`] (search bases, [`SkillLibrary::resolve_skill_paths`],
//!   [`SkillLibrary::load_skill_raw`], [`SkillLibrary::stage`]).
//! - Staging: [`stage::stage_dirs`], [`stage::clear_staging`], [`StageMode`].
//! - Agent context: [`load_agent_context`], [`agent_context::write_agents_md`].
//! - Phase prompt: [`phase::build_phase_prompt`], [`phase::render_template`],
//!   [`phase::missing_placeholders`].
//! - Workflow files: [`Workflow`] (phases of prompts and skills, checked
//!   with [`WorkflowDiagnostic`]s); the sessions crate runs them.

pub mod agent_context;
mod catalogue;
pub mod diagnostic;
mod error;
mod frontmatter;
mod ignore_rules;
pub mod library;
pub mod load;
pub mod phase;
mod read_skill;
mod skill;
pub mod stage;
pub mod validate;
pub mod workflow;

pub use agent_context::load_agent_context;
pub use catalogue::{SkillReader, available_skills_xml, skills_prompt_section};
pub use diagnostic::{DiagnosticKind, SkillDiagnostic};
pub use error::SkillsError;
pub use library::SkillLibrary;
pub use load::{LoadedSkills, load_skills, load_skills_from_dir};
pub use read_skill::ReadSkill;
pub use skill::Skill;
pub use stage::StageMode;
pub use workflow::{Workflow, WorkflowDiagnostic};
