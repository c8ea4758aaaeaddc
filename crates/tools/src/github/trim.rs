//! Projections of GitHub API responses down to what a model needs: no URLs
//! of every related resource, no node ids, user objects reduced to logins,
//! long bodies cut.

use base64::Engine;
use serde_json::{Map, Value, json};

fn get<'v>(v: &'v Value, path: &[&str]) -> &'v Value {
    let mut cur = v;
    for key in path {
        cur = cur.get(key).unwrap_or(&Value::Null);
    }
    cur
}

fn pick(v: &Value, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .map(|k| ((*k).to_string(), get(v, &[k]).clone()))
        .collect()
}

fn login(v: &Value) -> Value {
    get(v, &["login"]).clone()
}

fn logins(v: &Value) -> Value {
    Value::Array(
        v.as_array()
            .map(|a| a.iter().map(login).collect())
            .unwrap_or_default(),
    )
}

fn label_names(v: &Value) -> Value {
    Value::Array(
        v.as_array()
            .map(|a| a.iter().map(|l| get(l, &["name"]).clone()).collect())
            .unwrap_or_default(),
    )
}

/// Cuts text to `max` chars, marking the cut.
pub(crate) fn cut(text: &str, max: usize) -> Value {
    match text.char_indices().nth(max) {
        None => Value::String(text.to_string()),
        Some((i, _)) => Value::String(format!(
            "{}… [cut: {} more chars]",
            &text[..i],
            text[i..].chars().count()
        )),
    }
}

fn body(v: &Value, max: usize) -> Value {
    match get(v, &["body"]).as_str() {
        Some(text) => cut(text, max),
        None => Value::Null,
    }
}

/// A repository.
pub(crate) fn repository(v: &Value) -> Value {
    let mut out = pick(
        v,
        &[
            "full_name",
            "description",
            "private",
            "fork",
            "archived",
            "default_branch",
            "language",
            "topics",
            "stargazers_count",
            "forks_count",
            "open_issues_count",
            "html_url",
            "created_at",
            "updated_at",
            "pushed_at",
        ],
    );
    out.insert("license".into(), get(v, &["license", "spdx_id"]).clone());
    Value::Object(out)
}

/// An issue (or a pull request seen through the issues API).
pub(crate) fn issue(v: &Value, max_body: usize) -> Value {
    let mut out = pick(
        v,
        &[
            "number",
            "title",
            "state",
            "state_reason",
            "comments",
            "created_at",
            "updated_at",
            "closed_at",
            "html_url",
        ],
    );
    out.insert("author".into(), login(get(v, &["user"])));
    out.insert("labels".into(), label_names(get(v, &["labels"])));
    out.insert("assignees".into(), logins(get(v, &["assignees"])));
    out.insert(
        "is_pull_request".into(),
        Value::Bool(!get(v, &["pull_request"]).is_null()),
    );
    out.insert("body".into(), body(v, max_body));
    Value::Object(out)
}

/// A comment on an issue or pull request.
pub(crate) fn comment(v: &Value, max_body: usize) -> Value {
    let mut out = pick(
        v,
        &[
            "id",
            "author_association",
            "created_at",
            "updated_at",
            "html_url",
        ],
    );
    out.insert("author".into(), login(get(v, &["user"])));
    out.insert("body".into(), body(v, max_body));
    Value::Object(out)
}

/// A pull request.
pub(crate) fn pull_request(v: &Value, max_body: usize) -> Value {
    let mut out = pick(
        v,
        &[
            "number",
            "title",
            "state",
            "draft",
            "merged",
            "mergeable",
            "comments",
            "review_comments",
            "commits",
            "additions",
            "deletions",
            "changed_files",
            "created_at",
            "updated_at",
            "closed_at",
            "merged_at",
            "html_url",
        ],
    );
    out.insert("author".into(), login(get(v, &["user"])));
    out.insert(
        "head".into(),
        json!({
            "ref": get(v, &["head", "ref"]),
            "sha": get(v, &["head", "sha"]),
            "repo": get(v, &["head", "repo", "full_name"]),
        }),
    );
    out.insert(
        "base".into(),
        json!({
            "ref": get(v, &["base", "ref"]),
            "sha": get(v, &["base", "sha"]),
        }),
    );
    out.insert("labels".into(), label_names(get(v, &["labels"])));
    out.insert(
        "requested_reviewers".into(),
        logins(get(v, &["requested_reviewers"])),
    );
    out.insert("body".into(), body(v, max_body));
    // List responses lack the counters; drop what is absent rather than
    // showing the model a wall of nulls.
    out.retain(|_, v| !v.is_null());
    Value::Object(out)
}

/// A commit of a commit list.
pub(crate) fn commit(v: &Value, max_message: usize) -> Value {
    json!({
        "sha": get(v, &["sha"]),
        "message": get(v, &["commit", "message"]).as_str().map(|m| cut(m, max_message)),
        "author": get(v, &["commit", "author", "name"]),
        "author_login": get(v, &["author", "login"]),
        "date": get(v, &["commit", "author", "date"]),
        "html_url": get(v, &["html_url"]),
    })
}

/// A code search hit.
pub(crate) fn code_hit(v: &Value) -> Value {
    json!({
        "path": get(v, &["path"]),
        "repository": get(v, &["repository", "full_name"]),
        "sha": get(v, &["sha"]),
        "html_url": get(v, &["html_url"]),
    })
}

/// A contents response: a file's decoded text, or a directory listing.
pub(crate) fn contents(v: &Value, max_chars: usize) -> Value {
    if let Some(entries) = v.as_array() {
        return Value::Array(
            entries
                .iter()
                .map(|e| Value::Object(pick(e, &["name", "path", "type", "size"])))
                .collect(),
        );
    }
    let mut out = pick(v, &["type", "path", "size", "sha", "html_url"]);
    let encoded = get(v, &["content"]).as_str().unwrap_or("");
    if get(v, &["encoding"]).as_str() == Some("base64") {
        let compact: String = encoded.chars().filter(|c| !c.is_whitespace()).collect();
        match base64::engine::general_purpose::STANDARD.decode(compact) {
            Ok(bytes) if !bytes[..bytes.len().min(8192)].contains(&0) => {
                out.insert(
                    "content".into(),
                    cut(&String::from_utf8_lossy(&bytes), max_chars),
                );
            }
            Ok(_) => {
                out.insert("content".into(), Value::String("(binary file)".into()));
            }
            Err(_) => {
                out.insert(
                    "content".into(),
                    Value::String("(undecodable content)".into()),
                );
            }
        }
    } else if !encoded.is_empty() {
        out.insert("content".into(), cut(encoded, max_chars));
    } else if get(v, &["type"]).as_str() == Some("file") {
        out.insert(
            "content".into(),
            Value::String(
                "(content not included: the file is too large for the contents API)".into(),
            ),
        );
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_marks_what_it_removed() {
        assert_eq!(cut("héllo", 10), json!("héllo"));
        assert_eq!(cut("héllo", 2), json!("hé… [cut: 3 more chars]"));
    }
}
