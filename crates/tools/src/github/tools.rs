//! The eleven read-only GitHub tools, each an endpoint plus a projection.

use std::marker::PhantomData;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::GitHubConfig;
use super::client::{Client, DIFF, Failure, JSON};
use super::trim;
use crate::{ToolContext, ToolError, ToolKind, ToolResult, TypedTool};

/// What an endpoint asks GitHub for.
pub(crate) struct Request {
    segments: Vec<String>,
    query: Vec<(&'static str, String)>,
    accept: &'static str,
}

impl Request {
    fn json(segments: Vec<String>) -> Self {
        Self {
            segments,
            query: Vec::new(),
            accept: JSON,
        }
    }

    fn query(mut self, key: &'static str, value: Option<impl ToString>) -> Self {
        if let Some(value) = value {
            self.query.push((key, value.to_string()));
        }
        self
    }

    fn paged(self, page: &Paging) -> Self {
        self.query("per_page", Some(page.per_page()))
            .query("page", Some(page.page()))
    }
}

/// One GitHub endpoint as a tool.
pub(crate) trait Endpoint: Send + Sync + 'static {
    type Input: DeserializeOwned + JsonSchema + Send + 'static;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    fn request(input: &Self::Input) -> Result<Request, String>;
    /// Turns the response body into the text the model reads.
    fn shape(
        input: &Self::Input,
        body: &str,
        next_page: Option<u32>,
        config: &GitHubConfig,
    ) -> Result<String, String>;
}

/// A GitHub endpoint wrapped as a [`TypedTool`].
pub(crate) struct GitHubTool<E> {
    client: Client,
    endpoint: PhantomData<fn() -> E>,
}

impl<E> GitHubTool<E> {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            endpoint: PhantomData,
        }
    }
}

#[async_trait]
impl<E: Endpoint> TypedTool for GitHubTool<E> {
    type Input = E::Input;

    fn name(&self) -> &str {
        E::NAME
    }

    fn description(&self) -> &str {
        E::DESCRIPTION
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Network
    }

    async fn run(&self, ctx: ToolContext, input: E::Input) -> Result<ToolResult, ToolError> {
        let request = match E::request(&input) {
            Ok(r) => r,
            Err(e) => return Ok(ToolResult::error(e)),
        };
        let segments: Vec<&str> = request.segments.iter().map(String::as_str).collect();
        let fetched = match self.client.url(&segments, &request.query) {
            Ok(url) => self.client.get(url, request.accept, &ctx.cancel).await,
            Err(e) => Err(e),
        };
        match fetched {
            Ok(page) => Ok(
                match E::shape(&input, &page.body, page.next_page, self.client.config()) {
                    Ok(text) => ToolResult::text(text),
                    Err(e) => ToolResult::error(e),
                },
            ),
            Err(Failure::Message(e)) => Ok(ToolResult::error(e)),
            Err(Failure::Cancelled) => Err(ToolError::Cancelled {
                tool: E::NAME.into(),
                call_id: ctx.call_id,
            }),
        }
    }
}

/// Checks an owner or repository name: it becomes a URL path segment.
fn name(kind: &str, value: &str) -> Result<String, String> {
    let valid = !value.is_empty()
        && value != "."
        && value != ".."
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(value.to_string())
    } else {
        Err(format!(
            "invalid {kind} {value:?}: use the GitHub name only (letters, digits, '-', '_', '.')"
        ))
    }
}

fn repo_segments(owner: &str, repo: &str, rest: &[&str]) -> Result<Vec<String>, String> {
    let mut segments = vec![
        String::from("repos"),
        name("owner", owner)?,
        name("repository", repo)?,
    ];
    segments.extend(rest.iter().map(|s| (*s).to_string()));
    Ok(segments)
}

fn parse(body: &str) -> Result<Value, String> {
    serde_json::from_str(body).map_err(|e| format!("GitHub sent a response that is not JSON: {e}"))
}

fn to_text(value: &Value) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| e.to_string())
}

fn list(items: Vec<Value>, paging: &Paging, next_page: Option<u32>) -> Result<String, String> {
    to_text(&json!({
        "items": items,
        "page": paging.page(),
        "next_page": next_page,
    }))
}

/// A list endpoint's answer: each item of the JSON array `body` trimmed by
/// `trim`, with the page it is and the next one.
fn trimmed_list(
    body: &str,
    paging: &Paging,
    next_page: Option<u32>,
    trim: impl Fn(&Value) -> Value,
) -> Result<String, String> {
    let v = parse(body)?;
    list(array(&v).iter().map(trim).collect(), paging, next_page)
}

fn array(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Page selection shared by the list tools.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct Paging {
    /// Page to fetch, from 1 (default 1). The result's `next_page` says
    /// whether there is more.
    #[serde(default)]
    pub page: Option<u32>,
    /// Items per page, 1 to 100 (default 30).
    #[serde(default)]
    pub per_page: Option<u32>,
}

impl Paging {
    fn page(&self) -> u32 {
        self.page.unwrap_or(1).max(1)
    }

    fn per_page(&self) -> u32 {
        self.per_page.unwrap_or(30).clamp(1, 100)
    }
}

/// A repository.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RepoInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
}

pub(crate) struct GetRepository;

impl Endpoint for GetRepository {
    type Input = RepoInput;
    const NAME: &'static str = "github_get_repository";
    const DESCRIPTION: &'static str = "Get a GitHub repository's metadata: description, default \
        branch, main language, topics, stars, forks, open issue count, license.";

    fn request(input: &RepoInput) -> Result<Request, String> {
        Ok(Request::json(repo_segments(
            &input.owner,
            &input.repo,
            &[],
        )?))
    }

    fn shape(
        _: &RepoInput,
        body: &str,
        _: Option<u32>,
        _: &GitHubConfig,
    ) -> Result<String, String> {
        to_text(&trim::repository(&parse(body)?))
    }
}

/// One issue or pull request by number.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct IssueInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// Issue (or pull request) number.
    pub issue_number: u64,
}

pub(crate) struct GetIssue;

impl Endpoint for GetIssue {
    type Input = IssueInput;
    const NAME: &'static str = "github_get_issue";
    const DESCRIPTION: &'static str = "Get a GitHub issue: title, state, author, labels, \
        assignees, comment count and body. Pull requests are issues too (is_pull_request).";

    fn request(input: &IssueInput) -> Result<Request, String> {
        Ok(Request::json(repo_segments(
            &input.owner,
            &input.repo,
            &["issues", &input.issue_number.to_string()],
        )?))
    }

    fn shape(
        _: &IssueInput,
        body: &str,
        _: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        to_text(&trim::issue(&parse(body)?, c.max_body_chars))
    }
}

/// The comments of an issue or pull request.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct IssueCommentsInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// Issue (or pull request) number.
    pub issue_number: u64,
    /// Page selection.
    #[serde(flatten)]
    pub paging: Paging,
}

pub(crate) struct ListIssueComments;

impl Endpoint for ListIssueComments {
    type Input = IssueCommentsInput;
    const NAME: &'static str = "github_list_issue_comments";
    const DESCRIPTION: &'static str = "List the comments on a GitHub issue or pull request, \
        oldest first, with author, time and body.";

    fn request(input: &IssueCommentsInput) -> Result<Request, String> {
        Ok(Request::json(repo_segments(
            &input.owner,
            &input.repo,
            &["issues", &input.issue_number.to_string(), "comments"],
        )?)
        .paged(&input.paging))
    }

    fn shape(
        input: &IssueCommentsInput,
        body: &str,
        next: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        trimmed_list(body, &input.paging, next, |i| {
            trim::comment(i, c.max_body_chars)
        })
    }
}

/// Filters for listing issues.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ListIssuesInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// `open` (default), `closed` or `all`.
    #[serde(default)]
    pub state: Option<String>,
    /// Comma-separated label names; issues must have all of them.
    #[serde(default)]
    pub labels: Option<String>,
    /// Login of an assignee, `none` or `*`.
    #[serde(default)]
    pub assignee: Option<String>,
    /// Login of the issue's author.
    #[serde(default)]
    pub creator: Option<String>,
    /// `created` (default), `updated` or `comments`.
    #[serde(default)]
    pub sort: Option<String>,
    /// `desc` (default) or `asc`.
    #[serde(default)]
    pub direction: Option<String>,
    /// Only issues updated at or after this ISO 8601 time.
    #[serde(default)]
    pub since: Option<String>,
    /// Page selection.
    #[serde(flatten)]
    pub paging: Paging,
}

pub(crate) struct ListIssues;

impl Endpoint for ListIssues {
    type Input = ListIssuesInput;
    const NAME: &'static str = "github_list_issues";
    const DESCRIPTION: &'static str = "List a GitHub repository's issues (pull requests included, \
        marked is_pull_request), filtered by state, labels, assignee or creator.";

    fn request(i: &ListIssuesInput) -> Result<Request, String> {
        Ok(
            Request::json(repo_segments(&i.owner, &i.repo, &["issues"])?)
                .query("state", i.state.as_ref())
                .query("labels", i.labels.as_ref())
                .query("assignee", i.assignee.as_ref())
                .query("creator", i.creator.as_ref())
                .query("sort", i.sort.as_ref())
                .query("direction", i.direction.as_ref())
                .query("since", i.since.as_ref())
                .paged(&i.paging),
        )
    }

    fn shape(
        input: &ListIssuesInput,
        body: &str,
        next: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        trimmed_list(body, &input.paging, next, |i| {
            trim::issue(i, c.max_list_body_chars)
        })
    }
}

/// One pull request by number.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PullInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// Pull request number.
    pub pull_number: u64,
}

pub(crate) struct GetPullRequest;

impl Endpoint for GetPullRequest {
    type Input = PullInput;
    const NAME: &'static str = "github_get_pull_request";
    const DESCRIPTION: &'static str = "Get a GitHub pull request: title, state, draft/merged, \
        author, head and base branches, labels, reviewers, size (commits, additions, deletions, \
        changed files) and body.";

    fn request(input: &PullInput) -> Result<Request, String> {
        Ok(Request::json(repo_segments(
            &input.owner,
            &input.repo,
            &["pulls", &input.pull_number.to_string()],
        )?))
    }

    fn shape(
        _: &PullInput,
        body: &str,
        _: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        to_text(&trim::pull_request(&parse(body)?, c.max_body_chars))
    }
}

/// Filters for listing pull requests.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ListPullsInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// `open` (default), `closed` or `all`.
    #[serde(default)]
    pub state: Option<String>,
    /// Head branch as `user:branch`.
    #[serde(default)]
    pub head: Option<String>,
    /// Base branch name.
    #[serde(default)]
    pub base: Option<String>,
    /// `created` (default), `updated`, `popularity` or `long-running`.
    #[serde(default)]
    pub sort: Option<String>,
    /// `desc` or `asc`.
    #[serde(default)]
    pub direction: Option<String>,
    /// Page selection.
    #[serde(flatten)]
    pub paging: Paging,
}

pub(crate) struct ListPullRequests;

impl Endpoint for ListPullRequests {
    type Input = ListPullsInput;
    const NAME: &'static str = "github_list_pull_requests";
    const DESCRIPTION: &'static str = "List a GitHub repository's pull requests, filtered by \
        state, head or base branch.";

    fn request(i: &ListPullsInput) -> Result<Request, String> {
        Ok(Request::json(repo_segments(&i.owner, &i.repo, &["pulls"])?)
            .query("state", i.state.as_ref())
            .query("head", i.head.as_ref())
            .query("base", i.base.as_ref())
            .query("sort", i.sort.as_ref())
            .query("direction", i.direction.as_ref())
            .paged(&i.paging))
    }

    fn shape(
        input: &ListPullsInput,
        body: &str,
        next: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        trimmed_list(body, &input.paging, next, |i| {
            trim::pull_request(i, c.max_list_body_chars)
        })
    }
}

pub(crate) struct GetPullRequestDiff;

impl Endpoint for GetPullRequestDiff {
    type Input = PullInput;
    const NAME: &'static str = "github_get_pull_request_diff";
    const DESCRIPTION: &'static str = "Get the unified diff of a GitHub pull request (long diffs \
        are cut).";

    fn request(input: &PullInput) -> Result<Request, String> {
        Ok(Request {
            accept: DIFF,
            ..Request::json(repo_segments(
                &input.owner,
                &input.repo,
                &["pulls", &input.pull_number.to_string()],
            )?)
        })
    }

    fn shape(
        _: &PullInput,
        body: &str,
        _: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        if body.is_empty() {
            return Ok(String::from("(empty diff)"));
        }
        Ok(match trim::cut(body, c.max_diff_chars) {
            Value::String(s) => s,
            other => other.to_string(),
        })
    }
}

/// A file or directory at a ref.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct FileContentsInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// Path in the repository (`src/lib.rs`); empty for the top directory.
    pub path: String,
    /// Branch, tag or commit (default: the default branch).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
}

pub(crate) struct GetFileContents;

impl Endpoint for GetFileContents {
    type Input = FileContentsInput;
    const NAME: &'static str = "github_get_file_contents";
    const DESCRIPTION: &'static str = "Get a file's text from a GitHub repository at a branch, \
        tag or commit, or list a directory.";

    fn request(input: &FileContentsInput) -> Result<Request, String> {
        let mut rest = vec!["contents"];
        for segment in input.path.split('/').filter(|s| !s.is_empty()) {
            if segment == "." || segment == ".." {
                return Err(format!("invalid path {:?}: no `.` or `..`", input.path));
            }
            rest.push(segment);
        }
        Ok(
            Request::json(repo_segments(&input.owner, &input.repo, &rest)?)
                .query("ref", input.git_ref.as_ref()),
        )
    }

    fn shape(
        _: &FileContentsInput,
        body: &str,
        _: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        to_text(&trim::contents(&parse(body)?, c.max_file_chars))
    }
}

/// Filters for a commit log.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ListCommitsInput {
    /// Account or organisation owning the repository.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// Branch, tag or commit to start from (default: the default branch).
    #[serde(default)]
    pub sha: Option<String>,
    /// Only commits touching this path.
    #[serde(default)]
    pub path: Option<String>,
    /// Only commits by this login or email.
    #[serde(default)]
    pub author: Option<String>,
    /// Only commits after this ISO 8601 time.
    #[serde(default)]
    pub since: Option<String>,
    /// Only commits before this ISO 8601 time.
    #[serde(default)]
    pub until: Option<String>,
    /// Page selection.
    #[serde(flatten)]
    pub paging: Paging,
}

pub(crate) struct ListCommits;

impl Endpoint for ListCommits {
    type Input = ListCommitsInput;
    const NAME: &'static str = "github_list_commits";
    const DESCRIPTION: &'static str = "List commits of a GitHub repository, newest first, \
        optionally from a branch, for a path, by an author or in a time range.";

    fn request(i: &ListCommitsInput) -> Result<Request, String> {
        Ok(
            Request::json(repo_segments(&i.owner, &i.repo, &["commits"])?)
                .query("sha", i.sha.as_ref())
                .query("path", i.path.as_ref())
                .query("author", i.author.as_ref())
                .query("since", i.since.as_ref())
                .query("until", i.until.as_ref())
                .paged(&i.paging),
        )
    }

    fn shape(
        input: &ListCommitsInput,
        body: &str,
        next: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        trimmed_list(body, &input.paging, next, |i| {
            trim::commit(i, c.max_list_body_chars)
        })
    }
}

/// A GitHub search.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct GitHubSearchInput {
    /// GitHub search query, e.g. `repo:owner/name is:issue is:open crash`.
    pub q: String,
    /// Sort field (issues: `comments`, `created`, `updated`; default best match).
    #[serde(default)]
    pub sort: Option<String>,
    /// `desc` (default) or `asc`.
    #[serde(default)]
    pub order: Option<String>,
    /// Page selection.
    #[serde(flatten)]
    pub paging: Paging,
}

fn search_result(
    v: &Value,
    items: Vec<Value>,
    paging: &Paging,
    next_page: Option<u32>,
) -> Result<String, String> {
    to_text(&json!({
        "total_count": v.get("total_count"),
        "incomplete_results": v.get("incomplete_results"),
        "items": items,
        "page": paging.page(),
        "next_page": next_page,
    }))
}

pub(crate) struct SearchIssues;

impl Endpoint for SearchIssues {
    type Input = GitHubSearchInput;
    const NAME: &'static str = "github_search_issues";
    const DESCRIPTION: &'static str = "Search GitHub issues and pull requests with GitHub's \
        search syntax (e.g. `repo:owner/name is:pr is:open label:bug timeout`).";

    fn request(i: &GitHubSearchInput) -> Result<Request, String> {
        Ok(
            Request::json(vec![String::from("search"), String::from("issues")])
                .query("q", Some(&i.q))
                .query("sort", i.sort.as_ref())
                .query("order", i.order.as_ref())
                .paged(&i.paging),
        )
    }

    fn shape(
        input: &GitHubSearchInput,
        body: &str,
        next: Option<u32>,
        c: &GitHubConfig,
    ) -> Result<String, String> {
        let v = parse(body)?;
        let items = array(v.get("items").unwrap_or(&Value::Null))
            .iter()
            .map(|i| trim::issue(i, c.max_list_body_chars))
            .collect();
        search_result(&v, items, &input.paging, next)
    }
}

pub(crate) struct SearchCode;

impl Endpoint for SearchCode {
    type Input = GitHubSearchInput;
    const NAME: &'static str = "github_search_code";
    const DESCRIPTION: &'static str = "Search code on GitHub with GitHub's code search syntax \
        (e.g. `repo:owner/name language:rust fn parse`). Returns matching file paths.";

    fn request(i: &GitHubSearchInput) -> Result<Request, String> {
        Ok(
            Request::json(vec![String::from("search"), String::from("code")])
                .query("q", Some(&i.q))
                .query("sort", i.sort.as_ref())
                .query("order", i.order.as_ref())
                .paged(&i.paging),
        )
    }

    fn shape(
        input: &GitHubSearchInput,
        body: &str,
        next: Option<u32>,
        _: &GitHubConfig,
    ) -> Result<String, String> {
        let v = parse(body)?;
        let items = array(v.get("items").unwrap_or(&Value::Null))
            .iter()
            .map(trim::code_hit)
            .collect();
        search_result(&v, items, &input.paging, next)
    }
}
