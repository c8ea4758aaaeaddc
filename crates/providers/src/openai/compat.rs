//! The quirks of OpenAI-compatible servers (pi-ai's
//! `OpenAICompletionsCompat`): what a model may set in `Model.compat`, and
//! what is detected from its provider and base URL when it does not.

use serde::{Deserialize, Serialize};

/// Which field carries the output limit on an OpenAI-compatible server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_completion_tokens` (OpenAI's current name).
    MaxCompletionTokens,
    /// `max_tokens` (older servers).
    MaxTokens,
}

/// How an OpenAI-compatible server wants the thinking level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThinkingFormat {
    /// `reasoning_effort: "low" | ...`.
    Openai,
    /// `reasoning: {effort}` (OpenRouter).
    Openrouter,
    /// `thinking: {type}` plus `reasoning_effort` (DeepSeek).
    Deepseek,
    /// `enable_thinking: bool` (z.ai).
    Zai,
    /// `enable_thinking: bool` (Qwen).
    Qwen,
    /// `chat_template_kwargs.enable_thinking` (Qwen behind vLLM or llama.cpp).
    QwenChatTemplate,
}

/// Quirks of OpenAI-compatible servers, as pi-ai's `OpenAICompletionsCompat`.
/// Unset fields are detected from the provider and the base URL.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAiCompat {
    /// Whether the server accepts `store`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_store: Option<bool>,
    /// Whether the server accepts the `developer` role (else `system`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_developer_role: Option<bool>,
    /// Whether the server accepts `reasoning_effort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_reasoning_effort: Option<bool>,
    /// Whether the server accepts `stream_options.include_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_usage_in_streaming: Option<bool>,
    /// Which field carries the output limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_field: Option<MaxTokensField>,
    /// Whether tool results need the tool's `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_tool_result_name: Option<bool>,
    /// Whether a user message right after tool results needs an assistant
    /// message in between.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_assistant_after_tool_result: Option<bool>,
    /// Whether replayed thinking must be sent as plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_thinking_as_text: Option<bool>,
    /// Whether every replayed assistant message needs `reasoning_content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_reasoning_content_on_assistant_messages: Option<bool>,
    /// How the thinking level is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_format: Option<ThinkingFormat>,
    /// Whether tool definitions may carry `strict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_strict_mode: Option<bool>,
}

/// [`OpenAiCompat`] with every field decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResolvedCompat {
    /// See [`OpenAiCompat::supports_store`].
    pub(crate) supports_store: bool,
    /// See [`OpenAiCompat::supports_developer_role`].
    pub(crate) supports_developer_role: bool,
    /// See [`OpenAiCompat::supports_reasoning_effort`].
    pub(crate) supports_reasoning_effort: bool,
    /// See [`OpenAiCompat::supports_usage_in_streaming`].
    pub(crate) supports_usage_in_streaming: bool,
    /// See [`OpenAiCompat::max_tokens_field`].
    pub(crate) max_tokens_field: MaxTokensField,
    /// See [`OpenAiCompat::requires_tool_result_name`].
    pub(crate) requires_tool_result_name: bool,
    /// See [`OpenAiCompat::requires_assistant_after_tool_result`].
    pub(crate) requires_assistant_after_tool_result: bool,
    /// See [`OpenAiCompat::requires_thinking_as_text`].
    pub(crate) requires_thinking_as_text: bool,
    /// See [`OpenAiCompat::requires_reasoning_content_on_assistant_messages`].
    pub(crate) requires_reasoning_content_on_assistant_messages: bool,
    /// See [`OpenAiCompat::thinking_format`].
    pub(crate) thinking_format: ThinkingFormat,
    /// See [`OpenAiCompat::supports_strict_mode`].
    pub(crate) supports_strict_mode: bool,
}

impl ResolvedCompat {
    /// The compat flags of a model served by `provider` at `url`: the
    /// `explicit` settings first, the rest detected from the provider and
    /// base URL as pi-ai detects them.
    pub(crate) fn detect(provider: &str, url: &str, explicit: Option<&OpenAiCompat>) -> Self {
        let is_zai = provider == "zai" || url.contains("api.z.ai");
        let is_moonshot = provider.starts_with("moonshotai") || url.contains("api.moonshot.");
        let is_deepseek = provider == "deepseek" || url.contains("deepseek.com");
        let is_grok = provider == "xai" || url.contains("api.x.ai");
        let non_standard = provider == "cerebras"
            || url.contains("cerebras.ai")
            || is_grok
            || url.contains("chutes.ai")
            || is_deepseek
            || is_zai
            || is_moonshot
            || provider == "opencode"
            || url.contains("opencode.ai");
        let use_max_tokens = url.contains("chutes.ai") || is_moonshot;
        let detected_format = if is_deepseek {
            ThinkingFormat::Deepseek
        } else if is_zai {
            ThinkingFormat::Zai
        } else if provider == "openrouter" || url.contains("openrouter.ai") {
            ThinkingFormat::Openrouter
        } else {
            ThinkingFormat::Openai
        };
        let c = explicit.cloned().unwrap_or_default();
        ResolvedCompat {
            supports_store: c.supports_store.unwrap_or(!non_standard),
            supports_developer_role: c.supports_developer_role.unwrap_or(!non_standard),
            supports_reasoning_effort: c
                .supports_reasoning_effort
                .unwrap_or(!is_grok && !is_zai && !is_moonshot),
            supports_usage_in_streaming: c.supports_usage_in_streaming.unwrap_or(true),
            max_tokens_field: c.max_tokens_field.unwrap_or(if use_max_tokens {
                MaxTokensField::MaxTokens
            } else {
                MaxTokensField::MaxCompletionTokens
            }),
            requires_tool_result_name: c.requires_tool_result_name.unwrap_or(false),
            requires_assistant_after_tool_result: c
                .requires_assistant_after_tool_result
                .unwrap_or(false),
            requires_thinking_as_text: c.requires_thinking_as_text.unwrap_or(false),
            requires_reasoning_content_on_assistant_messages: c
                .requires_reasoning_content_on_assistant_messages
                .unwrap_or(is_deepseek),
            thinking_format: c.thinking_format.unwrap_or(detected_format),
            supports_strict_mode: c.supports_strict_mode.unwrap_or(!is_moonshot),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::wire::OPENAI_COMPLETIONS;

    fn resolved(model: &Model) -> ResolvedCompat {
        ResolvedCompat::detect(&model.provider, &model.base_url, model.compat.as_ref())
    }

    #[test]
    fn compat_is_detected_from_the_url_and_overridable() {
        let model = Model::new(
            OPENAI_COMPLETIONS,
            "deepseek",
            "deepseek-chat",
            "https://api.deepseek.com",
        );
        let c = resolved(&model);
        assert!(!c.supports_developer_role);
        assert_eq!(c.thinking_format, ThinkingFormat::Deepseek);
        let mut model = Model::new(
            OPENAI_COMPLETIONS,
            "openai",
            "o4",
            "https://api.openai.com/v1",
        );
        assert_eq!(
            resolved(&model).max_tokens_field,
            MaxTokensField::MaxCompletionTokens
        );
        model.compat = Some(OpenAiCompat {
            max_tokens_field: Some(MaxTokensField::MaxTokens),
            ..OpenAiCompat::default()
        });
        assert_eq!(resolved(&model).max_tokens_field, MaxTokensField::MaxTokens);
    }
}
