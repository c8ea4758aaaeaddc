//! Where a compaction cuts a bot's view: after whole units, keeping about
//! the newest `keep_recent_tokens` in full, never an open unit, and only
//! where the covered part can be named by one store seq.

use std::ops::Range;

use roundtable_thread_stream::Entry;

use super::units::ViewSplit;

/// Where a compaction cuts, found by [`plan_cut`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionCut {
    /// The store seq the new compaction covers up to (its `upto`).
    pub upto: u64,
    /// The view positions it covers are `0..covered_positions`.
    pub covered_positions: usize,
    /// The units of the split the new summary takes in (those after the
    /// previous compaction and before the cut).
    pub covered_units: Range<usize>,
    /// Their estimated tokens.
    pub covered_tokens: u64,
    /// The estimated tokens of the units kept in full.
    pub kept_tokens: u64,
}

/// Finds where to cut `view` (split by [`split_view`](crate::compaction::split_view))
/// so that about `keep_recent_tokens` of the newest units stay in full:
/// the fewest newest units holding at least that many tokens, and never
/// fewer than one. Returns `None` when nothing can be covered: every unit
/// but the kept ones is open, or there is at most one unit.
///
/// A cut is taken only where
///
/// 1. no unit has entries on both sides of it (a call and its result stay
///    together);
/// 2. every open unit is after it;
/// 3. every entry before it has a lower store seq than every entry after
///    it, so that the covered part is exactly "store seqs up to `upto`"
///    (a view placing a turn where it started has places that are not).
///
/// When the cut the budget asks for is not allowed, an earlier one is
/// taken (more is kept); when there is none, a later one (less is kept
/// than asked, but never an open unit or the newest unit). Nothing kept is
/// ever covered.
pub fn plan_cut(
    view: &[Entry],
    split: &ViewSplit,
    keep_recent_tokens: u64,
) -> Option<CompactionCut> {
    let units = &split.units;
    if units.len() < 2 {
        return None;
    }
    // The first kept unit the budget asks for: the fewest newest units
    // with at least `keep_recent_tokens`, at least the newest one.
    let mut kept = 0u64;
    let mut target = units.len() - 1;
    for (i, unit) in units.iter().enumerate().rev() {
        kept = kept.saturating_add(unit.tokens);
        target = i;
        if kept >= keep_recent_tokens {
            break;
        }
    }
    let target = target.max(1).min(units.len() - 1);
    let first_open = units.iter().position(|u| u.open).unwrap_or(units.len());

    // The highest store seq before each position and the lowest from it on.
    let mut below = Vec::with_capacity(view.len() + 1);
    below.push(0u64);
    for e in view {
        let max = below.last().copied().unwrap_or(0).max(e.seq);
        below.push(max);
    }
    let mut from = vec![u64::MAX; view.len() + 1];
    for (i, e) in view.iter().enumerate().rev() {
        from[i] = from[i + 1].min(e.seq);
    }
    // The last position of units before each index.
    let mut last_before = Vec::with_capacity(units.len() + 1);
    last_before.push(None::<usize>);
    for unit in units {
        let last = last_before.last().copied().flatten();
        last_before.push(Some(last.map_or(unit.last(), |l| l.max(unit.last()))));
    }

    // As late as the budget allows, else earlier (more kept), else later
    // (less kept than asked, rather than no compaction at all).
    let latest = target.min(first_open);
    let later = (target + 1)..first_open.min(units.len() - 1) + 1;
    for k in (1..=latest).rev().chain(later) {
        // Cut before unit k: somewhere after every earlier unit's last entry
        // and at or before unit k's first, as late as allowed.
        let lowest = last_before[k].map_or(split.tail_start, |l| l + 1);
        let highest = units[k].first();
        let Some(cut) = (lowest..=highest)
            .rev()
            .find(|&b| b > split.tail_start && below[b] < from[b])
        else {
            continue;
        };
        let covered_tokens = units[..k]
            .iter()
            .map(|u| u.tokens)
            .fold(0, u64::saturating_add);
        let kept_tokens = units[k..]
            .iter()
            .map(|u| u.tokens)
            .fold(0, u64::saturating_add);
        return Some(CompactionCut {
            upto: below[cut],
            covered_positions: cut,
            covered_units: 0..k,
            covered_tokens,
            kept_tokens,
        });
    }
    None
}
