//! The user prompt of a workflow phase.
//!
//! A phase names a prompt template, one or more skills, or both. With a
//! template, the rendered template is the prompt and the skills are only
//! staged alongside it. With skills alone, the prompt is a short nudge
//! toward the first (primary) skill plus the run's context. With neither,
//! there is nothing to say, which is an error.

use serde_json::{Map, Value};

use crate::error::SkillsError;
use crate::stage::STAGING_DIR;

/// Builds a phase's user prompt.
///
/// `template` is the text of the phase's prompt template, already read by
/// the caller (pass `None` when the phase has no `prompt:`). It is rendered
/// with [`render_template`]. Otherwise the first of `skills` is the primary
/// skill and the prompt reads:
///
/// ```text
/// Use the **pr-review** skill to handle this request.
/// Read `.agents/skills/pr-review/SKILL.md` for the full instructions.
/// Other skills available if you need them: issue-triage.
///
/// Context:
/// owner: clifton
/// issueNumber: 42
/// ```
///
/// Context entries are listed in order; nulls are skipped, strings appear
/// as they are, other values as JSON.
///
/// ```
/// use roundtable_skills::phase::build_phase_prompt;
///
/// let context = serde_json::json!({"owner": "clifton", "issueNumber": 42});
/// let context = context.as_object().unwrap();
/// let prompt = build_phase_prompt("triage", None, &["issue-triage", "pr-review"], context).unwrap();
/// assert!(prompt.starts_with("Use the **issue-triage** skill to handle this request.\n"));
/// assert!(prompt.ends_with("Context:\nowner: clifton\nissueNumber: 42"));
///
/// assert!(build_phase_prompt("empty", None, &[] as &[&str], context).is_err());
/// ```
pub fn build_phase_prompt<S: AsRef<str>>(
    phase: &str,
    template: Option<&str>,
    skills: &[S],
    context: &Map<String, Value>,
) -> Result<String, SkillsError> {
    if let Some(template) = template {
        return Ok(render_template(template, context));
    }
    let Some((primary, others)) = skills.split_first() else {
        return Err(SkillsError::NothingToPrompt {
            phase: phase.to_owned(),
        });
    };
    let primary = primary.as_ref();
    let mut lines = vec![
        format!("Use the **{primary}** skill to handle this request."),
        format!("Read `{STAGING_DIR}/{primary}/SKILL.md` for the full instructions."),
    ];
    if !others.is_empty() {
        let others: Vec<&str> = others.iter().map(AsRef::as_ref).collect();
        lines.push(format!(
            "Other skills available if you need them: {}.",
            others.join(", ")
        ));
    }
    let context_lines: Vec<String> = context
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| format!("{key}: {}", display_value(value)))
        .collect();
    if !context_lines.is_empty() {
        lines.push(String::new());
        lines.push("Context:".to_owned());
        lines.extend(context_lines);
    }
    Ok(lines.join("\n"))
}

/// Replaces each `{{ key }}` or `{{ a.b.c }}` in `template` with the value
/// at that path in `context` (strings as they are, other values as JSON, a
/// missing or null value as nothing).
///
/// Only plain placeholders (letters, digits, `_`, `-` and dots) are
/// replaced; any other `{{...}}` is left as written, so templates meant for
/// a richer engine pass through unharmed.
///
/// ```
/// let context = serde_json::json!({"repo": {"owner": "a", "name": "b"}, "n": 7});
/// let text = roundtable_skills::phase::render_template(
///     "Review {{repo.owner}}/{{ repo.name }} #{{n}}{{missing}} {{#if x}}",
///     context.as_object().unwrap(),
/// );
/// assert_eq!(text, "Review a/b #7 {{#if x}}");
/// ```
pub fn render_template(template: &str, context: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let key = after[..close].trim();
        if is_plain_key(key) {
            if let Some(value) = lookup(context, key).filter(|value| !value.is_null()) {
                out.push_str(&display_value(value));
            }
        } else {
            out.push_str(&rest[open..open + 2 + close + 2]);
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// The plain placeholders of `template` (as [`render_template`] reads
/// them) that `context` has no value for, in order, each once. A host
/// checks them before rendering: a misspelt `{{isue}}` would otherwise
/// render as nothing.
///
/// ```
/// let context = serde_json::json!({"issue": 7});
/// let missing = roundtable_skills::phase::missing_placeholders(
///     "Fix #{{issue}} in {{repo}} ({{repo}}) {{#if x}}",
///     context.as_object().unwrap(),
/// );
/// assert_eq!(missing, ["repo"]);
/// ```
pub fn missing_placeholders(template: &str, context: &Map<String, Value>) -> Vec<String> {
    let mut missing: Vec<String> = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        let key = after[..close].trim();
        if is_plain_key(key) && lookup(context, key).is_none() && !missing.iter().any(|m| m == key)
        {
            missing.push(key.to_owned());
        }
        rest = &after[close + 2..];
    }
    missing
}

/// Whether `key` is a placeholder [`render_template`] replaces.
fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn lookup<'a>(context: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut value = context.get(parts.next()?)?;
    for part in parts {
        value = match value {
            Value::Object(map) => map.get(part)?,
            Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

fn display_value(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn template_wins_over_skills() {
        let prompt = build_phase_prompt(
            "reviewer",
            Some("Review PR {{pr}} with the pr-review skill."),
            &["pr-review"],
            &ctx(json!({"pr": 5})),
        )
        .unwrap();
        assert_eq!(prompt, "Review PR 5 with the pr-review skill.");
    }

    #[test]
    fn nudge_matches_the_documented_shape() {
        let prompt = build_phase_prompt(
            "triage",
            None,
            &["pr-review", "issue-triage"],
            &ctx(json!({"owner": "clifton", "repo": "lastlight", "issueNumber": 42, "gone": null, "labels": ["a"]})),
        )
        .unwrap();
        assert_eq!(
            prompt,
            "Use the **pr-review** skill to handle this request.\n\
             Read `.agents/skills/pr-review/SKILL.md` for the full instructions.\n\
             Other skills available if you need them: issue-triage.\n\
             \n\
             Context:\n\
             owner: clifton\n\
             repo: lastlight\n\
             issueNumber: 42\n\
             labels: [\"a\"]"
        );
    }

    #[test]
    fn single_skill_without_context() {
        let prompt = build_phase_prompt("p", None, &["chat"], &Map::new()).unwrap();
        assert_eq!(
            prompt,
            "Use the **chat** skill to handle this request.\n\
             Read `.agents/skills/chat/SKILL.md` for the full instructions."
        );
    }

    #[test]
    fn neither_prompt_nor_skills_is_an_error() {
        let err = build_phase_prompt::<&str>("lonely", None, &[], &Map::new()).unwrap_err();
        assert!(matches!(err, SkillsError::NothingToPrompt { ref phase } if phase == "lonely"));
    }

    #[test]
    fn render_handles_unclosed_and_arrays() {
        let context = ctx(json!({"items": ["x", "y"]}));
        assert_eq!(render_template("{{items.1}} {{oops", &context), "y {{oops");
        assert_eq!(render_template("{{}}", &context), "{{}}");
    }
}
