//! `diagram`: renders a Mermaid or Graphviz source to SVG or PNG into the
//! turn's artifacts, with a renderer found on the PATH.

use std::borrow::Cow;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use base64::Engine;
use roundtable_providers::{ImageContent, UserBlock};
use schemars::JsonSchema;
use serde::Deserialize;

use super::process::{self, Exit, Run};
use super::{Workspace, blocking};
use crate::{ArtifactName, ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// The largest source accepted, in bytes.
const MAX_SOURCE_BYTES: usize = 256 * 1024;

/// The largest image kept; a renderer writing more is stopped there.
const MAX_IMAGE_BYTES: u64 = 16 * 1024 * 1024;

/// What a PNG file starts with.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// The language of a diagram's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DiagramLanguage {
    /// Mermaid, rendered by `mmdc` (mermaid-cli).
    Mermaid,
    /// Graphviz DOT, rendered by `dot`.
    Graphviz,
}

impl DiagramLanguage {
    /// Every language, in the order the schema lists them.
    pub(crate) const ALL: [Self; 2] = [Self::Mermaid, Self::Graphviz];

    /// The name in the tool's input: `mermaid` or `graphviz`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Mermaid => "mermaid",
            Self::Graphviz => "graphviz",
        }
    }

    /// The language's name in prose.
    fn label(self) -> &'static str {
        match self {
            Self::Mermaid => "Mermaid",
            Self::Graphviz => "Graphviz",
        }
    }

    /// The command that renders it.
    fn renderer(self) -> &'static str {
        match self {
            Self::Mermaid => "mmdc",
            Self::Graphviz => "dot",
        }
    }

    /// Where the renderer comes from, for a model to tell a human.
    fn renderer_package(self) -> &'static str {
        match self {
            Self::Mermaid => "mermaid-cli (the npm package `@mermaid-js/mermaid-cli`)",
            Self::Graphviz => {
                "Graphviz (the `graphviz` package of Debian, Ubuntu, Fedora and Homebrew)"
            }
        }
    }

    /// The source's file name in the scratch folder (the renderer's
    /// messages name it).
    fn source_file(self) -> &'static str {
        match self {
            Self::Mermaid => "source.mmd",
            Self::Graphviz => "source.dot",
        }
    }

    /// The renderer's arguments: the source file to `output` (in the
    /// scratch folder, whose extension tells `mmdc` the format).
    fn renderer_args(self, format: DiagramFormat, output: &str) -> Vec<String> {
        let source = self.source_file().to_string();
        match self {
            Self::Graphviz => vec![
                format!("-T{}", format.as_str()),
                String::from("-o"),
                output.to_string(),
                source,
            ],
            Self::Mermaid => vec![
                String::from("-i"),
                source,
                String::from("-o"),
                output.to_string(),
            ],
        }
    }
}

/// The image format of a rendered diagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DiagramFormat {
    /// SVG (the default).
    #[default]
    Svg,
    /// PNG.
    Png,
}

/// A plain `enum` of names: simpler for models and accepted by every
/// provider, where the derived schema would be a `oneOf` of constants.
macro_rules! name_enum_schema {
    ($type:ty) => {
        impl JsonSchema for $type {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($type))
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let names: Vec<&str> = <$type>::ALL.iter().map(|v| v.as_str()).collect();
                schemars::json_schema!({"type": "string", "enum": names})
            }
        }
    };
}

name_enum_schema!(DiagramLanguage);
name_enum_schema!(DiagramFormat);

impl DiagramFormat {
    /// Every format, in the order the schema lists them.
    pub(crate) const ALL: [Self; 2] = [Self::Svg, Self::Png];

    /// The name in the tool's input, which is also the file extension:
    /// `svg` or `png`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Svg => "svg",
            Self::Png => "png",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Svg => "SVG",
            Self::Png => "PNG",
        }
    }

    /// Whether `bytes` look like an image of this format.
    fn matches(self, bytes: &[u8]) -> bool {
        match self {
            Self::Svg => bytes.windows(4).any(|w| w == b"<svg"),
            Self::Png => bytes.starts_with(PNG_SIGNATURE),
        }
    }
}

/// Input of `diagram`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct DiagramInput {
    /// The diagram's source: Mermaid (`flowchart LR\n  a --> b`) or Graphviz
    /// DOT (`digraph { a -> b }`), at most 256 KiB.
    pub source: String,
    /// The language of the source: `mermaid` or `graphviz`.
    pub language: DiagramLanguage,
    /// The image format: `svg` (the default) or `png`.
    #[serde(default)]
    pub format: DiagramFormat,
    /// A name for the image (ASCII letters, digits, `.`, `-`, `_`); the
    /// format's extension is added when missing. Default: `diagram-<call id>`.
    #[serde(default)]
    pub name: Option<String>,
}

/// Renders a Mermaid or Graphviz diagram to SVG or PNG and stores the image
/// as an artifact of the turn (it needs the host's artifact sink: see
/// [`ToolContext::artifacts`]).
///
/// The renderer is looked up on the PATH of the workspace's
/// [`CommandEnv`](super::CommandEnv): `dot` from Graphviz, `mmdc` from
/// mermaid-cli; when it is missing the model is told which command was
/// looked for and which package provides it. It runs like every workspace
/// command (its own process group, killed with its children on timeout or
/// cancellation, the environment without secrets), in a scratch folder that
/// holds only the source and the image, removed afterwards. A PNG that fits
/// the registry's output limit is also returned as an image.
#[derive(Debug, Clone)]
pub(crate) struct Diagram {
    ws: Workspace,
}

impl Diagram {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

#[async_trait]
impl TypedTool for Diagram {
    type Input = DiagramInput;

    fn name(&self) -> &str {
        "diagram"
    }

    fn description(&self) -> &str {
        "Render a diagram from Mermaid or Graphviz (DOT) source to an SVG or PNG image, kept \
         as an artifact of this turn; the result names it. Use it to show architecture, flows \
         or dependencies."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Exec
    }

    async fn run(&self, ctx: ToolContext, input: DiagramInput) -> Result<ToolResult, ToolError> {
        let (language, format) = (input.language, input.format);
        let name = match checked_name(&input, &ctx) {
            Ok(name) => name,
            Err(refused) => return Ok(ToolResult::error(refused)),
        };
        let Some(sink) = ctx.artifacts() else {
            return Ok(ToolResult::error(
                "Cannot render diagrams here: this host keeps no artifacts, so the image would \
                 have nowhere to go.",
            ));
        };
        let Some(program) = self.ws.command_env().find_program(language.renderer()) else {
            return Ok(ToolResult::error(format!(
                "Cannot render {} diagrams: the `{}` command is not installed (it is not on the \
                 PATH). It comes with {}.",
                language.label(),
                language.renderer(),
                language.renderer_package()
            )));
        };

        let Rendered { bytes, said } = match self
            .render(&ctx, &program, language, format, input.source)
            .await?
        {
            Ok(rendered) => rendered,
            Err(failed) => return Ok(failed),
        };

        let size = bytes.len();
        // The image part counts as its base64 text against the byte limit.
        let inline = (format == DiagramFormat::Png
            && size.div_ceil(3).saturating_mul(4) <= ctx.output_limit.max_bytes)
            .then(|| base64::engine::general_purpose::STANDARD.encode(&bytes));
        let reference = match sink.store(&name, bytes).await {
            Ok(reference) => reference,
            Err(err) => {
                return Ok(ToolResult::error(format!(
                    "The diagram rendered but could not be kept: {err}"
                )));
            }
        };
        let stored = Stored {
            size,
            reference,
            inline,
            said,
        };
        Ok(stored.reply(language, format, &program))
    }
}

/// The artifact name of the image; the refusal the model reads when the
/// source or the name will not do.
fn checked_name(input: &DiagramInput, ctx: &ToolContext) -> Result<ArtifactName, String> {
    if input.source.len() > MAX_SOURCE_BYTES {
        return Err(format!(
            "The source is {} bytes; diagrams take at most {MAX_SOURCE_BYTES}.",
            input.source.len()
        ));
    }
    if input.source.trim().is_empty() {
        return Err(String::from("The source is empty."));
    }
    match &input.name {
        Some(name) => artifact_name(name, input.format).map_err(|err| format!("Bad `name`: {err}")),
        None => Ok(ArtifactName::for_call(
            "diagram",
            &ctx.call_id,
            None,
            input.format.as_str(),
        )),
    }
}

/// A rendered image and what the renderer printed.
struct Rendered {
    bytes: Vec<u8>,
    said: String,
}

/// A rendered image kept as an artifact.
struct Stored {
    size: usize,
    reference: String,
    /// The image as base64, when it is shown inline.
    inline: Option<String>,
    /// What the renderer printed.
    said: String,
}

impl Stored {
    /// The result the model reads: the artifact, what the renderer said,
    /// and the image itself when it fits.
    fn reply(self, language: DiagramLanguage, format: DiagramFormat, program: &Path) -> ToolResult {
        let Stored {
            size,
            reference,
            inline,
            said,
        } = self;
        let mut text = format!(
            "Rendered the {} diagram as {} ({size} bytes): {reference}",
            language.label(),
            format.label()
        );
        if format == DiagramFormat::Png && inline.is_none() {
            text.push_str("\n[the image is too large to show here]");
        }
        if !said.trim().is_empty() {
            let _ = write!(text, "\n`{}` said:\n{said}", language.renderer());
        }
        let mut parts = vec![UserBlock::text(text)];
        if let Some(data) = inline {
            parts.push(UserBlock::Image(ImageContent {
                data: data.into(),
                mime_type: "image/png".into(),
            }));
        }
        ToolResult::parts(parts)
            .with_artifact(reference.clone())
            .with_details(serde_json::json!({
                "language": language.as_str(),
                "format": format.as_str(),
                "bytes": size,
                "artifact": reference,
                "renderer": program.to_string_lossy(),
            }))
    }
}

impl Diagram {
    /// Runs `program` on `source` in a scratch folder. `Err` ends the turn
    /// (cancellation); `Ok(Err(..))` is a failure the model reads.
    async fn render(
        &self,
        ctx: &ToolContext,
        program: &Path,
        language: DiagramLanguage,
        format: DiagramFormat,
        source: String,
    ) -> Result<Result<Rendered, ToolResult>, ToolError> {
        let scratch = match scratch_folder(language.source_file(), source).await {
            Ok(scratch) => scratch,
            Err(err) => return Ok(Err(ToolResult::error(format!("Cannot render: {err}")))),
        };
        let output_file = format!("diagram.{}", format.as_str());
        let args = language.renderer_args(format, &output_file);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let limits = self.ws.command_limits();
        let out = process::run(Run {
            program: program.as_os_str(),
            args: &args,
            cwd: scratch.path(),
            env: self.ws.command_env(),
            timeout: limits.default_timeout,
            output_cap: limits.output_cap,
            keep_full: None,
            cancel: &ctx.cancel,
            progress: None,
        })
        .await;
        let output_path = scratch.path().join(&output_file);
        let image = blocking(move || {
            let image = read_image(output_path);
            drop(scratch);
            image
        })
        .await;
        let out = match out {
            Ok(out) if out.exit == Exit::Cancelled => {
                return Err(ToolError::Cancelled {
                    tool: "diagram".into(),
                    call_id: ctx.call_id.clone(),
                });
            }
            Ok(out) => out,
            Err(err) => {
                return Ok(Err(ToolResult::error(format!(
                    "Cannot start `{}`: {err}",
                    program.display()
                ))));
            }
        };
        let status = out.status_line(limits.default_timeout);
        Ok(judge(&out, status, image, language, format).map_err(|failed| *failed))
    }
}

/// A scratch folder holding only the diagram's source, as `source_file`.
async fn scratch_folder(
    source_file: &'static str,
    source: String,
) -> Result<tempfile::TempDir, String> {
    blocking(move || {
        let dir = tempfile::Builder::new()
            .prefix("roundtable-diagram-")
            .tempdir()
            .map_err(|e| format!("cannot make a scratch folder: {e}"))?;
        std::fs::write(dir.path().join(source_file), source)
            .map_err(|e| format!("cannot write the source: {e}"))?;
        Ok(dir)
    })
    .await
}

/// What a finished renderer left: the image, or the failure the model
/// reads (with what the renderer printed).
fn judge(
    out: &process::CommandOutput,
    status: String,
    image: Result<Vec<u8>, String>,
    language: DiagramLanguage,
    format: DiagramFormat,
) -> Result<Rendered, Box<ToolResult>> {
    let said = out.output_with_note();
    let failed = |message: String| {
        let mut failed = ToolResult::error(message);
        if !said.is_empty() {
            failed.parts.push(UserBlock::text(said.clone()));
        }
        Box::new(failed)
    };
    if !out.success() {
        return Err(failed(format!(
            "Rendering failed: `{}` {status}.",
            language.renderer()
        )));
    }
    match image {
        Ok(bytes) if format.matches(&bytes) => Ok(Rendered { bytes, said }),
        Ok(_) => Err(failed(format!(
            "`{}` exited successfully but wrote no {} image.",
            language.renderer(),
            format.label()
        ))),
        Err(err) => Err(Box::new(ToolResult::error(err))),
    }
}

/// The artifact name for a name the model chose: checked, with the
/// format's extension added when it does not end with it.
fn artifact_name(name: &str, format: DiagramFormat) -> Result<ArtifactName, crate::ArtifactError> {
    let extension = format!(".{}", format.as_str());
    let has_extension = name.len() > extension.len()
        && name
            .get(name.len() - extension.len()..)
            .is_some_and(|end| end.eq_ignore_ascii_case(&extension));
    if has_extension {
        ArtifactName::new(name)
    } else {
        ArtifactName::new(format!("{name}{extension}"))
    }
}

/// The image the renderer wrote, bounded.
fn read_image(path: PathBuf) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file =
        std::fs::File::open(&path).map_err(|e| format!("The renderer wrote no image ({e})."))?;
    let mut bytes = Vec::new();
    file.take(MAX_IMAGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("Cannot read the rendered image: {e}"))?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(format!(
            "The rendered image is larger than {MAX_IMAGE_BYTES} bytes; simplify the diagram."
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_the_format_extension_once() {
        let svg = |n: &str| artifact_name(n, DiagramFormat::Svg).map(|n| n.to_string());
        assert_eq!(svg("arch").unwrap(), "arch.svg");
        assert_eq!(svg("arch.svg").unwrap(), "arch.svg");
        assert_eq!(svg("arch.SVG").unwrap(), "arch.SVG");
        assert_eq!(svg("arch.png").unwrap(), "arch.png.svg");
        assert!(svg(".svg").unwrap_err().to_string().contains("starts with"));
        assert!(svg("../x").is_err());
        assert!(svg("a/b").is_err());
        let png = artifact_name("flow", DiagramFormat::Png).unwrap();
        assert_eq!(png.as_str(), "flow.png");
    }

    #[test]
    fn the_schema_lists_the_names_the_input_takes() {
        let schema = crate::typed::input_schema::<DiagramInput>();
        assert_eq!(
            schema["required"],
            serde_json::json!(["source", "language"])
        );
        let props = &schema["properties"];
        assert_eq!(
            props["language"]["enum"],
            serde_json::json!(["mermaid", "graphviz"])
        );
        assert_eq!(props["format"]["enum"], serde_json::json!(["svg", "png"]));
        assert!(props["language"]["description"].is_string());
        // Each name listed is one the input accepts, and means that value.
        for language in DiagramLanguage::ALL {
            let parsed: DiagramLanguage = serde_json::from_value(language.as_str().into()).unwrap();
            assert_eq!(parsed, language);
        }
        for format in DiagramFormat::ALL {
            let parsed: DiagramFormat = serde_json::from_value(format.as_str().into()).unwrap();
            assert_eq!(parsed, format);
        }
    }
}
