//! Checks what the server answers against its OpenAPI document
//! (`GET /openapi.json`): a response's status must be one the document
//! lists for its route and method, and its JSON body must match that
//! response's schema; so must each event of a stream and each line of an
//! NDJSON answer. A route the document lacks fails the check.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

/// The document every test server serves (it depends on no setting).
static DOCUMENT: OnceLock<Document> = OnceLock::new();

/// The document, once a server served it.
pub(crate) fn document() -> &'static Document {
    DOCUMENT
        .get()
        .expect("no test server served its document yet")
}

/// Keeps the document `json` (the first one served).
pub(crate) fn keep(json: Value) {
    let _ = DOCUMENT.set(Document::new(json));
}

/// An OpenAPI document and the validators compiled from it.
pub(crate) struct Document {
    pub json: Value,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

/// Where a request landed in the document.
pub(crate) enum Found<'a> {
    /// The route and method: the operation.
    Operation {
        template: &'a str,
        operation: &'a Value,
    },
    /// A route of the document, not with this method.
    OtherMethod { template: &'a str },
    /// No route of the document.
    Nowhere,
}

impl Document {
    fn new(json: Value) -> Self {
        assert_eq!(json["openapi"], "3.1.0");
        Self {
            json,
            validators: Mutex::new(HashMap::new()),
        }
    }

    /// The document's route for `path` (a request's path, no query) and
    /// the operation of `method` there.
    pub(crate) fn find(&self, method: &str, path: &str) -> Found<'_> {
        let paths = self.json["paths"]
            .as_object()
            .expect("the document has paths");
        let mut best: Option<(&str, &Value, usize)> = None;
        for (template, item) in paths {
            if let Some(literals) = matches(template, item, path)
                && best.is_none_or(|(_, _, most)| literals > most)
            {
                best = Some((template, item, literals));
            }
        }
        let Some((template, item, _)) = best else {
            return Found::Nowhere;
        };
        match item.get(method.to_ascii_lowercase()) {
            Some(operation) => Found::Operation {
                template,
                operation,
            },
            None => Found::OtherMethod { template },
        }
    }

    /// Checks one answer: `status` and its JSON `body` (`Null` when the
    /// body was empty) to `method path`.
    pub(crate) fn check_response(&self, method: &str, path: &str, status: u16, body: &Value) {
        if method == "OPTIONS" {
            // A CORS preflight: answered by the security layer, before
            // any route.
            return;
        }
        let (template, operation) = match self.find(method, path) {
            Found::Operation {
                template,
                operation,
            } => (template, operation),
            Found::OtherMethod { template } => {
                assert!(
                    matches!(status, 401 | 403 | 405 | 503),
                    "{method} {path}: {template} has no {method} in the document, and the server answered {status}: {body}"
                );
                return self.check_error(&format!("{method} {path}"), body);
            }
            Found::Nowhere => {
                assert!(
                    matches!(status, 401 | 403 | 404 | 503),
                    "{method} {path}: no route of the document, and the server answered {status}: {body}"
                );
                return self.check_error(&format!("{method} {path}"), body);
            }
        };
        let response = &operation["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "{method} {template}: the document lists no {status} (the server answered {body})"
        );
        let Some(schema) = response["content"]
            .get("application/json")
            .map(|m| &m["schema"])
        else {
            return;
        };
        let key = format!("{method} {template} {status}");
        self.validate(&key, schema, body);
    }

    /// Checks one item of a streamed answer of `method path`: an event's
    /// data (`text/event-stream`) or a line (`application/x-ndjson`).
    pub(crate) fn check_item(&self, method: &str, path: &str, media_type: &str, item: &Value) {
        let Found::Operation {
            template,
            operation,
        } = self.find(method, path)
        else {
            panic!("{method} {path}: no such operation in the document");
        };
        let schema = operation["responses"]["200"]["content"][media_type]
            .get("schema")
            .unwrap_or_else(|| {
                panic!("{method} {template}: no {media_type} answer in the document")
            });
        let key = format!("{method} {template} {media_type}");
        self.validate(&key, schema, item);
    }

    /// Checks an error body against the document's `ErrorBody`.
    pub(crate) fn check_error(&self, what: &str, body: &Value) {
        let schema = json!({"$ref": "#/components/schemas/ErrorBody"});
        self.validate(&format!("error of {what}"), &schema, body);
    }

    fn validate(&self, key: &str, schema: &Value, value: &Value) {
        let validator = self.validator(key, schema);
        let errors: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{key}: the answer does not match the document: {errors:?}\n{value}"
        );
    }

    fn validator(&self, key: &str, schema: &Value) -> Arc<jsonschema::Validator> {
        let mut cache = self.validators.lock().unwrap();
        if let Some(found) = cache.get(key) {
            return found.clone();
        }
        // The schema with the document's components beside it, so that
        // its `#/components/schemas/...` references resolve.
        let rooted = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.json["components"],
            "allOf": [schema],
        });
        let validator = Arc::new(
            jsonschema::draft202012::new(&rooted)
                .unwrap_or_else(|e| panic!("{key}: the document's schema does not compile: {e}")),
        );
        cache.insert(key.to_string(), validator.clone());
        validator
    }
}

/// Whether `path` is one of `template`'s, and then how many of the
/// template's segments are literal (the more, the better the match).
fn matches(template: &str, item: &Value, path: &str) -> Option<usize> {
    let wanted: Vec<&str> = template.trim_start_matches('/').split('/').collect();
    let given: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut literals = 0;
    for (i, segment) in wanted.iter().enumerate() {
        let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
            if given.get(i) != Some(segment) {
                return None;
            }
            literals += 1;
            continue;
        };
        let value = given.get(i).filter(|v| !v.is_empty())?;
        let _ = value;
        if is_rest_of_path(item, name) {
            return (i == wanted.len() - 1).then_some(literals);
        }
    }
    (wanted.len() == given.len()).then_some(literals)
}

/// True when parameter `name` of the route takes the rest of the path.
fn is_rest_of_path(item: &Value, name: &str) -> bool {
    item.as_object()
        .into_iter()
        .flatten()
        .any(|(_, operation)| {
            operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"] == name && p["x-rest-of-path"] == true)
        })
}
