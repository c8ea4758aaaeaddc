//! The busy-chat sample's roster and the bot whose view of it is
//! projected, shared by the `dispatch` bench and the allocation counts
//! (`benches/allocations.rs`).

use roundtable_dispatch::{BotProfile, Participant, Roster, Trigger};
use roundtable_test_support::samples::ChatWorkload;

/// The bot whose view is projected.
pub(crate) const SELF: &str = "bot-0";

/// The chat sample's roster: its humans and bots (mention-triggered).
pub(crate) fn workload_roster(w: &ChatWorkload) -> Roster {
    let humans = w
        .humans
        .iter()
        .map(|(id, name)| Participant::human(id.as_str(), name.as_str()));
    let bots = w.bots.iter().map(|(id, name)| {
        Participant::bot(
            id.as_str(),
            name.as_str(),
            BotProfile::new(Trigger::Mention, "You help."),
        )
    });
    Roster::new(humans.chain(bots)).expect("the sample's roster is valid")
}
