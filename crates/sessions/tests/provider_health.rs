//! The model provider's trouble as a session shows it: retries before a
//! response starts are `retry` events from stored entries (replayed on
//! resume, cut short by cancel), and an open circuit breaker is part of the
//! session's state.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::ScriptedProvider;
use roundtable_providers::breaker::BreakerConfig;
use roundtable_providers::retry::RetryPolicy;
use roundtable_providers::{HttpProvider, Model, OPENAI_COMPLETIONS};
use roundtable_sessions::info::ProviderCircuit;
use roundtable_sessions::{Caller, EventType, SessionEngine, SessionStatus, Submit};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_events_of_the_session_and_are_replayed() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("Back again.")]));
    provider.retry_next_call(2, Duration::from_millis(10), "503: overloaded");
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let mut events = submit_watched(&engine, &session.id, "hello").await;
    let seen = read_until(&mut events, |e| e.kind == EventType::SessionCompleted).await;
    let retries: Vec<_> = seen.iter().filter(|e| e.kind == EventType::Retry).collect();
    assert_eq!(retries.len(), 2, "{:?}", kinds(&seen));
    assert_eq!(retries[0].data["attempt"], 1);
    assert_eq!(retries[1].data["attempt"], 2);
    assert_eq!(retries[1].data["max_attempts"], 2);
    assert_eq!(retries[0].data["delay_ms"], 10);
    assert_eq!(retries[0].data["error"], "503: overloaded");
    let first_output = seen
        .iter()
        .position(|e| e.kind == EventType::ModelOutputDelta)
        .unwrap();
    let last_retry = seen
        .iter()
        .rposition(|e| e.kind == EventType::Retry)
        .unwrap();
    assert!(last_retry < first_output, "{:?}", kinds(&seen));

    // Stored: a client resuming from the start sees the same retries.
    let replayed = all_events(&engine, &session).await;
    let again: Vec<_> = replayed
        .iter()
        .filter(|e| e.kind == EventType::Retry)
        .map(|e| (e.id.to_string(), e.data.clone()))
        .collect();
    let first: Vec<_> = retries
        .iter()
        .map(|e| (e.id.to_string(), e.data.clone()))
        .collect();
    assert_eq!(again, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_cuts_a_retry_wait_short() {
    let fx = Fixture::new();
    let provider = Arc::new(ScriptedProvider::new([text("never")]));
    provider.retry_next_call(1, Duration::from_secs(600), "429: slow down");
    let engine = engine(fx.store().await, provider, &fx.data());
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let mut events = submit_watched(&engine, &session.id, "hello").await;
    wait_for(&mut events, EventType::Retry).await;
    engine
        .cancel(&Caller::Host, &session.id, None)
        .await
        .unwrap();
    // Well before the 600 s wait (read_until fails after 20 s).
    read_until(&mut events, |e| e.kind == EventType::SessionCanceled).await;
    engine.idle(&session.id).await.unwrap();
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.status, SessionStatus::Canceled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_circuit_breaker_shows_in_the_session_state() {
    // A provider nothing listens for: every call fails to connect.
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let provider = Arc::new(
        HttpProvider::new()
            .with_retry(RetryPolicy::none())
            .with_breaker(BreakerConfig {
                min_calls: 2,
                failure_ratio: 0.5,
                open_for: Duration::from_secs(300),
                ..BreakerConfig::default()
            }),
    );
    let model = Model::new(
        OPENAI_COMPLETIONS,
        "local",
        "m",
        format!("http://127.0.0.1:{closed_port}/v1"),
    );
    let fx = Fixture::new();
    let engine = SessionEngine::builder(fx.store().await, provider, model)
        .snapshot_dir(fx.data())
        .build();
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    assert_eq!(info.provider_circuit, None);
    for n in 0..3 {
        engine
            .submit(&Caller::Host, &session.id, Submit::text(format!("try {n}")))
            .await
            .unwrap();
        engine.idle(&session.id).await.unwrap();
        let info = engine.get(&Caller::Host, &session.id).await.unwrap();
        assert_eq!(info.status, SessionStatus::Failed);
    }
    let info = engine.get(&Caller::Host, &session.id).await.unwrap();
    let Some(ProviderCircuit::Open { retry_in_ms }) = info.provider_circuit else {
        panic!("the breaker should be open: {info:?}");
    };
    assert!(retry_in_ms > 0 && retry_in_ms <= 300_000);
    let json = serde_json::to_value(&info).unwrap();
    assert_eq!(json["provider_circuit"]["state"], "open");
}
