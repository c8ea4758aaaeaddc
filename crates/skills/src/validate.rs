//! The frontmatter rules for `name` and `description`.
//!
//! The same rules pi-coding-agent's loader checks, from the Agent Skills
//! format: a name is lowercase `a-z`, `0-9` and `-`, at most 64 characters,
//! with no leading, trailing or doubled hyphen; a description is non-blank and
//! at most 1024 characters. As in pi, breaking a name rule or the description
//! length is a warning and the skill still loads.
//!
//! One more check is this crate's own: [`validate_name_safety`] refuses the
//! names that would be unsafe or ambiguous where a name is shown or used as a
//! directory name, which pi would load with a warning.

/// The longest allowed skill name, in characters.
pub(crate) const MAX_NAME_LENGTH: usize = 64;

/// The longest allowed description, in characters.
const MAX_DESCRIPTION_LENGTH: usize = 1024;

/// Every rule `name` breaks, as messages; empty when the name is valid.
///
/// ```
/// use roundtable_skills::validate::validate_name;
///
/// assert!(validate_name("pr-review").is_empty());
/// assert_eq!(validate_name("PR--review").len(), 2);
/// ```
pub fn validate_name(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let length = name.chars().count();
    if length == 0 {
        errors.push("name is empty".to_owned());
        return errors;
    }
    if length > MAX_NAME_LENGTH {
        errors.push(format!(
            "name exceeds {MAX_NAME_LENGTH} characters ({length})"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        errors.push(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
                .to_owned(),
        );
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("name must not start or end with a hyphen".to_owned());
    }
    if name.contains("--") {
        errors.push("name must not contain consecutive hyphens".to_owned());
    }
    errors
}

/// Why `name` is refused outright; empty when it is safe to load.
///
/// pi-coding-agent loads any non-empty string name (with warnings for the
/// rules of [`validate_name`]). But a skill's name is meant to be its
/// directory's name too (pi warns when they differ): the directory it is
/// staged under (`.agents/skills/<name>/`) and the path a phase prompt tells
/// the agent to read. It is also one line of the `<available_skills>`
/// catalogue and one of the `read_skill` choices. So these names are refused:
///
/// - a path separator (`/` or `\`), or the whole name `.` or `..`: it would
///   name a path outside its own directory;
/// - control characters, line or paragraph separators, and invisible or
///   bidirectional formatting characters: they break the one-line catalogue
///   entry, or make the name look like a different one;
/// - leading or trailing whitespace: it looks identical to the trimmed name.
///
/// An empty name is not checked here: loading treats it as missing.
///
/// ```
/// use roundtable_skills::validate::validate_name_safety;
///
/// assert!(validate_name_safety("PR_Review v2").is_empty()); // loaded, with warnings
/// assert_eq!(validate_name_safety("../etc").len(), 1);
/// assert_eq!(validate_name_safety(" pr-review\n").len(), 2);
/// ```
pub fn validate_name_safety(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if name.contains(['/', '\\']) || name == "." || name == ".." {
        errors.push(format!(
            "name {name:?} refused: it would name a path outside its own directory \
             (no '/' or '\\', not \".\" or \"..\")"
        ));
    }
    if name.chars().any(is_hazardous_char) {
        errors.push(format!(
            "name {name:?} refused: control, line-separator, invisible or \
             bidirectional characters break the catalogue or disguise the name"
        ));
    }
    if name.trim() != name {
        errors.push(format!(
            "name {name:?} refused: leading or trailing whitespace makes it look like {:?}",
            name.trim()
        ));
    }
    errors
}

/// Characters a name must not hold: controls, line and paragraph
/// separators, zero-width characters and bidirectional formatting.
fn is_hazardous_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// Every rule `description` breaks, as messages; empty when it is valid.
pub(crate) fn validate_description(description: &str) -> Vec<String> {
    if description.trim().is_empty() {
        return vec!["description is required".to_owned()];
    }
    let length = description.chars().count();
    if length > MAX_DESCRIPTION_LENGTH {
        return vec![format!(
            "description exceeds {MAX_DESCRIPTION_LENGTH} characters ({length})"
        )];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names() {
        for name in ["a", "pr-review", "issue-triage-2", &"a".repeat(64)] {
            assert!(validate_name(name).is_empty(), "{name}");
        }
    }

    #[test]
    fn invalid_names() {
        for name in [
            "",
            "Upper",
            "under_score",
            "-lead",
            "trail-",
            "dou--ble",
            "sp ace",
            "dot.dot",
            "../up",
            "a/b",
            &"a".repeat(65),
        ] {
            assert!(!validate_name(name).is_empty(), "{name:?}");
        }
    }

    #[test]
    fn safe_and_unsafe_names() {
        for name in [
            "pr-review",
            "Bad_Name",
            "dot.dot",
            "sp ace",
            "é",
            "a..b",
            &"a".repeat(100),
        ] {
            assert!(validate_name_safety(name).is_empty(), "{name:?}");
        }
        let cases: [(&str, usize); 12] = [
            ("../up", 1),
            ("a/b", 1),
            ("a\\b", 1),
            (".", 1),
            ("..", 1),
            ("a\nb", 1),
            ("tab\there", 1),
            ("nul\0", 1),
            ("zero\u{200B}width", 1),
            ("\u{202E}weiver-rp", 1),
            (" lead", 1),
            ("/trail\n", 3),
        ];
        for (name, count) in cases {
            assert_eq!(validate_name_safety(name).len(), count, "{name:?}");
        }
    }

    #[test]
    fn description_rules() {
        assert!(validate_description("Does things.").is_empty());
        assert_eq!(validate_description("  \n"), ["description is required"]);
        assert!(validate_description(&"x".repeat(1024)).is_empty());
        assert!(validate_description(&"x".repeat(1025))[0].contains("1025"));
        // Characters, not bytes.
        assert!(validate_description(&"é".repeat(1024)).is_empty());
    }
}
