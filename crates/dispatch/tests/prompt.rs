//! The per-bot system prompt.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use roundtable_dispatch::{DispatchError, ThreadContext, system_prompt};
use roundtable_test_support::roster::*;

#[test]
fn persona_then_context_then_roster() {
    let roster = cast(&["alice", "arch", "watch", "rusty", "poet"]);
    let context = ThreadContext::new("support-42")
        .with_title("Support")
        .with_description("Customer questions about the archive.");
    let prompt = system_prompt("arch", &roster, &context).unwrap();
    let expected = "\
You are Archive Bot.

<thread_context>
Thread: Support (id support-42)
Customer questions about the archive.
</thread_context>

<agent_roster>
You are Archive Bot (@archive-bot), a bot in a thread shared by several participants. \
What others say reaches you as user turns labelled with the speaker's name, like \"[Alice]: hello\"; \
your own earlier replies are your assistant turns. Reply without a label. \
To address someone, write their @handle; a bot hears you only as it is set to below.

Humans:
- Alice (@alice)

Bots:
- Archive Bot (@archive-bot) (you). Wakes when addressed as @archive-bot.
- Watcher (@watcher). Reads every message and may answer any.
- Rusty (@rusty). Joins in on its topics (rust), or when addressed as @rusty.
- Poet (@poet). Joins in when it has something to add, or when addressed as @poet.
</agent_roster>
";
    assert_eq!(prompt, expected);
}

#[test]
fn only_bots_in_the_roster_get_a_prompt() {
    let roster = cast(&["alice", "arch"]);
    let context = ThreadContext::new("t");
    assert!(matches!(
        system_prompt("alice", &roster, &context),
        Err(DispatchError::NotABot { .. })
    ));
    assert!(matches!(
        system_prompt("nobody", &roster, &context),
        Err(DispatchError::UnknownParticipant { .. })
    ));
    let prompt = system_prompt("arch", &roster, &context).unwrap();
    assert!(
        prompt.contains("<thread_context>\nThread: t\n</thread_context>"),
        "{prompt}"
    );
}
