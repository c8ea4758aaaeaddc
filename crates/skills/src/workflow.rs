//! Workflow files: the phases a session runs, each a prompt template, a
//! set of skills to stage, or both.
//!
//! ```yaml
//! name: review-and-fix          # optional; default: the file's stem
//! phases:
//!   - name: triage
//!     skills: [issue-triage, pr-review]   # the first is the primary skill
//!   - name: fix
//!     prompt: prompts/fix.md              # relative to the workflow file
//!     skill: coding                       # sugar for skills: [coding]
//!     gate: approval                      # a human approves before it starts
//! ```
//!
//! The declaration lives here, with the skills, rather than with the
//! sessions that run it: a phase is a declaration of which skills to stage
//! and which prompt to build, and checking it needs exactly what this
//! crate owns (flat skill names, resolution over the search bases, the
//! prompt rules of [`build_phase_prompt`](crate::phase::build_phase_prompt)). A
//! file can then be checked without a session engine (an editor, a CI
//! lint). The gate is only declared here; the sessions crate gives it its
//! meaning.
//!
//! Parsing never panics and never stops at the first problem it can get
//! past: every phase is checked, and all findings come back as
//! [`WorkflowDiagnostic`]s with a line and column where the YAML gives one.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::library::{SkillLibrary, is_valid_skill_ref};
use crate::validate::MAX_NAME_LENGTH;

/// The fields a phase may have.
const PHASE_FIELDS: [&str; 5] = ["name", "prompt", "skill", "skills", "gate"];

/// The fields a workflow file may have at its top level.
const WORKFLOW_FIELDS: [&str; 3] = ["name", "description", "phases"];

/// A workflow, checked: every phase has a valid unique name, its skills
/// resolve, and its prompt template was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    /// The workflow's name (`name:`, or the file's stem): the key its
    /// progress is stored under, so a run can resume.
    pub name: String,
    /// What the workflow is for, if it says.
    pub description: Option<String>,
    /// The phases, in the order they run.
    pub phases: Vec<WorkflowPhase>,
}

/// One phase of a [`Workflow`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowPhase {
    /// The phase's name, unique in its workflow.
    pub name: String,
    /// The skills to stage, primary first (`skill: x` is `skills: [x]`).
    pub skills: Vec<String>,
    /// Where each skill of [`skills`](Self::skills) resolved to, in order.
    pub skill_dirs: Vec<PathBuf>,
    /// The prompt template, when the phase has one.
    pub prompt: Option<PromptTemplate>,
    /// What must happen before the phase starts.
    pub gate: PhaseGate,
}

/// A phase's prompt template, read when the workflow was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    /// The file, as resolved against the workflow file's folder.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

/// What must happen before a phase starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseGate {
    /// Nothing: the phase starts when the one before it completed.
    #[default]
    None,
    /// A human approves the phase first; a denial stops the workflow.
    Approval,
}

/// What a [`WorkflowDiagnostic`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowDiagnosticKind {
    /// The file is not valid YAML (or not a mapping at the top).
    Syntax,
    /// The file cannot be read.
    Unreadable,
    /// A field this format does not know (a typo, usually).
    UnknownField,
    /// A field of the wrong type or value (`skills: 3`, `gate: maybe`).
    InvalidValue,
    /// No `phases:`, or an empty list.
    NoPhases,
    /// A phase without a name, or with one that is not flat and
    /// alphanumeric (`[a-zA-Z0-9_-]`, at most 64 characters).
    InvalidPhaseName,
    /// Two phases share a name.
    DuplicatePhase,
    /// A phase declares both `skill:` and `skills:`.
    ConflictingSkillFields,
    /// A phase has neither `prompt:` nor skills: nothing to say.
    NothingToPrompt,
    /// A skill name that is not a flat reference (`[a-zA-Z0-9_-]+`).
    InvalidSkillName,
    /// A skill no search base holds.
    UnknownSkill,
    /// A prompt template that cannot be read.
    UnreadableTemplate,
}

/// One problem found in a workflow file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkflowDiagnostic {
    /// What kind of problem.
    pub kind: WorkflowDiagnosticKind,
    /// The phase it is about, when it is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The line (from 1) in the workflow file, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The column (from 1), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
    /// A human-readable explanation.
    pub message: String,
}

impl fmt::Display for WorkflowDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "{line}:{column}: ")?,
            (Some(line), None) => write!(f, "{line}: ")?,
            _ => {}
        }
        if let Some(phase) = &self.phase {
            write!(f, "phase {phase:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// A workflow file that does not check out: every problem found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_diagnostics(.path.as_deref(), .diagnostics))]
pub struct WorkflowError {
    /// The file, when the workflow came from one.
    pub path: Option<PathBuf>,
    /// What is wrong, in file order as far as known.
    pub diagnostics: Vec<WorkflowDiagnostic>,
}

fn render_diagnostics(path: Option<&Path>, diagnostics: &[WorkflowDiagnostic]) -> String {
    let prefix = path
        .map(|p| format!("{}:", p.display()))
        .unwrap_or_default();
    let lines: Vec<String> = diagnostics
        .iter()
        .map(|d| match d.line {
            Some(_) => format!("{prefix}{d}"),
            None if prefix.is_empty() => d.to_string(),
            None => format!("{prefix} {d}"),
        })
        .collect();
    lines.join("\n")
}

impl Workflow {
    /// Reads and checks the workflow file at `path`. Prompt templates are
    /// read relative to its folder, skills resolved in `library`; the name
    /// defaults to the file's stem.
    pub fn load(path: impl AsRef<Path>, library: &SkillLibrary) -> Result<Self, WorkflowError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|err| WorkflowError {
            path: Some(path.to_path_buf()),
            diagnostics: vec![diagnostic(
                WorkflowDiagnosticKind::Unreadable,
                None,
                None,
                format!("cannot read the workflow file: {err}"),
            )],
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workflow".to_owned());
        Self::parse(&text, base, &stem, library).map_err(|mut err| {
            err.path = Some(path.to_path_buf());
            err
        })
    }

    /// Checks the workflow in `text`: templates are read relative to
    /// `base`, skills resolved in `library`, and `default_name` names the
    /// workflow when it has no `name:`.
    ///
    /// ```
    /// use roundtable_skills::{SkillLibrary, Workflow};
    /// use roundtable_skills::workflow::WorkflowDiagnosticKind;
    ///
    /// let root = tempfile::tempdir().unwrap();
    /// let skill = root.path().join("skills/pr-review");
    /// std::fs::create_dir_all(&skill).unwrap();
    /// std::fs::write(skill.join("SKILL.md"), "---\nname: pr-review\ndescription: d\n---\n").unwrap();
    /// let library = SkillLibrary::new(root.path());
    ///
    /// let workflow = Workflow::parse(
    ///     "phases:\n  - name: review\n    skill: pr-review\n",
    ///     root.path(),
    ///     "review",
    ///     &library,
    /// )
    /// .unwrap();
    /// assert_eq!(workflow.phases[0].skills, ["pr-review"]);
    ///
    /// let err = Workflow::parse(
    ///     "phases:\n  - name: review\n    skil: pr-review\n",
    ///     root.path(),
    ///     "review",
    ///     &library,
    /// )
    /// .unwrap_err();
    /// assert_eq!(err.diagnostics[0].kind, WorkflowDiagnosticKind::UnknownField);
    /// assert_eq!(err.diagnostics[0].line, Some(3));
    /// ```
    pub fn parse(
        text: &str,
        base: &Path,
        default_name: &str,
        library: &SkillLibrary,
    ) -> Result<Self, WorkflowError> {
        let mut check = Check {
            text,
            base,
            library,
            diagnostics: Vec::new(),
        };
        let workflow = check.workflow(default_name);
        match workflow {
            Some(workflow) if check.diagnostics.is_empty() => Ok(workflow),
            _ => Err(WorkflowError {
                path: None,
                diagnostics: check.diagnostics,
            }),
        }
    }

    /// The phase called `name`, with its index.
    pub fn phase(&self, name: &str) -> Option<(usize, &WorkflowPhase)> {
        self.phases.iter().enumerate().find(|(_, p)| p.name == name)
    }
}

/// The top level as the YAML gives it: the phases keep their positions.
#[derive(Deserialize)]
struct RawWorkflow {
    #[serde(default)]
    phases: Option<Vec<serde_saphyr::Spanned<Value>>>,
}

/// One check of one file, collecting diagnostics.
struct Check<'a> {
    text: &'a str,
    base: &'a Path,
    library: &'a SkillLibrary,
    diagnostics: Vec<WorkflowDiagnostic>,
}

impl Check<'_> {
    fn report(
        &mut self,
        kind: WorkflowDiagnosticKind,
        phase: Option<&str>,
        at: Option<(u64, u64)>,
        message: impl Into<String>,
    ) {
        self.diagnostics
            .push(diagnostic(kind, phase, at, message.into()));
    }

    fn yaml_error(&mut self, err: &serde_saphyr::Error) {
        let at = err
            .location()
            .filter(|l| l.line() > 0)
            .map(|l| (l.line(), l.column()));
        self.report(WorkflowDiagnosticKind::Syntax, None, at, err.to_string());
    }

    fn workflow(&mut self, default_name: &str) -> Option<Workflow> {
        // The whole document first: syntax errors, and the top-level keys.
        let top = self.top_level()?;
        let name = self.workflow_name(&top, default_name);
        let description = top
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        // Then the phases again, with their positions.
        let raw_phases = self.raw_phases()?;
        let mut names = HashSet::new();
        let mut phases = Vec::with_capacity(raw_phases.len());
        for (index, raw) in raw_phases.iter().enumerate() {
            let at = Some((raw.referenced.line(), raw.referenced.column()));
            if let Some(phase) = self.phase(index, &raw.value, at, &mut names) {
                phases.push(phase);
            }
        }
        Some(Workflow {
            name,
            description,
            phases,
        })
    }

    /// The document's top-level mapping; its unknown keys are reported.
    fn top_level(&mut self) -> Option<Map<String, Value>> {
        let top: Value = match serde_saphyr::from_str_with_options(self.text, yaml_options()) {
            Ok(value) => value,
            Err(err) => {
                self.yaml_error(&err);
                return None;
            }
        };
        let Value::Object(top) = top else {
            self.report(
                WorkflowDiagnosticKind::Syntax,
                None,
                None,
                "a workflow file is a mapping with a `phases:` list",
            );
            return None;
        };
        for key in top.keys() {
            if !WORKFLOW_FIELDS.contains(&key.as_str()) {
                let at = top_level_key_line(self.text, key).map(|line| (line, 1));
                self.report(
                    WorkflowDiagnosticKind::UnknownField,
                    None,
                    at,
                    format!(
                        "unknown field `{key}` (expected one of: {})",
                        WORKFLOW_FIELDS.join(", ")
                    ),
                );
            }
        }
        Some(top)
    }

    /// The workflow's `name`, or `default_name`.
    fn workflow_name(&mut self, top: &Map<String, Value>, default_name: &str) -> String {
        match top.get("name") {
            None | Some(Value::Null) => default_name.to_owned(),
            Some(Value::String(name)) => name.clone(),
            Some(other) => {
                self.report(
                    WorkflowDiagnosticKind::InvalidValue,
                    None,
                    top_level_key_line(self.text, "name").map(|line| (line, 1)),
                    format!("`name` must be a string, not {}", kind_of(other)),
                );
                default_name.to_owned()
            }
        }
    }

    /// The phases with their positions; none at all is reported.
    fn raw_phases(&mut self) -> Option<Vec<serde_saphyr::Spanned<Value>>> {
        let raw: RawWorkflow = match serde_saphyr::from_str_with_options(self.text, yaml_options())
        {
            Ok(raw) => raw,
            Err(err) => {
                let at = err
                    .location()
                    .filter(|l| l.line() > 0)
                    .map(|l| (l.line(), l.column()));
                self.report(
                    WorkflowDiagnosticKind::InvalidValue,
                    None,
                    at,
                    format!("`phases` must be a list of phases: {err}"),
                );
                return None;
            }
        };
        let raw_phases = raw.phases.unwrap_or_default();
        if raw_phases.is_empty() {
            self.report(
                WorkflowDiagnosticKind::NoPhases,
                None,
                None,
                "the workflow has no phases (`phases:` is missing or empty)",
            );
        }
        Some(raw_phases)
    }

    /// Checks phase `index` (at `at` in the file); the phase if nothing is
    /// wrong with it. `names` collects the phase names seen so far.
    fn phase(
        &mut self,
        index: usize,
        raw: &Value,
        at: Option<(u64, u64)>,
        names: &mut HashSet<String>,
    ) -> Option<WorkflowPhase> {
        let Value::Object(fields) = raw else {
            self.report(
                WorkflowDiagnosticKind::InvalidValue,
                None,
                at,
                format!(
                    "phase {} must be a mapping with a `name`, not {}",
                    index + 1,
                    kind_of(raw)
                ),
            );
            return None;
        };
        let before = self.diagnostics.len();
        let name = self.phase_name(index, fields, at, names);
        let phase = Some(name.as_str());
        self.unknown_phase_fields(fields, phase, at);
        let (skills, declares_skills) = self.phase_skills(fields, phase, at);
        let prompt_path = self.string_field(fields, "prompt", phase, at);
        let gate = self.phase_gate(fields, phase, at);
        if prompt_path.is_none() && !declares_skills {
            self.report(
                WorkflowDiagnosticKind::NothingToPrompt,
                phase,
                at,
                "has neither `prompt:` nor any skill (`skill:`/`skills:`): there is nothing to ask",
            );
        }
        let skill_dirs = self.skill_dirs(&skills, phase, at);
        let prompt = prompt_path.and_then(|relative| self.prompt_template(&relative, phase, at));
        (self.diagnostics.len() == before).then_some(WorkflowPhase {
            name,
            skills,
            skill_dirs,
            prompt,
            gate,
        })
    }

    /// The phase's name (`#<n>` when it has none); an invalid or repeated
    /// name is reported.
    fn phase_name(
        &mut self,
        index: usize,
        fields: &Map<String, Value>,
        at: Option<(u64, u64)>,
        names: &mut HashSet<String>,
    ) -> String {
        use WorkflowDiagnosticKind as Kind;
        let name = match fields.get("name") {
            Some(Value::String(name)) => name.clone(),
            Some(other) => {
                self.report(
                    Kind::InvalidPhaseName,
                    None,
                    at,
                    format!(
                        "phase {}: `name` must be a string, not {}",
                        index + 1,
                        kind_of(other)
                    ),
                );
                return format!("#{}", index + 1);
            }
            None => {
                self.report(
                    Kind::InvalidPhaseName,
                    None,
                    at,
                    format!("phase {} has no `name`", index + 1),
                );
                return format!("#{}", index + 1);
            }
        };
        if name.starts_with('#') {
            return name;
        }
        let phase = Some(name.as_str());
        if !is_valid_skill_ref(&name) || name.len() > MAX_NAME_LENGTH {
            self.report(
                Kind::InvalidPhaseName,
                phase,
                at,
                format!(
                    "invalid phase name {name:?}: use letters, digits, '_' and '-' \
                     (at most {MAX_NAME_LENGTH} characters)"
                ),
            );
        } else if !names.insert(name.clone()) {
            self.report(
                Kind::DuplicatePhase,
                phase,
                at,
                format!("another phase is already called {name:?}"),
            );
        }
        name
    }

    fn unknown_phase_fields(
        &mut self,
        fields: &Map<String, Value>,
        phase: Option<&str>,
        at: Option<(u64, u64)>,
    ) {
        for key in fields.keys() {
            if !PHASE_FIELDS.contains(&key.as_str()) {
                self.report(
                    WorkflowDiagnosticKind::UnknownField,
                    phase,
                    field_line(self.text, at, key),
                    format!(
                        "unknown field `{key}` (expected one of: {})",
                        PHASE_FIELDS.join(", ")
                    ),
                );
            }
        }
    }

    /// The phase's skills from `skill:` or `skills:` (not both), and whether
    /// it declares any.
    fn phase_skills(
        &mut self,
        fields: &Map<String, Value>,
        phase: Option<&str>,
        at: Option<(u64, u64)>,
    ) -> (Vec<String>, bool) {
        let skill = self.string_field(fields, "skill", phase, at);
        let skills = self.skill_list(fields, phase, at);
        let declares_skills =
            skill.is_some() || skills.as_ref().is_some_and(|names| !names.is_empty());
        let skills = match (skill, skills) {
            (Some(_), Some(_)) => {
                self.report(
                    WorkflowDiagnosticKind::ConflictingSkillFields,
                    phase,
                    at,
                    "declares both `skill:` and `skills:` (use one)",
                );
                Vec::new()
            }
            (Some(skill), None) => vec![skill],
            (None, Some(skills)) => skills,
            (None, None) => Vec::new(),
        };
        (skills, declares_skills)
    }

    /// The names listed at `skills:`, if any; other values are reported.
    fn skill_list(
        &mut self,
        fields: &Map<String, Value>,
        phase: Option<&str>,
        at: Option<(u64, u64)>,
    ) -> Option<Vec<String>> {
        let items = match fields.get("skills") {
            None | Some(Value::Null) => return None,
            Some(Value::Array(items)) => items,
            Some(other) => {
                self.report(
                    WorkflowDiagnosticKind::InvalidValue,
                    phase,
                    field_line(self.text, at, "skills"),
                    format!("`skills` must be a list of names, not {}", kind_of(other)),
                );
                return None;
            }
        };
        let mut names = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::String(s) => names.push(s.clone()),
                other => self.report(
                    WorkflowDiagnosticKind::InvalidValue,
                    phase,
                    field_line(self.text, at, "skills"),
                    format!("`skills` lists names, not {}", kind_of(other)),
                ),
            }
        }
        Some(names)
    }

    fn phase_gate(
        &mut self,
        fields: &Map<String, Value>,
        phase: Option<&str>,
        at: Option<(u64, u64)>,
    ) -> PhaseGate {
        let Some(value) = fields.get("gate").filter(|v| !v.is_null()) else {
            return PhaseGate::None;
        };
        PhaseGate::deserialize(value).unwrap_or_else(|_| {
            self.report(
                WorkflowDiagnosticKind::InvalidValue,
                phase,
                field_line(self.text, at, "gate"),
                format!("`gate` is `approval` or `none`, not {value}"),
            );
            PhaseGate::None
        })
    }

    /// The folders of `skills`, resolved in the library; an invalid or
    /// unknown name is reported.
    fn skill_dirs(
        &mut self,
        skills: &[String],
        phase: Option<&str>,
        at: Option<(u64, u64)>,
    ) -> Vec<PathBuf> {
        let mut skill_dirs = Vec::with_capacity(skills.len());
        for skill in skills {
            if !is_valid_skill_ref(skill) {
                self.report(
                    WorkflowDiagnosticKind::InvalidSkillName,
                    phase,
                    field_line(self.text, at, "skill"),
                    format!(
                        "invalid skill name {skill:?} (only letters, digits, '_' and '-' are allowed)"
                    ),
                );
                continue;
            }
            match self.library.resolve_skill_path(skill) {
                Ok(dir) => skill_dirs.push(dir),
                Err(_) => {
                    let searched: Vec<String> = self
                        .library
                        .bases()
                        .iter()
                        .map(|b| b.join(skill).join("SKILL.md").display().to_string())
                        .collect();
                    self.report(
                        WorkflowDiagnosticKind::UnknownSkill,
                        phase,
                        field_line(self.text, at, "skill"),
                        format!(
                            "unknown skill {skill:?} (looked for {})",
                            searched.join(", ")
                        ),
                    );
                }
            }
        }
        skill_dirs
    }

    /// Reads the prompt template at `relative` (to the workflow's folder).
    fn prompt_template(
        &mut self,
        relative: &str,
        phase: Option<&str>,
        at: Option<(u64, u64)>,
    ) -> Option<PromptTemplate> {
        let path = self.base.join(relative);
        match std::fs::read_to_string(&path) {
            Ok(text) => Some(PromptTemplate { path, text }),
            Err(err) => {
                self.report(
                    WorkflowDiagnosticKind::UnreadableTemplate,
                    phase,
                    field_line(self.text, at, "prompt"),
                    format!("cannot read the prompt template {}: {err}", path.display()),
                );
                None
            }
        }
    }

    /// The string at `key`, if any; a value of another type is reported.
    fn string_field(
        &mut self,
        fields: &Map<String, Value>,
        key: &str,
        phase: Option<&str>,
        at: Option<(u64, u64)>,
    ) -> Option<String> {
        match fields.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                self.report(
                    WorkflowDiagnosticKind::InvalidValue,
                    phase,
                    field_line(self.text, at, key),
                    format!("`{key}` must be a string, not {}", kind_of(other)),
                );
                None
            }
        }
    }
}

/// How workflow files are read: YAML 1.2 booleans (`on`, `yes` stay
/// strings, as for SKILL.md), and errors without a source snippet (the
/// diagnostic carries the position).
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        with_snippet: false,
    }
}

fn diagnostic(
    kind: WorkflowDiagnosticKind,
    phase: Option<&str>,
    at: Option<(u64, u64)>,
    message: String,
) -> WorkflowDiagnostic {
    WorkflowDiagnostic {
        kind,
        phase: phase.map(str::to_owned),
        line: at.map(|(line, _)| line),
        column: at.map(|(_, column)| column),
        message,
    }
}

/// The line of `key:` at the top level (no indentation), if it is there.
fn top_level_key_line(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .position(|line| is_key_line(line, key))
        .and_then(|i| u64::try_from(i + 1).ok())
}

/// Where `key:` is written in the phase that starts at `at`: the first line
/// from the phase's start, indented, that starts with it. Falls back to the
/// phase's own position.
fn field_line(text: &str, at: Option<(u64, u64)>, key: &str) -> Option<(u64, u64)> {
    let (line, _) = at?;
    let start = usize::try_from(line).ok()?.saturating_sub(1);
    text.lines()
        .enumerate()
        .skip(start)
        .take_while(|(i, l)| *i == start || !l.trim_start().starts_with("- "))
        .find_map(|(i, l)| {
            let trimmed = l.trim_start().trim_start_matches("- ");
            let column = l.len() - trimmed.len() + 1;
            is_key_line(trimmed, key).then(|| {
                (
                    u64::try_from(i + 1).unwrap_or(line),
                    u64::try_from(column).unwrap_or(1),
                )
            })
        })
        .or(at)
}

fn is_key_line(line: &str, key: &str) -> bool {
    line.strip_prefix(key)
        .is_some_and(|rest| rest.trim_start().starts_with(':'))
}

/// How a JSON value is named in a diagnostic.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            for name in ["pr-review", "issue-triage"] {
                let skill = dir.path().join("skills").join(name);
                std::fs::create_dir_all(&skill).unwrap();
                std::fs::write(
                    skill.join("SKILL.md"),
                    format!("---\nname: {name}\ndescription: d\n---\n"),
                )
                .unwrap();
            }
            std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
            std::fs::write(dir.path().join("prompts/fix.md"), "Fix {{issue}}.").unwrap();
            Self { dir }
        }

        fn parse(&self, text: &str) -> Result<Workflow, WorkflowError> {
            Workflow::parse(
                text,
                self.dir.path(),
                "wf",
                &SkillLibrary::new(self.dir.path()),
            )
        }

        fn diagnostics(&self, text: &str) -> Vec<WorkflowDiagnostic> {
            self.parse(text).unwrap_err().diagnostics
        }
    }

    #[test]
    fn a_valid_workflow_reads_every_form() {
        let fx = Fixture::new();
        let workflow = fx
            .parse(
                "name: review-and-fix\n\
                 description: Triage, then fix.\n\
                 phases:\n\
                 \x20 - name: triage\n\
                 \x20   skills: [issue-triage, pr-review]\n\
                 \x20 - name: review\n\
                 \x20   skill: pr-review\n\
                 \x20 - name: fix\n\
                 \x20   prompt: prompts/fix.md\n\
                 \x20   skills: [pr-review]\n\
                 \x20   gate: approval\n",
            )
            .unwrap();
        assert_eq!(workflow.name, "review-and-fix");
        assert_eq!(workflow.description.as_deref(), Some("Triage, then fix."));
        let names: Vec<&str> = workflow.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["triage", "review", "fix"]);
        assert_eq!(workflow.phases[0].skills, ["issue-triage", "pr-review"]);
        assert_eq!(workflow.phases[1].skills, ["pr-review"]);
        assert!(workflow.phases[1].skill_dirs[0].ends_with("skills/pr-review"));
        let fix = &workflow.phases[2];
        assert_eq!(fix.prompt.as_ref().unwrap().text, "Fix {{issue}}.");
        assert_eq!(fix.gate, PhaseGate::Approval);
        assert_eq!(workflow.phases[0].gate, PhaseGate::None);
        assert_eq!(workflow.phase("fix").map(|(i, _)| i), Some(2));
    }

    #[test]
    fn the_name_defaults_to_the_file_stem() {
        let fx = Fixture::new();
        let path = fx.dir.path().join("triage.yaml");
        std::fs::write(&path, "phases:\n  - name: t\n    skill: issue-triage\n").unwrap();
        let workflow = Workflow::load(&path, &SkillLibrary::new(fx.dir.path())).unwrap();
        assert_eq!(workflow.name, "triage");
        let missing = Workflow::load(fx.dir.path().join("nope.yaml"), &SkillLibrary::new("/"));
        let err = missing.unwrap_err();
        assert_eq!(err.diagnostics[0].kind, WorkflowDiagnosticKind::Unreadable);
        assert!(err.to_string().contains("nope.yaml"));
    }

    fn kinds(diagnostics: &[WorkflowDiagnostic]) -> Vec<WorkflowDiagnosticKind> {
        diagnostics.iter().map(|d| d.kind).collect()
    }

    #[test]
    fn each_problem_has_its_diagnostic() {
        use WorkflowDiagnosticKind as Kind;
        let fx = Fixture::new();
        let cases: [(&str, Kind, Option<u64>); 12] = [
            (
                "phases:\n  - name: a\n    prompt: prompts/fix.md\n    skil: pr-review\n",
                Kind::UnknownField,
                Some(4),
            ),
            (
                "phases:\n  - name: a\n    skill: pr-review\nphase: 1\n",
                Kind::UnknownField,
                Some(4),
            ),
            (
                "phases:\n  - name: a\n    skill: pr-review\n    skills: [issue-triage]\n",
                Kind::ConflictingSkillFields,
                Some(2),
            ),
            ("phases:\n  - name: a\n", Kind::NothingToPrompt, Some(2)),
            (
                "phases:\n  - name: a\n    skill: nope\n",
                Kind::UnknownSkill,
                Some(3),
            ),
            (
                "phases:\n  - name: a\n    skill: ../etc\n",
                Kind::InvalidSkillName,
                Some(3),
            ),
            (
                "phases:\n  - name: 'a b'\n    skill: pr-review\n",
                Kind::InvalidPhaseName,
                Some(2),
            ),
            (
                "phases:\n  - name: a\n    skill: pr-review\n  - name: a\n    skill: pr-review\n",
                Kind::DuplicatePhase,
                Some(4),
            ),
            (
                "phases:\n  - name: a\n    prompt: prompts/missing.md\n",
                Kind::UnreadableTemplate,
                Some(3),
            ),
            (
                "phases:\n  - name: a\n    skill: [pr-review\n",
                Kind::Syntax,
                Some(3),
            ),
            ("phases: []\n", Kind::NoPhases, None),
            (
                "phases:\n  - name: a\n    skill: pr-review\n    gate: maybe\n",
                Kind::InvalidValue,
                Some(4),
            ),
        ];
        for (text, kind, line) in cases {
            let diagnostics = fx.diagnostics(text);
            assert_eq!(kinds(&diagnostics), [kind], "{text}: {diagnostics:?}");
            assert_eq!(diagnostics[0].line, line, "{text}: {diagnostics:?}");
            assert!(!diagnostics[0].message.is_empty());
        }
    }

    #[test]
    fn every_phase_is_checked_and_all_findings_come_back() {
        let fx = Fixture::new();
        let diagnostics = fx.diagnostics(
            "phases:\n\
             \x20 - name: one\n\
             \x20   skill: missing\n\
             \x20 - skill: pr-review\n\
             \x20 - name: three\n\
             \x20   prompt: prompts/fix.md\n\
             \x20   colour: blue\n",
        );
        assert_eq!(
            kinds(&diagnostics),
            [
                WorkflowDiagnosticKind::UnknownSkill,
                WorkflowDiagnosticKind::InvalidPhaseName,
                WorkflowDiagnosticKind::UnknownField,
            ]
        );
        assert_eq!(diagnostics[0].phase.as_deref(), Some("one"));
        assert_eq!(diagnostics[2].line, Some(7));
        assert_eq!(diagnostics[2].column, Some(5));
        let err = fx
            .parse("phases:\n  - name: one\n    skill: missing\n")
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("3:5: phase \"one\": unknown skill")
        );
    }

    #[test]
    fn odd_documents_give_diagnostics_not_panics() {
        let fx = Fixture::new();
        for text in [
            "",
            "- a\n- b\n",
            "42",
            "phases: 3\n",
            "phases:\n  - 3\n",
            "phases:\n  - name: [x]\n",
            "phases:\n  - name: a\n    skills: [1, 2]\n",
            "name: [1]\nphases:\n  - name: a\n    skill: pr-review\n",
            "\t- :\n",
            "phases:\n  - name: a\n    skills: []\n",
        ] {
            let diagnostics = fx.diagnostics(text);
            assert!(!diagnostics.is_empty(), "{text:?}");
        }
    }
}
