//! The shape of an Anthropic stream event, and how one is read: the
//! common shapes (a `content_block_delta` of text, thinking or tool input,
//! a `content_block_stop`, `message_stop`) by the [`JsonScan`] fast path,
//! anything else by serde_json, which gives the same [`Event`] or the
//! error.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::usage::token_count;
use crate::wire::{JsonScan, JsonStr, SeenKeys, fast_path_on};

/// Every Anthropic stream event in one flat shape: parsing into it is a
/// single pass (an internally tagged enum would buffer each event first).
/// Its strings borrow from the event's data unless they hold escapes; the
/// parts most events lack are boxed, as the event is moved by value while
/// it is parsed.
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
    pub(super) delta: Option<Delta<'a>>,
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
    /// Reads one event's JSON: by the fast path when it is sure of the
    /// shape, else by serde_json.
    pub(super) fn parse(data: &'a str) -> Result<Event<'a>, serde_json::Error> {
        let mut event = Event {
            kind: JsonStr::from(Cow::Borrowed("")),
            index: None,
            message: None,
            content_block: None,
            delta: None,
            usage: None,
        };
        if fast_path_on() && scan_event(data, &mut event).is_some() {
            return Ok(event);
        }
        serde_json::from_str(data)
    }
}

/// The fast path: an event of strings, integers and nulls whose only
/// nested value is its `delta`, read into `event` in place (an event is
/// large, and moving it up through each level costs more than reading
/// it). `None` for anything else (`message_start`, a block's start, usage,
/// a nested value under an unknown key, any doubt): serde_json then reads
/// it, and what this filled of `event` is dropped.
fn scan_event<'a>(data: &'a str, event: &mut Event<'a>) -> Option<()> {
    let mut scan = JsonScan::new(data);
    let mut seen = SeenKeys::default();
    scan.object(|s, key| match key {
        "type" => {
            seen.once(0)?;
            event.kind = s.string()?;
            Some(())
        }
        "index" => {
            seen.once(1)?;
            event.index = s.optional_u64()?;
            Some(())
        }
        "delta" => {
            seen.once(2)?;
            if !s.null() {
                scan_delta(s, event.delta.insert(Delta::default()))?;
            }
            Some(())
        }
        "message" => {
            seen.once(3)?;
            s.only_null()
        }
        "content_block" => {
            seen.once(4)?;
            s.only_null()
        }
        "usage" => {
            seen.once(5)?;
            s.only_null()
        }
        _ => s.skip_scalar(),
    })?;
    // `type` is required.
    seen.has(0).then_some(())?;
    scan.end()
}

fn scan_delta<'a>(s: &mut JsonScan<'a>, delta: &mut Delta<'a>) -> Option<()> {
    let mut seen = SeenKeys::default();
    s.object(|s, key| {
        let (bit, field) = match key {
            "type" => (0, &mut delta.kind),
            "text" => (1, &mut delta.text),
            "thinking" => (2, &mut delta.thinking),
            "signature" => (3, &mut delta.signature),
            "partial_json" => (4, &mut delta.partial_json),
            "stop_reason" => (5, &mut delta.stop_reason),
            _ => return s.skip_scalar(),
        };
        seen.once(bit)?;
        *field = s.optional_string()?;
        Some(())
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sse::SseParser;

    /// Reads `data` by both paths; whenever the fast path takes it, it must
    /// read what serde_json reads. True when the fast path took it.
    fn same_by_both_paths(data: &str) -> bool {
        let fast = scan(data);
        if let Some(fast) = &fast {
            let serde = serde_json::from_str::<Event>(data);
            assert_eq!(serde.as_ref().ok(), Some(fast), "{data}");
        }
        fast.is_some()
    }

    /// The event the fast path reads, if it takes it.
    fn scan(data: &str) -> Option<Event<'_>> {
        let mut event = Event {
            kind: JsonStr::from(Cow::Borrowed("")),
            index: None,
            message: None,
            content_block: None,
            delta: None,
            usage: None,
        };
        scan_event(data, &mut event).map(|()| event)
    }

    /// The `data:` of every event of every Anthropic capture.
    fn capture_events() -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/anthropic");
        let mut events = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let mut sse = SseParser::default();
            sse.feed(&std::fs::read(entry.unwrap().path()).unwrap());
            sse.finish();
            events.extend(sse.frames().map(|f| f.data.to_string()));
        }
        events
    }

    #[test]
    fn every_capture_event_reads_the_same_by_both_paths() {
        let events = capture_events();
        let fast = events.iter().filter(|e| same_by_both_paths(e)).count();
        assert!(events.len() > 100, "{}", events.len());
        assert!(fast * 2 > events.len(), "{fast} of {}", events.len());
    }

    #[test]
    fn the_common_shapes_take_the_fast_path() {
        for data in [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"delta":{"text":"say \"hi\"\\ \/ \n\u00e9\ud83d\ude00","type":"text_delta"},"index":0,"type":"content_block_delta"}"#,
            " {\n \"type\" : \"content_block_delta\" ,\t\"index\" : 2 , \"delta\" : { \"type\" : \"thinking_delta\" , \"thinking\" : \"hm\" } } ",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\": \"\\u00e9\""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"},"trace":"x","n":-1,"ok":false}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"message_stop"}"#,
            r#"{"type":"ping","usage":null,"message":null,"content_block":null,"delta":null,"index":null}"#,
        ] {
            assert!(same_by_both_paths(data), "{data}");
        }
    }

    #[test]
    fn anything_else_takes_serde() {
        for data in [
            r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"meta":{}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}"#,
            r#"{"type":"content_block_delta","type":"content_block_stop"}"#,
            r#"{"type":"content_block_delta","index":-1}"#,
            r#"{"type":"content_block_delta","index":1.0}"#,
            r#"{"type":"content_block_delta","index":18446744073709551616}"#,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"\udc00"}}"#,
            r#"{"t\u0079pe":"message_stop"}"#,
            r#"{"type":null}"#,
            r#"{"index":0}"#,
            r#"{"type":"message_stop"}x"#,
            "",
        ] {
            assert!(scan(data).is_none(), "{data}");
        }
    }

    /// Edits to an event: JSON's own characters, inserted or overwritten.
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
        fn an_edited_event_reads_the_same_by_both_paths_or_falls_back(
            which in 0usize..3,
            edits in prop::collection::vec(edit(), 1..4),
        ) {
            let samples = [
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b\u00e9"}}"#,
                r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"k\":"}}"#,
                r#"{"type":"content_block_stop","index":10}"#,
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
