//! Skills for roundtable bots.
//!
//! This crate will own SKILL.md frontmatter parsing and validation with
//! diagnostics, the `<available_skills>` catalogue, `read_skill` as a tool, name
//! resolution over search bases, staging into `<cwd>/.agents/skills/` and
//! agent-context loading. It never runs a skill.
