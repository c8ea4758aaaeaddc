//! The sessions API, the chat API and the chat page inside your own axum
//! app: the routers behind the security layer, one route of yours beside
//! them, served on loopback. (To run the service as it is, install the
//! `roundtable` binary: `cargo install --path crates/daemon`.)
//!
//! ```text
//! cargo run --example embed        # then open the printed link
//! ```
//!
//! Offline: a scripted model answers every message; sessions live in a
//! temporary folder.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use roundtable::providers::{
    AssistantBlock, AssistantMessage, Context, EventStream, Model, OPENAI_COMPLETIONS, Provider,
    ScriptStep, StreamOptions, now_millis, script_events,
};
use roundtable::server::{
    AccessToken, ChatApi, HostToken, Security, ServeLimits, SessionsApi, app_router, serve,
};
use roundtable::sessions::SessionEngine;
use roundtable::thread_stream::JsonlStore;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = tempfile::tempdir()?;
    let store = Arc::new(JsonlStore::open(data.path()).await?);
    let model = Model::new(OPENAI_COMPLETIONS, "offline", "scripted", "");
    let engine = SessionEngine::builder(store, Arc::new(Hello), model).build();

    let addr: std::net::SocketAddr = "127.0.0.1:8788".parse()?;
    let token = AccessToken::generate()?;
    let chat = ChatApi::new(engine.clone()).workspace(std::env::current_dir()?);
    // Your own routes sit beside roundtable's, behind the same checks.
    let app = app_router(SessionsApi::new(engine), chat)
        .merge(Router::new().route("/hello", get(|| async { "hello" })));
    let app = Security::new(addr, HostToken::new(token.clone())).protect(app);

    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("open http://{addr}/?token={}", token.secret());
    serve(listener, app, ServeLimits::default(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}

/// The model of the example: it greets whatever it is told.
struct Hello;

impl Provider for Hello {
    fn stream(&self, model: &Model, _context: &Context, _options: &StreamOptions) -> EventStream {
        let mut reply = AssistantMessage::for_model(model, now_millis());
        reply
            .content
            .push(AssistantBlock::text("Hello from an embedded roundtable."));
        Box::pin(futures::stream::iter(script_events(
            ScriptStep::Reply(reply),
            16,
        )))
    }
}
