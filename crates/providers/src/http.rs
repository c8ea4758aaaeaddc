//! `HttpProvider`: the HTTP transport of the wire adapters. It picks the
//! adapter of the model's wire API once, has it build the request, sends it
//! with retries behind a circuit breaker per provider, and feeds the
//! response bytes to a [`StreamDecoder`]. It only moves bytes: everything
//! about the wire formats lives in the adapters (`openai/`, `anthropic/`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::breaker::{BreakerConfig, BreakerState, CircuitBreaker};
use crate::context::{Context, StreamOptions};
use crate::decoder::StreamDecoder;
use crate::error::{ErrorKind, ProviderError};
use crate::event::AssistantEvent;
use crate::model::Model;
use crate::provider::{EventStream, Provider, now_millis};
use crate::retry::{RetryNotice, RetryObserver, RetryPolicy, jitter_random, parse_retry_after};
use crate::wire::{Adapter, WireRequest};

/// The environment variables that may hold the API key of a provider,
/// in the order they are read (the first one set wins).
pub(crate) fn env_api_key_vars(provider: &str) -> &'static [&'static str] {
    match provider {
        "openai" => &["OPENAI_API_KEY"],
        "anthropic" => &["ANTHROPIC_API_KEY"],
        "google" => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        _ => &[],
    }
}

/// Streams from OpenAI-compatible chat-completions servers, Anthropic
/// messages, the OpenAI Responses API and Gemini, chosen by `model.api`.
///
/// ```no_run
/// use roundtable_providers::{
///     complete, Context, HttpProvider, Message, Model, StreamOptions, UserMessage,
///     OPENAI_COMPLETIONS,
/// };
///
/// # async fn run() {
/// let provider = HttpProvider::new();
/// let model = Model::new(OPENAI_COMPLETIONS, "ollama", "qwen3:4b", "http://127.0.0.1:11434/v1");
/// let context = Context {
///     messages: vec![Message::from(UserMessage::text("hello", 0))],
///     ..Context::default()
/// };
/// let done = complete(&provider, &model, &context, &StreamOptions::default()).await;
/// println!("{}", done.message.text());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct HttpProvider {
    client: reqwest::Client,
    retry: RetryPolicy,
    breaker: BreakerConfig,
    breakers: Arc<Mutex<HashMap<String, Arc<CircuitBreaker>>>>,
}

impl Default for HttpProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpProvider {
    /// A provider with a default client, [`RetryPolicy::default`] and
    /// [`BreakerConfig::default`].
    pub fn new() -> Self {
        Self::with_client(reqwest::Client::new())
    }

    /// A provider over the given client.
    pub fn with_client(client: reqwest::Client) -> Self {
        Self {
            client,
            retry: RetryPolicy::default(),
            breaker: BreakerConfig::default(),
            breakers: Arc::default(),
        }
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the circuit-breaker configuration (for breakers not yet made).
    pub fn with_breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = config;
        self
    }

    /// The circuit breaker of a provider (made on first use).
    pub fn breaker(&self, provider: &str) -> Arc<CircuitBreaker> {
        match self.breakers.lock() {
            Ok(mut map) => map
                .entry(provider.to_string())
                .or_insert_with(|| Arc::new(CircuitBreaker::new(self.breaker)))
                .clone(),
            Err(_) => Arc::new(CircuitBreaker::new(self.breaker)),
        }
    }

    fn prepare(
        &self,
        model: &Model,
        context: &Context,
        options: &StreamOptions,
    ) -> Result<Prepared, ProviderError> {
        let env_key = env_api_key_vars(&model.provider)
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|k| !k.is_empty()));
        let key = options.api_key.clone().or(env_key);
        let adapter = Adapter::for_api(&model.api)?;
        let WireRequest { url, headers, body } =
            adapter.request(model, context, options, key.as_deref());
        let mut header_map = reqwest::header::HeaderMap::new();
        for (k, v) in headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|e| {
                ProviderError::InvalidRequest {
                    message: format!("header {k:?}: {e}"),
                }
            })?;
            let value = reqwest::header::HeaderValue::from_str(&v).map_err(|e| {
                ProviderError::InvalidRequest {
                    message: format!("header {k:?}: {e}"),
                }
            })?;
            header_map.insert(name, value);
        }
        let body = serde_json::to_vec(&body).map_err(|e| ProviderError::InvalidRequest {
            message: e.to_string(),
        })?;
        let breaker = self.breaker(&model.provider);
        Ok(Prepared {
            adapter,
            client: self.client.clone(),
            url,
            headers: header_map,
            body: Bytes::from(body),
            retry: RetryPolicy {
                max_retries: options.max_retries.unwrap_or(self.retry.max_retries),
                ..self.retry
            },
            timeout: options.timeout.unwrap_or(breaker.config().call_timeout),
            idle_timeout: options.idle_timeout.filter(|d| !d.is_zero()),
            cancel: options.cancel.clone(),
            breaker,
            provider: model.provider.clone(),
            on_retry: options.on_retry.clone(),
        })
    }
}

struct Prepared {
    adapter: Adapter,
    client: reqwest::Client,
    url: String,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
    retry: RetryPolicy,
    timeout: Duration,
    idle_timeout: Option<Duration>,
    cancel: CancellationToken,
    breaker: Arc<CircuitBreaker>,
    provider: String,
    on_retry: Option<RetryObserver>,
}

impl Prepared {
    /// Sends the request until a response starts, retrying what may succeed
    /// on a second try.
    async fn send(&self) -> Result<(reqwest::Response, Permit), ProviderError> {
        let mut retry = 0;
        loop {
            if !self.breaker.try_acquire() {
                return Err(ProviderError::CircuitOpen {
                    provider: self.provider.clone(),
                });
            }
            let mut permit = Permit(Some(self.breaker.clone()));
            let attempt = self.attempt();
            let outcome = tokio::select! {
                r = attempt => r,
                _ = self.cancel.cancelled() => return Err(ProviderError::Aborted),
            };
            let error = match outcome {
                Ok(response) => return Ok((response, permit)),
                Err(e) => e,
            };
            let kind = error.kind();
            // Client errors say nothing about the server's health.
            permit.record(!kind.is_retryable());
            if !kind.is_retryable() || retry >= self.retry.max_retries {
                return Err(error);
            }
            let after = match &error {
                ProviderError::Status { retry_after_ms, .. } => {
                    retry_after_ms.map(Duration::from_millis)
                }
                _ => None,
            };
            let Some(delay) = self.retry.delay(retry, after, jitter_random()) else {
                return Err(error);
            };
            if let Some(observer) = &self.on_retry {
                observer.notify(&RetryNotice {
                    retry: retry + 1,
                    max_retries: self.retry.max_retries,
                    delay,
                    error: error.to_string(),
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.cancel.cancelled() => return Err(ProviderError::Aborted),
            }
            retry += 1;
        }
    }

    async fn attempt(&self) -> Result<reqwest::Response, ProviderError> {
        let request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(self.body.clone())
            .send();
        let response = match tokio::time::timeout(self.timeout, request).await {
            Err(_) => {
                return Err(ProviderError::Timeout {
                    millis: saturating_millis(self.timeout),
                });
            }
            Ok(Err(e)) => {
                return Err(ProviderError::Network {
                    message: error_chain(&e),
                });
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("json"));
        if status.is_success() && is_json {
            // Some servers answer a streaming request with one JSON error.
            let body = response.text().await.unwrap_or_default();
            return Err(json_instead_of_stream(&body));
        }
        if status.is_success() {
            return Ok(response);
        }
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let retry_after = parse_retry_after(
            header("retry-after").as_deref(),
            header("retry-after-ms").as_deref(),
        );
        let body = response.text().await.unwrap_or_default();
        let body: String = body.chars().take(4000).collect();
        Err(ProviderError::Status {
            status: status.as_u16(),
            retry_after_ms: retry_after.map(saturating_millis),
            body,
        })
    }
}

/// One call admitted by the breaker. Its outcome is recorded once; a call
/// dropped before it ended (the consumer went away, or it was cancelled)
/// counts as healthy, so a half-open breaker never waits for a probe that
/// will not report.
struct Permit(Option<Arc<CircuitBreaker>>);

impl Permit {
    fn record(&mut self, success: bool) {
        if let Some(b) = self.0.take() {
            b.record(success);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.record(true);
    }
}

/// A duration in whole milliseconds, `u64::MAX` when it has more. A plain
/// `as u64` would wrap: a server's `Retry-After` of 2^64 ms and a little
/// more would become a short wait.
fn saturating_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn json_instead_of_stream(body: &str) -> ProviderError {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    let message = value
        .pointer("/error/message")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            format!(
                "expected an event stream, got JSON: {}",
                body.chars().take(2000).collect::<String>()
            )
        });
    let kind = if crate::overflow::is_overflow_text(&message) {
        ErrorKind::ContextOverflow
    } else {
        ErrorKind::Protocol
    };
    ProviderError::Stream { kind, message }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

type Body = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

enum Phase {
    Send(Box<Prepared>, StreamDecoder),
    Body(Streaming),
    Failed(Vec<AssistantEvent>),
    Over,
}

/// A response being read: its body, what decodes it, and what may end it
/// early.
struct Streaming {
    body: Body,
    decoder: StreamDecoder,
    permit: Permit,
    cancel: CancellationToken,
    idle_timeout: Option<Duration>,
}

/// What waiting for the next chunk of a body gave.
#[derive(Debug)]
enum Read<T> {
    /// The body's next item (`None` when it ended).
    Next(Option<T>),
    /// Nothing arrived within the idle timeout.
    Stalled(Duration),
    /// The call was cancelled.
    Cancelled,
}

/// Waits for the body's next chunk, at most `idle_timeout`. Cancellation
/// wins over both the chunk and the timeout when they are ready together.
async fn read_next<S: Stream + Unpin>(
    body: &mut S,
    idle_timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> Read<S::Item> {
    let next = async {
        match idle_timeout {
            Some(limit) => match tokio::time::timeout(limit, body.next()).await {
                Ok(next) => Read::Next(next),
                Err(_) => Read::Stalled(limit),
            },
            None => Read::Next(body.next().await),
        }
    };
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Read::Cancelled,
        read = next => read,
    }
}

/// Whether a terminal event says the server is unhealthy.
fn unhealthy(events: &[AssistantEvent]) -> Option<bool> {
    events.iter().find_map(|e| match e {
        AssistantEvent::Done { .. } => Some(false),
        AssistantEvent::Error { kind, .. } => Some(matches!(
            kind,
            ErrorKind::Network
                | ErrorKind::Protocol
                | ErrorKind::Server
                | ErrorKind::Overloaded
                | ErrorKind::Timeout
        )),
        _ => None,
    })
}

impl Provider for HttpProvider {
    fn breaker_state(&self, model: &Model) -> BreakerState {
        self.breaker(&model.provider)
            .state_at(std::time::Instant::now())
    }

    fn stream(&self, model: &Model, context: &Context, options: &StreamOptions) -> EventStream {
        let timestamp = now_millis();
        let phase = match self.prepare(model, context, options) {
            Ok(prepared) => {
                let decoder = StreamDecoder::with_adapter(prepared.adapter, model, timestamp);
                Phase::Send(Box::new(prepared), decoder)
            }
            Err(e) => Phase::Failed(failure_events(model, timestamp, &e)),
        };
        futures::stream::unfold(phase, |phase| async move {
            match phase {
                Phase::Over => None,
                Phase::Failed(events) => Some((events, Phase::Over)),
                Phase::Send(prepared, mut decoder) => match prepared.send().await {
                    Ok((response, permit)) => {
                        let events = decoder.start();
                        let streaming = Streaming {
                            body: Box::pin(response.bytes_stream()),
                            decoder,
                            permit,
                            cancel: prepared.cancel.clone(),
                            idle_timeout: prepared.idle_timeout,
                        };
                        Some((events, Phase::Body(streaming)))
                    }
                    Err(e) => Some((decoder.fail(&e), Phase::Over)),
                },
                Phase::Body(mut s) => {
                    let mut events = Vec::new();
                    let decoder = &mut s.decoder;
                    match read_next(&mut s.body, s.idle_timeout, &s.cancel).await {
                        Read::Cancelled => {
                            events.extend(decoder.fail(&ProviderError::Aborted));
                            return Some((events, Phase::Over));
                        }
                        // Content may have streamed: reported, never retried.
                        Read::Stalled(limit) => {
                            events.extend(decoder.fail(&ProviderError::Stalled {
                                millis: saturating_millis(limit),
                            }))
                        }
                        // The end marker finishes the decoder: the rest of
                        // the body is not read.
                        Read::Next(Some(Ok(bytes))) => decoder.feed_into(&bytes, &mut events),
                        Read::Next(Some(Err(e))) => {
                            events.extend(decoder.fail(&ProviderError::Network {
                                message: error_chain(&e),
                            }))
                        }
                        Read::Next(None) => events.extend(decoder.finish()),
                    }
                    if s.decoder.is_finished() {
                        if let Some(bad) = unhealthy(&events) {
                            s.permit.record(!bad);
                        }
                        Some((events, Phase::Over))
                    } else {
                        Some((events, Phase::Body(s)))
                    }
                }
            }
        })
        .flat_map(futures::stream::iter)
        .boxed()
    }
}

fn failure_events(model: &Model, timestamp: i64, error: &ProviderError) -> Vec<AssistantEvent> {
    let mut asm = crate::assemble::Assembler::new(model, timestamp);
    asm.fail(error);
    asm.take_events()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::OPENAI_COMPLETIONS;

    fn never() -> futures::stream::Pending<u8> {
        futures::stream::pending()
    }

    #[tokio::test]
    async fn a_silent_body_stalls_after_the_idle_timeout() {
        let cancel = CancellationToken::new();
        let read = read_next(&mut never(), Some(Duration::ZERO), &cancel).await;
        assert!(matches!(read, Read::Stalled(d) if d.is_zero()), "{read:?}");
    }

    #[tokio::test]
    async fn a_ready_chunk_beats_the_idle_timeout() {
        let cancel = CancellationToken::new();
        let mut body = futures::stream::iter([7u8]);
        let read = read_next(&mut body, Some(Duration::ZERO), &cancel).await;
        assert!(matches!(read, Read::Next(Some(7))), "{read:?}");
        let read = read_next(&mut body, None, &cancel).await;
        assert!(matches!(read, Read::Next(None)), "{read:?}");
    }

    #[tokio::test]
    async fn cancellation_wins_over_the_idle_timeout_and_a_ready_chunk() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let read = read_next(&mut never(), Some(Duration::ZERO), &cancel).await;
        assert!(matches!(read, Read::Cancelled), "{read:?}");
        let read = read_next(&mut futures::stream::iter([7u8]), None, &cancel).await;
        assert!(matches!(read, Read::Cancelled), "{read:?}");
    }

    #[test]
    fn a_zero_idle_timeout_turns_it_off() {
        let provider = HttpProvider::new();
        let model = Model::new(OPENAI_COMPLETIONS, "local", "m", "http://127.0.0.1:1/v1");
        let prepared = |idle| {
            let options = StreamOptions {
                idle_timeout: idle,
                ..StreamOptions::default()
            };
            provider
                .prepare(&model, &Context::default(), &options)
                .map(|p| p.idle_timeout)
                .ok()
        };
        assert_eq!(
            prepared(Some(crate::context::DEFAULT_IDLE_TIMEOUT)),
            Some(Some(crate::context::DEFAULT_IDLE_TIMEOUT))
        );
        assert_eq!(prepared(Some(Duration::ZERO)), Some(None));
        assert_eq!(prepared(None), Some(None));
    }
}
