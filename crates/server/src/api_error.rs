//! What a client sees when a request fails: a status and the JSON body
//! `{"error": {"code": "...", "message": "..."}}`, the same for every route
//! and every layer (a malformed body, a missing token, an engine error).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;

use roundtable_sessions::{SessionError, SessionErrorKind};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

/// The machine-readable reason of a failed request; each has one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// 400: the request cannot be read (a body that is not JSON, a header
    /// or query parameter that does not parse).
    InvalidRequest,
    /// 401: no token, or a token that is not valid.
    Unauthorized,
    /// 403: a `Host` the server does not answer to, or a cross-origin
    /// request from an origin the host did not allow.
    Forbidden,
    /// 404: no such session, turn or call (or not the caller's), or no
    /// such route.
    NotFound,
    /// 405: the route exists, not with this method.
    MethodNotAllowed,
    /// 409: the request conflicts with the session's state (cancel with
    /// nothing running, a decision for a call already decided).
    Conflict,
    /// 409: the session runs a turn (or holds queued messages), and the
    /// request needs it idle (deleting it).
    SessionBusy,
    /// 413: the body is larger than the route accepts.
    TooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 422: the body reads but a field is invalid (a missing workspace, an
    /// unknown action).
    InvalidField,
    /// 422: an `Idempotency-Key` sent again with another request (as the
    /// IETF idempotency-key draft recommends): a retry sends the same body.
    IdempotencyKeyReused,
    /// 500: the session named cannot be read (its stored thread is
    /// damaged); the server's other sessions are served.
    SessionUnreadable,
    /// 500: the engine or its storage failed.
    Internal,
    /// 503: the request took longer than the server allows.
    Timeout,
    /// 503: the server holds as many connections as it allows; the
    /// connection is closed after this answer.
    Overloaded,
    /// The server is stopping and starts no new turn (503).
    ShuttingDown,
}

impl ErrorCode {
    /// The HTTP status of this code.
    pub fn status(self) -> StatusCode {
        match self {
            Self::InvalidRequest => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict | Self::SessionBusy => StatusCode::CONFLICT,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::InvalidField | Self::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::SessionUnreadable | Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Timeout | Self::Overloaded | Self::ShuttingDown => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    /// The code as written in the body (`not_found`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::SessionBusy => "session_busy",
            Self::TooLarge => "too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::InvalidField => "invalid_field",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::SessionUnreadable => "session_unreadable",
            Self::Internal => "internal",
            Self::Timeout => "timeout",
            Self::Overloaded => "overloaded",
            Self::ShuttingDown => "shutting_down",
        }
    }

    /// Every code, in the order of their statuses.
    const ALL: [Self; 16] = [
        Self::InvalidRequest,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::Conflict,
        Self::SessionBusy,
        Self::TooLarge,
        Self::UnsupportedMediaType,
        Self::InvalidField,
        Self::IdempotencyKeyReused,
        Self::SessionUnreadable,
        Self::Internal,
        Self::Timeout,
        Self::Overloaded,
        Self::ShuttingDown,
    ];

    /// The code of an engine error of `kind`: the one place an engine
    /// error becomes a status.
    pub fn of_kind(kind: SessionErrorKind) -> Self {
        match kind {
            SessionErrorKind::Invalid => Self::InvalidField,
            SessionErrorKind::NotFound => Self::NotFound,
            SessionErrorKind::Conflict => Self::Conflict,
            SessionErrorKind::KeyReused => Self::IdempotencyKeyReused,
            SessionErrorKind::TooLarge => Self::TooLarge,
            SessionErrorKind::Unreadable => Self::SessionUnreadable,
            SessionErrorKind::Unavailable => Self::ShuttingDown,
            SessionErrorKind::Internal => Self::Internal,
        }
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl JsonSchema for ErrorCode {
    fn schema_name() -> Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let codes: Vec<&str> = Self::ALL.iter().map(|code| code.as_str()).collect();
        json_schema!({
            "description": "Why a request failed; each code has one HTTP status.",
            "type": "string",
            "enum": codes,
        })
    }
}

/// The JSON body of every error: `{"error": {"code", "message"}}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ErrorBody<'a> {
    /// The error.
    error: ErrorDetail<'a>,
}

/// What an error body says.
#[derive(Debug, Serialize, JsonSchema)]
struct ErrorDetail<'a> {
    /// Why it failed.
    code: ErrorCode,
    /// What went wrong, in words.
    message: &'a str,
}

/// A failed request: its code and a message for humans.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct ApiError {
    /// Why it failed.
    pub code: ErrorCode,
    /// What went wrong, in words.
    pub message: String,
}

impl ApiError {
    /// An error of `code` saying `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A failure of the server itself: `detail`, which may name paths of
    /// the server's disk, goes to the log; the client reads a fixed
    /// message that names none.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(ErrorCode::Internal, INTERNAL_MESSAGE)
    }

    /// The JSON body of this error.
    pub fn body(&self) -> serde_json::Value {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: &self.message,
            },
        };
        serde_json::to_value(body).unwrap_or_default()
    }
}

/// What a client reads of an internal failure: the details (a store's
/// file, an I/O error naming a path) are for the server's log only.
const INTERNAL_MESSAGE: &str = "the server failed; its log has the details";

impl From<SessionError> for ApiError {
    fn from(error: SessionError) -> Self {
        let code = ErrorCode::of_kind(error.kind());
        if code == ErrorCode::Internal {
            return Self::internal(Chain(&error));
        }
        Self::new(code, error.to_string())
    }
}

/// An error and its sources, one after the other (for the log).
struct Chain<'a>(&'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.code.status(), Json(self.body())).into_response();
        if self.code == ErrorCode::Unauthorized {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The answer to a path that is no route.
pub(crate) async fn no_route() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

/// The answer to a route asked with a method it does not have.
pub(crate) async fn wrong_method() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this route does not take this method",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_map_to_their_status() {
        let cases = [
            (
                SessionError::UnknownSession("sess_x".into()),
                StatusCode::NOT_FOUND,
            ),
            (SessionError::Conflict("busy".into()), StatusCode::CONFLICT),
            (
                SessionError::InvalidWorkspace {
                    path: "/nope".into(),
                    reason: "missing".into(),
                },
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                SessionError::Setup("broken".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
        ];
        for (error, status) in cases {
            let api = ApiError::from(error);
            assert_eq!(api.code.status(), status, "{api}");
        }
    }

    #[test]
    fn an_internal_error_names_no_server_path() {
        let source = std::io::Error::other("/srv/data/sessions/x/events.ndjson: disk full");
        let error = SessionError::Setup(format!("writing failed: {source}"));
        let api = ApiError::from(error);
        assert_eq!(api.code, ErrorCode::Internal);
        assert!(!api.message.contains("/srv"), "{api}");
    }

    #[test]
    fn every_code_is_listed_once() {
        let codes: std::collections::BTreeSet<_> =
            ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(codes.len(), ErrorCode::ALL.len());
        // A new code fails to compile here, as a reminder to add it to `ALL`.
        for code in ErrorCode::ALL {
            match code {
                ErrorCode::InvalidRequest
                | ErrorCode::Unauthorized
                | ErrorCode::Forbidden
                | ErrorCode::NotFound
                | ErrorCode::MethodNotAllowed
                | ErrorCode::Conflict
                | ErrorCode::SessionBusy
                | ErrorCode::TooLarge
                | ErrorCode::UnsupportedMediaType
                | ErrorCode::InvalidField
                | ErrorCode::IdempotencyKeyReused
                | ErrorCode::SessionUnreadable
                | ErrorCode::Internal
                | ErrorCode::Timeout
                | ErrorCode::Overloaded
                | ErrorCode::ShuttingDown => {}
            }
        }
    }

    #[test]
    fn the_body_names_the_code_and_the_message() {
        let error = ApiError::new(ErrorCode::TooLarge, "too big");
        assert_eq!(
            error.body(),
            serde_json::json!({"error": {"code": "too_large", "message": "too big"}})
        );
    }
}
