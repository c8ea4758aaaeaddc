//! Who the caller is in a room: the author of what they post and whether
//! they see a room. The author always comes from the caller the token
//! identifies, never from a request's body.

use std::sync::Arc;

use roundtable_sessions::Caller;

use super::record::Room;
use crate::api_error::{ApiError, ErrorCode};

/// The id the host's own token speaks as.
pub(crate) const HOST_ID: &str = "host";

/// The participant id the caller writes as: a user's id, or `host` for
/// the host's token. A caller with no identity (routes mounted without the
/// security layer) cannot use rooms.
pub(crate) fn author_of(caller: &Caller) -> Result<Arc<str>, ApiError> {
    match caller {
        Caller::User(id) => Ok(id.clone()),
        Caller::Host => Ok(Arc::from(HOST_ID)),
        Caller::Anonymous => Err(ApiError::new(
            ErrorCode::Unauthorized,
            "rooms need an authenticated caller: send a token",
        )),
    }
}

/// True when the caller sees `room`: its members, and the host, which sees
/// every room as it does every session.
pub(crate) fn sees(caller: &Caller, room: &Room) -> bool {
    match caller {
        Caller::Host => true,
        Caller::User(id) => room.is_member(id),
        Caller::Anonymous => false,
    }
}

/// The answer for a room the caller does not see: the same as for a room
/// that does not exist, so a stranger learns nothing of it.
pub(crate) fn no_room(id: &str) -> ApiError {
    let shown: String = id.chars().take(80).collect();
    ApiError::new(ErrorCode::NotFound, format!("room {shown} not found"))
}
