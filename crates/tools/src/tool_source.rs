//! [`ToolSource`]: tools whose list may change while a host runs (the
//! tools of MCP servers), and [`ToolsChange`], what changed between two
//! turns.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{Tool, ToolRegistry};

/// A set of tools a host hands a runner beside its fixed ones, whose list
/// may change between turns.
///
/// A runner never reads a source in the middle of a turn: at the start of
/// each turn it calls [`refresh`](Self::refresh), and when the
/// [`generation`](Self::generation) moved since the registry it holds was
/// built, it builds a new one from [`tools`](Self::tools) (see
/// [`LiveTools`](crate::LiveTools)). So a turn keeps the tools it started
/// with, and a registry is rebuilt only when something changed.
///
/// `McpToolset` (feature `mcp`) is the source whose servers announce new
/// tools; a [`ToolRegistry`] is a source that never changes.
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// The tools on offer now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// A number that changes whenever [`tools`](Self::tools) changes
    /// (constant for a fixed set).
    fn generation(&self) -> u64;

    /// Brings the list up to date when it may have changed (an MCP server
    /// said its list changed): called at turn boundaries only.
    async fn refresh(&self) {}
}

#[async_trait]
impl ToolSource for ToolRegistry {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.definitions()
            .filter_map(|d| self.get(d.name()).cloned())
            .collect()
    }

    fn generation(&self) -> u64 {
        0
    }
}

/// What changed in the tools on offer between two turns: names added,
/// removed, and kept with a new definition (description, schema, kind).
/// Each list in the order of the tools it comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolsChange {
    /// Tools that are new.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<Arc<str>>,
    /// Tools that are gone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<Arc<str>>,
    /// Tools whose definition changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<Arc<str>>,
}

impl ToolsChange {
    /// The change from `before` to `after`, each a list of (name, what
    /// defines the tool) pairs: a definition, or a digest of one.
    pub fn between<'a, F: PartialEq>(
        before: impl IntoIterator<Item = (&'a str, F)>,
        after: impl IntoIterator<Item = (&'a str, F)>,
    ) -> Self {
        let before: Vec<(&str, F)> = before.into_iter().collect();
        let after: Vec<(&str, F)> = after.into_iter().collect();
        let old: HashMap<&str, &F> = before.iter().map(|(n, f)| (*n, f)).collect();
        let new: HashMap<&str, &F> = after.iter().map(|(n, f)| (*n, f)).collect();
        let mut change = Self::default();
        for (name, definition) in &after {
            match old.get(name) {
                None => change.added.push(Arc::from(*name)),
                Some(was) if *was != definition => change.changed.push(Arc::from(*name)),
                Some(_) => {}
            }
        }
        change.removed = before
            .iter()
            .filter(|(name, _)| !new.contains_key(name))
            .map(|(name, _)| Arc::from(*name))
            .collect();
        change
    }

    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_lists_added_removed_and_changed_names_in_order() {
        let before = [("a", 1), ("b", 2), ("c", 3)];
        let after = [("c", 3), ("b", 20), ("d", 4), ("e", 5)];
        let change = ToolsChange::between(before, after);
        let names = |v: &[Arc<str>]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&change.added), ["d", "e"]);
        assert_eq!(names(&change.removed), ["a"]);
        assert_eq!(names(&change.changed), ["b"]);
        assert!(!change.is_empty());
        assert!(ToolsChange::between(after, after).is_empty());
        assert_eq!(
            serde_json::to_value(ToolsChange::between([("a", 1)], [])).unwrap(),
            serde_json::json!({"removed": ["a"]})
        );
    }
}
