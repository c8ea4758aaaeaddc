//! The HTTP side of the GitHub toolset: one GET, errors the model can read,
//! pagination from the `Link` header.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, USER_AGENT};
use reqwest::{StatusCode, Url};
use tokio_util::sync::CancellationToken;

use super::GitHubConfig;

/// JSON media type of the REST API.
pub(crate) const JSON: &str = "application/vnd.github+json";
/// The unified-diff media type of a pull request.
pub(crate) const DIFF: &str = "application/vnd.github.diff";

/// Why a GET did not produce a usable response.
pub(crate) enum Failure {
    /// The call was cancelled.
    Cancelled,
    /// Something the model should read.
    Message(String),
}

/// A successful response.
pub(crate) struct Page {
    pub body: String,
    pub next_page: Option<u32>,
}

/// The client of one GitHub API base URL.
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    config: std::sync::Arc<GitHubConfig>,
}

impl Client {
    pub(crate) fn new(http: reqwest::Client, config: std::sync::Arc<GitHubConfig>) -> Self {
        Self { http, config }
    }

    pub(crate) fn config(&self) -> &GitHubConfig {
        &self.config
    }

    /// The URL of `segments` under the base URL, each segment
    /// percent-encoded (a `/` inside one cannot change the route).
    pub(crate) fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Url, Failure> {
        let mut url = Url::parse(&self.config.base_url)
            .map_err(|e| Failure::Message(format!("invalid GitHub base URL: {e}")))?;
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| Failure::Message(String::from("invalid GitHub base URL")))?;
            path.pop_if_empty();
            for segment in segments {
                path.push(segment);
            }
        }
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        Ok(url)
    }

    /// GETs `url`, mapping every failure to text for the model.
    pub(crate) async fn get(
        &self,
        url: Url,
        accept: &str,
        cancel: &CancellationToken,
    ) -> Result<Page, Failure> {
        let route = url.path().to_string();
        let mut request = self
            .http
            .get(url)
            .header(ACCEPT, accept)
            .header(USER_AGENT, &self.config.user_agent)
            .header("X-GitHub-Api-Version", "2022-11-28")
            .timeout(self.config.timeout);
        if let Some(token) = &self.config.token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let response = tokio::select! {
            r = request.send() => r,
            () = cancel.cancelled() => return Err(Failure::Cancelled),
        };
        let response = response
            .map_err(|e| Failure::Message(format!("cannot reach GitHub (GET {route}): {e}")))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = tokio::select! {
            b = response.text() => b,
            () = cancel.cancelled() => return Err(Failure::Cancelled),
        };
        let body = body.map_err(|e| {
            Failure::Message(format!("GitHub response broke off (GET {route}): {e}"))
        })?;
        if status.is_success() {
            return Ok(Page {
                body,
                next_page: next_page(&headers),
            });
        }
        Err(Failure::Message(describe_failure(
            status, &headers, &body, &route,
        )))
    }
}

/// The GitHub `message` of an error body, if any.
fn api_message(body: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()?
        .get("message")?
        .as_str()
        .map(str::to_string)
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// An error response as text the model can act on.
pub(crate) fn describe_failure(
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
    route: &str,
) -> String {
    let message = api_message(body).unwrap_or_else(|| {
        status
            .canonical_reason()
            .unwrap_or("unknown error")
            .to_string()
    });
    let rate_limited = (status == StatusCode::FORBIDDEN || status == StatusCode::TOO_MANY_REQUESTS)
        && (header(headers, "x-ratelimit-remaining") == Some("0")
            || header(headers, "retry-after").is_some()
            || message.to_ascii_lowercase().contains("rate limit"));
    if rate_limited {
        let mut text = format!("GitHub API rate limit exceeded (GET {route}): {message}.");
        if let (Some(limit), Some(used)) = (
            header(headers, "x-ratelimit-limit"),
            header(headers, "x-ratelimit-used"),
        ) {
            text.push_str(&format!(" Used {used} of {limit} requests."));
        }
        if let Some(wait) = header(headers, "retry-after") {
            text.push_str(&format!(" Retry after {wait} s."));
        } else if let Some(reset) =
            header(headers, "x-ratelimit-reset").and_then(|r| r.parse::<u64>().ok())
        {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            text.push_str(&format!(
                " The limit resets at Unix time {reset} (in {} s).",
                reset.saturating_sub(now)
            ));
        }
        text.push_str(" Do not retry now; answer with what you already know.");
        return text;
    }
    match status {
        StatusCode::NOT_FOUND => format!(
            "Not found (GET {route}): {message}. Check the owner, repository, number or path; \
             private repositories need a token with access."
        ),
        StatusCode::UNAUTHORIZED => {
            format!("GitHub rejected the credentials (GET {route}): {message}.")
        }
        StatusCode::UNPROCESSABLE_ENTITY => {
            format!("GitHub could not process the request (GET {route}): {message}.")
        }
        _ => format!(
            "GitHub API error {} (GET {route}): {message}.",
            status.as_u16()
        ),
    }
}

/// The `page` number of the `rel="next"` link of a `Link` header.
pub(crate) fn next_page(headers: &HeaderMap) -> Option<u32> {
    let link = header(headers, "link")?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        if !params.split(';').any(|p| p.trim() == "rel=\"next\"") {
            return None;
        }
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let url = Url::parse(target).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == "page")
            .and_then(|(_, v)| v.parse().ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn link_header_next_page() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "link",
            HeaderValue::from_static(
                "<https://api.github.com/repositories/1/issues?page=1>; rel=\"prev\", <https://api.github.com/repositories/1/issues?per_page=2&page=3>; rel=\"next\", <https://api.github.com/repositories/1/issues?page=9>; rel=\"last\"",
            ),
        );
        assert_eq!(next_page(&headers), Some(3));
        headers.insert(
            "link",
            HeaderValue::from_static("<https://api.github.com/x?page=1>; rel=\"first\""),
        );
        assert_eq!(next_page(&headers), None);
    }
}
