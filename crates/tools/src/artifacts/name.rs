//! Artifact names: safe file names, checked in one place.

use std::fmt;
use std::str::FromStr;

use super::ArtifactError;

/// The name of an artifact: a safe file name that any sink can use as it is
/// (a file in a folder, a key in an object store).
///
/// It holds only ASCII letters, digits, `.`, `-` and `_` (so no path
/// separator), does not start with `.` (no `.`, `..` or hidden file), holds
/// no `..`, and is 1 to [`MAX_LEN`](Self::MAX_LEN) bytes long. Anything else
/// is an [`ArtifactError::InvalidName`], never a path.
///
/// ```
/// use roundtable_tools::ArtifactName;
///
/// assert_eq!(ArtifactName::new("build-1.log").unwrap().as_str(), "build-1.log");
/// for bad in ["", "a/b", "..", "../x", ".hidden", "x..y", "a b", "é.svg"] {
///     assert!(ArtifactName::new(bad).is_err(), "{bad:?}");
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArtifactName(String);

impl ArtifactName {
    /// The longest name, in bytes.
    pub const MAX_LEN: usize = 128;

    /// Checks `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, ArtifactError> {
        let name = name.into();
        match check(&name) {
            Ok(()) => Ok(Self(name)),
            Err(reason) => Err(ArtifactError::InvalidName {
                name: shortened(&name),
                reason,
            }),
        }
    }

    /// The name of an artifact of a tool call: `<tool>-<call id>.<extension>`,
    /// or `<tool>-<call id>-<part>.<extension>` for one of several, with the
    /// characters of the call id a name cannot hold replaced by `_` and a
    /// long id cut. Always valid for a tool name and extension made of
    /// name characters.
    pub(crate) fn for_call(
        tool: &str,
        call_id: &str,
        part: Option<usize>,
        extension: &str,
    ) -> Self {
        let id: String = call_id
            .chars()
            .take(64)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut name = String::from(tool);
        if !id.is_empty() {
            name.push('-');
            name.push_str(&id);
        }
        if let Some(part) = part {
            name.push_str(&format!("-{part}"));
        }
        name.push('.');
        name.push_str(extension);
        Self::new(name).unwrap_or_else(|_| Self(format!("artifact.{extension}")))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `n`th variant of this name, for when it is taken: `-n` before the
    /// extension (`shell.log` → `shell-2.log`, `notes` → `notes-2`).
    pub fn numbered(&self, n: u32) -> Self {
        let (stem, extension) = match self.0.rfind('.') {
            Some(dot) => self.0.split_at(dot),
            None => (self.0.as_str(), ""),
        };
        // The suffix is name characters and a name starts with one that is
        // not a dot, so the variant is as valid as the name; only its length
        // can grow past MAX_LEN, which file systems and stores still take.
        Self(format!("{stem}-{n}{extension}"))
    }
}

/// The one check of an artifact name.
fn check(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("it is empty");
    }
    if name.len() > ArtifactName::MAX_LEN {
        return Err("it is longer than 128 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err("only ASCII letters, digits, '.', '-' and '_' are allowed");
    }
    if name.starts_with('.') {
        return Err("it starts with '.'");
    }
    if name.contains("..") {
        return Err("it contains '..'");
    }
    Ok(())
}

/// A long bad name, cut for the error message.
fn shortened(name: &str) -> String {
    let mut chars = name.chars();
    let head: String = chars.by_ref().take(64).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

impl fmt::Display for ArtifactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ArtifactName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for ArtifactName {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_ref()
    }
}

impl FromStr for ArtifactName {
    type Err = ArtifactError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::new(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_escape_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../x.log",
            "a/../../x",
            "/etc/passwd",
            "a/b.log",
            "a\\b.log",
            ".hidden",
            "x..log",
            "..\\x",
            "nul\0.log",
            "new\nline",
            "sp ace",
            "ünïcode.svg",
            "x:y",
            "~",
            "%2e%2e",
        ] {
            let err = ArtifactName::new(bad).unwrap_err();
            assert!(
                matches!(err, ArtifactError::InvalidName { .. }),
                "{bad:?}: {err}"
            );
        }
        let long = "x".repeat(ArtifactName::MAX_LEN + 1);
        let err = ArtifactName::new(long).unwrap_err().to_string();
        assert!(err.contains("longer than 128 bytes"), "{err}");
        assert!(err.contains('…'), "the name is cut in the message: {err}");
        for good in [
            "a",
            "shell-call_1.log",
            "Diagram.v2.svg",
            "x".repeat(128).as_str(),
        ] {
            assert_eq!(ArtifactName::new(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn call_names_are_always_valid() {
        let name = |id: &str, part| ArtifactName::for_call("shell", id, part, "log");
        assert_eq!(name("call_1", None).as_str(), "shell-call_1.log");
        assert_eq!(name("call_1", Some(2)).as_str(), "shell-call_1-2.log");
        assert_eq!(name("", None).as_str(), "shell.log");
        assert_eq!(
            name("../../x|fc.1", None).as_str(),
            "shell-______x_fc_1.log"
        );
        let long = name(&"é".repeat(500), Some(usize::MAX));
        assert!(ArtifactName::new(long.as_str()).is_ok(), "{long}");
    }

    #[test]
    fn numbered_variants_keep_the_extension() {
        let n = |name: &str| ArtifactName::new(name).unwrap().numbered(2).to_string();
        assert_eq!(n("shell.log"), "shell-2.log");
        assert_eq!(n("a.tar.gz"), "a.tar-2.gz");
        assert_eq!(n("notes"), "notes-2");
    }
}
