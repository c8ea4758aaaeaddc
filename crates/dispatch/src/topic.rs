//! Topics: what an ambient bot cares about, matched without a model.

use std::sync::Arc;

use regex::Regex;

use crate::error::DispatchError;

/// A topic of a bot: a keyword or a regular expression over an event's text.
#[derive(Debug, Clone)]
pub enum Topic {
    /// A word or phrase, matched case-insensitively on word boundaries
    /// (`rust` matches "Rust is fun" but not "trust"). Stored lowercased.
    Keyword(Arc<str>),
    /// A regular expression, matched anywhere (use `(?i)` for case-insensitive).
    Pattern(Regex),
}

impl Topic {
    /// A keyword topic.
    pub fn keyword(word: &str) -> Self {
        Topic::Keyword(word.trim().to_lowercase().into())
    }

    /// A regular-expression topic.
    pub fn pattern(pattern: &str) -> Result<Self, DispatchError> {
        Regex::new(pattern)
            .map(Topic::Pattern)
            .map_err(|e| DispatchError::InvalidPattern {
                pattern: pattern.to_owned(),
                reason: e.to_string(),
            })
    }

    /// True when `text` is about this topic. `lowered` is `text.to_lowercase()`,
    /// passed in so that many keywords share one lowercasing.
    pub fn matches(&self, text: &str, lowered: &str) -> bool {
        match self {
            Topic::Keyword(word) => contains_word(lowered, word),
            Topic::Pattern(re) => re.is_match(text),
        }
    }
}

/// True when `word` occurs in `text` with no letter or digit right before or after.
fn contains_word(text: &str, word: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(pos) = text[from..].find(word) {
        let start = from + pos;
        let end = start + word.len();
        let before_ok = !text[..start]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
        let after_ok = !text[end..]
            .chars()
            .next()
            .is_some_and(char::is_alphanumeric);
        if before_ok && after_ok {
            return true;
        }
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(topic: &Topic, text: &str) -> bool {
        topic.matches(text, &text.to_lowercase())
    }

    #[test]
    fn keywords_match_whole_words_in_any_case() {
        let rust = Topic::keyword("Rust");
        assert!(hit(&rust, "rust is fun"));
        assert!(hit(&rust, "I like RUST."));
        assert!(hit(&rust, "(rust)"));
        assert!(!hit(&rust, "I trust you"));
        assert!(!hit(&rust, "rusty nails"));
        assert!(hit(&rust, "trust rust"));
        let phrase = Topic::keyword("release notes");
        assert!(hit(&phrase, "Where are the Release Notes?"));
        assert!(!hit(&phrase, "release of notes"));
        assert!(!hit(&Topic::keyword("  "), "anything"));
    }

    #[test]
    fn patterns_match_anywhere() {
        let re = Topic::pattern(r"(?i)\bv\d+\.\d+").unwrap();
        assert!(hit(&re, "is V1.2 out?"));
        assert!(!hit(&re, "version one"));
        assert!(matches!(
            Topic::pattern("("),
            Err(DispatchError::InvalidPattern { .. })
        ));
    }
}
