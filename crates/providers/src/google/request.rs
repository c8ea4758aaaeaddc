//! Building a Gemini request: pure functions from the model, context and
//! options to the URL, the headers and the JSON body, as pi-ai's
//! `buildParams` builds them and Google's SDK writes them.

use serde_json::{Map, Value, json};

use crate::context::{Context, ModelTool, StreamOptions};
use crate::model::Model;
use crate::thinking::ThinkingLevel;

use super::contents::convert_contents;
use super::schema::gemini_schema;

/// The streaming endpoint of the model under the base URL (which holds the
/// API version, e.g. `.../v1beta`).
pub(super) fn endpoint(model: &Model) -> String {
    format!(
        "{}/models/{}:streamGenerateContent?alt=sse",
        model.base_url.trim_end_matches('/'),
        model.id
    )
}

/// The request headers: the key as `x-goog-api-key` (when there is one),
/// the model's headers, then the options' headers.
pub(super) fn headers(
    model: &Model,
    options: &StreamOptions,
    api_key: Option<&str>,
) -> Vec<(String, String)> {
    let mut out = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "text/event-stream".to_string()),
    ];
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        out.push(("x-goog-api-key".to_string(), key.to_string()));
    }
    for (k, v) in model.headers.iter().chain(options.headers.iter()) {
        out.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        out.push((k.clone(), v.clone()));
    }
    out
}

/// The JSON body: contents, system instruction, tools, generation config.
pub(super) fn build_body(model: &Model, context: &Context, options: &StreamOptions) -> Value {
    let mut body = Map::new();
    body.insert(
        "contents".into(),
        Value::Array(convert_contents(model, &context.messages)),
    );
    if let Some(system) = context.system_prompt.as_deref().filter(|s| !s.is_empty()) {
        body.insert(
            "systemInstruction".into(),
            json!({ "parts": [{ "text": system }], "role": "user" }),
        );
    }
    if !context.tools.is_empty() {
        let declarations: Vec<Value> = context.tools.iter().map(declaration).collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
    }
    let mut config = Map::new();
    if let Some(t) = options.temperature {
        config.insert("temperature".into(), json!(t));
    }
    if let Some(max) = options.effective_max_tokens(model.max_tokens) {
        config.insert("maxOutputTokens".into(), Value::from(max));
    }
    if let Some(thinking) = thinking_config(model, options.thinking) {
        config.insert("thinkingConfig".into(), thinking);
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    Value::Object(body)
}

fn declaration(tool: &ModelTool) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "parametersJsonSchema": gemini_schema(&tool.parameters),
    })
}

fn is_gemini_3_pro(id: &str) -> bool {
    gemini_3_variant(id) == Some("pro")
}

fn is_gemini_3_flash(id: &str) -> bool {
    gemini_3_variant(id) == Some("flash")
}

/// Whether the id names a Gemini 3 Pro or Flash (`gemini-3-pro...`,
/// `gemini-3.1-flash...`), as pi-ai's patterns tell them.
fn gemini_3_variant(id: &str) -> Option<&'static str> {
    let id = id.to_ascii_lowercase();
    let at = id.find("gemini-3")?;
    let rest = &id[at + "gemini-3".len()..];
    let rest = match rest.strip_prefix('.') {
        Some(minor) if minor.starts_with(|c: char| c.is_ascii_digit()) => {
            minor.trim_start_matches(|c: char| c.is_ascii_digit())
        }
        _ => rest,
    };
    let rest = rest.strip_prefix('-')?;
    ["pro", "flash"]
        .into_iter()
        .find(|variant| rest.starts_with(variant))
}

fn is_gemma_4(id: &str) -> bool {
    let id = id.to_ascii_lowercase();
    id.contains("gemma4") || id.contains("gemma-4")
}

/// The thinking configuration, as pi-ai's `streamSimpleGoogle`: off, the
/// least a model allows (Gemini 3 and Gemma 4 cannot switch it off);
/// on, a level (Gemini 3, Gemma 4) or a token budget (Gemini 2.5).
fn thinking_config(model: &Model, level: ThinkingLevel) -> Option<Value> {
    if !model.reasoning {
        return None;
    }
    let id = model.id.as_str();
    if level == ThinkingLevel::Off {
        return Some(if is_gemini_3_pro(id) {
            json!({ "thinkingLevel": "LOW" })
        } else if is_gemini_3_flash(id) || is_gemma_4(id) {
            json!({ "thinkingLevel": "MINIMAL" })
        } else {
            json!({ "thinkingBudget": 0 })
        });
    }
    let effort = match model.clamp_thinking(level) {
        ThinkingLevel::Off => ThinkingLevel::High,
        effort => effort,
    };
    let mut config = json!({ "includeThoughts": true });
    if is_gemini_3_pro(id) || is_gemini_3_flash(id) || is_gemma_4(id) {
        if let Some(level) = thinking_level(id, effort) {
            config["thinkingLevel"] = Value::from(level);
        }
    } else if let Some(budget) = thinking_budget(id, effort) {
        config["thinkingBudget"] = Value::from(budget);
    }
    Some(config)
}

fn thinking_level(id: &str, effort: ThinkingLevel) -> Option<&'static str> {
    use ThinkingLevel::*;
    let coarse = is_gemini_3_pro(id) || is_gemma_4(id);
    Some(match effort {
        Minimal | Low if is_gemini_3_pro(id) => "LOW",
        Minimal | Low if coarse => "MINIMAL",
        Medium | High if coarse => "HIGH",
        Minimal => "MINIMAL",
        Low => "LOW",
        Medium => "MEDIUM",
        High => "HIGH",
        Off | Xhigh => return None,
    })
}

/// The thinking budget of a Gemini 2.5 model (`-1`, dynamic, for others).
fn thinking_budget(id: &str, effort: ThinkingLevel) -> Option<i64> {
    use ThinkingLevel::*;
    let budgets: [i64; 4] = if id.contains("2.5-pro") {
        [128, 2048, 8192, 32768]
    } else if id.contains("2.5-flash-lite") {
        [512, 2048, 8192, 24576]
    } else if id.contains("2.5-flash") {
        [128, 2048, 8192, 24576]
    } else {
        return Some(-1);
    };
    Some(match effort {
        Minimal => budgets[0],
        Low => budgets[1],
        Medium => budgets[2],
        High => budgets[3],
        Off | Xhigh => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::GOOGLE_GENERATIVE_AI;

    fn config(id: &str, level: ThinkingLevel) -> Option<Value> {
        let mut model = Model::new(GOOGLE_GENERATIVE_AI, "google", id, "http://x/v1beta");
        model.reasoning = true;
        thinking_config(&model, level)
    }

    #[test]
    fn thinking_follows_the_model_family() {
        use ThinkingLevel::*;
        assert_eq!(
            config("gemini-2.5-flash", Off),
            Some(json!({"thinkingBudget": 0}))
        );
        assert_eq!(
            config("gemini-2.5-pro", Medium),
            Some(json!({"includeThoughts": true, "thinkingBudget": 8192}))
        );
        assert_eq!(
            config("gemini-3-pro-preview", Minimal),
            Some(json!({"includeThoughts": true, "thinkingLevel": "LOW"}))
        );
        assert_eq!(
            config("gemini-3.1-pro", Off),
            Some(json!({"thinkingLevel": "LOW"}))
        );
        assert_eq!(
            config("gemini-3-flash-preview", Medium),
            Some(json!({"includeThoughts": true, "thinkingLevel": "MEDIUM"}))
        );
        assert_eq!(
            config("gemma-4-27b", Medium),
            Some(json!({"includeThoughts": true, "thinkingLevel": "HIGH"}))
        );
        assert_eq!(
            config("gemini-exp", High),
            Some(json!({"includeThoughts": true, "thinkingBudget": -1}))
        );
    }

    #[test]
    fn endpoint_names_the_model() {
        let model = Model::new(
            GOOGLE_GENERATIVE_AI,
            "google",
            "gemini-2.5-flash",
            "https://g/v1beta/",
        );
        assert_eq!(
            endpoint(&model),
            "https://g/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        let headers = headers(&model, &StreamOptions::default(), Some("k"));
        assert!(headers.contains(&("x-goog-api-key".into(), "k".into())));
    }
}
