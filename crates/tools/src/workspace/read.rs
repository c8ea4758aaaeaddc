//! `read_file`: a file's text (a range of lines), or an image.

use async_trait::async_trait;
use base64::Engine;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Workspace, blocking};
use crate::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// Lines returned when the call names no limit.
const DEFAULT_LINES: usize = 2000;
/// Files larger than this are refused (ask for a range or search instead).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Input of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ReadFileInput {
    /// File path, relative to the workspace root.
    pub path: String,
    /// First line to return, counting from 1 (default 1; 0 reads as 1).
    #[serde(default)]
    pub offset: Option<usize>,
    /// How many lines to return (default 2000; at least 1).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Reads a text file (a range of lines) or an image (png, jpeg, gif, webp).
#[derive(Debug, Clone)]
pub(crate) struct ReadFile {
    ws: Workspace,
}

impl ReadFile {
    /// The tool over `ws`.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

enum Read {
    Text(String),
    Image { data: String, mime: &'static str },
}

fn image_mime(path: &std::path::Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

#[async_trait]
impl TypedTool for ReadFile {
    type Input = ReadFileInput;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a file of the workspace. Text files come back as text, up to 2000 lines at a time: \
         use `offset` (first line, from 1) and `limit` to read a range. Images (png, jpeg, gif, \
         webp) come back as images."
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn run(&self, _ctx: ToolContext, input: ReadFileInput) -> Result<ToolResult, ToolError> {
        let ws = self.ws.clone();
        let read = blocking(move || {
            let path = ws.root().resolve(&input.path)?;
            let meta = std::fs::metadata(&path)
                .map_err(|e| format!("cannot read {:?}: {}", input.path, describe(&e)))?;
            if meta.is_dir() {
                return Err(format!(
                    "{:?} is a directory; use repo_tree to list it",
                    input.path
                ));
            }
            if meta.len() > MAX_FILE_BYTES {
                return Err(format!(
                    "{:?} is {} bytes, too large to read; use search to find the part you need",
                    input.path,
                    meta.len()
                ));
            }
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("cannot read {:?}: {}", input.path, describe(&e)))?;
            if let Some(mime) = image_mime(&path) {
                return Ok(Read::Image {
                    data: base64::engine::general_purpose::STANDARD.encode(&bytes),
                    mime,
                });
            }
            if bytes[..bytes.len().min(8192)].contains(&0) {
                return Err(format!("{:?} is a binary file", input.path));
            }
            let text = String::from_utf8_lossy(&bytes);
            select_lines(&text, input.offset, input.limit).map(Read::Text)
        })
        .await;
        Ok(match read {
            Ok(Read::Text(text)) => ToolResult::text(text),
            Ok(Read::Image { data, mime }) => ToolResult::image(data, mime),
            Err(err) => ToolResult::error(err),
        })
    }
}

pub(crate) fn describe(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => String::from("no such file"),
        std::io::ErrorKind::PermissionDenied => String::from("permission denied"),
        _ => err.to_string(),
    }
}

/// The lines `offset..offset+limit` (1-based) of `text`, with a note telling
/// the model how to continue when lines remain. Any `offset` and `limit` a
/// model sends are fine: the arithmetic saturates.
fn select_lines(text: &str, offset: Option<usize>, limit: Option<usize>) -> Result<String, String> {
    let total = text.lines().count();
    let first = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or(DEFAULT_LINES).max(1);
    if total == 0 {
        return Ok(String::new());
    }
    if first > total {
        return Err(format!(
            "offset {first} is beyond the end of the file ({total} lines)"
        ));
    }
    if first == 1 && total <= limit {
        return Ok(text.to_string());
    }
    let mut out: String = text
        .split_inclusive('\n')
        .skip(first - 1)
        .take(limit)
        .collect();
    // `limit >= 1`, so the subtraction cannot wrap; the sum may not fit.
    let last = first.saturating_add(limit - 1).min(total);
    if last < total {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "[showing lines {first}-{last} of {total}; use offset={} to continue]",
            last + 1
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ranges() {
        let text = "a\nb\nc\nd\n";
        assert_eq!(select_lines(text, None, None).unwrap(), text);
        assert_eq!(
            select_lines(text, Some(2), Some(2)).unwrap(),
            "b\nc\n[showing lines 2-3 of 4; use offset=4 to continue]"
        );
        assert_eq!(select_lines(text, Some(3), None).unwrap(), "c\nd\n");
        assert!(
            select_lines(text, Some(9), None)
                .unwrap_err()
                .contains("beyond the end")
        );
    }

    #[test]
    fn extreme_ranges_saturate() {
        let text = "a\nb\nc\nd\n";
        let max = usize::MAX;
        assert_eq!(select_lines(text, Some(2), Some(max)).unwrap(), "b\nc\nd\n");
        assert_eq!(select_lines(text, Some(4), Some(max - 1)).unwrap(), "d\n");
        assert!(select_lines(text, Some(max), Some(max)).is_err());
        assert_eq!(
            select_lines(text, Some(0), Some(0)).unwrap(),
            "a\n[showing lines 1-1 of 4; use offset=2 to continue]"
        );
        assert_eq!(
            select_lines(text, Some(3), Some(1)).unwrap(),
            "c\n[showing lines 3-3 of 4; use offset=4 to continue]"
        );
    }
}
