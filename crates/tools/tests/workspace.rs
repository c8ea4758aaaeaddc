//! Every workspace tool against a temporary workspace, confinement to the
//! root (a traversal corpus), and approvals of the workspace toolset.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use roundtable_providers::{ToolCall, UserBlock};
use roundtable_tools::workspace::{CommandEnv, CommandLimits, Workspace, is_secret_name};
use roundtable_tools::{
    ApprovalPolicy, OutputLimit, ProgressSink, SetupError, ToolContext, ToolError, ToolRegistry,
    ToolResult, VerifyPolicy,
};
use serde_json::json;
use tempfile::TempDir;

/// A workspace root inside a temp dir, next to an `outside/` directory
/// holding a secret that no tool may reveal or change.
struct Fixture {
    _dir: TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

const SECRET: &str = "TOP-SECRET-OUTSIDE";

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("src/nested")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "//! Lib.\n\npub struct Thing;\n\nimpl Thing {\n    pub fn new() -> Self {\n        Thing\n    }\n}\n\npub fn helper(x: u32) -> u32 {\n    x + 1\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/nested/app.py"),
        "class App:\n    def run(self):\n        pass\n\ndef main():\n    App().run()\n",
    )
    .unwrap();
    std::fs::write(root.join("README.md"), "# Demo\nhello world\n").unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::create_dir_all(root.join("target")).unwrap();
    std::fs::write(root.join("target/build.txt"), "hello from target\n").unwrap();
    std::fs::write(root.join("debug.log"), "hello from log\n").unwrap();
    // Symlinks leading out of the root, and one staying inside.
    symlink(&outside, root.join("link_out")).unwrap();
    symlink(outside.join("secret.txt"), root.join("secret_link.txt")).unwrap();
    symlink(dir.path().join("nowhere"), root.join("dangling")).unwrap();
    symlink(root.join("README.md"), root.join("readme_link.md")).unwrap();
    Fixture {
        _dir: dir,
        root,
        outside,
    }
}

fn registry(ws: &Workspace) -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    registry.register_all(ws.toolset()).unwrap();
    registry
}

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new("call_1", name, args.as_object().unwrap().clone())
}

async fn run(registry: &ToolRegistry, name: &str, args: serde_json::Value) -> ToolResult {
    registry
        .invoke(&call(name, args), ToolContext::new("call_1"))
        .await
        .unwrap()
}

fn git(root: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
}

/// Paths that must never reach outside the root.
const TRAVERSAL: &[&str] = &[
    "../outside/secret.txt",
    "..",
    "../",
    "./../outside/secret.txt",
    "src/../../outside/secret.txt",
    "src/nested/../../../outside/secret.txt",
    "/etc/passwd",
    "/",
    "//etc/passwd",
    "link_out/secret.txt",
    "link_out",
    "link_out/",
    "link_out/new_file.txt",
    "secret_link.txt",
    "dangling",
    "dangling/new.txt",
    "src/\0/x",
];

#[tokio::test]
async fn traversal_corpus_is_refused_by_every_path_taking_tool() {
    let f = fixture();
    let ws = Workspace::open(&f.root).unwrap();
    let registry = registry(&ws);
    for path in TRAVERSAL {
        for (tool, args) in [
            ("read_file", json!({"path": path})),
            ("repo_tree", json!({"path": path})),
            ("repo_map", json!({"path": path})),
            ("search", json!({"pattern": "SECRET", "path": path})),
        ] {
            let result = run(&registry, tool, args).await;
            assert!(
                !result.ok,
                "{tool} accepted {path:?}: {}",
                result.text_content()
            );
            assert!(
                !result.text_content().contains(SECRET),
                "{tool} leaked through {path:?}"
            );
        }
        assert!(
            ws.root().resolve(path).is_err(),
            "resolve accepted {path:?}"
        );
    }
}

#[tokio::test]
async fn paths_inside_the_root_resolve_even_through_inside_symlinks() {
    let f = fixture();
    let ws = Workspace::open(&f.root).unwrap();
    let root = ws.root();
    for ok in [
        "",
        ".",
        "./src",
        "src/lib.rs",
        "src/nested/",
        "new/dir/file.rs",
        "readme_link.md",
    ] {
        let resolved = root.resolve(ok).unwrap();
        assert!(resolved.starts_with(root.path()), "{ok:?} -> {resolved:?}");
    }
    let registry = registry(&ws);
    let result = run(&registry, "read_file", json!({"path": "readme_link.md"})).await;
    assert_eq!(result.text_content(), "# Demo\nhello world\n");
}

#[tokio::test]
async fn walking_tools_skip_symlinks_out_and_honour_gitignore() {
    let f = fixture();
    let ws = Workspace::open(&f.root).unwrap();
    let registry = registry(&ws);

    let search = run(&registry, "search", json!({"pattern": "SECRET|hello"})).await;
    let text = search.text_content();
    assert!(search.ok, "{text}");
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains("README.md:2:hello world"), "{text}");
    assert!(!text.contains("target/"), "gitignored dir searched: {text}");
    assert!(
        !text.contains("debug.log"),
        "gitignored file searched: {text}"
    );

    let tree = run(&registry, "repo_tree", json!({})).await.text_content();
    assert!(
        tree.contains("src/\n  lib.rs\n  nested/\n    app.py\n"),
        "{tree}"
    );
    assert!(tree.contains(".gitignore\n"), "{tree}");
    assert!(tree.contains("link_out@"), "{tree}");
    assert!(!tree.contains("secret.txt"), "{tree}");
    assert!(!tree.contains("target"), "{tree}");
    assert!(!tree.contains("debug.log"), "{tree}");
}

#[tokio::test]
async fn repo_tree_limits_depth_and_entries() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let shallow = run(&registry, "repo_tree", json!({"max_depth": 1}))
        .await
        .text_content();
    assert!(shallow.contains("src/\n"));
    assert!(!shallow.contains("lib.rs"), "{shallow}");
    let few = run(&registry, "repo_tree", json!({"max_entries": 2}))
        .await
        .text_content();
    assert!(few.contains("[listing stopped at 2 entries"), "{few}");
    let sub = run(&registry, "repo_tree", json!({"path": "src/nested"}))
        .await
        .text_content();
    assert_eq!(sub, "app.py\n");
    let file = run(&registry, "repo_tree", json!({"path": "README.md"})).await;
    assert!(!file.ok);
}

#[tokio::test]
async fn repo_map_lists_files_with_top_level_definitions() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let map = run(&registry, "repo_map", json!({})).await.text_content();
    assert!(
        map.contains(
            "src/lib.rs\n  pub struct Thing;\n  impl Thing\n  pub fn helper(x: u32) -> u32\n"
        ),
        "{map}"
    );
    assert!(
        map.contains("src/nested/app.py\n  class App:\n  def main():\n"),
        "{map}"
    );
    assert!(map.contains("README.md\n"), "{map}");
    assert!(
        !map.contains("pub fn new"),
        "nested definitions are not top-level: {map}"
    );
    assert!(!map.contains("secret"), "{map}");
}

#[tokio::test]
async fn read_file_ranges_images_and_errors() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let all = run(&registry, "read_file", json!({"path": "src/lib.rs"})).await;
    assert!(all.text_content().starts_with("//! Lib.\n"));
    let range = run(
        &registry,
        "read_file",
        json!({"path": "src/lib.rs", "offset": 3, "limit": 1}),
    )
    .await;
    assert_eq!(
        range.text_content(),
        "pub struct Thing;\n[showing lines 3-3 of 13; use offset=4 to continue]"
    );
    let missing = run(&registry, "read_file", json!({"path": "nope.rs"})).await;
    assert!(!missing.ok);
    assert_eq!(
        missing.text_content(),
        "cannot read \"nope.rs\": no such file"
    );
    let dir = run(&registry, "read_file", json!({"path": "src"})).await;
    assert!(dir.text_content().contains("is a directory"));
    let bad_args = run(&registry, "read_file", json!({"path": ["a"]})).await;
    assert!(
        bad_args
            .text_content()
            .starts_with("Validation failed for tool \"read_file\":\n  - path: invalid type")
    );

    std::fs::write(f.root.join("dot.png"), [0x89, b'P', b'N', b'G', 0, 1]).unwrap();
    let image = run(&registry, "read_file", json!({"path": "dot.png"})).await;
    assert!(image.ok);
    match &image.parts[..] {
        [UserBlock::Image(img)] => {
            assert_eq!(&*img.mime_type, "image/png");
            assert_eq!(&*img.data, "iVBORwAB");
        }
        other => panic!("expected one image, got {other:?}"),
    }
    std::fs::write(f.root.join("blob.bin"), [1, 0, 2]).unwrap();
    let binary = run(&registry, "read_file", json!({"path": "blob.bin"})).await;
    assert_eq!(binary.text_content(), "\"blob.bin\" is a binary file");
}

#[tokio::test]
async fn search_with_glob_case_and_limits() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let rs = run(
        &registry,
        "search",
        json!({"pattern": "fn \\w+", "glob": "*.rs"}),
    )
    .await
    .text_content();
    assert_eq!(
        rs,
        "src/lib.rs:6:    pub fn new() -> Self {\nsrc/lib.rs:11:pub fn helper(x: u32) -> u32 {\n"
    );
    let ci = run(
        &registry,
        "search",
        json!({"pattern": "HELLO", "ignore_case": true, "path": "README.md"}),
    )
    .await
    .text_content();
    assert_eq!(ci, "README.md:2:hello world\n");
    let none = run(&registry, "search", json!({"pattern": "zzz_not_there"}))
        .await
        .text_content();
    assert_eq!(none, "No matches.");
    let capped = run(
        &registry,
        "search",
        json!({"pattern": ".", "max_results": 2}),
    )
    .await
    .text_content();
    assert_eq!(capped.lines().count(), 3, "{capped}");
    assert!(capped.contains("[stopped at 2 matches"));
    let bad = run(&registry, "search", json!({"pattern": "("})).await;
    assert!(!bad.ok);
    assert!(
        bad.text_content().starts_with("invalid pattern"),
        "{}",
        bad.text_content()
    );
}

#[tokio::test]
async fn apply_patch_modifies_creates_deletes_and_renames() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let patch = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,3 @@\n # Demo\n-hello world\n+hello patched world\n+second line\n--- /dev/null\n+++ b/docs/new.md\n@@ -0,0 +1,2 @@\n+new\n+file\n--- a/src/nested/app.py\n+++ /dev/null\n@@ -1,6 +0,0 @@\n-class App:\n-    def run(self):\n-        pass\n-\n-def main():\n-    App().run()\n";
    let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
    assert!(result.ok, "{}", result.text_content());
    assert_eq!(
        result.text_content(),
        "Patch applied:\nM README.md\nA docs/new.md\nD src/nested/app.py\n"
    );
    assert_eq!(
        result.artifacts,
        ["README.md", "docs/new.md", "src/nested/app.py"]
    );
    assert_eq!(
        std::fs::read_to_string(f.root.join("README.md")).unwrap(),
        "# Demo\nhello patched world\nsecond line\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.root.join("docs/new.md")).unwrap(),
        "new\nfile\n"
    );
    assert!(!f.root.join("src/nested/app.py").exists());

    // Hunks whose line numbers are off still apply when the context matches.
    let shifted = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -40,3 +40,3 @@\n pub fn helper(x: u32) -> u32 {\n-    x + 1\n+    x + 2\n }\n";
    let result = run(&registry, "apply_patch", json!({"patch": shifted})).await;
    assert!(result.ok, "{}", result.text_content());
    assert!(
        std::fs::read_to_string(f.root.join("src/lib.rs"))
            .unwrap()
            .contains("x + 2")
    );

    let rename = "diff --git a/docs/new.md b/docs/moved.md\nsimilarity index 100%\nrename from docs/new.md\nrename to docs/moved.md\n";
    let result = run(&registry, "apply_patch", json!({"patch": rename})).await;
    assert!(result.ok, "{}", result.text_content());
    assert!(!f.root.join("docs/new.md").exists());
    assert_eq!(
        std::fs::read_to_string(f.root.join("docs/moved.md")).unwrap(),
        "new\nfile\n"
    );
}

#[tokio::test]
async fn a_patch_that_does_not_apply_changes_nothing() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let before_readme = std::fs::read_to_string(f.root.join("README.md")).unwrap();
    let before_lib = std::fs::read_to_string(f.root.join("src/lib.rs")).unwrap();
    // The first file applies, the second does not: neither is written.
    let patch = "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # Demo\n-hello world\n+changed\n--- /dev/null\n+++ b/created.txt\n@@ -0,0 +1 @@\n+x\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n-this line is not there\n+replacement\n \n";
    let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
    assert!(!result.ok);
    let text = result.text_content();
    assert!(
        text.starts_with("Patch not applied, nothing changed: src/lib.rs: error applying hunk #1"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(f.root.join("README.md")).unwrap(),
        before_readme
    );
    assert_eq!(
        std::fs::read_to_string(f.root.join("src/lib.rs")).unwrap(),
        before_lib
    );
    assert!(!f.root.join("created.txt").exists());

    for bad in [
        "not a patch at all",
        "--- a/missing.rs\n+++ b/missing.rs\n@@ -1 +1 @@\n-a\n+b\n",
        "--- /dev/null\n+++ b/README.md\n@@ -0,0 +1 @@\n+clobber\n",
        "--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# Demo\n",
    ] {
        let result = run(&registry, "apply_patch", json!({"patch": bad})).await;
        assert!(!result.ok, "{bad:?} applied");
    }
    assert_eq!(
        std::fs::read_to_string(f.root.join("README.md")).unwrap(),
        before_readme
    );
}

#[tokio::test]
async fn apply_patch_never_writes_outside_the_root_or_into_git() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let targets = [
        "../outside/secret.txt",
        "link_out/secret.txt",
        "secret_link.txt",
        "/tmp/roundtable_escape.txt",
        "src/../../outside/secret.txt",
        "link_out/created.txt",
        "dangling",
        ".git/hooks/pre-commit",
    ];
    for target in targets {
        let modify = format!("--- {target}\n+++ {target}\n@@ -1 +1 @@\n-{SECRET}\n+pwned\n");
        let create = format!("--- /dev/null\n+++ {target}\n@@ -0,0 +1 @@\n+pwned\n");
        for patch in [modify, create] {
            let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
            assert!(!result.ok, "patched {target:?}: {}", result.text_content());
        }
    }
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    assert!(!f.outside.join("created.txt").exists());
    assert!(!Path::new("/tmp/roundtable_escape.txt").exists());
    assert!(!f.root.join(".git").exists());
}

fn shell_ws(f: &Fixture) -> Workspace {
    Workspace::open(&f.root)
        .unwrap()
        .with_command_limits(CommandLimits {
            default_timeout: Duration::from_secs(10),
            max_timeout: Duration::from_secs(10),
            output_cap: 1000,
        })
}

#[tokio::test]
async fn shell_runs_in_the_root_and_reports_exit_status() {
    let f = fixture();
    let registry = registry(&shell_ws(&f));
    let pwd = run(&registry, "shell", json!({"command": "pwd; echo err >&2"})).await;
    assert!(pwd.ok);
    let text = pwd.text_content();
    let canonical = f.root.canonicalize().unwrap();
    assert!(
        text.contains(&format!("{}\n", canonical.display())),
        "{text}"
    );
    assert!(text.contains("err\n"), "{text}");
    assert_eq!(pwd.details.as_ref().unwrap()["exit_code"], 0);

    let failed = run(
        &registry,
        "shell",
        json!({"command": "echo before; exit 3"}),
    )
    .await;
    assert!(!failed.ok);
    assert_eq!(failed.text_content(), "Command exit status 3\nbefore\n");

    let capped = run(&registry, "shell", json!({"command": "seq 1 5000"}))
        .await
        .text_content();
    assert!(capped.starts_with("[first "), "{capped}");
    assert!(capped.ends_with("4999\n5000\n"), "{capped}");
    assert!(capped.len() < 1200, "{}", capped.len());
}

#[tokio::test]
async fn commands_never_see_the_hosts_secrets() {
    let f = fixture();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let ws = shell_ws(&f).with_command_env(
        CommandEnv::without_secrets([
            ("PATH", path),
            ("OPENAI_API_KEY", "sk-test".into()),
            ("GITHUB_TOKEN", "ghp-test".into()),
            ("MY_SETTING", "on".into()),
        ])
        .with("CI", "true"),
    );
    let env = run(&registry(&ws), "shell", json!({"command": "env"}))
        .await
        .text_content();
    assert!(env.contains("MY_SETTING=on\n"), "{env}");
    assert!(env.contains("CI=true\n"), "{env}");
    assert!(
        !env.contains("sk-test") && !env.contains("ghp-test"),
        "{env}"
    );

    // By default: this process's environment, minus anything named a secret.
    let env = run(&registry(&shell_ws(&f)), "shell", json!({"command": "env"}))
        .await
        .text_content();
    assert!(env.contains("PATH="), "{env}");
    for line in env.lines() {
        let name = line.split('=').next().unwrap_or_default();
        assert!(!is_secret_name(name), "{name} reached the command");
    }
}

#[tokio::test]
async fn shell_timeout_kills_the_command() {
    let f = fixture();
    let registry = registry(&shell_ws(&f));
    let result = run(
        &registry,
        "shell",
        json!({"command": "echo started; sleep 30", "timeout_secs": 1}),
    )
    .await;
    assert!(!result.ok);
    assert_eq!(
        result.text_content(),
        "Command timed out after 1 s and was killed\nstarted\n"
    );
}

fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap();
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

#[tokio::test]
async fn cancelling_shell_kills_the_command_and_its_children() {
    let f = fixture();
    let registry = std::sync::Arc::new(registry(&shell_ws(&f)));
    let (sink, mut progress) = ProgressSink::channel();
    let ctx = ToolContext::new("call_1").with_progress(sink);
    let cancel = ctx.cancel.clone();
    let c = call(
        "shell",
        json!({"command": "sleep 30 & echo $! > bg.pid; echo ready; wait"}),
    );
    let task = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.invoke(&c, ctx).await })
    };
    // The command reports readiness through the progress sink.
    let update = progress.recv().await.unwrap();
    assert_eq!(&*update.call_id, "call_1");
    assert_eq!(update.parts, vec![UserBlock::text("ready\n")]);
    let pid = std::fs::read_to_string(f.root.join("bg.pid"))
        .unwrap()
        .trim()
        .to_string();
    assert!(alive(&pid));
    cancel.cancel();
    let outcome = task.await.unwrap();
    assert!(
        matches!(outcome, Err(ToolError::Cancelled { .. })),
        "{outcome:?}"
    );
    // The background child was in the command's process group and died with it.
    let mut gone = false;
    for _ in 0..200 {
        if !alive(&pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "background child {pid} survived the cancel");
}

#[tokio::test]
async fn a_shell_timeout_kills_the_commands_children_too() {
    let f = fixture();
    let registry = registry(&shell_ws(&f));
    let result = run(
        &registry,
        "shell",
        json!({"command": "sleep 30 & echo $! > bg.pid; wait", "timeout_secs": 1}),
    )
    .await;
    assert!(!result.ok);
    assert!(
        result
            .text_content()
            .starts_with("Command timed out after 1 s"),
        "{}",
        result.text_content()
    );
    let pid = std::fs::read_to_string(f.root.join("bg.pid"))
        .unwrap()
        .trim()
        .to_string();
    // The background child was in the command's process group, killed
    // with it when the timeout fired: gone by the time the call returned
    // (allowing the kernel a moment to reap it).
    let mut gone = false;
    for _ in 0..200 {
        if !alive(&pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "background child {pid} survived the timeout");
}

#[tokio::test]
async fn git_status_reports_changes() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let not_repo = run(&registry, "git_status", json!({})).await;
    assert!(!not_repo.ok, "{}", not_repo.text_content());

    git(&f.root, &["init", "-q", "-b", "main"]);
    git(&f.root, &["add", "README.md", "src", ".gitignore"]);
    git(&f.root, &["commit", "-q", "-m", "init"]);
    std::fs::write(f.root.join("README.md"), "changed\n").unwrap();
    let status = run(&registry, "git_status", json!({})).await.text_content();
    assert!(status.starts_with("## main\n"), "{status}");
    assert!(status.contains(" M README.md\n"), "{status}");
    assert!(status.contains("?? readme_link.md\n"), "{status}");
    assert!(!status.contains("debug.log"), "{status}");
}

#[tokio::test]
async fn verify_runs_every_command_and_reports_each() {
    let f = fixture();
    let ws = shell_ws(&f).with_verify_policy(VerifyPolicy {
        auto_verify: true,
        commands: vec![
            "echo checking; true".into(),
            "echo broken >&2; exit 2".into(),
        ],
        require_clean: false,
    });
    let registry = registry(&ws);
    let result = run(&registry, "verify", json!({})).await;
    assert!(!result.ok);
    assert_eq!(
        result.text_content(),
        "Verification failed: 1 of 2 commands failed.\n$ echo checking; true\n[passed: exit status 0]\nchecking\n$ echo broken >&2; exit 2\n[FAILED: exit status 2]\nbroken\n"
    );
    let details = result.details.unwrap();
    assert_eq!(details["ok"], false);
    assert_eq!(details["commands"][0]["ok"], true);
    assert_eq!(details["commands"][1]["exit_code"], 2);

    let passing = shell_ws(&f).with_verify_policy(VerifyPolicy {
        commands: vec!["true".into()],
        ..VerifyPolicy::default()
    });
    let result = run(&registry_of(&passing), "verify", json!({})).await;
    assert!(result.ok, "{}", result.text_content());
}

fn registry_of(ws: &Workspace) -> ToolRegistry {
    registry(ws)
}

#[tokio::test]
async fn verify_require_clean_fails_when_commands_change_the_tree() {
    let f = fixture();
    git(&f.root, &["init", "-q", "-b", "main"]);
    let ws = shell_ws(&f).with_verify_policy(VerifyPolicy {
        auto_verify: true,
        commands: vec!["echo generated > generated.txt".into()],
        require_clean: true,
    });
    let result = run(&registry(&ws), "verify", json!({})).await;
    assert!(!result.ok);
    let text = result.text_content();
    assert!(
        text.starts_with("Verification failed: the working tree is not clean."),
        "{text}"
    );
    assert!(text.contains("?? generated.txt"), "{text}");
    assert_eq!(result.details.unwrap()["working_tree_changed"], true);

    let unchanged = shell_ws(&f).with_verify_policy(VerifyPolicy {
        auto_verify: true,
        commands: vec!["true".into()],
        require_clean: true,
    });
    let result = run(&registry(&unchanged), "verify", json!({})).await;
    assert!(result.ok, "{}", result.text_content());
}

#[tokio::test]
async fn default_policy_gates_write_and_exec_workspace_tools() {
    let f = fixture();
    let ws = Workspace::open(&f.root).unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(ws.toolset()).unwrap();
    let names: Vec<_> = registry
        .definitions()
        .map(|d| d.name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "repo_tree",
            "repo_map",
            "read_file",
            "search",
            "git_status",
            "apply_patch",
            "shell",
            "verify",
            "diagram"
        ]
    );
    for (name, gated) in [
        ("repo_tree", false),
        ("repo_map", false),
        ("read_file", false),
        ("search", false),
        ("git_status", false),
        ("apply_patch", true),
        ("shell", true),
        ("verify", true),
        ("diagram", true),
    ] {
        assert_eq!(
            registry.needs_approval(&call(name, json!({}))),
            gated,
            "{name}"
        );
    }
    // Invariant: a gated call does not run before approval.
    let touch = call("shell", json!({"command": "touch ran.txt"}));
    let refused = registry.invoke(&touch, ToolContext::new("c")).await;
    assert!(matches!(refused, Err(ToolError::ApprovalRequired { .. })));
    assert!(!f.root.join("ran.txt").exists());
    let approved = registry
        .invoke_approved(&touch, ToolContext::new("c"))
        .await
        .unwrap();
    assert!(approved.ok);
    assert!(f.root.join("ran.txt").exists());

    // Registering the toolset twice is refused.
    assert!(matches!(
        registry.register_all(ws.toolset()),
        Err(SetupError::DuplicateTool { .. })
    ));

    // Every schema is an object schema.
    for def in registry.definitions() {
        assert_eq!(def.input_schema()["type"], "object", "{}", def.name());
    }
}

#[tokio::test]
async fn registry_output_limit_applies_to_workspace_tools() {
    let f = fixture();
    let ws = Workspace::open(&f.root).unwrap();
    let mut registry = ToolRegistry::new()
        .with_approval_policy(ApprovalPolicy::none())
        .with_output_limit(OutputLimit {
            max_bytes: 20,
            max_lines: 100,
        });
    registry.register_all(ws.toolset()).unwrap();
    let result = run(&registry, "read_file", json!({"path": "src/lib.rs"})).await;
    let text = result.text_content();
    assert!(text.starts_with("//! Lib.\n\n"), "{text}");
    assert!(text.contains("[output truncated: showing 10 of"), "{text}");
}

#[tokio::test]
async fn opening_a_missing_root_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Workspace::open(dir.path().join("missing")).unwrap_err();
    assert!(matches!(err, SetupError::InvalidRoot { .. }));
}

#[tokio::test]
async fn numbers_sent_as_strings_are_repaired_before_validation() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let result = run(
        &registry,
        "read_file",
        json!({"path": "src/lib.rs", "offset": "3", "limit": "1"}),
    )
    .await;
    assert!(result.ok, "{}", result.text_content());
    assert!(result.text_content().starts_with("pub struct Thing;\n"));
}

#[tokio::test]
async fn apply_patch_replaces_hard_links_and_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    // A hard link inside the root to a file outside it.
    std::fs::hard_link(f.outside.join("secret.txt"), f.root.join("hard.txt")).unwrap();
    let patch = format!("--- a/hard.txt\n+++ b/hard.txt\n@@ -1 +1 @@\n-{SECRET}\n+changed\n");
    let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
    assert!(result.ok, "{}", result.text_content());
    assert_eq!(
        std::fs::read_to_string(f.root.join("hard.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );

    let script = f.root.join("run.sh");
    std::fs::write(&script, "echo one\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let patch = "--- a/run.sh\n+++ b/run.sh\n@@ -1 +1 @@\n-echo one\n+echo two\n";
    let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
    assert!(result.ok, "{}", result.text_content());
    let mode = std::fs::metadata(&script).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    let leftovers: Vec<_> = std::fs::read_dir(&f.root)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The fixture as a git repository, with links into its `.git`: `g` to the
/// folder, `hooks_link` to a folder inside it, `config_link` to a file.
fn git_fixture() -> Fixture {
    let f = fixture();
    git(&f.root, &["init", "-q", "-b", "main"]);
    symlink(f.root.join(".git"), f.root.join("g")).unwrap();
    symlink(f.root.join(".git/hooks"), f.root.join("hooks_link")).unwrap();
    symlink(f.root.join(".git/config"), f.root.join("config_link")).unwrap();
    f
}

/// Paths that name the repository's `.git`, directly or through a link.
const GIT_PATHS: &[&str] = &[
    ".git",
    "./.git",
    ".git/",
    ".git/config",
    "./.git/config",
    ".git/hooks",
    "src/../.git/config",
    "g",
    "g/",
    "g/config",
    "hooks_link",
    "config_link",
];

#[tokio::test]
async fn no_tool_reads_lists_or_searches_git_by_any_name() {
    let f = git_fixture();
    let ws = Workspace::open(&f.root).unwrap();
    let registry = registry(&ws);
    for path in GIT_PATHS {
        for (tool, args) in [
            ("read_file", json!({"path": path})),
            ("repo_tree", json!({"path": path})),
            ("repo_map", json!({"path": path})),
            (
                "search",
                json!({"pattern": "repositoryformatversion|HEAD", "path": path}),
            ),
        ] {
            let result = run(&registry, tool, args).await;
            let text = result.text_content();
            assert!(!result.ok, "{tool} accepted {path:?}: {text}");
            assert!(
                !text.contains("repositoryformatversion") && !text.contains("refs/heads"),
                "{tool} showed .git through {path:?}: {text}"
            );
        }
        assert!(
            ws.root().resolve(path).is_err(),
            "resolve accepted {path:?}"
        );
    }
    // From the root, nothing of .git shows either.
    let tree = run(&registry, "repo_tree", json!({"max_depth": 9}))
        .await
        .text_content();
    assert!(
        !tree.contains(".git/") && !tree.contains("hooks/"),
        "{tree}"
    );
    let map = run(&registry, "repo_map", json!({})).await.text_content();
    assert!(!map.contains(".git/"), "{map}");
    let search = run(
        &registry,
        "search",
        json!({"pattern": "repositoryformatversion"}),
    )
    .await;
    assert_eq!(search.text_content(), "No matches.");
}

#[tokio::test]
async fn apply_patch_never_writes_into_git_through_a_link() {
    let f = git_fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    let config_before = std::fs::read_to_string(f.root.join(".git/config")).unwrap();
    let first_line = config_before.lines().next().unwrap().to_string();
    for target in ["g/config", "./.git/config", "config_link", ".git/config"] {
        let patch = format!(
            "--- a/{target}\n+++ b/{target}\n@@ -1 +1,2 @@\n {first_line}\n+\tfsmonitor = \"touch pwned\"\n"
        );
        let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
        assert!(!result.ok, "patched {target:?}: {}", result.text_content());
        assert!(
            result.text_content().contains(".git"),
            "{target:?}: {}",
            result.text_content()
        );
    }
    for target in [
        "hooks_link/pre-commit",
        "g/hooks/post-checkout",
        "g/info/new",
        "./.git/new",
        "src/nested/.git/config",
    ] {
        let patch = format!("--- /dev/null\n+++ b/{target}\n@@ -0,0 +1 @@\n+touch pwned\n");
        let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
        assert!(!result.ok, "created {target:?}: {}", result.text_content());
    }
    assert_eq!(
        std::fs::read_to_string(f.root.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!f.root.join(".git/hooks/pre-commit").exists());
    assert!(!f.root.join(".git/hooks/post-checkout").exists());
    assert!(!f.root.join(".git/info/new").exists());
    assert!(!f.root.join(".git/new").exists());
    assert!(!f.root.join("src/nested/.git").exists());
}

/// Plants, next to `name`, a link under a predictable temporary name
/// (`.<name>.<pid>.patch-tmp`) a writer could pick: a write must never go
/// through it.
fn plant_temp_links(dir: &Path, name: &str, target: &Path) {
    symlink(
        target,
        dir.join(format!(".{name}.{}.patch-tmp", std::process::id())),
    )
    .unwrap();
}

#[tokio::test]
async fn apply_patch_does_not_write_through_a_planted_temp_link() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    std::fs::write(f.root.join("target.txt"), "old\n").unwrap();
    plant_temp_links(&f.root, "target.txt", &f.outside.join("secret.txt"));
    let patch = "--- a/target.txt\n+++ b/target.txt\n@@ -1 +1 @@\n-old\n+new\n";
    let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
    assert!(result.ok, "{}", result.text_content());
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    let meta = std::fs::symlink_metadata(f.root.join("target.txt")).unwrap();
    assert!(meta.file_type().is_file(), "target.txt became {meta:?}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("target.txt")).unwrap(),
        "new\n"
    );

    // A new file, too.
    plant_temp_links(&f.root.join("src"), "fresh.rs", &f.outside.join("fresh.rs"));
    let patch = "--- /dev/null\n+++ b/src/fresh.rs\n@@ -0,0 +1 @@\n+fn fresh() {}\n";
    let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
    assert!(result.ok, "{}", result.text_content());
    assert!(!f.outside.join("fresh.rs").exists());
    assert!(
        std::fs::symlink_metadata(f.root.join("src/fresh.rs"))
            .unwrap()
            .file_type()
            .is_file()
    );
}

#[tokio::test]
async fn a_failed_patch_rolls_back_without_writing_through_a_planted_temp_link() {
    let f = fixture();
    let registry = registry(&Workspace::open(&f.root).unwrap());
    std::fs::write(f.root.join("target.txt"), "old\n").unwrap();
    plant_temp_links(&f.root, "target.txt", &f.outside.join("secret.txt"));
    // `target.txt` is written first; then `d/x` cannot be, since the same
    // patch made `d` a file: the whole patch is rolled back.
    let patch = "--- a/target.txt\n+++ b/target.txt\n@@ -1 +1 @@\n-old\n+new\n\
                 --- /dev/null\n+++ b/d\n@@ -0,0 +1 @@\n+file\n\
                 --- /dev/null\n+++ b/d/x\n@@ -0,0 +1 @@\n+below a file\n";
    let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
    assert!(!result.ok, "{}", result.text_content());
    assert!(
        result.text_content().contains("nothing changed"),
        "{}",
        result.text_content()
    );
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    let meta = std::fs::symlink_metadata(f.root.join("target.txt")).unwrap();
    assert!(meta.file_type().is_file(), "target.txt became {meta:?}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("target.txt")).unwrap(),
        "old\n"
    );
    assert!(!f.root.join("d").exists());
}

#[tokio::test]
async fn git_status_never_runs_a_command_planted_in_the_repository_config() {
    let f = fixture();
    git(&f.root, &["init", "-q", "-b", "main"]);
    git(&f.root, &["add", "README.md"]);
    git(&f.root, &["commit", "-q", "-m", "init"]);
    // A repository that arrived with a hostile config names a command as
    // its file-system monitor; git would run it on every status.
    let marker = f.outside.join("fsmonitor-ran");
    let monitor = f.outside.join("monitor.sh");
    std::fs::write(
        &monitor,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        &monitor,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git(
        &f.root,
        &["config", "core.fsmonitor", monitor.to_str().unwrap()],
    );
    let status = run(
        &registry(&Workspace::open(&f.root).unwrap()),
        "git_status",
        json!({}),
    )
    .await;
    assert!(status.ok, "{}", status.text_content());
    assert!(
        status.text_content().starts_with("## main\n"),
        "{}",
        status.text_content()
    );
    assert!(!marker.exists(), "git_status ran core.fsmonitor");
}

#[tokio::test]
async fn numeric_arguments_at_their_extremes_never_panic() {
    let f = fixture();
    std::fs::write(f.root.join("a.txt"), "a\nb\nc\nd\n").unwrap();
    let registry = registry(&shell_ws(&f));
    let max = u64::MAX;

    let read = |args: serde_json::Value| {
        let registry = &registry;
        async move { run(registry, "read_file", args).await }
    };
    let huge_limit = read(json!({"path": "a.txt", "offset": 2, "limit": max})).await;
    assert!(huge_limit.ok, "{}", huge_limit.text_content());
    assert_eq!(huge_limit.text_content(), "b\nc\nd\n");
    let near_end = read(json!({"path": "a.txt", "offset": 3, "limit": max - 1})).await;
    assert_eq!(near_end.text_content(), "c\nd\n");
    let huge_offset = read(json!({"path": "a.txt", "offset": max, "limit": max})).await;
    assert!(!huge_offset.ok);
    assert!(
        huge_offset
            .text_content()
            .contains("beyond the end of the file (4 lines)"),
        "{}",
        huge_offset.text_content()
    );
    let zeros = read(json!({"path": "a.txt", "offset": 0, "limit": 0})).await;
    assert_eq!(
        zeros.text_content(),
        "a\n[showing lines 1-1 of 4; use offset=2 to continue]"
    );
    for (field, value) in [
        ("offset", json!(-1)),
        ("limit", json!(-5)),
        ("limit", json!(i64::MIN)),
        ("offset", json!(1.5)),
        ("offset", json!(1e300)),
        ("limit", json!("18446744073709551616")),
    ] {
        let mut args = json!({"path": "a.txt"});
        args[field] = value.clone();
        let result = read(args).await;
        assert!(!result.ok, "{field}={value}: {}", result.text_content());
        assert!(
            result.text_content().starts_with(&format!(
                "Validation failed for tool \"read_file\":\n  - {field}: "
            )),
            "{field}={value}: {}",
            result.text_content()
        );
    }

    for (tool, args) in [
        ("repo_tree", json!({"max_depth": max, "max_entries": max})),
        ("repo_tree", json!({"max_depth": 0, "max_entries": 0})),
        ("repo_map", json!({"max_files": max})),
        ("repo_map", json!({"max_files": 0})),
        ("search", json!({"pattern": "a", "max_results": max})),
        ("search", json!({"pattern": "a", "max_results": 0})),
        ("shell", json!({"command": "echo ok", "timeout_secs": max})),
    ] {
        let result = run(&registry, tool, args.clone()).await;
        assert!(result.ok, "{tool} {args}: {}", result.text_content());
    }
    for (tool, args) in [
        ("repo_tree", json!({"max_depth": -1})),
        ("repo_map", json!({"max_files": -1})),
        ("search", json!({"pattern": "a", "max_results": -1})),
        ("shell", json!({"command": "true", "timeout_secs": -1})),
    ] {
        let result = run(&registry, tool, args.clone()).await;
        assert!(!result.ok, "{tool} {args}: {}", result.text_content());
        assert!(
            result.text_content().starts_with("Validation failed"),
            "{tool} {args}: {}",
            result.text_content()
        );
    }
    // A zero timeout still lets a command start and finish.
    let zero = run(
        &registry,
        "shell",
        json!({"command": "echo quick", "timeout_secs": 0}),
    )
    .await;
    assert!(zero.ok, "{}", zero.text_content());

    // Hunk headers with numbers at and past the integer limits.
    for header in [
        format!("@@ -{max},{max} +{max},{max} @@"),
        format!("@@ -1,{max} +1,{max} @@"),
        "@@ -18446744073709551616 +1 @@".to_string(),
        format!("@@ -{max} +{max} @@"),
    ] {
        let patch = format!("--- a/a.txt\n+++ b/a.txt\n{header}\n-a\n+z\n");
        let result = run(&registry, "apply_patch", json!({"patch": patch})).await;
        assert!(!result.ok, "{header}: {}", result.text_content());
        assert!(
            !result.text_content().contains("internal error"),
            "{header}: {}",
            result.text_content()
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
        "a\nb\nc\nd\n"
    );
}
