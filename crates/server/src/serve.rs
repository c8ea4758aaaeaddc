//! The connection loop a host serves its router with: HTTP/1.1 over TCP,
//! with the bounds a server facing hostile clients needs.
//!
//! A connection that sends nothing, or half a request head, holds a file
//! descriptor for as long as the server lets it. Without bounds, a few
//! thousand such connections use up the process's descriptors and
//! nobody else is answered. [`serve`] closes a connection that has not
//! sent a whole request head within [`ServeLimits::header_read_timeout`]
//! (a fresh one, and one waiting in keep-alive between requests alike),
//! and answers the connections beyond [`ServeLimits::max_connections`]
//! with a 503 `overloaded` error instead of holding them. A response that
//! streams (an event stream, an NDJSON answer) is never cut: the timeout
//! only runs while the server waits for a request head.
//!
//! A client that stops reading a stream costs what the server buffers for
//! it: left to itself, the kernel grows a connection's send buffer up to
//! megabytes. Each connection's send buffer is fixed
//! ([`ServeLimits::send_buffer`]), hyper queues at most [`WRITE_QUEUE`]
//! bytes above it, and a connection whose writes have been blocked for
//! [`ServeLimits::write_stall_timeout`] is closed: an event stream's client
//! resumes after the last event it read (`Last-Event-ID`), losing nothing,
//! since every event comes from the store.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_io_timeout::TimeoutStream;

use crate::api_error::{ApiError, ErrorCode};

/// How many refused connections may be answered at once; past that, a
/// refused connection is closed without an answer, so that refusing costs
/// a bounded number of descriptors too.
const REFUSALS_IN_FLIGHT: usize = 64;

/// How long a refused connection is given to send its request head, and
/// then kept to read what its client still sends, so that closing it does
/// not reset the connection before the client read the answer.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// How much of a refused connection's request head is read before it is
/// answered all the same.
const REFUSAL_HEAD_BYTES: usize = 16 * 1024;

/// The most bytes of responses hyper queues for a connection above its
/// socket's send buffer (hyper's smallest allowed is 8 KiB, its default
/// 400 KiB); one frame larger than it is still queued whole.
pub const WRITE_QUEUE: usize = 64 * 1024;

/// How long to wait before accepting again after the listener failed for
/// want of resources (no descriptor left): retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The bounds [`serve`] holds its connections to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// How long a connection may take to send a whole request head,
    /// counted from when the server starts waiting for it: from the
    /// connection's start, or from the end of the previous response on a
    /// connection kept alive. A connection idle that long is closed, so
    /// this is also the keep-alive idle timeout. It does not run while a
    /// response is sent, however long it streams.
    pub header_read_timeout: Duration,
    /// How many connections are served at once. A connection beyond it is
    /// answered with a 503 `overloaded` error and closed; keep it below
    /// the process's open-files limit, less what the host's store needs.
    pub max_connections: usize,
    /// How long a connection's writes may stay blocked (its client reads
    /// nothing while the buffers are full) before it is closed. An event
    /// stream's client then resumes after the last event it read.
    pub write_stall_timeout: Duration,
    /// The send buffer of each connection's socket, in bytes (the kernel
    /// doubles it for its bookkeeping); 0 leaves the kernel's own sizing,
    /// which grows up to megabytes for a client that stops reading.
    pub send_buffer: usize,
    /// How long [`serve`] waits, once asked to stop, for the responses in
    /// progress to end before it drops their connections (an event stream
    /// never ends by itself).
    pub shutdown_grace: Duration,
}

impl Default for ServeLimits {
    /// A 20 s head timeout (a slow mobile client sends a head well within
    /// it), 768 connections (under the usual soft limit of 1024 open
    /// files, with room for the store's), writes blocked 30 s at most, a
    /// 64 KiB send buffer (many events of a stream, one large answer's
    /// worth) and 10 s of grace at shutdown.
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(20),
            max_connections: 768,
            write_stall_timeout: Duration::from_secs(30),
            send_buffer: 64 * 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves,
/// then stops accepting, lets the responses in progress end (for
/// [`ServeLimits::shutdown_grace`] at most) and returns.
///
/// Every connection gets `TCP_NODELAY`: a streamed event leaves at once,
/// not after the client's delayed ACK of the previous one. Pass
/// [`std::future::pending()`] as `shutdown` to serve until the task is
/// dropped (which closes every connection).
pub async fn serve<F>(listener: TcpListener, app: Router, limits: ServeLimits, shutdown: F)
where
    F: Future<Output = ()> + Send,
{
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(WRITE_QUEUE);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSALS_IN_FLIGHT));
    let refusal: Arc<[u8]> = refusal_response(limits.max_connections).into();
    let graceful = GracefulShutdown::new();
    let mut tasks = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(error) => {
                    if !is_connection_error(&error) {
                        tracing::warn!(%error, "cannot accept a connection");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    continue;
                }
            },
        };
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                let connection = connection(&http, &graceful, &app, &limits, tcp, permit);
                tasks.spawn(connection);
            }
            Err(_) => {
                if let Ok(permit) = refusals.clone().try_acquire_owned() {
                    tasks.spawn(refuse(tcp, refusal.clone(), permit));
                }
                // Else dropped: closed at once.
            }
        }
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!(
            connections = tasks.len(),
            "closing the connections still open after the shutdown grace"
        );
    }
    tasks.shutdown().await;
}

/// The future serving one connection; it holds `permit` (the connection's
/// slot) until the connection ends.
fn connection(
    http: &http1::Builder,
    graceful: &GracefulShutdown,
    app: &Router,
    limits: &ServeLimits,
    tcp: TcpStream,
    permit: OwnedSemaphorePermit,
) -> impl Future<Output = ()> + Send + 'static {
    if let Err(error) = tcp.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
    }
    if limits.send_buffer > 0
        && let Err(error) = socket2::SockRef::from(&tcp).set_send_buffer_size(limits.send_buffer)
    {
        tracing::debug!(%error, "cannot set the send buffer of a connection");
    }
    let mut io = TimeoutStream::new(tcp);
    io.set_write_timeout(Some(limits.write_stall_timeout));
    let io: Pin<Box<TimeoutStream<TcpStream>>> = Box::pin(io);
    let service = TowerToHyperService::new(app.clone());
    let served = graceful.watch(http.serve_connection(TokioIo::new(io), service));
    async move {
        if let Err(error) = served.await {
            // A client gone, a head not sent in time, writes stalled: the connection's
            // own affair, nothing the server does about it.
            tracing::debug!(%error, "connection ended with an error");
        }
        drop(permit);
    }
}

/// Answers a connection beyond the limit with `response` once its client
/// sent a request head (an answer before the request is a protocol error
/// to an HTTP client), then reads what the client still sends for a moment
/// before closing.
async fn refuse(mut tcp: TcpStream, response: Arc<[u8]>, permit: OwnedSemaphorePermit) {
    // A client that sends no head in time gets the answer all the same.
    let _ = tokio::time::timeout(REFUSAL_LINGER, read_head(&mut tcp)).await;
    let answered = tokio::time::timeout(REFUSAL_LINGER, async {
        tcp.write_all(&response).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 1024];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
    if let Ok(Err(error)) = answered {
        tracing::debug!(%error, "refused connection ended with an error");
    }
    drop(permit);
}

/// Reads until the end of a request head (an empty line), the end of the
/// connection, or [`REFUSAL_HEAD_BYTES`] read.
async fn read_head(tcp: &mut TcpStream) -> std::io::Result<()> {
    let mut buf = [0u8; 2048];
    // The last bytes read, for an empty line split between two reads.
    let mut carry = Vec::with_capacity(buf.len() + 3);
    let mut read = 0;
    while read < REFUSAL_HEAD_BYTES {
        let n = tcp.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        read += n;
        carry.extend_from_slice(&buf[..n]);
        if carry.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        let keep = carry.len().saturating_sub(3);
        carry.drain(..keep);
    }
    Ok(())
}

/// The whole HTTP answer to a connection beyond `max_connections`.
fn refusal_response(max_connections: usize) -> Vec<u8> {
    let body = ApiError::new(
        ErrorCode::Overloaded,
        format!(
            "the server holds as many connections as it allows ({max_connections}); try again shortly"
        ),
    )
    .body()
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether an accept failed for the connection's own sake (its client gave
/// up before it was accepted), not the listener's.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}

/// Raises the process's soft limit of open files to its hard limit, and
/// returns the new soft limit.
///
/// The usual soft limit (1024) is far below what a server holding many
/// event streams needs, while the hard limit a process may raise it to is
/// usually much higher. A daemon calls this at start; a library host
/// decides for itself.
#[cfg(unix)]
pub fn raise_open_files_limit() -> Result<u64, crate::ServerError> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let failed = |errno: nix::errno::Errno| crate::ServerError::OpenFilesLimit(errno.into());
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(failed)?;
    if soft >= hard {
        return Ok(soft);
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => Ok(hard),
        // macOS refuses a soft limit above its own per-process maximum
        // even when the hard limit is "unlimited": keep the soft limit.
        Err(_) if hard == nix::libc::RLIM_INFINITY => Ok(soft),
        Err(errno) => Err(failed(errno)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_refusal_is_a_whole_http_answer_with_a_json_error() {
        let response = String::from_utf8(refusal_response(3)).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "overloaded");
    }
}
