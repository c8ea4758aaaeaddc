//! A task's own wake-ups, answered inside the task.
//!
//! A turn's driver runs the turn loop, its writer and its watcher in one
//! task, so most of what wakes that task comes from the task itself: each
//! event the loop emits wakes the writer's loop, each append wakes the
//! watcher, each stored entry the state's waiters. Tokio answers the
//! wake-up of a task in the middle of its own poll by putting it back in
//! its worker's queue as if it had yielded, and a yield wakes an idle
//! worker thread to share the queue: on a small runtime, a thread woken
//! (and parked again) for every event of the turn, for nothing.
//! [`own_wakes_in_place`] polls the future again at once when it was woken
//! during its own poll, and hands on to the task only the wake-ups that
//! come while it is not being polled (a blocking read that ended, another
//! caller's append, a timer).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// The future is not being polled: a wake-up goes to the task.
const IDLE: u8 = 0;
/// The future is being polled: a wake-up asks for another poll.
const POLLING: u8 = 1;
/// The future was woken during its poll: it is polled again.
const WOKEN: u8 = 2;

/// How many times in a row one poll of the task polls the future again
/// before it yields to the scheduler instead (a future that keeps waking
/// itself must not hold its worker).
const POLLS_IN_PLACE: usize = 32;

/// Runs `future`, answering its wake-ups during its own poll by polling it
/// again at once rather than by rescheduling the task (see the module).
/// The output and every wake-up from outside are the same as `future`'s.
pub(crate) async fn own_wakes_in_place<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let wakes = Arc::new(OwnWakes {
        state: AtomicU8::new(IDLE),
        task: AtomicWaker::new(),
    });
    let waker = Waker::from(wakes.clone());
    std::future::poll_fn(|cx| wakes.poll(cx, &waker, future.as_mut())).await
}

/// The waker the future is polled with.
struct OwnWakes {
    state: AtomicU8,
    /// The task's own waker, for the wake-ups from outside a poll.
    task: AtomicWaker,
}

impl OwnWakes {
    fn poll<F: Future>(
        &self,
        cx: &mut Context<'_>,
        waker: &Waker,
        mut future: Pin<&mut F>,
    ) -> Poll<F::Output> {
        self.task.register(cx.waker());
        let mut inner = Context::from_waker(waker);
        for _ in 0..POLLS_IN_PLACE {
            // Set before the poll: a wake-up from here on asks for another.
            self.state.store(POLLING, Ordering::SeqCst);
            if let Poll::Ready(output) = future.as_mut().poll(&mut inner) {
                self.state.store(IDLE, Ordering::SeqCst);
                return Poll::Ready(output);
            }
            if self
                .state
                .compare_exchange(POLLING, IDLE, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // Not woken during the poll: the next wake-up wakes the task.
                return Poll::Pending;
            }
            // Woken during the poll. A future woken because the task's
            // budget ran out (tokio's cooperative scheduling) waits for the
            // next poll of the task.
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        self.state.store(IDLE, Ordering::SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Wake for OwnWakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut state = self.state.load(Ordering::SeqCst);
        loop {
            match state {
                // The poll running now polls again.
                POLLING => match self.state.compare_exchange_weak(
                    POLLING,
                    WOKEN,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(_) => return,
                    Err(now) => state = now,
                },
                WOKEN => return,
                _ => {
                    self.task.wake();
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A future that wakes itself `times` times during its polls, then ends.
    struct WakesItself {
        times: usize,
        polls: Arc<AtomicUsize>,
    }

    impl Future for WakesItself {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.times == 0 {
                return Poll::Ready(());
            }
            self.times -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// Counts the wake-ups of the task that polls it.
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_wake_up_during_the_poll_polls_again_without_waking_the_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        let mut running = std::pin::pin!(own_wakes_in_place(WakesItself {
            times: 3,
            polls: polls.clone(),
        }));
        assert!(running.as_mut().poll(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 4);
        assert_eq!(counted.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_yields_to_the_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        let mut running = std::pin::pin!(own_wakes_in_place(WakesItself {
            times: POLLS_IN_PLACE + 1,
            polls: polls.clone(),
        }));
        assert!(running.as_mut().poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), POLLS_IN_PLACE);
        assert_eq!(counted.0.load(Ordering::SeqCst), 1);
        assert!(running.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_wake_up_between_polls_wakes_the_task() {
        let counted = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        let (tx, rx) = futures::channel::oneshot::channel();
        let mut running = std::pin::pin!(own_wakes_in_place(rx));
        assert!(running.as_mut().poll(&mut cx).is_pending());
        assert_eq!(counted.0.load(Ordering::SeqCst), 0);
        tx.send(7).unwrap();
        assert_eq!(counted.0.load(Ordering::SeqCst), 1);
        assert_eq!(running.as_mut().poll(&mut cx), Poll::Ready(Ok(7)));
    }
}
