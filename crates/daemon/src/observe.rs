//! What an operator watches: log lines (`tracing-subscriber`, text or
//! JSON), Prometheus metrics (the `metrics` facade the libraries record
//! into, rendered by `metrics-exporter-prometheus`), one log line and one
//! sample per request, and the health routes a load balancer polls.
//!
//! A request is logged by its route template (`/v1/sessions/{id}`), never
//! its URI, whose query may carry a sign-in token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use roundtable_sessions::Caller;
use roundtable_thread_stream::{ThreadId, ThreadStore};
use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the log subscriber: `RUST_LOG` when set, else the configured
/// filter; lines to stderr.
pub(crate) fn init_logs(config: &LogConfig) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(filter) if !filter.is_empty() => EnvFilter::try_new(filter),
        _ => EnvFilter::try_new(&config.filter),
    }
    .map_err(|e| format!("bad log filter: {e}"))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let installed = match config.format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
    installed.map_err(|e| format!("cannot install the logger: {e}"))
}

/// Seconds buckets of the latency histograms: from a fast first token to
/// a long tool call.
const SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Installs the process's metrics recorder; its handle renders the
/// Prometheus text.
pub(crate) fn init_metrics() -> Result<PrometheusHandle, String> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| format!("cannot install the metrics recorder: {e}"))
}

/// Logs and counts every request by method, route and status, with its
/// duration (for a stream: until its headers).
pub(crate) async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    tracing::info!(
        method = %method,
        route = %route,
        status,
        duration_ms = elapsed.as_secs_f64() * 1000.0,
        "request"
    );
    let labels = [
        ("method", method.to_string()),
        ("route", route),
        ("status", status.to_string()),
    ];
    metrics::counter!("roundtable_http_requests_total", &labels).increment(1);
    metrics::histogram!("roundtable_http_request_duration_seconds", &labels)
        .record(elapsed.as_secs_f64());
    response
}

/// `GET /healthz` (the process answers) and `GET /readyz` (its store
/// answers too), for load balancers: no token, no detail.
pub(crate) fn health_router(store: Arc<dyn ThreadStore>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json::ok() }))
        .route("/readyz", get(ready))
        .with_state(store)
}

/// How long `/readyz` waits for the store.
const READY_WAIT: Duration = Duration::from_secs(2);

async fn ready(State(store): State<Arc<dyn ThreadStore>>) -> Response {
    let probe = ThreadId::new("readyz").ok();
    let answered = match probe {
        Some(thread) => tokio::time::timeout(READY_WAIT, store.last_seq(&thread)).await,
        None => return Json::unavailable(),
    };
    match answered {
        Ok(Ok(_)) => Json::ok(),
        Ok(Err(error)) => {
            tracing::warn!(%error, "not ready: the store failed");
            Json::unavailable()
        }
        Err(_) => {
            tracing::warn!("not ready: the store did not answer in time");
            Json::unavailable()
        }
    }
}

/// The bodies of the health routes.
struct Json;

impl Json {
    fn ok() -> Response {
        axum::Json(serde_json::json!({"status": "ok"})).into_response()
    }

    fn unavailable() -> Response {
        let body = serde_json::json!({"error": {"code": "not_ready", "message": "the store does not answer"}});
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
    }
}

/// `GET /metrics` for the admin token's holder only (a user's token gets
/// a 403).
pub(crate) fn admin_metrics_router(handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(admin_metrics))
        .with_state(handle)
}

async fn admin_metrics(
    State(handle): State<PrometheusHandle>,
    caller: Option<axum::Extension<Caller>>,
) -> Response {
    match caller.as_deref() {
        Some(Caller::Host) => render(&handle),
        _ => {
            let body = serde_json::json!({"error": {"code": "forbidden", "message": "the metrics need the admin token"}});
            (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
        }
    }
}

/// `GET /metrics` with no token, for a listener of its own.
pub(crate) fn open_metrics_router(handle: PrometheusHandle) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(h): State<PrometheusHandle>| async move { render(&h) }),
        )
        .with_state(handle)
}

fn render(handle: &PrometheusHandle) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}
