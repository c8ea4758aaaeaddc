//! MCP toolsets against the fixture server of `roundtable-test-support`:
//! over stdio as a real child process, and over streamable HTTP on loopback.
#![cfg(feature = "mcp")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::{ToolCall, UserBlock};
use roundtable_test_support::mcp_fixture::{
    FixtureOptions, HttpFixture, RED_PIXEL_PNG, SilentHttpServer, stdio_entry,
};
use roundtable_tools::mcp::naming::MAX_TOOL_NAME_LEN;
use roundtable_tools::mcp::{McpConfig, McpFailureStage, McpServerState, McpToolRef, McpToolset};
use roundtable_tools::workspace::CommandEnv;
use roundtable_tools::{
    ApprovalPolicy, ProgressSink, SetupError, ToolContext, ToolError, ToolKind, ToolRegistry,
    ToolResult,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Long enough for any condition the tests wait for; reached only when
/// something is broken.
const PATIENCE: Duration = Duration::from_secs(20);

fn fixture(options: FixtureOptions) -> Value {
    stdio_entry(&options).unwrap()
}

fn plain() -> Value {
    fixture(FixtureOptions::default())
}

/// An `mcpServers` file of `servers` = [(name, entry)].
fn config(servers: &[(&str, Value)]) -> McpConfig {
    let mut map = serde_json::Map::new();
    for (name, entry) in servers {
        map.insert((*name).to_string(), entry.clone());
    }
    let text = json!({ "mcpServers": map }).to_string();
    McpConfig::from_json(&text).unwrap()
}

async fn start(servers: &[(&str, Value)]) -> McpToolset {
    McpToolset::start(config(servers)).await
}

fn with(mut entry: Value, settings: Value) -> Value {
    for (k, v) in settings.as_object().unwrap() {
        entry[k] = v.clone();
    }
    entry
}

/// A registry that runs everything without asking.
fn registry_of(toolset: &McpToolset) -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    registry.register_all(toolset.tools()).unwrap();
    registry
}

fn call_of(name: &str, args: Value) -> ToolCall {
    ToolCall::new(
        "call_1",
        name,
        args.as_object().cloned().unwrap_or_default(),
    )
}

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> ToolResult {
    registry
        .invoke(&call_of(name, args), ToolContext::new("call_1"))
        .await
        .unwrap()
}

fn running(toolset: &McpToolset, server: &str) -> bool {
    toolset
        .servers()
        .iter()
        .any(|s| &*s.name == server && s.state == McpServerState::Running)
}

fn is_zombie(stat: &str) -> bool {
    stat.rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

/// Waits until process `pid` is gone (reaped), or, when `zombie_ok`, at
/// least dead (an orphan is reaped by init, which may take its time).
async fn wait_gone(pid: u32, zombie_ok: bool) {
    let stat = format!("/proc/{pid}/stat");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match std::fs::read_to_string(&stat) {
            Err(_) => return,
            Ok(s) if zombie_ok && is_zombie(&s) => return,
            Ok(_) => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Live processes (not zombies) whose command line contains `marker`.
fn live_processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if !is_zombie(&stat) && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn a_stdio_server_offers_its_tools_under_safe_names_and_schemas() {
    let toolset = start(&[("fix", plain())]).await;
    let status = &toolset.servers()[0];
    assert_eq!(status.state, McpServerState::Running, "{status:?}");
    assert!(status.pid.is_some());

    let defs = toolset.definitions();
    let names: Vec<String> = defs.iter().map(|d| d.name().to_string()).collect();
    for tool in [
        "echo",
        "image",
        "fail",
        "wait",
        "add_tool",
        "lookup",
        "find_user",
        "exit",
    ] {
        assert!(names.contains(&format!("fix__{tool}")), "{names:?}");
    }
    assert_eq!(status.tools, names.len());
    assert_eq!(status.schema_bytes, toolset.schema_bytes());
    assert!(toolset.schema_bytes() > 1000);

    let def = |name: &str| defs.iter().find(|d| d.name() == name).unwrap().clone();
    let echo = def("fix__echo");
    assert_eq!(echo.description(), "Returns its text.");
    assert_eq!(echo.kind, ToolKind::Exec, "untrusted by default");
    assert!(echo.input_schema().get("$schema").is_none());
    assert_eq!(echo.input_schema()["type"], "object");
    assert_eq!(echo.input_schema()["required"], json!(["text"]));
    // A root anyOf becomes one object of both branches' properties.
    let find = def("fix__find_user");
    assert!(find.input_schema().get("anyOf").is_none());
    assert_eq!(find.input_schema()["type"], "object");
    assert!(find.input_schema()["properties"]["id"].is_object());
    assert!(find.input_schema()["properties"]["email"].is_object());
    // Every definition fits both wire APIs.
    for d in &defs {
        assert!(d.name().len() <= MAX_TOOL_NAME_LEN);
        assert_eq!(d.input_schema()["type"], "object", "{}", d.name());
        assert!(d.input_schema()["properties"].is_object(), "{}", d.name());
    }
    assert_eq!(
        toolset.resolve("fix__echo"),
        Some(McpToolRef {
            server: "fix".into(),
            tool: "echo".into()
        })
    );
    assert_eq!(toolset.resolve("echo"), None);
}

#[tokio::test]
async fn results_map_to_text_images_notes_errors_and_details() {
    let toolset = start(&[("fix", plain())]).await;
    let registry = registry_of(&toolset);

    let echo = call(&registry, "fix__echo", json!({"text": "hello"})).await;
    assert!(echo.ok);
    assert_eq!(echo.text_content(), "hello");
    let details = echo.details.unwrap();
    assert_eq!(details["server"], "fix");
    assert_eq!(details["tool"], "echo");
    assert_eq!(details["result"]["content"][0]["text"], "hello");

    let image = call(&registry, "fix__image", json!({})).await;
    assert_eq!(image.parts[0], UserBlock::text("a red pixel"));
    let UserBlock::Image(img) = &image.parts[1] else {
        panic!("{:?}", image.parts)
    };
    assert_eq!(&*img.data, RED_PIXEL_PNG);
    assert_eq!(&*img.mime_type, "image/png");

    let failed = call(&registry, "fix__fail", json!({})).await;
    assert!(!failed.ok);
    assert_eq!(failed.text_content(), "the fixture failed on purpose");

    let resources = call(&registry, "fix__resources", json!({})).await;
    let text = resources.text_content();
    for expected in [
        "[resource file:///srv/notes.md]\n# Notes\nremember the milk",
        "(binary resource omitted: file:///srv/data.bin, application/octet-stream, 4 bytes)",
        "(audio omitted: audio/wav, 4 bytes)",
        "[resource link] report.csv <file:///srv/report.csv> (text/csv)",
    ] {
        assert!(text.contains(expected), "{text}");
    }
    assert_eq!(
        resources.artifacts,
        vec!["file:///srv/report.csv".to_string()]
    );

    let structured = call(&registry, "fix__structured", json!({})).await;
    let value: Value = serde_json::from_str(&structured.text_content()).unwrap();
    assert_eq!(value, json!({"temperature": 21.5, "unit": "C"}));

    // The server checks arguments; its refusal reaches the model.
    let bad = call(&registry, "fix__echo", json!({"text": 5})).await;
    assert!(!bad.ok);
    assert!(
        bad.text_content()
            .contains("invalid type: integer `5`, expected a string"),
        "{}",
        bad.text_content()
    );
}

#[tokio::test]
async fn sampling_and_elicitation_requests_are_declined() {
    let toolset = start(&[("fix", plain())]).await;
    let registry = registry_of(&toolset);
    let sampling = call(&registry, "fix__ask_model", json!({})).await;
    let text = sampling.text_content();
    assert!(
        text.starts_with("declined: ") && text.contains("Sampling declined"),
        "{text}"
    );
    let elicitation = call(&registry, "fix__ask_user", json!({})).await;
    assert_eq!(elicitation.text_content(), "action: \"decline\"");
}

#[tokio::test]
async fn a_streamable_http_server_works_like_a_stdio_one() {
    let http = HttpFixture::start(FixtureOptions::default()).await.unwrap();
    let entry = json!({"url": http.url, "headers": {"X-Fixture": "yes"}});
    let toolset = start(&[("web", entry)]).await;
    assert!(running(&toolset, "web"), "{:?}", toolset.servers());
    assert_eq!(toolset.servers()[0].pid, None);
    let registry = registry_of(&toolset);
    let echo = call(&registry, "web__echo", json!({"text": "over http"})).await;
    assert_eq!(echo.text_content(), "over http");
    let image = call(&registry, "web__image", json!({})).await;
    assert!(matches!(image.parts[1], UserBlock::Image(_)));

    // Cancelling: the server's handler sees the cancellation.
    let (sink, mut progress) = ProgressSink::channel();
    let cancel = CancellationToken::new();
    let ctx = ToolContext::new("c1")
        .with_cancel(cancel.clone())
        .with_progress(sink);
    let waiting = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.invoke(&call_of("web__wait", json!({})), ctx).await })
    };
    let update = tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(update.parts, vec![UserBlock::text("progress 0: waiting")]);
    cancel.cancel();
    assert!(matches!(
        waiting.await.unwrap(),
        Err(ToolError::Cancelled { .. })
    ));
    assert_eq!(http.state.wait_for_cancelled_calls(1, PATIENCE).await, 1);

    // A changed tool list arrives on the session's event stream.
    call(&registry, "web__add_tool", json!({"name": "late"})).await;
    tokio::time::timeout(PATIENCE, toolset.list_changed())
        .await
        .unwrap();
    let change = toolset.refresh_if_stale().await.unwrap();
    assert_eq!(change.added, vec![Arc::<str>::from("web__late")]);
}

#[tokio::test]
async fn trust_annotations_decide_kinds_and_the_configuration_wins() {
    let entry = with(
        plain(),
        json!({
            "trust": "trust_annotations",
            "disabledTools": ["exit", "spawn_child"],
            "tools": {
                "echo": {"kind": "read"},
                "lines": {"requireApproval": true}
            }
        }),
    );
    let toolset = start(&[("fix", entry)]).await;
    let defs = toolset.definitions();
    let kind = |name: &str| defs.iter().find(|d| d.name() == name).map(|d| d.kind);
    assert_eq!(
        kind("fix__lookup"),
        Some(ToolKind::Read),
        "read-only, closed world"
    );
    assert_eq!(
        kind("fix__fetch_page"),
        Some(ToolKind::Network),
        "read-only, open world"
    );
    assert_eq!(kind("fix__delete_everything"), Some(ToolKind::Write));
    assert_eq!(
        kind("fix__fail"),
        Some(ToolKind::Write),
        "no annotations: may write"
    );
    assert_eq!(kind("fix__echo"), Some(ToolKind::Read), "overridden");
    assert_eq!(kind("fix__exit"), None, "disabled");
    assert_eq!(kind("fix__spawn_child"), None, "disabled");

    // The default approval policy gates by kind, and the override forces it.
    let mut registry = ToolRegistry::new();
    registry.register_all(toolset.tools()).unwrap();
    assert!(!registry.needs_approval(&call_of("fix__lookup", json!({}))));
    assert!(!registry.needs_approval(&call_of("fix__echo", json!({}))));
    assert!(registry.needs_approval(&call_of("fix__delete_everything", json!({}))));
    assert!(registry.needs_approval(&call_of("fix__lines", json!({}))));
    let refused = registry
        .invoke(
            &call_of("fix__delete_everything", json!({})),
            ToolContext::new("c"),
        )
        .await;
    assert!(matches!(refused, Err(ToolError::ApprovalRequired { .. })));

    let only = with(plain(), json!({"enabledTools": ["echo", "lookup"]}));
    let toolset = start(&[("fix", only)]).await;
    let names: Vec<String> = toolset
        .definitions()
        .iter()
        .map(|d| d.name().to_string())
        .collect();
    assert_eq!(names, ["fix__echo", "fix__lookup"]);
    assert!(
        toolset
            .definitions()
            .iter()
            .all(|d| d.kind == ToolKind::Exec)
    );
}

#[tokio::test]
async fn names_that_collide_get_stable_suffixes_and_map_back() {
    let colliding = fixture(FixtureOptions {
        collide: true,
        ..FixtureOptions::default()
    });
    let servers = [("my.fix", plain()), ("my_fix", colliding)];
    let toolset = start(&servers).await;
    let registry = registry_of(&toolset); // a duplicate name would fail here
    let defs = toolset.definitions();
    let names_like = |prefix: &str| -> Vec<&str> {
        defs.iter()
            .map(|d| d.name())
            .filter(|n| n.starts_with(prefix))
            .collect()
    };

    let echoes = names_like("my_fix__echo");
    assert_eq!(echoes.len(), 2, "{echoes:?}");
    let mut servers_of = Vec::new();
    for name in &echoes {
        assert_eq!(name.len(), "my_fix__echo".len() + 9, "{name}");
        servers_of.push(toolset.resolve(name).unwrap().server);
        let result = call(&registry, name, json!({"text": "hi"})).await;
        assert_eq!(result.text_content(), "hi");
    }
    servers_of.sort();
    assert_eq!(servers_of, [Arc::from("my.fix"), Arc::from("my_fix")]);

    let items = names_like("my_fix__get_item");
    assert_eq!(items.len(), 2, "{items:?}");
    for name in &items {
        let remote = toolset.resolve(name).unwrap();
        let result = call(&registry, name, json!({})).await;
        assert_eq!(result.text_content(), format!("{} ran", remote.tool));
    }
    let long = &names_like("my_fix__very_long")[0];
    assert_eq!(long.len(), MAX_TOOL_NAME_LEN);
    assert_eq!(
        &*toolset.resolve(long).unwrap().tool,
        "very_long_tool_name_".repeat(4)
    );

    // The same servers started again give the same names.
    let again = start(&servers).await;
    let mut before: Vec<_> = defs.iter().map(|d| d.name().to_owned()).collect();
    let mut after: Vec<_> = again
        .definitions()
        .iter()
        .map(|d| d.name().to_owned())
        .collect();
    before.sort();
    after.sort();
    assert_eq!(before, after);
}

#[tokio::test]
async fn servers_that_fail_or_hang_at_start_are_reported_while_the_others_work() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("hanging-server-started");
    let hanging = with(
        fixture(FixtureOptions {
            hang_at_start: true,
            touch_file: Some(marker.clone()),
            ..FixtureOptions::default()
        }),
        json!({"startupTimeoutSec": 1}),
    );
    let exiting = fixture(FixtureOptions {
        exit_at_start: Some(7),
        ..FixtureOptions::default()
    });
    let silent = SilentHttpServer::start().await.unwrap();
    let noisy = fixture(FixtureOptions {
        stdout_noise: true,
        ..FixtureOptions::default()
    });
    let toolset = start(&[
        ("hangs", hanging),
        ("exits", exiting),
        ("missing", json!({"command": "/nonexistent/mcp-server"})),
        ("silent", json!({"url": silent.url, "startupTimeoutSec": 1})),
        (
            "off",
            json!({"command": "/nonexistent/mcp-server", "disabled": true}),
        ),
        ("good", noisy),
    ])
    .await;
    let statuses = toolset.servers();
    let state = |name: &str| {
        statuses
            .iter()
            .find(|s| &*s.name == name)
            .unwrap()
            .state
            .clone()
    };
    let failure = |name: &str| match state(name) {
        McpServerState::Failed(f) => f,
        other => panic!("{name}: {other:?}"),
    };

    let hang = failure("hangs");
    assert_eq!(hang.stage, McpFailureStage::StartupTimeout);
    assert_eq!(
        hang.message,
        "did not finish starting within 1 s and was stopped"
    );
    assert_eq!(
        hang.stderr.as_deref(),
        Some("fixture: warming up a cache that never fills")
    );

    let exit = failure("exits");
    assert_eq!(exit.stage, McpFailureStage::Handshake);
    assert!(
        exit.message.contains("(the process exited with status 7)"),
        "{}",
        exit.message
    );
    assert_eq!(
        exit.stderr.as_deref(),
        Some("fixture: missing FIXTURE_TOKEN, giving up before the handshake")
    );
    assert!(
        exit.to_string()
            .contains("its stderr ended with:\nfixture: missing FIXTURE_TOKEN")
    );

    let missing = failure("missing");
    assert_eq!(missing.stage, McpFailureStage::Spawn);
    assert!(
        missing
            .message
            .starts_with("cannot start `/nonexistent/mcp-server`"),
        "{}",
        missing.message
    );

    assert_eq!(failure("silent").stage, McpFailureStage::StartupTimeout);
    assert_eq!(state("off"), McpServerState::Disabled);

    // The one that works, despite printing junk on stdout first.
    assert_eq!(state("good"), McpServerState::Running);
    assert!(
        toolset
            .definitions()
            .iter()
            .all(|d| d.name().starts_with("good__"))
    );
    let registry = registry_of(&toolset);
    let echo = call(&registry, "good__echo", json!({"text": "still here"})).await;
    assert_eq!(echo.text_content(), "still here");

    // The hung server was killed, not left behind.
    let marker = marker.display().to_string();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !live_processes_with(&marker).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hung server is still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn servers_start_concurrently() {
    // The first server waits for a file only the second creates: started one
    // after the other, the first would never finish.
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("second-started");
    let first = fixture(FixtureOptions {
        wait_for_file: Some(flag.clone()),
        ..FixtureOptions::default()
    });
    let second = fixture(FixtureOptions {
        touch_file: Some(flag),
        ..FixtureOptions::default()
    });
    let toolset = start(&[("first", first), ("second", second)]).await;
    assert!(running(&toolset, "first"), "{:?}", toolset.servers());
    assert!(running(&toolset, "second"), "{:?}", toolset.servers());
}

#[tokio::test]
async fn cancelling_a_call_cancels_the_request_on_the_server() {
    let toolset = start(&[("fix", plain())]).await;
    let registry = registry_of(&toolset);

    // Through the call's cancellation token.
    let (sink, mut progress) = ProgressSink::channel();
    let cancel = CancellationToken::new();
    let ctx = ToolContext::new("c1")
        .with_cancel(cancel.clone())
        .with_progress(sink);
    let waiting = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.invoke(&call_of("fix__wait", json!({})), ctx).await })
    };
    let update = tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&*update.call_id, "c1");
    cancel.cancel();
    let outcome = waiting.await.unwrap();
    assert!(
        matches!(outcome, Err(ToolError::Cancelled { .. })),
        "{outcome:?}"
    );
    let count = call(&registry, "fix__cancellations", json!({"count": 1})).await;
    assert_eq!(count.text_content(), "1");

    // By dropping the call (a turn loop racing it against its own token).
    let (sink, mut progress) = ProgressSink::channel();
    let ctx = ToolContext::new("c2").with_progress(sink);
    let waiting = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.invoke(&call_of("fix__wait", json!({})), ctx).await })
    };
    tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .unwrap()
        .unwrap();
    waiting.abort();
    let count = call(&registry, "fix__cancellations", json!({"count": 2})).await;
    assert_eq!(count.text_content(), "2");
}

#[tokio::test]
async fn a_call_without_answer_or_progress_times_out_and_is_cancelled() {
    let entry = with(plain(), json!({"callTimeoutSec": 0.3}));
    let toolset = start(&[("fix", entry)]).await;
    let registry = registry_of(&toolset);
    let result = call(&registry, "fix__wait", json!({})).await;
    assert!(!result.ok);
    assert_eq!(
        result.text_content(),
        "MCP tool 'wait' of server 'fix' timed out: no answer or progress for 0.3 s; the call was cancelled"
    );
    let count = call(&registry, "fix__cancellations", json!({"count": 1})).await;
    assert_eq!(count.text_content(), "1", "the server was told");
}

#[tokio::test]
async fn progress_keeps_a_call_alive_up_to_the_cap() {
    // 30 steps 50 ms apart take 1.5 s, past the 1 s call timeout; each
    // progress notification starts the timeout again.
    let entry = with(plain(), json!({"callTimeoutSec": 1}));
    let toolset = start(&[("fix", entry)]).await;
    let registry = registry_of(&toolset);
    let (sink, mut progress) = ProgressSink::channel();
    let ctx = ToolContext::new("p").with_progress(sink);
    let args = json!({"steps": 30, "interval_ms": 50});
    let result = registry
        .invoke(&call_of("fix__progress", args), ctx)
        .await
        .unwrap();
    assert_eq!(result.text_content(), "done after 30 steps");
    let mut updates = Vec::new();
    while let Ok(update) = progress.try_recv() {
        updates.push(update);
    }
    assert_eq!(updates.len(), 30);
    assert_eq!(
        updates[0].parts,
        vec![UserBlock::text("progress 1/30: step 1")]
    );

    // The cap stops a call however much progress it makes.
    let capped = with(
        plain(),
        json!({"callTimeoutSec": 1, "callTimeoutCapSec": 1.2}),
    );
    let toolset = start(&[("fix", capped)]).await;
    let registry = registry_of(&toolset);
    let args = json!({"steps": 200, "interval_ms": 50});
    let result = call(&registry, "fix__progress", args).await;
    assert!(!result.ok);
    assert_eq!(
        result.text_content(),
        "MCP tool 'progress' of server 'fix' ran longer than the 1.2 s limit and was cancelled"
    );
}

#[tokio::test]
async fn a_changed_tool_list_is_read_again_at_the_next_refresh() {
    let toolset = start(&[("fix", plain())]).await;
    let old = registry_of(&toolset);
    assert!(
        toolset.refresh_if_stale().await.is_none(),
        "nothing stale yet"
    );
    let before = toolset.definitions().len();

    let added = call(&old, "fix__add_tool", json!({"name": "late"})).await;
    assert_eq!(added.text_content(), "added late");
    tokio::time::timeout(PATIENCE, toolset.list_changed())
        .await
        .unwrap();
    assert!(toolset.is_stale());
    let change = toolset.refresh_if_stale().await.unwrap();
    assert_eq!(change.servers, vec![Arc::<str>::from("fix")]);
    assert_eq!(change.added, vec![Arc::<str>::from("fix__late")]);
    assert!(change.removed.is_empty() && change.changed.is_empty());
    assert!(change.failures.is_empty());
    assert!(!toolset.is_stale());
    assert_eq!(toolset.definitions().len(), before + 1);
    assert!(toolset.refresh_if_stale().await.is_none());

    // The old registry does not know the new tool; a rebuilt one does.
    assert!(!call(&old, "fix__late", json!({})).await.ok);
    let rebuilt = registry_of(&toolset);
    let late = call(&rebuilt, "fix__late", json!({})).await;
    assert_eq!(late.text_content(), "late ran");
}

#[tokio::test]
async fn a_server_that_dies_mid_call_is_started_again_once() {
    let toolset = start(&[("fix", plain())]).await;
    let registry = registry_of(&toolset);
    let first_pid = toolset.servers()[0].pid.unwrap();

    let died = call(&registry, "fix__exit", json!({"code": 3})).await;
    assert!(!died.ok);
    let text = died.text_content();
    for expected in [
        "MCP server 'fix' closed the connection during the call to 'exit': ",
        "the process exited with status 3",
        "fixture: exiting with status 3 in the middle of a call",
        "The next call starts it again.",
    ] {
        assert!(text.contains(expected), "{text}");
    }
    wait_gone(first_pid, false).await;

    // The next call starts it again, and the tool list is read again later.
    let echo = call(&registry, "fix__echo", json!({"text": "back"})).await;
    assert_eq!(echo.text_content(), "back");
    let second_pid = toolset.servers()[0].pid.unwrap();
    assert_ne!(second_pid, first_pid);
    assert!(toolset.is_stale());
    assert!(toolset.refresh_if_stale().await.unwrap().is_empty());

    // A second death is final.
    let died = call(&registry, "fix__exit", json!({"code": 4})).await;
    assert!(
        died.text_content()
            .ends_with("It was started again once already and stays down."),
        "{}",
        died.text_content()
    );
    let gone = call(&registry, "fix__echo", json!({"text": "again"})).await;
    assert!(!gone.ok);
    assert!(
        gone.text_content().starts_with(
            "MCP server 'fix' is not available: stopped again after it was restarted once (the process exited with status 4"
        ),
        "{}",
        gone.text_content()
    );
    match &toolset.servers()[0].state {
        McpServerState::Failed(f) => assert_eq!(f.stage, McpFailureStage::Stopped),
        other => panic!("{other:?}"),
    }
    assert_eq!(toolset.servers()[0].pid, None);
}

#[tokio::test]
async fn dropping_the_toolset_kills_the_server_and_what_it_started() {
    let toolset = start(&[("fix", plain())]).await;
    let registry = registry_of(&toolset);
    let server = toolset.servers()[0].pid.unwrap();
    let child: u32 = call(&registry, "fix__spawn_child", json!({}))
        .await
        .text_content()
        .parse()
        .unwrap();
    assert!(Path::new(&format!("/proc/{child}")).exists());

    drop(toolset);
    wait_gone(server, false).await;
    wait_gone(child, true).await;
    // Tools left in a registry say so instead of keeping the server alive.
    let late = call(&registry, "fix__echo", json!({"text": "anyone?"})).await;
    assert_eq!(
        late.text_content(),
        "MCP server 'fix' was shut down; its tools are no longer available"
    );

    // `shutdown` returns once the server is reaped.
    let toolset = start(&[("fix", plain())]).await;
    let server = toolset.servers()[0].pid.unwrap();
    toolset.shutdown().await;
    assert!(!Path::new(&format!("/proc/{server}")).exists());
}

#[tokio::test]
async fn servers_get_the_base_environment_without_secrets_plus_their_entry() {
    let entry = with(
        plain(),
        json!({"env": {"FIXTURE_GREETING": "hello ${FIXTURE_UNSET:-world}"}}),
    );
    let mut config = config(&[("fix", entry)]);
    config.base_env = CommandEnv::without_secrets([
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("VISIBLE", String::from("yes")),
        ("OPENAI_API_KEY", String::from("sk-secret")),
    ]);
    let toolset = McpToolset::start(config).await;
    let registry = registry_of(&toolset);
    for (name, value) in [
        ("FIXTURE_GREETING", "hello world"),
        ("VISIBLE", "yes"),
        ("OPENAI_API_KEY", "(unset)"),
    ] {
        let result = call(&registry, "fix__env", json!({"name": name})).await;
        assert_eq!(result.text_content(), value, "{name}");
    }
}

#[tokio::test]
async fn a_server_output_limit_cuts_long_results_with_a_marker() {
    let entry = with(plain(), json!({"outputLimit": {"maxLines": 10}}));
    let toolset = start(&[("fix", entry)]).await;
    let registry = registry_of(&toolset);
    let result = call(&registry, "fix__lines", json!({"count": 100})).await;
    let text = result.text_content();
    assert!(text.starts_with("line 1\nline 2\n"), "{text}");
    assert!(!text.contains("line 11\n"), "{text}");
    assert!(text.contains("[output truncated: showing"), "{text}");
}

#[tokio::test]
async fn loading_a_file_is_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    let file = json!({"mcpServers": {"fix": plain()}});
    std::fs::write(&path, file.to_string()).unwrap();
    let toolset = McpToolset::load(&path).await.unwrap();
    assert!(running(&toolset, "fix"));

    std::fs::write(&path, r#"{"mcpServers": {"fix": {"command": 3}}}"#).unwrap();
    let err = McpToolset::load(&path).await.unwrap_err();
    assert!(matches!(err, SetupError::McpConfig { .. }));
    assert!(
        err.to_string()
            .contains("mcpServers.fix.command: invalid type"),
        "{err}"
    );
}
