//! `POST /api/chat`: a prompt in, the session's answer out as NDJSON, one
//! event per line, written as it is produced.
//!
//! The handler submits the message, then subscribes from just before the
//! message's entries: the stream shows every event from there exactly
//! once, whichever process writes them, and nothing written before (a
//! prompt without `streamingBehavior` starts its own turn or gets a 409,
//! decided with the engine's claim, so a stream opens with its own turn).
//! It shows every turn that runs from then on (a follow-up
//! queued by another request included) and ends when the session settles,
//! or when a turn is aborted or interrupted (the queue then waits for the
//! next message). A stream that shows a turn ends with that turn's `done`:
//! what the session says after it (`settled`, a workflow's last `state`)
//! is sent before it. A message queued on a running turn (`streamingBehavior`)
//! is answered by one `queue` line instead, at once. With `mode:
//! "harness"` the host's workflow runs instead of one turn, and the stream
//! lasts as the run does (see [`harness`]).
//!
//! The session is the one the request names (by id or by file), or a new
//! one: a new one too, flagged `sessionReset`, when the request names one
//! the caller cannot continue. The first `start` carries what the
//! session's agent setup found wrong (`diagnostics`).
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
use roundtable_sessions::event_data::QueueChangeKind;
use roundtable_sessions::{
    Caller, EventData, EventId, EventType, MessageId, SessionError, SessionErrorKind, SessionEvent,
    SessionEvents, SessionInfo, Submit,
};
use roundtable_skills::SkillDiagnostic;
use tokio::sync::oneshot::error::RecvError;

use super::ChatState;
use super::harness::{RunOutcome, WorkflowWatch};
use super::named::Named;
use super::protocol::{ChatStreamEvent, NDJSON, StreamSession, line};
use super::request::{ChatRequest, StreamingBehavior};
use super::settings::ChatSettings;
use super::view::{ChatView, ends_stream};
use crate::api_error::{ApiError, ErrorCode};
use crate::body::JsonBody;
use crate::extract::caller;
use crate::headers::X_ACCEL_BUFFERING;

pub(crate) async fn chat(
    State(api): State<Arc<ChatState>>,
    found: Option<Extension<Caller>>,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let caller = caller(found);
    let model = request.check(&api.engine.models())?;
    let workflow = match request.is_harness() {
        true => Some(api.workflow_for(&request)?),
        false => None,
    };
    let settings = api.settings.effective(&caller).await?;
    let (session, session_reset) = continued_or_new(&api, &caller, &request, &settings).await?;
    let behavior = match workflow {
        // A workflow's phases are turns of their own: none joins a queue.
        Some(_) => None,
        None => request.streaming_behavior.or(settings.streaming_behavior),
    };
    if session.running_turn_id.is_some() && behavior.is_none() {
        return Err(turn_running());
    }
    let (events, until) = match workflow {
        Some(workflow) => {
            // Every event after the last stored entry: the whole last
            // entry is before this request, whatever its events'
            // sub-indexes.
            let after = EventId {
                seq: session.last_seq,
                sub: u32::MAX,
            };
            let events = api
                .engine
                .subscribe(&caller, &session.id, Some(after))
                .await?;
            let outcome = workflow.start(caller.clone(), session.id.clone(), &request.message);
            let watch = WorkflowWatch::new(&workflow.runner, outcome);
            (events, Until::Workflow(Box::new(watch)))
        }
        None => submitted(&api, &caller, &session.id, &request, behavior, model).await?,
    };
    let named = StreamSession {
        session_id: session.id.clone(),
        session_file: api.session_file(&session.id),
        session_reset,
    };
    let view = ChatView::new(named, session.mode, session.plan.as_ref());
    let diagnostics = match until {
        Until::Queued(_) => None,
        Until::Settled | Until::Workflow(_) => {
            let found = api.engine.setup_diagnostics(&caller, &session.id).await?;
            (!found.is_empty()).then_some(found)
        }
    };
    Ok(ndjson(lines(events, view, until, diagnostics)))
}

/// Submits the request's prompt to `session`, and follows it: the events
/// from the prompt's own entries on (nothing written before it), until
/// where its stream ends. Without `behavior` the prompt starts a turn or
/// is refused, in one step with the engine's claim: of prompts racing on
/// an idle session, one gets its turn and the others a 409.
async fn submitted(
    api: &ChatState,
    caller: &Caller,
    session: &str,
    request: &ChatRequest,
    behavior: Option<StreamingBehavior>,
    model: Option<String>,
) -> Result<(SessionEvents, Until), ApiError> {
    let submit = Submit {
        if_idle: behavior.is_none(),
        ..request.submit(behavior.map(|b| b.queue()), model)
    };
    let placed = match api.engine.submit_placed(caller, session, submit).await {
        Err(SessionError::Busy(_)) => return Err(turn_running()),
        placed => placed?,
    };
    let after = EventId {
        seq: placed.after,
        sub: u32::MAX,
    };
    let events = api.engine.subscribe(caller, session, Some(after)).await?;
    let until = match (placed.submitted.queued, behavior) {
        // Queued on a running turn at the client's request: the client
        // reads that turn's stream already.
        (Some(_), Some(_)) => Until::Queued(placed.submitted.message_id),
        _ => Until::Settled,
    };
    Ok((events, until))
}

/// The answer to a prompt without `streamingBehavior` while a turn runs.
fn turn_running() -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        "a turn is running in the session: send streamingBehavior `steer` or `followUp` to queue the message, or abort the turn",
    )
}

/// The session the request continues, or a new one; true when it is new
/// in place of one the request named but the caller cannot continue
/// (unknown, removed, another user's: all alike to the caller).
async fn continued_or_new(
    api: &ChatState,
    caller: &Caller,
    request: &ChatRequest,
    settings: &ChatSettings,
) -> Result<(SessionInfo, bool), ApiError> {
    let named = Named::read(
        &api.engine,
        caller,
        request.session_id.as_deref(),
        request.session_file.as_deref(),
    )
    .await?;
    let mode = request.session_mode();
    match named {
        Named::Nothing => Ok((api.create(caller, mode, settings).await?, false)),
        Named::UnknownFile => Ok((api.create(caller, mode, settings).await?, true)),
        Named::Session(id) => match api.engine.get(caller, id.as_str()).await {
            Ok(session) => Ok((session, false)),
            Err(e) if e.kind() == SessionErrorKind::NotFound => {
                Ok((api.create(caller, mode, settings).await?, true))
            }
            Err(e) => Err(e.into()),
        },
    }
}

/// Where a stream ends.
enum Until {
    /// At the `queue` event of this message.
    Queued(MessageId),
    /// When the session settles, or a turn is aborted or interrupted.
    Settled,
    /// When the workflow's run has ended and its last entry was shown.
    Workflow(Box<WorkflowWatch>),
}

/// What the stream waits on next brought.
enum Awaited {
    /// The session's next event (none: the subscription ended).
    Event(Option<Result<SessionEvent, SessionError>>),
    /// The workflow's run ended.
    RunEnded(Result<RunOutcome, RecvError>),
}

/// What the body's stream carries from one poll to the next.
struct Lines {
    events: SessionEvents,
    view: ChatView,
    until: Until,
    /// Lines ready to send.
    ready: VecDeque<ChatStreamEvent>,
    /// Events that came before the first `start`: sent right after it, so
    /// that a stream always opens with its turn.
    held: Vec<ChatStreamEvent>,
    /// The last `done`, held until the next turn's `start` (or the
    /// stream's end), so that nothing follows a stream's last `done`.
    done: Option<ChatStreamEvent>,
    /// What came after `done`: sent before it if the stream ends.
    after_done: Vec<ChatStreamEvent>,
    /// What the first `start` carries besides its turn.
    diagnostics: Option<Vec<SkillDiagnostic>>,
    started: bool,
    ended: bool,
}

impl Lines {
    /// Queues `event` to send, holding a `done` (and what follows it)
    /// until the next `start` shows the stream goes on.
    fn push(&mut self, event: ChatStreamEvent) {
        match event {
            ChatStreamEvent::Done { .. } => {
                self.release_done();
                self.done = Some(event);
            }
            ChatStreamEvent::Start { .. } => {
                self.release_done();
                self.ready.push_back(event);
            }
            _ if self.done.is_some() => self.after_done.push(event),
            _ => self.ready.push_back(event),
        }
    }

    /// Sends the held `done` and what came after it, in order.
    fn release_done(&mut self) {
        if let Some(done) = self.done.take() {
            self.ready.push_back(done);
        }
        self.ready.extend(self.after_done.drain(..));
    }

    fn take(&mut self, chat: Vec<ChatStreamEvent>) {
        for event in chat {
            if self.started {
                self.push(event);
            } else if let ChatStreamEvent::Start {
                id,
                run_id,
                session,
                ..
            } = event
            {
                self.started = true;
                let diagnostics = self.diagnostics.take();
                self.push(ChatStreamEvent::Start {
                    id,
                    run_id,
                    session,
                    diagnostics,
                });
                for held in std::mem::take(&mut self.held) {
                    self.push(held);
                }
            } else {
                self.held.push(event);
            }
        }
    }

    /// Ends the stream: what is still held is sent, the last `done` last.
    fn end(&mut self) {
        self.ended = true;
        self.ready.extend(self.held.drain(..));
        self.ready.extend(self.after_done.drain(..));
        if let Some(done) = self.done.take() {
            self.ready.push_back(done);
        }
    }

    /// Takes in the session's next event.
    fn show(&mut self, event: &SessionEvent) {
        match &mut self.until {
            Until::Queued(message) => {
                let ours = event.kind == EventType::QueueUpdated
                    && matches!(
                        event.payload(),
                        Ok(EventData::QueueUpdated(q))
                            if q.change == QueueChangeKind::Added && *q.message_id == *message.as_str()
                    );
                if ours {
                    let chat = self.view.apply(event);
                    self.ready.extend(chat);
                    self.ended = true;
                }
            }
            Until::Settled => {
                let chat = self.view.apply(event);
                self.take(chat);
                if ends_stream(event) {
                    self.end();
                }
            }
            // Between phases the session settles: the run's end ends the
            // stream.
            Until::Workflow(watch) => {
                watch.saw(event);
                let chat = self.view.apply(event);
                self.take(chat);
            }
        }
    }
}

/// The stream's lines: `events` through `view`, until `until`; the first
/// `start` carries `diagnostics`.
fn lines(
    events: SessionEvents,
    view: ChatView,
    until: Until,
    diagnostics: Option<Vec<SkillDiagnostic>>,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let state = Lines {
        events,
        view,
        until,
        ready: VecDeque::new(),
        held: Vec::new(),
        done: None,
        after_done: Vec::new(),
        diagnostics,
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
            let running = match &mut state.until {
                Until::Workflow(watch) => watch.outcome.as_mut(),
                _ => None,
            };
            let next = match running {
                Some(outcome) => {
                    tokio::select! {
                        // What is stored is shown before the run's end is
                        // taken in.
                        biased;
                        event = state.events.next() => Awaited::Event(event),
                        ended = outcome => Awaited::RunEnded(ended),
                    }
                }
                None => Awaited::Event(state.events.next().await),
            };
            match next {
                Awaited::RunEnded(ended) => {
                    if let Until::Workflow(watch) = &mut state.until {
                        watch.ended(ended);
                    }
                }
                Awaited::Event(None) => state.end(),
                Awaited::Event(Some(Err(error))) => {
                    state.ready.push_back(stream_error(error));
                    state.end();
                }
                Awaited::Event(Some(Ok(event))) => state.show(&event),
            }
            if let Until::Workflow(watch) = &mut state.until
                && let Some(last) = watch.last_line()
            {
                state.take(vec![last]);
                state.end();
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
    let lines = crate::open_streams::counted("ndjson", lines);
    let mut response = Response::new(Body::from_stream(lines));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    response
}
