//! The shape of a Responses stream event, read by serde_json with its
//! strings borrowed from the event's text wherever they hold no escapes.
//! An item or a response is kept as its raw JSON and read when its event
//! needs it: a reasoning item is sent back exactly as it arrived.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::usage::token_count;
use crate::wire::JsonStr;

/// Every Responses stream event in one flat shape (the deltas, which are
/// most of a stream, read only `type` and `delta`).
#[derive(Debug, Deserialize)]
pub(super) struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    pub(super) kind: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) delta: Option<JsonStr<'a>>,
    /// The whole arguments of `response.function_call_arguments.done`.
    #[serde(default, borrow)]
    pub(super) arguments: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) item: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(super) response: Option<&'a RawValue>,
}

/// An output item (`reasoning`, `message`, `function_call`, or a kind this
/// adapter skips).
#[derive(Debug, Deserialize)]
pub(super) struct Item<'a> {
    #[serde(rename = "type", default, borrow)]
    pub(super) kind: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) id: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) call_id: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) name: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) arguments: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) phase: Option<JsonStr<'a>>,
    /// A reasoning item's summary parts.
    #[serde(default, borrow)]
    pub(super) summary: Option<Vec<Part<'a>>>,
    /// A message's content parts, or a reasoning item's reasoning text.
    #[serde(default, borrow)]
    pub(super) content: Option<Vec<Part<'a>>>,
}

/// A part of an item: `output_text`, `refusal`, `summary_text`,
/// `reasoning_text`.
#[derive(Debug, Deserialize)]
pub(super) struct Part<'a> {
    #[serde(rename = "type", default, borrow)]
    pub(super) kind: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) text: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) refusal: Option<JsonStr<'a>>,
}

impl Part<'_> {
    /// The part's text: its refusal for a `refusal` part.
    pub(super) fn text(&self) -> &str {
        match self.kind.as_deref() {
            Some("refusal") => self.refusal.as_deref().unwrap_or_default(),
            _ => self.text.as_deref().unwrap_or_default(),
        }
    }
}

/// The response of `response.created`, `.completed`, `.incomplete` and
/// `.failed`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Response<'a> {
    #[serde(default, borrow)]
    pub(super) id: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) status: Option<JsonStr<'a>>,
    #[serde(default)]
    pub(super) usage: Option<RawUsage>,
    #[serde(default, borrow)]
    pub(super) service_tier: Option<JsonStr<'a>>,
    #[serde(default)]
    pub(super) error: Option<Value>,
    #[serde(default)]
    pub(super) incomplete_details: Option<Value>,
}

/// A response's token counts: `input_tokens` counts the cached ones,
/// `output_tokens` the reasoning ones.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawUsage {
    #[serde(default, deserialize_with = "token_count")]
    pub(super) input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    pub(super) input_tokens_details: Option<InputDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct InputDetails {
    #[serde(default, deserialize_with = "token_count")]
    pub(super) cached_tokens: Option<u64>,
}

impl<'a> Event<'a> {
    /// Reads one event's JSON.
    pub(super) fn parse(data: &'a str) -> Result<Event<'a>, serde_json::Error> {
        serde_json::from_str(data)
    }
}

/// Reads an item's raw JSON.
pub(super) fn item(raw: &RawValue) -> Result<Item<'_>, serde_json::Error> {
    serde_json::from_str(raw.get())
}

/// Reads a response's raw JSON.
pub(super) fn response(raw: &RawValue) -> Result<Response<'_>, serde_json::Error> {
    serde_json::from_str(raw.get())
}
