//! Keep-alive comments on an event stream: a comment whenever a while
//! passes without a frame, so that proxies and clients see a live
//! connection. Comments are not events: they are never stored or replayed.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use futures::Stream;

/// The keep-alive comment sent while nothing happens.
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// `frames` with a keep-alive comment whenever `interval` passes without
/// a frame, so that proxies and clients see a live connection. The frames'
/// stream is never dropped mid-way for a comment: it is polled again.
pub(crate) struct KeptAlive<S> {
    frames: Pin<Box<S>>,
    interval: Duration,
    quiet: Pin<Box<tokio::time::Sleep>>,
}

impl<S> KeptAlive<S> {
    pub(crate) fn new(frames: S, interval: Duration) -> Self {
        Self {
            frames: Box::pin(frames),
            interval,
            quiet: Box::pin(tokio::time::sleep(interval)),
        }
    }

    fn restart(&mut self) {
        let next = tokio::time::Instant::now() + self.interval;
        self.quiet.as_mut().reset(next);
    }
}

impl<S: Stream<Item = Bytes>> Stream for KeptAlive<S> {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.frames.as_mut().poll_next(cx) {
            Poll::Ready(Some(frame)) => {
                self.restart();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.quiet.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.restart();
                    Poll::Ready(Some(Ok(Bytes::from_static(KEEP_ALIVE))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
