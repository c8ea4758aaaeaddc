//! A tour of the thread stream: append author-stamped entries to a JSONL
//! thread, subscribe, and watch a (scripted) bot's turn arrive live.
//!
//! ```text
//! cargo run --example thread            # thread files under ./data
//! cargo run --example thread -- DIR     # or under DIR
//! ```
//!
//! Run it twice: the thread keeps growing, because the JSONL file is the
//! durable record and every run appends to it.

use std::time::Duration;

use futures::StreamExt;
use roundtable::providers::{AssistantBlock, AssistantMessage};
use roundtable::thread_stream::{
    AssistantEntry, Chat, Chunk, Entry, EntryBody, Expect, JsonlStore, NewEntry, ThreadId,
    ThreadStore, TurnEnded, TurnStarted,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args().nth(1).unwrap_or_else(|| "data".into());
    let store = JsonlStore::open(&root).await?;
    let thread = ThreadId::new("demo")?;
    let before = store.last_seq(&thread).await?;
    println!("thread {thread} in {root}/ holds {before} entries");

    // Follow the thread from the first entry this run writes.
    let mut live = store.subscribe(&thread, before + 1).await?;

    // Two humans speak. `Expect::LastSeq` makes the append fail instead of
    // interleaving if another writer got there first.
    let mut ask = Chat::new("@archive-bot what did we decide about the launch date?");
    ask.mentions.push("archive-bot".into());
    store
        .append(
            &thread,
            Expect::LastSeq(before),
            vec![
                NewEntry::new("alice", EntryBody::Chat(ask)),
                NewEntry::new("bob", EntryBody::chat("I remember the 14th, but check.")),
            ],
        )
        .await?;

    // A bot's turn, as a runner writes it: started, live chunks, the final
    // assistant message, ended.
    let writer = {
        let store = store.clone();
        let thread = thread.clone();
        let trigger = before + 1; // alice's question woke the bot
        tokio::spawn(async move { bot_turn(&store, &thread, trigger).await })
    };

    while let Some(entry) = live.next().await {
        let entry = entry?;
        print_entry(&entry);
        if matches!(entry.body, EntryBody::TurnEnded(_)) {
            break;
        }
    }
    writer.await??;

    let total = store.last_seq(&thread).await?;
    println!("thread {thread} now holds {total} entries: {root}/{thread}.jsonl");
    store.close().await?;
    Ok(())
}

async fn bot_turn(
    store: &JsonlStore,
    thread: &ThreadId,
    trigger: u64,
) -> Result<(), roundtable::thread_stream::StoreError> {
    let bot = "archive-bot";
    let turn: std::sync::Arc<str> = format!("turn-{}", roundtable::providers::now_millis()).into();
    store
        .append(
            thread,
            Expect::Any,
            vec![NewEntry::new(
                bot,
                EntryBody::TurnStarted(TurnStarted {
                    turn: turn.clone(),
                    trigger: Some(trigger),
                    depth: 1,
                    reason: Some("mention".into()),
                }),
            )],
        )
        .await?;
    let answer = [
        "The launch ",
        "moved to ",
        "the 21st ",
        "(decided on Monday).",
    ];
    for piece in answer {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let chunk = Chunk::text(turn.clone(), piece);
        store
            .append(
                thread,
                Expect::Any,
                vec![NewEntry::new(bot, EntryBody::Chunk(chunk))],
            )
            .await?;
    }
    let mut message = AssistantMessage::empty(
        "scripted",
        "scripted",
        "scripted-1",
        roundtable::providers::now_millis(),
    );
    message.content.push(AssistantBlock::text(answer.concat()));
    let done = vec![
        NewEntry::new(
            bot,
            EntryBody::Assistant(AssistantEntry::new(Some(turn.clone()), message)),
        ),
        NewEntry::new(
            bot,
            EntryBody::TurnEnded(TurnEnded {
                turn,
                reason: "stop".into(),
            }),
        ),
    ];
    store.append(thread, Expect::Any, done).await?;
    Ok(())
}

fn print_entry(entry: &Entry) {
    let what = match &entry.body {
        EntryBody::Chat(c) => format!("says {:?}", &*c.text),
        EntryBody::Chunk(c) => format!("streams {:?}", &*c.delta),
        EntryBody::Assistant(a) => format!("answers {:?}", a.message().text()),
        EntryBody::TurnStarted(t) => {
            format!("starts {} (woken by #{})", t.turn, t.trigger.unwrap_or(0))
        }
        EntryBody::TurnEnded(t) => format!("ends {} ({})", t.turn, t.reason),
        other => other.kind().into_owned(),
    };
    println!("#{:<4} {:<12} {}", entry.seq, entry.author, what);
}
