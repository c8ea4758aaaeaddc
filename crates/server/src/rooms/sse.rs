//! `GET /v1/rooms/{id}/events`: the room's entries as server-sent events,
//! history then live, with no gap or repeat at the seam (the store's
//! subscription guarantees it).
//!
//! Each entry is one SSE message: `id:` its seq, `event:` its type
//! (`chat`, `chat.chunk`, `pi.assistant`, `pi.tool_result`,
//! `turn.started`, `signal.room.halted`...) and `data:` the entry as
//! stored. A client resumes with `Last-Event-ID` (or the `after` query
//! parameter): the stream starts strictly after that seq. A member removed
//! from the room gets the entry that removes them, then the stream ends.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;

use super::tail::RoomStream;
use crate::api_error::{ApiError, ErrorCode};
use crate::headers::{LAST_EVENT_ID, X_ACCEL_BUFFERING};
use crate::keep_alive::KeptAlive;
use crate::live_tail::Follower;

/// The event stream's query parameters.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct EventsQuery {
    /// Resume after this seq (the `Last-Event-ID` header wins).
    after: Option<String>,
}

/// The seq to resume after: the `Last-Event-ID` header, else the query
/// parameter; 0 (the whole history) when both are absent or empty.
pub(crate) fn resume_after(headers: &HeaderMap, query: &EventsQuery) -> Result<u64, ApiError> {
    let header = match headers.get(LAST_EVENT_ID) {
        Some(value) => Some(value.to_str().map_err(|_| bad_event_id())?),
        None => None,
    };
    match header
        .or(query.after.as_deref())
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        Some(id) => id.parse().map_err(|_| bad_event_id()),
        None => Ok(0),
    }
}

fn bad_event_id() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidRequest,
        "Last-Event-ID must be a seq (a whole number)",
    )
}

/// The response streaming the entries of `follower`, for `viewer` (a user
/// id, whose removal ends it; `None` for the host).
pub(crate) fn respond(
    follower: Follower<RoomStream>,
    viewer: Option<Arc<str>>,
    keep_alive: std::time::Duration,
) -> Response {
    let frames = KeptAlive::new(frames(follower, viewer), keep_alive);
    let body = Body::from_stream(crate::open_streams::counted("sse", frames));
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (X_ACCEL_BUFFERING, HeaderValue::from_static("no")),
    ];
    (headers, body).into_response()
}

/// The SSE messages of `follower`. A store failure ends the stream with
/// one `error` message (no id: a client resumes after the last entry it
/// got).
fn frames(follower: Follower<RoomStream>, viewer: Option<Arc<str>>) -> impl Stream<Item = Bytes> {
    futures::stream::unfold(Some(follower), move |follower| {
        let viewer = viewer.clone();
        async move {
            let mut follower = follower?;
            match follower.next().await? {
                Ok(frame) => {
                    let ends = viewer.is_some_and(|v| frame.ends_for.as_ref() == Some(&v));
                    Some((frame.wire(), (!ends).then_some(follower)))
                }
                Err(error) => {
                    let body = ApiError::internal(error).body();
                    Some((Bytes::from(format!("event: error\ndata: {body}\n\n")), None))
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::tail::RoomStream;
    use crate::live_tail::Followed;
    use roundtable_thread_stream::{EntryBody, NewEntry, ThreadId};

    use super::*;

    #[test]
    fn an_entry_is_one_message_named_by_its_type() {
        let entry = NewEntry::new("alice", EntryBody::chat("hi\nthere"))
            .into_entry(ThreadId::new("room-1").unwrap(), 7);
        let text = String::from_utf8(RoomStream::frame(6, &entry).wire().to_vec()).unwrap();
        assert!(text.starts_with("id: 7\nevent: chat\ndata: {"), "{text}");
        assert_eq!(text.matches('\n').count(), 4, "{text}");
    }

    #[test]
    fn the_header_wins_over_the_query() {
        let mut headers = HeaderMap::new();
        let query = EventsQuery {
            after: Some("3".into()),
        };
        assert_eq!(resume_after(&headers, &EventsQuery::default()).unwrap(), 0);
        assert_eq!(resume_after(&headers, &query).unwrap(), 3);
        headers.insert(LAST_EVENT_ID, HeaderValue::from_static("12"));
        assert_eq!(resume_after(&headers, &query).unwrap(), 12);
        headers.insert(LAST_EVENT_ID, HeaderValue::from_static("1.5"));
        assert!(resume_after(&headers, &query).is_err());
    }
}
