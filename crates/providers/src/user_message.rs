//! [`UserMessage`]: what a user said, a plain string or a list of text and
//! image blocks ([`UserContent`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::content::{UserBlock, join_lines};

/// What a user said: a plain string or a list of text and image blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// The content.
    pub content: UserContent,
    /// Unix milliseconds.
    pub timestamp: i64,
}

impl UserMessage {
    /// A user message holding one plain string.
    pub fn text(text: impl Into<Arc<str>>, timestamp: i64) -> Self {
        Self {
            content: UserContent::Text(text.into()),
            timestamp,
        }
    }

    /// A user message made of blocks.
    pub fn blocks(blocks: Vec<UserBlock>, timestamp: i64) -> Self {
        Self {
            content: UserContent::Blocks(blocks),
            timestamp,
        }
    }
}

/// User content: pi-ai accepts either a bare string or a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// A bare string.
    Text(Arc<str>),
    /// Text and image blocks.
    Blocks(Vec<UserBlock>),
}

impl UserContent {
    /// The text of the content: the string, or the text blocks joined with
    /// newlines (images are left out).
    pub fn to_text(&self) -> String {
        match self {
            UserContent::Text(t) => t.to_string(),
            UserContent::Blocks(blocks) => join_lines(blocks.iter().filter_map(|b| match b {
                UserBlock::Text(t) => Some(&*t.text),
                UserBlock::Image(_) => None,
            })),
        }
    }
}
