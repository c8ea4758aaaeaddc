//! The shape of a `chat.completion.chunk`, and how one is read: the
//! common shapes (a text or reasoning delta, a tool-call fragment, a finish)
//! by the [`JsonScan`] fast path, anything else by serde_json, which gives
//! the same [`Chunk`] or the error.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::usage::token_count;
use crate::wire::{JsonScan, JsonStr, SeenKeys, fast_path_on};

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

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct Choice<'a> {
    #[serde(default, borrow)]
    pub(super) delta: Option<Delta<'a>>,
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
    /// Reads one chunk's JSON: by the fast path when it is sure of the
    /// shape, else by serde_json.
    pub(super) fn parse(data: &'a str) -> Result<Chunk<'a>, serde_json::Error> {
        let mut chunk = Chunk {
            id: None,
            model: None,
            choices: None,
            usage: None,
            error: None,
        };
        if fast_path_on() && scan_chunk(data, &mut chunk).is_some() {
            return Ok(chunk);
        }
        serde_json::from_str(data)
    }
}

/// The fast path: a chunk of strings, integers and nulls whose only nested
/// values are one choice, its delta and its tool-call fragments. `None` for
/// anything else (usage, errors, reasoning details, a second choice, a
/// nested value under an unknown key, any doubt): serde_json then reads it,
/// and what this filled of `chunk` is dropped.
fn scan_chunk<'a>(data: &'a str, chunk: &mut Chunk<'a>) -> Option<()> {
    let mut scan = JsonScan::new(data);
    let mut seen = SeenKeys::default();
    scan.object(|s, key| match key {
        "id" => {
            seen.once(0)?;
            chunk.id = s.optional_string()?;
            Some(())
        }
        "model" => {
            seen.once(1)?;
            chunk.model = s.optional_string()?;
            Some(())
        }
        "choices" => {
            seen.once(2)?;
            if !s.null() {
                scan_first_choice(s, &mut chunk.choices.insert(First(None)).0)?;
            }
            Some(())
        }
        "usage" => {
            seen.once(3)?;
            s.only_null()
        }
        "error" => {
            seen.once(4)?;
            s.only_null()
        }
        _ => s.skip_scalar(),
    })?;
    scan.end()
}

/// `choices` with at most one element (what a stream asks for). The
/// readers below fill their value in place: a chunk is large, and moving
/// it up through each level costs more than reading it.
fn scan_first_choice<'a>(s: &mut JsonScan<'a>, first: &mut Option<Choice<'a>>) -> Option<()> {
    s.array(|s| {
        if first.is_some() {
            return None;
        }
        scan_choice(
            s,
            first.insert(Choice {
                delta: None,
                finish_reason: None,
                usage: None,
            }),
        )
    })
}

fn scan_choice<'a>(s: &mut JsonScan<'a>, choice: &mut Choice<'a>) -> Option<()> {
    let mut seen = SeenKeys::default();
    s.object(|s, key| match key {
        "delta" => {
            seen.once(0)?;
            if !s.null() {
                scan_delta(
                    s,
                    choice.delta.insert(Delta {
                        content: None,
                        reasoning_content: None,
                        reasoning: None,
                        reasoning_text: None,
                        tool_calls: None,
                        reasoning_details: None,
                    }),
                )?;
            }
            Some(())
        }
        "finish_reason" => {
            seen.once(1)?;
            choice.finish_reason = s.optional_string()?;
            Some(())
        }
        "usage" => {
            seen.once(2)?;
            s.only_null()
        }
        _ => s.skip_scalar(),
    })
}

fn scan_delta<'a>(s: &mut JsonScan<'a>, delta: &mut Delta<'a>) -> Option<()> {
    let mut seen = SeenKeys::default();
    s.object(|s, key| match key {
        "content" => {
            seen.once(0)?;
            delta.content = s.optional_string()?;
            Some(())
        }
        "reasoning_content" => {
            seen.once(1)?;
            delta.reasoning_content = s.optional_string()?;
            Some(())
        }
        "reasoning" => {
            seen.once(2)?;
            delta.reasoning = s.optional_string()?;
            Some(())
        }
        "reasoning_text" => {
            seen.once(3)?;
            delta.reasoning_text = s.optional_string()?;
            Some(())
        }
        "tool_calls" => {
            seen.once(4)?;
            if !s.null() {
                let mut calls = Vec::new();
                s.array(|s| {
                    calls.push(scan_tool_delta(s)?);
                    Some(())
                })?;
                delta.tool_calls = Some(calls);
            }
            Some(())
        }
        "reasoning_details" => {
            seen.once(5)?;
            s.only_null()
        }
        _ => s.skip_scalar(),
    })
}

fn scan_tool_delta<'a>(s: &mut JsonScan<'a>) -> Option<ToolDelta<'a>> {
    let mut call = ToolDelta {
        index: None,
        id: None,
        function: None,
    };
    let mut seen = SeenKeys::default();
    s.object(|s, key| match key {
        "index" => {
            seen.once(0)?;
            call.index = s.optional_u64()?;
            Some(())
        }
        "id" => {
            seen.once(1)?;
            call.id = s.optional_string()?;
            Some(())
        }
        "function" => {
            seen.once(2)?;
            if !s.null() {
                call.function = Some(scan_function(s)?);
            }
            Some(())
        }
        _ => s.skip_scalar(),
    })?;
    Some(call)
}

fn scan_function<'a>(s: &mut JsonScan<'a>) -> Option<FunctionDelta<'a>> {
    let mut function = FunctionDelta {
        name: None,
        arguments: None,
    };
    let mut seen = SeenKeys::default();
    s.object(|s, key| match key {
        "name" => {
            seen.once(0)?;
            function.name = s.optional_string()?;
            Some(())
        }
        "arguments" => {
            seen.once(1)?;
            // Arguments as an object (some servers) take the serde path.
            function.arguments = s
                .optional_string()?
                .map(|text| Arguments::Fragment(text.into_cow()));
            Some(())
        }
        _ => s.skip_scalar(),
    })?;
    Some(function)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sse::SseParser;

    /// Reads `data` by both paths; whenever the fast path takes it, it must
    /// read what serde_json reads. True when the fast path took it.
    fn same_by_both_paths(data: &str) -> bool {
        let data = data.trim();
        let fast = scan(data);
        if let Some(fast) = &fast {
            let serde = serde_json::from_str::<Chunk>(data);
            assert_eq!(serde.as_ref().ok(), Some(fast), "{data}");
        }
        fast.is_some()
    }

    /// The chunk the fast path reads, if it takes it.
    fn scan(data: &str) -> Option<Chunk<'_>> {
        let mut chunk = Chunk {
            id: None,
            model: None,
            choices: None,
            usage: None,
            error: None,
        };
        scan_chunk(data, &mut chunk).map(|()| chunk)
    }

    /// The `data:` of every event of every OpenAI capture.
    fn capture_chunks() -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openai");
        let mut chunks = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let mut sse = SseParser::default();
            sse.feed(&std::fs::read(entry.unwrap().path()).unwrap());
            sse.finish();
            chunks.extend(sse.frames().map(|f| f.data.to_string()));
        }
        chunks
    }

    #[test]
    fn every_capture_chunk_reads_the_same_by_both_paths() {
        let chunks = capture_chunks();
        let fast = chunks.iter().filter(|c| same_by_both_paths(c)).count();
        // The others are `[DONE]`, usage, errors and the malformed ones.
        assert!(chunks.len() > 100, "{}", chunks.len());
        assert!(fast * 2 > chunks.len(), "{fast} of {}", chunks.len());
    }

    #[test]
    fn the_common_shapes_take_the_fast_path() {
        for data in [
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"delta":{"content":"say \"hi\"\\ \/ \n\u00e9\ud83d\ude00"},"index":0}],"model":"m","id":"c"}"#,
            " {\n \"id\" : \"c\" ,\t\"choices\" : [ { \"delta\" : { \"content\" : \"x\" } } ] } ",
            r#"{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hm"}}],"service_tier":"default","obfuscation":"x","n":-1,"ok":true}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"a\": \"\\u00e9\"}"},"index":1}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":null,"id":null}"#,
            "{}",
        ] {
            assert!(same_by_both_paths(data), "{data}");
        }
    }

    #[test]
    fn anything_else_takes_serde() {
        for data in [
            r#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
            r#"{"error":{"message":"overloaded"}}"#,
            r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"},"logprobs":{"content":[]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.encrypted"}]}}]}"#,
            r#"{"id":"a","id":"b"}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"\ud83d"}}]}"#,
            r#"{"c\u0068oices":[]}"#,
            r#"{"created":1.5}"#,
            r#"{"choices":[{"index":0,}]}"#,
            r#"{"id":"c"} {"id":"d"}"#,
            r#"{"id":7}"#,
            "[]",
            "",
        ] {
            assert!(scan(data).is_none(), "{data}");
        }
    }

    /// Edits to a chunk: JSON's own characters, inserted or overwritten.
    fn edit() -> impl Strategy<Value = (f64, usize, char)> {
        (
            0.0f64..1.0,
            0usize..3,
            prop::sample::select(vec![
                '"', '\\', '{', '}', '[', ']', ',', ':', ' ', 'n', 'u', '0', '1', '-', '.', 'e',
                'x', '\t', '\u{1}', 'é',
            ]),
        )
    }

    proptest! {
        #[test]
        fn an_edited_chunk_reads_the_same_by_both_paths_or_falls_back(
            which in 0usize..4,
            edits in prop::collection::vec(edit(), 1..4),
        ) {
            let samples = [
                r#"{"id":"c","model":"m","created":17,"choices":[{"index":0,"delta":{"content":"a\"b\u00e9"},"finish_reason":null}],"usage":null}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"k\""}}]}}]}"#,
                r#"{"choices":[{"delta":{"reasoning":"r","content":null},"finish_reason":"stop"}]}"#,
                r#"{"id":"c","choices":[]}"#,
            ];
            let mut data = samples[which].to_string();
            for (at, how, c) in edits {
                let mut i = (at * data.len() as f64) as usize;
                while !data.is_char_boundary(i) {
                    i -= 1;
                }
                match how {
                    0 => data.insert(i, c),
                    1 if i < data.len() => {
                        data.remove(i);
                    }
                    _ => {
                        if i < data.len() {
                            data.remove(i);
                        }
                        data.insert(i, c);
                    }
                }
            }
            same_by_both_paths(&data);
        }
    }
}
