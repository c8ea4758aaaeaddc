//! What the store benches share: the mix of entries they append and replay.

use roundtable::providers::{AssistantBlock, AssistantMessage};
use roundtable::thread_stream::{AssistantEntry, EntryBody, NewEntry};

/// Entry `i` of a realistic thread: mostly chat lines from three humans, every
/// fourth an assistant message with usage.
pub fn entry(i: usize) -> NewEntry {
    if i % 4 == 3 {
        let mut m = AssistantMessage::empty(
            "openai-completions",
            "openai",
            "gpt-4o-mini",
            1_731_000_000_000,
        );
        m.content.push(AssistantBlock::text(
            "Here is what I found in the archive: the launch moved to the 21st after Monday's review.",
        ));
        m.usage.input = 812;
        m.usage.output = 41;
        m.usage.total_tokens = 853;
        NewEntry::new(
            "archive-bot",
            EntryBody::Assistant(AssistantEntry {
                turn: Some("turn-1".into()),
                message: m.into(),
            }),
        )
    } else {
        NewEntry::new(
            ["alice", "bob", "carol"][i % 3],
            EntryBody::chat(format!(
                "message {i}: did anyone check the launch date with the release team?"
            )),
        )
    }
}
