//! `Model`: which model to call, where, over which wire API, and what it
//! costs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::openai::compat::OpenAiCompat;
use crate::thinking::ThinkingLevel;
use crate::usage::{Cost, Usage};
use crate::wire::WireApi;

/// A model and the server that runs it, shaped as pi-ai's `Model` so a pi
/// model literal deserialises as is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    /// The model id sent to the server, e.g. `gpt-4o-mini`.
    pub id: String,
    /// A human-readable name.
    #[serde(default)]
    pub name: String,
    /// The wire API its server speaks.
    pub api: WireApi,
    /// The provider, e.g. `openai`, `anthropic`, `openrouter`, `ollama`.
    pub provider: String,
    /// The API base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// True when the model can reason (thinking levels apply).
    #[serde(default)]
    pub reasoning: bool,
    /// Per-level overrides of the value sent for a thinking level; `None`
    /// marks a level the model does not support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<BTreeMap<ThinkingLevel, Option<String>>>,
    /// Input kinds the model accepts.
    #[serde(default = "default_input")]
    pub input: Vec<InputKind>,
    /// Price per million tokens.
    #[serde(default)]
    pub cost: ModelCost,
    /// Context window in tokens.
    #[serde(default)]
    pub context_window: u64,
    /// Largest output in tokens.
    #[serde(default)]
    pub max_tokens: u64,
    /// Extra HTTP headers sent with every request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Quirks of OpenAI-compatible servers; unset fields are detected from
    /// the provider and base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<OpenAiCompat>,
}

fn default_input() -> Vec<InputKind> {
    vec![InputKind::Text]
}

impl Model {
    /// A model with the given API, provider, id and base URL, text input,
    /// no cost, no reasoning, 128k context and 16k output.
    pub fn new(
        api: impl Into<WireApi>,
        provider: impl Into<String>,
        id: impl Into<String>,
        base_url: impl Into<String>,
    ) -> Self {
        let id = id.into();
        Self {
            name: id.clone(),
            id,
            api: api.into(),
            provider: provider.into(),
            base_url: base_url.into(),
            reasoning: false,
            thinking_level_map: None,
            input: default_input(),
            cost: ModelCost::default(),
            context_window: 128_000,
            max_tokens: 16_384,
            headers: BTreeMap::new(),
            compat: None,
        }
    }

    /// Fills in the cost of `usage` from this model's prices, as pi-ai's
    /// `calculateCost` does: price per million × tokens, per kind.
    pub fn apply_cost(&self, usage: &mut Usage) {
        self.cost.apply(usage);
    }

    /// The value configured for `level` in the thinking-level map:
    /// `Some(Some(v))` an override, `Some(None)` unsupported, `None` unset.
    pub(crate) fn thinking_override(&self, level: ThinkingLevel) -> Option<Option<&str>> {
        self.thinking_level_map
            .as_ref()
            .and_then(|m| m.get(&level))
            .map(|v| v.as_deref())
    }

    /// The thinking levels this model supports, as pi-ai's
    /// `getSupportedThinkingLevels`: `off` only for non-reasoning models,
    /// `xhigh` only when the map names it.
    pub fn supported_thinking_levels(&self) -> Vec<ThinkingLevel> {
        if !self.reasoning {
            return vec![ThinkingLevel::Off];
        }
        ThinkingLevel::ALL
            .into_iter()
            .filter(|level| match self.thinking_override(*level) {
                Some(None) => false,
                Some(Some(_)) => true,
                None => *level != ThinkingLevel::Xhigh,
            })
            .collect()
    }

    /// `level` clamped to the nearest supported level, searching upwards
    /// first, as pi-ai's `clampThinkingLevel`.
    pub fn clamp_thinking(&self, level: ThinkingLevel) -> ThinkingLevel {
        let available = self.supported_thinking_levels();
        if available.contains(&level) {
            return level;
        }
        let all = ThinkingLevel::ALL;
        let at = all.iter().position(|l| *l == level).unwrap_or(0);
        all[at..]
            .iter()
            .chain(all[..at].iter().rev())
            .find(|l| available.contains(l))
            .copied()
            .unwrap_or(ThinkingLevel::Off)
    }
}

/// What a model accepts as input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum InputKind {
    /// Text.
    Text,
    /// Images.
    Image,
}

/// Price in US dollars per million tokens, by kind of token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    /// Uncached input.
    pub input: f64,
    /// Output, reasoning included.
    pub output: f64,
    /// Cache reads.
    pub cache_read: f64,
    /// Cache writes.
    pub cache_write: f64,
}

impl ModelCost {
    /// Fills in the cost of `usage`: price per million × tokens, per kind.
    pub fn apply(&self, usage: &mut Usage) {
        let per = |price: f64, tokens: u64| price / 1_000_000.0 * tokens as f64;
        let input = per(self.input, usage.input);
        let output = per(self.output, usage.output);
        let cache_read = per(self.cache_read, usage.cache_read);
        let cache_write = per(self.cache_write, usage.cache_write);
        usage.cost = Cost {
            input,
            output,
            cache_read,
            cache_write,
            total: input + output + cache_read + cache_write,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::OPENAI_COMPLETIONS;

    #[test]
    fn pi_model_literal_deserialises() {
        let model: Model = serde_json::from_value(serde_json::json!({
            "id": "gpt-4o-mini", "name": "GPT-4o mini", "api": "openai-completions",
            "provider": "openai", "baseUrl": "https://api.openai.com/v1", "reasoning": false,
            "input": ["text", "image"],
            "cost": {"input": 0.15, "output": 0.6, "cacheRead": 0.075, "cacheWrite": 0},
            "contextWindow": 128000, "maxTokens": 16384
        }))
        .unwrap();
        assert_eq!(model.input, vec![InputKind::Text, InputKind::Image]);
        assert_eq!(model.cost.cache_read, 0.075);
    }

    #[test]
    fn cost_is_price_per_million_times_tokens() {
        let mut model = Model::new(OPENAI_COMPLETIONS, "openai", "m", "http://x");
        model.cost = ModelCost {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        };
        let mut usage = Usage {
            input: 1000,
            output: 200,
            cache_read: 5000,
            cache_write: 100,
            total_tokens: 6300,
            ..Usage::default()
        };
        model.apply_cost(&mut usage);
        assert_eq!(usage.cost.input, 3.0 / 1e6 * 1000.0);
        assert_eq!(usage.cost.output, 15.0 / 1e6 * 200.0);
        assert_eq!(
            usage.cost.total,
            usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write
        );
    }

    #[test]
    fn thinking_levels_clamp_like_pi() {
        let mut model = Model::new(OPENAI_COMPLETIONS, "openai", "m", "http://x");
        assert_eq!(
            model.clamp_thinking(ThinkingLevel::High),
            ThinkingLevel::Off
        );
        model.reasoning = true;
        assert_eq!(
            model.clamp_thinking(ThinkingLevel::Xhigh),
            ThinkingLevel::High
        );
        model.thinking_level_map = Some(BTreeMap::from([(ThinkingLevel::Minimal, None)]));
        assert_eq!(
            model.clamp_thinking(ThinkingLevel::Minimal),
            ThinkingLevel::Low
        );
    }
}
