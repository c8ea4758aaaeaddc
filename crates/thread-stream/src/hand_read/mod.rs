//! Reading by hand the lines roundtable writes.
//!
//! A stored line is one JSON object laid out the same way every time: the
//! header fields in their order, `type`, then the body's fields in the
//! order their types declare them. Read through serde, a line costs a
//! generic visitor per key and per value and an allocation per string,
//! shared names included; read by hand, it is a walk over the expected
//! keys. The hand reader is sure or silent: it reads the shapes roundtable
//! writes for the frequent bodies (chat lines, chunks, assistant messages,
//! tool results), and gives up on anything else (another key order, a key
//! it does not expect, a value of another kind, whitespace, a lone
//! surrogate...), which serde then reads, with its errors. The values it
//! does read are the ones serde would give: numbers with a fraction and
//! nested JSON (tool-call arguments, details) are handed to serde_json
//! itself. Tests hold both readers to the same result on every cut and
//! altered byte of every kind of line.
//!
//! Names that repeat from line to line (a message's API, provider and
//! model, tool names, a turn's id) are shared through the reader's
//! [`KnownThread`], as its authors are.

mod cursor;
mod message;

use std::sync::Arc;

pub(crate) use cursor::HandCursor;

use crate::body::{BodyKind, Chat, Chunk, ChunkKind, EntryBody};
use crate::known_thread::KnownThread;

/// Reads the body of a `kind` entry whose fields start at `cursor` (just
/// after the `type` value), to the end of the line; `None` when the body
/// is not one the hand reader reads, or is not laid out as roundtable
/// writes it. `scratch` holds strings with escapes while they are decoded.
pub(crate) fn read_body(
    kind: &str,
    cursor: &mut HandCursor<'_>,
    known: &mut KnownThread,
    scratch: &mut String,
) -> Option<EntryBody> {
    let body = match BodyKind::of(kind) {
        BodyKind::Chat => EntryBody::Chat(chat(cursor, known, scratch)?),
        BodyKind::Chunk => EntryBody::Chunk(chunk(cursor, known, scratch)?),
        BodyKind::Assistant => EntryBody::Assistant(message::assistant(cursor, known, scratch)?),
        BodyKind::ToolResult => {
            EntryBody::ToolResult(message::tool_result(cursor, known, scratch)?)
        }
        _ => return None,
    };
    // The entry's closing brace ends the line.
    cursor.at_end().then_some(body)
}

/// `,"text":...[,"mentions":[...]]}`
fn chat(c: &mut HandCursor<'_>, known: &mut KnownThread, scratch: &mut String) -> Option<Chat> {
    c.literal(",\"text\":")?;
    let mut chat = Chat::new(shared_str(c, scratch)?);
    if c.next_is(",\"mentions\":[") && !c.next_is("]") {
        loop {
            // Participant ids, as authors are.
            chat.mentions.push(known.author(c.str_in(scratch)?));
            if c.next_is("]") {
                break;
            }
            c.literal(",")?;
        }
    }
    c.literal("}")?;
    Some(chat)
}

/// `,"turn":...,"delta":...[,"kind":...]}`
fn chunk(c: &mut HandCursor<'_>, known: &mut KnownThread, scratch: &mut String) -> Option<Chunk> {
    c.literal(",\"turn\":")?;
    let turn = known.turn(c.str_in(scratch)?);
    c.literal(",\"delta\":")?;
    let mut chunk = Chunk::text(turn, shared_str(c, scratch)?);
    if c.next_is(",\"kind\":") {
        chunk.kind = match c.plain_str()? {
            "text" => ChunkKind::Text,
            "thinking" => ChunkKind::Thinking,
            _ => return None,
        };
    }
    c.literal("}")?;
    Some(chunk)
}

/// A JSON string in a shared string of its own.
fn shared_str(c: &mut HandCursor<'_>, scratch: &mut String) -> Option<Arc<str>> {
    c.str_in(scratch).map(Arc::from)
}

/// `,"turn":...` when the line goes on with it: the turn of an assistant
/// message or a tool result.
fn optional_turn(
    c: &mut HandCursor<'_>,
    known: &mut KnownThread,
    scratch: &mut String,
) -> Option<Option<Arc<str>>> {
    if !c.next_is(",\"turn\":") {
        return Some(None);
    }
    Some(Some(known.turn(c.str_in(scratch)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::StoredLine;
    use crate::{AssistantEntry, Entry, NewEntry, ThreadId, ToolResultEntry};
    use roundtable_providers::{
        AssistantBlock, AssistantMessage, ImageContent, StopReason, ThinkingContent, ToolCall,
        ToolResultMessage, UserBlock,
    };
    use serde_json::json;

    fn thread() -> ThreadId {
        ThreadId::new("t-1").unwrap()
    }

    fn entry(author: &str, body: EntryBody) -> Entry {
        NewEntry::new(author, body)
            .at(1_731_000_000_000)
            .into_entry(thread(), 7)
    }

    /// Bodies of every kind the hand reader reads, in the shapes it reads
    /// and next to them.
    fn bodies() -> Vec<EntryBody> {
        let mut plain = AssistantMessage::empty("openai-completions", "openai", "gpt-4o-mini", 5);
        plain.content.push(AssistantBlock::text(
            "Here is what I found: the launch moved to the 21st.",
        ));
        plain.usage.input = 812;
        plain.usage.output = 41;
        plain.usage.total_tokens = 853;
        let mut full = AssistantMessage::empty("anthropic-messages", "anthropic", "claude", -3);
        let mut thinking = ThinkingContent::new("hmm \"quoted\"\nline");
        thinking.thinking_signature = Some("sig/+=".into());
        thinking.redacted = Some(false);
        full.content.push(AssistantBlock::Thinking(thinking));
        let mut redacted = ThinkingContent::new("");
        redacted.redacted = Some(true);
        full.content.push(AssistantBlock::Thinking(redacted));
        let mut call = ToolCall::new(
            "call_1",
            "read_file",
            json!({"path": "a \"b\"\\c", "lines": [1, 2.5, {"deep": [null, true]}], "é": "\u{1}"})
                .as_object()
                .unwrap()
                .clone(),
        );
        call.thought_signature = Some("ts".into());
        full.content.push(AssistantBlock::ToolCall(call.clone()));
        let mut signed = roundtable_providers::TextContent::new("done\t✓ 😀");
        signed.text_signature = Some("x".into());
        full.content.push(AssistantBlock::Text(signed));
        full.response_model = Some("claude-2026".into());
        full.response_id = Some("msg_01".into());
        full.usage.cache_read = 7;
        full.usage.cost.input = 0.000_812;
        full.usage.cost.output = 1.5e-7;
        full.usage.cost.total = 12.25;
        full.stop_reason = StopReason::Error;
        full.error_message = Some("overloaded: \"try again\"".into());
        let mut result = ToolResultMessage::text(&call, "line 1\nline 2\n", true, 9);
        result.content.push(UserBlock::Image(ImageContent {
            data: "iVBORw0KGgo=".into(),
            mime_type: "image/png".into(),
        }));
        result.details = Some(json!({"exit": 1, "stderr": "no \"such\" file"}));
        let mut listed = ToolResultMessage::text(&call, "[]", false, 9);
        listed.details = Some(json!([1, 2]));
        let mut mentioned = crate::Chat::new("hi @bob and @carol\n");
        mentioned.mentions = vec!["bob".into(), "carol".into()].into();
        vec![
            EntryBody::chat("message 3: did anyone check the launch date?"),
            EntryBody::chat("quotes \" backslash \\ tab \t control \u{1f} é 😀 \u{2028}"),
            EntryBody::chat(""),
            EntryBody::Chat(mentioned),
            EntryBody::Chunk(Chunk::text("turn-1", "hel")),
            EntryBody::Chunk(Chunk::thinking("turn-1", "so \"x\"")),
            EntryBody::Assistant(AssistantEntry::new(Some("turn-1".into()), plain.clone())),
            EntryBody::Assistant(AssistantEntry::new(None, full)),
            EntryBody::Assistant(AssistantEntry::new(
                Some("turn-2".into()),
                AssistantMessage::empty("a", "p", "m", 0),
            )),
            EntryBody::ToolResult(ToolResultEntry {
                turn: Some("turn-1".into()),
                message: result.into(),
            }),
            EntryBody::ToolResult(ToolResultEntry {
                turn: None,
                message: listed.into(),
            }),
            EntryBody::ToolResult(ToolResultEntry {
                turn: None,
                message: ToolResultMessage {
                    content: Vec::new(),
                    ..ToolResultMessage::text(&call, "", false, 0)
                }
                .into(),
            }),
        ]
    }

    /// Lines roundtable would not write, or writes otherwise: escapes where
    /// it writes plain text, other orders and values, nesting past what
    /// the hand reader skips.
    fn odd_lines() -> Vec<String> {
        let head = r#"{"seq":1,"id":"i","thread":"t-1","author":"a","at":5,"type":"#;
        let mut deep = String::new();
        for _ in 0..130 {
            deep.push('[');
        }
        for _ in 0..130 {
            deep.push(']');
        }
        [
            r#""chat","text":"\u00e9\ud83d\ude00\/\b\f\n\r""#.to_string(),
            r#""chat","text":"lone \ud83d""#.to_string(),
            r#""chat","text":"lone \ude00""#.to_string(),
            r#""chat","text":"bad \x""#.to_string(),
            r#""chat","text":"short \u12""#.to_string(),
            r#""chat","text":"x","mentions":[]"#.to_string(),
            r#""chat","text":"x","mentions":["a",1]"#.to_string(),
            r#""chat","text":"x","text":"y""#.to_string(),
            r#""chat","text":"x","parts":[]"#.to_string(),
            r#""chat","text":null"#.to_string(),
            r#""chat.chunk","turn":"u","delta":"x","kind":"other""#.to_string(),
            r#""chat.chunk","turn":"u","delta":"x","kind":"text""#.to_string(),
            r#""pi.tool_result","message":{"toolCallId":"c","toolName":"t","content":[],"details":null,"isError":false,"timestamp":1}"#.to_string(),
            r#""pi.tool_result","message":{"toolCallId":"c","toolName":"t","content":[],"details":"x","isError":false,"timestamp":1}"#.to_string(),
            format!(r#""pi.tool_result","message":{{"toolCallId":"c","toolName":"t","content":[],"details":{deep},"isError":false,"timestamp":1}}"#),
            format!(r#""pi.assistant","message":{{"content":[{{"type":"toolCall","id":"c","name":"t","arguments":{{"a":{deep}}}}}],"api":"a","provider":"p","model":"m","usage":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"stopReason":"stop","timestamp":0}}"#),
            r#""pi.assistant","message":{"content":[{"type":"toolCall","id":"c","name":"t","arguments":[1]}],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":0}"#.to_string(),
            r#""pi.assistant","message":{"content":[],"api":"a","provider":"p","model":"m","usage":{"input":18446744073709551615,"output":1.0,"cacheRead":-1,"cacheWrite":0,"totalTokens":0,"cost":{"input":-0,"output":1e400,"cacheRead":1E-2,"cacheWrite":0.1e1,"total":-12.5}},"stopReason":"stop","timestamp":0}"#.to_string(),
            r#""pi.assistant","message":{"content":[],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":01,"output":+1,"cacheRead":.5,"cacheWrite":1.,"total":1e}},"stopReason":"stop","timestamp":0}"#.to_string(),
            r#""pi.assistant","message":{"content":[],"api":"a","provider":"p","model":"m","diagnostics":[],"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":0}"#.to_string(),
            r#""pi.assistant","message":{"content":[],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"paused","timestamp":0}"#.to_string(),
            r#""pi.assistant","message":{"content":[{"type":"thinking","thinking":"x","redacted":null}],"api":"a","provider":"p","model":"m","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":0}"#.to_string(),
        ]
        .into_iter()
        .map(|rest| format!("{head}{rest}}}"))
        .collect()
    }

    /// Both readers must agree on `line`: the same entry or the same error.
    fn assert_readers_agree(line: &str, known: &mut KnownThread, buffer: &mut String) {
        let general = serde_json::from_str::<StoredLine>(line);
        let known_read = StoredLine::read(line, known, buffer);
        match (general, known_read) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{line}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{line}"),
            (a, b) => panic!("the readers disagree on {line}: {a:?} / {b:?}"),
        }
    }

    #[test]
    fn the_lines_roundtable_writes_are_read_by_hand_as_serde_reads_them() {
        let mut known = KnownThread::new(&thread());
        let mut scratch = String::new();
        for body in bodies() {
            for more in [0, 2] {
                let written = entry("archive-bot", body.clone());
                let mut line = Vec::new();
                StoredLine::write(&written, more, &mut line).unwrap();
                let line = String::from_utf8(line).unwrap();
                // The body is read by hand, and as written.
                let kind = format!(r#""type":"{}""#, written.body.kind());
                let at = line.find(&kind).unwrap() + kind.len();
                let mut cursor = HandCursor::new(&line, at);
                let by_hand =
                    read_body(&written.body.kind(), &mut cursor, &mut known, &mut scratch);
                assert_eq!(by_hand.as_ref(), Some(&written.body), "{line}");
                let read = StoredLine::read(&line, &mut known, &mut scratch).unwrap();
                assert_eq!(read.entry, written);
                assert_eq!(read.more, more);
            }
        }
    }

    #[test]
    fn the_hand_reader_and_serde_agree_on_every_cut_and_altered_byte() {
        let mut known = KnownThread::new(&thread());
        let mut buffer = String::new();
        let mut lines: Vec<String> = bodies()
            .into_iter()
            .map(|body| serde_json::to_string(&entry("alice", body)).unwrap())
            .collect();
        lines.extend(odd_lines());
        for line in &lines {
            assert_readers_agree(line, &mut known, &mut buffer);
            for cut in (0..line.len()).filter(|i| line.is_char_boundary(*i)) {
                assert_readers_agree(&line[..cut], &mut known, &mut buffer);
                let end = line[cut..]
                    .chars()
                    .next()
                    .map_or(cut, |c| cut + c.len_utf8());
                for replacement in [
                    "", "\"", "\\", ",", "}", "]", "0", "-", ".", " ", "\u{1}", "é",
                ] {
                    let changed = format!("{}{replacement}{}", &line[..cut], &line[end..]);
                    assert_readers_agree(&changed, &mut known, &mut buffer);
                }
            }
        }
    }

    #[test]
    fn repeated_names_are_shared_from_line_to_line() {
        let mut known = KnownThread::new(&thread());
        let mut scratch = String::new();
        let body = bodies().swap_remove(6);
        let mut read = |seq| {
            let mut line = Vec::new();
            let e = NewEntry::new("archive-bot", body.clone()).into_entry(thread(), seq);
            StoredLine::write(&e, 0, &mut line).unwrap();
            let line = String::from_utf8(line).unwrap();
            match StoredLine::read(&line, &mut known, &mut scratch)
                .unwrap()
                .entry
                .body
            {
                EntryBody::Assistant(a) => a,
                other => panic!("{other:?}"),
            }
        };
        let (first, second) = (read(1), read(2));
        assert!(Arc::ptr_eq(&first.message().model, &second.message().model));
        assert!(Arc::ptr_eq(&first.message().api, &second.message().api));
        assert!(Arc::ptr_eq(
            &first.message().provider,
            &second.message().provider
        ));
        let (Some(a), Some(b)) = (&first.turn, &second.turn) else {
            panic!("no turn");
        };
        assert!(Arc::ptr_eq(a, b));
    }
}
