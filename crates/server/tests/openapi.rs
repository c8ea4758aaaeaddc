//! `GET /openapi.json`: the document covers every route the server
//! serves, with every method it takes, and the checker the other HTTP
//! tests use refuses what the document does not describe.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::openapi::{Found, document};
use support::{Fixture, TestServer, silent};

/// Every route of the APIs and the page, as the server's modules declare
/// them.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/"),
    ("get", "/chat.js"),
    ("get", "/chat.css"),
    ("get", "/openapi.json"),
    ("get", "/v1/sessions"),
    ("post", "/v1/sessions"),
    ("get", "/v1/sessions/{id}"),
    ("delete", "/v1/sessions/{id}"),
    ("post", "/v1/sessions/{id}/messages"),
    ("post", "/v1/sessions/{id}/attachments"),
    ("get", "/v1/sessions/{id}/attachments/{name}"),
    ("get", "/v1/sessions/{id}/artifacts/{turn_id}/{path}"),
    ("get", "/v1/sessions/{id}/events"),
    ("post", "/v1/sessions/{id}/approve"),
    ("post", "/v1/sessions/{id}/cancel"),
    ("post", "/v1/sessions/{id}/turns/{turn_id}/retry"),
    ("post", "/api/chat"),
    ("post", "/api/chat/abort"),
    ("post", "/api/chat/question"),
    ("get", "/api/chat/session"),
    ("post", "/api/chat/resume"),
    ("get", "/api/chat/sessions"),
    ("post", "/api/chat/new"),
    ("get", "/api/chat/models"),
    ("get", "/api/chat/resources"),
    ("get", "/api/chat/settings"),
    ("put", "/api/chat/settings"),
    ("get", "/api/chat/provenance"),
];

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

async fn server() -> (Fixture, TestServer) {
    let fx = Fixture::new();
    let engine = fx.engine(fx.store().await, silent());
    let server = TestServer::start(engine).await;
    (fx, server)
}

/// The document's routes, as (method, template).
fn documented() -> Vec<(String, String)> {
    let mut routes = Vec::new();
    for (template, item) in document().json["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(*method).is_some() {
                routes.push((method.to_string(), template.clone()));
            }
        }
    }
    routes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_lists_every_route_with_its_responses() {
    let (_fx, server) = server().await;
    let (status, served) = server.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(served, document().json);
    let mut expected: Vec<(String, String)> = ROUTES
        .iter()
        .map(|(m, t)| (m.to_string(), t.to_string()))
        .collect();
    let mut found = documented();
    expected.sort();
    found.sort();
    assert_eq!(found, expected);
    let schemas = served["components"]["schemas"].as_object().unwrap();
    for (method, template) in &found {
        let operation = &served["paths"][template][method];
        let responses = operation["responses"].as_object().unwrap();
        assert!(
            responses.keys().any(|s| s.starts_with('2')),
            "{method} {template}: no success"
        );
        for status in ["401", "403", "503"] {
            assert!(
                responses.contains_key(status),
                "{method} {template}: {status}"
            );
        }
        // Every path parameter is declared.
        for segment in template.split('/') {
            if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                let declared = operation["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["in"] == "path" && p["name"] == name && p["required"] == true);
                assert!(declared, "{method} {template}: parameter {name}");
            }
        }
    }
    // Every reference names a schema of the document.
    let text = served.to_string();
    for reference in text.split("\"$ref\":\"").skip(1) {
        let name = reference
            .split('"')
            .next()
            .unwrap()
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("a reference outside the components: {reference:.80}"));
        assert!(schemas.contains_key(name), "{name}");
    }
    // The streams say what each event and line is.
    let events = &served["paths"]["/v1/sessions/{id}/events"]["get"]["responses"]["200"]["content"];
    assert_eq!(
        events["text/event-stream"]["schema"]["$ref"],
        "#/components/schemas/SessionEvent"
    );
    let chat = &served["paths"]["/api/chat"]["post"]["responses"]["200"]["content"];
    assert_eq!(
        chat["application/x-ndjson"]["schema"]["$ref"],
        "#/components/schemas/ChatStreamEvent"
    );
    let error = &served["paths"]["/v1/sessions/{id}"]["get"]["responses"]["404"]["content"];
    assert_eq!(
        error["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
}

/// The path of `template` with each parameter given a value.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|segment| match segment {
            "{id}" => "sess_0000000000000000000000000000000a",
            "{turn_id}" => "turn_0000000000000000000000000000000a",
            s if s.starts_with('{') => "x",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_takes_exactly_the_methods_the_document_lists() {
    let (_fx, server) = server().await;
    let routes = documented();
    let templates: std::collections::BTreeSet<&String> = routes.iter().map(|(_, t)| t).collect();
    for template in templates {
        let path = concrete(template);
        for method in METHODS {
            let listed = routes.contains(&(method.to_string(), template.clone()));
            let request = server
                .http
                .request(
                    Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(),
                    server.url(&path),
                )
                .bearer_auth(support::TOKEN);
            let response = request.send().await.unwrap();
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if listed {
                assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
                assert_ne!(body["error"]["message"], "no such route", "{method} {path}");
            } else {
                assert_eq!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path}: {body}"
                );
                assert_eq!(
                    body["error"]["code"], "method_not_allowed",
                    "{method} {path}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_refuses_what_the_document_does_not_describe() {
    let (_fx, _server) = server().await;
    let doc = document();
    assert!(matches!(
        doc.find("GET", "/v1/sessions/sess_1/artifacts/turn_1/logs/a.txt"),
        Found::Operation {
            template: "/v1/sessions/{id}/artifacts/{turn_id}/{path}",
            ..
        }
    ));
    assert!(matches!(
        doc.find("GET", "/v1/sessions/sess_1/nothing"),
        Found::Nowhere
    ));
    let refused = |method: &'static str, path: &'static str, status: u16, body: Value| {
        let outcome = std::panic::catch_unwind(move || {
            document().check_response(method, path, status, &body);
        });
        assert!(outcome.is_err(), "{method} {path} {status} passed");
    };
    // A route the document lacks, a status it does not list, a body that
    // is not the response's.
    refused("GET", "/v1/elsewhere", 200, json!({}));
    refused("GET", "/api/chat/models", 201, json!({}));
    refused("GET", "/v1/sessions/sess_1", 200, json!({"id": 5}));
    refused(
        "GET",
        "/v1/sessions/sess_1",
        404,
        json!({"error": {"code": "nope", "message": "x"}}),
    );
    let outcome = std::panic::catch_unwind(|| {
        document().check_item(
            "POST",
            "/api/chat",
            "application/x-ndjson",
            &json!({"type": "delta"}),
        );
    });
    assert!(outcome.is_err(), "a delta line without its text passed");
    // What the server does write passes.
    doc.check_response(
        "GET",
        "/v1/sessions/sess_1",
        404,
        &json!({"error": {"code": "not_found", "message": "session sess_1 not found"}}),
    );
}
