//! `/v1/rooms`: multi-party rooms, where many people and many bots talk in
//! one thread and each bot still answers from its own one-on-one view.
//!
//! A room is a thread of the store (`room-<uuid v7>`): what is said in it,
//! what its bots do, and the room itself (title, members, overrides, as
//! `signal.room.*` entries) are all entries of that thread, so any process
//! over the same store can serve it. The bots answer through one
//! [`ThreadRunner`] with the dispatcher, the gate, the loop guard, the
//! fanout cap and the projection; each room gives the runner its own roster.
//!
//! | route | what it does |
//! | --- | --- |
//! | `GET /v1/bots` | the catalogue of bots rooms may hold |
//! | `POST /v1/rooms` | open a room (201): a title, people by user id, bots by id; the caller joins |
//! | `GET /v1/rooms` | the caller's rooms, newest first (`?limit=`, `&cursor=`) |
//! | `GET /v1/rooms/{id}` | a room: members, overrides |
//! | `GET /v1/rooms/{id}/entries` | its history by seq (`?after=` or `?before=`, `&limit=`) |
//! | `POST /v1/rooms/{id}/messages` | post as the caller (201): text, mentions resolved against the roster |
//! | `GET /v1/rooms/{id}/events` | SSE, history then live, `id:` the seq, `event:` the entry's type (`Last-Event-ID`) |
//! | `POST /v1/rooms/{id}/members` | add a person or a bot |
//! | `DELETE /v1/rooms/{id}/members/{member}` | remove one (or leave) |
//! | `PUT`, `DELETE /v1/rooms/{id}/overrides/{bot}` | how a bot wakes in this room only: `mute`, `mention_only`, `always` |
//! | `POST /v1/rooms/{id}/approvals` | decide a bot's gated call (`approve` or `deny`), when the bot's approver is [`RoomApprovals`] |
//!
//! Only members see a room (the host's token sees every room); anyone else
//! gets the 404 of a room that does not exist. The author of every entry
//! is the caller the token identifies (`host` for the host's token).
//!
//! Why `/v1/rooms` and not `/v1/threads`: every conversation of the
//! libraries is a thread (a session is one too); a room is the thread with
//! a roster, overrides and bots answering in it, and the name keeps it
//! apart from the one-person sessions beside it.

mod approvals;
mod catalogue;
mod change;
mod directory;
mod discovery;
mod fold;
mod handlers;
mod history;
mod identity;
mod index;
mod notices;
mod post;
mod record;
mod requests;
mod sse;
mod tail;

use std::sync::Arc;
use std::time::Duration;

use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with, put_with};
use axum::extract::DefaultBodyLimit;
use axum::{Json, Router};
use roundtable_chat_runner::lifecycle::TurnLeases;
use roundtable_chat_runner::{ChatError, ThreadRunner, TurnLoop};
use roundtable_dispatch::{Participant, Policy, Roster};
use roundtable_thread_stream::{ThreadId, ThreadStore};
use tokio_util::sync::CancellationToken;

use self::catalogue::Catalogue;
use self::directory::Directory;
use self::fold::RoomFold;
use crate::error::ServerError;
use crate::headers::LAST_EVENT_ID;
use crate::live_tail::TAIL_FRAMES;
use crate::mount::mount;
use crate::openapi;
use crate::sessions::{DEFAULT_KEEP_ALIVE, DEFAULT_REQUEST_TIMEOUT, SMALL_BODY_LIMIT};

pub use self::approvals::RoomApprovals;
pub use self::post::MAX_TEXT_BYTES;

/// The default body limit of `POST .../messages`: a message's text and
/// mentions (the text itself is capped at [`MAX_TEXT_BYTES`]).
pub const DEFAULT_ROOM_MESSAGE_LIMIT: usize = 64 * 1024;

/// Builds a [`RoomsApi`]: the store its rooms live in and the bots they
/// may hold.
pub struct RoomsApiBuilder {
    store: Arc<dyn ThreadStore>,
    bots: Vec<(Participant, TurnLoop)>,
    approvals: RoomApprovals,
    policy: Policy,
    max_concurrent_turns: usize,
    chunk_interval: Option<Duration>,
    interrupt_open_turns_after: Duration,
    leases: Option<TurnLeases>,
    keep_alive: Duration,
    request_timeout: Duration,
    message_body_limit: usize,
}

impl std::fmt::Debug for RoomsApiBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bots: Vec<&str> = self.bots.iter().map(|(p, _)| &*p.id).collect();
        f.debug_struct("RoomsApiBuilder")
            .field("bots", &bots)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl RoomsApiBuilder {
    /// Offers `bot` (a participant with a bot profile: its id, name,
    /// persona and trigger) to the rooms, answering with `turns` (its
    /// provider, model, tools, approver and limits).
    pub fn bot(mut self, bot: Participant, turns: TurnLoop) -> Self {
        self.bots.push((bot, turns));
        self
    }

    /// The approver that bots asking the rooms' members were given (see
    /// [`RoomApprovals`]): the rooms hand it the members' decisions.
    pub fn approvals(mut self, approvals: RoomApprovals) -> Self {
        self.approvals = approvals;
        self
    }

    /// The dispatcher's limits in every room (loop guard, hop limit, fanout
    /// cap).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// At most `n` bot turns run at once over every room (default 16).
    pub fn max_concurrent_turns(mut self, n: usize) -> Self {
        self.max_concurrent_turns = n;
        self
    }

    /// How long a bot's text deltas are held to share one `chat.chunk`.
    pub fn chunk_interval(mut self, interval: Duration) -> Self {
        self.chunk_interval = Some(interval);
        self
    }

    /// How old an open turn found when a room is followed must be to be
    /// closed as interrupted (zero, the default, suits one process per
    /// store; with several over one store, set it above the turns' longest
    /// run, so that a process leaves the others' running turns alone).
    pub fn interrupt_open_turns_after(mut self, age: Duration) -> Self {
        self.interrupt_open_turns_after = age;
        self
    }

    /// Holds every running bot turn by a lease in `leases`, for several
    /// processes over one store: when one dies, another closes its bots'
    /// open turns as interrupted about a lease's lifetime later and the
    /// wakes are answered again (see [`ThreadRunnerBuilder::leases`](roundtable_chat_runner::ThreadRunnerBuilder::leases)).
    pub fn leases(mut self, leases: TurnLeases) -> Self {
        self.leases = Some(leases);
        self
    }

    /// How often an idle event stream gets a keep-alive comment.
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
        self
    }

    /// How long a request may take to be answered.
    pub fn request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// The largest body `POST .../messages` accepts (413 beyond it).
    pub fn message_body_limit(mut self, bytes: usize) -> Self {
        self.message_body_limit = bytes;
        self
    }

    /// The rooms: the catalogue checked, every room of the store read and
    /// followed by its bots (a restart resumes what they owed).
    pub async fn open(self) -> Result<RoomsApi, ServerError> {
        let participants: Vec<Participant> = self.bots.iter().map(|(p, _)| p.clone()).collect();
        let catalogue = Catalogue::new(participants).map_err(ServerError::Rooms)?;
        let stop = CancellationToken::new();
        let fold = Arc::new(RoomFold::new(catalogue.clone(), self.approvals.clone()));
        let runner = self.runner(&catalogue, fold.clone(), stop.clone())?;
        let index =
            ThreadId::new(index::INDEX_THREAD).map_err(|e| ServerError::Rooms(e.to_string()))?;
        let directory = Arc::new(Directory {
            store: self.store,
            catalogue,
            runner,
            fold,
            index,
        });
        notices::watch(&directory, stop.clone());
        let (rooms, listed_upto) = directory
            .load()
            .await
            .map_err(|e| ServerError::Rooms(format!("the rooms cannot be read: {e}")))?;
        discovery::follow(&directory, listed_upto, stop.clone());
        tracing::debug!(rooms, "rooms opened");
        Ok(RoomsApi {
            state: Arc::new(RoomsState {
                directory,
                keep_alive: self.keep_alive,
                tails: Arc::new(tail::RoomTails::new(TAIL_FRAMES)),
            }),
            request_timeout: self.request_timeout,
            message_body_limit: self.message_body_limit,
            stop,
        })
    }

    /// The runner of every room's bots: built with all of them (each
    /// room's roster, folded from its thread by `fold`, says which are in
    /// it).
    fn runner(
        &self,
        catalogue: &Catalogue,
        fold: Arc<RoomFold>,
        stop: CancellationToken,
    ) -> Result<ThreadRunner, ServerError> {
        let roster = Roster::new(catalogue.bots().iter().cloned())
            .map_err(|e: roundtable_dispatch::DispatchError| ServerError::Rooms(e.to_string()))?;
        let mut builder = ThreadRunner::builder(self.store.clone(), roster)
            .policy(self.policy)
            .max_concurrent_turns(self.max_concurrent_turns)
            .interrupt_open_turns_after(self.interrupt_open_turns_after)
            .observer(fold)
            .cancellation(stop);
        if let Some(leases) = &self.leases {
            builder = builder.leases(leases.clone());
        }
        if let Some(interval) = self.chunk_interval {
            builder = builder.chunk_interval(interval);
        }
        for (bot, turns) in &self.bots {
            builder = builder.bot(bot.id.clone(), turns.clone());
        }
        Ok(builder.build())
    }
}

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct RoomsState {
    pub(crate) directory: Arc<Directory>,
    pub(crate) keep_alive: Duration,
    /// The rooms' live tails, shared by their event streams.
    pub(crate) tails: Arc<tail::RoomTails>,
}

/// The `/v1/rooms` and `/v1/bots` routes, and the bots answering in the
/// rooms. Cheap to clone: the clones share the rooms.
///
/// ```no_run
/// # async fn run(store: std::sync::Arc<dyn roundtable_thread_stream::ThreadStore>,
/// #     turns: roundtable_chat_runner::TurnLoop) -> Result<(), Box<dyn std::error::Error>> {
/// use roundtable_dispatch::{BotProfile, Participant, Trigger};
/// use roundtable_server::rooms::RoomsApi;
///
/// let archivist = Participant::bot(
///     "archivist",
///     "Archivist",
///     BotProfile::new(Trigger::Mention, "You keep the archive."),
/// );
/// let rooms = RoomsApi::builder(store).bot(archivist, turns).open().await?;
/// let routes: axum::Router = rooms.clone().router();
/// // ... serve `routes` behind `Security`; on the way out:
/// rooms.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RoomsApi {
    state: Arc<RoomsState>,
    request_timeout: Duration,
    message_body_limit: usize,
    stop: CancellationToken,
}

impl RoomsApi {
    /// A builder of rooms kept in `store`.
    pub fn builder(store: Arc<dyn ThreadStore>) -> RoomsApiBuilder {
        RoomsApiBuilder {
            store,
            bots: Vec::new(),
            approvals: RoomApprovals::new(),
            policy: Policy::default(),
            max_concurrent_turns: 16,
            chunk_interval: None,
            interrupt_open_turns_after: Duration::ZERO,
            leases: None,
            keep_alive: DEFAULT_KEEP_ALIVE,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            message_body_limit: DEFAULT_ROOM_MESSAGE_LIMIT,
        }
    }

    /// Waits until the bots have nothing left to do in any room (tests,
    /// demos).
    pub async fn idle(&self) -> Result<(), ChatError> {
        self.state.directory.runner.idle().await
    }

    /// Stops the bots: running turns are closed as interrupted (the next
    /// start answers them again). The store stays open.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.state.directory.runner.shutdown().await;
    }

    /// The routes, ready to merge into a host's router (and to
    /// [`protect`](crate::Security::protect)).
    pub fn router(self) -> Router {
        self.api_router().into()
    }

    /// The routes with their part of the API's document.
    pub(crate) fn api_router(self) -> ApiRouter {
        let routes = room_routes(ApiRouter::new());
        let routes = message_routes(routes, self.message_body_limit);
        let routes = roster_routes(routes);
        let bots = ApiRouter::new().api_route(
            "/",
            get_with(handlers::list_bots, |op| {
                op.summary("The bots rooms may hold")
            }),
        );
        let timeout = self.request_timeout;
        mount("/v1/rooms", routes, timeout, self.state.clone())
            .merge(mount("/v1/bots", bots, timeout, self.state))
    }
}

type Routes = ApiRouter<Arc<RoomsState>>;

/// The rooms themselves: open, list, read, history.
fn room_routes(routes: Routes) -> Routes {
    let small = DefaultBodyLimit::max(SMALL_BODY_LIMIT);
    routes
        .api_route(
            "/",
            get_with(handlers::list_rooms, |op| {
                op.summary("The caller's rooms, newest first")
            })
            .post_with(handlers::create_room, |op| {
                op.summary("Open a room")
                    .response::<201, Json<requests::RoomInfo>>()
            })
            .layer(small),
        )
        .api_route(
            "/{id}",
            get_with(handlers::get_room, |op| op.summary("A room")),
        )
        .api_route(
            "/{id}/entries",
            get_with(handlers::entries, |op| {
                op.summary("A room's history, paged by seq")
            }),
        )
}

/// Posting and following: messages and the event stream.
fn message_routes(routes: Routes, message_body_limit: usize) -> Routes {
    routes
        .api_route(
            "/{id}/messages",
            post_with(handlers::post_message, |op| {
                op.summary("Post a message as the caller")
                    .response::<201, Json<requests::Posted>>()
            })
            .layer(DefaultBodyLimit::max(message_body_limit)),
        )
        .api_route(
            "/{id}/events",
            get_with(handlers::events, |op| {
                let op = openapi::streamed::<history::StoredEntry>(
                    op.summary("The room's entries, history then live"),
                    "text/event-stream",
                    "Server-sent events: each message's `id:` is the entry's seq, its `event:` the entry's type and its `data:` the entry.",
                );
                openapi::header_parameter(
                    op,
                    LAST_EVENT_ID.as_str(),
                    "Resume after this seq (over the `after` query parameter).",
                )
            }),
        )
}

/// Who is in the room, and how its bots wake there.
fn roster_routes(routes: Routes) -> Routes {
    let small = DefaultBodyLimit::max(SMALL_BODY_LIMIT);
    routes
        .api_route(
            "/{id}/members",
            post_with(handlers::add_member, |op| {
                op.summary("Add a person or a bot")
            })
            .layer(small),
        )
        .api_route(
            "/{id}/members/{member}",
            aide::axum::routing::delete_with(handlers::remove_member, |op| {
                op.summary("Remove a member (or leave)")
            }),
        )
        .api_route(
            "/{id}/approvals",
            post_with(handlers::decide, |op| {
                op.summary("Decide a bot's gated call")
            })
            .layer(small),
        )
        .api_route(
            "/{id}/overrides/{bot}",
            put_with(handlers::set_override, |op| {
                op.summary("How a bot wakes in this room only")
            })
            .delete_with(handlers::clear_override, |op| {
                op.summary("Clear a bot's override in this room")
            })
            .layer(small),
        )
}
