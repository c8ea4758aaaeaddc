//! What a chat client may choose from: the models (`GET /api/chat/models`,
//! the engine's) and the skills (`GET /api/chat/resources`). The engine
//! does not list the skills its sessions read, so those come from the
//! folders the host keeps skills in (loaded at each request, so the
//! diagnostics are those of the files as they are now).

use std::path::PathBuf;

use roundtable_providers::Model;
use roundtable_skills::{SkillDiagnostic, load_skills};
use serde::Serialize;

use roundtable_sessions::model_key;

/// `GET /api/chat/models`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelCatalog {
    models: Vec<ModelView>,
    /// The key of the model a session runs on until it chooses another
    /// (`provider/id`).
    selected: Option<String>,
    /// What is wrong with the models, in the spec's shape: always empty
    /// here, as the engine's models are whole once it is built.
    diagnostics: Vec<String>,
}

/// A model as a client sees it: no URL, no headers (those may carry keys).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ModelView {
    key: String,
    provider: String,
    id: String,
    name: String,
    reasoning: bool,
    context_window: u64,
    max_tokens: u64,
}

impl ModelCatalog {
    /// The catalogue of an engine offering `models`, its own first (the
    /// one a session runs on until it chooses another).
    pub(crate) fn of(models: &[Model]) -> Self {
        Self {
            models: models
                .iter()
                .map(|model| ModelView {
                    key: model_key(model),
                    provider: model.provider.clone(),
                    id: model.id.clone(),
                    name: if model.name.is_empty() {
                        model.id.clone()
                    } else {
                        model.name.clone()
                    },
                    reasoning: model.reasoning,
                    context_window: model.context_window,
                    max_tokens: model.max_tokens,
                })
                .collect(),
            selected: models.first().map(model_key),
            diagnostics: Vec::new(),
        }
    }
}

/// `GET /api/chat/resources`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Resources {
    skills: Vec<SkillView>,
    diagnostics: Vec<SkillDiagnostic>,
}

/// A skill as a client sees it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SkillView {
    name: String,
    description: String,
    path: PathBuf,
    /// False for a skill the model is not offered
    /// (`disable-model-invocation`).
    listed: bool,
}

impl Resources {
    /// The skills of `dirs`, with what loading found wrong.
    pub(crate) fn load(dirs: &[PathBuf]) -> Self {
        if dirs.is_empty() {
            return Self {
                skills: Vec::new(),
                diagnostics: Vec::new(),
            };
        }
        let loaded = load_skills(dirs);
        Self {
            skills: loaded
                .skills
                .iter()
                .map(|skill| SkillView {
                    name: skill.name.clone(),
                    description: skill.description.clone(),
                    path: skill.file_path.clone(),
                    listed: skill.is_listed(),
                })
                .collect(),
            diagnostics: loaded.diagnostics,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roundtable_providers::OPENAI_COMPLETIONS;

    use super::*;

    #[test]
    fn the_catalogue_shows_the_engine_s_models_without_their_urls_or_headers() {
        let mut model = Model::new(
            OPENAI_COMPLETIONS,
            "openai",
            "gpt",
            "https://secret.example",
        );
        model
            .headers
            .insert("Authorization".into(), "Bearer sk".into());
        let other = Model::new(OPENAI_COMPLETIONS, "anthropic", "claude", "");
        let json = serde_json::to_value(ModelCatalog::of(&[model, other])).unwrap();
        assert_eq!(json["selected"], "openai/gpt");
        assert_eq!(json["models"][0]["key"], "openai/gpt");
        assert_eq!(json["models"][1]["key"], "anthropic/claude");
        let text = json.to_string();
        assert!(
            !text.contains("secret.example") && !text.contains("Bearer"),
            "{text}"
        );
    }

    #[test]
    fn skills_and_their_diagnostics_come_from_the_folders() {
        let root = tempfile::tempdir().unwrap();
        let good = root.path().join("review");
        std::fs::create_dir(&good).unwrap();
        std::fs::write(
            good.join("SKILL.md"),
            "---\nname: review\ndescription: Review code.\n---\n# Review\n",
        )
        .unwrap();
        let bad = root.path().join("broken");
        std::fs::create_dir(&bad).unwrap();
        std::fs::write(bad.join("SKILL.md"), "---\nname: broken\n---\n").unwrap();
        let json = serde_json::to_value(Resources::load(&[root.path().to_path_buf()])).unwrap();
        assert_eq!(json["skills"][0]["name"], "review");
        assert_eq!(json["skills"][0]["listed"], true);
        assert_eq!(json["diagnostics"][0]["kind"], "dropped");
    }
}
