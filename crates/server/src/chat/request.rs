//! The body of `POST /api/chat` (the spec's `ChatRequest`) and what it
//! becomes for the engine. The caller's identity never comes from the
//! body: `userId` and `userEmail` are ignored, the token says who calls.

use roundtable_providers::Model;
use roundtable_sessions::{PlanAction, QueueMode, SessionMode, Submit, model_key};
use serde::{Deserialize, Serialize};

use crate::api_error::{ApiError, ErrorCode};

/// `POST /api/chat`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChatRequest {
    /// The user's prompt.
    pub(crate) message: String,
    /// The session to continue; none starts a new one.
    #[serde(default)]
    pub(crate) session_id: Option<String>,
    /// The session to continue, by the path of its thread file (see
    /// [`Named`](super::named::Named)).
    #[serde(default)]
    pub(crate) session_file: Option<String>,
    /// The model for the turn.
    #[serde(default)]
    pub(crate) model: Option<ModelSelection>,
    /// `agent` or `plan`: the mode the session switches to first;
    /// `harness`: the message is the input of the host's workflow.
    #[serde(default)]
    pub(crate) mode: Option<ChatMode>,
    /// Carry the plan out, or revise it with the message as feedback.
    #[serde(default)]
    pub(crate) plan_action: Option<PlanAction>,
    /// How the message waits when a turn is running.
    #[serde(default)]
    pub(crate) streaming_behavior: Option<StreamingBehavior>,
}

/// What a prompt asks for (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) enum ChatMode {
    /// A turn of the agent, which acts.
    Agent,
    /// A turn of the agent, which plans first.
    Plan,
    /// A run of the host's workflow, its phases one turn each.
    Harness,
}

impl ChatMode {
    /// The session mode the turn runs in; none for a workflow run.
    pub(crate) fn session_mode(self) -> Option<SessionMode> {
        match self {
            Self::Agent => Some(SessionMode::Agent),
            Self::Plan => Some(SessionMode::Plan),
            Self::Harness => None,
        }
    }
}

/// How a message sent while a turn runs waits (`streamingBehavior`:
/// `steer` or `followUp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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

impl ChatRequest {
    /// Checks what the engine cannot: a prompt is there (a plan execution
    /// may go without one), and a model, if named, is one of `models` (the
    /// engine's) and only one. Returns the chosen model's key.
    pub(crate) fn check(&self, models: &[Model]) -> Result<Option<String>, ApiError> {
        if self.message.trim().is_empty() && self.plan_action != Some(PlanAction::Execute) {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "message: a prompt is required",
            ));
        }
        let Some(selection) = &self.model else {
            return Ok(None);
        };
        let mut named = models.iter().filter(|m| selection.names(m));
        match (named.next(), named.next()) {
            (Some(model), None) => Ok(Some(model_key(model))),
            (found, _) => {
                let offered: Vec<String> = models.iter().map(model_key).collect();
                let why = if found.is_some() {
                    "names more than one model: say `provider/id`"
                } else {
                    "is not a model of this server"
                };
                Err(ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "model: {} {why} (it offers {}; see /api/chat/models)",
                        selection.shown(),
                        offered.join(", ")
                    ),
                ))
            }
        }
    }

    /// The session mode the request asks for (`agent` or `plan`).
    pub(crate) fn session_mode(&self) -> Option<SessionMode> {
        self.mode.and_then(ChatMode::session_mode)
    }

    /// True when the request asks for a run of the host's workflow.
    pub(crate) fn is_harness(&self) -> bool {
        self.mode == Some(ChatMode::Harness)
    }

    /// The engine's message: it always runs a turn (or waits in `queue`,
    /// when a turn is running), on `model` when the request chose one (its
    /// key, from [`check`](Self::check)).
    pub(crate) fn submit(&self, queue: Option<QueueMode>, model: Option<String>) -> Submit {
        Submit {
            model,
            text: self.message.clone(),
            auto_run: Some(true),
            queue,
            mode: self.session_mode(),
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
            "message": "hi", "sessionId": "sess_1", "sessionFile": "/data/sess_1.jsonl",
            "mode": "plan", "planAction": "refine",
            "streamingBehavior": "followUp", "userId": "mallory", "userEmail": "m@example.com",
            "model": {"provider": "openai", "id": "gpt"}
        }));
        assert_eq!(r.session_id.as_deref(), Some("sess_1"));
        assert_eq!(r.session_file.as_deref(), Some("/data/sess_1.jsonl"));
        assert_eq!(r.session_mode(), Some(SessionMode::Plan));
        assert_eq!(r.plan_action, Some(PlanAction::Refine));
        assert_eq!(r.streaming_behavior, Some(StreamingBehavior::FollowUp));
        let submit = r.submit(Some(QueueMode::FollowUp), None);
        assert_eq!(submit.author, None);
        assert_eq!(submit.auto_run, Some(true));
        let harness = request(json!({"message": "x", "mode": "harness"}));
        assert!(harness.is_harness());
        assert_eq!(harness.session_mode(), None);
        assert!(
            serde_json::from_value::<ChatRequest>(json!({"message": "x", "mode": "chaos"}))
                .is_err()
        );
        assert!(serde_json::from_value::<ChatRequest>(json!({"sessionId": "s"})).is_err());
    }

    #[test]
    fn only_a_model_of_the_engine_is_selected() {
        let model = Model::new(OPENAI_COMPLETIONS, "openai", "org/gpt", "");
        for named in [
            json!("openai/org/gpt"),
            json!("org/gpt"),
            json!({"id": "org/gpt"}),
            json!({"provider": "openai", "id": "org/gpt"}),
        ] {
            let r = request(json!({"message": "hi", "model": named}));
            assert_eq!(
                r.check(std::slice::from_ref(&model)).unwrap().as_deref(),
                Some("openai/org/gpt"),
                "{named}"
            );
        }
        for other in [
            json!("openai/other"),
            json!({"provider": "anthropic", "id": "org/gpt"}),
            json!("gpt"),
        ] {
            let r = request(json!({"message": "hi", "model": other}));
            assert_eq!(
                r.check(std::slice::from_ref(&model)).unwrap_err().code,
                ErrorCode::InvalidRequest,
                "{other}"
            );
        }
        let r = request(json!({"message": "hi", "model": "org/gpt"}));
        assert_eq!(r.check(&[]).unwrap_err().code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn a_model_named_by_an_id_two_providers_serve_is_ambiguous() {
        let models = [
            Model::new(OPENAI_COMPLETIONS, "openai", "gpt", ""),
            Model::new(OPENAI_COMPLETIONS, "router", "gpt", ""),
        ];
        let r = request(json!({"message": "hi", "model": "gpt"}));
        let error = r.check(&models).unwrap_err();
        assert!(error.message.contains("more than one"), "{}", error.message);
        let r = request(json!({"message": "hi", "model": "router/gpt"}));
        assert_eq!(r.check(&models).unwrap().as_deref(), Some("router/gpt"));
    }

    #[test]
    fn a_prompt_is_required_but_to_execute_a_plan() {
        assert!(request(json!({"message": "  "})).check(&[]).is_err());
        assert!(
            request(json!({"message": "", "planAction": "execute"}))
                .check(&[])
                .is_ok()
        );
        assert!(
            request(json!({"message": "", "planAction": "refine"}))
                .check(&[])
                .is_err()
        );
    }
}
