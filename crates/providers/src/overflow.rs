//! Recognising a context overflow: a request larger than the model's
//! context window. Servers say it in many words; pi-ai's list of them is
//! followed here so that both wire APIs, and the servers behind the
//! OpenAI-compatible one, are recognised alike. A runner that compacts its
//! history on an overflow asks [`is_context_overflow`]; the adapters ask
//! [`is_overflow_text`] when they classify a server's error.

use crate::message::{AssistantMessage, StopReason};

/// Words servers use to say the prompt does not fit, lower case (pi-ai's
/// overflow patterns without numbers: Anthropic, Amazon Bedrock, OpenAI,
/// Groq, llama.cpp, LM Studio, MiniMax, Kimi, z.ai, generic fallbacks).
const OVERFLOW_WORDS: &[&str] = &[
    "prompt is too long",
    "request_too_large",
    "input is too long for requested model",
    "exceeds the context window",
    "reduce the length of the messages",
    "exceeds the available context size",
    "greater than the context length",
    "context window exceeds limit",
    "exceeded model token limit",
    "model_context_window_exceeded",
    "context_length_exceeded",
    "context length exceeded",
    "context_length exceeded",
    "context length_exceeded",
    "too many tokens",
    "token limit exceeded",
];

/// Words followed by a number of tokens (xAI, OpenRouter, GitHub Copilot).
const OVERFLOW_WORDS_BEFORE_A_NUMBER: &[&str] = &[
    "maximum prompt length is ",
    "maximum context length is ",
    "exceeds the limit of ",
];

/// Errors that mention tokens but are not overflows: rate limits and
/// Bedrock's throttling (`Too many tokens, please wait`).
const NOT_OVERFLOW_WORDS: &[&str] = &["rate limit", "too many requests"];

/// Prefixes of errors that are not overflows (Amazon Bedrock's).
const NOT_OVERFLOW_PREFIXES: &[&str] = &["throttling error:", "service unavailable:"];

/// Whether an error text says the prompt is larger than the context window,
/// in the words the known servers use (pi-ai's `OVERFLOW_PATTERNS`, less its
/// `NON_OVERFLOW_PATTERNS`).
///
/// ```
/// use roundtable_providers::is_overflow_text;
///
/// assert!(is_overflow_text("prompt is too long: 213462 tokens > 200000 maximum"));
/// assert!(is_overflow_text("This model's maximum context length is 128000 tokens."));
/// assert!(is_overflow_text("413 status code (no body)"));
/// assert!(!is_overflow_text("ThrottlingException: Too many tokens, please wait"));
/// assert!(!is_overflow_text("rate limit reached: too many tokens per minute"));
/// ```
pub fn is_overflow_text(text: &str) -> bool {
    let text = text.trim().to_ascii_lowercase();
    if NOT_OVERFLOW_WORDS.iter().any(|w| text.contains(w))
        || NOT_OVERFLOW_PREFIXES.iter().any(|p| text.starts_with(p))
        || text.starts_with("throttlingexception")
    {
        return false;
    }
    OVERFLOW_WORDS.iter().any(|w| text.contains(w))
        || OVERFLOW_WORDS_BEFORE_A_NUMBER
            .iter()
            .any(|w| followed_by_digit(&text, w))
        || (text.contains("input token count") && text.contains("exceeds the maximum"))
        || (text.contains("too large for model with")
            && followed_by_digit(&text, "too large for model with ")
            && text.contains("maximum context length"))
        || (text.contains("prompt too long; exceeded")
            && (text.contains("exceeded context length")
                || text.contains("exceeded max context length")))
        || is_empty_rejection(&text)
}

/// Whether `text` holds `words` followed by a digit.
fn followed_by_digit(text: &str, words: &str) -> bool {
    text.match_indices(words).any(|(at, w)| {
        text[at + w.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// A 400 or 413 without a body, as Cerebras answers an overflow: pi-ai's
/// `400 status code (no body)` and this crate's `HTTP 413: `.
fn is_empty_rejection(text: &str) -> bool {
    let rest = text.strip_prefix("http ").unwrap_or(text);
    let Some(rest) = rest
        .strip_prefix("400")
        .or_else(|| rest.strip_prefix("413"))
    else {
        return false;
    };
    let rest = rest.trim_start_matches(':').trim();
    let rest = rest.strip_prefix("status code").unwrap_or(rest).trim();
    rest.is_empty() || rest == "(no body)"
}

/// Whether an HTTP error status and its body say the prompt is too large.
pub(crate) fn is_overflow_status(status: u16, body: &str) -> bool {
    (matches!(status, 400 | 413) && body.trim().is_empty()) || is_overflow_text(body)
}

/// Whether an assistant message tells that its request did not fit the
/// model's context window, as pi-ai's `isContextOverflow` decides:
///
/// 1. a failed message (`stopReason: "error"`) whose error text says so
///    ([`is_overflow_text`]);
/// 2. with a known `context_window` (non-zero), a successful message whose
///    input (uncached and cache reads) is above it: a server that accepts
///    an overflow silently (z.ai);
/// 3. with a known `context_window`, a message cut by the output limit with
///    no output at all and an input filling 99 % of the window: a server
///    that truncates the input to fit (Xiaomi MiMo).
///
/// A runner gets the kind of a failure too ([`ErrorKind::ContextOverflow`](crate::ErrorKind::ContextOverflow));
/// this covers what reaches it only as text or as usage.
///
/// ```
/// use roundtable_providers::{AssistantMessage, Model, StopReason, is_context_overflow, OPENAI_COMPLETIONS};
///
/// let model = Model::new(OPENAI_COMPLETIONS, "openai", "gpt-4o-mini", "");
/// let failed = AssistantMessage::failure(&model, StopReason::Error, "Your input exceeds the context window of this model", 0);
/// assert!(is_context_overflow(&failed, 0));
/// let mut silent = AssistantMessage::for_model(&model, 0);
/// silent.usage.input = 130_000;
/// assert!(is_context_overflow(&silent, 128_000));
/// assert!(!is_context_overflow(&silent, 0));
/// ```
pub fn is_context_overflow(message: &AssistantMessage, context_window: u64) -> bool {
    if message.stop_reason == StopReason::Error
        && message
            .error_message
            .as_deref()
            .is_some_and(is_overflow_text)
    {
        return true;
    }
    if context_window == 0 {
        return false;
    }
    let input = message.usage.input.saturating_add(message.usage.cache_read);
    match message.stop_reason {
        StopReason::Stop => input > context_window,
        // input >= 99 % of the window, in integers.
        StopReason::Length => {
            message.usage.output == 0 && u128::from(input) * 100 >= u128::from(context_window) * 99
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::wire::OPENAI_COMPLETIONS;

    /// pi-ai's examples, one per server it names.
    #[test]
    fn every_server_pi_ai_names_is_recognised() {
        for text in [
            "prompt is too long: 213462 tokens > 200000 maximum",
            r#"413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#,
            "Your input exceeds the context window of this model",
            "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
            "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
            "Please reduce the length of the messages or completion",
            "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens",
            "the request exceeds the available context size, try increasing it",
            "tokens to keep from the initial prompt is greater than the context length",
            "prompt token count of 140000 exceeds the limit of 128000",
            "invalid params, context window exceeds limit",
            "Your request exceeded model token limit: 262144 (requested: 300000)",
            "400 status code (no body)",
            "413 (no body)",
            "HTTP 413: ",
            "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length",
            "model_context_window_exceeded",
            "prompt too long; exceeded max context length by 1200 tokens",
            "context_length_exceeded",
            "Input is too long for requested model.",
        ] {
            assert!(is_overflow_text(text), "{text}");
        }
    }

    #[test]
    fn throttling_rate_limits_and_other_rejections_are_not_overflows() {
        for text in [
            "Throttling error: Too many tokens, please wait before trying again.",
            "ThrottlingException: Too many tokens, please wait before trying again.",
            "Service unavailable: too many tokens",
            "Rate limit reached for gpt-4o: too many tokens per minute",
            "429 Too Many Requests",
            "400 status code: invalid field 'tools'",
            "HTTP 400: {\"error\":\"bad field\"}",
            "maximum context length is unknown",
            "",
        ] {
            assert!(!is_overflow_text(text), "{text}");
        }
    }

    #[test]
    fn statuses_without_a_body_are_overflows_only_for_400_and_413() {
        assert!(is_overflow_status(413, ""));
        assert!(is_overflow_status(400, "  "));
        assert!(!is_overflow_status(404, ""));
        assert!(is_overflow_status(400, "context_length_exceeded"));
    }

    #[test]
    fn silent_and_truncating_overflows_need_the_window() {
        let model = Model::new(OPENAI_COMPLETIONS, "p", "m", "");
        let mut cut = AssistantMessage::for_model(&model, 0);
        cut.stop_reason = StopReason::Length;
        cut.usage.input = 99_000;
        cut.usage.cache_read = 100;
        assert!(is_context_overflow(&cut, 100_000));
        cut.usage.output = 1;
        assert!(!is_context_overflow(&cut, 100_000));
        let mut fine = AssistantMessage::for_model(&model, 0);
        fine.usage.input = 100_000;
        assert!(!is_context_overflow(&fine, 100_000));
        assert!(!is_context_overflow(&fine, 0));
        let refused = AssistantMessage::failure(&model, StopReason::Error, "rate limit", 0);
        assert!(!is_context_overflow(&refused, 100_000));
    }
}
