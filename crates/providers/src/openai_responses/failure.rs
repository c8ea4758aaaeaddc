//! How a Responses stream fails: an `error` event, a `response.failed`, a
//! response cut short for a reason that is an error; each typed by the
//! API's error code and worded as pi-ai words it.

use serde_json::Value;

use crate::error::{ErrorKind, ProviderError};
use crate::overflow::is_overflow_text;

use super::event::Response;

/// The kind of an API error code (`rate_limit_exceeded`, `server_error`,
/// ...), its message deciding the rest.
fn kind_of(code: &str, message: &str) -> ErrorKind {
    match code {
        "rate_limit_exceeded" => ErrorKind::RateLimit,
        "server_is_overloaded" | "overloaded" | "slow_down" => ErrorKind::Overloaded,
        "context_length_exceeded" => ErrorKind::ContextOverflow,
        "invalid_api_key" | "unauthorized" | "permission_denied" => ErrorKind::Auth,
        _ if is_overflow_text(message) => ErrorKind::ContextOverflow,
        "invalid_prompt" | "invalid_request_error" | "insufficient_quota" => {
            ErrorKind::InvalidRequest
        }
        _ if message.to_ascii_lowercase().contains("overloaded") => ErrorKind::Overloaded,
        _ => ErrorKind::Server,
    }
}

fn text_of(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// An `error` event: `{"type":"error","code","message",...}` as the API
/// documents it, or with the fields inside an `error` object.
pub(super) fn error_event(data: &str) -> ProviderError {
    let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
    let fields = match value.get("error") {
        Some(error @ Value::Object(_)) => error,
        _ => &value,
    };
    let code = text_of(fields.get("code"));
    let message = text_of(fields.get("message"));
    let kind = kind_of(
        code.as_deref().unwrap_or_default(),
        message.as_deref().unwrap_or_default(),
    );
    let message = match (code, message) {
        (Some(code), Some(message)) => format!("Error Code {code}: {message}"),
        (None, Some(message)) => message,
        (Some(code), None) => format!("Error Code {code}"),
        (None, None) => format!("Responses error event: {}", truncate(data)),
    };
    ProviderError::Stream { kind, message }
}

/// A `response.failed`: its error's code and message.
pub(super) fn failed(response: &Response<'_>) -> ProviderError {
    let error = response.error.as_ref().filter(|e| e.is_object());
    let reason = response
        .incomplete_details
        .as_ref()
        .and_then(|d| text_of(d.get("reason")));
    let (kind, message) = match (error, reason) {
        (Some(error), _) => {
            let code = text_of(error.get("code"));
            let message = text_of(error.get("message"));
            let kind = kind_of(
                code.as_deref().unwrap_or_default(),
                message.as_deref().unwrap_or_default(),
            );
            let code = code.unwrap_or_else(|| "unknown".into());
            let message = message.unwrap_or_else(|| "no message".into());
            (kind, format!("{code}: {message}"))
        }
        (None, Some(reason)) => (ErrorKind::Server, format!("incomplete: {reason}")),
        (None, None) => (
            ErrorKind::Server,
            "Unknown error (no error details in response)".to_string(),
        ),
    };
    ProviderError::Stream { kind, message }
}

/// A response cut short for a reason that is an error (its content
/// filtered); `None` when it stopped at its output limit.
pub(super) fn incomplete_failure(response: &Response<'_>) -> Option<ProviderError> {
    let reason = response
        .incomplete_details
        .as_ref()
        .and_then(|d| text_of(d.get("reason")))?;
    (reason == "content_filter").then(|| ProviderError::Refused {
        message: format!("incomplete: {reason}"),
    })
}

/// The first 200 characters of `s`.
pub(super) fn truncate(s: &str) -> &str {
    match s.char_indices().nth(200) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_events_of_both_shapes_are_typed() {
        let flat = error_event(
            r#"{"type":"error","code":"rate_limit_exceeded","message":"Slow down","param":null}"#,
        );
        assert_eq!(flat.kind(), ErrorKind::RateLimit);
        assert_eq!(
            flat.to_string(),
            "Error Code rate_limit_exceeded: Slow down"
        );
        let nested = error_event(
            r#"{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model."}}"#,
        );
        assert_eq!(nested.kind(), ErrorKind::ContextOverflow);
        assert_eq!(error_event("{}").kind(), ErrorKind::Server);
    }
}
