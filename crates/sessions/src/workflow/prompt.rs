//! A phase's user prompt: its template rendered with the run's context, or
//! the nudge toward its primary skill
//! ([`build_phase_prompt`](roundtable_skills::phase::build_phase_prompt)).
//!
//! A template sees the host's context plus `workflow`, `phase` and
//! `session_id`; a placeholder none of them fills is an error naming it
//! (a misspelt `{{isue}}` would otherwise vanish from the prompt). The
//! nudge lists the host's context only.

use serde_json::{Map, Value};

use roundtable_skills::phase::{build_phase_prompt, missing_placeholders};
use roundtable_skills::workflow::WorkflowPhase;

/// The prompt of `phase` of `workflow` in `session`, or why there is none.
pub(crate) fn phase_prompt(
    workflow: &str,
    phase: &WorkflowPhase,
    session: &str,
    context: &Map<String, Value>,
) -> Result<String, String> {
    let Some(template) = &phase.prompt else {
        return build_phase_prompt(&phase.name, None, &phase.skills, context)
            .map_err(|e| e.to_string());
    };
    let mut full = context.clone();
    for (key, value) in [
        ("workflow", workflow),
        ("phase", phase.name.as_str()),
        ("session_id", session),
    ] {
        full.entry(key)
            .or_insert_with(|| Value::String(value.to_owned()));
    }
    let missing = missing_placeholders(&template.text, &full);
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|m| format!("{{{{{m}}}}}")).collect();
        return Err(format!(
            "the prompt template {} uses {} that the context does not fill (known: {})",
            template.path.display(),
            names.join(", "),
            full.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    build_phase_prompt(&phase.name, Some(&template.text), &phase.skills, &full)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use roundtable_skills::workflow::{PhaseGate, PromptTemplate};
    use serde_json::json;

    use super::*;

    fn phase(skills: &[&str], template: Option<&str>) -> WorkflowPhase {
        WorkflowPhase {
            name: "review".into(),
            skills: skills.iter().map(|s| (*s).to_owned()).collect(),
            skill_dirs: Vec::new(),
            prompt: template.map(|text| PromptTemplate {
                path: "prompts/review.md".into(),
                text: text.into(),
            }),
            gate: PhaseGate::None,
        }
    }

    fn context() -> Map<String, Value> {
        json!({"repo": "acme/web", "pr": 12})
            .as_object()
            .cloned()
            .unwrap()
    }

    #[test]
    fn a_template_renders_with_the_context_and_the_builtins() {
        let prompt = phase_prompt(
            "ship",
            &phase(
                &["pr-review"],
                Some(
                    "Phase {{phase}} of {{workflow}}: review PR {{pr}} of {{repo}} with pr-review.",
                ),
            ),
            "sess_1",
            &context(),
        )
        .unwrap();
        assert_eq!(
            prompt,
            "Phase review of ship: review PR 12 of acme/web with pr-review."
        );
    }

    #[test]
    fn an_unknown_placeholder_is_named() {
        let err = phase_prompt(
            "ship",
            &phase(&[], Some("Review {{pr}} in {{repository}}")),
            "sess_1",
            &context(),
        )
        .unwrap_err();
        assert!(err.contains("{{repository}}"), "{err}");
        assert!(err.contains("prompts/review.md"), "{err}");
    }

    #[test]
    fn the_nudge_names_the_primary_and_the_others() {
        let prompt = phase_prompt(
            "ship",
            &phase(&["pr-review", "issue-triage", "repo-health"], None),
            "sess_1",
            &context(),
        )
        .unwrap();
        assert!(prompt.starts_with(
            "Use the **pr-review** skill to handle this request.\n\
             Read `.agents/skills/pr-review/SKILL.md` for the full instructions.\n\
             Other skills available if you need them: issue-triage, repo-health.\n"
        ));
        assert!(
            prompt.ends_with("Context:\nrepo: acme/web\npr: 12"),
            "{prompt}"
        );
    }
}
