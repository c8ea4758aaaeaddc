//! The body of `POST /api/chat` (the spec's `ChatRequest`) and what it
//! becomes for the engine. The caller's identity never comes from the
//! body: `userId` and `userEmail` are ignored, the token says who calls.

use roundtable_providers::Model;
use roundtable_sessions::{PlanAction, QueueMode, SessionMode, Submit};
use serde::{Deserialize, Serialize};

use crate::api_error::{ApiError, ErrorCode};

/// `POST /api/chat`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatRequest {
    /// The user's prompt.
    pub(crate) message: String,
    /// The session to continue; none starts a new one.
    #[serde(default)]
    pub(crate) session_id: Option<String>,
    /// The model for the turn.
    #[serde(default)]
    pub(crate) model: Option<ModelSelection>,
    /// `agent` or `plan`: the mode the session switches to first.
    #[serde(default)]
    pub(crate) mode: Option<SessionMode>,
    /// Carry the plan out, or revise it with the message as feedback.
    #[serde(default)]
    pub(crate) plan_action: Option<PlanAction>,
    /// How the message waits when a turn is running.
    #[serde(default)]
    pub(crate) streaming_behavior: Option<StreamingBehavior>,
}

/// How a message sent while a turn runs waits (`streamingBehavior`:
/// `steer` or `followUp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamingBehavior {
    /// Into the running turn, at its next round boundary.
    Steer,
    /// As the next turn, once the running one ends.
    #[serde(alias = "follow_up")]
    FollowUp,
}

impl StreamingBehavior {
    /// The engine's queue of this behaviour.
    pub fn queue(self) -> QueueMode {
        match self {
            Self::Steer => QueueMode::Steer,
            Self::FollowUp => QueueMode::FollowUp,
        }
    }
}

/// A model, as `provider/id` or `{provider, id}` (the provider may be left
/// out: `id` alone).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub(crate) enum ModelSelection {
    /// `provider/id`, or `id`.
    Key(String),
    /// `{provider, id}`.
    Parts {
        /// The provider.
        #[serde(default)]
        provider: Option<String>,
        /// The model's id.
        id: String,
    },
}

impl ModelSelection {
    /// True when this names `model`.
    pub(crate) fn names(&self, model: &Model) -> bool {
        let (provider, id) = match self {
            Self::Key(key) => match key.split_once('/') {
                Some((provider, id)) if provider == model.provider => (Some(provider), id),
                // Model ids may hold slashes themselves (`org/model`).
                _ => (None, key.as_str()),
            },
            Self::Parts { provider, id } => (provider.as_deref(), id.as_str()),
        };
        id == model.id && provider.is_none_or(|p| p == model.provider)
    }

    fn shown(&self) -> String {
        let text = match self {
            Self::Key(key) => key.clone(),
            Self::Parts {
                provider: Some(provider),
                id,
            } => format!("{provider}/{id}"),
            Self::Parts { provider: None, id } => id.clone(),
        };
        text.chars().take(120).collect()
    }
}

/// The key a model is listed and selected by: `provider/id`.
pub(crate) fn model_key(model: &Model) -> String {
    format!("{}/{}", model.provider, model.id)
}

impl ChatRequest {
    /// Checks what the engine cannot: a prompt is there (a plan execution
    /// may go without one), and a model, if named, is the engine's
    /// (`model`; none when the host did not name it). The engine runs
    /// every turn on one model, so no other can be selected.
    pub(crate) fn check(&self, model: Option<&Model>) -> Result<(), ApiError> {
        if self.message.trim().is_empty() && self.plan_action != Some(PlanAction::Execute) {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "message: a prompt is required",
            ));
        }
        if let Some(selection) = &self.model
            && !model.is_some_and(|m| selection.names(m))
        {
            let offered = model.map_or_else(
                || "this server names no model".to_string(),
                |m| format!("this server runs {}", model_key(m)),
            );
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "model: {} is not a model of this server ({offered}; see /api/chat/models)",
                    selection.shown()
                ),
            ));
        }
        Ok(())
    }

    /// The engine's message: it always runs a turn (or waits in `queue`,
    /// when a turn is running).
    pub(crate) fn submit(&self, queue: Option<QueueMode>) -> Submit {
        Submit {
            text: self.message.clone(),
            auto_run: Some(true),
            queue,
            mode: self.mode,
            plan_action: self.plan_action,
            ..Submit::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roundtable_providers::OPENAI_COMPLETIONS;
    use serde_json::json;

    use super::*;

    fn request(body: serde_json::Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn the_spec_s_fields_read_and_the_identity_fields_are_ignored() {
        let r = request(json!({
            "message": "hi", "sessionId": "sess_1", "mode": "plan", "planAction": "refine",
            "streamingBehavior": "followUp", "userId": "mallory", "userEmail": "m@example.com",
            "model": {"provider": "openai", "id": "gpt"}
        }));
        assert_eq!(r.session_id.as_deref(), Some("sess_1"));
        assert_eq!(r.mode, Some(SessionMode::Plan));
        assert_eq!(r.plan_action, Some(PlanAction::Refine));
        assert_eq!(r.streaming_behavior, Some(StreamingBehavior::FollowUp));
        let submit = r.submit(Some(QueueMode::FollowUp));
        assert_eq!(submit.author, None);
        assert_eq!(submit.auto_run, Some(true));
        assert!(
            serde_json::from_value::<ChatRequest>(json!({"message": "x", "mode": "harness"}))
                .is_err()
        );
        assert!(serde_json::from_value::<ChatRequest>(json!({"sessionId": "s"})).is_err());
    }

    #[test]
    fn only_the_engine_s_model_is_selected() {
        let model = Model::new(OPENAI_COMPLETIONS, "openai", "org/gpt", "");
        for named in [
            json!("openai/org/gpt"),
            json!("org/gpt"),
            json!({"id": "org/gpt"}),
            json!({"provider": "openai", "id": "org/gpt"}),
        ] {
            let r = request(json!({"message": "hi", "model": named}));
            assert!(r.check(Some(&model)).is_ok(), "{named}");
        }
        for other in [
            json!("openai/other"),
            json!({"provider": "anthropic", "id": "org/gpt"}),
            json!("gpt"),
        ] {
            let r = request(json!({"message": "hi", "model": other}));
            assert_eq!(
                r.check(Some(&model)).unwrap_err().code,
                ErrorCode::InvalidRequest,
                "{other}"
            );
        }
        let r = request(json!({"message": "hi", "model": "org/gpt"}));
        assert_eq!(r.check(None).unwrap_err().code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn a_prompt_is_required_but_to_execute_a_plan() {
        assert!(request(json!({"message": "  "})).check(None).is_err());
        assert!(
            request(json!({"message": "", "planAction": "execute"}))
                .check(None)
                .is_ok()
        );
        assert!(
            request(json!({"message": "", "planAction": "refine"}))
                .check(None)
                .is_err()
        );
    }
}
