//! The daemon's configuration: one [`Config`] read from a TOML file, then
//! overridden by flags and their environment variables.
//!
//! Precedence, highest first: a flag, its `ROUNDTABLE_*` environment
//! variable, the config file (`--config`, or `roundtable.toml` in the data
//! folder when present), the defaults below. Unknown keys are errors, so a
//! misspelt limit is never silently ignored.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use roundtable_providers::{
    ANTHROPIC_MESSAGES, GOOGLE_GENERATIVE_AI, OPENAI_COMPLETIONS, OPENAI_RESPONSES, WireApi,
};
use serde::{Deserialize, Serialize};

/// The name of the config file looked for in the data folder.
pub(crate) const CONFIG_FILE: &str = "roundtable.toml";

/// Everything `roundtable serve` can be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Config {
    /// Where to listen.
    pub(crate) addr: SocketAddr,
    /// The data folder: sessions (on the JSONL store), tokens, chat settings.
    pub(crate) data: PathBuf,
    /// A NATS server whose JetStream holds the sessions instead of `data`.
    pub(crate) nats: Option<String>,
    /// A PostgreSQL database (`postgres://user:password@host/db`) that holds
    /// the sessions instead of `data`; not together with `nats`.
    pub(crate) postgres: Option<String>,
    /// Where `/metrics` is served without a token; on `addr` behind the
    /// admin token when unset.
    pub(crate) metrics_addr: Option<SocketAddr>,
    /// The folder every session's workspace must be inside, if any.
    pub(crate) workspace_root: Option<PathBuf>,
    /// The workspace of chats started from `/api/chat` and the chat page
    /// (the current folder when unset).
    pub(crate) chat_workspace: Option<PathBuf>,
    /// An `{"mcpServers": {...}}` file whose tools every session gets.
    pub(crate) mcp: Option<PathBuf>,
    /// A workflow YAML that chat prompts with `mode: "harness"` run.
    pub(crate) workflow: Option<PathBuf>,
    /// Origins (scheme://host:port) allowed to call from a browser.
    pub(crate) allowed_origins: Vec<String>,
    /// Host names besides the bound address that requests may name.
    pub(crate) allowed_hosts: Vec<String>,
    /// Logging.
    pub(crate) log: LogConfig,
    /// The models sessions use; the first is the default. None: offline.
    pub(crate) models: Vec<ModelConfig>,
    /// The bots rooms may hold (`[[bots]]`).
    pub(crate) bots: Vec<BotConfig>,
    /// Turn, body and connection limits.
    pub(crate) limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8787)),
            data: PathBuf::from("data"),
            nats: None,
            postgres: None,
            metrics_addr: None,
            workspace_root: None,
            chat_workspace: None,
            mcp: None,
            workflow: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            log: LogConfig::default(),
            models: Vec::new(),
            bots: Vec::new(),
            limits: Limits::default(),
        }
    }
}

/// How the daemon logs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LogConfig {
    /// A `RUST_LOG`-style filter (`RUST_LOG` itself wins when set).
    pub(crate) filter: String,
    /// Text for a terminal, JSON for a log collector.
    pub(crate) format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            filter: "info".into(),
            format: LogFormat::Text,
        }
    }
}

/// The shape of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    /// One human-readable line an event.
    Text,
    /// One JSON object a line.
    Json,
}

/// One model sessions may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelConfig {
    /// The wire API: `openai-completions`, `anthropic-messages`,
    /// `openai-responses` or `google-generative-ai`.
    pub(crate) api: String,
    /// The provider's name (`openai`, `anthropic`, `ollama`...).
    pub(crate) provider: String,
    /// The model's id at the provider.
    pub(crate) id: String,
    /// The API's base URL (the provider's public one when unset).
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// The API key. Prefer `api_key_env`: a key in a file is a key on disk.
    #[serde(default)]
    pub(crate) api_key: Option<String>,
    /// The environment variable holding the API key (the provider's usual
    /// one, such as `OPENAI_API_KEY`, when neither is set).
    #[serde(default)]
    pub(crate) api_key_env: Option<String>,
}

/// One bot of the rooms' catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BotConfig {
    /// The id rooms name it by (and the author of what it writes).
    pub(crate) id: String,
    /// Its display name; its `@handle` is made from it.
    pub(crate) name: String,
    /// The first part of its system prompt.
    pub(crate) persona: String,
    /// What it does, in a line (shown to the other bots and to clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) about: Option<String>,
    /// When it wakes.
    pub(crate) trigger: BotTrigger,
    /// The keywords an ambient bot joins a conversation on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) topics: Vec<String>,
    /// Its model as `provider/id`, one the daemon offers (the first
    /// offered when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    /// How much it reasons: off, minimal, low, medium, high or xhigh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) thinking: Option<String>,
    /// Its tools.
    #[serde(default)]
    pub(crate) tools: BotTools,
    /// The folder of the `workspace-read` tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) workspace: Option<PathBuf>,
    /// What happens to a call its tools' policy gates.
    #[serde(default)]
    pub(crate) approval: BotApproval,
}

/// When a bot wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum BotTrigger {
    /// When named (`@handle`).
    Mention,
    /// On every message.
    Always,
    /// On messages about its topics.
    Ambient,
}

/// The tools of a bot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum BotTools {
    /// No tools.
    #[default]
    None,
    /// The read-only workspace tools (`repo_tree`, `repo_map`, `read_file`,
    /// `search`, `git_status`) over `workspace`.
    WorkspaceRead,
}

/// What happens to a bot's gated tool calls (none of the read-only tools
/// is gated): no member decides them yet, so they are denied, or approved
/// without asking.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum BotApproval {
    /// Gated calls are denied (the model reads why).
    #[default]
    Deny,
    /// Gated calls run without asking.
    Approve,
    /// The room's members decide each gated call (`POST
    /// /v1/rooms/{id}/approvals`); the call waits until one does.
    Members,
}

/// The limits an operator tunes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Limits {
    /// Model rounds of one turn at most (a guard against loops).
    pub(crate) max_rounds: u32,
    /// A model stream silent this long is sent again (twice), then failed.
    #[serde(with = "humantime_serde")]
    pub(crate) stall_timeout: Duration,
    /// A command's time limit when the model names none.
    #[serde(with = "humantime_serde")]
    pub(crate) command_timeout: Duration,
    /// The longest time limit a model may ask for a command.
    #[serde(with = "humantime_serde")]
    pub(crate) command_timeout_max: Duration,
    /// Times auto-verify sends failures back to the model in one turn.
    pub(crate) verify_attempts: u32,
    /// An unused session leaves memory after this long.
    #[serde(with = "humantime_serde")]
    pub(crate) runtime_ttl: Duration,
    /// The largest JSON body of a message (bytes).
    pub(crate) message_body_bytes: usize,
    /// The largest upload (bytes).
    pub(crate) upload_bytes: usize,
    /// Connections served at once (more get a 503).
    pub(crate) max_connections: usize,
    /// A request head must arrive within this; also the keep-alive idle
    /// timeout.
    #[serde(with = "humantime_serde")]
    pub(crate) header_read_timeout: Duration,
    /// A client that reads nothing this long while its buffers are full
    /// is closed.
    #[serde(with = "humantime_serde")]
    pub(crate) write_stall_timeout: Duration,
    /// How long running turns may go on after SIGTERM before they are
    /// handed over (carried on by another daemon, or by this one's next
    /// start).
    #[serde(with = "humantime_serde")]
    pub(crate) shutdown_grace: Duration,
    /// Sessions idle (nothing written) longer than this are deleted, with
    /// their files; none when unset.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub(crate) retention: Option<Duration>,
    /// How long a running turn's lease lasts unless renewed: a turn whose
    /// daemon died is carried on by another about this long later.
    #[serde(with = "humantime_serde")]
    pub(crate) turn_lease: Duration,
    /// How often a running turn's lease is renewed (at most a third of
    /// `turn_lease`, so two renewals may fail before it lapses).
    #[serde(with = "humantime_serde")]
    pub(crate) turn_lease_renew: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        let turn = roundtable_sessions::default_turn_limits();
        let commands = roundtable_sessions::default_command_limits();
        let serve = roundtable_server::ServeLimits::default();
        Self {
            max_rounds: turn.max_rounds,
            stall_timeout: roundtable_sessions::limits::DEFAULT_STALL_TIMEOUT,
            command_timeout: commands.default_timeout,
            command_timeout_max: commands.max_timeout,
            verify_attempts: 2,
            runtime_ttl: roundtable_sessions::cache::DEFAULT_RUNTIME_TTL,
            message_body_bytes: roundtable_server::sessions::DEFAULT_MESSAGE_BODY_LIMIT,
            upload_bytes: roundtable_sessions::AttachmentLimits::default().max_upload_bytes,
            max_connections: serve.max_connections,
            header_read_timeout: serve.header_read_timeout,
            write_stall_timeout: serve.write_stall_timeout,
            shutdown_grace: Duration::from_secs(30),
            retention: None,
            turn_lease: roundtable_thread_stream::lease::DEFAULT_LEASE_TTL,
            turn_lease_renew: roundtable_thread_stream::lease::DEFAULT_RENEW_EVERY,
        }
    }
}

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or names an unknown key or a bad value;
    /// the message carries the line and column.
    #[error("config file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parser's words, with the line.
        message: String,
    },
    /// A setting that parses but cannot work.
    #[error("{0}")]
    Setting(String),
}

impl Config {
    /// The config of `file` when given, else of `roundtable.toml` in
    /// `data_dir` when that exists, else the defaults.
    pub(crate) fn load(file: Option<&Path>, data_dir: &Path) -> Result<Self, ConfigError> {
        let path = match file {
            Some(path) => path.to_path_buf(),
            None => {
                let found = data_dir.join(CONFIG_FILE);
                if !found.is_file() {
                    return Ok(Self::default());
                }
                found
            }
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Invalid {
            path,
            message: e.to_string(),
        })
    }

    /// Checks what parsing cannot: settings that contradict each other.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let limits = &self.limits;
        if limits.max_rounds == 0 {
            return Err(ConfigError::Setting(
                "limits.max_rounds must be at least 1".into(),
            ));
        }
        if limits.command_timeout > limits.command_timeout_max {
            return Err(ConfigError::Setting(
                "limits.command_timeout is longer than limits.command_timeout_max".into(),
            ));
        }
        if self.nats.is_some() && self.postgres.is_some() {
            return Err(ConfigError::Setting(
                "nats and postgres both name where the sessions are kept: set only one".into(),
            ));
        }
        if limits.max_connections == 0 {
            return Err(ConfigError::Setting(
                "limits.max_connections must be at least 1".into(),
            ));
        }
        for model in &self.models {
            wire_api(&model.api).map_err(ConfigError::Setting)?;
        }
        check_bots(&self.bots).map_err(ConfigError::Setting)
    }

    /// The configuration as TOML, with every secret masked.
    pub(crate) fn masked_toml(&self) -> Result<String, ConfigError> {
        let mut shown = self.clone();
        for model in &mut shown.models {
            if model.api_key.is_some() {
                model.api_key = Some("********".into());
            }
        }
        shown.nats = shown.nats.as_deref().map(mask_url_password);
        shown.postgres = shown.postgres.as_deref().map(mask_postgres_password);
        toml::to_string_pretty(&shown).map_err(|e| ConfigError::Setting(e.to_string()))
    }
}

/// Checks the bot catalogue as far as it can be without the models: ids,
/// triggers and topics, thinking levels, tools and their folders. (A
/// bot's model is checked once the offered models are known.)
fn check_bots(bots: &[BotConfig]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for bot in bots {
        let id = &bot.id;
        let valid = !id.is_empty()
            && id.len() <= 64
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !valid {
            return Err(format!(
                "bots: id {id:?} must be 1 to 64 of a-z, 0-9, '-' and '_'"
            ));
        }
        if !seen.insert(id.as_str()) {
            return Err(format!("bots: the id {id:?} is used twice"));
        }
        let bad = |what: &str| Err(format!("bot {id}: {what}"));
        if bot.name.trim().is_empty() || bot.persona.trim().is_empty() {
            return bad("name and persona must not be empty");
        }
        match (bot.trigger, bot.topics.is_empty()) {
            (BotTrigger::Ambient, true) => return bad("an ambient bot needs topics"),
            (BotTrigger::Mention | BotTrigger::Always, false) => {
                return bad("topics are for ambient bots (trigger = \"ambient\")");
            }
            _ => {}
        }
        if let Some(level) = &bot.thinking {
            level
                .parse::<roundtable_providers::ThinkingLevel>()
                .map_err(|e| format!("bot {id}: {e}"))?;
        }
        match (bot.tools, &bot.workspace) {
            (BotTools::WorkspaceRead, None) => {
                return bad("tools = \"workspace-read\" needs a workspace folder");
            }
            (BotTools::None, Some(_)) => {
                return bad("a workspace is for tools = \"workspace-read\"");
            }
            (BotTools::WorkspaceRead, Some(folder)) if !folder.is_dir() => {
                return bad(&format!(
                    "the workspace {} is not a folder",
                    folder.display()
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The wire API named `name`, or why it is none the daemon speaks.
pub(crate) fn wire_api(name: &str) -> Result<WireApi, String> {
    match WireApi::from(name) {
        WireApi::Other(other) => Err(format!(
            "model api {other:?} is not one this daemon speaks ({OPENAI_COMPLETIONS}, {ANTHROPIC_MESSAGES}, {OPENAI_RESPONSES}, {GOOGLE_GENERATIVE_AI})"
        )),
        api => Ok(api),
    }
}

/// `url` with the password of its user part, if any, masked.
fn mask_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((user_part, host)) = rest.rsplit_once('@') else {
        return url.to_string();
    };
    match user_part.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:********@{host}"),
        None => format!("{scheme}://********@{host}"),
    }
}

/// A PostgreSQL connection string with its passwords masked: the user
/// part's of a URL, and every `password=` parameter (of a URL's query or
/// of a `key=value` string).
fn mask_postgres_password(text: &str) -> String {
    let text = mask_userinfo_password(text);
    let mut shown = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("password") {
        let (before, after) = rest.split_at(at + "password".len());
        shown.push_str(before);
        let Some(value) = after.trim_start().strip_prefix('=') else {
            rest = after;
            continue;
        };
        let value = value.trim_start();
        shown.push_str("=********");
        rest = &value[parameter_len(value)..];
    }
    shown.push_str(rest);
    shown
}

/// A URL with the password of its user part masked (a user without one,
/// a PostgreSQL user, is no secret); other text as it is.
fn mask_userinfo_password(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_part, host)) => match user_part.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:********@{host}{path}"),
            None => text.to_string(),
        },
        None => text.to_string(),
    }
}

/// The length of the parameter value `value` starts with: a quoted one
/// through its closing quote (`\'` escapes one), else up to a space or
/// the next query parameter.
fn parameter_len(value: &str) -> usize {
    let Some(quoted) = value.strip_prefix('\'') else {
        return value
            .find(|c: char| c.is_whitespace() || c == '&')
            .unwrap_or(value.len());
    };
    let mut escaped = false;
    for (i, c) in quoted.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\'' => return i + 2,
            _ => {}
        }
    }
    value.len()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn every_wire_api_is_accepted_and_another_is_refused_by_name() {
        for api in [
            OPENAI_COMPLETIONS,
            ANTHROPIC_MESSAGES,
            OPENAI_RESPONSES,
            GOOGLE_GENERATIVE_AI,
        ] {
            let config: Config = toml::from_str(&format!(
                "[[models]]\napi = \"{api}\"\nprovider = \"p\"\nid = \"m\"\n"
            ))
            .unwrap();
            assert!(config.check().is_ok(), "{api}");
        }
        let error = wire_api("bedrock-converse-stream").unwrap_err();
        assert!(error.contains(GOOGLE_GENERATIVE_AI), "{error}");
    }

    #[test]
    fn a_file_overrides_the_defaults_key_by_key() {
        let config: Config = toml::from_str(
            "addr = \"127.0.0.1:9000\"\n[limits]\nmax_rounds = 50\nshutdown_grace = \"5s\"\n",
        )
        .unwrap();
        assert_eq!(config.addr.port(), 9000);
        assert_eq!(config.limits.max_rounds, 50);
        assert_eq!(config.limits.shutdown_grace, Duration::from_secs(5));
        assert_eq!(
            config.limits.verify_attempts,
            Limits::default().verify_attempts
        );
    }

    #[test]
    fn a_misspelt_key_is_an_error_naming_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(
            &file,
            "addr = \"127.0.0.1:9000\"\n[limits]\nmax_round = 5\n",
        )
        .unwrap();
        let error = Config::load(Some(&file), dir.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("line 3"), "{error}");
        assert!(error.contains("max_round"), "{error}");
    }

    #[test]
    fn postgres_passwords_are_masked_in_every_form() {
        for (given, shown) in [
            (
                "postgres://app:hunter2@db.lan:5432/rt",
                "postgres://app:********@db.lan:5432/rt",
            ),
            (
                "postgres://app@db.lan/rt?password=hunter2&sslmode=disable",
                "postgres://app@db.lan/rt?password=********&sslmode=disable",
            ),
            (
                "host=db.lan user=app password=hunter2 dbname=rt",
                "host=db.lan user=app password=******** dbname=rt",
            ),
            (
                r"host=db.lan password = 'hun ter\'2' dbname=rt",
                "host=db.lan password=******** dbname=rt",
            ),
            (
                "host=db.lan password='unterminated",
                "host=db.lan password=********",
            ),
            ("postgres://app@db.lan/rt", "postgres://app@db.lan/rt"),
            ("host=/run/passwordless", "host=/run/passwordless"),
        ] {
            assert_eq!(mask_postgres_password(given), shown, "{given}");
        }
    }

    #[test]
    fn nats_and_postgres_together_are_refused() {
        let config = Config {
            nats: Some("nats://127.0.0.1:4222".into()),
            postgres: Some("postgres://app:hunter2@127.0.0.1/rt".into()),
            ..Config::default()
        };
        let error = config.check().unwrap_err().to_string();
        assert!(
            error.contains("nats") && error.contains("postgres"),
            "{error}"
        );
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn the_bot_catalogue_is_checked_with_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().display().to_string();
        let bot = |extra: &str| {
            format!(
                "[[bots]]\nid = \"archivist\"\nname = \"Archivist\"\npersona = \"You keep the archive.\"\n{extra}\n"
            )
        };
        let good = bot(&format!(
            "trigger = \"mention\"\nthinking = \"low\"\ntools = \"workspace-read\"\nworkspace = {folder:?}"
        ));
        let config: Config = toml::from_str(&good).unwrap();
        config.check().unwrap();
        assert_eq!(config.bots[0].tools, BotTools::WorkspaceRead);
        let error = |text: String| match toml::from_str::<Config>(&text) {
            Ok(config) => config.check().unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        let twice = format!(
            "{}{}",
            bot("trigger = \"always\""),
            bot("trigger = \"always\"")
        );
        assert!(error(twice).contains("used twice"));
        let sometimes = error(bot("trigger = \"sometimes\""));
        assert!(
            sometimes.contains("sometimes") && sometimes.contains("ambient"),
            "{sometimes}"
        );
        assert!(error(bot("trigger = \"ambient\"")).contains("needs topics"));
        assert!(error(bot("trigger = \"always\"\ntopics = [\"x\"]")).contains("ambient"));
        assert!(error(bot("trigger = \"mention\"\nthinking = \"lots\"")).contains("lots"));
        let no_folder = error(bot("trigger = \"mention\"\ntools = \"workspace-read\""));
        assert!(no_folder.contains("needs a workspace"), "{no_folder}");
    }

    #[test]
    fn printed_config_masks_secrets() {
        let mut config = Config {
            nats: Some("nats://ops:hunter2@nats.lan:4222".into()),
            postgres: Some("postgres://rt:hunter3@db.lan/rt".into()),
            ..Config::default()
        };
        config.models.push(ModelConfig {
            api: "openai-completions".into(),
            provider: "openai".into(),
            id: "gpt-4o-mini".into(),
            base_url: None,
            api_key: Some("sk-live-secret".into()),
            api_key_env: None,
        });
        let shown = config.masked_toml().unwrap();
        assert!(
            !shown.contains("hunter2")
                && !shown.contains("hunter3")
                && !shown.contains("sk-live-secret"),
            "{shown}"
        );
        assert!(
            shown.contains("nats://ops:********@nats.lan:4222"),
            "{shown}"
        );
        let back: Config = toml::from_str(&shown).unwrap();
        assert_eq!(back.limits, config.limits);
    }
}
