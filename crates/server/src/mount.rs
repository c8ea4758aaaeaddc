//! How an API's routes become the router a host mounts. Both APIs finish
//! their routes the same way, so a layer added here reaches both:
//!
//! - an unknown path or method is a JSON error like every other refusal;
//! - a refused request's body is read to its end before the answer (see
//!   [`drain`](crate::drain)), inside the request timeout, so a body that
//!   stops arriving still ends in the timeout's answer;
//! - the request timeout bounds everything up to the handler's answer
//!   (not a response that streams).
//!
//! The routes stay `aide` routes, so the router they make carries their
//! part of the API's document (see [`openapi`](crate::openapi)).

use std::time::Duration;

use aide::axum::ApiRouter;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::{no_route, wrong_method};
use crate::drain::drain_refused_body;
use crate::timeout::request_timeout;

/// `routes` with their fallbacks and layers, given `state` and nested
/// under `prefix`.
pub(crate) fn mount<S>(prefix: &str, routes: ApiRouter<S>, timeout: Duration, state: S) -> ApiRouter
where
    S: Clone + Send + Sync + 'static,
{
    let routes = routes
        .fallback(no_route)
        .layer(axum::middleware::from_fn(method_not_allowed))
        .layer(axum::middleware::from_fn(drain_refused_body))
        .layer(axum::middleware::from_fn_with_state(
            timeout,
            request_timeout,
        ))
        .with_state(state);
    ApiRouter::new().nest(prefix, routes)
}

/// axum's answer to a route asked with a method it does not have is a
/// bare 405: this makes it the API's JSON error (keeping its `Allow`).
pub(crate) async fn method_not_allowed(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let bare = response.status() == StatusCode::METHOD_NOT_ALLOWED
        && !response.headers().contains_key(header::CONTENT_TYPE);
    if !bare {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let mut answer = wrong_method().await.into_response();
    if let Some(allow) = allow {
        answer.headers_mut().insert(header::ALLOW, allow);
    }
    answer
}
