//! The shape of a `chat.completion.chunk`, read by serde_json with its
//! strings borrowed from the chunk's text wherever they hold no escapes.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::usage::token_count;
use crate::wire::JsonStr;

/// A `chat.completion.chunk`. Fields most chunks lack are boxed: the
/// chunk is moved by value a few times while it is parsed, so its size
/// counts.
#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub(super) id: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) model: Option<JsonStr<'a>>,
    /// The first choice (a stream asks for one; others are skipped).
    #[serde(default, borrow)]
    pub(super) choices: Option<First<Choice<'a>>>,
    #[serde(default)]
    pub(super) usage: Option<Box<RawUsage>>,
    #[serde(default)]
    pub(super) error: Option<Value>,
}

/// A choice. Its delta is boxed: serde moves each value it reads up
/// through every level of the chunk, and a boxed delta moves as a pointer.
#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct Choice<'a> {
    #[serde(default, borrow)]
    pub(super) delta: Option<Box<Delta<'a>>>,
    #[serde(default, borrow)]
    pub(super) finish_reason: Option<JsonStr<'a>>,
    #[serde(default)]
    pub(super) usage: Option<Box<RawUsage>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(default, borrow)]
    pub(super) content: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) reasoning_content: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) reasoning: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) reasoning_text: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) tool_calls: Option<Vec<ToolDelta<'a>>>,
    #[serde(default)]
    pub(super) reasoning_details: Option<Vec<Value>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct ToolDelta<'a> {
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default, borrow)]
    pub(super) id: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) function: Option<FunctionDelta<'a>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct FunctionDelta<'a> {
    #[serde(default, borrow)]
    pub(super) name: Option<JsonStr<'a>>,
    #[serde(default, borrow)]
    pub(super) arguments: Option<Arguments<'a>>,
}

/// The first element of a JSON array, the others skipped unparsed: the
/// chunk's `choices` without a `Vec` per chunk.
#[derive(Debug, PartialEq)]
pub(super) struct First<T>(pub(super) Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FirstVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for FirstVisitor<T> {
            type Value = First<T>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<T>, A::Error> {
                let first = seq.next_element()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }

        deserializer.deserialize_seq(FirstVisitor(PhantomData))
    }
}

/// A tool call's `arguments`: a fragment of JSON text (borrowed from the
/// chunk unless it holds escapes), or, from some servers, the whole
/// arguments as an object.
#[derive(Debug, PartialEq)]
pub(super) enum Arguments<'a> {
    Fragment(Cow<'a, str>),
    Object(Map<String, Value>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ArgumentsVisitor;

        impl<'de> Visitor<'de> for ArgumentsVisitor {
            type Value = Arguments<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("tool call arguments")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Arguments::Fragment(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Arguments::Fragment(Cow::Owned(v.to_string())))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Arguments::Fragment(Cow::Owned(v)))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Map::deserialize(de::value::MapAccessDeserializer::new(map)).map(Arguments::Object)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Arguments::Other)
            }

            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Arguments::Other)
            }

            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Arguments::Other)
            }

            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Arguments::Other)
            }

            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Arguments::Other)
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Arguments::Other)
            }
        }

        deserializer.deserialize_any(ArgumentsVisitor)
    }
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct RawUsage {
    #[serde(default, deserialize_with = "token_count")]
    pub(super) prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<PromptDetails>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct PromptDetails {
    #[serde(default, deserialize_with = "token_count")]
    pub(super) cached_tokens: Option<u64>,
    #[serde(default, deserialize_with = "token_count")]
    pub(super) cache_write_tokens: Option<u64>,
}

impl<'a> Chunk<'a> {
    /// Reads one chunk's JSON.
    pub(super) fn parse(data: &'a str) -> Result<Chunk<'a>, serde_json::Error> {
        serde_json::from_str(data)
    }
}
