//! `GET .../attachments/{name}` and `GET .../artifacts/{turn_id}/{path}`:
//! a session's files, read back by its clients.
//!
//! The path a client gives is only ever a blob path inside the session
//! (the engine checks it as a `BlobPath` before anything is read): no file
//! of another session or of the server can be named, and one that cannot
//! exist is a 404 like a missing one. A file is served with the type its
//! bytes (or, for text, its extension) say, never as a page a browser
//! would run.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use roundtable_sessions::{Caller, StoredFile};

use super::ApiState;
use crate::api_error::ApiError;
use crate::extract::{caller, path_rejected, session_id};

pub(crate) async fn get_attachment(
    State(api): State<Arc<ApiState>>,
    ids: Result<Path<(String, String)>, PathRejection>,
    found: Option<Extension<Caller>>,
) -> Result<Response, ApiError> {
    let Path((id, name)) = ids.map_err(path_rejected)?;
    let session = session_id(&id)?;
    let path = format!("attachments/{name}");
    let file = api
        .engine
        .read_file(&caller(found), session.as_str(), &path)
        .await?;
    Ok(served(file))
}

pub(crate) async fn get_artifact(
    State(api): State<Arc<ApiState>>,
    ids: Result<Path<(String, String, String)>, PathRejection>,
    found: Option<Extension<Caller>>,
) -> Result<Response, ApiError> {
    let Path((id, turn, rest)) = ids.map_err(path_rejected)?;
    let session = session_id(&id)?;
    let path = format!("artifacts/{turn}/{rest}");
    let file = api
        .engine
        .read_file(&caller(found), session.as_str(), &path)
        .await?;
    Ok(served(file))
}

/// The response of a file: its bytes, its type, and headers that keep a
/// browser from reading it as anything else or running it.
fn served(file: StoredFile) -> Response {
    let content_type = HeaderValue::from_str(&file.content_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let mut response = file.bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private"));
    response
}
