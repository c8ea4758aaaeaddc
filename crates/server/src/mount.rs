//! How an API's routes become the router a host mounts. Both APIs finish
//! their routes the same way, so a layer added here reaches both:
//!
//! - an unknown path or method is a JSON error like every other refusal;
//! - a refused request's body is read to its end before the answer (see
//!   [`drain`](crate::drain)), inside the request timeout, so a body that
//!   stops arriving still ends in the timeout's answer;
//! - the request timeout bounds everything up to the handler's answer
//!   (not a response that streams).

use std::time::Duration;

use axum::Router;

use crate::api_error::{no_route, wrong_method};
use crate::drain::drain_refused_body;
use crate::timeout::request_timeout;

/// `routes` with their fallbacks and layers, given `state` and nested
/// under `prefix`.
pub(crate) fn mount<S>(prefix: &str, routes: Router<S>, timeout: Duration, state: S) -> Router
where
    S: Clone + Send + Sync + 'static,
{
    let routes = routes
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn(drain_refused_body))
        .layer(axum::middleware::from_fn_with_state(
            timeout,
            request_timeout,
        ))
        .with_state(state);
    Router::new().nest(prefix, routes)
}
