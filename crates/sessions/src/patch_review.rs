//! `patch_review: "auto"`: every patch is previewed before it applies.
//!
//! The session's `apply_patch` is wrapped: the diff is first kept as the
//! turn's artifact `apply_patch-<call id>-preview.patch`, then the patch
//! applies as usual, and the result's details carry the review (`mode`,
//! `preview`, `diff`, `applied`). The event view turns those details into a
//! `patch_reviewed` event, so the review, like every event, comes from a
//! stored entry. No human waits: that is `"request"`, which gates
//! `apply_patch` behind an approval instead.

use std::sync::Arc;

use async_trait::async_trait;
use roundtable_providers::JsonObject;
use roundtable_tools::{ArtifactName, Tool, ToolContext, ToolDefinition, ToolError, ToolResult};
use serde_json::{Value, json};

/// The name of the tool reviewed.
pub(crate) const APPLY_PATCH: &str = "apply_patch";

/// The key of a tool result's details that holds the review.
pub(crate) const PATCH_REVIEW: &str = "patch_review";

/// The most bytes of a diff the review's event carries; the preview
/// artifact keeps the whole of it.
pub(crate) const MAX_EVENT_DIFF: usize = 64 * 1024;

/// `apply_patch`, previewed before it applies (see the module's doc).
pub(crate) struct AutoReviewedPatch {
    inner: Arc<dyn Tool>,
}

impl AutoReviewedPatch {
    /// `tools` with their `apply_patch` wrapped (the others as they are).
    pub(crate) fn wrap_in(tools: Vec<Arc<dyn Tool>>) -> Vec<Arc<dyn Tool>> {
        tools
            .into_iter()
            .map(|tool| {
                if tool.definition().name() == APPLY_PATCH {
                    Arc::new(Self { inner: tool }) as Arc<dyn Tool>
                } else {
                    tool
                }
            })
            .collect()
    }
}

#[async_trait]
impl Tool for AutoReviewedPatch {
    fn definition(&self) -> ToolDefinition {
        self.inner.definition()
    }

    async fn invoke(&self, ctx: ToolContext, args: JsonObject) -> Result<ToolResult, ToolError> {
        let diff = args
            .get("patch")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let preview = keep_preview(&ctx, &diff).await;
        let mut result = self.inner.invoke(ctx, args).await?;
        let review = review_of(&diff, preview, result.ok);
        let mut details = match result.details.take() {
            Some(Value::Object(fields)) => fields,
            Some(other) => serde_json::Map::from_iter([("result".to_string(), other)]),
            None => serde_json::Map::new(),
        };
        details.insert(PATCH_REVIEW.to_string(), review);
        result.details = Some(Value::Object(details));
        Ok(result)
    }
}

/// Keeps `diff` as the call's preview artifact; its reference, when the
/// host keeps artifacts and the store took it.
async fn keep_preview(ctx: &ToolContext, diff: &str) -> Option<String> {
    let artifacts = ctx.artifacts()?;
    let name = preview_name(&ctx.call_id)?;
    match artifacts.store(&name, diff.as_bytes().to_vec()).await {
        Ok(reference) => Some(reference),
        Err(error) => {
            tracing::warn!(%error, "the patch preview was not kept");
            None
        }
    }
}

/// `apply_patch-<call id>-preview.patch`, the call id's characters a name
/// cannot hold replaced by `_`.
fn preview_name(call_id: &str) -> Option<ArtifactName> {
    let id: String = call_id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    ArtifactName::new(format!("{APPLY_PATCH}-{id}-preview.patch"))
        .or_else(|_| ArtifactName::new(format!("{APPLY_PATCH}-preview.patch")))
        .ok()
}

/// The review the result's details carry: the diff (cut at a character
/// boundary past [`MAX_EVENT_DIFF`]), where the whole preview is, and
/// whether the patch applied.
fn review_of(diff: &str, preview: Option<String>, applied: bool) -> Value {
    let mut end = diff.len().min(MAX_EVENT_DIFF);
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    json!({
        "mode": "auto",
        "diff": &diff[..end],
        "diff_truncated": end < diff.len(),
        "preview": preview,
        "applied": applied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_diff_is_cut_at_a_character_boundary() {
        let diff = "é".repeat(MAX_EVENT_DIFF);
        let review = review_of(&diff, None, true);
        let shown = review["diff"].as_str().unwrap();
        assert!(shown.len() <= MAX_EVENT_DIFF);
        assert_eq!(review["diff_truncated"], true);
        assert_eq!(review_of("x", None, false)["diff_truncated"], false);
    }

    #[test]
    fn preview_names_hold_only_name_characters() {
        assert_eq!(
            preview_name("call/1").unwrap().as_str(),
            "apply_patch-call_1-preview.patch"
        );
    }
}
