//! The request invariants of the OpenAI Responses API and Gemini, as
//! [`check_request`](super::check_request) checks the first two APIs'.

use std::collections::HashSet;

use serde_json::Value;

/// Responses: valid roles and item types; every `function_call_output`
/// answers a `function_call` of the turn before it, and every call is
/// answered before the next message.
pub(super) fn check_responses(body: &Value) -> Vec<String> {
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        return vec!["/responses: no input array".to_string()];
    };
    let mut problems = Vec::new();
    let mut pending: HashSet<String> = HashSet::new();
    let text = |item: &Value, key: &str| {
        item.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    for (i, item) in items.iter().enumerate() {
        let kind = item.get("type").and_then(Value::as_str);
        match (kind, item.get("role").and_then(Value::as_str)) {
            (Some("function_call"), _) => {
                let id = text(item, "call_id");
                if id.is_empty() {
                    problems.push(format!("item {i}: function_call without call_id"));
                }
                pending.insert(id);
            }
            (Some("function_call_output"), _) => {
                let id = text(item, "call_id");
                if !pending.remove(&id) {
                    problems.push(format!("item {i}: output {id} without its call"));
                }
            }
            (Some("reasoning"), _) | (Some("message"), Some("assistant")) => {}
            (None, Some("system" | "developer" | "user")) => {
                if !pending.is_empty() {
                    problems.push(format!("item {i}: calls {pending:?} without outputs"));
                    pending.clear();
                }
            }
            (kind, role) => problems.push(format!("item {i}: invalid item {kind:?} {role:?}")),
        }
    }
    if !pending.is_empty() {
        problems.push(format!("calls {pending:?} without outputs at the end"));
    }
    problems
}

/// Gemini: `user` and `model` turns only; every `functionResponse` sits in
/// the user turn right after the model turn with its `functionCall`s, one
/// response per call, by name.
pub(super) fn check_gemini(body: &Value) -> Vec<String> {
    let Some(contents) = body.get("contents").and_then(Value::as_array) else {
        return vec![":streamGenerateContent: no contents array".to_string()];
    };
    let mut problems = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let names = |content: &Value, key: &str| -> Vec<String> {
        content
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get(key)?.get("name")?.as_str().map(str::to_string))
            .collect()
    };
    for (i, content) in contents.iter().enumerate() {
        match content.get("role").and_then(Value::as_str) {
            Some("user") => {
                let mut responses = names(content, "functionResponse");
                responses.sort();
                pending.sort();
                if responses != pending {
                    problems.push(format!(
                        "content {i}: responses {responses:?} for calls {pending:?}"
                    ));
                }
                pending.clear();
            }
            Some("model") => {
                if !pending.is_empty() {
                    problems.push(format!("content {i}: calls {pending:?} without responses"));
                }
                pending = names(content, "functionCall");
            }
            other => problems.push(format!("content {i}: invalid role {other:?}")),
        }
    }
    if !pending.is_empty() {
        problems.push(format!("calls {pending:?} without responses at the end"));
    }
    problems
}
