//! A room's history, paged by seq: the entries after one seq (reading
//! forward) or before one (scrolling back), exactly as stored.

use std::borrow::Cow;

use roundtable_thread_stream::{Entry, ThreadId, ThreadStore};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::requests::parse_limit;
use crate::api_error::{ApiError, ErrorCode};

/// The default and largest page of entries.
const DEFAULT_ENTRY_PAGE: usize = 100;
const MAX_ENTRY_PAGE: usize = 1000;

/// `GET /v1/rooms/{id}/entries` query.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct EntriesQuery {
    /// The entries after this seq (default 0: from the first).
    after: Option<String>,
    /// The entries before this seq instead (the page right before it).
    before: Option<String>,
    /// How many at most (1 to 1000, default 100).
    limit: Option<String>,
}

/// A page of a room's entries.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct EntryPage {
    /// The entries, in seq order.
    entries: Vec<StoredEntry>,
    /// The room's last seq when the page was read.
    last_seq: u64,
    /// True when entries lie beyond the page (after it when reading
    /// forward, before it when reading back).
    more: bool,
}

/// An entry as stored: its header (`seq`, `id`, `thread`, `author`, `at`),
/// its `type`, and the fields of its body.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(crate) struct StoredEntry(pub(crate) Entry);

impl JsonSchema for StoredEntry {
    fn schema_name() -> Cow<'static, str> {
        "RoomEntry".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "An entry of the room's thread as stored: header fields, `type` (`chat`, `pi.assistant`, `pi.tool_result`, `chat.chunk`, `turn.started`, `turn.ended`, `turn.failed`, `signal.room.*`...), then the body's fields.",
            "type": "object",
            "properties": {
                "seq": {"type": "integer", "minimum": 1},
                "id": {"type": "string"},
                "thread": {"type": "string"},
                "author": {"type": "string"},
                "at": {"type": "integer"},
                "type": {"type": "string"},
            },
            "required": ["seq", "id", "thread", "author", "at", "type"],
        })
    }
}

/// The page of `thread` that `query` asks for.
pub(crate) async fn page(
    store: &dyn ThreadStore,
    thread: &ThreadId,
    query: &EntriesQuery,
) -> Result<EntryPage, ApiError> {
    let limit = parse_limit(query.limit.as_deref(), DEFAULT_ENTRY_PAGE, MAX_ENTRY_PAGE)? as u64;
    let after = seq(query.after.as_deref(), "after")?;
    let before = seq(query.before.as_deref(), "before")?;
    let last_seq = store.last_seq(thread).await.map_err(ApiError::internal)?;
    let (range, more) = match (after, before) {
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "give `after` or `before`, not both",
            ));
        }
        (_, Some(before)) => {
            let end = before.saturating_sub(1).min(last_seq);
            let start = end.saturating_sub(limit - 1).max(1);
            (start..=end, start > 1)
        }
        (after, None) => {
            let start = after.unwrap_or(0).saturating_add(1);
            let end = start.saturating_add(limit - 1).min(last_seq);
            (start..=end, end < last_seq)
        }
    };
    let entries = if range.is_empty() {
        Vec::new()
    } else {
        store
            .read(thread, range)
            .await
            .map_err(ApiError::internal)?
    };
    Ok(EntryPage {
        entries: entries.into_iter().map(StoredEntry).collect(),
        last_seq,
        more,
    })
}

/// A seq parameter.
fn seq(text: Option<&str>, name: &str) -> Result<Option<u64>, ApiError> {
    text.filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<u64>().map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!("{name} must be a seq (a whole number)"),
                )
            })
        })
        .transpose()
}
