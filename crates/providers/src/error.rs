//! Typed failures. A call that fails after it was accepted still ends as an
//! assistant message (`stopReason: "error" | "aborted"`), as in pi-ai; the
//! [`ErrorKind`] beside it tells the host what kind of failure it was.

use serde::{Deserialize, Serialize};

use crate::message::{AssistantMessage, StopReason};
use crate::overflow::is_overflow_status;

/// How the error message of a stalled stream ([`ProviderError::Stalled`])
/// starts.
const STALLED_PREFIX: &str = "stream stalled: ";

/// Whether `message` failed because its stream went silent for longer than
/// the idle timeout ([`ProviderError::Stalled`]), rather than for another
/// timeout: a host may send such a request again when nothing of it was
/// shown yet.
///
/// ```
/// use roundtable_providers::{
///     AssistantMessage, Model, OPENAI_COMPLETIONS, ProviderError, StopReason, is_stalled,
/// };
///
/// let model = Model::new(OPENAI_COMPLETIONS, "p", "m", "");
/// let failed = |error: ProviderError| {
///     AssistantMessage::failure(&model, StopReason::Error, error.to_string(), 0)
/// };
/// assert!(is_stalled(&failed(ProviderError::Stalled { millis: 200 })));
/// assert!(!is_stalled(&failed(ProviderError::Timeout { millis: 10 })));
/// ```
pub fn is_stalled(message: &AssistantMessage) -> bool {
    message.stop_reason == StopReason::Error
        && message
            .error_message
            .as_deref()
            .is_some_and(|e| e.starts_with(STALLED_PREFIX))
}

/// What kind of failure ended a model call, for hosts that react differently
/// (back off on a rate limit, compact on a context overflow, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// The key is missing, wrong or lacks permission (401, 403).
    Auth,
    /// Too many requests (429).
    RateLimit,
    /// The server is overloaded (529, Anthropic `overloaded_error`, 503).
    Overloaded,
    /// The prompt does not fit the model's context window.
    ContextOverflow,
    /// The request was rejected for another reason (other 4xx).
    InvalidRequest,
    /// The server failed (other 5xx).
    Server,
    /// The connection failed or broke.
    Network,
    /// No response within the timeout, or a response whose body went
    /// silent for longer than the idle timeout.
    Timeout,
    /// The response did not follow the wire format (malformed frame, stream
    /// cut before its terminal event, unknown stop reason).
    Protocol,
    /// The model stopped for a reason that is an error (content filter,
    /// refusal).
    Refused,
    /// The provider's circuit breaker is open; no request was sent.
    CircuitOpen,
    /// The call was cancelled.
    Aborted,
}

impl ErrorKind {
    /// Whether a retry of the same request may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimit
                | ErrorKind::Overloaded
                | ErrorKind::Server
                | ErrorKind::Network
                | ErrorKind::Timeout
        )
    }

    /// The kind for an HTTP error status and its body.
    pub(crate) fn from_status(status: u16, body: &str) -> ErrorKind {
        match status {
            401 | 403 => ErrorKind::Auth,
            429 => ErrorKind::RateLimit,
            503 | 529 => ErrorKind::Overloaded,
            408 | 504 => ErrorKind::Timeout,
            400..=499 if is_overflow_status(status, body) => ErrorKind::ContextOverflow,
            500..=599 if body.contains("overloaded") => ErrorKind::Overloaded,
            500..=599 => ErrorKind::Server,
            _ => ErrorKind::InvalidRequest,
        }
    }
}

/// The crate's error: why a request could not be made or answered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The server answered with an error status.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The `Retry-After` delay the server asked for, in milliseconds.
        retry_after_ms: Option<u64>,
        /// The response body (truncated to a few kilobytes).
        body: String,
    },
    /// The connection failed or broke.
    #[error("network error: {message}")]
    Network {
        /// What the transport said.
        message: String,
    },
    /// No response within the timeout.
    #[error("timed out after {millis} ms")]
    Timeout {
        /// The timeout.
        millis: u64,
    },
    /// The response started, then its body went silent for longer than the
    /// idle timeout.
    #[error("{STALLED_PREFIX}no data for {} s", *millis as f64 / 1000.0)]
    Stalled {
        /// The idle timeout that passed.
        millis: u64,
    },
    /// The response broke the wire format.
    #[error("{message}")]
    Protocol {
        /// What was wrong.
        message: String,
    },
    /// The server reported an error inside the stream.
    #[error("{message}")]
    Stream {
        /// The kind the server's error type maps to.
        kind: ErrorKind,
        /// The server's message.
        message: String,
    },
    /// The model stopped for a reason that is an error.
    #[error("{message}")]
    Refused {
        /// Why, e.g. `Provider finish_reason: content_filter`.
        message: String,
    },
    /// The circuit breaker is open.
    #[error("circuit breaker open for provider {provider}")]
    CircuitOpen {
        /// The provider.
        provider: String,
    },
    /// The request could not be built (bad API, missing key, bad header).
    #[error("invalid request: {message}")]
    InvalidRequest {
        /// What was wrong.
        message: String,
    },
    /// The call was cancelled.
    #[error("Request was aborted")]
    Aborted,
}

impl ProviderError {
    /// The kind of this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ProviderError::Status { status, body, .. } => ErrorKind::from_status(*status, body),
            ProviderError::Network { .. } => ErrorKind::Network,
            ProviderError::Timeout { .. } | ProviderError::Stalled { .. } => ErrorKind::Timeout,
            ProviderError::Protocol { .. } => ErrorKind::Protocol,
            ProviderError::Stream { kind, .. } => *kind,
            ProviderError::Refused { .. } => ErrorKind::Refused,
            ProviderError::CircuitOpen { .. } => ErrorKind::CircuitOpen,
            ProviderError::InvalidRequest { .. } => ErrorKind::InvalidRequest,
            ProviderError::Aborted => ErrorKind::Aborted,
        }
    }

    /// A protocol error with the given message.
    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        ProviderError::Protocol {
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(ErrorKind::from_status(401, ""), ErrorKind::Auth);
        assert_eq!(ErrorKind::from_status(429, ""), ErrorKind::RateLimit);
        assert_eq!(ErrorKind::from_status(529, ""), ErrorKind::Overloaded);
        assert_eq!(ErrorKind::from_status(500, ""), ErrorKind::Server);
        assert_eq!(
            ErrorKind::from_status(400, r#"{"error":{"code":"context_length_exceeded"}}"#),
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            ErrorKind::from_status(400, "prompt is too long: 210000 tokens > 200000 maximum"),
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            ErrorKind::from_status(400, "bad field"),
            ErrorKind::InvalidRequest
        );
        let stalled = ProviderError::Stalled { millis: 60_000 };
        assert_eq!(stalled.kind(), ErrorKind::Timeout);
        assert_eq!(stalled.to_string(), "stream stalled: no data for 60 s");
        assert_eq!(
            ProviderError::Stalled { millis: 200 }.to_string(),
            "stream stalled: no data for 0.2 s"
        );
        assert!(ErrorKind::RateLimit.is_retryable());
        assert!(!ErrorKind::Auth.is_retryable());
    }
}
