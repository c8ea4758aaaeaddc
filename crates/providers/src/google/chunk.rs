//! The shape of a `GenerateContentResponse` chunk, read by serde_json with
//! its strings borrowed from the chunk's text wherever they hold no
//! escapes.

use serde::Deserialize;
use serde_json::Value;

use crate::usage::token_count;
use crate::wire::JsonStr;

/// One streamed chunk: the first candidate's new parts and finish reason,
/// the usage so far, or an error.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub(super) candidates: Option<Vec<Candidate<'a>>>,
    #[serde(default)]
    pub(super) usage_metadata: Option<UsageMetadata>,
    #[serde(default, borrow)]
    pub(super) response_id: Option<JsonStr<'a>>,
    #[serde(default)]
    pub(super) prompt_feedback: Option<Value>,
    #[serde(default)]
    pub(super) error: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Candidate<'a> {
    #[serde(default, borrow)]
    pub(super) content: Option<Content<'a>>,
    #[serde(default, borrow)]
    pub(super) finish_reason: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) finish_message: Option<JsonStr<'a>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Content<'a> {
    #[serde(default, borrow)]
    pub(super) parts: Option<Vec<Part<'a>>>,
}

/// A part: text (a thought when `thought` is true), a function call, or a
/// kind this adapter skips; any may carry a thought signature.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Part<'a> {
    #[serde(default, borrow)]
    pub(super) text: Option<JsonStr<'a>>,
    #[serde(default)]
    pub(super) thought: Option<bool>,
    #[serde(default, borrow)]
    pub(super) thought_signature: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) function_call: Option<FunctionCall<'a>>,
}

/// A function call, its arguments whole.
#[derive(Debug, Deserialize)]
pub(super) struct FunctionCall<'a> {
    #[serde(default, borrow)]
    pub(super) id: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) name: Option<JsonStr<'a>>,
    #[serde(default)]
    pub(super) args: Option<Value>,
}

/// Token counts: the prompt counts the cached tokens; candidates exclude
/// the thoughts.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UsageMetadata {
    #[serde(default, deserialize_with = "token_count")]
    pub(super) prompt_token_count: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) cached_content_token_count: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) candidates_token_count: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) thoughts_token_count: Option<u64>,
}

impl<'a> Chunk<'a> {
    /// Reads one chunk's JSON.
    pub(super) fn parse(data: &'a str) -> Result<Chunk<'a>, serde_json::Error> {
        serde_json::from_str(data)
    }
}
