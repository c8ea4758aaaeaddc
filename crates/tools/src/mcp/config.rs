//! The MCP configuration: the `mcpServers` file users already write for
//! other clients, plus roundtable's per-server settings.
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "github": {
//!       "command": "npx",
//!       "args": ["-y", "@modelcontextprotocol/server-github"],
//!       "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
//!       "trust": "trust_annotations",
//!       "disabledTools": ["create_repository"]
//!     },
//!     "docs": {
//!       "url": "https://example.com/mcp",
//!       "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
//!       "callTimeoutSec": 20,
//!       "tools": {"search": {"kind": "network"}}
//!     }
//!   }
//! }
//! ```
//!
//! A server entry has either `command` (with `args`, `env`, `cwd`: a child
//! process spoken to over stdio) or `url` (with `headers`: streamable HTTP).
//! `${VAR}` and `${VAR:-default}` in those fields are replaced from the
//! environment when the file is read, so secrets stay out of the file. Keys
//! other clients use and roundtable does not (`alwaysAllow`, ...) are
//! ignored; `"disabled": true` skips a server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::workspace::CommandEnv;
use crate::{OutputLimit, SetupError, ToolKind};

/// How long a server may take to start (spawn, handshake, first tool list)
/// by default: a first `npx` run downloads its package.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a call may go without an answer or a progress notification by
/// default.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest a call may run by default, however much progress it reports.
pub const DEFAULT_CALL_TIMEOUT_CAP: Duration = Duration::from_secs(600);

/// Every MCP server of a toolset, in the order of the file.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// The servers, in file order.
    pub servers: Vec<McpServerConfig>,
    /// The environment stdio servers start from (their `env` is added on
    /// top): by default the host's without its secrets (see
    /// [`CommandEnv`]), so a third-party server only sees the keys its
    /// entry hands it.
    pub base_env: CommandEnv,
}

/// One server of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The name it has in the file; tool names are prefixed with it.
    pub name: Arc<str>,
    /// How to reach it.
    pub transport: McpTransport,
    /// False for `"disabled": true`: the server is not started.
    pub enabled: bool,
    /// Time allowed for spawn, handshake and the first tool list.
    pub startup_timeout: Duration,
    /// Time a call may go without an answer; each progress notification
    /// from the server starts it again.
    pub call_timeout: Duration,
    /// The longest a call may run, progress or not.
    pub call_timeout_cap: Duration,
    /// When set, only these tools (by the server's names) are offered.
    pub enabled_tools: Option<Vec<String>>,
    /// Tools (by the server's names) that are never offered.
    pub disabled_tools: Vec<String>,
    /// Whether the server's tool annotations decide the tools' kinds.
    pub trust: McpTrust,
    /// Per-tool settings, by the server's tool name.
    pub tool_overrides: BTreeMap<String, McpToolOverride>,
    /// A bound on each result of this server, applied before the registry's.
    pub output_limit: Option<OutputLimit>,
}

impl McpServerConfig {
    /// A server reached by `transport`, with every setting at its default.
    pub fn new(name: impl Into<Arc<str>>, transport: McpTransport) -> Self {
        Self {
            name: name.into(),
            transport,
            enabled: true,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            call_timeout_cap: DEFAULT_CALL_TIMEOUT_CAP,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            trust: McpTrust::default(),
            tool_overrides: BTreeMap::new(),
            output_limit: None,
        }
    }

    /// Is the server's tool `tool` offered, given the enabled and disabled lists?
    pub fn offers(&self, tool: &str) -> bool {
        let enabled = self
            .enabled_tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == tool));
        enabled && !self.disabled_tools.iter().any(|n| n == tool)
    }
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A child process spoken to over its stdin and stdout.
    Stdio {
        /// The program (looked up in `PATH`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to [`McpConfig::base_env`].
        env: Vec<(String, String)>,
        /// Its working directory (the host's when unset).
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint, `http` or `https`.
        url: String,
        /// Headers sent with every request (`Authorization`, ...).
        headers: Vec<(String, String)>,
    },
}

/// How far a server's own description of its tools is believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTrust {
    /// Every tool is `exec`: anything may happen, so the default approval
    /// policy asks a human first. The default.
    #[default]
    Untrusted,
    /// The tools' `readOnlyHint` and `openWorldHint` annotations decide:
    /// read-only and closed-world tools are `read`, read-only open-world
    /// tools `network`, anything else `write`.
    TrustAnnotations,
}

/// Settings of one tool that win over what the server says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpToolOverride {
    /// The tool's kind, whatever the trust setting and annotations say.
    #[serde(default)]
    pub kind: Option<ToolKind>,
    /// `true`: every call needs approval, whatever the policy says.
    /// `false` (or unset): the approval policy decides by kind.
    #[serde(default, alias = "require_approval")]
    pub require_approval: Option<bool>,
}

impl McpConfig {
    /// Reads and parses a configuration file. A relative `cwd` of a server
    /// is taken relative to the file's folder; `${VAR}` is replaced from
    /// this process's environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, SetupError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| SetupError::McpConfig {
            path: Some(path.to_path_buf()),
            message: format!("cannot read the file: {e}"),
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        Self::parse(&text, base, &|name| std::env::var(name).ok()).map_err(|message| {
            SetupError::McpConfig {
                path: Some(path.to_path_buf()),
                message,
            }
        })
    }

    /// Parses a configuration from its JSON text; `${VAR}` is replaced from
    /// this process's environment and a relative `cwd` stays relative to
    /// the host's working directory.
    pub fn from_json(text: &str) -> Result<Self, SetupError> {
        Self::from_json_with_vars(text, |name| std::env::var(name).ok())
    }

    /// Like [`from_json`](Self::from_json), with `${VAR}` looked up by `vars`.
    pub fn from_json_with_vars(
        text: &str,
        vars: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SetupError> {
        Self::parse(text, Path::new(""), &vars).map_err(|message| SetupError::McpConfig {
            path: None,
            message,
        })
    }

    /// The configuration of the server called `name`.
    pub fn server(&self, name: &str) -> Option<&McpServerConfig> {
        self.servers.iter().find(|s| &*s.name == name)
    }

    fn parse(
        text: &str,
        base_dir: &Path,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let file: RawFile = decode(text)?;
        let mut servers = Vec::with_capacity(file.mcp_servers.len());
        for (name, raw) in file.mcp_servers {
            let raw: RawServer = serde_path_to_error::deserialize(raw)
                .map_err(|e| format!("mcpServers.{name}.{}: {}", e.path(), e.inner()))?;
            let server = raw
                .resolve(&name, base_dir, vars)
                .map_err(|e| format!("mcpServers.{name}: {e}"))?;
            servers.push(server);
        }
        Ok(Self {
            servers,
            base_env: CommandEnv::default(),
        })
    }
}

fn decode(text: &str) -> Result<RawFile, String> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| match e.path().to_string().as_str() {
        "." => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    })
}

/// The file as written; `serde_json`'s map keeps the servers in file order.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFile {
    #[serde(alias = "mcp_servers", alias = "servers")]
    mcp_servers: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawServer {
    #[serde(default, rename = "type", alias = "transport")]
    transport_type: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default, alias = "httpUrl", alias = "serverUrl")]
    url: Option<String>,
    #[serde(default)]
    headers: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    disabled: bool,
    #[serde(default, alias = "startup_timeout_sec")]
    startup_timeout_sec: Option<f64>,
    #[serde(default, alias = "call_timeout_sec", alias = "tool_timeout_sec")]
    call_timeout_sec: Option<f64>,
    #[serde(default, alias = "call_timeout_cap_sec")]
    call_timeout_cap_sec: Option<f64>,
    #[serde(default, alias = "enabled_tools", alias = "includeTools")]
    enabled_tools: Option<Vec<String>>,
    #[serde(default, alias = "disabled_tools", alias = "excludeTools")]
    disabled_tools: Vec<String>,
    #[serde(default)]
    trust: McpTrust,
    #[serde(default)]
    tools: BTreeMap<String, McpToolOverride>,
    #[serde(default, alias = "output_limit")]
    output_limit: Option<RawOutputLimit>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawOutputLimit {
    #[serde(default, alias = "max_bytes")]
    max_bytes: Option<usize>,
    #[serde(default, alias = "max_lines")]
    max_lines: Option<usize>,
}

impl RawServer {
    fn resolve(
        mut self,
        name: &str,
        base_dir: &Path,
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpServerConfig, String> {
        if name.trim().is_empty() {
            return Err(String::from("a server needs a non-empty name"));
        }
        let expand = |field: &str, text: &str| {
            expand_vars(text, vars).map_err(|var| {
                format!("{field}: the environment variable {var} is not set (write ${{{var}:-default}} for a fallback)")
            })
        };
        let transport = match (self.command.take(), self.url.take()) {
            (Some(_), Some(_)) => {
                return Err(String::from(
                    "has both `command` and `url`; a server is either a command (stdio) or a URL (streamable HTTP)",
                ));
            }
            (None, None) => {
                return Err(String::from(
                    "needs `command` (a server spoken to over stdio) or `url` (streamable HTTP)",
                ));
            }
            (Some(command), None) => self.stdio(&command, base_dir, &expand)?,
            (None, Some(url)) => self.http(&url, &expand)?,
        };
        let mut server = McpServerConfig::new(name, transport);
        server.enabled = !self.disabled;
        if let Some(secs) = self.startup_timeout_sec {
            server.startup_timeout = seconds("startupTimeoutSec", secs)?;
        }
        if let Some(secs) = self.call_timeout_sec {
            server.call_timeout = seconds("callTimeoutSec", secs)?;
        }
        if let Some(secs) = self.call_timeout_cap_sec {
            server.call_timeout_cap = seconds("callTimeoutCapSec", secs)?;
        }
        server.call_timeout_cap = server.call_timeout_cap.max(server.call_timeout);
        server.enabled_tools = self.enabled_tools;
        server.disabled_tools = self.disabled_tools;
        server.trust = self.trust;
        server.tool_overrides = self.tools;
        server.output_limit = self.output_limit.map(|l| {
            let default = OutputLimit::default();
            OutputLimit {
                max_bytes: l.max_bytes.unwrap_or(default.max_bytes),
                max_lines: l.max_lines.unwrap_or(default.max_lines),
            }
        });
        Ok(server)
    }

    /// The stdio transport running `command`.
    fn stdio(
        &mut self,
        command: &str,
        base_dir: &Path,
        expand: &dyn Fn(&str, &str) -> Result<String, String>,
    ) -> Result<McpTransport, String> {
        check_type(self.transport_type.as_deref(), "stdio")?;
        let command = expand("command", command)?;
        if command.trim().is_empty() {
            return Err(String::from("command: must not be empty"));
        }
        let args = self
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| expand(&format!("args[{i}]"), a))
            .collect::<Result<_, _>>()?;
        let env = string_map("env", std::mem::take(&mut self.env), expand)?;
        let cwd = match self.cwd.take() {
            Some(cwd) => Some(base_dir.join(expand("cwd", &cwd)?)),
            None => None,
        };
        Ok(McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        })
    }

    /// The streamable HTTP transport to `url`.
    fn http(
        &mut self,
        url: &str,
        expand: &dyn Fn(&str, &str) -> Result<String, String>,
    ) -> Result<McpTransport, String> {
        check_type(self.transport_type.as_deref(), "http")?;
        let url = expand("url", url)?;
        match reqwest::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            Ok(u) => {
                return Err(format!(
                    "url: {url:?} has scheme {:?}; only http and https are supported",
                    u.scheme()
                ));
            }
            Err(e) => return Err(format!("url: {url:?} is not a URL: {e}")),
        }
        let headers = string_map("headers", std::mem::take(&mut self.headers), expand)?;
        for (name, value) in &headers {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("headers: {name:?} is not a valid header name"));
            }
            if reqwest::header::HeaderValue::from_str(value).is_err() {
                return Err(format!("headers.{name}: not a valid header value"));
            }
        }
        Ok(McpTransport::Http { url, headers })
    }
}

/// Accepts an absent `type` or one naming `expected`; refuses the old SSE
/// transport with a pointer to streamable HTTP.
fn check_type(given: Option<&str>, expected: &str) -> Result<(), String> {
    let Some(given) = given else { return Ok(()) };
    let normalised = given.to_ascii_lowercase().replace(['-', '_'], "");
    let is = |names: &[&str]| names.contains(&normalised.as_str());
    match expected {
        "stdio" if is(&["stdio"]) => Ok(()),
        "http" if is(&["http", "streamablehttp"]) => Ok(()),
        _ if is(&["sse"]) => Err(String::from(
            "type: the HTTP+SSE transport is not supported; use a streamable HTTP endpoint (`url`)",
        )),
        _ => Err(format!(
            "type: {given:?} does not fit the entry (expected {expected:?} for a server with {})",
            if expected == "stdio" {
                "`command`"
            } else {
                "`url`"
            }
        )),
    }
}

fn string_map(
    field: &str,
    map: serde_json::Map<String, serde_json::Value>,
    expand: &dyn Fn(&str, &str) -> Result<String, String>,
) -> Result<Vec<(String, String)>, String> {
    map.into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(s) => {
                Ok((key.clone(), expand(&format!("{field}.{key}"), &s)?))
            }
            other => Err(format!(
                "{field}.{key}: expected a string, found {}",
                json_type(&other)
            )),
        })
        .collect()
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn seconds(field: &str, secs: f64) -> Result<Duration, String> {
    if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(format!(
            "{field}: {secs} is not a number of seconds between 0 and 86400"
        ))
    }
}

/// Replaces `${NAME}` and `${NAME:-default}` with the variable's value (the
/// default when it is unset or empty). A `$` not followed by `{` is kept.
/// Fails with the name of an unset variable that has no default.
fn expand_vars(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // An unclosed `${` is literal text.
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (vars(name).filter(|v| !v.is_empty()), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(name.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Result<McpConfig, String> {
        McpConfig::parse(text, Path::new("/etc/rt"), &vars)
    }

    #[test]
    fn reads_the_common_format_in_file_order_with_defaults() {
        let config = parse(
            r#"{"mcpServers": {
                "zeta": {"command": "npx", "args": ["-y", "pkg"], "env": {"A": "1"}, "cwd": "srv"},
                "alpha": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "off": {"command": "x", "disabled": true, "alwaysAllow": ["y"]}
            }}"#,
        )
        .unwrap();
        let names: Vec<_> = config.servers.iter().map(|s| &*s.name).collect();
        assert_eq!(names, ["zeta", "alpha", "off"]);
        let zeta = config.server("zeta").unwrap();
        assert_eq!(
            zeta.transport,
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "pkg".into()],
                env: vec![("A".into(), "1".into())],
                cwd: Some(PathBuf::from("/etc/rt/srv")),
            }
        );
        assert_eq!(zeta.startup_timeout, DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(zeta.call_timeout, DEFAULT_CALL_TIMEOUT);
        assert_eq!(zeta.trust, McpTrust::Untrusted);
        assert!(zeta.enabled);
        assert_eq!(
            config.server("alpha").unwrap().transport,
            McpTransport::Http {
                url: "https://example.com/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer s3cret".into())],
            }
        );
        assert!(!config.server("off").unwrap().enabled);
    }

    #[test]
    fn reads_roundtable_settings() {
        let config = parse(
            r#"{"mcpServers": {"s": {
                "command": "srv",
                "startupTimeoutSec": 2.5,
                "call_timeout_sec": 3,
                "callTimeoutCapSec": 1,
                "enabledTools": ["a", "b"],
                "disabledTools": ["b"],
                "trust": "trust_annotations",
                "tools": {"a": {"kind": "read", "requireApproval": true}},
                "outputLimit": {"maxBytes": 100}
            }}}"#,
        )
        .unwrap();
        let s = &config.servers[0];
        assert_eq!(s.startup_timeout, Duration::from_millis(2500));
        assert_eq!(s.call_timeout, Duration::from_secs(3));
        assert_eq!(
            s.call_timeout_cap,
            Duration::from_secs(3),
            "never below the call timeout"
        );
        assert!(s.offers("a"));
        assert!(!s.offers("b"));
        assert!(!s.offers("c"));
        assert_eq!(s.trust, McpTrust::TrustAnnotations);
        assert_eq!(
            s.tool_overrides["a"],
            McpToolOverride {
                kind: Some(ToolKind::Read),
                require_approval: Some(true)
            }
        );
        assert_eq!(
            s.output_limit,
            Some(OutputLimit {
                max_bytes: 100,
                max_lines: OutputLimit::default().max_lines
            })
        );
    }

    #[test]
    fn bad_entries_are_named_with_their_path() {
        let cases = [
            (
                r#"{"mcpServers": {"s": {}}}"#,
                "mcpServers.s: needs `command`",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "a", "url": "http://x"}}}"#,
                "mcpServers.s: has both",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "a", "startupTimeoutSec": "5"}}}"#,
                "mcpServers.s.startupTimeoutSec: invalid type",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "a", "callTimeoutSec": 0}}}"#,
                "mcpServers.s: callTimeoutSec: 0 is not a number of seconds",
            ),
            (
                r#"{"mcpServers": {"s": {"url": "ftp://x"}}}"#,
                "only http and https",
            ),
            (
                r#"{"mcpServers": {"s": {"url": "http://x", "type": "sse"}}}"#,
                "HTTP+SSE transport is not supported",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "a", "env": {"N": 3}}}}"#,
                "mcpServers.s: env.N: expected a string, found a number",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "a", "args": ["${MISSING}"]}}}"#,
                "args[0]: the environment variable MISSING is not set",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "a", "trust": "always"}}}"#,
                "mcpServers.s.trust: unknown variant `always`",
            ),
            (
                r#"{"mcpServers": {"s": {"command": "a", "tools": {"t": {"kind": "delete"}}}}}"#,
                "mcpServers.s.tools.t.kind: unknown variant `delete`",
            ),
            (r#"{"servers": 3}"#, "servers: invalid type: integer"),
            (r#"{"mcpServers": {"#, "EOF while parsing"),
            (
                r#"{"mcpServers": {"s": {"url": "http://x", "headers": {"bad name": "v"}}}}"#,
                "\"bad name\" is not a valid header name",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(
                err.contains(expected),
                "{text}\n  gave: {err}\n  expected: {expected}"
            );
        }
    }

    #[test]
    fn variables_expand_with_defaults_and_literal_dollars() {
        let e = |t: &str| expand_vars(t, &vars);
        assert_eq!(e("a ${TOKEN} b").unwrap(), "a s3cret b");
        assert_eq!(e("${MISSING:-fallback}").unwrap(), "fallback");
        assert_eq!(e("${EMPTY:-fallback}").unwrap(), "fallback");
        assert_eq!(e("${TOKEN:-fallback}").unwrap(), "s3cret");
        assert_eq!(e("$HOME and ${unclosed").unwrap(), "$HOME and ${unclosed");
        assert_eq!(e("${MISSING}").unwrap_err(), "MISSING");
    }

    #[test]
    fn load_reports_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        let err = McpConfig::load(&path).unwrap_err();
        assert!(matches!(&err, SetupError::McpConfig { path: Some(p), .. } if p == &path));
        std::fs::write(
            &path,
            r#"{"mcpServers": {"s": {"command": "srv", "cwd": "sub"}}}"#,
        )
        .unwrap();
        let config = McpConfig::load(&path).unwrap();
        let McpTransport::Stdio { cwd, .. } = &config.servers[0].transport else {
            panic!("stdio expected")
        };
        assert_eq!(cwd.as_deref(), Some(dir.path().join("sub").as_path()));
    }
}
