//! The models the sessions use, from the configuration or, when it names
//! none, from the usual API-key variables; offline when there is no key.

use std::sync::Arc;

use roundtable_providers::{
    ANTHROPIC_MESSAGES, AssistantBlock, AssistantMessage, Context, EventStream,
    GOOGLE_GENERATIVE_AI, HttpProvider, Model, OPENAI_COMPLETIONS, OPENAI_RESPONSES, Provider,
    ScriptStep, StreamOptions, WireApi, now_millis, script_events,
};

use crate::config::{ModelConfig, wire_api};

/// A model and the provider that calls it.
pub(crate) struct Offered {
    /// The model.
    pub(crate) model: Model,
    /// Its provider (with its key when the configuration gives one).
    pub(crate) provider: Arc<dyn Provider>,
}

/// The models of `configured`, or, when it is empty, those whose usual
/// API key is set (`OPENAI_API_KEY` with `OPENAI_BASE_URL`, `OPENAI_MODEL`
/// and `OPENAI_API`, `openai-responses` for the Responses API;
/// `ANTHROPIC_API_KEY` with `ANTHROPIC_MODEL`; `GEMINI_API_KEY` or
/// `GOOGLE_API_KEY` with `GEMINI_MODEL`). Empty: offline.
pub(crate) fn offered(configured: &[ModelConfig]) -> Result<Vec<Offered>, String> {
    let http = Arc::new(HttpProvider::new());
    if configured.is_empty() {
        return Ok(from_environment()
            .into_iter()
            .map(|model| Offered {
                model,
                provider: http.clone(),
            })
            .collect());
    }
    configured
        .iter()
        .map(|config| {
            let api = wire_api(&config.api)?;
            let base_url = config
                .base_url
                .clone()
                .unwrap_or_else(|| default_base_url(&api).to_string());
            let model = Model::new(api, &config.provider, &config.id, base_url);
            let key =
                match (&config.api_key, &config.api_key_env) {
                    (Some(key), _) => Some(key.clone()),
                    (None, Some(var)) => Some(std::env::var(var).map_err(|_| {
                        format!("model {}: api_key_env {var} is not set", config.id)
                    })?),
                    (None, None) => None,
                };
            let provider: Arc<dyn Provider> = match key {
                Some(key) => Arc::new(Keyed {
                    inner: http.clone(),
                    key,
                }),
                None => http.clone(),
            };
            Ok(Offered { model, provider })
        })
        .collect()
}

/// Google's Gemini API, version included.
const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

fn default_base_url(api: &WireApi) -> &'static str {
    match api {
        WireApi::AnthropicMessages => "https://api.anthropic.com",
        WireApi::GoogleGenerativeAi => GEMINI_BASE_URL,
        _ => "https://api.openai.com/v1",
    }
}

fn from_environment() -> Vec<Model> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut models = Vec::new();
    if env("OPENAI_API_KEY").is_some() {
        let base = env("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into());
        let id = env("OPENAI_MODEL").unwrap_or_else(|| "gpt-4o-mini".into());
        let api = match env("OPENAI_API").as_deref() {
            Some(OPENAI_RESPONSES) => OPENAI_RESPONSES,
            _ => OPENAI_COMPLETIONS,
        };
        models.push(Model::new(api, "openai", id, base));
    }
    if env("ANTHROPIC_API_KEY").is_some() {
        let id = env("ANTHROPIC_MODEL").unwrap_or_else(|| "claude-sonnet-4-5".into());
        models.push(Model::new(
            ANTHROPIC_MESSAGES,
            "anthropic",
            id,
            "https://api.anthropic.com",
        ));
    }
    if env("GEMINI_API_KEY")
        .or_else(|| env("GOOGLE_API_KEY"))
        .is_some()
    {
        let id = env("GEMINI_MODEL").unwrap_or_else(|| "gemini-2.5-flash".into());
        models.push(Model::new(
            GOOGLE_GENERATIVE_AI,
            "google",
            id,
            GEMINI_BASE_URL,
        ));
    }
    models
}

/// A provider whose calls carry a key of the configuration.
struct Keyed {
    inner: Arc<HttpProvider>,
    key: String,
}

impl Provider for Keyed {
    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> EventStream {
        let mut options = options.clone();
        options.api_key.get_or_insert_with(|| self.key.clone());
        self.inner.stream(model, context, &options)
    }

    fn breaker_state(&self, model: &Model) -> roundtable_providers::BreakerState {
        self.inner.breaker_state(model)
    }
}

/// The model of a daemon with none configured: it says so.
pub(crate) fn offline() -> Offered {
    Offered {
        model: Model::new(OPENAI_COMPLETIONS, "offline", "offline", ""),
        provider: Arc::new(Offline),
    }
}

/// Answers every message by saying it is offline, so the API, the events
/// and the storage all work without a key.
struct Offline;

impl Provider for Offline {
    fn stream(&self, model: &Model, context: &Context, _options: &StreamOptions) -> EventStream {
        let said = context.last_user_text();
        let mut reply = AssistantMessage::for_model(model, now_millis());
        reply.content.push(AssistantBlock::text(format!(
            "(offline) This daemon has no model, so it cannot act on: {said}\n\
             Configure a model (or set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY) and restart it."
        )));
        Box::pin(futures::stream::iter(script_events(
            ScriptStep::Reply(reply),
            16,
        )))
    }
}
