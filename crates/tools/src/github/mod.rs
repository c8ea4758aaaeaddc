//! The read-only GitHub toolset: repositories, issues, pull requests, files,
//! commits and search, over the REST API.
//!
//! Every tool is a GET of kind [`ToolKind::Network`](crate::ToolKind::Network).
//! Responses are trimmed to what a model needs and returned as compact JSON;
//! list results carry `page` and `next_page` (from the `Link` header). A 404,
//! a rate limit (403/429 with the `x-ratelimit-*` headers) or any other API
//! error comes back as an error result the model can read.
//!
//! ```
//! use roundtable_tools::github::{GitHub, GitHubConfig};
//! use roundtable_tools::ToolRegistry;
//!
//! let github = GitHub::new(GitHubConfig::default().with_token("ghp_example")).unwrap();
//! let mut registry = ToolRegistry::new();
//! registry.register_all(github.toolset()).unwrap();
//! assert_eq!(registry.len(), 11);
//! assert!(registry.definition("github_get_issue").is_some());
//! ```

mod client;
mod tools;
mod trim;

use std::sync::Arc;
use std::time::Duration;

use crate::{SetupError, Tool};
use client::Client;
use tools::GitHubTool;

/// Where and how to reach the GitHub API.
#[derive(Clone)]
pub struct GitHubConfig {
    /// API base URL: `https://api.github.com`, or
    /// `https://HOST/api/v3` for GitHub Enterprise Server.
    pub base_url: String,
    /// Token sent as `Authorization: Bearer`; without one only public data
    /// is readable and the rate limit is low.
    pub token: Option<String>,
    /// `User-Agent` header (GitHub requires one).
    pub user_agent: String,
    /// Timeout of one request.
    pub timeout: Duration,
    /// Characters kept of an issue, pull request or comment body.
    pub max_body_chars: usize,
    /// Characters kept of each body in list and search results.
    pub max_list_body_chars: usize,
    /// Characters kept of a pull request diff.
    pub max_diff_chars: usize,
    /// Characters kept of a file's contents.
    pub max_file_chars: usize,
}

impl Default for GitHubConfig {
    fn default() -> Self {
        Self {
            base_url: String::from("https://api.github.com"),
            token: None,
            user_agent: String::from("roundtable-tools"),
            timeout: Duration::from_secs(30),
            max_body_chars: 8_000,
            max_list_body_chars: 300,
            max_diff_chars: 40_000,
            max_file_chars: 40_000,
        }
    }
}

impl std::fmt::Debug for GitHubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubConfig")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("user_agent", &self.user_agent)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl GitHubConfig {
    /// Uses `token` for authentication.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Uses another API base URL (GitHub Enterprise, a test server).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }
}

/// A GitHub API client and the tools built on it.
#[derive(Clone)]
pub struct GitHub {
    client: Client,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub")
            .field("config", self.client.config())
            .finish()
    }
}

impl GitHub {
    /// A client for `config`; fails when the base URL is not a URL or the
    /// HTTP client cannot be built.
    pub fn new(config: GitHubConfig) -> Result<Self, SetupError> {
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| SetupError::Config {
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Self::with_client(http, config)
    }

    /// Like [`new`](Self::new), sharing an existing `reqwest` client.
    pub fn with_client(http: reqwest::Client, config: GitHubConfig) -> Result<Self, SetupError> {
        match reqwest::Url::parse(&config.base_url) {
            Ok(url) if !url.cannot_be_a_base() => {}
            _ => {
                return Err(SetupError::Config {
                    message: format!("invalid GitHub base URL {:?}", config.base_url),
                });
            }
        }
        Ok(Self {
            client: Client::new(http, Arc::new(config)),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GitHubConfig {
        self.client.config()
    }

    /// The eleven read-only tools: `github_get_repository`,
    /// `github_get_issue`, `github_list_issue_comments`, `github_list_issues`,
    /// `github_get_pull_request`, `github_list_pull_requests`,
    /// `github_get_pull_request_diff`, `github_get_file_contents`,
    /// `github_list_commits`, `github_search_issues`, `github_search_code`.
    pub fn toolset(&self) -> Vec<Arc<dyn Tool>> {
        let c = &self.client;
        vec![
            Arc::new(GitHubTool::<tools::GetRepository>::new(c.clone())),
            Arc::new(GitHubTool::<tools::GetIssue>::new(c.clone())),
            Arc::new(GitHubTool::<tools::ListIssueComments>::new(c.clone())),
            Arc::new(GitHubTool::<tools::ListIssues>::new(c.clone())),
            Arc::new(GitHubTool::<tools::GetPullRequest>::new(c.clone())),
            Arc::new(GitHubTool::<tools::ListPullRequests>::new(c.clone())),
            Arc::new(GitHubTool::<tools::GetPullRequestDiff>::new(c.clone())),
            Arc::new(GitHubTool::<tools::GetFileContents>::new(c.clone())),
            Arc::new(GitHubTool::<tools::ListCommits>::new(c.clone())),
            Arc::new(GitHubTool::<tools::SearchIssues>::new(c.clone())),
            Arc::new(GitHubTool::<tools::SearchCode>::new(c.clone())),
        ]
    }
}
