//! The body of `POST /v1/sessions/{id}/attachments`: one file, sent
//! either as JSON with its bytes in base64 or as `multipart/form-data`.
//!
//! - JSON: `{"filename": "shot.png", "mime_type": "image/png",
//!   "data_base64": "iVBORw0KGgo..."}` (`filename` optional; whitespace in
//!   the base64 is ignored, so wrapped output of `base64` works).
//! - Multipart: a part named `file` (its `filename` and `Content-Type` are
//!   the file's name and type), and optionally `mime_type` and `filename`
//!   text parts that override them (for clients that cannot set a part's
//!   type).
//!
//! Reading the body is all this does: the engine checks the file (its
//! size, its declared type against its bytes) and stores it under a name
//! of its own, never the client's.

use axum::body::Bytes;
use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{HeaderMap, StatusCode, header};
use base64::Engine;
use serde::Deserialize;

use crate::api_error::{ApiError, ErrorCode};
use crate::body::{JsonBody, is_json};

/// The multipart part that holds the file.
pub(crate) const FILE_PART: &str = "file";

/// An upload, read and not yet checked.
#[derive(Debug)]
pub(crate) struct Upload {
    /// The client's name for the file (display only).
    pub(crate) filename: Option<String>,
    /// The type the client declares.
    pub(crate) mime_type: String,
    /// The file.
    pub(crate) bytes: Bytes,
}

/// The JSON form of an upload.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct UploadBody {
    #[serde(default)]
    filename: Option<String>,
    mime_type: String,
    data_base64: String,
}

impl UploadBody {
    fn decode(self) -> Result<Upload, ApiError> {
        let mut text = self.data_base64.into_bytes();
        text.retain(|b| !b.is_ascii_whitespace());
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&text)
            .map_err(|e| invalid(format!("data_base64: not standard base64 ({e})")))?;
        Ok(Upload {
            filename: self.filename,
            mime_type: self.mime_type,
            bytes: bytes.into(),
        })
    }
}

impl<S: Send + Sync> FromRequest<S> for Upload {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if is_multipart(request.headers()) {
            let multipart = Multipart::from_request(request, state)
                .await
                .map_err(multipart_rejected)?;
            from_multipart(multipart).await
        } else if is_json(request.headers()) {
            let JsonBody(body) = JsonBody::<UploadBody>::from_request(request, state).await?;
            body.decode()
        } else {
            Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "an upload is JSON ({filename, mime_type, data_base64}) or multipart/form-data \
                 with a `file` part",
            ))
        }
    }
}

async fn from_multipart(mut multipart: Multipart) -> Result<Upload, ApiError> {
    let mut file: Option<(Option<String>, Option<String>, Bytes)> = None;
    let mut mime_type = None;
    let mut filename = None;
    while let Some(field) = multipart.next_field().await.map_err(multipart_failed)? {
        let name = field.name().unwrap_or("").to_string();
        match name.as_str() {
            FILE_PART if file.is_some() => {
                return Err(invalid("file: an upload holds one file".into()));
            }
            FILE_PART => {
                let part_name = field.file_name().map(str::to_string);
                let part_type = field.content_type().map(str::to_string);
                let bytes = field.bytes().await.map_err(multipart_failed)?;
                file = Some((part_name, part_type, bytes));
            }
            "mime_type" => mime_type = Some(text(field).await?),
            "filename" => filename = Some(text(field).await?),
            other => {
                let shown: String = other.chars().take(40).collect();
                return Err(invalid(format!(
                    "{shown:?}: not a part of an upload (file, and optionally mime_type and filename)"
                )));
            }
        }
    }
    let Some((part_name, part_type, bytes)) = file else {
        return Err(invalid(format!("{FILE_PART}: the upload has no file part")));
    };
    let Some(mime_type) = mime_type.or(part_type) else {
        return Err(invalid(
            "mime_type: give the file part a Content-Type, or send a mime_type part".into(),
        ));
    };
    Ok(Upload {
        filename: filename.or(part_name),
        mime_type,
        bytes,
    })
}

async fn text(field: Field<'_>) -> Result<String, ApiError> {
    field.text().await.map_err(multipart_failed)
}

/// True when the body is declared `multipart/form-data`.
fn is_multipart(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("multipart/form-data"))
}

fn multipart_rejected(rejection: MultipartRejection) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, rejection.body_text())
}

/// A multipart body that is too large (the route's limit) or malformed.
fn multipart_failed(error: MultipartError) -> ApiError {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            ErrorCode::TooLarge,
            "the request body is larger than this route accepts",
        )
    } else {
        ApiError::new(ErrorCode::InvalidRequest, error.body_text())
    }
}

fn invalid(message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidField, message)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn base64_is_decoded_whatever_its_line_breaks() {
        let body = UploadBody {
            filename: Some("a.txt".into()),
            mime_type: "text/plain".into(),
            data_base64: "aGVs\nbG8g\r\nd29y bGQ=\n".into(),
        };
        let upload = body.decode().unwrap();
        assert_eq!(&upload.bytes[..], b"hello world");
        assert_eq!(upload.filename.as_deref(), Some("a.txt"));
        let bad = UploadBody {
            filename: None,
            mime_type: "text/plain".into(),
            data_base64: "not base64!".into(),
        };
        let err = bad.decode().unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidField);
        assert!(err.message.starts_with("data_base64"), "{}", err.message);
    }

    #[test]
    fn multipart_is_recognised_by_its_media_type() {
        let mut headers = HeaderMap::new();
        assert!(!is_multipart(&headers));
        headers.insert(
            header::CONTENT_TYPE,
            "Multipart/Form-Data; boundary=x".parse().unwrap(),
        );
        assert!(is_multipart(&headers));
        headers.insert(header::CONTENT_TYPE, "multipart/mixed".parse().unwrap());
        assert!(!is_multipart(&headers));
    }
}
