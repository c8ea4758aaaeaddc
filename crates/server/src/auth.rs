//! Who is calling: every request presents a token (an `Authorization:
//! Bearer` header, or the cookie a browser got from a `?token=` link), the
//! host's [`Authenticator`] maps it to the engine's [`Caller`], and the
//! handlers find the caller in the request's extensions and pass it to
//! every engine call (a user sees their own sessions only).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use roundtable_sessions::Caller;

use crate::api_error::{ApiError, ErrorCode};
use crate::token::{AccessToken, constant_time_eq};

/// Maps a presented token to the caller it identifies.
pub trait Authenticator: Send + Sync + 'static {
    /// The caller `token` identifies, or `None` when it identifies nobody.
    fn authenticate(&self, token: &str) -> Option<Caller>;
}

impl<F> Authenticator for F
where
    F: Fn(&str) -> Option<Caller> + Send + Sync + 'static,
{
    fn authenticate(&self, token: &str) -> Option<Caller> {
        self(token)
    }
}

/// One token, the host's own: the daemon's case. Whoever holds it acts as
/// the host ([`Caller::Host`]), which uses every session of the engine, as
/// the engine's documentation has a host do.
#[derive(Debug, Clone)]
pub struct HostToken {
    token: AccessToken,
}

impl HostToken {
    /// `token` identifies the host.
    pub fn new(token: AccessToken) -> Self {
        Self { token }
    }
}

impl Authenticator for HostToken {
    fn authenticate(&self, token: &str) -> Option<Caller> {
        self.token.matches(token).then_some(Caller::Host)
    }
}

/// Several tokens, each identifying a user (several may identify the same
/// one): each user sees the sessions they created, and another user's
/// session is not found.
#[derive(Debug, Clone, Default)]
pub struct TokenUsers {
    users: HashMap<Arc<str>, Caller>,
}

impl TokenUsers {
    /// No tokens yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `token` identifies `user`.
    pub fn with(mut self, token: &AccessToken, user: impl Into<Arc<str>>) -> Self {
        self.users
            .insert(Arc::from(token.secret()), Caller::User(user.into()));
        self
    }
}

impl Authenticator for TokenUsers {
    fn authenticate(&self, token: &str) -> Option<Caller> {
        // Every token is compared, in constant time, so timing says nothing
        // about which one came close.
        let mut found = None;
        for (secret, caller) in &self.users {
            if constant_time_eq(secret.as_bytes(), token.as_bytes()) {
                found = Some(caller.clone());
            }
        }
        found
    }
}

/// What the auth layer needs.
pub(crate) struct Auth {
    pub(crate) authenticator: Arc<dyn Authenticator>,
    pub(crate) cookie_name: String,
}

/// The auth layer: a `GET` with `?token=` signs a browser in (a cookie,
/// then a redirect to the same URL without the token); every other request
/// needs a valid bearer token or cookie, and carries its [`Caller`] on.
pub(crate) async fn authenticate(
    State(auth): State<Arc<Auth>>,
    mut request: Request,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD)
        && let Some(presented) = query_token(request.uri())
    {
        return match auth.authenticator.authenticate(presented) {
            Some(_) => sign_in(&auth.cookie_name, request.uri(), presented),
            None => unauthorized("the token in the link is not valid"),
        };
    }
    let presented = match bearer(request.headers()) {
        Bearer::Given(token) => Some(token),
        Bearer::Malformed => {
            return unauthorized("the Authorization header is not `Bearer <token>`");
        }
        Bearer::Absent => cookie(request.headers(), &auth.cookie_name),
    };
    let Some(presented) = presented else {
        return unauthorized("a token is required: send `Authorization: Bearer <token>`");
    };
    match auth.authenticator.authenticate(presented) {
        Some(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None => unauthorized("the token is not valid"),
    }
}

fn unauthorized(message: &str) -> Response {
    ApiError::new(ErrorCode::Unauthorized, message).into_response()
}

enum Bearer<'a> {
    Absent,
    Malformed,
    Given(&'a str),
}

fn bearer(headers: &HeaderMap) -> Bearer<'_> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Bearer::Absent;
    };
    let Ok(value) = value.to_str() else {
        return Bearer::Malformed;
    };
    match value.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Bearer::Given(token.trim())
        }
        _ => Bearer::Malformed,
    }
}

/// The value of cookie `name`, from any `Cookie` header.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The `token` query parameter. Valid tokens are URL-unreserved
/// characters, so the raw value is the token (one that needs decoding is
/// not a valid token anyway).
fn query_token(uri: &Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "token")
        .map(|(_, value)| value)
}

/// Sets the cookie and redirects to the same path and query without the
/// token, so that the token leaves the address bar and the history.
fn sign_in(cookie_name: &str, uri: &Uri, token: &str) -> Response {
    let path = same_site_path(uri.path());
    let rest: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty() && pair.split('=').next() != Some("token"))
        .collect();
    let location = if rest.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", rest.join("&"))
    };
    let cookie = format!("{cookie_name}={token}; HttpOnly; SameSite=Strict; Path=/");
    let (Ok(location), Ok(cookie)) = (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&cookie),
    ) else {
        return ApiError::new(ErrorCode::InvalidRequest, "the link cannot be redirected")
            .into_response();
    };
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location),
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
    )
        .into_response()
}

/// `path` when a browser can only read it as a path of this site, else
/// `/`. Browsers read a backslash as `/`, so `/\evil.example` would land
/// on another host, and an encoded `%2F` or `%5C` may be decoded on the
/// way: only plain path characters pass, with no slash run at the start.
fn same_site_path(path: &str) -> &str {
    let plain = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%".contains(&b));
    let lower = path.to_ascii_lowercase();
    let encoded_separator = lower.contains("%2f") || lower.contains("%5c");
    if plain && path.starts_with('/') && !path.starts_with("//") && !encoded_separator {
        path
    } else {
        "/"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn token(text: &str) -> AccessToken {
        AccessToken::new(text).unwrap()
    }

    #[test]
    fn token_users_map_each_token_to_its_user() {
        let (a, b) = (token("aaaaaaaaaaaaaaaa"), token("bbbbbbbbbbbbbbbb"));
        let users = TokenUsers::new().with(&a, "alice").with(&b, "bob");
        assert_eq!(users.authenticate(a.secret()), Some(Caller::user("alice")));
        assert_eq!(users.authenticate(b.secret()), Some(Caller::user("bob")));
        assert_eq!(users.authenticate("cccccccccccccccc"), None);
        let host = HostToken::new(a.clone());
        assert_eq!(host.authenticate(a.secret()), Some(Caller::Host));
        assert_eq!(host.authenticate(b.secret()), None);
        let closure = |t: &str| (t == "x").then(|| Caller::user("x"));
        assert!(closure.authenticate("x").is_some());
    }

    #[test]
    fn credentials_are_read_from_the_header_the_cookie_and_the_query() {
        let mut headers = HeaderMap::new();
        assert!(matches!(bearer(&headers), Bearer::Absent));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer abc"),
        );
        assert!(matches!(bearer(&headers), Bearer::Given("abc")));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert!(matches!(bearer(&headers), Bearer::Malformed));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert!(matches!(bearer(&headers), Bearer::Malformed));

        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; rt=secret; b=2"),
        );
        assert_eq!(cookie(&headers, "rt"), Some("secret"));
        assert_eq!(cookie(&headers, "r"), None);

        let uri: Uri = "/v1/sessions?x=1&token=abc&y=2".parse().unwrap();
        assert_eq!(query_token(&uri), Some("abc"));
        assert_eq!(
            query_token(&"/v1/sessions?tokens=abc".parse().unwrap()),
            None
        );
    }

    #[test]
    fn signing_in_drops_the_token_from_the_address_and_never_leaves_the_site() {
        let response = sign_in("rt", &"/page?x=1&token=abc&y=2".parse().unwrap(), "abc");
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let headers = response.headers();
        assert_eq!(headers[header::LOCATION], "/page?x=1&y=2");
        let cookie = headers[header::SET_COOKIE].to_str().unwrap();
        assert!(cookie.starts_with("rt=abc;"), "{cookie}");
        assert!(cookie.contains("HttpOnly"));
        assert!(cookie.contains("SameSite=Strict"));
        let response = sign_in("rt", &"//evil.example/?token=abc".parse().unwrap(), "abc");
        assert_eq!(response.headers()[header::LOCATION], "/");
        for escape in [
            "/\\evil.example/",
            "/%5Cevil.example/",
            "/%2F/evil.example",
            "/%2f%2fevil.example",
            "/x/%5c/y",
        ] {
            let uri: Uri = format!("{escape}?token=abc&x=1").parse().unwrap();
            let response = sign_in("rt", &uri, "abc");
            assert_eq!(response.headers()[header::LOCATION], "/?x=1", "{escape}");
        }
        for kept in ["/", "/page", "/v1/sessions/sess_1/events", "/a%20b/c"] {
            assert_eq!(same_site_path(kept), kept);
        }
    }
}
