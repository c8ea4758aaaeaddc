//! The [`ToolKind`] of an MCP tool, which decides its approvals and whether
//! it may run beside other calls.
//!
//! A server's annotations are hints written by whoever wrote the server, so
//! they count only when the configuration trusts them:
//!
//! | trust | annotations | kind |
//! | --- | --- | --- |
//! | `untrusted` (default) | any | `exec` |
//! | `trust_annotations` | `readOnlyHint` and `openWorldHint: false` | `read` |
//! | `trust_annotations` | `readOnlyHint`, open world (the default) | `network` |
//! | `trust_annotations` | anything else | `write` |
//!
//! A per-tool override in the configuration wins over both.

use rmcp::model::ToolAnnotations;

use super::config::{McpToolOverride, McpTrust};
use crate::ToolKind;

/// The kind of a tool with these `annotations` under `trust`, unless
/// `override_` names one.
pub(crate) fn tool_kind(
    trust: McpTrust,
    annotations: Option<&ToolAnnotations>,
    override_: Option<&McpToolOverride>,
) -> ToolKind {
    if let Some(kind) = override_.and_then(|o| o.kind) {
        return kind;
    }
    match trust {
        McpTrust::Untrusted => ToolKind::Exec,
        McpTrust::TrustAnnotations => {
            // Defaults from the specification: not read-only, open world.
            let read_only = annotations.and_then(|a| a.read_only_hint).unwrap_or(false);
            let open_world = annotations.and_then(|a| a.open_world_hint).unwrap_or(true);
            match (read_only, open_world) {
                (true, false) => ToolKind::Read,
                (true, true) => ToolKind::Network,
                (false, _) => ToolKind::Write,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints(read_only: Option<bool>, open_world: Option<bool>) -> ToolAnnotations {
        ToolAnnotations::from_raw(None, read_only, Some(false), None, open_world)
    }

    #[test]
    fn untrusted_servers_run_everything_as_exec() {
        let read = hints(Some(true), Some(false));
        assert_eq!(
            tool_kind(McpTrust::Untrusted, Some(&read), None),
            ToolKind::Exec
        );
        assert_eq!(tool_kind(McpTrust::Untrusted, None, None), ToolKind::Exec);
    }

    #[test]
    fn trusted_annotations_decide() {
        let t = McpTrust::TrustAnnotations;
        let kind = |a: Option<ToolAnnotations>| tool_kind(t, a.as_ref(), None);
        assert_eq!(kind(Some(hints(Some(true), Some(false)))), ToolKind::Read);
        assert_eq!(kind(Some(hints(Some(true), Some(true)))), ToolKind::Network);
        assert_eq!(kind(Some(hints(Some(true), None))), ToolKind::Network);
        assert_eq!(kind(Some(hints(Some(false), Some(false)))), ToolKind::Write);
        assert_eq!(kind(Some(hints(None, Some(false)))), ToolKind::Write);
        assert_eq!(kind(None), ToolKind::Write);
    }

    #[test]
    fn overrides_win() {
        let o = McpToolOverride {
            kind: Some(ToolKind::Read),
            require_approval: None,
        };
        assert_eq!(
            tool_kind(McpTrust::Untrusted, None, Some(&o)),
            ToolKind::Read
        );
        let no_kind = McpToolOverride {
            kind: None,
            require_approval: Some(true),
        };
        assert_eq!(
            tool_kind(McpTrust::Untrusted, None, Some(&no_kind)),
            ToolKind::Exec
        );
    }
}
