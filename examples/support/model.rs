//! What the examples share to pick their model: a real provider when an API
//! key is set, nothing (the example's offline script) otherwise.
//!
//! `OPENAI_API_KEY` selects OpenAI's chat completions API (`OPENAI_BASE_URL`
//! for another compatible server, `OPENAI_MODEL` for the model, default
//! `gpt-4o-mini`; `OPENAI_API=openai-responses` for the Responses API);
//! `ANTHROPIC_API_KEY` selects Anthropic (`ANTHROPIC_MODEL`, default
//! `claude-sonnet-4-5`); `GEMINI_API_KEY` or `GOOGLE_API_KEY` selects Gemini
//! (`GEMINI_MODEL`, default `gemini-2.5-flash`). `ROUNDTABLE_<ROLE>_MODEL` /
//! `ROUNDTABLE_MODEL` (`provider/id`) override the model through the role.

use roundtable::providers::{
    ANTHROPIC_MESSAGES, GOOGLE_GENERATIVE_AI, Model, ModelRef, OPENAI_COMPLETIONS,
    OPENAI_RESPONSES, RoleModels,
};

/// The models of the real providers whose API keys are set, for `role`
/// (OpenAI's, then Anthropic's, then Gemini's); empty means offline. The role's model
/// (`ROUNDTABLE_<ROLE>_MODEL`) replaces the first.
pub(crate) fn real_models(role: &str) -> Vec<Model> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut from_role = RoleModels::default().model(role);
    let mut models = Vec::new();
    if env("OPENAI_API_KEY").is_some() {
        let base = env("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".into());
        let id = env("OPENAI_MODEL").unwrap_or_else(|| "gpt-4o-mini".into());
        let r = from_role.take().unwrap_or(ModelRef {
            provider: "openai".into(),
            id,
        });
        let api = match env("OPENAI_API").as_deref() {
            Some(OPENAI_RESPONSES) => OPENAI_RESPONSES,
            _ => OPENAI_COMPLETIONS,
        };
        models.push(Model::new(api, r.provider, r.id, base));
    }
    if env("ANTHROPIC_API_KEY").is_some() {
        let id = env("ANTHROPIC_MODEL").unwrap_or_else(|| "claude-sonnet-4-5".into());
        let r = from_role.take().unwrap_or(ModelRef {
            provider: "anthropic".into(),
            id,
        });
        models.push(Model::new(
            ANTHROPIC_MESSAGES,
            r.provider,
            r.id,
            "https://api.anthropic.com",
        ));
    }
    if env("GEMINI_API_KEY")
        .or_else(|| env("GOOGLE_API_KEY"))
        .is_some()
    {
        let id = env("GEMINI_MODEL").unwrap_or_else(|| "gemini-2.5-flash".into());
        let r = from_role.take().unwrap_or(ModelRef {
            provider: "google".into(),
            id,
        });
        models.push(Model::new(
            GOOGLE_GENERATIVE_AI,
            r.provider,
            r.id,
            "https://generativelanguage.googleapis.com/v1beta",
        ));
    }
    models
}
