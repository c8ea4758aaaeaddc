//! The environment the workspace's commands (`shell`, `verify`, `git_status`)
//! run with.
//!
//! A model that can run `env` can read every variable of the host process,
//! and the host of an LLM service holds the keys of its providers and
//! toolsets (`OPENAI_API_KEY`, `GITHUB_TOKEN`, ...). By default commands
//! therefore get the host's environment without the variables whose names
//! say they hold a secret; a host that wants another set says so.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

/// The variables a command runs with. Cheap to clone.
///
/// ```
/// use roundtable_tools::workspace::CommandEnv;
///
/// let env = CommandEnv::without_secrets([
///     ("PATH", "/usr/bin"),
///     ("OPENAI_API_KEY", "sk-..."),
///     ("GITHUB_TOKEN", "ghp_..."),
/// ])
/// .with("CI", "true");
/// let names: Vec<_> = env.vars().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
/// assert_eq!(names, ["PATH", "CI"]);
/// ```
#[derive(Debug, Clone)]
pub struct CommandEnv {
    vars: Arc<Vec<(OsString, OsString)>>,
}

impl Default for CommandEnv {
    /// [`CommandEnv::host_without_secrets`].
    fn default() -> Self {
        Self::host_without_secrets()
    }
}

impl CommandEnv {
    /// This process's environment, as it is now, without its secrets (see
    /// [`is_secret_name`]). The default.
    pub fn host_without_secrets() -> Self {
        Self::without_secrets(std::env::vars_os())
    }

    /// This process's whole environment, secrets included.
    pub fn host() -> Self {
        Self::exactly(std::env::vars_os())
    }

    /// `vars` without the ones whose names say they hold a secret.
    pub fn without_secrets<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Self::collect(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .filter(|(k, _)| !k.to_str().is_some_and(is_secret_name)),
        )
    }

    /// Exactly `vars`: nothing is removed.
    pub fn exactly<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Self::collect(vars.into_iter().map(|(k, v)| (k.into(), v.into())))
    }

    /// Sets `name` to `value` (replacing it if present), whatever the name.
    pub fn with(self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        let (name, value) = (name.into(), value.into());
        let mut vars = Arc::unwrap_or_clone(self.vars);
        vars.retain(|(k, _)| *k != name);
        vars.push((name, value));
        Self {
            vars: Arc::new(vars),
        }
    }

    /// The variables, in order.
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: impl AsRef<OsStr>) -> Option<&OsStr> {
        let name = name.as_ref();
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    /// Where `program` (a bare name) is found on this environment's `PATH`: the first
    /// executable file of that name in its folders (empty entries, meaning
    /// the current folder, are skipped). `None` when it is nowhere, or when
    /// there is no `PATH`. This is how a command run with this environment
    /// finds a program, so a host can tell whether a tool's program is
    /// installed.
    ///
    /// ```
    /// use roundtable_tools::workspace::CommandEnv;
    ///
    /// let env = CommandEnv::exactly([("PATH", "/nowhere:/bin:/usr/bin")]);
    /// assert!(env.find_program("sh").is_some());
    /// assert!(CommandEnv::exactly([("PATH", "/nowhere")]).find_program("sh").is_none());
    /// ```
    pub fn find_program(&self, program: &str) -> Option<PathBuf> {
        if program.is_empty() || program.contains('/') {
            return None;
        }
        std::env::split_paths(self.get("PATH")?)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(program))
            .find(|path| {
                std::fs::metadata(path)
                    .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
            })
    }

    fn collect(vars: impl Iterator<Item = (OsString, OsString)>) -> Self {
        Self {
            vars: Arc::new(vars.collect()),
        }
    }
}

/// Words that mark a variable as a secret when they are one of its
/// `_`-separated parts (`AWS_SECRET_ACCESS_KEY`) or end it (`OPENAIKEY`).
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "KEYS",
    "APIKEY",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "COOKIE",
];

/// Whether a variable's name says it holds a secret: one of its
/// `_`-separated parts, or its end, is a word such as `KEY`, `TOKEN`,
/// `SECRET`, `PASSWORD`, `CREDENTIALS` or `AUTH` (any case).
/// `OPENAI_API_KEY`, `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `SSH_AUTH_SOCK`
/// and `NPM_TOKEN` are; `PATH`, `HOME`, `KEYBOARD_LAYOUT` and `MONKEY` are not.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.split('_').any(|part| SECRET_WORDS.contains(&part))
        || SECRET_WORDS
            .iter()
            .filter(|w| w.len() >= 5)
            .any(|w| upper.ends_with(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "NPM_TOKEN",
            "DATABASE_PASSWORD",
            "SSH_AUTH_SOCK",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "openai_api_key",
            "OPENAIAPIKEY",
            "MYTOKEN",
            "Cookie_Jar_COOKIE",
        ] {
            assert!(is_secret_name(name), "{name} should be a secret");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "PWD",
            "CARGO_HOME",
            "KEYBOARD_LAYOUT",
            "MONKEY",
            "TOKENIZERS_PARALLELISM",
            "AUTHOR_NAME",
        ] {
            assert!(!is_secret_name(name), "{name} should not be a secret");
        }
    }

    #[test]
    fn with_replaces_and_adds() {
        let env = CommandEnv::exactly([("A", "1"), ("B", "2")])
            .with("A", "3")
            .with("C", "4");
        let vars: Vec<(String, String)> = env
            .vars()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert_eq!(
            vars,
            [
                ("B".to_string(), "2".to_string()),
                ("A".to_string(), "3".to_string()),
                ("C".to_string(), "4".to_string())
            ]
        );
    }
}
