//! A host's reader of a followed thread's entries, called in the thread's
//! order before each entry is dispatched.

use roundtable_thread_stream::Entry;

use super::ThreadRunner;

/// Reads every entry of the threads a [`ThreadRunner`] follows, in seq
/// order, before the dispatcher sees it (history too, when a thread is
/// resumed). A host whose threads carry their own roster (rooms, where
/// joins, leaves and overrides are entries) sets it here, so every runner
/// over the store dispatches each entry with the roster the thread held
/// at that point, whichever process wrote the change.
///
/// It runs on the follower's task: it should only fold the entry and call
/// the runner's synchronous setters ([`ThreadRunner::set_roster`],
/// [`ThreadRunner::set_override`], [`ThreadRunner::clear_override`]).
pub trait EntryObserver: Send + Sync {
    /// Called once per entry of a followed thread, before its dispatch.
    fn observe(&self, runner: &ThreadRunner, entry: &Entry);
}
