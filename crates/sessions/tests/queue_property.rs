//! A property of the queues: whatever the interleaving of prompts (plain,
//! steering, follow-up), aborts and completions, no prompt is lost and none
//! runs twice.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use roundtable_providers::ScriptedProvider;
use roundtable_sessions::{Caller, CreateSession, QueueMode, SessionEngine, Submit};
use roundtable_test_support::scripted::{model, text};
use roundtable_thread_stream::{EntryBody, MemoryStore, ThreadId, ThreadStore};
use roundtable_tools::{ApprovalPolicy, VerifyPolicy};

#[derive(Debug, Clone)]
enum Op {
    /// A prompt, queued this way when a turn runs.
    Prompt(Option<QueueMode>),
    /// Abort the running turn (nothing when none runs).
    Abort,
    /// Wait a little (turns progress meanwhile).
    Pause(u64),
    /// Wait until nothing runs.
    Settle,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => prop_oneof![Just(None), Just(Some(QueueMode::Steer)), Just(Some(QueueMode::FollowUp))]
            .prop_map(Op::Prompt),
        1 => Just(Op::Abort),
        2 => (1u64..25).prop_map(Op::Pause),
        1 => Just(Op::Settle),
    ];
    proptest::collection::vec(op, 1..14)
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let workspace = tempfile::tempdir().unwrap();
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    // Each turn streams its answer for a few milliseconds, so prompts and
    // aborts land while turns run.
    let provider = Arc::new(
        ScriptedProvider::new((0..64).map(|_| text("a paced answer")))
            .with_chunk_chars(1)
            .with_pacing(Duration::from_millis(1)),
    );
    let engine = SessionEngine::builder(store.clone(), provider, model()).build();
    let host = Caller::Host;
    let session = engine
        .create(
            &host,
            CreateSession {
                approval_policy: Some(ApprovalPolicy::none()),
                verify_policy: Some(VerifyPolicy {
                    auto_verify: false,
                    ..VerifyPolicy::default()
                }),
                ..CreateSession::new(workspace.path())
            },
        )
        .await
        .unwrap();
    let mut sent = Vec::new();
    for (i, op) in ops.into_iter().enumerate() {
        match op {
            Op::Prompt(queue) => {
                let submitted = engine
                    .submit(
                        &host,
                        &session.id,
                        Submit {
                            queue,
                            ..Submit::text(format!("prompt {i}"))
                        },
                    )
                    .await
                    .unwrap();
                sent.push(submitted.message_id);
            }
            Op::Abort => {
                // Nothing running is fine: the abort is refused.
                let _ = engine.cancel(&host, &session.id, None).await;
            }
            Op::Pause(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            Op::Settle => engine.idle(&session.id).await.unwrap(),
        }
    }
    // A last prompt resumes whatever an abort left queued.
    let last = engine
        .submit(&host, &session.id, Submit::text("the end"))
        .await
        .unwrap();
    sent.push(last.message_id);
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            engine.idle(&session.id).await.unwrap();
            let info = engine.get(&host, &session.id).await.unwrap();
            if info.queued_messages.is_empty() && info.running_turn_id.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .map_err(|_| {
        let info = futures::executor::block_on(engine.get(&host, &session.id));
        TestCaseError::fail(format!("the session never settled: {info:?}"))
    })?;

    let entries = store
        .read_all(&ThreadId::new(&*session.id).unwrap())
        .await
        .unwrap();
    let mut delivered: HashMap<&str, (usize, u64)> = HashMap::new();
    let mut turns_for: HashMap<u64, usize> = HashMap::new();
    for entry in &entries {
        match &entry.body {
            EntryBody::Chat(_) if &*entry.author != "verify" => {
                delivered.entry(&entry.id).or_insert((0, entry.seq)).0 += 1;
            }
            EntryBody::TurnStarted(started) if started.reason.as_deref() != Some("retry") => {
                if let Some(trigger) = started.trigger {
                    *turns_for.entry(trigger).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    for id in &sent {
        let Some((count, seq)) = delivered.get(id.as_str()) else {
            return Err(TestCaseError::fail(format!("prompt {id} was lost")));
        };
        prop_assert_eq!(*count, 1, "prompt {} delivered {} times", id, count);
        prop_assert!(
            turns_for.get(seq).copied().unwrap_or(0) <= 1,
            "prompt {} ran twice",
            id
        );
    }
    prop_assert_eq!(delivered.len(), sent.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn no_prompt_is_lost_and_none_runs_twice(ops in ops()) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(ops))?;
    }
}
