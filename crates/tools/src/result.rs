//! What a tool call produced, and its conversion into a tool-result message.

use std::sync::Arc;

use roundtable_providers::{ImageContent, ToolCall, ToolResultMessage, UserBlock};
use serde::{Deserialize, Serialize};

/// The outcome of a tool call that the model gets to read.
///
/// Failures the model can recover from (bad arguments, a missing file, a
/// command that exits non-zero) are results with `ok == false` and an
/// [`error`](Self::error) text; failures that must end the turn are
/// [`ToolError`](crate::ToolError)s instead.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolResult {
    /// True when the tool did what was asked.
    pub ok: bool,
    /// Content for the model: text and images.
    pub parts: Vec<UserBlock>,
    /// Paths or references to things the call produced (files written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// Why the call failed, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Structured details for hosts, never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl ToolResult {
    /// A successful result holding one text part.
    pub fn text(text: impl Into<Arc<str>>) -> Self {
        Self {
            ok: true,
            parts: vec![UserBlock::text(text)],
            ..Self::default()
        }
    }

    /// A successful result with the given parts.
    pub fn parts(parts: Vec<UserBlock>) -> Self {
        Self {
            ok: true,
            parts,
            ..Self::default()
        }
    }

    /// A successful result holding one image.
    pub fn image(data: impl Into<Arc<str>>, mime_type: impl Into<Arc<str>>) -> Self {
        Self::parts(vec![UserBlock::Image(ImageContent {
            data: data.into(),
            mime_type: mime_type.into(),
        })])
    }

    /// A failed result the model reads: `error` explains what went wrong.
    pub fn error(error: impl Into<String>) -> Self {
        Self {
            ok: false,
            error: Some(error.into()),
            ..Self::default()
        }
    }

    /// The result of a call a human refused (or a hook blocked): the tool did
    /// not run. Worded as pi-agent-core words it.
    pub fn denied(reason: Option<&str>) -> Self {
        match reason {
            Some(reason) if !reason.trim().is_empty() => {
                Self::error(format!("Tool execution was blocked: {reason}"))
            }
            _ => Self::error("Tool execution was blocked"),
        }
    }

    /// The result of a call that was cancelled, for a turn loop that must
    /// still answer every tool call.
    pub fn cancelled() -> Self {
        Self::error("Tool call was cancelled")
    }

    /// Marks the result failed with the given explanation, keeping its parts
    /// (for example a command's output next to "exit status 1").
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.ok = false;
        self.error = Some(error.into());
        self
    }

    /// Adds an artifact reference.
    pub fn with_artifact(mut self, artifact: impl Into<String>) -> Self {
        self.artifacts.push(artifact.into());
        self
    }

    /// Sets the host-only details.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    /// All text parts joined by newlines (the error text first, if any).
    pub fn text_content(&self) -> String {
        let mut out: Vec<&str> = Vec::new();
        if let Some(error) = &self.error {
            out.push(error);
        }
        for part in &self.parts {
            if let UserBlock::Text(t) = part {
                out.push(&t.text);
            }
        }
        out.join("\n")
    }

    /// The content blocks the model sees: the error text first when the call
    /// failed, then the parts; never empty (an empty success reads "(no output)").
    pub fn content_blocks(&self) -> Vec<UserBlock> {
        let mut content = Vec::with_capacity(self.parts.len() + 1);
        if let Some(error) = &self.error {
            content.push(UserBlock::text(error.as_str()));
        }
        content.extend(self.parts.iter().cloned());
        if content.is_empty() {
            content.push(UserBlock::text(if self.ok {
                "(no output)"
            } else {
                "(tool failed without a message)"
            }));
        }
        content
    }

    /// The tool-result message answering `call`, stamped with `timestamp`
    /// (Unix milliseconds). `isError` is `!ok`; `details` carry over.
    pub fn into_message(self, call: &ToolCall, timestamp: i64) -> ToolResultMessage {
        if self.error.is_some() || self.parts.is_empty() {
            return self.to_message(call.id.clone(), call.name.clone(), timestamp);
        }
        // A successful result with output: its parts are the content as
        // they are (what `content_blocks` would copy).
        ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: self.parts,
            details: self.details,
            is_error: !self.ok,
            timestamp,
        }
    }

    /// Like [`into_message`](Self::into_message), from a call id and tool name.
    pub fn to_message(
        &self,
        tool_call_id: Arc<str>,
        tool_name: Arc<str>,
        timestamp: i64,
    ) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id,
            tool_name,
            content: self.content_blocks(),
            details: self.details.clone(),
            is_error: !self.ok,
            timestamp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_result_becomes_an_error_message_with_the_text_first() {
        let call = ToolCall::new("call_1", "shell", serde_json::Map::new());
        let result = ToolResult::text("output").with_error("exit status 2");
        let msg = result.into_message(&call, 7);
        assert!(msg.is_error);
        assert_eq!(&*msg.tool_call_id, "call_1");
        assert_eq!(&*msg.tool_name, "shell");
        assert_eq!(
            msg.content,
            vec![UserBlock::text("exit status 2"), UserBlock::text("output")]
        );
        let json = serde_json::to_value(&msg).unwrap();
        assert_eq!(json["isError"], true);
        assert_eq!(json["toolCallId"], "call_1");
    }

    #[test]
    fn denied_and_cancelled_results() {
        assert_eq!(
            ToolResult::denied(Some("not on main")).text_content(),
            "Tool execution was blocked: not on main"
        );
        assert_eq!(
            ToolResult::denied(None).text_content(),
            "Tool execution was blocked"
        );
        assert!(!ToolResult::cancelled().ok);
    }

    #[test]
    fn empty_success_is_never_empty_content() {
        let call = ToolCall::new("c", "t", serde_json::Map::new());
        let msg = ToolResult::parts(vec![]).into_message(&call, 0);
        assert!(!msg.is_error);
        assert_eq!(msg.content, vec![UserBlock::text("(no output)")]);
    }
}
