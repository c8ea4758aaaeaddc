//! The `diagram` tool with the real Graphviz `dot` (Debian's `graphviz`
//! package; `.ci/run` installs it): SVG and PNG artifacts checked byte by
//! byte, renderer errors, a missing renderer or artifact sink, bad names,
//! and a cancelled render killed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use roundtable_providers::{ToolCall, UserBlock};
use roundtable_tools::workspace::{CommandEnv, Workspace};
use roundtable_tools::{
    ApprovalPolicy, FolderArtifacts, OutputLimit, ToolContext, ToolError, ToolRegistry, ToolResult,
};
use serde_json::json;
use tempfile::TempDir;

const GRAPH: &str =
    "digraph deps {\n  rankdir=LR;\n  \"chat-runner\" -> tools;\n  tools -> providers;\n}\n";

struct Fixture {
    dir: TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(&root).unwrap();
        Self { dir, root }
    }

    fn folder(&self) -> PathBuf {
        self.dir.path().join("artifacts/turn_1")
    }

    fn artifact(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.folder().join(name)).unwrap()
    }

    fn context(&self, call_id: &str) -> ToolContext {
        let sink = FolderArtifacts::new(self.folder()).with_reference_prefix("artifacts/turn_1");
        ToolContext::new(call_id).with_artifacts(Arc::new(sink))
    }

    fn registry(&self) -> ToolRegistry {
        registry(&Workspace::open(&self.root).unwrap())
    }
}

fn registry(ws: &Workspace) -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_approval_policy(ApprovalPolicy::none());
    registry.register_all(ws.toolset()).unwrap();
    registry
}

fn diagram_call(ctx: &ToolContext, args: serde_json::Value) -> ToolCall {
    ToolCall::new(
        ctx.call_id.clone(),
        "diagram",
        args.as_object().unwrap().clone(),
    )
}

async fn render(registry: &ToolRegistry, args: serde_json::Value, ctx: ToolContext) -> ToolResult {
    registry
        .invoke(&diagram_call(&ctx, args), ctx)
        .await
        .unwrap()
}

/// The chunks of a PNG file, after checking its signature, every chunk's
/// length and CRC, the header first and the end chunk last.
fn png_chunks(bytes: &[u8]) -> Vec<String> {
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG signature"
    );
    let mut rest = &bytes[8..];
    let mut chunks = Vec::new();
    while !rest.is_empty() {
        assert!(rest.len() >= 12, "a truncated chunk");
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        assert!(rest.len() >= 12 + len, "a chunk longer than the file");
        let kind_and_data = &rest[4..8 + len];
        let crc = u32::from_be_bytes(rest[8 + len..12 + len].try_into().unwrap());
        assert_eq!(crc32(kind_and_data), crc, "bad CRC");
        let kind = String::from_utf8(kind_and_data[..4].to_vec()).unwrap();
        if chunks.is_empty() {
            assert_eq!(kind, "IHDR");
            let width = u32::from_be_bytes(kind_and_data[4..8].try_into().unwrap());
            let height = u32::from_be_bytes(kind_and_data[8..12].try_into().unwrap());
            assert!(width > 0 && height > 0, "{width}x{height}");
        }
        chunks.push(kind);
        rest = &rest[12 + len..];
    }
    assert_eq!(chunks.last().map(String::as_str), Some("IEND"));
    assert!(chunks.iter().any(|c| c == "IDAT"), "{chunks:?}");
    chunks
}

/// CRC-32 as PNG computes it (ISO 3309).
fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn the_png_checker_knows_a_png() {
    assert_eq!(crc32(b"IEND"), 0xAE42_6082);
}

#[tokio::test]
async fn graphviz_renders_an_svg_artifact() {
    let f = Fixture::new();
    let result = render(
        &f.registry(),
        json!({"source": GRAPH, "language": "graphviz"}),
        f.context("call_1"),
    )
    .await;
    assert!(result.ok, "{}", result.text_content());
    let svg = String::from_utf8(f.artifact("diagram-call_1.svg")).unwrap();
    assert_eq!(
        result.text_content(),
        format!(
            "Rendered the Graphviz diagram as SVG ({} bytes): artifacts/turn_1/diagram-call_1.svg",
            svg.len()
        )
    );
    assert_eq!(result.artifacts, ["artifacts/turn_1/diagram-call_1.svg"]);
    assert!(
        !result
            .parts
            .iter()
            .any(|p| matches!(p, UserBlock::Image(_))),
        "an SVG is not sent as an image"
    );
    // A whole SVG document drawing the graph: its nodes and edges.
    assert!(svg.starts_with("<?xml"), "{svg}");
    assert!(svg.contains("<svg "), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
    for title in [
        "<title>deps</title>",
        "<title>tools</title>",
        "<title>providers</title>",
        "<title>chat&#45;runner</title>",
        "<title>tools&#45;&gt;providers</title>",
    ] {
        assert!(svg.contains(title), "{title} missing from {svg}");
    }
    let details = result.details.unwrap();
    assert_eq!(details["language"], "graphviz");
    assert_eq!(details["format"], "svg");
    assert_eq!(details["bytes"], svg.len());
}

#[tokio::test]
async fn graphviz_renders_a_png_artifact_and_shows_it_when_it_fits() {
    let f = Fixture::new();
    let registry = f.registry();
    let args = json!({"source": GRAPH, "language": "graphviz", "format": "png", "name": "deps"});
    let result = render(&registry, args.clone(), f.context("call_2")).await;
    assert!(result.ok, "{}", result.text_content());
    let png = f.artifact("deps.png");
    png_chunks(&png);
    assert_eq!(result.artifacts, ["artifacts/turn_1/deps.png"]);
    assert!(
        result
            .text_content()
            .ends_with("bytes): artifacts/turn_1/deps.png"),
        "{}",
        result.text_content()
    );
    let images: Vec<_> = result
        .parts
        .iter()
        .filter_map(|p| match p {
            UserBlock::Image(image) => Some(image),
            UserBlock::Text(_) => None,
        })
        .collect();
    assert_eq!(images.len(), 1);
    assert_eq!(&*images[0].mime_type, "image/png");
    let shown = base64::engine::general_purpose::STANDARD
        .decode(images[0].data.as_bytes())
        .unwrap();
    assert_eq!(shown, png);

    // Under an output limit smaller than the image, only its name comes back.
    let small = f.registry().with_output_limit(OutputLimit {
        max_bytes: 200,
        max_lines: 100,
    });
    let result = render(&small, args, f.context("call_3")).await;
    assert!(result.ok, "{}", result.text_content());
    assert!(
        !result
            .parts
            .iter()
            .any(|p| matches!(p, UserBlock::Image(_)))
    );
    let text = result.text_content();
    assert!(
        text.contains("artifacts/turn_1/deps-2.png\n[the image is too large to show here]"),
        "{text}"
    );
    png_chunks(&f.artifact("deps-2.png"));
}

#[tokio::test]
async fn a_graphviz_syntax_error_comes_back_to_the_model() {
    let f = Fixture::new();
    let result = render(
        &f.registry(),
        json!({"source": "digraph { a -> }", "language": "graphviz"}),
        f.context("call_1"),
    )
    .await;
    assert!(!result.ok);
    let text = result.text_content();
    assert!(
        text.starts_with("Rendering failed: `dot` exit status 1.\n"),
        "{text}"
    );
    assert!(text.contains("syntax error in line 1"), "{text}");
    assert!(!f.folder().exists(), "nothing is kept");
}

#[tokio::test]
async fn a_missing_renderer_is_named_with_its_package() {
    let f = Fixture::new();
    let empty = f.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let ws = Workspace::open(&f.root)
        .unwrap()
        .with_command_env(CommandEnv::exactly([("PATH", &empty)]));
    let registry = registry(&ws);
    let graphviz = render(
        &registry,
        json!({"source": GRAPH, "language": "graphviz"}),
        f.context("call_1"),
    )
    .await;
    assert!(!graphviz.ok);
    assert_eq!(
        graphviz.text_content(),
        "Cannot render Graphviz diagrams: the `dot` command is not installed (it is not on the \
         PATH). It comes with Graphviz (the `graphviz` package of Debian, Ubuntu, Fedora and \
         Homebrew)."
    );
    let mermaid = render(
        &registry,
        json!({"source": "flowchart LR\n  a --> b\n", "language": "mermaid"}),
        f.context("call_2"),
    )
    .await;
    assert!(!mermaid.ok);
    assert_eq!(
        mermaid.text_content(),
        "Cannot render Mermaid diagrams: the `mmdc` command is not installed (it is not on the \
         PATH). It comes with mermaid-cli (the npm package `@mermaid-js/mermaid-cli`)."
    );
    assert!(!f.folder().exists());
}

#[tokio::test]
async fn without_an_artifact_sink_nothing_is_rendered() {
    let f = Fixture::new();
    let result = render(
        &f.registry(),
        json!({"source": GRAPH, "language": "graphviz"}),
        ToolContext::new("call_1"),
    )
    .await;
    assert!(!result.ok);
    assert_eq!(
        result.text_content(),
        "Cannot render diagrams here: this host keeps no artifacts, so the image would have \
         nowhere to go."
    );
}

#[tokio::test]
async fn names_that_try_to_escape_and_oversized_sources_are_refused() {
    let f = Fixture::new();
    let registry = f.registry();
    let long = "x".repeat(200);
    for name in [
        "../escape",
        "../../ws/pwned",
        "/tmp/abs",
        "a/b",
        "..",
        ".hidden",
        "x..y",
        "back\\slash",
        "nul\0",
        "",
        long.as_str(),
    ] {
        let result = render(
            &registry,
            json!({"source": GRAPH, "language": "graphviz", "name": name}),
            f.context("call_1"),
        )
        .await;
        assert!(!result.ok, "{name:?}");
        let text = result.text_content();
        assert!(
            text.starts_with("Bad `name`: ") && text.contains("is not a valid artifact name"),
            "{name:?}: {text}"
        );
    }
    let huge = format!("digraph {{ {} }}", "a -> b; ".repeat(40_000));
    let result = render(
        &registry,
        json!({"source": huge, "language": "graphviz"}),
        f.context("call_2"),
    )
    .await;
    assert!(!result.ok);
    assert!(
        result
            .text_content()
            .ends_with("bytes; diagrams take at most 262144."),
        "{}",
        result.text_content()
    );
    // Nothing was written, here or anywhere near.
    assert!(!f.folder().exists());
    let mut names: Vec<_> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["ws"]);
    assert!(is_empty(&f.root));
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

/// Opens the write end of `fifo` once a reader holds it open: until then
/// a non-blocking open fails with `ENXIO`.
async fn writer_once_read(fifo: &Path) -> OwnedFd {
    for _ in 0..3000 {
        match nix::fcntl::open(
            fifo,
            OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => return fd,
            Err(Errno::ENXIO) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(err) => panic!("cannot open the fifo: {err}"),
        }
    }
    panic!("the renderer never opened {}", fifo.display());
}

#[tokio::test]
async fn cancelling_a_render_kills_the_renderer() {
    let f = Fixture::new();
    // `dot` reads a node's image to size it: an image that is a FIFO with
    // no data keeps it reading until it is killed.
    let fifo = f.dir.path().join("image.fifo");
    nix::unistd::mkfifo(&fifo, Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    let source = format!("digraph {{ a [image=\"{}\"]; }}", fifo.display());
    let registry = Arc::new(f.registry());
    let ctx = f.context("call_1");
    let cancel = ctx.cancel.clone();
    let call = diagram_call(&ctx, json!({"source": source, "language": "graphviz"}));
    let task = {
        let registry = registry.clone();
        tokio::spawn(async move { registry.invoke(&call, ctx).await })
    };
    let writer = writer_once_read(&fifo).await;
    assert!(!task.is_finished(), "the render is blocked on its image");
    cancel.cancel();
    let outcome = task.await.unwrap();
    assert!(
        matches!(outcome, Err(ToolError::Cancelled { .. })),
        "{outcome:?}"
    );
    // The renderer is gone: nothing reads the FIFO any more.
    let mut writer = std::fs::File::from(writer);
    let err = writer.write_all(b"x").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
    assert!(!f.folder().exists());
}
