//! What every route reads from a request besides its body: the caller the
//! auth layer found, and the session a path or body names.

use axum::extract::Extension;
use axum::extract::rejection::PathRejection;
use roundtable_sessions::{Caller, SessionId};

use crate::api_error::{ApiError, ErrorCode};

/// The caller the auth layer found; a request that went through no auth
/// layer (a host that mounted the routes bare) is anonymous.
pub(crate) fn caller(found: Option<Extension<Caller>>) -> Caller {
    found.map_or(Caller::Anonymous, |Extension(caller)| caller)
}

/// The session `id` names. An id that is not a session id names no
/// session: 404, as for an unknown one.
pub(crate) fn session_id(id: &str) -> Result<SessionId, ApiError> {
    SessionId::parse(id).map_err(|_| {
        let shown: String = id.chars().take(80).collect();
        ApiError::new(ErrorCode::NotFound, format!("session {shown} not found"))
    })
}

/// A path parameter that could not be read (not UTF-8 once decoded).
pub(crate) fn path_rejected(rejection: PathRejection) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, rejection.body_text())
}
