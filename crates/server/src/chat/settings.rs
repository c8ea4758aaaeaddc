//! Chat settings: what `/api/chat` does when a request leaves something
//! out. The host sets the defaults; each caller may override them
//! (`PUT /api/chat/settings`, a partial update where `null` removes an
//! override), and their overrides are kept in a JSON file the host names
//! (or in memory). A caller's overrides are theirs alone.
//!
//! These are preferences, not session state: a session's own settings are
//! fixed when it is created and live in its thread.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use roundtable_sessions::{Caller, CreateSession, SessionLimits, SessionMode};
use roundtable_tools::VerifyPolicy;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

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

/// The host's defaults and every caller's overrides.
#[derive(Debug)]
pub(crate) struct SettingsStore {
    defaults: ChatSettings,
    file: Option<PathBuf>,
    /// Overrides by caller key; loaded from the file at first use.
    overrides: Mutex<Option<BTreeMap<String, ChatSettings>>>,
}

impl SettingsStore {
    pub(crate) fn new(defaults: ChatSettings, file: Option<PathBuf>) -> Self {
        Self {
            defaults,
            file,
            overrides: Mutex::new(None),
        }
    }

    /// The settings that apply to `caller`.
    pub(crate) async fn effective(&self, caller: &Caller) -> Result<ChatSettings, ApiError> {
        Ok(self.view(caller).await?.settings)
    }

    /// The caller's settings, defaults and overrides.
    pub(crate) async fn view(&self, caller: &Caller) -> Result<SettingsView, ApiError> {
        let mut all = self.overrides.lock().await;
        let overrides = self
            .loaded(&mut all)
            .await?
            .get(&caller_key(caller))
            .cloned()
            .unwrap_or_default();
        Ok(SettingsView {
            settings: overrides.or(&self.defaults),
            defaults: self.defaults.clone(),
            overrides,
        })
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
        let mut all = self.overrides.lock().await;
        let loaded = self.loaded(&mut all).await?;
        let current = loaded.get(&key).cloned().unwrap_or_default();
        let mut merged = match serde_json::to_value(&current) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        for (name, value) in patch {
            if value.is_null() {
                merged.remove(&name);
            } else {
                merged.insert(name, value);
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
        let mut next = loaded.clone();
        if updated == ChatSettings::default() {
            next.remove(&key);
        } else {
            next.insert(key, updated.clone());
        }
        if let Some(file) = &self.file {
            write_file(file, &next).await?;
        }
        *loaded = next;
        Ok(SettingsView {
            settings: updated.or(&self.defaults),
            defaults: self.defaults.clone(),
            overrides: updated,
        })
    }

    /// The overrides, read from the file the first time.
    async fn loaded<'a>(
        &self,
        all: &'a mut Option<BTreeMap<String, ChatSettings>>,
    ) -> Result<&'a mut BTreeMap<String, ChatSettings>, ApiError> {
        if all.is_none() {
            *all = Some(match &self.file {
                Some(file) => read_file(file).await?,
                None => BTreeMap::new(),
            });
        }
        Ok(all.get_or_insert_with(BTreeMap::new))
    }
}

/// The key a caller's overrides are stored under.
fn caller_key(caller: &Caller) -> String {
    match caller {
        Caller::Host => "host".to_string(),
        Caller::User(id) => format!("user:{id}"),
        Caller::Anonymous => "anonymous".to_string(),
    }
}

async fn read_file(file: &Path) -> Result<BTreeMap<String, ChatSettings>, ApiError> {
    match tokio::fs::read(file).await {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            internal(format!(
                "the chat settings file {} cannot be read: {e}",
                file.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(internal(format!(
            "the chat settings file {} cannot be read: {e}",
            file.display()
        ))),
    }
}

/// Writes the overrides beside the file and renames them over it, so the
/// file is always whole.
async fn write_file(file: &Path, all: &BTreeMap<String, ChatSettings>) -> Result<(), ApiError> {
    let failed = |e: &dyn std::fmt::Display| {
        internal(format!(
            "the chat settings file {} cannot be written: {e}",
            file.display()
        ))
    };
    let bytes = serde_json::to_vec_pretty(all).map_err(|e| failed(&e))?;
    let mut temp = file.as_os_str().to_owned();
    temp.push(format!(".{}.tmp", std::process::id()));
    let temp = PathBuf::from(temp);
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| failed(&e))?;
    }
    tokio::fs::write(&temp, bytes)
        .await
        .map_err(|e| failed(&e))?;
    if let Err(e) = tokio::fs::rename(&temp, file).await {
        let _ = tokio::fs::remove_file(&temp).await;
        return Err(failed(&e));
    }
    Ok(())
}

fn internal(message: String) -> ApiError {
    ApiError::internal(format_args!("chat settings: {message}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn overrides_are_per_caller_partial_and_kept_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("chat-settings.json");
        let defaults = ChatSettings {
            auto_verify: Some(false),
            ..ChatSettings::default()
        };
        let store = SettingsStore::new(defaults.clone(), Some(file.clone()));
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
        let again = SettingsStore::new(defaults, Some(file));
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
        let store = SettingsStore::new(ChatSettings::default(), None);
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
