//! Which session a request names: by id (`sessionId`) or by the path of its
//! thread file (`sessionFile`), or both.
//!
//! A path is never opened. The engine's store resolves it (links followed,
//! `..` removed) and accepts it only when it is exactly a session's thread
//! file inside the store's folder; the session's id then comes from the
//! store's layout ([`SessionEngine::session_of_file`]). Any other path, a
//! relative one included, names no session, and the answer is the one for
//! an unknown session: it never says whether the path exists. A file of
//! another user's session is, to the caller, no session file at all.

use std::path::PathBuf;

use roundtable_sessions::{Caller, SessionEngine, SessionErrorKind, SessionId};

use crate::api_error::{ApiError, ErrorCode};
use crate::extract::session_id;

/// What a request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Named {
    /// No session: a new one, where the route makes one.
    Nothing,
    /// This session (the caller may still not be allowed it: the engine's
    /// calls check).
    Session(SessionId),
    /// A `sessionFile` that is no session file of the caller's.
    UnknownFile,
}

impl Named {
    /// Reads `id` and `file`. A malformed id is an error (as on every
    /// route); both given and not naming the same session of the caller's
    /// is 400.
    pub(crate) async fn read(
        engine: &SessionEngine,
        caller: &Caller,
        id: Option<&str>,
        file: Option<&str>,
    ) -> Result<Self, ApiError> {
        let id = id.map(session_id).transpose()?;
        let Some(file) = file else {
            return Ok(id.map_or(Self::Nothing, Self::Session));
        };
        let of_file = session_of_file(engine, caller, file).await?;
        match (id, of_file) {
            (Some(id), Some(of_file)) if id == of_file => Ok(Self::Session(id)),
            (Some(_), _) => Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "sessionId and sessionFile name different sessions: give one of them",
            )),
            (None, Some(of_file)) => Ok(Self::Session(of_file)),
            (None, None) => Ok(Self::UnknownFile),
        }
    }

    /// The session named, where a route needs one: an unknown file is 404,
    /// as an unknown id is.
    pub(crate) fn required(self) -> Result<SessionId, ApiError> {
        match self {
            Self::Session(id) => Ok(id),
            Self::UnknownFile => Err(unknown_file()),
            Self::Nothing => Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "sessionId or sessionFile: name the session",
            )),
        }
    }
}

/// The 404 of a `sessionFile` that names no session of the caller's.
pub(crate) fn unknown_file() -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        "sessionFile: no session of yours has that file",
    )
}

/// The caller's session whose thread file `file` is, if one: resolved by
/// the store (off the async threads: it looks the path up), then checked
/// against the caller as every call naming a session is.
async fn session_of_file(
    engine: &SessionEngine,
    caller: &Caller,
    file: &str,
) -> Result<Option<SessionId>, ApiError> {
    let path = PathBuf::from(file);
    // A relative path would be resolved against the server's working
    // folder, which is none of the client's business.
    if !path.is_absolute() {
        return Ok(None);
    }
    let resolver = engine.clone();
    let found = tokio::task::spawn_blocking(move || resolver.session_of_file(&path))
        .await
        .map_err(|e| ApiError::internal(format_args!("resolving sessionFile failed: {e}")))?;
    let Some(found) = found else {
        return Ok(None);
    };
    match engine.get(caller, found.as_str()).await {
        Ok(_) => Ok(Some(found)),
        Err(e) if e.kind() == SessionErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}
