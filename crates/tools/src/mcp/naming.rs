//! The names MCP tools get in a registry: `server__tool`, made safe for
//! every wire API, unique, and mapped back to the server's own names.
//!
//! Providers accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`; servers
//! name their tools freely (`get.item`, names in other scripts, long
//! names) and two servers may offer the same tool. So a name is the server
//! name and the tool name joined by `__`, every other character replaced by
//! `_`, and cut to 64 characters. A name that had to be cut, and every name
//! of a group that would otherwise be equal, ends in `_` and eight hex
//! digits of a hash of the original (server, tool) pair: stable from run to
//! run, whatever order the servers answer in.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The longest tool name the wire APIs accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// What joins a server's name to its tool's name.
pub const SERVER_TOOL_SEPARATOR: &str = "__";

const HASH_SUFFIX_LEN: usize = 9; // `_` and 8 hex digits

/// A tool as its server names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct McpToolRef {
    /// The server's name in the configuration.
    pub server: Arc<str>,
    /// The tool's name on that server.
    pub tool: Arc<str>,
}

/// Registry names for `tools`, in the same order: unique, at most 64
/// characters of `[a-zA-Z0-9_-]`.
pub(crate) fn registry_names(tools: &[McpToolRef]) -> Vec<Arc<str>> {
    let plain: Vec<(String, bool)> = tools
        .iter()
        .map(|t| {
            let joined = format!(
                "{}{SERVER_TOOL_SEPARATOR}{}",
                sanitise(&t.server),
                sanitise(&t.tool)
            );
            let too_long = joined.len() > MAX_TOOL_NAME_LEN;
            (joined, too_long)
        })
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (name, too_long) in &plain {
        if !too_long {
            *counts.entry(name.as_str()).or_default() += 1;
        }
    }
    let mut taken: HashSet<Arc<str>> = HashSet::new();
    tools
        .iter()
        .zip(&plain)
        .map(|(tool, (name, too_long))| {
            let mut candidate: Arc<str> =
                if *too_long || counts.get(name.as_str()).is_some_and(|&n| n > 1) {
                    Arc::from(with_hash_suffix(name, tool, 0))
                } else {
                    Arc::from(name.as_str())
                };
            // A suffixed name equal to some other tool's plain name: rehash
            // until free, so a registry never sees a duplicate.
            let mut salt = 0;
            while taken.contains(&candidate) {
                salt += 1;
                candidate = Arc::from(with_hash_suffix(name, tool, salt));
            }
            taken.insert(candidate.clone());
            candidate
        })
        .collect()
}

/// `text` with every character outside `[a-zA-Z0-9_-]` replaced by `_`
/// (an empty text becomes `_`).
pub(crate) fn sanitise(text: &str) -> String {
    let out: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        String::from("_")
    } else {
        out
    }
}

fn with_hash_suffix(name: &str, tool: &McpToolRef, salt: u32) -> String {
    let keep = name.len().min(MAX_TOOL_NAME_LEN - HASH_SUFFIX_LEN);
    let salt = salt.to_le_bytes();
    let salt: &[u8] = if salt == [0; 4] { &[] } else { &salt };
    let hash = fnv1a(&[tool.server.as_bytes(), &[0], tool.tool.as_bytes(), salt]);
    // The name is ASCII after sanitising, so any cut is a char boundary.
    format!(
        "{}_{:08x}",
        &name[..keep],
        hash as u32 ^ (hash >> 32) as u32
    )
}

/// FNV-1a, 64 bits: tiny, and unlike `std`'s hasher the same in every
/// build, which keeps names stable across versions of the host.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in *part {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(pairs: &[(&str, &str)]) -> Vec<McpToolRef> {
        pairs
            .iter()
            .map(|(s, t)| McpToolRef {
                server: (*s).into(),
                tool: (*t).into(),
            })
            .collect()
    }

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_TOOL_NAME_LEN
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_join_server_and_tool() {
        let names = registry_names(&refs(&[("github", "get_issue"), ("fs", "read-file")]));
        assert_eq!(&*names[0], "github__get_issue");
        assert_eq!(&*names[1], "fs__read-file");
    }

    #[test]
    fn other_characters_become_underscores() {
        let names = registry_names(&refs(&[("my server", "get.item/v2"), ("ü", "")]));
        assert_eq!(&*names[0], "my_server__get_item_v2");
        assert_eq!(&*names[1], "____");
        assert!(names.iter().all(|n| valid(n)));
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long_tool = "a".repeat(80);
        let tools = refs(&[("srv", &long_tool), ("srv", &format!("{long_tool}b"))]);
        let names = registry_names(&tools);
        assert!(
            names
                .iter()
                .all(|n| valid(n) && n.len() == MAX_TOOL_NAME_LEN)
        );
        assert_ne!(names[0], names[1], "same prefix, different tools");
        assert!(names[0].starts_with("srv__aaaa"));
        assert_eq!(registry_names(&tools), names, "stable");
    }

    #[test]
    fn collisions_suffix_every_member_whatever_the_order() {
        let tools = refs(&[
            ("my.server", "echo"),
            ("my_server", "echo"),
            ("my_server", "other"),
            ("a", "get.item"),
            ("a", "get_item"),
        ]);
        let names = registry_names(&tools);
        assert_eq!(&*names[2], "my_server__other", "no collision, no suffix");
        for i in [0, 1, 3, 4] {
            assert!(valid(&names[i]));
            assert_eq!(
                names[i].len(),
                names[i].rfind('_').unwrap() + 9,
                "{}",
                names[i]
            );
        }
        assert!(names[0].starts_with("my_server__echo_"));
        assert_ne!(names[0], names[1]);
        assert_ne!(names[3], names[4]);

        let mut reversed = tools.clone();
        reversed.reverse();
        let mut again = registry_names(&reversed);
        again.reverse();
        assert_eq!(again, names, "the same names in any order");
    }

    #[test]
    fn a_suffixed_name_never_takes_another_tools_plain_name() {
        let first = registry_names(&refs(&[("s", "t"), ("s", "t")]));
        let taken = first[0].strip_prefix("s__").unwrap().to_string();
        // A third tool literally named like the first one's suffixed name.
        let names = registry_names(&refs(&[("s", &taken), ("s", "t"), ("s", "t")]));
        let unique: HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), 3, "{names:?}");
    }
}
