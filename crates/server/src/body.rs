//! JSON request bodies, read with the route's size limit and refused with
//! the API's JSON errors (never axum's plain-text rejections): 415 when the
//! body is not JSON, 413 when it is too large, 400 when it does not parse,
//! 422 when it parses but a field is wrong.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use crate::api_error::{ApiError, ErrorCode};

/// A JSON body of type `T` (required).
#[derive(Debug, Clone)]
pub(crate) struct JsonBody<T>(pub(crate) T);

/// A JSON body of type `T`, or `T::default()` when the body is empty.
#[derive(Debug, Clone)]
pub(crate) struct OptionalJsonBody<T>(pub(crate) T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (headers, bytes) = read(request, state).await?;
        parse(&headers, &bytes).map(Self)
    }
}

impl<S, T> FromRequest<S> for OptionalJsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Default,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (headers, bytes) = read(request, state).await?;
        if bytes.is_empty() {
            return Ok(Self(T::default()));
        }
        parse(&headers, &bytes).map(Self)
    }
}

/// The request's headers and whole body, within the route's limit.
async fn read<S: Send + Sync>(request: Request, state: &S) -> Result<(HeaderMap, Bytes), ApiError> {
    let headers = request.headers().clone();
    let bytes = Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    ErrorCode::TooLarge,
                    "the request body is larger than this route accepts",
                )
            } else {
                ApiError::new(ErrorCode::InvalidRequest, rejection.body_text())
            }
        })?;
    Ok((headers, bytes))
}

fn parse<T: DeserializeOwned>(headers: &HeaderMap, bytes: &[u8]) -> Result<T, ApiError> {
    if !is_json(headers) {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "the request body must be JSON (Content-Type: application/json)",
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if inner.is_data() {
            let field = if path == "." {
                String::new()
            } else {
                format!("{path}: ")
            };
            ApiError::new(ErrorCode::InvalidField, format!("{field}{inner}"))
        } else {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("the request body is not valid JSON: {inner}"),
            )
        }
    })
}

/// True when the body is declared JSON (`application/json`, or a
/// `+json` type), whatever its parameters.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use axum::http::HeaderValue;
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Body {
        name: String,
        #[serde(default)]
        count: u32,
    }

    fn json() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        headers
    }

    #[test]
    fn bodies_parse_or_say_what_is_wrong() {
        assert_eq!(
            parse::<Body>(&json(), br#"{"name":"a"}"#).unwrap(),
            Body {
                name: "a".into(),
                count: 0
            }
        );
        let code =
            |headers: &HeaderMap, body: &[u8]| parse::<Body>(headers, body).unwrap_err().code;
        assert_eq!(code(&json(), b"{"), ErrorCode::InvalidRequest);
        assert_eq!(code(&json(), b""), ErrorCode::InvalidRequest);
        assert_eq!(code(&json(), br#"{"name": "a"#), ErrorCode::InvalidRequest);
        assert_eq!(code(&json(), br#"{"count":1}"#), ErrorCode::InvalidField);
        assert_eq!(
            code(&HeaderMap::new(), br#"{"name":"a"}"#),
            ErrorCode::UnsupportedMediaType
        );
        let wrong = parse::<Body>(&json(), br#"{"name":"a","count":"x"}"#).unwrap_err();
        assert_eq!(wrong.code, ErrorCode::InvalidField);
        assert!(wrong.message.starts_with("count: "), "{}", wrong.message);
    }

    #[test]
    fn json_types_are_recognised() {
        let mut headers = HeaderMap::new();
        for (value, json) in [
            ("application/json", true),
            ("Application/JSON;charset=utf-8", true),
            ("application/merge-patch+json", true),
            ("text/plain", false),
            ("application/jsonl", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_json(&headers), json, "{value}");
        }
    }
}
