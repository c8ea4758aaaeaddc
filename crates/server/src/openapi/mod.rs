//! `GET /openapi.json`: the OpenAPI 3.1 document of everything
//! [`app_router`](crate::app_router) serves, generated from its routes and
//! from the JSON Schemas of their bodies.
//!
//! The document comes from [`aide`], not from a hand-written file: each
//! route is declared once, as an `aide` route whose handler's extractors
//! and answer types say its parameters, request body and responses (see
//! [`operations`]), with what the types cannot say (a status other than
//! 200, a stream's media type) added where the route is declared. `aide`
//! rather than `utoipa`: its schemas are `schemars` schemas, which the
//! sessions' events and records already derive (`EventData` above all),
//! and which follow serde's attributes (tags, flattening, renames) as the
//! bodies are written; `utoipa` would need a second derive on every type.
//!
//! What holds for every route is added once the routes are known: the
//! token (`401`), the `Host` and `Origin` checks (`403`) and the server's
//! limits (`503`) answer any route; a path parameter (axum's `{id}`, or a
//! `{*path}` that takes the rest of the path) and a query answer `400`
//! when they do not read.

mod operations;

use std::sync::{Arc, OnceLock};

use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use aide::openapi::{Info, OpenApi};
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::api_error::ErrorBody;

pub(crate) use operations::{binary, header_parameter, streamed, text};

/// Where the document is served.
pub(crate) const OPENAPI_PATH: &str = "/openapi.json";

/// The extension that marks a path parameter taking the rest of the path
/// (slashes included), as axum's `{*name}` does.
pub(crate) const REST_OF_PATH: &str = "x-rest-of-path";

/// `routes` with `GET /openapi.json` beside them, serving their document.
pub(crate) fn with_document(routes: ApiRouter) -> Router {
    let document: Arc<OnceLock<Bytes>> = Arc::new(OnceLock::new());
    let served = document.clone();
    let routes = routes.api_route(
        OPENAPI_PATH,
        get_with(
            move || {
                let served = served.clone();
                async move { serve(served.get()) }
            },
            |op| {
                op.summary("This document")
                    .response::<200, axum::Json<Value>>()
            },
        ),
    );
    let mut api = OpenApi {
        info: Info {
            title: "roundtable".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: Some(DESCRIPTION.into()),
            ..Info::default()
        },
        ..OpenApi::default()
    };
    aide::generate::in_context(|ctx| ctx.schema.subschema_for::<ErrorBody>());
    let router = routes.finish_api(&mut api);
    let finished = finish(serde_json::to_value(&api).unwrap_or_default());
    let _ = document.set(Bytes::from(finished.to_string()));
    router
}

const DESCRIPTION: &str = "The HTTP APIs of a roundtable server: `/v1/sessions` (agentic \
sessions, with server-sent events) and `/api/chat` (a prompt in, the answer out as NDJSON), \
and the chat page at `/`. Every request but the page's sign-in link needs the server's token, \
as a bearer token or as the cookie the link sets. Every failure answers \
`{\"error\": {\"code\", \"message\"}}`.";

fn serve(document: Option<&Bytes>) -> Response {
    match document {
        Some(bytes) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes.clone(),
        )
            .into_response(),
        // Set before the router is handed out: never reached.
        None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// The document with what holds for every route: the path templates in
/// OpenAPI's form with their parameters, the security scheme, and the
/// errors any route may answer.
fn finish(mut document: Value) -> Value {
    document["openapi"] = json!("3.1.0");
    document["components"]["securitySchemes"] = json!({
        "token": {
            "type": "http",
            "scheme": "bearer",
            "description": "The server's token (or a user's); a browser sends it as the cookie a `?token=` link sets.",
        }
    });
    document["security"] = json!([{"token": []}]);
    let paths = document["paths"].take();
    let mut finished = Map::new();
    for (template, mut item) in paths.as_object().cloned().unwrap_or_default() {
        let (template, parameters) = openapi_template(&template);
        for method in METHODS {
            if let Some(operation) = item.get_mut(*method) {
                complete(operation, &parameters);
            }
        }
        finished.insert(template, item);
    }
    document["paths"] = Value::Object(finished);
    document
}

/// The methods an operation may be under, in a path item.
const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head", "options"];

/// A path parameter of a template: its name, and whether it takes the
/// rest of the path.
struct PathParameter {
    name: String,
    rest: bool,
}

/// axum's template (`/{id}/files/{*path}`) in OpenAPI's form
/// (`/{id}/files/{path}`), and its parameters.
fn openapi_template(template: &str) -> (String, Vec<PathParameter>) {
    let mut parameters = Vec::new();
    let segments: Vec<String> = template
        .split('/')
        .map(|segment| {
            let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
                return segment.to_string();
            };
            let (name, rest) = match name.strip_prefix('*') {
                Some(name) => (name, true),
                None => (name, false),
            };
            parameters.push(PathParameter {
                name: name.to_string(),
                rest,
            });
            format!("{{{name}}}")
        })
        .collect();
    (segments.join("/"), parameters)
}

/// Adds to `operation` its path parameters (those its extractors did not
/// declare) and the error responses every route may give.
fn complete(operation: &mut Value, parameters: &[PathParameter]) {
    let declared = operation["parameters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut list = declared.clone();
    for parameter in parameters {
        let known = declared
            .iter()
            .any(|p| p["in"] == "path" && p["name"] == parameter.name.as_str());
        if known {
            continue;
        }
        let mut added = json!({
            "in": "path",
            "name": parameter.name,
            "required": true,
            "schema": {"type": "string"},
        });
        if parameter.rest {
            added["description"] = json!("The rest of the path: it may hold `/`.");
            added[REST_OF_PATH] = json!(true);
        }
        list.push(added);
    }
    let reads_input = !list.is_empty();
    if reads_input {
        operation["parameters"] = Value::Array(list);
    }
    let responses = &mut operation["responses"];
    let mut errors = vec![
        (401, "No token, or not a valid one."),
        (
            403,
            "A `Host` the server does not answer to, or an origin it does not allow.",
        ),
        (
            503,
            "The request took longer than the server allows, or the server holds as many connections as it allows.",
        ),
    ];
    if reads_input {
        errors.push((400, "A path or query parameter that does not read."));
    }
    for (status, description) in errors {
        let key = status.to_string();
        if responses.get(&key).is_none() {
            responses[key] = error_response(description);
        }
    }
}

/// An error response: the JSON error body.
pub(crate) fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_take_openapi_s_form() {
        let (template, parameters) =
            openapi_template("/v1/sessions/{id}/artifacts/{turn_id}/{*path}");
        assert_eq!(template, "/v1/sessions/{id}/artifacts/{turn_id}/{path}");
        let names: Vec<_> = parameters
            .iter()
            .map(|p| (p.name.as_str(), p.rest))
            .collect();
        assert_eq!(names, [("id", false), ("turn_id", false), ("path", true)]);
        assert_eq!(openapi_template("/").0, "/");
    }
}
