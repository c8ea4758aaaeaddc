//! A session chooses another of the engine's models for its turns: the
//! choice is stored, shown, kept by later turns and by another engine over
//! the same store, and a model the engine does not offer is refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use roundtable_providers::{Model, OPENAI_COMPLETIONS, ScriptedProvider};
use roundtable_sessions::{Caller, EventType, SessionEngine, SessionError, Submit, model_key};
use roundtable_thread_stream::{MemoryStore, ThreadStore};
use support::*;

fn other_model() -> Model {
    Model::new(OPENAI_COMPLETIONS, "scripted", "big", "")
}

/// An engine whose own model is served by `own` and that offers
/// `other_model()` served by `other`.
fn two_model_engine(
    store: Arc<dyn ThreadStore>,
    own: &Arc<ScriptedProvider>,
    other: &Arc<ScriptedProvider>,
) -> SessionEngine {
    SessionEngine::builder(store, own.clone(), model())
        .offer_model(other_model(), other.clone())
        .chunk_interval(Duration::from_millis(5))
        .build()
}

async fn turn(engine: &SessionEngine, session: &str, message: Submit) {
    engine
        .submit(&Caller::Host, session, message)
        .await
        .unwrap();
    engine.idle(session).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chosen_model_runs_the_sessions_turns_until_another_is_chosen() {
    let fx = Fixture::new();
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let own = Arc::new(ScriptedProvider::new([
        text("small one"),
        text("small two"),
    ]));
    let other = Arc::new(ScriptedProvider::new([text("big one"), text("big two")]));
    let engine = two_model_engine(store.clone(), &own, &other);
    assert_eq!(
        engine.models().iter().map(model_key).collect::<Vec<_>>(),
        ["scripted/m", "scripted/big"]
    );
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let id = session.id.to_string();

    // The engine's own model, until the session chooses.
    turn(&engine, &id, Submit::text("first")).await;
    assert_eq!(own.take_requests().len(), 1);
    assert_eq!(engine.get(&Caller::Host, &id).await.unwrap().model, None);

    let choose = Submit {
        model: Some("scripted/big".into()),
        ..Submit::text("second")
    };
    turn(&engine, &id, choose).await;
    assert_eq!(other.take_requests().len(), 1);
    assert!(own.take_requests().is_empty());
    let info = engine.get(&Caller::Host, &id).await.unwrap();
    assert_eq!(info.model.as_deref(), Some("scripted/big"));
    // The choice is an event of its own, before the message.
    let events = all_events(&engine, &info).await;
    let changed: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventType::ModelChanged)
        .collect();
    assert_eq!(changed.len(), 1, "{:?}", kinds(&events));
    assert_eq!(changed[0].data["model"], "scripted/big");

    // Another engine over the same store (a restart, another process)
    // runs the session's next turn on the chosen model too.
    let own_after = Arc::new(ScriptedProvider::new([text("small again")]));
    let other_after = Arc::new(ScriptedProvider::new([text("big three")]));
    let restarted = two_model_engine(store, &own_after, &other_after);
    turn(&restarted, &id, Submit::text("third")).await;
    assert_eq!(other_after.take_requests().len(), 1);
    assert!(own_after.take_requests().is_empty());

    // Choosing the model the session already runs on writes nothing.
    let before = all_events(&restarted, &info).await.len();
    let same = Submit {
        model: Some("scripted/big".into()),
        auto_run: Some(false),
        ..Submit::text("a note")
    };
    restarted.submit(&Caller::Host, &id, same).await.unwrap();
    let after = all_events(&restarted, &info).await;
    assert_eq!(after.len(), before + 1, "{:?}", kinds(&after));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_engine_does_not_offer_is_refused_and_nothing_is_stored() {
    let fx = Fixture::new();
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let own = Arc::new(ScriptedProvider::new([text("never")]));
    let other = Arc::new(ScriptedProvider::new([text("never")]));
    let engine = two_model_engine(store, &own, &other);
    let session = engine
        .create(&Caller::Host, fx.unverified_ungated())
        .await
        .unwrap();
    let before = all_events(&engine, &session).await.len();
    let unknown = Submit {
        model: Some("elsewhere/huge".into()),
        ..Submit::text("hello")
    };
    let error = engine
        .submit(&Caller::Host, &session.id, unknown)
        .await
        .unwrap_err();
    match &error {
        SessionError::InvalidField { field, reason } => {
            assert_eq!(*field, "model");
            assert!(reason.contains("scripted/m, scripted/big"), "{reason}");
        }
        other => panic!("expected an invalid field, got {other:?}"),
    }
    assert_eq!(all_events(&engine, &session).await.len(), before);
    assert!(own.take_requests().is_empty() && other.take_requests().is_empty());
}
