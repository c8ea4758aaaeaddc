//! Artifacts of the workspace tools: `shell` and `verify` keep each
//! command's whole output, `apply_patch` the applied patch, in the host's
//! sink (here a `FolderArtifacts`), and the result names them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::ToolCall;
use roundtable_tools::workspace::{CommandLimits, Workspace};
use roundtable_tools::{
    ApprovalPolicy, FolderArtifacts, OutputLimit, ToolContext, ToolRegistry, ToolResult,
    VerifyPolicy,
};
use serde_json::json;
use tempfile::TempDir;

/// A workspace (`ws/`) and the turn's artifact folder (`artifacts/turn_1/`),
/// side by side.
struct Fixture {
    dir: TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("README.md"), "# Demo\nhello world\n").unwrap();
        Self { dir, root }
    }

    /// Commands keep 1000 bytes of output for the model.
    fn workspace(&self) -> Workspace {
        Workspace::open(&self.root)
            .unwrap()
            .with_command_limits(CommandLimits {
                default_timeout: Duration::from_secs(10),
                max_timeout: Duration::from_secs(10),
                output_cap: 1000,
            })
    }

    fn folder(&self) -> PathBuf {
        self.dir.path().join("artifacts/turn_1")
    }

    fn artifact(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.folder().join(name)).unwrap()
    }

    /// A context whose artifacts go to the turn's folder.
    fn context(&self, call_id: &str) -> ToolContext {
        let sink = FolderArtifacts::new(self.folder()).with_reference_prefix("artifacts/turn_1");
        ToolContext::new(call_id).with_artifacts(Arc::new(sink))
    }
}

fn registry(ws: &Workspace) -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    registry.register_all(ws.toolset()).unwrap();
    registry
}

async fn invoke(
    registry: &ToolRegistry,
    name: &str,
    args: serde_json::Value,
    ctx: ToolContext,
) -> ToolResult {
    let call = ToolCall::new(ctx.call_id.clone(), name, args.as_object().unwrap().clone());
    registry.invoke(&call, ctx).await.unwrap()
}

/// What `seq 1 n` prints.
fn seq(n: u32) -> Vec<u8> {
    (1..=n)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect()
}

/// The result's text without its first part.
fn without_first_part(result: &ToolResult) -> ToolResult {
    let mut rest = result.clone();
    rest.parts.remove(0);
    rest
}

#[tokio::test]
async fn shell_keeps_the_whole_output_of_a_cut_result() {
    let f = Fixture::new();
    let registry = registry(&f.workspace());
    let args = json!({"command": "seq 1 5000"});
    let result = invoke(&registry, "shell", args.clone(), f.context("call_1")).await;
    assert!(result.ok);
    let text = result.text_content();
    assert!(
        text.starts_with("[full output: artifacts/turn_1/shell-call_1.log]\n[first "),
        "{text}"
    );
    assert!(text.len() < 1200, "the model still sees the tail only");
    assert_eq!(result.artifacts, ["artifacts/turn_1/shell-call_1.log"]);
    assert_eq!(
        result.details.as_ref().unwrap()["full_output"],
        "artifacts/turn_1/shell-call_1.log"
    );
    assert_eq!(f.artifact("shell-call_1.log"), seq(5000));

    // Besides the note, the model reads what it reads without a sink.
    let plain = invoke(&registry, "shell", args, ToolContext::new("call_1")).await;
    assert!(plain.artifacts.is_empty());
    assert_eq!(
        without_first_part(&result).text_content(),
        plain.text_content()
    );

    // A failing command: the status first, then the note, then the output;
    // the same call id again gets a numbered name.
    let failed = invoke(
        &registry,
        "shell",
        json!({"command": "echo before; echo err >&2; exit 3"}),
        f.context("call_1"),
    )
    .await;
    assert!(!failed.ok);
    assert_eq!(
        failed.text_content(),
        "Command exit status 3\n[full output: artifacts/turn_1/shell-call_1-2.log]\nbefore\nerr\n"
    );
    assert_eq!(f.artifact("shell-call_1-2.log"), b"before\nerr\n");
}

#[tokio::test]
async fn the_note_survives_the_registry_cutting_the_result() {
    let f = Fixture::new();
    let registry = registry(&f.workspace()).with_output_limit(OutputLimit {
        max_bytes: 120,
        max_lines: 100,
    });
    let result = invoke(
        &registry,
        "shell",
        json!({"command": "seq 1 5000"}),
        f.context("call_2"),
    )
    .await;
    let text = result.text_content();
    assert!(
        text.starts_with("[full output: artifacts/turn_1/shell-call_2.log]\n"),
        "{text}"
    );
    assert!(text.contains("[output truncated"), "{text}");
    assert_eq!(f.artifact("shell-call_2.log"), seq(5000));
}

#[tokio::test]
async fn past_the_full_output_cap_the_artifact_keeps_both_ends() {
    let f = Fixture::new();
    let ws = f.workspace().with_full_output_cap(10_000);
    let result = invoke(
        &registry(&ws),
        "shell",
        json!({"command": "seq 1 100000"}),
        f.context("call_3"),
    )
    .await;
    assert!(result.ok);
    let all = seq(100_000);
    let mut expected = all[..10_000].to_vec();
    let gap = all.len() - 10_000 - 1000;
    expected.extend_from_slice(format!("\n[{gap} bytes of output omitted here]\n").as_bytes());
    expected.extend_from_slice(&all[all.len() - 1000..]);
    assert_eq!(f.artifact("shell-call_3.log"), expected);
}

#[tokio::test]
async fn verify_keeps_each_commands_whole_output() {
    let f = Fixture::new();
    let ws = f.workspace().with_verify_policy(VerifyPolicy {
        auto_verify: true,
        commands: vec!["seq 1 3000".into(), "echo broken >&2; exit 2".into()],
        require_clean: false,
    });
    let registry = registry(&ws);
    let result = invoke(&registry, "verify", json!({}), f.context("call_7")).await;
    assert!(!result.ok);
    let text = result.text_content();
    assert!(
        text.starts_with(
            "Verification failed: 1 of 2 commands failed.\n$ seq 1 3000\n[passed: exit status 0]\n\
             [full output: artifacts/turn_1/verify-call_7-1.log]\n[first "
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "$ echo broken >&2; exit 2\n[FAILED: exit status 2]\n\
             [full output: artifacts/turn_1/verify-call_7-2.log]\nbroken\n"
        ),
        "{text}"
    );
    assert_eq!(
        result.artifacts,
        [
            "artifacts/turn_1/verify-call_7-1.log",
            "artifacts/turn_1/verify-call_7-2.log"
        ]
    );
    let details = result.details.as_ref().unwrap();
    assert_eq!(
        details["commands"][1]["full_output"],
        "artifacts/turn_1/verify-call_7-2.log"
    );
    assert_eq!(f.artifact("verify-call_7-1.log"), seq(3000));
    assert_eq!(f.artifact("verify-call_7-2.log"), b"broken\n");

    // Without the notes, the text is the text without a sink.
    let plain = invoke(&registry, "verify", json!({}), ToolContext::new("call_7")).await;
    let notes_removed: String = text
        .lines()
        .filter(|line| !line.starts_with("[full output: "))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(notes_removed, plain.text_content());
}

#[tokio::test]
async fn apply_patch_keeps_the_applied_patch() {
    let f = Fixture::new();
    let registry = registry(&f.workspace());
    let patch = "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # Demo\n-hello world\n+hello patched world\n";
    let result = invoke(
        &registry,
        "apply_patch",
        json!({"patch": patch}),
        f.context("call_p"),
    )
    .await;
    assert!(result.ok, "{}", result.text_content());
    assert_eq!(
        result.text_content(),
        "Patch applied:\nM README.md\n[patch: artifacts/turn_1/apply_patch-call_p.patch]\n"
    );
    assert_eq!(
        result.artifacts,
        ["README.md", "artifacts/turn_1/apply_patch-call_p.patch"]
    );
    assert_eq!(f.artifact("apply_patch-call_p.patch"), patch.as_bytes());

    // A patch that does not apply is not kept.
    let failed = invoke(
        &registry,
        "apply_patch",
        json!({"patch": patch}),
        f.context("call_q"),
    )
    .await;
    assert!(!failed.ok);
    assert!(failed.artifacts.is_empty());
    assert!(!f.folder().join("apply_patch-call_q.patch").exists());
}

#[tokio::test]
async fn a_sink_that_fails_costs_the_artifact_not_the_result() {
    let f = Fixture::new();
    // The turn's folder is a link planted out of the artifacts: refused.
    let elsewhere = f.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(f.folder().parent().unwrap()).unwrap();
    symlink(&elsewhere, f.folder()).unwrap();
    let result = invoke(
        &registry(&f.workspace()),
        "shell",
        json!({"command": "echo fine"}),
        f.context("call_1"),
    )
    .await;
    assert!(result.ok);
    let text = result.text_content();
    assert!(
        text.starts_with("[full output not kept: cannot store artifact shell-call_1.log: "),
        "{text}"
    );
    assert!(text.ends_with("\nfine\n"), "{text}");
    assert!(result.artifacts.is_empty());
    assert!(is_empty(&elsewhere));
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}
