//! The handlers of `/v1/sessions`: each reads its request, makes one
//! engine call (two for an approval naming its turn) and answers JSON.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use roundtable_sessions::{Caller, SessionError, SessionInfo, Submitted, TurnId};
use serde::Serialize;

use super::ApiState;
use super::requests::{
    ApproveBody, CancelBody, CreateSessionBody, Decided, ListQuery, MessageBody,
    check_idempotency_key,
};
use super::upload::Upload;
use crate::api_error::{ApiError, ErrorCode};
use crate::body::{JsonBody, OptionalJsonBody};
use crate::extract::{caller, path_rejected, session_id};
use crate::headers::IDEMPOTENCY_KEY;

/// What `POST /v1/sessions` answers: the spec's `session_id`, and the
/// whole session beside it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Created {
    session_id: Arc<str>,
    #[serde(flatten)]
    session: SessionInfo,
}

/// `GET /v1/sessions`: a page of sessions, newest first, and where the
/// next page starts (absent on the last page).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Listed {
    sessions: Vec<SessionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// `POST .../turns/{turn_id}/retry`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct Retried {
    turn_id: TurnId,
}

/// `POST .../cancel`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct CancelAccepted {
    status: &'static str,
}

pub(crate) async fn create_session(
    State(api): State<Arc<ApiState>>,
    found: Option<Extension<Caller>>,
    JsonBody(body): JsonBody<CreateSessionBody>,
) -> Result<Response, ApiError> {
    let request = body.into_request(api.workspace_root.as_deref())?;
    let session = api.engine.create(&caller(found), request).await?;
    let created = Created {
        session_id: session.id.clone(),
        session,
    };
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

pub(crate) async fn list_sessions(
    State(api): State<Arc<ApiState>>,
    found: Option<Extension<Caller>>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Listed>, ApiError> {
    let Query(query) =
        query.map_err(|r| ApiError::new(ErrorCode::InvalidRequest, r.body_text()))?;
    let page = api
        .engine
        .list_page(&caller(found), &query.into_page()?)
        .await?;
    Ok(Json(Listed {
        sessions: page.sessions,
        next_cursor: page.next_cursor.map(|c| c.to_string()),
    }))
}

pub(crate) async fn delete_session(
    State(api): State<Arc<ApiState>>,
    id: Result<Path<String>, PathRejection>,
    found: Option<Extension<Caller>>,
) -> Result<StatusCode, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let session = session_id(&id)?;
    match api.engine.delete(&caller(found), session.as_str()).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(SessionError::Busy(_)) => Err(ApiError::new(
            ErrorCode::SessionBusy,
            format!(
                "session {session} runs a turn or holds queued messages: cancel or wait, then delete it"
            ),
        )),
        Err(error) => Err(error.into()),
    }
}

pub(crate) async fn get_session(
    State(api): State<Arc<ApiState>>,
    id: Result<Path<String>, PathRejection>,
    found: Option<Extension<Caller>>,
) -> Result<Json<SessionInfo>, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let session = session_id(&id)?;
    Ok(Json(
        api.engine.get(&caller(found), session.as_str()).await?,
    ))
}

pub(crate) async fn post_message(
    State(api): State<Arc<ApiState>>,
    id: Result<Path<String>, PathRejection>,
    found: Option<Extension<Caller>>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MessageBody>,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let session = session_id(&id)?;
    let key = match headers.get(IDEMPOTENCY_KEY) {
        Some(value) => {
            let key = value.to_str().unwrap_or("\u{0}");
            check_idempotency_key(key)?;
            Some(key.to_string())
        }
        None => None,
    };
    let submit = body.into_submit(key)?;
    let submitted: Submitted = api
        .engine
        .submit(&caller(found), session.as_str(), submit)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(submitted)).into_response())
}

pub(crate) async fn upload_attachment(
    State(api): State<Arc<ApiState>>,
    id: Result<Path<String>, PathRejection>,
    found: Option<Extension<Caller>>,
    upload: Upload,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let session = session_id(&id)?;
    let attachment = api
        .engine
        .upload_attachment(
            &caller(found),
            session.as_str(),
            upload.filename.as_deref(),
            &upload.mime_type,
            upload.bytes,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(attachment)).into_response())
}

pub(crate) async fn approve(
    State(api): State<Arc<ApiState>>,
    id: Result<Path<String>, PathRejection>,
    found: Option<Extension<Caller>>,
    JsonBody(body): JsonBody<ApproveBody>,
) -> Result<Json<Decided>, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let session = session_id(&id)?;
    let caller = caller(found);
    if let Some(turn) = &body.turn_id {
        // The engine finds a call by its id alone; a request that names
        // the call's turn must name the right one.
        let info = api.engine.get(&caller, session.as_str()).await?;
        let elsewhere = info
            .pending_approvals
            .iter()
            .any(|p| *p.tool_call_id == *body.tool_call_id && *p.turn_id != **turn);
        if elsewhere {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!(
                    "no call {} waits for approval in turn {turn}",
                    body.tool_call_id
                ),
            ));
        }
    }
    api.engine
        .decide(
            &caller,
            session.as_str(),
            &body.tool_call_id,
            body.action,
            body.reason,
        )
        .await?;
    Ok(Json(Decided {
        tool_call_id: body.tool_call_id,
        action: body.action,
    }))
}

pub(crate) async fn cancel(
    State(api): State<Arc<ApiState>>,
    id: Result<Path<String>, PathRejection>,
    found: Option<Extension<Caller>>,
    OptionalJsonBody(body): OptionalJsonBody<CancelBody>,
) -> Result<Response, ApiError> {
    let Path(id) = id.map_err(path_rejected)?;
    let session = session_id(&id)?;
    api.engine
        .cancel(&caller(found), session.as_str(), body.reason)
        .await?;
    let accepted = CancelAccepted {
        status: "cancel_requested",
    };
    Ok((StatusCode::ACCEPTED, Json(accepted)).into_response())
}

pub(crate) async fn retry(
    State(api): State<Arc<ApiState>>,
    ids: Result<Path<(String, String)>, PathRejection>,
    found: Option<Extension<Caller>>,
) -> Result<Response, ApiError> {
    let Path((id, turn)) = ids.map_err(path_rejected)?;
    let session = session_id(&id)?;
    let turn = TurnId::parse(&turn).map_err(|_| {
        let shown: String = turn.chars().take(80).collect();
        ApiError::new(
            ErrorCode::NotFound,
            format!("no turn {shown} in the session"),
        )
    })?;
    let turn_id = api
        .engine
        .retry(&caller(found), session.as_str(), turn.as_str())
        .await?;
    Ok((StatusCode::CREATED, Json(Retried { turn_id })).into_response())
}
