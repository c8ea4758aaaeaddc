//! `POST /api/chat`: a prompt in, the session's answer out as NDJSON, one
//! event per line, written as it is produced.
//!
//! The handler reads where the session's events stand when the request
//! arrives, subscribes from there, then submits the message: the stream
//! shows every event after that point exactly once, whichever process
//! writes them. It shows every turn that runs from then on (a follow-up
//! queued by another request included) and ends when the session settles,
//! or when a turn is aborted or interrupted (the queue then waits for the
//! next message). A message queued on a running turn (`streamingBehavior`)
//! is answered by one `queue` line instead, at once.
//!
//! The body pulls the next event from the engine only when the connection
//! takes the last line, so nothing piles up in memory. A client that
//! disconnects stops reading, nothing more: the turn runs on, and only
//! `POST /api/chat/abort` stops it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::{Stream, StreamExt};
use roundtable_sessions::{
    Caller, EventId, EventStream, EventType, MessageId, SessionError, SessionInfo,
};

use super::ChatState;
use super::protocol::{ChatStreamEvent, NDJSON, line};
use super::request::ChatRequest;
use super::view::{ChatView, ends_stream};
use crate::api_error::{ApiError, ErrorCode};
use crate::body::JsonBody;
use crate::extract::{caller, session_id};
use crate::headers::X_ACCEL_BUFFERING;

pub(crate) async fn chat(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let caller = caller(found);
    let model = request.check(&api.engine.models())?;
    let settings = api.settings.effective(&caller).await?;
    let session: SessionInfo = match &request.session_id {
        Some(id) => {
            let id = session_id(id)?;
            api.engine.get(&caller, id.as_str()).await?
        }
        None => api.create(&caller, request.mode, &settings).await?,
    };
    let behavior = request.streaming_behavior.or(settings.streaming_behavior);
    if session.running_turn_id.is_some() && behavior.is_none() {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "a turn is running in the session: send streamingBehavior `steer` or `followUp` to queue the message, or abort the turn",
        ));
    }
    // Every event after the last stored entry: the whole last entry is
    // before this request, whatever its events' sub-indexes.
    let after = EventId {
        seq: session.last_seq,
        sub: u32::MAX,
    };
    let events = api
        .engine
        .subscribe(&caller, &session.id, Some(after))
        .await?;
    let queue = behavior.map(|b| b.queue());
    let submitted = api
        .engine
        .submit(&caller, &session.id, request.submit(queue, model))
        .await?;
    let view = ChatView::new(session.id.clone(), session.mode, session.plan.as_ref());
    let until = match (submitted.queued, behavior) {
        // Queued on a running turn at the client's request: the client
        // reads that turn's stream already.
        (Some(_), Some(_)) => Until::Queued(submitted.message_id),
        _ => Until::Settled,
    };
    Ok(ndjson(lines(events, view, until)))
}

/// Where a stream ends.
enum Until {
    /// At the `queue` event of this message.
    Queued(MessageId),
    /// When the session settles, or a turn is aborted or interrupted.
    Settled,
}

/// What the body's stream carries from one poll to the next.
struct Lines {
    events: EventStream,
    view: ChatView,
    until: Until,
    /// Lines ready to send.
    ready: VecDeque<ChatStreamEvent>,
    /// Events that came before the first `start`: sent right after it, so
    /// that a stream always opens with its turn.
    held: Vec<ChatStreamEvent>,
    started: bool,
    ended: bool,
}

impl Lines {
    fn take(&mut self, chat: Vec<ChatStreamEvent>) {
        for event in chat {
            if self.started {
                self.ready.push_back(event);
            } else if matches!(event, ChatStreamEvent::Start { .. }) {
                self.started = true;
                self.ready.push_back(event);
                self.ready.extend(self.held.drain(..));
            } else {
                self.held.push(event);
            }
        }
    }

    fn end(&mut self) {
        self.ended = true;
        self.ready.extend(self.held.drain(..));
    }
}

/// The stream's lines: `events` through `view`, until `until`.
fn lines(
    events: EventStream,
    view: ChatView,
    until: Until,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let state = Lines {
        events,
        view,
        until,
        ready: VecDeque::new(),
        held: Vec::new(),
        started: false,
        ended: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(Bytes::from(line(&event))), state));
            }
            if state.ended {
                return None;
            }
            match state.events.next().await {
                None => state.end(),
                Some(Err(error)) => {
                    state.ready.push_back(stream_error(error));
                    state.end();
                }
                Some(Ok(event)) => match &state.until {
                    Until::Queued(message) => {
                        let ours = event.kind == EventType::QueueUpdated
                            && event.data["change"] == "added"
                            && event.data["message_id"] == message.as_str();
                        if ours {
                            let chat = state.view.apply(&event);
                            state.ready.extend(chat);
                            state.ended = true;
                        }
                    }
                    Until::Settled => {
                        let chat = state.view.apply(&event);
                        state.take(chat);
                        if ends_stream(&event) {
                            state.end();
                        }
                    }
                },
            }
        }
    })
}

/// The line that ends a stream whose events could not be read.
fn stream_error(error: SessionError) -> ChatStreamEvent {
    let error = ApiError::from(error);
    ChatStreamEvent::Error {
        message: error.message,
        run_id: None,
    }
}

/// The NDJSON response of `lines`: never cached, never buffered by a
/// proxy (nginx reads `X-Accel-Buffering`), never compressed (see the
/// router's compression predicate).
fn ndjson(lines: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    let mut response = Response::new(Body::from_stream(lines));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    response
}
