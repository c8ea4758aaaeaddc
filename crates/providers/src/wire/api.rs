//! `WireApi`: which wire format a model's server speaks, named as pi-ai
//! names it in `Model.api`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The `api` of OpenAI chat completions and the servers that copy it
/// ([`WireApi::OpenAiCompletions`]).
pub const OPENAI_COMPLETIONS: &str = "openai-completions";
/// The `api` of Anthropic messages ([`WireApi::AnthropicMessages`]).
pub const ANTHROPIC_MESSAGES: &str = "anthropic-messages";
/// The `api` of the OpenAI Responses API ([`WireApi::OpenAiResponses`]).
pub const OPENAI_RESPONSES: &str = "openai-responses";
/// The `api` of Google's Gemini API ([`WireApi::GoogleGenerativeAi`]).
pub const GOOGLE_GENERATIVE_AI: &str = "google-generative-ai";

/// The wire API of a model: how a request is written and how the streamed
/// answer reads. It is written as pi-ai's `api` string (`"openai-completions"`,
/// `"anthropic-messages"`, `"openai-responses"`, `"google-generative-ai"`); a string no adapter speaks is kept as
/// [`WireApi::Other`], so a model list naming an API added later still reads
/// and writes back unchanged, and a call to such a model fails with
/// `invalid request: no adapter for API ...`.
///
/// ```
/// use roundtable_providers::{Model, WireApi};
///
/// let model: Model = serde_json::from_str(
///     r#"{"id": "m", "api": "bedrock-converse-stream", "provider": "amazon", "baseUrl": "http://x"}"#,
/// ).unwrap();
/// assert_eq!(model.api, WireApi::Other("bedrock-converse-stream".into()));
/// assert!(serde_json::to_string(&model).unwrap().contains(r#""api":"bedrock-converse-stream""#));
/// assert_eq!(WireApi::from("anthropic-messages"), WireApi::AnthropicMessages);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WireApi {
    /// OpenAI chat completions (`openai-completions`): OpenAI, vLLM,
    /// llama.cpp, Ollama, OpenRouter, DeepSeek, Groq and the like.
    OpenAiCompletions,
    /// Anthropic messages (`anthropic-messages`).
    AnthropicMessages,
    /// The OpenAI Responses API (`openai-responses`).
    OpenAiResponses,
    /// Google's Gemini API, `streamGenerateContent` (`google-generative-ai`).
    GoogleGenerativeAi,
    /// An API no adapter here speaks, by its name.
    Other(String),
}

impl WireApi {
    /// The API's name, as written in `Model.api` and `AssistantMessage.api`.
    pub fn as_str(&self) -> &str {
        match self {
            WireApi::OpenAiCompletions => OPENAI_COMPLETIONS,
            WireApi::AnthropicMessages => ANTHROPIC_MESSAGES,
            WireApi::OpenAiResponses => OPENAI_RESPONSES,
            WireApi::GoogleGenerativeAi => GOOGLE_GENERATIVE_AI,
            WireApi::Other(name) => name,
        }
    }
}

impl From<String> for WireApi {
    fn from(name: String) -> Self {
        match name.as_str() {
            OPENAI_COMPLETIONS => WireApi::OpenAiCompletions,
            ANTHROPIC_MESSAGES => WireApi::AnthropicMessages,
            OPENAI_RESPONSES => WireApi::OpenAiResponses,
            GOOGLE_GENERATIVE_AI => WireApi::GoogleGenerativeAi,
            _ => WireApi::Other(name),
        }
    }
}

impl From<&str> for WireApi {
    fn from(name: &str) -> Self {
        WireApi::from(name.to_string())
    }
}

impl fmt::Display for WireApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WireApi {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for WireApi {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(WireApi::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_and_write_back_unchanged() {
        for (name, api) in [
            (OPENAI_COMPLETIONS, WireApi::OpenAiCompletions),
            (ANTHROPIC_MESSAGES, WireApi::AnthropicMessages),
            (OPENAI_RESPONSES, WireApi::OpenAiResponses),
            (GOOGLE_GENERATIVE_AI, WireApi::GoogleGenerativeAi),
            (
                "bedrock-converse-stream",
                WireApi::Other("bedrock-converse-stream".into()),
            ),
            ("", WireApi::Other(String::new())),
        ] {
            let json = serde_json::to_string(name).unwrap();
            let read: WireApi = serde_json::from_str(&json).unwrap();
            assert_eq!(read, api);
            assert_eq!(serde_json::to_string(&read).unwrap(), json);
            assert_eq!(WireApi::from(name.to_string()), api);
            assert_eq!(api.to_string(), name);
        }
        assert!(serde_json::from_str::<WireApi>("7").is_err());
    }
}
