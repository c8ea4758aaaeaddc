//! The bodies of the `/v1/sessions` routes and what they become for the
//! engine. Everything a client sends is checked here: a client never sets
//! a session's owner or a message's author (the engine takes those from
//! the caller its token identifies), and a file it names is a
//! [`BlobPath`] of the session, never one that leaves the session's
//! folder.

use std::path::{Path, PathBuf};

use roundtable_sessions::blob::BlobPath;
use roundtable_sessions::index::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, SessionCursor};
use roundtable_sessions::{
    ApprovalAction, CreateSession, ListSessions, SessionLimits, SessionStatus, Submit,
};
use roundtable_thread_stream::FileRef;
use roundtable_tools::{ApprovalPolicy, PatchReviewPolicy, VerifyPolicy};
use serde::{Deserialize, Serialize};

use crate::api_error::{ApiError, ErrorCode};

/// `POST /v1/sessions`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub(crate) struct CreateSessionBody {
    pub(crate) workspace_path: Option<PathBuf>,
    pub(crate) system_prompt: Option<String>,
    pub(crate) auto_run: Option<bool>,
    pub(crate) approval_policy: Option<ApprovalPolicy>,
    pub(crate) verify_policy: Option<VerifyPolicy>,
    pub(crate) patch_review: Option<PatchReviewBody>,
    pub(crate) limits: Option<SessionLimits>,
}

/// `patch_review: {mode}`.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
pub(crate) struct PatchReviewBody {
    pub(crate) mode: PatchReviewPolicy,
}

impl CreateSessionBody {
    /// The engine's request (the engine makes a user's session theirs).
    /// With a `workspace_root`, the workspace must be inside it (after
    /// resolving links).
    pub(crate) fn into_request(
        self,
        workspace_root: Option<&Path>,
    ) -> Result<CreateSession, ApiError> {
        let workspace_path = self.workspace_path.unwrap_or_default();
        if let Some(root) = workspace_root {
            check_inside(&workspace_path, root)?;
        }
        Ok(CreateSession {
            workspace_path,
            system_prompt: self.system_prompt,
            auto_run: self.auto_run,
            approval_policy: self.approval_policy,
            verify_policy: self.verify_policy,
            patch_review: self.patch_review.map(|p| p.mode),
            limits: self.limits,
            ..CreateSession::default()
        })
    }
}

/// Refuses a workspace outside `root`. A path that does not resolve is
/// left to the engine, which says why it is unusable.
fn check_inside(workspace: &Path, root: &Path) -> Result<(), ApiError> {
    let (Ok(workspace), Ok(root)) = (workspace.canonicalize(), root.canonicalize()) else {
        return Ok(());
    };
    if workspace.starts_with(&root) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::InvalidField,
            format!(
                "workspace_path: {} is outside the folder this server serves ({})",
                workspace.display(),
                root.display()
            ),
        ))
    }
}

/// `POST /v1/sessions/{id}/messages`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub(crate) struct MessageBody {
    #[serde(default = "user_role")]
    pub(crate) role: String,
    pub(crate) parts: Vec<Part>,
    #[serde(default)]
    pub(crate) auto_run: Option<bool>,
}

fn user_role() -> String {
    "user".into()
}

/// One part of a message.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Part {
    Text {
        text: String,
    },
    Image {
        #[serde(rename = "ref")]
        reference: String,
        mime_type: String,
    },
    Audio {
        #[serde(rename = "ref")]
        reference: String,
        mime_type: String,
    },
    File {
        #[serde(rename = "ref")]
        reference: String,
        mime_type: String,
    },
}

/// The longest `Idempotency-Key` accepted.
pub(crate) const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

impl MessageBody {
    /// The engine's message (written by the caller). Text parts are joined
    /// by blank lines (the engine keeps one text per message); files are
    /// references to attachments.
    pub(crate) fn into_submit(self, idempotency_key: Option<String>) -> Result<Submit, ApiError> {
        if self.role != "user" {
            return Err(invalid(format!(
                "role: only user messages can be posted, not {:?}",
                self.role
            )));
        }
        let mut texts = Vec::new();
        let mut files = Vec::new();
        for (i, part) in self.parts.into_iter().enumerate() {
            let (kind, reference, mime_type) = match part {
                Part::Text { text } => {
                    texts.push(text);
                    continue;
                }
                Part::Image {
                    reference,
                    mime_type,
                } => ("image", reference, mime_type),
                Part::Audio {
                    reference,
                    mime_type,
                } => ("audio", reference, mime_type),
                Part::File {
                    reference,
                    mime_type,
                } => ("file", reference, mime_type),
            };
            // The engine checks the reference again, and that it names an
            // upload of the session; this says which part is wrong.
            BlobPath::parse(&reference).map_err(|e| invalid(format!("parts[{i}].ref: {e}")))?;
            check_mime_type(kind, &mime_type)
                .map_err(|why| invalid(format!("parts[{i}].mime_type: {why}")))?;
            files.push(FileRef {
                reference: reference.into(),
                mime_type: mime_type.into(),
            });
        }
        let text = texts.join("\n\n");
        if text.trim().is_empty() && files.is_empty() {
            return Err(invalid("parts: a message needs some text or a file".into()));
        }
        Ok(Submit {
            text,
            files,
            auto_run: self.auto_run,
            idempotency_key,
            ..Submit::default()
        })
    }
}

/// Checks an `Idempotency-Key`: 1 to 255 visible ASCII characters.
pub(crate) fn check_idempotency_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY_LEN
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"
            ),
        ));
    }
    Ok(())
}

/// A media type is `type/subtype`; image and audio parts must be of their
/// kind.
fn check_mime_type(kind: &str, mime_type: &str) -> Result<(), &'static str> {
    let valid = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    let Some((top, sub)) = mime_type.split_once('/') else {
        return Err("it is not a media type (type/subtype)");
    };
    if !valid(top) || !valid(sub) {
        return Err("it is not a media type (type/subtype)");
    }
    match kind {
        "image" if !top.eq_ignore_ascii_case("image") => Err("an image part needs an image/* type"),
        "audio" if !top.eq_ignore_ascii_case("audio") => Err("an audio part needs an audio/* type"),
        _ => Ok(()),
    }
}

fn invalid(message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidField, message)
}

/// `POST /v1/sessions/{id}/approve`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub(crate) struct ApproveBody {
    #[serde(default)]
    pub(crate) turn_id: Option<String>,
    pub(crate) tool_call_id: String,
    pub(crate) action: ApprovalAction,
    #[serde(default)]
    pub(crate) reason: Option<String>,
}

/// `POST /v1/sessions/{id}/cancel` (the body is optional).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub(crate) struct CancelBody {
    pub(crate) reason: Option<String>,
}

/// What `POST /v1/sessions/{id}/approve` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct Decided {
    pub(crate) tool_call_id: String,
    pub(crate) action: ApprovalAction,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn message(json: serde_json::Value) -> Result<Submit, ApiError> {
        serde_json::from_value::<MessageBody>(json)
            .unwrap()
            .into_submit(None)
    }

    #[test]
    fn parts_become_text_and_files() {
        let submit = message(serde_json::json!({
            "role": "user",
            "parts": [
                {"type": "text", "text": "Look"},
                {"type": "image", "ref": "attachments/a.png", "mime_type": "image/png"},
                {"type": "text", "text": "and this"},
                {"type": "file", "ref": "attachments/log.txt", "mime_type": "text/plain"},
            ],
            "auto_run": false,
        }))
        .unwrap();
        assert_eq!(submit.text, "Look\n\nand this");
        assert_eq!(submit.files.len(), 2);
        assert_eq!(&*submit.files[0].reference, "attachments/a.png");
        assert_eq!(submit.auto_run, Some(false));
        assert_eq!(submit.author, None);
    }

    #[test]
    fn bad_parts_are_invalid_fields() {
        for (parts, why) in [
            (serde_json::json!([]), "parts"),
            (serde_json::json!([{"type": "text", "text": "  "}]), "parts"),
            (
                serde_json::json!([{"type": "file", "ref": "../secret", "mime_type": "text/plain"}]),
                "parts[0].ref",
            ),
            (
                serde_json::json!([{"type": "file", "ref": "/etc/passwd", "mime_type": "text/plain"}]),
                "parts[0].ref",
            ),
            (
                serde_json::json!([{"type": "file", "ref": "attachments/./b", "mime_type": "text/plain"}]),
                "parts[0].ref",
            ),
            (
                serde_json::json!([{"type": "file", "ref": "session.json", "mime_type": "application/json"}]),
                "parts[0].ref",
            ),
            (
                serde_json::json!([{"type": "file", "ref": "a\\..\\b", "mime_type": "text/plain"}]),
                "parts[0].ref",
            ),
            (
                serde_json::json!([{"type": "image", "ref": "attachments/a.png", "mime_type": "text/plain"}]),
                "parts[0].mime_type",
            ),
            (
                serde_json::json!([{"type": "audio", "ref": "attachments/a.wav", "mime_type": "nonsense"}]),
                "parts[0].mime_type",
            ),
        ] {
            let err = message(serde_json::json!({"parts": parts})).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidField);
            assert!(err.message.starts_with(why), "{why}: {}", err.message);
        }
        let err = message(
            serde_json::json!({"role": "assistant", "parts": [{"type": "text", "text": "x"}]}),
        )
        .unwrap_err();
        assert!(err.message.starts_with("role"), "{}", err.message);
    }

    #[test]
    fn idempotency_keys_are_short_visible_ascii() {
        assert!(check_idempotency_key("retry-1").is_ok());
        for bad in ["", "with space", "é", &"k".repeat(256)] {
            assert!(check_idempotency_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_workspace_root_keeps_sessions_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("inside");
        std::fs::create_dir_all(&inside).unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("ws")).unwrap();
        let body = |path: &Path| CreateSessionBody {
            workspace_path: Some(path.to_path_buf()),
            ..CreateSessionBody::default()
        };
        assert!(body(&root.join("ws")).into_request(Some(&root)).is_ok());
        let err = body(&inside).into_request(Some(&root)).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidField);
        // A link inside the root that points out of it is outside.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&inside, root.join("link")).unwrap();
            assert!(body(&root.join("link")).into_request(Some(&root)).is_err());
        }
        let request = body(&root.join("ws")).into_request(None).unwrap();
        assert_eq!(request.owner, None);
    }
}

/// The query of `GET /v1/sessions`: `limit`, `cursor` and `status`, each
/// optional, read as text and checked here so that every bad value gets a
/// 400 saying which.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub(crate) struct ListQuery {
    /// How many sessions at most (1 to the server's maximum).
    pub(crate) limit: Option<String>,
    /// Where the page starts: a previous page's `next_cursor`.
    pub(crate) cursor: Option<String>,
    /// Only sessions in this state: `active`, `waiting_approval`, `failed`,
    /// `completed`, `canceled` or `unreadable`.
    pub(crate) status: Option<String>,
}

impl ListQuery {
    /// The page asked for.
    pub(crate) fn into_page(self) -> Result<ListSessions, ApiError> {
        let bad = |message: String| ApiError::new(ErrorCode::InvalidRequest, message);
        let limit = match self.limit.as_deref() {
            None => DEFAULT_PAGE_SIZE,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
                _ => {
                    return Err(bad(format!(
                        "limit must be a whole number from 1 to {MAX_PAGE_SIZE}"
                    )));
                }
            },
        };
        let cursor = match self.cursor.as_deref() {
            None => None,
            Some(token) => Some(SessionCursor::parse(token).map_err(|e| bad(e.to_string()))?),
        };
        let status = match self.status.as_deref() {
            None => None,
            Some(text) => Some(
                serde_json::from_value::<SessionStatus>(serde_json::Value::from(text)).map_err(
                    |_| {
                        bad("status must be one of active, waiting_approval, failed, completed, canceled, unreadable".into())
                    },
                )?,
            ),
        };
        Ok(ListSessions {
            limit,
            cursor,
            status,
        })
    }
}
