//! Refused request bodies are read to their end before the refusal goes
//! out. A route that refuses a request without reading all of its body
//! (413 at the body limit, 404 for an unknown session, 400 for a bad
//! header) leaves the rest unread; the HTTP server then closes the
//! connection after the answer, and a client still writing that body meets
//! a reset connection instead of the answer (a browser shows a network
//! error, not the JSON error). Reading the rest first, and dropping it,
//! lets every client read why it was refused.
//!
//! Draining is bounded, in bytes and in time, so a client cannot keep the
//! server reading: past either bound the connection is closed as before.
//! It costs no memory (what is read is dropped), and it runs inside the
//! request timeout, so a body that stops arriving still ends in the
//! timeout's answer.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// The most a refused body is read for before the connection is closed.
pub(crate) const DRAIN_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The longest a refused body is read for before the connection is closed.
pub(crate) const DRAIN_MAX_TIME: Duration = Duration::from_secs(2);

/// The middleware: hands the route a body it can read as usual, and reads
/// what the route left of it when the answer is a client error.
pub(crate) async fn drain_refused_body(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let slot = Arc::new(Mutex::new(Some(body)));
    let shared = Body::new(SharedBody { slot: slot.clone() });
    let response = next.run(Request::from_parts(parts, shared)).await;
    if response.status().is_client_error() {
        let rest = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(rest) = rest {
            drain(rest).await;
        }
    }
    response
}

/// Reads `body` to its end, dropping what it reads, within the bounds.
async fn drain(body: Body) {
    let mut stream = body.into_data_stream();
    let mut read: u64 = 0;
    let deadline = tokio::time::Instant::now() + DRAIN_MAX_TIME;
    while read <= DRAIN_MAX_BYTES {
        match tokio::time::timeout_at(deadline, futures::StreamExt::next(&mut stream)).await {
            Ok(Some(Ok(data))) => read += data.len() as u64,
            // The end, a broken body or the time is up.
            Ok(Some(Err(_)) | None) | Err(_) => return,
        }
    }
}

/// The request's body as the route reads it, while the middleware keeps
/// hold of what the route does not read.
struct SharedBody {
    slot: Arc<Mutex<Option<Body>>>,
}

impl http_body::Body for SharedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        let slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref()
            .map_or_else(|| SizeHint::with_exact(0), http_body::Body::size_hint)
    }
}
