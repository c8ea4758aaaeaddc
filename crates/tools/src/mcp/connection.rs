//! The connection to one MCP server: starting it (within the startup
//! timeout), calling its tools (with the call timeout, progress and
//! cancellation), and starting it once more, lazily, when it went away.
//!
//! A call that fails because the server went away is not repeated (the
//! tool may have had effects); it comes back to the model as an error, and
//! the next call starts the server again. That happens once per toolset:
//! a server that keeps dying stays down and says why.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult, Tool as McpToolInfo,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use roundtable_providers::JsonObject;

use super::client::McpClient;
use super::config::{McpServerConfig, McpTransport};
use super::mapping::tool_result;
use super::naming::McpToolRef;
use super::process::{Launch, PostMortem, ServerProcess};
use super::status::{McpFailureStage, McpServerFailure};
use crate::workspace::CommandEnv;
use crate::{ToolContext, ToolError, ToolResult};

/// One server's connection, for the toolset's lifetime.
#[derive(Debug)]
pub(crate) struct Connection {
    config: Arc<McpServerConfig>,
    base_env: CommandEnv,
    client: McpClient,
    live: tokio::sync::Mutex<Option<Arc<Session>>>,
    restarted: AtomicBool,
    /// Why the server is down, once it is down for good.
    down: Mutex<Option<McpServerFailure>>,
    /// The process id of the running stdio server.
    pid: Mutex<Option<u32>>,
}

/// A started server: the protocol session and, for stdio, the process.
#[derive(Debug)]
struct Session {
    service: RunningService<RoleClient, McpClient>,
    process: Option<tokio::sync::Mutex<ServerProcess>>,
    pid: Option<u32>,
}

impl Connection {
    /// Starts the server and lists its tools, all within the startup timeout.
    pub(crate) async fn start(
        config: Arc<McpServerConfig>,
        base_env: CommandEnv,
        client: McpClient,
    ) -> Result<(Self, Vec<McpToolInfo>), McpServerFailure> {
        let (session, tools) = Session::start(&config, &base_env, &client).await?;
        let connection = Self {
            config,
            base_env,
            client,
            pid: Mutex::new(session.pid),
            live: tokio::sync::Mutex::new(Some(Arc::new(session))),
            restarted: AtomicBool::new(false),
            down: Mutex::new(None),
        };
        Ok((connection, tools))
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.config.name
    }

    /// Why the server is down for good, if it is.
    pub(crate) fn failure(&self) -> Option<McpServerFailure> {
        self.down.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The process id of the running stdio server.
    pub(crate) fn pid(&self) -> Option<u32> {
        *self.pid.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_pid(&self, pid: Option<u32>) {
        *self.pid.lock().unwrap_or_else(|e| e.into_inner()) = pid;
    }

    /// Lists the server's tools again (after a `list_changed`).
    pub(crate) async fn list_tools(&self) -> Result<Vec<McpToolInfo>, String> {
        let session = self.session().await?;
        match tokio::time::timeout(
            self.config.startup_timeout,
            session.service.peer().list_all_tools(),
        )
        .await
        {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => Err(format!("listing the tools failed: {e}")),
            Err(_) => Err(format!(
                "listing the tools took longer than {}",
                seconds(self.config.startup_timeout)
            )),
        }
    }

    /// Calls `tool` (`registry_name` in the registry) with `args`. Whatever
    /// the server or the connection does comes back as a result the model
    /// reads; only cancellation is an error. Cancelling (or dropping the
    /// future) sends `notifications/cancelled` for the request.
    pub(crate) async fn call(
        &self,
        registry_name: &str,
        tool: &McpToolRef,
        args: JsonObject,
        ctx: ToolContext,
    ) -> Result<ToolResult, ToolError> {
        let session = match self.session().await {
            Ok(session) => session,
            Err(why) => return Ok(ToolResult::error(why)),
        };
        let params = CallToolRequestParams::new(tool.tool.to_string())
            .with_arguments(Arc::unwrap_or_clone(args));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(self.config.call_timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(self.config.call_timeout_cap);
        let peer = session.service.peer();
        let handle = match peer.send_cancellable_request(request, options).await {
            Ok(handle) => handle,
            Err(error) => return Ok(self.failed(&session, tool, error).await),
        };
        let _progress = self.client.progress.route(
            handle.progress_token.clone(),
            ctx.progress.clone(),
            ctx.call_id.clone(),
        );
        let mut abandon = CancelOnDrop {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let outcome = tokio::select! {
            outcome = handle.await_response() => outcome,
            () = ctx.cancel.cancelled() => {
                drop(abandon);
                return Err(ToolError::Cancelled {
                    tool: registry_name.into(),
                    call_id: ctx.call_id.clone(),
                });
            }
        };
        abandon.disarm();
        Ok(match outcome {
            Ok(ServerResult::CallToolResult(result)) => tool_result(tool, &result),
            Ok(ServerResult::EmptyResult(_)) => tool_result(tool, &CallToolResult::success(vec![])),
            Ok(ServerResult::CustomResult(custom)) => {
                match serde_json::from_value::<CallToolResult>(custom.0) {
                    Ok(result) => tool_result(tool, &result),
                    Err(e) => ToolResult::error(format!(
                        "MCP server '{}' answered the call with something that is not a tool result: {e}",
                        self.name()
                    )),
                }
            }
            Ok(_) => ToolResult::error(format!(
                "MCP server '{}' did not answer the call with a tool result (it may have asked for more input or started a background task, which this client does not support)",
                self.name()
            )),
            Err(error) => self.failed(&session, tool, error).await,
        })
    }

    /// The result the model reads when a call could not complete.
    async fn failed(
        &self,
        session: &Session,
        tool: &McpToolRef,
        error: ServiceError,
    ) -> ToolResult {
        let name = self.name();
        let cap = self.config.call_timeout_cap;
        match error {
            ServiceError::Timeout { timeout }
                if timeout == cap && cap > self.config.call_timeout =>
            {
                ToolResult::error(format!(
                    "MCP tool '{}' of server '{name}' ran longer than the {} limit and was cancelled",
                    tool.tool,
                    seconds(cap)
                ))
            }
            ServiceError::Timeout { timeout } => ToolResult::error(format!(
                "MCP tool '{}' of server '{name}' timed out: no answer or progress for {}; the call was cancelled",
                tool.tool,
                seconds(timeout)
            )),
            ServiceError::McpError(e) => ToolResult::error(format!(
                "MCP server '{name}' refused the call to '{}': {} (code {})",
                tool.tool, e.message, e.code.0
            )),
            ServiceError::Cancelled { reason } => ToolResult::error(format!(
                "MCP server '{name}' cancelled the call{}",
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            )),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let mut text = format!(
                    "MCP server '{name}' closed the connection during the call to '{}'",
                    tool.tool
                );
                if let Some(process) = &session.process {
                    let post_mortem = process.lock().await.post_mortem().await.to_string();
                    if !post_mortem.is_empty() {
                        text.push_str(": ");
                        text.push_str(&post_mortem);
                    }
                }
                text.push_str(if self.restarted.load(Ordering::SeqCst) {
                    ". It was started again once already and stays down."
                } else if session.process.is_some() {
                    ". The next call starts it again."
                } else {
                    ". The next call connects again."
                });
                ToolResult::error(text)
            }
            other => ToolResult::error(format!(
                "the call to MCP tool '{}' of server '{name}' failed: {other}",
                tool.tool
            )),
        }
    }

    /// The live session, started again (once) when the server went away.
    async fn session(&self) -> Result<Arc<Session>, String> {
        let mut live = self.live.lock().await;
        if let Some(session) = live.as_ref()
            && !session.is_closed().await
        {
            return Ok(session.clone());
        }
        let name = self.name();
        if let Some(failure) = self.failure() {
            return Err(format!("MCP server '{name}' is not available: {failure}"));
        }
        let why = match live.take() {
            Some(old) => old.end_reason().await,
            None => String::from("it was shut down"),
        };
        self.set_pid(None);
        if self.restarted.swap(true, Ordering::SeqCst) {
            let failure = McpServerFailure {
                stage: McpFailureStage::Stopped,
                message: format!("stopped again after it was restarted once ({why})"),
                stderr: None,
            };
            *self.down.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure.clone());
            return Err(format!("MCP server '{name}' is not available: {failure}"));
        }
        match Session::start(&self.config, &self.base_env, &self.client).await {
            Ok((session, _tools)) => {
                // Its tools may differ now; the toolset lists them again at
                // the next turn boundary.
                self.client.list_change.mark();
                self.set_pid(session.pid);
                let session = Arc::new(session);
                *live = Some(session.clone());
                Ok(session)
            }
            Err(failure) => {
                let message = format!(
                    "MCP server '{name}' stopped ({why}) and could not be started again: {failure}"
                );
                *self.down.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
                Err(message)
            }
        }
    }

    /// Ends the session: the protocol loop stops and a stdio server's
    /// process group is killed and reaped before this returns.
    pub(crate) async fn shutdown(&self) {
        let session = self.live.lock().await.take();
        self.set_pid(None);
        if let Some(session) = session {
            match Arc::try_unwrap(session) {
                Ok(session) => session.close().await,
                // A call still holds it; it ends when that call does.
                Err(_shared) => {}
            }
        }
    }
}

impl Session {
    async fn start(
        config: &McpServerConfig,
        base_env: &CommandEnv,
        client: &McpClient,
    ) -> Result<(Self, Vec<McpToolInfo>), McpServerFailure> {
        let timeout = config.startup_timeout;
        match &config.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let launch = Launch {
                    command,
                    args,
                    base_env,
                    env,
                    cwd: cwd.as_deref(),
                };
                Self::start_stdio(&launch, client, timeout).await
            }
            McpTransport::Http { url, headers } => {
                Self::start_http(url, headers, client, timeout).await
            }
        }
    }

    /// Spawns a stdio server and shakes hands with it; a server that fails
    /// or takes too long is killed.
    async fn start_stdio(
        launch: &Launch<'_>,
        client: &McpClient,
        timeout: Duration,
    ) -> Result<(Self, Vec<McpToolInfo>), McpServerFailure> {
        let (mut process, stdout, stdin) =
            ServerProcess::spawn(launch).map_err(|e| McpServerFailure {
                stage: McpFailureStage::Spawn,
                message: format!("cannot start `{}`: {e}", launch.command),
                stderr: None,
            })?;
        let started =
            tokio::time::timeout(timeout, handshake(client.clone(), (stdout, stdin))).await;
        let pid = process.pid();
        match started {
            Ok(Ok((service, tools))) => Ok((
                Self {
                    service,
                    process: Some(tokio::sync::Mutex::new(process)),
                    pid,
                },
                tools,
            )),
            Ok(Err((stage, message))) => {
                let post_mortem = process.post_mortem().await;
                process.kill();
                Err(failure(stage, message, post_mortem))
            }
            Err(_) => {
                process.kill();
                // Its exit status would only say that it was killed.
                let post_mortem = PostMortem {
                    exit: None,
                    ..process.post_mortem().await
                };
                Err(failure(
                    McpFailureStage::StartupTimeout,
                    format!(
                        "did not finish starting within {} and was stopped",
                        seconds(timeout)
                    ),
                    post_mortem,
                ))
            }
        }
    }

    /// Shakes hands with a streamable HTTP server at `url`.
    async fn start_http(
        url: &str,
        headers: &[(String, String)],
        client: &McpClient,
        timeout: Duration,
    ) -> Result<(Self, Vec<McpToolInfo>), McpServerFailure> {
        let headers: HashMap<HeaderName, HeaderValue> = headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::from_bytes(k.as_bytes()).ok()?,
                    HeaderValue::from_str(v).ok()?,
                ))
            })
            .collect();
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers),
        );
        match tokio::time::timeout(timeout, handshake(client.clone(), transport)).await {
            Ok(Ok((service, tools))) => Ok((
                Self {
                    service,
                    process: None,
                    pid: None,
                },
                tools,
            )),
            Ok(Err((stage, message))) => Err(failure(stage, message, PostMortem::default())),
            Err(_) => Err(failure(
                McpFailureStage::StartupTimeout,
                format!(
                    "{url} did not finish the handshake within {}",
                    seconds(timeout)
                ),
                PostMortem::default(),
            )),
        }
    }

    /// True when the protocol session or the process has ended.
    async fn is_closed(&self) -> bool {
        if self.service.is_closed() || self.service.peer().is_transport_closed() {
            return true;
        }
        match &self.process {
            Some(process) => process.lock().await.exit_status().is_some(),
            None => false,
        }
    }

    /// How the session ended, for the model and the host.
    async fn end_reason(&self) -> String {
        match &self.process {
            Some(process) => {
                let text = process.lock().await.post_mortem().await.to_string();
                if text.is_empty() {
                    String::from("the connection closed")
                } else {
                    text
                }
            }
            None => String::from("the connection closed"),
        }
    }

    async fn close(self) {
        let Self {
            mut service,
            process,
            ..
        } = self;
        if let Some(process) = process {
            let mut process = process.into_inner();
            process.kill();
            process.reap().await;
        }
        let _ = service.close_with_timeout(Duration::from_secs(2)).await;
    }
}

/// The handshake and the first tool list.
async fn handshake<T, E, A>(
    client: McpClient,
    transport: T,
) -> Result<(RunningService<RoleClient, McpClient>, Vec<McpToolInfo>), (McpFailureStage, String)>
where
    McpClient: ClientHandler,
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let service = client.serve(transport).await.map_err(|e| {
        (
            McpFailureStage::Handshake,
            format!("the MCP handshake failed: {e}"),
        )
    })?;
    let tools = service.peer().list_all_tools().await.map_err(|e| {
        (
            McpFailureStage::ListTools,
            format!("listing the tools failed: {e}"),
        )
    })?;
    Ok((service, tools))
}

fn failure(
    stage: McpFailureStage,
    mut message: String,
    post_mortem: PostMortem,
) -> McpServerFailure {
    if let Some(exit) = post_mortem.exit {
        message.push_str(&format!(" (the process {exit})"));
    }
    McpServerFailure {
        stage,
        message,
        stderr: (!post_mortem.stderr.is_empty()).then_some(post_mortem.stderr),
    }
}

fn seconds(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0} s")
    } else {
        format!("{secs} s")
    }
}

/// Sends `notifications/cancelled` for a request whose caller stopped
/// waiting (the turn was cancelled and dropped the call), unless disarmed.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.peer = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let params = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some(String::from("the call was cancelled by the client")),
        );
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(params).await;
        });
    }
}
