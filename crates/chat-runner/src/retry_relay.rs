//! Retry notices on their way from a provider to the turn loop: a provider
//! announces a retry from inside its stream's poll (possibly on another
//! task), and the model call's loop reports it to the sink in order with
//! the call's other events.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use roundtable_providers::retry::{RetryNotice, RetryObserver};

/// The receiving end of a turn's retry notices. A flag says whether a
/// notice is waiting, so that looking for one between two events of a call
/// (what the loop does for every event) is one atomic load when there is
/// none. Retries are rare: a queue behind a lock, made once per turn, serves
/// them (a channel allocates a block of slots for every turn).
pub(crate) struct RetryRelay {
    shared: Arc<Shared>,
}

struct Shared {
    /// Notices sent and not yet received, in order.
    notices: Mutex<VecDeque<RetryNotice>>,
    /// True while `notices` holds something; changed under its lock only.
    waiting: AtomicBool,
    /// The model call's loop, while its stream is pending.
    waker: AtomicWaker,
}

/// A relay, and the observer to give the provider: it tells `host` (the
/// host's own observer, if any) first, then the relay.
pub(crate) fn retry_relay(host: Option<RetryObserver>) -> (RetryObserver, RetryRelay) {
    let shared = Arc::new(Shared {
        notices: Mutex::new(VecDeque::new()),
        waiting: AtomicBool::new(false),
        waker: AtomicWaker::new(),
    });
    let sender = shared.clone();
    let observer = RetryObserver::new(move |notice| {
        if let Some(host) = &host {
            host.notify(notice);
        }
        {
            let mut notices = sender
                .notices
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            notices.push_back(notice.clone());
            sender.waiting.store(true, Ordering::SeqCst);
        }
        sender.waker.wake();
    });
    (observer, RetryRelay { shared })
}

impl RetryRelay {
    /// A notice already sent, if any.
    #[inline]
    pub(crate) fn try_next(&mut self) -> Option<RetryNotice> {
        if !self.shared.waiting.load(Ordering::SeqCst) {
            return None;
        }
        self.receive()
    }

    /// A notice from the queue, clearing the flag when it is emptied.
    fn receive(&mut self) -> Option<RetryNotice> {
        let mut notices = self
            .shared
            .notices
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let notice = notices.pop_front();
        if notices.is_empty() {
            self.shared.waiting.store(false, Ordering::SeqCst);
        }
        notice
    }

    /// The next notice, registering `cx` to be woken when one is sent.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<RetryNotice> {
        // Registered before looking: a notice sent after the look wakes it.
        self.shared.waker.register(cx.waker());
        match self.try_next() {
            Some(notice) => Poll::Ready(notice),
            None => Poll::Pending,
        }
    }

    /// Drops the notices already sent: they belong to an earlier call.
    pub(crate) fn clear(&mut self) {
        while self.try_next().is_some() {}
    }
}
