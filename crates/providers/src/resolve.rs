//! Model resolution for hosts: which model and thinking level a role
//! (`chat`, `agent`, `gate`, `summary`, ...) uses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::thinking::ThinkingLevel;

/// The environment variable consulted when no role or default names a model.
pub(crate) const MODEL_ENV: &str = "ROUNDTABLE_MODEL";
/// The environment variable consulted when no role or default names a
/// thinking level.
pub(crate) const THINKING_ENV: &str = "ROUNDTABLE_THINKING";

/// A model named as `provider/id` (the id may hold more slashes, as
/// OpenRouter's `anthropic/claude-sonnet-4.5`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRef {
    /// The provider, e.g. `openai`.
    pub provider: String,
    /// The model id, e.g. `gpt-4o-mini`.
    pub id: String,
}

impl ModelRef {
    /// Parses `provider/id`; `None` without a slash or with an empty part.
    pub fn parse(text: &str) -> Option<ModelRef> {
        let (provider, id) = text.trim().split_once('/')?;
        (!provider.is_empty() && !id.is_empty()).then(|| ModelRef {
            provider: provider.to_string(),
            id: id.to_string(),
        })
    }
}

/// What one role uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoleChoice {
    /// The model as `provider/id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The thinking level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingLevel>,
}

/// Models and thinking levels per role, with defaults.
///
/// A role resolves to its own model, else the default model, else the
/// environment: `ROUNDTABLE_<ROLE>_MODEL`, then `ROUNDTABLE_MODEL`. The
/// thinking level resolves the same way (`..._THINKING`), ending at `off`.
///
/// ```
/// use roundtable_providers::{RoleModels, ThinkingLevel};
///
/// let config: RoleModels = serde_json::from_str(r#"{
///     "roles": {"chat": {"model": "anthropic/claude-sonnet-4-5", "thinking": "low"}},
///     "defaultModel": "openai/gpt-4o-mini"
/// }"#).unwrap();
/// let no_env = |_: &str| None;
/// assert_eq!(config.model_with("chat", no_env).unwrap().id, "claude-sonnet-4-5");
/// assert_eq!(config.model_with("gate", no_env).unwrap().id, "gpt-4o-mini");
/// assert_eq!(config.thinking_with("chat", no_env), ThinkingLevel::Low);
/// assert_eq!(config.thinking_with("gate", no_env), ThinkingLevel::Off);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleModels {
    /// Per-role choices.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleChoice>,
    /// The model of roles without their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// The thinking level of roles without their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_thinking: Option<ThinkingLevel>,
}

fn env_name(role: &str, suffix: &str) -> String {
    let role: String = role
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("ROUNDTABLE_{role}_{suffix}")
}

impl RoleModels {
    /// The model of `role`, reading the process environment last.
    pub fn model(&self, role: &str) -> Option<ModelRef> {
        self.model_with(role, |k| std::env::var(k).ok())
    }

    /// The model of `role`, with `env` standing for the environment.
    pub fn model_with(&self, role: &str, env: impl Fn(&str) -> Option<String>) -> Option<ModelRef> {
        self.roles
            .get(role)
            .and_then(|c| c.model.clone())
            .or_else(|| self.default_model.clone())
            .or_else(|| env(&env_name(role, "MODEL")))
            .or_else(|| env(MODEL_ENV))
            .and_then(|text| ModelRef::parse(&text))
    }

    /// The thinking level of `role`, reading the process environment last.
    pub fn thinking(&self, role: &str) -> ThinkingLevel {
        self.thinking_with(role, |k| std::env::var(k).ok())
    }

    /// The thinking level of `role`, with `env` standing for the
    /// environment; unparsable values are skipped.
    pub fn thinking_with(&self, role: &str, env: impl Fn(&str) -> Option<String>) -> ThinkingLevel {
        self.roles
            .get(role)
            .and_then(|c| c.thinking)
            .or(self.default_thinking)
            .or_else(|| env(&env_name(role, "THINKING")).and_then(|v| v.parse().ok()))
            .or_else(|| env(THINKING_ENV).and_then(|v| v.parse().ok()))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_comes_last_role_variable_first() {
        let config = RoleModels::default();
        let env = |k: &str| match k {
            "ROUNDTABLE_CHAT_MODEL" => Some("ollama/qwen3:4b".to_string()),
            "ROUNDTABLE_MODEL" => Some("openai/gpt-4o".to_string()),
            "ROUNDTABLE_THINKING" => Some("high".to_string()),
            _ => None,
        };
        assert_eq!(config.model_with("chat", env).unwrap().id, "qwen3:4b");
        assert_eq!(config.model_with("agent", env).unwrap().provider, "openai");
        assert_eq!(config.thinking_with("agent", env), ThinkingLevel::High);
    }

    #[test]
    fn model_refs_keep_slashes_in_the_id() {
        let r = ModelRef::parse("openrouter/anthropic/claude-sonnet-4.5").unwrap();
        assert_eq!(
            (r.provider.as_str(), r.id.as_str()),
            ("openrouter", "anthropic/claude-sonnet-4.5")
        );
        assert!(ModelRef::parse("nope").is_none());
    }
}
