//! The request headers of the API beyond HTTP's own.

use axum::http::HeaderName;

/// `Last-Event-ID`: the id of the last event a client received; the event
/// stream resumes strictly after it.
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// `Idempotency-Key`: makes a retried message post return the ids of the
/// first instead of adding the message twice; the key sent again with
/// another body is refused (422, `idempotency_key_reused`).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// `X-Accel-Buffering: no` on a streamed response tells a proxy that
/// buffers responses (nginx) to pass each event on as it comes.
pub(crate) const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");
