//! The fixture server: one tool per behaviour a client must survive.

// Sampling is deprecated in the SDK; the fixture still asks for it, to
// check that clients decline.
#![allow(deprecated)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    AudioContent, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    CreateMessageRequestParams, ElicitRequestParams, ElicitationSchema, EmbeddedResource,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    Resource, ResourceContents, SamplingMessage, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, tool, tool_router};
use serde::Deserialize;
use tokio::sync::Notify;

/// A one-pixel red PNG, base64.
pub const RED_PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// How a fixture server behaves besides its tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixtureOptions {
    /// Also offer tools whose names collide once made safe for the wire
    /// (`get.item` and `get_item`) and one with a name past 64 characters.
    pub collide: bool,
    /// Write to stderr, then never answer the handshake.
    pub hang_at_start: bool,
    /// Write to stderr, then exit with this status before the handshake.
    pub exit_at_start: Option<i32>,
    /// Print a line that is not JSON to stdout before serving (servers that
    /// log to stdout).
    pub stdout_noise: bool,
    /// Wait, before answering anything, until this file exists.
    pub wait_for_file: Option<PathBuf>,
    /// Create this file when starting.
    pub touch_file: Option<PathBuf>,
}

impl FixtureOptions {
    /// The command-line arguments of the `mcp_fixture` binary for these options.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.collide {
            args.push("--collide".into());
        }
        if self.hang_at_start {
            args.push("--hang-at-start".into());
        }
        if let Some(code) = self.exit_at_start {
            args.push("--exit-at-start".into());
            args.push(code.to_string());
        }
        if self.stdout_noise {
            args.push("--stdout-noise".into());
        }
        if let Some(path) = &self.wait_for_file {
            args.push("--wait-for-file".into());
            args.push(path.display().to_string());
        }
        if let Some(path) = &self.touch_file {
            args.push("--touch-file".into());
            args.push(path.display().to_string());
        }
        args
    }

    /// Parses the arguments [`to_args`](Self::to_args) writes.
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut options = Self::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--collide" => options.collide = true,
                "--hang-at-start" => options.hang_at_start = true,
                "--exit-at-start" => {
                    let code = value()?;
                    options.exit_at_start =
                        Some(code.parse().map_err(|_| format!("bad status {code}"))?);
                }
                "--stdout-noise" => options.stdout_noise = true,
                "--wait-for-file" => options.wait_for_file = Some(value()?.into()),
                "--touch-file" => options.touch_file = Some(value()?.into()),
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(options)
    }
}

/// What every session of one fixture shares: the tools added at run time,
/// and the `wait` calls that started and that were cancelled.
#[derive(Debug, Default)]
pub struct FixtureState {
    added: Mutex<Vec<String>>,
    waiting: AtomicUsize,
    cancelled: AtomicUsize,
    changed: Notify,
}

impl FixtureState {
    /// How many `wait` calls were cancelled by the client.
    pub fn cancelled_calls(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` `wait` calls were cancelled, at most
    /// `bound`; returns the count.
    pub async fn wait_for_cancelled_calls(&self, n: usize, bound: Duration) -> usize {
        self.wait_for(&self.cancelled, n, bound).await
    }

    /// Waits until at least `n` `wait` calls have started, at most
    /// `bound`; returns the count.
    pub async fn wait_for_waiting_calls(&self, n: usize, bound: Duration) -> usize {
        self.wait_for(&self.waiting, n, bound).await
    }

    async fn wait_for(&self, counter: &AtomicUsize, n: usize, bound: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let count = counter.load(Ordering::SeqCst);
            if count >= n || tokio::time::timeout_at(deadline, notified).await.is_err() {
                return counter.load(Ordering::SeqCst);
            }
        }
    }

    fn bump(&self, counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// The fixture MCP server.
#[derive(Debug, Clone)]
pub struct FixtureServer {
    state: Arc<FixtureState>,
    collide: bool,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct TextInput {
    /// The text.
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct NameInput {
    /// A name.
    name: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct CountInput {
    /// How many.
    count: usize,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ProgressInput {
    /// How many progress notifications to send.
    steps: u32,
    /// Milliseconds between them.
    interval_ms: u64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ExitInput {
    /// The exit status.
    code: i32,
}

fn text(t: impl Into<String>) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t)]))
}

/// An input schema the way some servers write theirs: a dialect, no
/// `type`, and a root `anyOf`.
fn union_schema() -> Arc<JsonObject> {
    let schema = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "anyOf": [
            {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}
        ]
    });
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

#[tool_router]
impl FixtureServer {
    /// A server sharing `state` with the other sessions of one fixture.
    pub fn new(state: Arc<FixtureState>, options: &FixtureOptions) -> Self {
        Self {
            state,
            collide: options.collide,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Returns its text.")]
    fn echo(&self, Parameters(input): Parameters<TextInput>) -> Result<CallToolResult, ErrorData> {
        text(input.text)
    }

    #[tool(description = "Returns a one-pixel image with a caption.")]
    fn image(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![
            ContentBlock::text("a red pixel"),
            ContentBlock::image(RED_PIXEL_PNG, "image/png"),
        ]))
    }

    #[tool(description = "Always fails, as a tool error.")]
    fn fail(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "the fixture failed on purpose",
        )]))
    }

    #[tool(
        description = "Sends one progress notification (`waiting`), then waits until the call is cancelled."
    )]
    async fn wait(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.state.bump(&self.state.waiting);
        if let Some(token) = ctx.meta.get_progress_token() {
            let note = ProgressNotificationParam::new(token, 0.0).with_message("waiting");
            let _ = ctx.peer.notify_progress(note).await;
        }
        ctx.ct.cancelled().await;
        self.state.bump(&self.state.cancelled);
        Err(ErrorData::internal_error("cancelled", None))
    }

    #[tool(
        description = "Waits (up to 30 s) until `count` calls of `wait` were cancelled; returns how many were."
    )]
    async fn cancellations(
        &self,
        Parameters(input): Parameters<CountInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let n = self
            .state
            .wait_for_cancelled_calls(input.count, Duration::from_secs(30))
            .await;
        text(n.to_string())
    }

    #[tool(description = "Adds a tool named `name` and says the tool list changed.")]
    async fn add_tool(
        &self,
        Parameters(input): Parameters<NameInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.state
            .added
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(input.name.clone());
        ctx.peer
            .notify_tool_list_changed()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        text(format!("added {}", input.name))
    }

    #[tool(
        description = "Looks a key up in a local table.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    fn lookup(
        &self,
        Parameters(input): Parameters<NameInput>,
    ) -> Result<CallToolResult, ErrorData> {
        text(format!("{} = 42", input.name))
    }

    #[tool(
        description = "Reads a web page (pretends to).",
        annotations(read_only_hint = true)
    )]
    fn fetch_page(
        &self,
        Parameters(input): Parameters<TextInput>,
    ) -> Result<CallToolResult, ErrorData> {
        text(format!("<html>{}</html>", input.text))
    }

    #[tool(
        description = "Deletes everything (pretends to).",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            open_world_hint = false
        )
    )]
    fn delete_everything(&self) -> Result<CallToolResult, ErrorData> {
        text("deleted nothing, this is a fixture")
    }

    #[tool(description = "Sends `steps` progress notifications `interval_ms` apart, then answers.")]
    async fn progress(
        &self,
        Parameters(input): Parameters<ProgressInput>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let token = ctx.meta.get_progress_token();
        for step in 1..=input.steps {
            tokio::time::sleep(Duration::from_millis(input.interval_ms)).await;
            if let Some(token) = &token {
                let note = ProgressNotificationParam::new(token.clone(), f64::from(step))
                    .with_total(f64::from(input.steps))
                    .with_message(format!("step {step}"));
                let _ = ctx.peer.notify_progress(note).await;
            }
        }
        text(format!("done after {} steps", input.steps))
    }

    #[tool(description = "Exits the server process in the middle of the call.")]
    fn exit(&self, Parameters(input): Parameters<ExitInput>) -> Result<CallToolResult, ErrorData> {
        eprintln!(
            "fixture: exiting with status {} in the middle of a call",
            input.code
        );
        std::process::exit(input.code)
    }

    #[tool(
        description = "Returns an embedded text resource, a binary one, audio and a resource link."
    )]
    fn resources(&self) -> Result<CallToolResult, ErrorData> {
        let mut link = Resource::new("file:///srv/report.csv", "report.csv");
        link.mime_type = Some("text/csv".into());
        Ok(CallToolResult::success(vec![
            ContentBlock::embedded_text("file:///srv/notes.md", "# Notes\nremember the milk"),
            ContentBlock::Resource(EmbeddedResource::new(
                ResourceContents::blob("AAECAw==", "file:///srv/data.bin")
                    .with_mime_type("application/octet-stream"),
            )),
            ContentBlock::Audio(AudioContent::new("UklGRg==", "audio/wav")),
            ContentBlock::resource_link(link),
        ]))
    }

    #[tool(description = "Returns only structured content.")]
    fn structured(&self) -> Result<CallToolResult, ErrorData> {
        let mut result =
            CallToolResult::structured(serde_json::json!({"temperature": 21.5, "unit": "C"}));
        result.content.clear();
        Ok(result)
    }

    #[tool(description = "Starts a `sleep 600` child of the server and returns its pid.")]
    fn spawn_child(&self) -> Result<CallToolResult, ErrorData> {
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        text(child.id().to_string())
    }

    #[tool(description = "Returns the value of the environment variable `name`, or `(unset)`.")]
    fn env(&self, Parameters(input): Parameters<NameInput>) -> Result<CallToolResult, ErrorData> {
        text(std::env::var(&input.name).unwrap_or_else(|_| String::from("(unset)")))
    }

    #[tool(description = "Returns `count` numbered lines.")]
    fn lines(
        &self,
        Parameters(input): Parameters<CountInput>,
    ) -> Result<CallToolResult, ErrorData> {
        text(
            (1..=input.count)
                .map(|i| format!("line {i}\n"))
                .collect::<String>(),
        )
    }

    #[tool(
        description = "Asks the client's model for a completion (sampling); returns what the client answered."
    )]
    async fn ask_model(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let params =
            CreateMessageRequestParams::new(vec![SamplingMessage::user_text("hello?")], 16);
        text(match ctx.peer.create_message(params).await {
            Ok(answer) => format!("answered: {answer:?}"),
            Err(e) => format!("declined: {e}"),
        })
    }

    #[tool(
        description = "Asks the client's user for their name (elicitation); returns what the client answered."
    )]
    async fn ask_user(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: String::from("What is your name?"),
            requested_schema: ElicitationSchema::new(Default::default()),
        };
        text(match ctx.peer.create_elicitation(params).await {
            Ok(answer) => format!(
                "action: {}",
                serde_json::to_value(&answer.action).unwrap_or_default()
            ),
            Err(e) => format!("failed: {e}"),
        })
    }

    #[tool(description = "Finds a user by id or by email.", input_schema = union_schema())]
    fn find_user(
        &self,
        Parameters(args): Parameters<JsonObject>,
    ) -> Result<CallToolResult, ErrorData> {
        text(format!("found {}", serde_json::Value::Object(args)))
    }
}

impl FixtureServer {
    /// The tools beyond the router's: those added at run time and, with
    /// `collide`, the colliding ones.
    fn extra_tools(&self) -> Vec<Tool> {
        let empty = Arc::new(JsonObject::new());
        let mut tools: Vec<Tool> = self
            .state
            .added
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|name| Tool::new(name.clone(), "A tool added at run time.", empty.clone()))
            .collect();
        if self.collide {
            for name in ["get.item", "get_item", &"very_long_tool_name_".repeat(4)] {
                tools.push(Tool::new(
                    name.to_string(),
                    format!("Answers with its name ({name})."),
                    empty.clone(),
                ));
            }
        }
        tools
    }
}

impl ServerHandler for FixtureServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "roundtable-mcp-fixture",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tool_router.list_all();
        tools.extend(self.extra_tools());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(tool) = self
            .extra_tools()
            .into_iter()
            .find(|t| t.name == request.name)
        {
            return Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "{} ran",
                tool.name
            ))])
            .into());
        }
        let call = ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }
}
