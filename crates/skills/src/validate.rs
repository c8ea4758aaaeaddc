//! The frontmatter rules for `name` and `description`.
//!
//! The same rules pi-coding-agent's loader checks, from the Agent Skills
//! format: a name is lowercase `a-z`, `0-9` and `-`, at most 64 characters,
//! with no leading, trailing or doubled hyphen; a description is non-blank and
//! at most 1024 characters.

/// The longest allowed skill name, in characters.
pub const MAX_NAME_LENGTH: usize = 64;

/// The longest allowed description, in characters.
pub const MAX_DESCRIPTION_LENGTH: usize = 1024;

/// Every rule `name` breaks, as messages; empty when the name is valid.
///
/// ```
/// use roundtable_skills::validate_name;
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

/// Every rule `description` breaks, as messages; empty when it is valid.
pub fn validate_description(description: &str) -> Vec<String> {
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
    fn description_rules() {
        assert!(validate_description("Does things.").is_empty());
        assert_eq!(validate_description("  \n"), ["description is required"]);
        assert!(validate_description(&"x".repeat(1024)).is_empty());
        assert!(validate_description(&"x".repeat(1025))[0].contains("1025"));
        // Characters, not bytes.
        assert!(validate_description(&"é".repeat(1024)).is_empty());
    }
}
