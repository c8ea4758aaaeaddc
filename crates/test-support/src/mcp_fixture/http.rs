//! The fixture over streamable HTTP on a loopback port, and an endpoint
//! that never answers.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::server::{FixtureOptions, FixtureServer, FixtureState};

/// The fixture served over streamable HTTP at [`url`](Self::url) until dropped.
#[derive(Debug)]
pub struct HttpFixture {
    /// The endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// What its sessions share (cancelled calls, added tools).
    pub state: Arc<FixtureState>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl HttpFixture {
    /// Serves a fixture with `options` on a free loopback port.
    pub async fn start(options: FixtureOptions) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr: SocketAddr = listener.local_addr()?;
        let state = Arc::new(FixtureState::default());
        let stop = CancellationToken::new();
        let factory_state = state.clone();
        let service = StreamableHttpService::new(
            move || Ok(FixtureServer::new(factory_state.clone(), &options)),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token()),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let shutdown = stop.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
        });
        Ok(Self {
            url: format!("http://{addr}/mcp"),
            state,
            stop,
            task,
        })
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

/// A loopback endpoint that accepts connections and never answers: a
/// server that hangs before its handshake.
#[derive(Debug)]
pub struct SilentHttpServer {
    /// Its URL.
    pub url: String,
    task: JoinHandle<()>,
}

impl SilentHttpServer {
    /// Listens on a free loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        Ok(Self { url, task })
    }
}

impl Drop for SilentHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
