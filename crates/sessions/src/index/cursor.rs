//! Where a page of sessions ends: an opaque token a client hands back for
//! the next page.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::ids::SessionId;

/// The place of the last session of a page (its `updated_at` in Unix ms,
/// and its id); written as an opaque URL-safe token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub(crate) updated_at: i64,
    pub(crate) id: Arc<str>,
}

/// A cursor that is none of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cursor is not one a listing gave")]
pub struct InvalidCursor;

impl SessionCursor {
    /// Reads a token [`Display`](fmt::Display) wrote.
    pub fn parse(token: &str) -> Result<Self, InvalidCursor> {
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| InvalidCursor)?;
        let text = std::str::from_utf8(&bytes).map_err(|_| InvalidCursor)?;
        let (at, id) = text.split_once(':').ok_or(InvalidCursor)?;
        let updated_at = at.parse().map_err(|_| InvalidCursor)?;
        let id = SessionId::parse(id).map_err(|_| InvalidCursor)?;
        Ok(Self {
            updated_at,
            id: id.as_arc().clone(),
        })
    }
}

impl fmt::Display for SessionCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("{}:{}", self.updated_at, self.id);
        f.write_str(&URL_SAFE_NO_PAD.encode(text))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_cursor_reads_back_and_anything_else_is_refused() {
        let id = SessionId::generate();
        let cursor = SessionCursor {
            updated_at: 1_700_000_000_123,
            id: id.as_arc().clone(),
        };
        let token = cursor.to_string();
        assert!(!token.contains(id.as_str()));
        assert_eq!(SessionCursor::parse(&token).unwrap(), cursor);
        for bad in [
            "",
            "!!",
            "bm9wZQ",
            &URL_SAFE_NO_PAD.encode("x:sess_1"),
            &URL_SAFE_NO_PAD.encode("1:../x"),
        ] {
            assert_eq!(SessionCursor::parse(bad), Err(InvalidCursor), "{bad}");
        }
    }
}
