//! Chat settings: what `/api/chat` does when a request leaves something
//! out. The host sets the defaults; each caller may override them
//! (`PUT /api/chat/settings`, a partial update where `null` removes an
//! override), and their overrides are kept in a [`RecordTable`] the host
//! names (a file, or the shared store of several servers; by default in
//! memory). A caller's overrides are theirs alone.
//!
//! Every request reads the caller's record from the table, so a change
//! made through one server applies on every server sharing the table at
//! the next request. A change is a compare-and-set of the record it read,
//! tried again on a lost race, so two servers changing one caller's
//! settings at once end with one of the two, never a mix.
//!
//! These are preferences, not session state: a session's own settings are
//! fixed when it is created and live in its thread.

use std::path::Path;
use std::sync::Arc;

use roundtable_sessions::table::{RecordTable, Versioned};
use roundtable_sessions::{Caller, CreateSession, SessionLimits, SessionMode};
use roundtable_tools::VerifyPolicy;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::request::StreamingBehavior;
use crate::api_error::{ApiError, ErrorCode};

/// What `/api/chat` does when a request leaves something out. Every field
/// is optional: an unset one leaves the choice to the next layer (the
/// caller's overrides over the host's defaults, the defaults over the
/// engine's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatSettings {
    /// The mode new sessions start in (`agent` or `plan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SessionMode>,
    /// How a message waits when it reaches a session whose turn runs and
    /// the request names no `streamingBehavior`; unset, such a request is
    /// refused (409).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming_behavior: Option<StreamingBehavior>,
    /// The instructions new sessions start with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Whether new sessions run their verification commands after the
    /// workspace changed (unset: the engine's default, which does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_verify: Option<bool>,
    /// The round cap of new sessions' turns (unset: the engine's, 200 by
    /// default): at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
}

impl ChatSettings {
    /// These settings, with `fallback`'s where these have none.
    fn or(&self, fallback: &Self) -> Self {
        Self {
            mode: self.mode.or(fallback.mode),
            streaming_behavior: self.streaming_behavior.or(fallback.streaming_behavior),
            system_prompt: self
                .system_prompt
                .clone()
                .or_else(|| fallback.system_prompt.clone()),
            auto_verify: self.auto_verify.or(fallback.auto_verify),
            max_rounds: self.max_rounds.or(fallback.max_rounds),
        }
    }

    /// A request for a new session over `workspace` with these settings
    /// (`mode` wins over the settings' mode).
    pub(crate) fn new_session(&self, workspace: &Path, mode: Option<SessionMode>) -> CreateSession {
        CreateSession {
            workspace_path: workspace.to_path_buf(),
            system_prompt: self.system_prompt.clone(),
            mode: mode.or(self.mode),
            verify_policy: (self.auto_verify == Some(false)).then(|| VerifyPolicy {
                auto_verify: false,
                ..VerifyPolicy::default()
            }),
            limits: self.max_rounds.map(|max| SessionLimits {
                max_rounds: Some(max),
                ..SessionLimits::default()
            }),
            ..CreateSession::default()
        }
    }
}

/// What `GET /api/chat/settings` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct SettingsView {
    /// What applies to the caller.
    settings: ChatSettings,
    /// The host's defaults.
    defaults: ChatSettings,
    /// The caller's own overrides.
    overrides: ChatSettings,
}

/// A change lost this many races in a row: the record is too busy.
const MAX_ATTEMPTS: usize = 32;

/// The host's defaults and every caller's overrides.
#[derive(Debug)]
pub(crate) struct SettingsStore {
    defaults: ChatSettings,
    /// Overrides by caller key, one JSON object a record.
    table: Arc<dyn RecordTable>,
}

impl SettingsStore {
    pub(crate) fn new(defaults: ChatSettings, table: Arc<dyn RecordTable>) -> Self {
        Self { defaults, table }
    }

    /// The settings that apply to `caller`.
    pub(crate) async fn effective(&self, caller: &Caller) -> Result<ChatSettings, ApiError> {
        Ok(self.view(caller).await?.settings)
    }

    /// The caller's settings, defaults and overrides.
    pub(crate) async fn view(&self, caller: &Caller) -> Result<SettingsView, ApiError> {
        let (overrides, _) = self.read(&caller_key(caller)).await?;
        Ok(self.view_of(overrides))
    }

    fn view_of(&self, overrides: ChatSettings) -> SettingsView {
        SettingsView {
            settings: overrides.or(&self.defaults),
            defaults: self.defaults.clone(),
            overrides,
        }
    }

    /// Applies `patch` (an object of settings; `null` removes one) to the
    /// caller's overrides and stores them.
    pub(crate) async fn update(
        &self,
        caller: &Caller,
        patch: Value,
    ) -> Result<SettingsView, ApiError> {
        let Value::Object(patch) = patch else {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                "the settings must be a JSON object",
            ));
        };
        let key = caller_key(caller);
        for _ in 0..MAX_ATTEMPTS {
            let (current, revision) = self.read(&key).await?;
            let updated = patched(&current, &patch)?;
            let value = serde_json::to_string(&updated)
                .map_err(|e| internal(format!("cannot be written: {e}")))?;
            let written = self
                .table
                .put_if(&key, value, revision)
                .await
                .map_err(|e| internal(format!("cannot be written: {e}")))?;
            if written.is_some() {
                return Ok(self.view_of(updated));
            }
        }
        Err(internal(format!(
            "the settings of {key} changed {MAX_ATTEMPTS} times while being written"
        )))
    }

    /// The overrides stored under `key` and the revision read (`None`:
    /// none stored).
    async fn read(&self, key: &str) -> Result<(ChatSettings, Option<u64>), ApiError> {
        let stored = self
            .table
            .get(key)
            .await
            .map_err(|e| internal(format!("cannot be read: {e}")))?;
        let Some(Versioned { value, revision }) = stored else {
            return Ok((ChatSettings::default(), None));
        };
        let settings = serde_json::from_str(&value)
            .map_err(|e| internal(format!("the record of {key} cannot be read: {e}")))?;
        Ok((settings, Some(revision)))
    }
}

/// `current` with `patch` applied (`null` removes a setting), checked.
fn patched(current: &ChatSettings, patch: &Map<String, Value>) -> Result<ChatSettings, ApiError> {
    let mut merged = match serde_json::to_value(current) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for (name, value) in patch {
        if value.is_null() {
            merged.remove(name);
        } else {
            merged.insert(name.clone(), value.clone());
        }
    }
    let updated: ChatSettings = serde_json::from_value(Value::Object(merged))
        .map_err(|e| ApiError::new(ErrorCode::InvalidField, e.to_string()))?;
    if updated.max_rounds == Some(0) {
        return Err(ApiError::new(
            ErrorCode::InvalidField,
            "maxRounds: it must be at least 1",
        ));
    }
    Ok(updated)
}

/// The key a caller's overrides are stored under.
fn caller_key(caller: &Caller) -> String {
    match caller {
        Caller::Host => "host".to_string(),
        Caller::User(id) => format!("user:{id}"),
        Caller::Anonymous => "anonymous".to_string(),
    }
}

fn internal(message: String) -> ApiError {
    ApiError::internal(format_args!("chat settings: {message}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use roundtable_sessions::table::{FileTable, MemoryTable};
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn overrides_are_per_caller_partial_and_kept_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("chat-settings");
        let defaults = ChatSettings {
            auto_verify: Some(false),
            ..ChatSettings::default()
        };
        let store = SettingsStore::new(defaults.clone(), Arc::new(FileTable::new(&file)));
        let alice = Caller::user("alice");
        let view = store
            .update(
                &alice,
                json!({"mode": "plan", "streamingBehavior": "followUp"}),
            )
            .await
            .unwrap();
        assert_eq!(view.settings.mode, Some(SessionMode::Plan));
        assert_eq!(view.settings.auto_verify, Some(false));
        let view = store.update(&alice, json!({"mode": null})).await.unwrap();
        assert_eq!(view.overrides.mode, None);
        assert_eq!(
            view.overrides.streaming_behavior,
            Some(StreamingBehavior::FollowUp)
        );
        // Bob sees the defaults only.
        let bob = store.effective(&Caller::user("bob")).await.unwrap();
        assert_eq!(bob, defaults);
        // Unknown or mistyped settings are refused and change nothing.
        for bad in [
            json!({"colour": "red"}),
            json!({"mode": "harness"}),
            json!([1]),
        ] {
            let err = store.update(&alice, bad).await.unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidField);
        }
        // Another store over the same file reads them back.
        let again = SettingsStore::new(defaults, Arc::new(FileTable::new(&file)));
        let view = again.view(&alice).await.unwrap();
        assert_eq!(
            view.overrides.streaming_behavior,
            Some(StreamingBehavior::FollowUp)
        );
    }

    #[test]
    fn a_new_session_takes_the_settings() {
        let settings = ChatSettings {
            mode: Some(SessionMode::Plan),
            system_prompt: Some("Be brief.".into()),
            auto_verify: Some(false),
            ..ChatSettings::default()
        };
        let request = settings.new_session(Path::new("/w"), None);
        assert_eq!(request.mode, Some(SessionMode::Plan));
        assert_eq!(request.system_prompt.as_deref(), Some("Be brief."));
        assert!(!request.verify_policy.unwrap().auto_verify);
        let request = settings.new_session(Path::new("/w"), Some(SessionMode::Agent));
        assert_eq!(request.mode, Some(SessionMode::Agent));
        let request = ChatSettings::default().new_session(Path::new("/w"), None);
        assert_eq!(request.verify_policy, None);
    }

    #[tokio::test]
    async fn a_round_cap_reaches_new_sessions_and_must_be_at_least_one() {
        let store = SettingsStore::new(ChatSettings::default(), Arc::new(MemoryTable::new()));
        let alice = Caller::user("alice");
        let view = store
            .update(&alice, json!({"maxRounds": 50}))
            .await
            .unwrap();
        let request = view.settings.new_session(Path::new("/w"), None);
        assert_eq!(request.limits.and_then(|l| l.max_rounds), Some(50));
        let err = store
            .update(&alice, json!({"maxRounds": 0}))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidField);
        let kept = store.effective(&alice).await.unwrap();
        assert_eq!(kept.max_rounds, Some(50));
        let request = ChatSettings::default().new_session(Path::new("/w"), None);
        assert_eq!(request.limits, None);
    }
}
