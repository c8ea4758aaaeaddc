//! A loopback OpenAI-completions server whose replies follow the
//! conversation, so that any replica may make any call of any turn (and
//! make one again after a takeover) and get the same answer: a user
//! message `write a b c` is answered by one `shell` call per word, each
//! appending the word to `side.txt`, then by the text `done`. Replies
//! stream in small pieces with pauses, so that a replica killed at a
//! random moment is often killed mid-stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

/// The pause between two pieces of a streamed reply.
const PIECE_PAUSE: Duration = Duration::from_millis(40);

/// Starts the server on a free loopback port; its base URL (`…/v1`).
#[allow(dead_code)]
pub(crate) fn start() -> String {
    start_with(PIECE_PAUSE)
}

/// [`start`], pausing `pause` between two pieces of a reply.
pub(crate) fn start_with(pause: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream, pause));
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

fn serve(stream: TcpStream, pause: Duration) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let pieces = reply(&request);
    let mut stream = stream;
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    for piece in pieces {
        let frame = format!("data: {piece}\n\n");
        if stream.write_all(frame.as_bytes()).is_err() {
            return;
        }
        let _ = stream.flush();
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    let _ = stream.write_all(b"data: [DONE]\n\n");
}

/// The streamed pieces answering `request`.
fn reply(request: &Value) -> Vec<Value> {
    let empty = Vec::new();
    let messages = request["messages"].as_array().unwrap_or(&empty);
    let last_user = messages.iter().rposition(|m| m["role"] == "user");
    let words: Vec<String> = last_user
        .map(|i| text_of(&messages[i]))
        .and_then(|text| {
            let at = text.rfind("write ")?;
            Some(
                text[at + "write ".len()..]
                    .split_whitespace()
                    .map(str::to_string)
                    .collect(),
            )
        })
        .unwrap_or_default();
    let answered = last_user.map_or(0, |i| {
        messages[i..].iter().filter(|m| m["role"] == "tool").count()
    });
    match words.get(answered) {
        Some(word) => tool_call(word),
        None => text("done"),
    }
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "r1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn usage() -> Value {
    json!({
        "id": "r1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    })
}

fn tool_call(word: &str) -> Vec<Value> {
    let arguments = json!({"command": format!("echo {word} >> side.txt && sleep 0.2")});
    let call = json!({
        "index": 0, "id": format!("call_{word}"), "type": "function",
        "function": {"name": "shell", "arguments": arguments.to_string()},
    });
    vec![
        chunk(json!({"role": "assistant", "content": "Writing it."}), None),
        chunk(json!({"tool_calls": [call]}), None),
        chunk(json!({}), Some("tool_calls")),
        usage(),
    ]
}

fn text(answer: &str) -> Vec<Value> {
    let mut pieces = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for piece in ["All ", "of it ", "is ", "written: ", answer] {
        pieces.push(chunk(json!({"content": piece}), None));
    }
    pieces.push(chunk(json!({}), Some("stop")));
    pieces.push(usage());
    pieces
}
