//! Splitting a SKILL.md into its YAML frontmatter and its Markdown body.
//!
//! The rules follow pi-coding-agent's parser so that both read the same files
//! the same way: line endings are normalised to `\n`, the file must start with
//! `---`, and the frontmatter runs up to the next line that starts with `---`.
//! YAML is read with YAML 1.2 core booleans (`yes`, `no`, `on`, `off`, `y`
//! stay strings), as the JavaScript `yaml` package does.

use serde_json::{Map, Value};

/// A SKILL.md split into its parts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SkillMarkdown {
    /// The frontmatter's top-level mapping; empty when the file has none.
    pub(crate) frontmatter: Map<String, Value>,
    /// Whether the file had a frontmatter block at all.
    pub(crate) has_frontmatter: bool,
    /// The Markdown after the frontmatter, trimmed.
    pub(crate) body: String,
}

/// Why a frontmatter block could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid frontmatter: {message}")]
pub(crate) struct FrontmatterError {
    /// The YAML parser's explanation (with line and column).
    pub(crate) message: String,
}

/// Splits `text` into the raw YAML of its frontmatter (if any) and its body.
pub(crate) fn split_frontmatter(text: &str) -> (Option<String>, String) {
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    if !normalized.starts_with("---") {
        return (None, normalized);
    }
    // Search from byte 3, as pi does: the opening `---` itself never closes.
    let Some(end) = normalized.get(3..).and_then(|rest| rest.find("\n---")) else {
        return (None, normalized);
    };
    let end = end + 3;
    let yaml = normalized.get(4..end).unwrap_or_default().to_owned();
    let body = normalized
        .get(end + 4..)
        .unwrap_or_default()
        .trim()
        .to_owned();
    (Some(yaml), body)
}

/// Parses a whole SKILL.md: frontmatter mapping plus body.
///
/// An empty frontmatter block is an empty mapping. A block that is not a
/// mapping (a list, a bare scalar) or is not valid YAML is an error.
pub(crate) fn parse_skill_markdown(text: &str) -> Result<SkillMarkdown, FrontmatterError> {
    let (yaml, body) = split_frontmatter(text);
    let Some(yaml) = yaml else {
        return Ok(SkillMarkdown {
            frontmatter: Map::new(),
            has_frontmatter: false,
            body,
        });
    };
    let options = serde_saphyr::options! {
        strict_booleans: true,
        with_snippet: false,
    };
    let value: Value =
        serde_saphyr::from_str_with_options(&yaml, options).map_err(|e| FrontmatterError {
            message: e.to_string(),
        })?;
    let frontmatter = match value {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(FrontmatterError {
                message: format!("expected a mapping, found {}", json_type_name(&other)),
            });
        }
    };
    Ok(SkillMarkdown {
        frontmatter,
        has_frontmatter: true,
        body,
    })
}

/// A short name for a JSON value's type, for diagnostics.
pub(crate) fn json_type_name(value: &Value) -> &'static str {
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

    #[test]
    fn splits_the_yaml_from_the_body() {
        let (yaml, body) = split_frontmatter("---\nname: x\n---\n# Title\n");
        assert_eq!(yaml.as_deref(), Some("name: x"));
        assert_eq!(body, "# Title");
    }

    #[test]
    fn splits_like_pi() {
        let (yaml, body) = split_frontmatter("---\r\nname: a\r\n---\r\n\r\nBody\r\n");
        assert_eq!(yaml.as_deref(), Some("name: a"));
        assert_eq!(body, "Body");
    }

    #[test]
    fn no_frontmatter_without_leading_dashes() {
        let (yaml, body) = split_frontmatter("# Title\n---\nname: a\n---\n");
        assert!(yaml.is_none());
        assert!(body.starts_with("# Title"));
    }

    #[test]
    fn unclosed_frontmatter_is_no_frontmatter() {
        let (yaml, _) = split_frontmatter("---\nname: a\n");
        assert!(yaml.is_none());
    }

    #[test]
    fn empty_frontmatter_is_empty_mapping() {
        let md = parse_skill_markdown("---\n---\nbody").unwrap();
        assert!(md.has_frontmatter);
        assert!(md.frontmatter.is_empty());
        assert_eq!(md.body, "body");
    }

    #[test]
    fn yaml_1_2_booleans() {
        let md = parse_skill_markdown("---\ntags: [y, n, yes, off]\nflag: true\n---\n").unwrap();
        assert_eq!(
            md.frontmatter["tags"],
            serde_json::json!(["y", "n", "yes", "off"])
        );
        assert_eq!(md.frontmatter["flag"], Value::Bool(true));
    }

    #[test]
    fn block_scalars_and_nesting() {
        let md = parse_skill_markdown(
            "---\ndescription: |\n  line one\n  line two\nmetadata:\n  owner: ops\n  level: 2\n---\n",
        )
        .unwrap();
        assert_eq!(md.frontmatter["description"], "line one\nline two\n");
        assert_eq!(md.frontmatter["metadata"]["level"], 2);
    }

    #[test]
    fn non_mapping_and_broken_yaml_are_errors() {
        let err = parse_skill_markdown("---\n- a\n- b\n---\n").unwrap_err();
        assert!(err.message.contains("mapping"), "{err}");
        let err = parse_skill_markdown("---\nname: [unclosed\n---\n").unwrap_err();
        assert!(!err.message.is_empty());
        let err = parse_skill_markdown("---\na: 1\na: 2\n---\n").unwrap_err();
        assert!(err.message.contains("duplicate"), "{err}");
    }
}
