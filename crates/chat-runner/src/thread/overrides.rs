//! Per-(bot, thread) trigger policy: a host changes how one bot wakes on one
//! thread without changing it elsewhere.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use roundtable_dispatch::{Participant, Role, Roster, Trigger};

/// How long the turn cap of [`TriggerOverride::max_turns_per_hour`] looks back.
pub(crate) const HOUR: Duration = Duration::from_secs(3600);

/// What a host changes about one bot on one thread.
///
/// ```
/// use roundtable_chat_runner::TriggerOverride;
/// use roundtable_dispatch::Trigger;
///
/// let quiet = TriggerOverride::default().trigger(Trigger::Mention).max_turns_per_hour(5);
/// assert_eq!(quiet.trigger, Some(Trigger::Mention));
/// assert!(TriggerOverride::muted().muted);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TriggerOverride {
    /// The trigger mode on this thread instead of the roster's.
    pub trigger: Option<Trigger>,
    /// A muted bot never wakes on this thread, not even when named.
    pub muted: bool,
    /// At most this many turns (`turn.started` entries by the bot in the
    /// thread) in any hour; wakes past the cap are dropped.
    pub max_turns_per_hour: Option<u32>,
}

impl TriggerOverride {
    /// A muted bot.
    pub fn muted() -> Self {
        Self {
            muted: true,
            ..Self::default()
        }
    }

    /// The same override with this trigger mode.
    pub fn trigger(mut self, trigger: Trigger) -> Self {
        self.trigger = Some(trigger);
        self
    }

    /// The same override with an hourly turn cap.
    pub fn max_turns_per_hour(mut self, cap: u32) -> Self {
        self.max_turns_per_hour = Some(cap);
        self
    }
}

/// The roster the dispatcher sees on a thread: the base roster with each
/// overridden bot's trigger replaced (a muted bot becomes `mention`, and its
/// mention wakes are then dropped by [`admits`]).
pub(crate) fn effective_roster(
    base: &Roster,
    overrides: &HashMap<Arc<str>, TriggerOverride>,
) -> Roster {
    if overrides.is_empty() {
        return base.clone();
    }
    let participants: Vec<Participant> = base
        .participants()
        .iter()
        .map(|p| {
            let mut p = p.clone();
            if let (Role::Bot(profile), Some(o)) = (&mut p.role, overrides.get(&p.id)) {
                if o.muted {
                    profile.trigger = Trigger::Mention;
                } else if let Some(trigger) = o.trigger {
                    profile.trigger = trigger;
                }
            }
            p
        })
        .collect();
    // Same ids and names as a valid roster: this cannot fail, but keep the
    // base roster if it ever did.
    Roster::new(participants).unwrap_or_else(|_| base.clone())
}

/// True when the override lets a wake of its bot through, given the times
/// (Unix ms) of the bot's turns on the thread.
pub(crate) fn admits(o: Option<&TriggerOverride>, turn_times: &[i64], now: i64) -> bool {
    let Some(o) = o else {
        return true;
    };
    if o.muted {
        return false;
    }
    if let Some(cap) = o.max_turns_per_hour {
        let since = now - HOUR.as_millis() as i64;
        let recent = turn_times.iter().filter(|&&at| at > since).count();
        if recent >= cap as usize {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use roundtable_dispatch::BotProfile;

    use super::*;

    #[test]
    fn overrides_change_one_bot() {
        let base = Roster::new([
            Participant::human("u", "Alice"),
            Participant::bot("b", "B", BotProfile::new(Trigger::Mention, "p")),
            Participant::bot("c", "C", BotProfile::new(Trigger::Mention, "p")),
        ])
        .unwrap();
        let mut o = HashMap::new();
        o.insert(
            Arc::from("b"),
            TriggerOverride::default().trigger(Trigger::Always),
        );
        o.insert(Arc::from("c"), TriggerOverride::muted());
        let roster = effective_roster(&base, &o);
        let trigger = |id| roster.get(id).unwrap().bot_profile().unwrap().trigger;
        assert_eq!(trigger("b"), Trigger::Always);
        assert_eq!(trigger("c"), Trigger::Mention);
        assert_eq!(
            base.get("b").unwrap().bot_profile().unwrap().trigger,
            Trigger::Mention
        );
    }

    #[test]
    fn mute_and_cap() {
        let now = 10 * 3_600_000;
        assert!(admits(None, &[], now));
        assert!(!admits(Some(&TriggerOverride::muted()), &[], now));
        let capped = TriggerOverride::default().max_turns_per_hour(2);
        assert!(admits(Some(&capped), &[now - 10], now));
        assert!(!admits(Some(&capped), &[now - 20, now - 10], now));
        let old = now - 3_600_001;
        assert!(admits(Some(&capped), &[old, now - 10], now));
    }
}
