//! The shape of an Anthropic stream event, read by serde_json with its
//! strings borrowed from the event's text wherever they hold no escapes.

use serde::Deserialize;
use serde_json::Value;

use crate::usage::token_count;
use crate::wire::JsonStr;

/// Every Anthropic stream event in one flat shape: parsing into it is a
/// single pass (an internally tagged enum would buffer each event first).
/// Its strings borrow from the event's data unless they hold escapes; its
/// large parts are boxed, as serde moves each value it reads up through
/// every level of the event.
#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct Event<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: JsonStr<'a>,
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default)]
    pub(super) message: Option<Box<MessageStart>>,
    #[serde(default)]
    pub(super) content_block: Option<Value>,
    #[serde(default, borrow)]
    pub(super) delta: Option<Box<Delta<'a>>>,
    #[serde(default)]
    pub(super) usage: Option<Box<RawUsage>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct MessageStart {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) usage: Option<RawUsage>,
}

/// A `content_block_delta` or `message_delta` body.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    pub(super) kind: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) text: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) thinking: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) signature: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) partial_json: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) stop_reason: Option<JsonStr<'a>>,
}

#[derive(Debug, Default, PartialEq, Deserialize)]
pub(super) struct RawUsage {
    #[serde(default, deserialize_with = "token_count")]
    pub(super) input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) cache_read_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) cache_creation_input_tokens: Option<u64>,
}

impl<'a> Event<'a> {
    /// Reads one event's JSON.
    pub(super) fn parse(data: &'a str) -> Result<Event<'a>, serde_json::Error> {
        serde_json::from_str(data)
    }
}
