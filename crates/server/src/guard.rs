//! Refuses requests a browser was tricked into sending: a `Host` the
//! server does not answer to (a DNS-rebinding page whose name now points
//! at loopback), and a cross-origin request from a page on another origin.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::{ApiError, ErrorCode};
use crate::error::ServerError;

/// The names and origins a server answers to.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// The address the server is bound to.
    pub(crate) bound: IpAddr,
    /// Host names allowed besides loopback ones and the bound address,
    /// lowercase.
    pub(crate) hosts: Vec<String>,
    /// Origins allowed besides the server's own, normalised.
    pub(crate) origins: Vec<String>,
}

impl Guard {
    /// True when a request for `host` (a `Host` header: name or address,
    /// with or without a port) is one this server answers.
    ///
    /// An address literal cannot be rebound, so the loopback addresses and
    /// the bound one pass, and any address when the server listens on all
    /// of them; a name must be `localhost` or one the host allowed.
    pub(crate) fn allows_host(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        if let Ok(ip) = name.parse::<IpAddr>() {
            return ip.is_loopback() || ip == self.bound || self.bound.is_unspecified();
        }
        name == "localhost" || self.hosts.contains(&name)
    }

    /// True when a request from a page at `origin` to `host` may proceed:
    /// the page is the server's own (same scheme, host and port), or on an
    /// origin the host allowed.
    pub(crate) fn allows_origin(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        let own = format!("http://{}", host.trim().to_ascii_lowercase());
        origin == own || self.origins.contains(&origin)
    }
}

/// The host name of a `Host` header, lowercase, without its port or a
/// trailing dot; IPv6 literals without their brackets.
fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']')?.0
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            Some(_) => return None,
            None => host,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    (!name.is_empty()).then(|| name.to_ascii_lowercase())
}

/// `origin` normalised (`scheme://host[:port]`, lowercase), or an error
/// when it is not an origin.
pub(crate) fn normalise_origin(origin: &str) -> Result<String, ServerError> {
    let invalid = || ServerError::InvalidOrigin {
        origin: origin.to_string(),
    };
    let lower = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://").ok_or_else(invalid)?;
    if !matches!(scheme, "http" | "https") || rest.contains('/') || host_name(rest).is_none() {
        return Err(invalid());
    }
    Ok(lower)
}

/// The guard layer: checks `Host`, then `Origin` when a browser sent one.
pub(crate) async fn check_host_and_origin(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    let Some(host) = host else {
        return ApiError::new(ErrorCode::InvalidRequest, "the request has no Host header")
            .into_response();
    };
    if !guard.allows_host(&host) {
        return ApiError::new(
            ErrorCode::Forbidden,
            format!("this server does not answer to the host {host:?}"),
        )
        .into_response();
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .is_ok_and(|origin| guard.allows_origin(origin, &host));
        if !allowed {
            return ApiError::new(
                ErrorCode::Forbidden,
                "cross-origin requests from this origin are not allowed",
            )
            .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn guard(bound: &str) -> Guard {
        Guard {
            bound: bound.parse().unwrap(),
            hosts: vec!["devbox.lan".into()],
            origins: vec!["http://localhost:3000".into()],
        }
    }

    #[test]
    fn loopback_names_the_bound_address_and_allowed_names_pass() {
        let g = guard("127.0.0.1");
        for ok in [
            "127.0.0.1:8787",
            "localhost:8787",
            "LOCALHOST",
            "localhost.",
            "[::1]:8787",
            "127.0.0.2",
            "devbox.lan:8787",
        ] {
            assert!(g.allows_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:8787",
            "localhost.evil.example",
            "10.0.0.5:8787",
            "",
            ":8787",
            "[::1",
            "localhost:http",
        ] {
            assert!(!g.allows_host(bad), "{bad}");
        }
        let lan = guard("10.0.0.5");
        assert!(lan.allows_host("10.0.0.5:8787"));
        assert!(!lan.allows_host("10.0.0.6:8787"));
        let all = guard("0.0.0.0");
        assert!(all.allows_host("10.0.0.6:8787"));
        assert!(!all.allows_host("rebound.evil.example"));
    }

    #[test]
    fn only_the_own_origin_and_allowed_ones_pass() {
        let g = guard("127.0.0.1");
        assert!(g.allows_origin("http://127.0.0.1:8787", "127.0.0.1:8787"));
        assert!(g.allows_origin("http://LOCALHOST:8787", "localhost:8787"));
        assert!(g.allows_origin("http://localhost:3000", "127.0.0.1:8787"));
        assert!(!g.allows_origin("http://localhost:8788", "localhost:8787"));
        assert!(!g.allows_origin("https://evil.example", "127.0.0.1:8787"));
        assert!(!g.allows_origin("null", "127.0.0.1:8787"));
    }

    #[test]
    fn origins_are_checked_and_normalised() {
        assert_eq!(
            normalise_origin("HTTP://Localhost:3000/").unwrap(),
            "http://localhost:3000"
        );
        for bad in ["localhost:3000", "ftp://x", "http://x/path", "http://"] {
            assert!(normalise_origin(bad).is_err(), "{bad}");
        }
    }
}
