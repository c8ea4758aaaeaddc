//! Security on by default, as one value a host applies to its whole router:
//! the `Host` and `Origin` checks, CORS for the origins the host allows,
//! and the token check, in that order; and the rule that a server other
//! machines can reach needs a token somebody chose.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::{Auth, Authenticator, authenticate};
use crate::error::ServerError;
use crate::guard::{Guard, check_host_and_origin, normalise_origin};
use crate::headers::{IDEMPOTENCY_KEY, LAST_EVENT_ID};
use crate::token::{AccessToken, TokenOrigin};

/// How a server checks its requests. Build it with the address the
/// server is bound to and an [`Authenticator`], then
/// [`protect`](Self::protect) the router.
///
/// ```
/// use roundtable_server::{AccessToken, Security, HostToken};
/// use axum::{Router, routing::get};
///
/// let token = AccessToken::new("0123456789abcdef").unwrap();
/// let app: Router = Security::new("127.0.0.1:8787".parse().unwrap(), HostToken::new(token))
///     .allow_origin("http://localhost:3000")
///     .unwrap()
///     .protect(Router::new().route("/hello", get(|| async { "hi" })));
/// ```
#[derive(Clone)]
pub struct Security {
    authenticator: Arc<dyn Authenticator>,
    bound: SocketAddr,
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("bound", &self.bound)
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

impl Security {
    /// Checks for a server bound to `bound`, whose tokens `authenticator`
    /// maps to callers. Requests must name a loopback host or the bound
    /// address, and come from no other origin than the server's own.
    pub fn new(bound: SocketAddr, authenticator: impl Authenticator) -> Self {
        Self {
            authenticator: Arc::new(authenticator),
            bound,
            hosts: Vec::new(),
            origins: Vec::new(),
        }
    }

    /// Also answers to the host name `name` (the machine's name on its
    /// network, a name a proxy forwards).
    pub fn allow_host(mut self, name: impl AsRef<str>) -> Self {
        let name = name
            .as_ref()
            .trim()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        self.hosts.push(name);
        self
    }

    /// Also accepts browser requests from pages on `origin`
    /// (`scheme://host[:port]`), answering their CORS preflights.
    pub fn allow_origin(mut self, origin: &str) -> Result<Self, ServerError> {
        self.origins.push(normalise_origin(origin)?);
        Ok(self)
    }

    /// The name of the cookie a browser signs in with: one per port, since
    /// browsers share cookies between the ports of a host.
    pub fn cookie_name(&self) -> String {
        format!("roundtable_token_{}", self.bound.port())
    }

    /// `router`, behind the checks: every route and the fallback present
    /// in it (add them first) answer only requests that pass.
    pub fn protect(self, router: Router) -> Router {
        let auth = Arc::new(Auth {
            cookie_name: self.cookie_name(),
            authenticator: self.authenticator,
        });
        let guard = Arc::new(Guard {
            bound: self.bound.ip(),
            hosts: self.hosts,
            origins: self.origins,
        });
        let mut router = router.layer(axum::middleware::from_fn_with_state(auth, authenticate));
        if let Some(cors) = cors(&guard.origins) {
            // Outside the token check: a preflight carries no token.
            router = router.layer(cors);
        }
        router.layer(axum::middleware::from_fn_with_state(
            guard,
            check_host_and_origin,
        ))
    }
}

/// CORS for the allowed origins (none when there are none: the server's
/// own pages need none).
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    let headers: [HeaderName; 4] = [
        header::AUTHORIZATION,
        header::CONTENT_TYPE,
        LAST_EVENT_ID,
        IDEMPOTENCY_KEY,
    ];
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods([Method::GET, Method::POST, Method::PUT])
            .allow_headers(headers)
            .allow_credentials(true),
    )
}

/// Refuses to serve on `addr` when other machines can reach it and the
/// token was generated rather than chosen: a server is exposed on purpose
/// or not at all.
pub fn check_bind(addr: SocketAddr, token: &AccessToken) -> Result<(), ServerError> {
    if addr.ip().is_loopback() || token.origin() == TokenOrigin::Explicit {
        Ok(())
    } else {
        Err(ServerError::PublicBindWithoutToken { addr })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_public_bind_needs_an_explicit_token() {
        let generated = AccessToken::generate().unwrap();
        let explicit = AccessToken::new("0123456789abcdef").unwrap();
        let loopback: SocketAddr = "127.0.0.1:8787".parse().unwrap();
        let v6: SocketAddr = "[::1]:8787".parse().unwrap();
        let all: SocketAddr = "0.0.0.0:8787".parse().unwrap();
        let lan: SocketAddr = "192.168.1.10:8787".parse().unwrap();
        assert!(check_bind(loopback, &generated).is_ok());
        assert!(check_bind(v6, &generated).is_ok());
        for public in [all, lan] {
            assert!(matches!(
                check_bind(public, &generated),
                Err(ServerError::PublicBindWithoutToken { .. })
            ));
            assert!(check_bind(public, &explicit).is_ok());
        }
    }
}
