//! Retry notices on their way from a provider to the turn loop: a provider
//! announces a retry from inside its stream's poll (possibly on another
//! task), and the model call's loop reports it to the sink in order with
//! the call's other events.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use roundtable_providers::{RetryNotice, RetryObserver};
use tokio::sync::mpsc::{self, UnboundedReceiver};

/// The receiving end of a turn's retry notices. A flag says whether a
/// notice may be waiting, so that looking for one between two events of a
/// call (what the loop does for every event) is one atomic load when there
/// is none, not a receive on the channel.
pub(crate) struct RetryRelay {
    notices: UnboundedReceiver<RetryNotice>,
    /// Set by the sender after each notice; cleared once the channel was
    /// found empty.
    waiting: Arc<AtomicBool>,
}

/// A relay, and the observer to give the provider: it tells `host` (the
/// host's own observer, if any) first, then the relay.
pub(crate) fn retry_relay(host: Option<RetryObserver>) -> (RetryObserver, RetryRelay) {
    let (sender, notices) = mpsc::unbounded_channel::<RetryNotice>();
    let waiting = Arc::new(AtomicBool::new(false));
    let flag = waiting.clone();
    let observer = RetryObserver::new(move |notice| {
        if let Some(host) = &host {
            host.notify(notice);
        }
        if sender.send(notice.clone()).is_ok() {
            flag.store(true, Ordering::SeqCst);
        }
    });
    (observer, RetryRelay { notices, waiting })
}

impl RetryRelay {
    /// A notice already sent, if any.
    #[inline]
    pub(crate) fn try_next(&mut self) -> Option<RetryNotice> {
        if !self.waiting.load(Ordering::SeqCst) {
            return None;
        }
        self.receive()
    }

    /// A notice from the channel, clearing the flag when there is none.
    fn receive(&mut self) -> Option<RetryNotice> {
        if let Ok(notice) = self.notices.try_recv() {
            return Some(notice);
        }
        self.waiting.store(false, Ordering::SeqCst);
        // A notice sent between the empty receive and the clearing would
        // have its flag cleared: look once more.
        let notice = self.notices.try_recv().ok();
        if notice.is_some() {
            self.waiting.store(true, Ordering::SeqCst);
        }
        notice
    }

    /// The next notice, registering `cx` to be woken when one is sent.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<RetryNotice>> {
        self.notices.poll_recv(cx)
    }

    /// Drops the notices already sent: they belong to an earlier call.
    pub(crate) fn clear(&mut self) {
        while self.try_next().is_some() {}
    }
}
