//! `ThinkingLevel`: how hard a reasoning model should think, a word every
//! layer shares (models list the levels they support, options ask for one,
//! hosts read one from configuration).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How hard a reasoning model should think.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No reasoning.
    #[default]
    Off,
    /// The least reasoning the model offers.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// More than high, on models that offer it.
    Xhigh,
}

impl ThinkingLevel {
    /// Every level, from `off` to `xhigh`.
    pub const ALL: [ThinkingLevel; 6] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
    ];

    /// The level's name as written in JSON and on command lines.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
        }
    }
}

impl fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A thinking level name that is not one of `off|minimal|low|medium|high|xhigh`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown thinking level {0:?} (expected off, minimal, low, medium, high or xhigh)")]
pub struct UnknownThinkingLevel(pub String);

impl FromStr for ThinkingLevel {
    type Err = UnknownThinkingLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ThinkingLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| UnknownThinkingLevel(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_levels_parse_and_print() {
        for level in ThinkingLevel::ALL {
            assert_eq!(level.as_str().parse::<ThinkingLevel>().unwrap(), level);
        }
        assert!("huge".parse::<ThinkingLevel>().is_err());
        assert_eq!(
            serde_json::to_string(&ThinkingLevel::Xhigh).unwrap(),
            "\"xhigh\""
        );
    }
}
