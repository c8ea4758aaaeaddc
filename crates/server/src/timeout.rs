//! The time a request may take to be answered. It bounds reading the
//! body and the handler's work, not a response body that streams: an
//! event stream's handler returns as soon as the stream is set up, so a
//! stream lives as long as its client.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::{ApiError, ErrorCode};

/// The timeout layer: a request not answered within the limit gets a 503
/// `timeout` error.
pub(crate) async fn request_timeout(
    State(limit): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            ErrorCode::Timeout,
            format!(
                "the request was not answered within {} ms",
                limit.as_millis()
            ),
        )
        .into_response(),
    }
}
