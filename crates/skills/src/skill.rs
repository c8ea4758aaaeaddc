//! One loaded skill and how a SKILL.md becomes one.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::diagnostic::SkillDiagnostic;
use crate::frontmatter::{json_type_name, parse_skill_markdown};
use crate::validate::{validate_description, validate_name, validate_name_safety};

/// The file every skill directory must hold.
pub(crate) const SKILL_FILE: &str = "SKILL.md";

/// Frontmatter keys with a meaning of their own; everything else lands in
/// [`Skill::extra`].
const KNOWN_KEYS: [&str; 9] = [
    "name",
    "description",
    "disable-model-invocation",
    "version",
    "tags",
    "metadata",
    "license",
    "compatibility",
    "allowed-tools",
];

/// A skill whose SKILL.md passed validation.
///
/// Only `name` and `description` ever reach a model (through the catalogue);
/// the informational fields pass through untouched for dashboards and IDEs.
/// The body is not kept: it is read on demand, which is the point of
/// progressive disclosure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    /// The skill's name, from the frontmatter. It passes
    /// [`validate_name_safety`](crate::validate::validate_name_safety); one that breaks
    /// the rules of [`validate_name`](crate::validate::validate_name) came with
    /// warnings.
    pub name: String,
    /// What the skill does and when to use it.
    pub description: String,
    /// The absolute path of its SKILL.md.
    pub file_path: PathBuf,
    /// The directory holding the SKILL.md and its scripts, references and
    /// assets. For a bare Markdown file at the top of a searched root (as
    /// pi-coding-agent loads them), the root itself.
    pub base_dir: PathBuf,
    /// `disable-model-invocation: true`: kept out of the catalogue, still
    /// readable explicitly.
    pub disable_model_invocation: bool,
    /// `version`, as text (`2.0.0`; a YAML number such as `2` becomes `"2"`).
    pub version: Option<String>,
    /// `tags`.
    pub tags: Vec<String>,
    /// `metadata`, a free-form mapping.
    pub metadata: Map<String, Value>,
    /// `license`.
    pub license: Option<String>,
    /// `compatibility`.
    pub compatibility: Option<String>,
    /// `allowed-tools`, from a list or a space-separated string.
    pub allowed_tools: Vec<String>,
    /// Any other frontmatter keys, untouched.
    pub extra: Map<String, Value>,
}

impl Skill {
    /// Whether the skill belongs in the model-facing catalogue.
    pub fn is_listed(&self) -> bool {
        !self.disable_model_invocation
    }

    /// Builds a skill from the text of the SKILL.md at `file_path`.
    ///
    /// Returns the skill (or `None` when it is dropped) and every finding
    /// about the file.
    ///
    /// Dropped: no frontmatter, frontmatter that is not valid YAML, a
    /// missing, blank or non-string `name` or `description`, and a name
    /// [`validate_name_safety`](crate::validate::validate_name_safety) refuses.
    /// Loaded with a warning, as pi-coding-agent does: a name that breaks the
    /// format rules of [`validate_name`](crate::validate::validate_name) (one warning
    /// per rule, pi's wording) or differs from its parent directory, an
    /// over-long description, a badly typed informational field.
    ///
    /// A missing name is not replaced by the directory's name, as pi does:
    /// the name is required. The diagnostic says which name pi would use.
    ///
    /// ```
    /// use std::path::Path;
    /// use roundtable_skills::Skill;
    ///
    /// let text = "---\nname: pr-review\ndescription: Review pull requests.\n---\n# PR review\n";
    /// let (skill, diagnostics) = Skill::from_markdown(Path::new("/s/pr-review/SKILL.md"), text);
    /// assert_eq!(skill.unwrap().name, "pr-review");
    /// assert!(diagnostics.is_empty());
    ///
    /// let (skill, diagnostics) = Skill::from_markdown(Path::new("/s/x/SKILL.md"), "# no frontmatter");
    /// assert!(skill.is_none());
    /// assert!(diagnostics[0].is_dropped());
    /// ```
    pub fn from_markdown(file_path: &Path, text: &str) -> (Option<Skill>, Vec<SkillDiagnostic>) {
        let mut fields = FieldReader {
            path: file_path,
            diagnostics: Vec::new(),
        };
        let markdown = match parse_skill_markdown(text) {
            Ok(markdown) => markdown,
            Err(err) => {
                fields.drop(err.to_string());
                return (None, fields.diagnostics);
            }
        };
        if !markdown.has_frontmatter {
            fields.drop("no frontmatter: name and description are required");
            return (None, fields.diagnostics);
        }
        let mut frontmatter = markdown.frontmatter;
        let base_dir = file_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();

        let description = fields.description(&frontmatter);
        let dir_name = base_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let name = fields.name(&frontmatter, dir_name.as_deref());
        let disable_model_invocation = fields.flag(&frontmatter, "disable-model-invocation");
        let version = fields.version(&frontmatter);
        let tags = fields.string_list(&frontmatter, "tags", false);
        let allowed_tools = fields.string_list(&frontmatter, "allowed-tools", true);
        let metadata = fields.mapping(&frontmatter, "metadata");
        let license = fields.optional_string(&frontmatter, "license");
        let compatibility = fields.optional_string(&frontmatter, "compatibility");

        let (Some(name), Some(description)) = (name, description) else {
            return (None, fields.diagnostics);
        };
        if fields.diagnostics.iter().any(SkillDiagnostic::is_dropped) {
            return (None, fields.diagnostics);
        }
        for key in KNOWN_KEYS {
            frontmatter.remove(key);
        }
        let skill = Skill {
            name,
            description,
            file_path: file_path.to_path_buf(),
            base_dir,
            disable_model_invocation,
            version,
            tags,
            metadata,
            license,
            compatibility,
            allowed_tools,
            extra: frontmatter,
        };
        (Some(skill), fields.diagnostics)
    }
}

/// Reads typed fields out of a frontmatter mapping, collecting diagnostics.
struct FieldReader<'a> {
    path: &'a Path,
    diagnostics: Vec<SkillDiagnostic>,
}

impl FieldReader<'_> {
    fn drop(&mut self, message: impl Into<String>) {
        self.diagnostics
            .push(SkillDiagnostic::dropped(self.path, message));
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.diagnostics
            .push(SkillDiagnostic::warning(self.path, message));
    }

    fn wrong_type(&mut self, key: &str, expected: &str, found: &Value) {
        self.warn(format!(
            "{key} must be {expected}, found {}; ignored",
            json_type_name(found)
        ));
    }

    /// `name`: a non-blank string that is safe to load, or the skill is
    /// dropped; then pi's warnings, directory mismatch first.
    fn name(&mut self, map: &Map<String, Value>, dir_name: Option<&str>) -> Option<String> {
        let name = match map.get("name") {
            Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
            None | Some(Value::Null) | Some(Value::String(_)) => {
                self.drop(match dir_name {
                    Some(dir) => format!(
                        "name is required (pi-coding-agent would use the directory name \"{dir}\")"
                    ),
                    None => "name is required".to_owned(),
                });
                return None;
            }
            Some(other) => {
                self.drop(format!(
                    "name must be a string, found {}",
                    json_type_name(other)
                ));
                return None;
            }
        };
        let refusals = validate_name_safety(&name);
        if !refusals.is_empty() {
            for refusal in refusals {
                self.drop(refusal);
            }
            return None;
        }
        if let Some(dir) = dir_name.filter(|dir| *dir != name) {
            self.warn(format!(
                "name \"{name}\" does not match parent directory \"{dir}\""
            ));
        }
        for error in validate_name(&name) {
            self.warn(error);
        }
        Some(name)
    }

    /// `description`: a string, or the skill is dropped; a blank one is
    /// dropped too, a too long one warned about.
    fn description(&mut self, map: &Map<String, Value>) -> Option<String> {
        let description = self.required_string(map, "description")?;
        for error in validate_description(&description) {
            if description.trim().is_empty() {
                self.drop(error);
            } else {
                self.warn(error);
            }
        }
        Some(description)
    }

    /// A boolean, false when absent.
    fn flag(&mut self, map: &Map<String, Value>, key: &str) -> bool {
        match map.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(flag)) => *flag,
            Some(other) => {
                self.wrong_type(key, "a boolean", other);
                false
            }
        }
    }

    /// `version`: a string, or a number taken as one.
    fn version(&mut self, map: &Map<String, Value>) -> Option<String> {
        match map.get("version") {
            None | Some(Value::Null) => None,
            Some(Value::String(v)) => Some(v.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            Some(other) => {
                self.wrong_type("version", "a string", other);
                None
            }
        }
    }

    /// A mapping, empty when absent.
    fn mapping(&mut self, map: &Map<String, Value>, key: &str) -> Map<String, Value> {
        match map.get(key) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(other) => {
                self.wrong_type(key, "a mapping", other);
                Map::new()
            }
        }
    }

    /// A required string, or the skill is dropped.
    fn required_string(&mut self, map: &Map<String, Value>, key: &str) -> Option<String> {
        match map.get(key) {
            None | Some(Value::Null) => {
                self.drop(format!("{key} is required"));
                None
            }
            Some(Value::String(value)) => Some(value.clone()),
            Some(other) => {
                self.drop(format!(
                    "{key} must be a string, found {}",
                    json_type_name(other)
                ));
                None
            }
        }
    }

    fn optional_string(&mut self, map: &Map<String, Value>, key: &str) -> Option<String> {
        match map.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(value)) => Some(value.clone()),
            Some(other) => {
                self.wrong_type(key, "a string", other);
                None
            }
        }
    }

    /// A list of strings; a single string is one item, or (when
    /// `split_string`) whitespace-separated items.
    fn string_list(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        split_string: bool,
    ) -> Vec<String> {
        match map.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(value)) if split_string => {
                value.split_whitespace().map(str::to_owned).collect()
            }
            Some(Value::String(value)) => vec![value.clone()],
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        Value::Number(n) => out.push(n.to_string()),
                        other => self.warn(format!(
                            "{key} entries must be strings, found {}; entry ignored",
                            json_type_name(other)
                        )),
                    }
                }
                out
            }
            Some(other) => {
                self.wrong_type(key, "a list of strings", other);
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DiagnosticKind;

    fn parse(text: &str) -> (Option<Skill>, Vec<SkillDiagnostic>) {
        Skill::from_markdown(Path::new("/skills/demo/SKILL.md"), text)
    }

    #[test]
    fn full_frontmatter_passes_through() {
        let (skill, diags) = parse(
            "---\nname: demo\ndescription: >\n  Folded\n  text.\nversion: 2.0.0\ntags: [a, b]\n\
             license: MIT\ncompatibility: needs git\nallowed-tools: Bash Read\n\
             metadata:\n  owner: ops\nauthor: someone\n---\n# Demo\n",
        );
        assert!(diags.is_empty(), "{diags:?}");
        let skill = skill.unwrap();
        assert_eq!(skill.description, "Folded text.\n");
        assert_eq!(skill.version.as_deref(), Some("2.0.0"));
        assert_eq!(skill.tags, ["a", "b"]);
        assert_eq!(skill.license.as_deref(), Some("MIT"));
        assert_eq!(skill.compatibility.as_deref(), Some("needs git"));
        assert_eq!(skill.allowed_tools, ["Bash", "Read"]);
        assert_eq!(skill.metadata["owner"], "ops");
        assert_eq!(skill.extra["author"], "someone");
        assert!(!skill.extra.contains_key("name"));
        assert!(skill.is_listed());
        assert_eq!(skill.base_dir, Path::new("/skills/demo"));
    }

    #[test]
    fn missing_name_or_description_drops_with_reason() {
        let (skill, diags) = parse("---\ndescription: d\n---\n");
        assert!(skill.is_none());
        assert_eq!(
            diags[0].message,
            "name is required (pi-coding-agent would use the directory name \"demo\")"
        );
        assert_eq!(diags[0].kind, DiagnosticKind::Dropped);

        let (skill, diags) = parse("---\nname: demo\n---\n");
        assert!(skill.is_none());
        assert_eq!(diags[0].message, "description is required");

        let (skill, diags) = parse("---\nname: demo\ndescription: '   '\n---\n");
        assert!(skill.is_none());
        assert!(diags.iter().all(SkillDiagnostic::is_dropped));
    }

    #[test]
    fn invalid_name_loads_with_one_warning_per_rule_like_pi() {
        let (skill, diags) = parse("---\nname: -Bad--Name\ndescription: d\n---\n");
        assert_eq!(skill.unwrap().name, "-Bad--Name");
        let messages: Vec<_> = diags.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "name \"-Bad--Name\" does not match parent directory \"demo\"",
                "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)",
                "name must not start or end with a hyphen",
                "name must not contain consecutive hyphens",
            ]
        );
        assert!(diags.iter().all(|d| d.kind == DiagnosticKind::Warning));
    }

    #[test]
    fn unsafe_name_drops_with_the_reason() {
        let (skill, diags) = parse("---\nname: ../../etc\ndescription: d\n---\n");
        assert!(skill.is_none());
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert!(diags[0].is_dropped());
        assert!(diags[0].message.contains("outside its own directory"));
    }

    #[test]
    fn long_description_and_dir_mismatch_only_warn() {
        let text = format!("---\nname: other\ndescription: {}\n---\n", "x".repeat(1100));
        let (skill, diags) = parse(&text);
        assert!(skill.is_some());
        assert_eq!(diags.len(), 2);
        assert!(diags.iter().all(|d| d.kind == DiagnosticKind::Warning));
    }

    #[test]
    fn disable_model_invocation_only_when_true() {
        let (skill, _) =
            parse("---\nname: demo\ndescription: d\ndisable-model-invocation: true\n---\n");
        assert!(!skill.unwrap().is_listed());
        let (skill, diags) =
            parse("---\nname: demo\ndescription: d\ndisable-model-invocation: \"true\"\n---\n");
        assert!(skill.unwrap().is_listed());
        assert_eq!(diags[0].kind, DiagnosticKind::Warning);
    }

    #[test]
    fn badly_typed_informational_fields_warn() {
        let (skill, diags) =
            parse("---\nname: demo\ndescription: d\ntags: 5\nmetadata: [x]\nversion: 3\n---\n");
        let skill = skill.unwrap();
        assert!(skill.tags.is_empty());
        assert!(skill.metadata.is_empty());
        assert_eq!(skill.version.as_deref(), Some("3"));
        assert_eq!(diags.len(), 2);
    }

    #[test]
    fn non_string_name_drops() {
        let (skill, diags) = parse("---\nname: 42\ndescription: d\n---\n");
        assert!(skill.is_none());
        assert!(diags[0].message.contains("must be a string"));
    }
}
