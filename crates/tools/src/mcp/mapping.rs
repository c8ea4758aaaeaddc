//! What an MCP tool call returned, as a [`ToolResult`] the model reads.
//!
//! | MCP content | tool result |
//! | --- | --- |
//! | text | text |
//! | image | image (the providers put a note in its place for models that take no images) |
//! | audio | a note naming its type and size |
//! | embedded text resource | its text, headed by its URI |
//! | embedded binary resource | a note naming its URI, type and size |
//! | resource link | a line naming it; its URI also goes to `artifacts` |
//! | no content, structured content | the structured content as JSON |
//!
//! `isError` makes the result an error the model reads. The raw result goes
//! to `details` (never sent to the model) with the server and tool names,
//! image data left out since the image is in the content already.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use roundtable_providers::{ImageContent, UserBlock};
use serde_json::{Value, json};

use super::naming::McpToolRef;
use crate::ToolResult;

/// The tool result for what `tool` returned.
pub(crate) fn tool_result(tool: &McpToolRef, result: &CallToolResult) -> ToolResult {
    let mut out = ToolResult::parts(Vec::with_capacity(result.content.len()));
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => out.parts.push(UserBlock::text(t.text.as_str())),
            ContentBlock::Image(image) => out.parts.push(UserBlock::Image(ImageContent {
                data: image.data.as_str().into(),
                mime_type: image.mime_type.as_str().into(),
            })),
            ContentBlock::Audio(audio) => out.parts.push(UserBlock::text(format!(
                "(audio omitted: {}, {})",
                audio.mime_type,
                decoded_size(&audio.data)
            ))),
            ContentBlock::Resource(embedded) => {
                out.parts.push(UserBlock::text(match &embedded.resource {
                    ResourceContents::TextResourceContents { uri, text, .. } => {
                        format!("[resource {uri}]\n{text}")
                    }
                    ResourceContents::BlobResourceContents {
                        uri,
                        mime_type,
                        blob,
                        ..
                    } => format!(
                        "(binary resource omitted: {uri}, {}, {})",
                        mime_type.as_deref().unwrap_or("unknown type"),
                        decoded_size(blob)
                    ),
                    // A resource kind newer than this client.
                    _ => String::from("(embedded resource omitted: unknown kind)"),
                }));
            }
            ContentBlock::ResourceLink(link) => {
                let mut line = format!("[resource link] {} <{}>", link.name, link.uri);
                if let Some(mime) = &link.mime_type {
                    line.push_str(&format!(" ({mime})"));
                }
                if let Some(description) = &link.description {
                    line.push_str(&format!(": {description}"));
                }
                out.parts.push(UserBlock::text(line));
                out.artifacts.push(link.uri.clone());
            }
            // A content type newer than this client.
            other => out.parts.push(UserBlock::text(format!(
                "(content omitted: {})",
                content_type(other)
            ))),
        }
    }
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        let text = serde_json::to_string_pretty(structured).unwrap_or_default();
        out.parts.push(UserBlock::text(text));
    }
    out.ok = result.is_error != Some(true);
    out.details = Some(json!({
        "server": &*tool.server,
        "tool": &*tool.tool,
        "result": raw_without_image_data(result),
    }));
    out
}

fn content_type(block: &ContentBlock) -> String {
    serde_json::to_value(block)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(String::from))
        .unwrap_or_else(|| String::from("unknown"))
}

/// The size of base64 `data` once decoded, in words.
fn decoded_size(data: &str) -> String {
    let bytes = data.trim_end_matches('=').len() * 3 / 4;
    if bytes >= 10 * 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

fn raw_without_image_data(result: &CallToolResult) -> Value {
    let mut raw = serde_json::to_value(result).unwrap_or(Value::Null);
    if let Some(Value::Array(blocks)) = raw.get_mut("content") {
        for block in blocks {
            if block.get("type").and_then(Value::as_str) == Some("image")
                && let Some(data) = block.get_mut("data")
            {
                let len = data.as_str().map_or(0, str::len);
                *data = Value::from(format!("({len} bytes of base64, sent as the image part)"));
            }
        }
    }
    raw
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{EmbeddedResource, Resource};

    fn tool() -> McpToolRef {
        McpToolRef {
            server: "srv".into(),
            tool: "t".into(),
        }
    }

    #[test]
    fn each_content_type_maps() {
        let mut link = Resource::new("file:///out.csv", "out.csv");
        link.mime_type = Some("text/csv".into());
        link.description = Some("the export".into());
        let result = CallToolResult::success(vec![
            ContentBlock::text("hello"),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::audio("A".repeat(16_000), "audio/wav"),
            ContentBlock::embedded_text("file:///notes.md", "# Notes"),
            ContentBlock::Resource(EmbeddedResource::new(
                ResourceContents::blob("AAAA", "file:///x.bin").with_mime_type("application/zip"),
            )),
            ContentBlock::resource_link(link),
        ]);
        let out = tool_result(&tool(), &result);
        assert!(out.ok);
        assert_eq!(out.parts.len(), 6);
        assert_eq!(out.parts[0], UserBlock::text("hello"));
        assert_eq!(
            out.parts[1],
            UserBlock::Image(ImageContent {
                data: "aGVsbG8=".into(),
                mime_type: "image/png".into()
            })
        );
        assert_eq!(
            out.parts[2],
            UserBlock::text("(audio omitted: audio/wav, 11 KiB)")
        );
        assert_eq!(
            out.parts[3],
            UserBlock::text("[resource file:///notes.md]\n# Notes")
        );
        assert_eq!(
            out.parts[4],
            UserBlock::text("(binary resource omitted: file:///x.bin, application/zip, 3 bytes)")
        );
        assert_eq!(
            out.parts[5],
            UserBlock::text("[resource link] out.csv <file:///out.csv> (text/csv): the export")
        );
        assert_eq!(out.artifacts, vec!["file:///out.csv".to_string()]);

        let details = out.details.unwrap();
        assert_eq!(details["server"], "srv");
        assert_eq!(details["tool"], "t");
        assert_eq!(details["result"]["content"][0]["text"], "hello");
        assert_eq!(
            details["result"]["content"][1]["data"],
            "(8 bytes of base64, sent as the image part)"
        );
        assert_eq!(
            details["result"]["content"][2]["data"]
                .as_str()
                .unwrap()
                .len(),
            16_000
        );
    }

    #[test]
    fn errors_and_structured_content() {
        let failed = CallToolResult::error(vec![ContentBlock::text("no such user")]);
        let out = tool_result(&tool(), &failed);
        assert!(!out.ok);
        assert_eq!(out.text_content(), "no such user");

        let structured = CallToolResult::structured(json!({"temperature": 21.5}));
        // Servers built on the SDK send the JSON as text too; one that sends
        // only the structured part still reaches the model.
        let mut bare = structured.clone();
        bare.content.clear();
        let out = tool_result(&tool(), &bare);
        assert!(out.ok);
        assert_eq!(out.text_content(), "{\n  \"temperature\": 21.5\n}");

        let out = tool_result(&tool(), &structured);
        assert_eq!(out.parts.len(), 1, "content wins when both are there");

        let empty = tool_result(&tool(), &CallToolResult::success(vec![]));
        assert!(empty.ok && empty.parts.is_empty());
    }
}
