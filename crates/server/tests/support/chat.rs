//! A client of `/api/chat`: NDJSON read line by line from the response's
//! bytes, as they arrive.

use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::StatusCode;
use serde_json::Value;

use super::TestServer;

/// The media type of the chat stream.
const NDJSON: &str = "application/x-ndjson";

type Lines = Pin<Box<dyn Stream<Item = Value> + Send>>;

/// An open NDJSON stream.
pub(crate) struct ChatStream {
    pub headers: reqwest::header::HeaderMap,
    lines: Lines,
}

impl ChatStream {
    /// Reads `response` (a 200) line by line; a line split across chunks
    /// (or a UTF-8 character split across them) is put back together.
    pub(crate) fn of(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        let path = response.url().path().to_string();
        let lines = response
            .bytes_stream()
            .scan(Vec::<u8>::new(), move |buffer, chunk| {
                let chunk = chunk.expect("the stream broke");
                buffer.extend_from_slice(&chunk);
                let mut lines = Vec::new();
                while let Some(at) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=at).collect();
                    let line = &line[..line.len() - 1];
                    let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
                        panic!("not a JSON line ({e}): {}", String::from_utf8_lossy(line))
                    });
                    super::openapi::document().check_item("POST", &path, NDJSON, &value);
                    lines.push(value);
                }
                futures::future::ready(Some(futures::stream::iter(lines)))
            })
            .flatten()
            .boxed();
        Self { headers, lines }
    }

    /// The next line. Fails the test after 20 s or at the end.
    pub(crate) async fn next(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(20), self.lines.next())
            .await
            .expect("no line in 20 s")
            .expect("the stream ended")
    }

    /// Reads until a line of type `kind` (and `pick` of it); returns all
    /// read.
    pub(crate) async fn until_where(
        &mut self,
        kind: &str,
        pick: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next())
                .await
                .unwrap_or_else(|_| panic!("no {kind} line in 20 s; saw {:?}", types(&seen)))
                .unwrap_or_else(|| {
                    panic!("the stream ended before {kind}; saw {:?}", types(&seen))
                });
            let done = line["type"] == kind && pick(&line);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }

    /// Reads until a line of type `kind`; returns all read.
    pub(crate) async fn until(&mut self, kind: &str) -> Vec<Value> {
        self.until_where(kind, |_| true).await
    }

    /// Every line left, up to the end of the stream (which must come
    /// within 20 s).
    pub(crate) async fn rest(&mut self) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(20), self.lines.next()).await {
                Ok(Some(line)) => seen.push(line),
                Ok(None) => return seen,
                Err(_) => panic!("the stream did not end in 20 s; saw {:?}", types(&seen)),
            }
        }
    }
}

/// The `type` of each line.
pub(crate) fn types(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let kind = l["type"].as_str().unwrap_or("?");
            match kind {
                "state" => format!("state:{}", l["state"]["name"].as_str().unwrap_or("?")),
                "tool" => format!("tool:{}", l["part"]["state"].as_str().unwrap_or("?")),
                _ => kind.to_string(),
            }
        })
        .collect()
}

/// The text of the `delta` lines, joined.
pub(crate) fn streamed_text(lines: &[Value]) -> String {
    lines
        .iter()
        .filter(|l| l["type"] == "delta")
        .map(|l| l["text"].as_str().unwrap_or(""))
        .collect()
}

impl TestServer {
    /// `POST /api/chat` with `body`, as alice.
    pub(crate) async fn chat_response(&self, body: Value) -> reqwest::Response {
        self.request(reqwest::Method::POST, "/api/chat")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// `POST /api/chat` with `body`: its stream (the answer must be 200).
    pub(crate) async fn chat(&self, body: Value) -> ChatStream {
        let response = self.chat_response(body).await;
        let status = response.status();
        if status != StatusCode::OK {
            panic!("{status}: {}", response.text().await.unwrap_or_default());
        }
        ChatStream::of(response)
    }
}
