//! roundtable's side of an MCP session: what it tells servers about itself
//! and how it answers what servers send on their own.
//!
//! - `notifications/tools/list_changed` marks the server's tool list stale
//!   (the toolset lists again at the next turn boundary);
//! - `notifications/progress` for a running call goes to that call's
//!   progress sink (and, in the connection, restarts its timeout);
//! - sampling and elicitation requests are declined: a bot's tools run
//!   without a human at the keyboard, and a server does not get to spend the
//!   host's model budget. The client advertises neither capability, so
//!   well-behaved servers never ask.

// Sampling is deprecated in the SDK and declined here; the declining
// handler still has to name its types.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, ErrorData, Implementation,
    ProgressNotificationParam, ProgressToken, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use tokio::sync::Notify;

use crate::ProgressSink;
use crate::context::ToolProgress;

/// Whether a server's tool list changed since it was last listed, and the
/// toolset-wide signal that wakes whoever waits for a change.
#[derive(Debug)]
pub(crate) struct ListChange {
    stale: AtomicBool,
    any_server: Arc<Notify>,
}

impl ListChange {
    pub(crate) fn new(any_server: Arc<Notify>) -> Self {
        Self {
            stale: AtomicBool::new(false),
            any_server,
        }
    }

    /// Marks the list stale and wakes the waiters.
    pub(crate) fn mark(&self) {
        self.stale.store(true, Ordering::SeqCst);
        self.any_server.notify_waiters();
    }

    pub(crate) fn is_stale(&self) -> bool {
        self.stale.load(Ordering::SeqCst)
    }

    /// Clears the mark; true when it was set.
    pub(crate) fn take(&self) -> bool {
        self.stale.swap(false, Ordering::SeqCst)
    }
}

/// Where the progress of a running call goes.
#[derive(Debug, Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, (ProgressSink, Arc<str>)>>,
}

impl ProgressRoutes {
    /// Routes `token`'s progress to `sink` as updates of call `call_id`
    /// until the returned guard is dropped.
    pub(crate) fn route(
        self: &Arc<Self>,
        token: ProgressToken,
        sink: ProgressSink,
        call_id: Arc<str>,
    ) -> ProgressRoute {
        self.lock().insert(token.clone(), (sink, call_id));
        ProgressRoute {
            routes: self.clone(),
            token,
        }
    }

    fn forward(&self, progress: &ProgressNotificationParam) {
        let routes = self.lock();
        let Some((sink, call_id)) = routes.get(&progress.progress_token) else {
            return;
        };
        let mut text = match progress.total {
            Some(total) => format!("progress {}/{}", progress.progress, total),
            None => format!("progress {}", progress.progress),
        };
        if let Some(message) = &progress.message {
            text.push_str(": ");
            text.push_str(message);
        }
        sink.send(ToolProgress {
            call_id: call_id.clone(),
            parts: vec![roundtable_providers::UserBlock::text(text)],
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, (ProgressSink, Arc<str>)>> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes a progress route when the call ends.
#[derive(Debug)]
pub(crate) struct ProgressRoute {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.token);
    }
}

/// The client handler of one server's sessions.
#[derive(Debug, Clone)]
pub(crate) struct McpClient {
    pub list_change: Arc<ListChange>,
    pub progress: Arc<ProgressRoutes>,
}

/// The error a declined sampling request gets: the code the specification
/// gives for a request the user rejected.
const DECLINED: ErrorCode = ErrorCode(-1);

impl ClientHandler for McpClient {
    fn get_info(&self) -> ClientConfig {
        // The handshake of every server out there; servers that speak a
        // later revision answer it too.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("roundtable", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        Err(ErrorData::new(
            DECLINED,
            "Sampling declined: this client does not let MCP servers call its model.",
            None,
        ))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_change.mark();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.forward(&params);
    }
}
