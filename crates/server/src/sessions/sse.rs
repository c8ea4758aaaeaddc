//! `GET /v1/sessions/{id}/events`: the session's events as server-sent
//! events, history then live.
//!
//! Each event is one SSE message: `id:` its event id (`seq` or
//! `seq.sub`) and `data:` its JSON envelope. There is no `event:` field, so
//! a browser's `EventSource.onmessage` sees every event; the envelope's
//! `type` says which it is. A client resumes with `Last-Event-ID` (or the
//! `last_event_id` query parameter, for clients that cannot set headers):
//! the stream starts strictly after that id, whichever process serves it.
//! Keep-alive comments are sent while nothing happens; they are not
//! events, so they are never stored or replayed.
//!
//! Nothing here buffers without bound: the response body pulls the next
//! event only when the connection can take it. A client reads the store at
//! that pace until it is level with the session's live tail, which every
//! client of the session shares (one decode and one encode of each event,
//! see [`live_tail`](crate::live_tail)), and reads the store again when it falls
//! behind the tail's bounded window. A frame of the tail is one buffer of
//! bytes every client's response refers to: a client that stops reading
//! holds a reference, not a copy (what the connection itself may hold is
//! [`serve`](crate::serve)'s to bound).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use roundtable_sessions::{Caller, EventId};
use serde::Deserialize;

use super::ApiState;
use super::tail::{SessionStream, error_frame};
use crate::api_error::{ApiError, ErrorCode};
use crate::extract::{caller, path_rejected, session_id};
use crate::headers::{LAST_EVENT_ID, X_ACCEL_BUFFERING};
use crate::keep_alive::KeptAlive;
use crate::live_tail::{Followed, Follower};

/// The event stream's query parameters.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct EventsQuery {
    last_event_id: Option<String>,
}

pub(crate) async fn events(
    State(api): State<Arc<ApiState>>,
    id: Result<Path<String>, PathRejection>,
    found: Option<Extension<Caller>>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let session = session_id(&id)?;
    let Query(query) =
        query.map_err(|r| ApiError::new(ErrorCode::InvalidRequest, r.body_text()))?;
    let after = resume_after(&headers, query.last_event_id.as_deref())?;
    let caller = caller(found);
    let stream = SessionStream {
        engine: api.engine.clone(),
        caller,
        session: Arc::from(session.as_str()),
    };
    let stored = stream.stored(after).await?;
    let follower = Follower::new(stream, api.tails.clone(), after, stored);
    let frames = KeptAlive::new(frames(follower), api.keep_alive);
    let body = Body::from_stream(crate::open_streams::counted("sse", frames));
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        // Proxies that buffer responses (nginx) would hold events back.
        (X_ACCEL_BUFFERING, HeaderValue::from_static("no")),
    ];
    Ok((headers, body).into_response())
}

/// The id to resume after: the `Last-Event-ID` header, else the query
/// parameter; none (the whole history) when both are absent or empty.
fn resume_after(headers: &HeaderMap, query: Option<&str>) -> Result<Option<EventId>, ApiError> {
    let header = match headers.get(LAST_EVENT_ID) {
        Some(value) => Some(value.to_str().map_err(|_| bad_event_id())?),
        None => None,
    };
    match header.or(query).map(str::trim).filter(|id| !id.is_empty()) {
        Some(id) => id.parse().map(Some).map_err(|_| bad_event_id()),
        None => Ok(None),
    }
}

fn bad_event_id() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidRequest,
        "Last-Event-ID must be an event id (`seq` or `seq.sub`)",
    )
}

/// The SSE messages of `follower`. A failure of the store ends the
/// stream with one `error` message (no id, so a reconnecting client
/// resumes after the last event it got).
fn frames(follower: Follower<SessionStream>) -> impl Stream<Item = Bytes> {
    futures::stream::unfold(Some(follower), |follower| async move {
        let mut follower = follower?;
        match follower.next().await? {
            Ok(frame) => Some((frame.wire(), Some(follower))),
            Err(error) => Some((error_frame(error), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_header_wins_over_the_query_and_bad_ids_are_refused() {
        let mut headers = HeaderMap::new();
        assert_eq!(resume_after(&headers, None).unwrap(), None);
        assert_eq!(resume_after(&headers, Some("")).unwrap(), None);
        assert_eq!(
            resume_after(&headers, Some("7.1")).unwrap(),
            Some(EventId { seq: 7, sub: 1 })
        );
        headers.insert(LAST_EVENT_ID, HeaderValue::from_static("12"));
        assert_eq!(
            resume_after(&headers, Some("7.1")).unwrap(),
            Some(EventId::of_entry(12))
        );
        headers.insert(LAST_EVENT_ID, HeaderValue::from_static("twelve"));
        assert_eq!(
            resume_after(&headers, None).unwrap_err().code,
            ErrorCode::InvalidRequest
        );
    }
}
