//! The GitHub toolset against a local server replaying recorded GitHub REST
//! API responses (`tests/fixtures/github/`), including a 404, a 403 rate
//! limit with its `x-ratelimit-*` headers, and `Link` pagination.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(feature = "github")]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use roundtable_providers::ToolCall;
use roundtable_tools::github::{GitHub, GitHubConfig};
use roundtable_tools::{SetupError, ToolContext, ToolError, ToolKind, ToolRegistry, ToolResult};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A request the server received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: BTreeMap<String, String>,
    headers: BTreeMap<String, String>,
}

/// A replay server for the recorded fixtures.
struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/github")
}

/// Picks the first route of `routes.json` matching the request: same path,
/// the route's query pairs all present, and the route's Accept (if any).
fn route<'r>(routes: &'r [Value], seen: &Seen) -> Option<&'r Value> {
    routes.iter().find(|r| {
        r["path"] == seen.path.as_str()
            && r["query"].as_object().is_none_or(|q| {
                q.iter()
                    .all(|(k, v)| seen.query.get(k).map(String::as_str) == v.as_str())
            })
            && r["accept"]
                .as_str()
                .is_none_or(|a| seen.headers.get("accept").map(String::as_str) == Some(a))
    })
}

async fn serve() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/v3", listener.local_addr().unwrap());
    let routes: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("routes.json")).unwrap())
            .unwrap();
    let routes = Arc::new(routes);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (base2, seen2) = (base.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let (routes, seen, base) = (routes.clone(), seen2.clone(), base2.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let mut lines = head.split("\r\n");
                let target = lines.next().unwrap().split(' ').nth(1).unwrap().to_string();
                let url = reqwest::Url::parse(&format!("http://localhost{target}")).unwrap();
                let request = Seen {
                    path: url.path().to_string(),
                    query: url
                        .query_pairs()
                        .map(|(k, v)| (k.into(), v.into()))
                        .collect(),
                    headers: lines
                        .filter_map(|l| l.split_once(": "))
                        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
                        .collect(),
                };
                seen.lock().unwrap().push(request.clone());
                if request.path.starts_with("/api/v3/hang/") {
                    // Never answer; the client must give up on cancel.
                    let _ = socket.read(&mut chunk).await;
                    return;
                }
                let (status, headers, body) = match route(&routes, &request) {
                    Some(r) => (
                        r["status"].as_u64().unwrap(),
                        r["headers"].as_object().cloned().unwrap_or_default(),
                        std::fs::read(fixtures().join(r["body"].as_str().unwrap())).unwrap(),
                    ),
                    None => (
                        500,
                        Default::default(),
                        format!("{{\"message\":\"no fixture for {target}\"}}").into_bytes(),
                    ),
                };
                let mut response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                if !headers.contains_key("content-type") {
                    response.push_str("content-type: application/json; charset=utf-8\r\n");
                }
                for (k, v) in headers {
                    let v = v.as_str().unwrap().replace("{base}", &base);
                    response.push_str(&format!("{k}: {v}\r\n"));
                }
                response.push_str("\r\n");
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Server { base, seen }
}

fn registry(base: &str, token: Option<&str>) -> ToolRegistry {
    let mut config = GitHubConfig::default().with_base_url(base);
    config.token = token.map(str::to_string);
    let mut registry = ToolRegistry::new();
    registry
        .register_all(GitHub::new(config).unwrap().toolset())
        .unwrap();
    registry
}

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> ToolResult {
    let call = ToolCall::new("call_1", name, args.as_object().unwrap().clone());
    registry
        .invoke(&call, ToolContext::new("call_1"))
        .await
        .unwrap()
}

fn json_of(result: &ToolResult) -> Value {
    assert!(result.ok, "{}", result.text_content());
    serde_json::from_str(&result.text_content()).unwrap()
}

#[tokio::test]
async fn definitions_are_network_tools_with_object_schemas() {
    let registry = registry("https://api.github.com", None);
    let names: Vec<_> = registry
        .definitions()
        .map(|d| d.name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "github_get_repository",
            "github_get_issue",
            "github_list_issue_comments",
            "github_list_issues",
            "github_get_pull_request",
            "github_list_pull_requests",
            "github_get_pull_request_diff",
            "github_get_file_contents",
            "github_list_commits",
            "github_search_issues",
            "github_search_code",
        ]
    );
    for def in registry.definitions() {
        assert_eq!(def.kind, ToolKind::Network);
        assert_eq!(def.input_schema()["type"], "object", "{}", def.name());
        assert!(
            !def.input_schema().to_string().contains("$ref"),
            "{}",
            def.name()
        );
    }
    let comments = registry.definition("github_list_issue_comments").unwrap();
    let props = comments.input_schema()["properties"].as_object().unwrap();
    for key in ["owner", "repo", "issue_number", "page", "per_page"] {
        assert!(props.contains_key(key), "{key} missing from {props:?}");
    }
    let contents = registry.definition("github_get_file_contents").unwrap();
    assert!(contents.input_schema()["properties"].get("ref").is_some());
    assert!(!registry.needs_approval(&ToolCall::new(
        "c",
        "github_get_issue",
        serde_json::Map::new()
    )));
}

#[tokio::test]
async fn get_repository_is_trimmed_and_sends_the_token() {
    let server = serve().await;
    let registry = registry(&server.base, Some("ghp_secret"));
    let repo = json_of(
        &call(
            &registry,
            "github_get_repository",
            json!({"owner": "octo-org", "repo": "hello-world"}),
        )
        .await,
    );
    assert_eq!(
        repo,
        json!({
            "full_name": "octo-org/hello-world",
            "description": "My first repository on GitHub!",
            "private": false,
            "fork": false,
            "archived": false,
            "default_branch": "main",
            "language": "Rust",
            "topics": ["example", "rust"],
            "stargazers_count": 80,
            "forks_count": 9,
            "open_issues_count": 3,
            "html_url": "https://github.com/octo-org/hello-world",
            "created_at": "2011-01-26T19:01:12Z",
            "updated_at": "2026-11-20T08:14:55Z",
            "pushed_at": "2026-11-21T17:02:03Z",
            "license": "MIT",
        })
    );
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.headers["authorization"], "Bearer ghp_secret");
    assert_eq!(seen.headers["accept"], "application/vnd.github+json");
    assert_eq!(seen.headers["x-github-api-version"], "2022-11-28");
    assert_eq!(seen.headers["user-agent"], "roundtable-tools");
}

#[tokio::test]
async fn no_token_sends_no_authorization() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    call(
        &registry,
        "github_get_repository",
        json!({"owner": "octo-org", "repo": "hello-world"}),
    )
    .await;
    let seen = server.seen.lock().unwrap()[0].clone();
    assert!(!seen.headers.contains_key("authorization"));
}

#[tokio::test]
async fn get_issue_and_a_404() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let issue = json_of(
        &call(
            &registry,
            "github_get_issue",
            json!({"owner": "octo-org", "repo": "hello-world", "issue_number": 42}),
        )
        .await,
    );
    assert_eq!(issue["number"], 42);
    assert_eq!(issue["author"], "octocat");
    assert_eq!(issue["labels"], json!(["bug"]));
    assert_eq!(issue["assignees"], json!(["hubot"]));
    assert_eq!(issue["is_pull_request"], false);
    assert!(
        issue["body"]
            .as_str()
            .unwrap()
            .starts_with("Steps to reproduce")
    );
    assert!(issue.get("node_id").is_none() && issue.get("reactions").is_none());

    let missing = call(
        &registry,
        "github_get_issue",
        json!({"owner": "octo-org", "repo": "hello-world", "issue_number": 999}),
    )
    .await;
    assert!(!missing.ok);
    assert_eq!(
        missing.text_content(),
        "Not found (GET /api/v3/repos/octo-org/hello-world/issues/999): Not Found. Check the owner, \
         repository, number or path; private repositories need a token with access."
    );
}

#[tokio::test]
async fn comments_paginate_through_the_link_header() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let args = |page: u32| json!({"owner": "octo-org", "repo": "hello-world", "issue_number": 42, "page": page, "per_page": 2});
    let first = json_of(&call(&registry, "github_list_issue_comments", args(1)).await);
    assert_eq!(first["page"], 1);
    assert_eq!(first["next_page"], 2);
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        first["items"][0],
        json!({
            "id": 1001,
            "author_association": "MEMBER",
            "created_at": "2026-11-01T11:00:00Z",
            "updated_at": "2026-11-01T11:00:00Z",
            "html_url": "https://github.com/octo-org/hello-world/issues/42#issuecomment-1001",
            "author": "hubot",
            "body": "Reproduced on main.",
        })
    );
    let second = json_of(
        &call(
            &registry,
            "github_list_issue_comments",
            args(first["next_page"].as_u64().unwrap() as u32),
        )
        .await,
    );
    assert_eq!(second["page"], 2);
    assert_eq!(second["next_page"], Value::Null);
    assert_eq!(second["items"][0]["body"], "Fix in #7.");
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen[0].query["per_page"], "2");
    assert_eq!(seen[1].query["page"], "2");
}

#[tokio::test]
async fn list_issues_passes_filters_and_cuts_bodies() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let list = json_of(
        &call(&registry, "github_list_issues", json!({"owner": "octo-org", "repo": "hello-world", "state": "open", "labels": "bug,docs"})).await,
    );
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["is_pull_request"], true);
    assert_eq!(items[1]["is_pull_request"], false);
    let body = items[1]["body"].as_str().unwrap();
    assert!(body.contains("… [cut: "), "{body}");
    assert!(body.chars().count() < 330, "{body}");
    let seen = server.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.query["labels"], "bug,docs");
    assert_eq!(seen.query["per_page"], "30");
    assert_eq!(seen.query["page"], "1");
}

#[tokio::test]
async fn pull_requests_and_their_diff() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let pr = json_of(
        &call(
            &registry,
            "github_get_pull_request",
            json!({"owner": "octo-org", "repo": "hello-world", "pull_number": 7}),
        )
        .await,
    );
    assert_eq!(
        pr["head"],
        json!({"ref": "empty-config", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": "hubot/hello-world"})
    );
    assert_eq!(pr["base"]["ref"], "main");
    assert_eq!(pr["requested_reviewers"], json!(["octocat"]));
    assert_eq!(
        (
            pr["additions"].as_u64(),
            pr["deletions"].as_u64(),
            pr["changed_files"].as_u64()
        ),
        (Some(12), Some(3), Some(2))
    );
    assert_eq!(pr["merged"], false);

    let list = json_of(
        &call(
            &registry,
            "github_list_pull_requests",
            json!({"owner": "octo-org", "repo": "hello-world"}),
        )
        .await,
    );
    assert_eq!(list["items"][0]["number"], 7);
    assert!(
        list["items"][0].get("additions").is_none(),
        "absent counters are dropped"
    );

    let diff = call(
        &registry,
        "github_get_pull_request_diff",
        json!({"owner": "octo-org", "repo": "hello-world", "pull_number": 7}),
    )
    .await;
    assert!(diff.ok);
    assert_eq!(
        diff.text_content(),
        std::fs::read_to_string(fixtures().join("pull.diff")).unwrap()
    );
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(
        seen.last().unwrap().headers["accept"],
        "application/vnd.github.diff"
    );
}

#[tokio::test]
async fn file_contents_are_decoded_and_directories_listed() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let file = json_of(
        &call(&registry, "github_get_file_contents", json!({"owner": "octo-org", "repo": "hello-world", "path": "src/lib.rs", "ref": "main"})).await,
    );
    assert_eq!(file["type"], "file");
    assert_eq!(
        file["content"],
        "//! Hello.\n\npub fn hello() -> &'static str {\n    \"hi\"\n}\n"
    );
    let dir = json_of(
        &call(
            &registry,
            "github_get_file_contents",
            json!({"owner": "octo-org", "repo": "hello-world", "path": "src"}),
        )
        .await,
    );
    assert_eq!(
        dir,
        json!([
            {"name": "lib.rs", "path": "src/lib.rs", "type": "file", "size": 45},
            {"name": "config", "path": "src/config", "type": "dir", "size": 0},
        ])
    );
}

#[tokio::test]
async fn commits_and_issue_search() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let commits = json_of(
        &call(
            &registry,
            "github_list_commits",
            json!({"owner": "octo-org", "repo": "hello-world", "path": "src/config.rs"}),
        )
        .await,
    );
    assert_eq!(
        commits["items"][0],
        json!({
            "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
            "message": "Treat an empty config file as defaults\n\nFixes #42.",
            "author": "Hubot",
            "author_login": "hubot",
            "date": "2026-11-03T12:40:00Z",
            "html_url": "https://github.com/octo-org/hello-world/commit/6dcb09b5b57875f334f61aebed695e2e4193db5e",
        })
    );
    let found = json_of(
        &call(
            &registry,
            "github_search_issues",
            json!({"q": "repo:octo-org/hello-world is:issue crash"}),
        )
        .await,
    );
    assert_eq!(found["total_count"], 1);
    assert_eq!(found["incomplete_results"], false);
    assert_eq!(
        found["items"][0]["title"],
        "Crash when the config file is empty"
    );
}

#[tokio::test]
async fn code_search_and_a_rate_limit() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let hits = json_of(
        &call(
            &registry,
            "github_search_code",
            json!({"q": "repo:octo-org/hello-world empty"}),
        )
        .await,
    );
    assert_eq!(
        hits["items"][0],
        json!({
            "path": "src/config.rs",
            "repository": "octo-org/hello-world",
            "sha": "a9c2d7e3b2f9c1d0e8f7a6b5c4d3e2f1a0b9c8d7",
            "html_url": "https://github.com/octo-org/hello-world/blob/6dcb09b5b57875f334f61aebed695e2e4193db5e/src/config.rs",
        })
    );
    let limited = call(
        &registry,
        "github_search_code",
        json!({"q": "repo:octo-org/hello-world trim"}),
    )
    .await;
    assert!(!limited.ok);
    let text = limited.text_content();
    assert!(text.starts_with("GitHub API rate limit exceeded (GET /api/v3/search/code): API rate limit exceeded for 203.0.113.7."), "{text}");
    assert!(text.contains("Used 10 of 10 requests."), "{text}");
    assert!(
        text.contains("The limit resets at Unix time 4102444800 (in "),
        "{text}"
    );
}

#[tokio::test]
async fn bad_names_never_reach_the_server() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    for (owner, repo) in [
        ("..", "x"),
        ("octo-org/../../users", "x"),
        ("octo-org", "a b"),
        ("", "x"),
    ] {
        let result = call(
            &registry,
            "github_get_repository",
            json!({"owner": owner, "repo": repo}),
        )
        .await;
        assert!(!result.ok, "{owner}/{repo}");
        assert!(
            result.text_content().starts_with("invalid "),
            "{}",
            result.text_content()
        );
    }
    let dotted = call(
        &registry,
        "github_get_file_contents",
        json!({"owner": "o", "repo": "r", "path": "src/../../secret"}),
    )
    .await;
    assert!(!dotted.ok);
    let wrong_type = call(
        &registry,
        "github_get_issue",
        json!({"owner": "o", "repo": "r", "issue_number": "forty-two"}),
    )
    .await;
    assert!(
        wrong_type
            .text_content()
            .contains("  - issue_number: invalid type"),
        "{}",
        wrong_type.text_content()
    );
    assert!(server.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn unreachable_server_is_an_error_result() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/api/v3", listener.local_addr().unwrap());
    drop(listener);
    let registry = registry(&base, None);
    let result = call(
        &registry,
        "github_get_repository",
        json!({"owner": "o", "repo": "r"}),
    )
    .await;
    assert!(!result.ok);
    assert!(
        result
            .text_content()
            .starts_with("cannot reach GitHub (GET /api/v3/repos/o/r)"),
        "{}",
        result.text_content()
    );
}

#[tokio::test]
async fn cancel_ends_a_hanging_request_with_a_typed_error() {
    let server = serve().await;
    // Route the repository call to the hanging endpoint by using it as the base.
    let config = GitHubConfig::default().with_base_url(format!("{}/hang", server.base));
    let github = GitHub::new(config).unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(github.toolset()).unwrap();
    let ctx = ToolContext::new("call_1");
    let cancel = ctx.cancel.clone();
    let seen = server.seen.clone();
    tokio::spawn(async move {
        while seen.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        cancel.cancel();
    });
    let call = ToolCall::new(
        "call_1",
        "github_get_repository",
        json!({"owner": "o", "repo": "r"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let outcome = registry.invoke(&call, ctx).await;
    assert!(
        matches!(outcome, Err(ToolError::Cancelled { .. })),
        "{outcome:?}"
    );
}

#[test]
fn invalid_base_url_is_a_config_error() {
    let err = GitHub::new(GitHubConfig::default().with_base_url("not a url")).unwrap_err();
    assert!(matches!(err, SetupError::Config { .. }));
    let debug = format!("{:?}", GitHubConfig::default().with_token("ghp_secret"));
    assert!(!debug.contains("ghp_secret"), "{debug}");
}

#[tokio::test]
async fn page_numbers_at_their_extremes_are_clamped_or_refused() {
    let server = serve().await;
    let registry = registry(&server.base, None);
    let comments = |paging: Value| {
        let mut args = json!({"owner": "octo-org", "repo": "hello-world", "issue_number": 42});
        for (k, v) in paging.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    for (paging, page, per_page) in [
        (json!({"page": 0, "per_page": 0}), "1", "1"),
        (
            json!({"page": u32::MAX, "per_page": u32::MAX}),
            "4294967295",
            "100",
        ),
    ] {
        // No fixture answers these pages: the request is what matters.
        call(&registry, "github_list_issue_comments", comments(paging)).await;
        let seen = server.seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(seen.query["page"], page);
        assert_eq!(seen.query["per_page"], per_page);
    }
    let huge = call(
        &registry,
        "github_get_issue",
        json!({"owner": "o", "repo": "r", "issue_number": u64::MAX}),
    )
    .await;
    assert!(!huge.ok);
    let seen = server.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.path, "/api/v3/repos/o/r/issues/18446744073709551615");

    let asked = server.seen.lock().unwrap().len();
    for (tool, args) in [
        ("github_list_issue_comments", comments(json!({"page": -1}))),
        (
            "github_list_issue_comments",
            comments(json!({"page": 4_294_967_296_u64})),
        ),
        (
            "github_list_issue_comments",
            comments(json!({"per_page": -5})),
        ),
        ("github_list_issue_comments", comments(json!({"page": 1.5}))),
        (
            "github_get_issue",
            json!({"owner": "o", "repo": "r", "issue_number": -1}),
        ),
        (
            "github_search_issues",
            json!({"q": "x", "per_page": i64::MIN}),
        ),
    ] {
        let result = call(&registry, tool, args.clone()).await;
        assert!(!result.ok, "{tool} {args}");
        assert!(
            result.text_content().starts_with("Validation failed"),
            "{tool} {args}: {}",
            result.text_content()
        );
    }
    assert_eq!(server.seen.lock().unwrap().len(), asked);
}
