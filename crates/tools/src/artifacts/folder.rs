//! [`FolderArtifacts`]: artifacts as files of one folder.

use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{ArtifactError, ArtifactName, Artifacts};
use crate::SafeFolder;

/// Numbered variants tried when a name is taken (`x-2.log` ... `x-1000.log`).
const MAX_VARIANT: u32 = 1000;

/// A sink that writes each artifact as a new file of one folder, for hosts
/// that keep a session folder (`artifacts/<turn_id>/`) and for tests.
///
/// The folder is created when the first artifact arrives. Each artifact is
/// written as a new file of the folder opened without following a link
/// ([`SafeFolder::create_new_as`]): it lands whole or not at all, and
/// nothing is ever written through a symlink, whoever planted it (a command
/// can reach the folder when it lies in the workspace): a name already
/// taken, by a file or by a link, gets a numbered variant (`shell.log`,
/// `shell-2.log`, ...) and nothing is overwritten. The folder itself must
/// not be a symlink; the folders above it are the host's choice and are
/// followed.
///
/// The reference returned is `<prefix>/<file name>` with the prefix set by
/// [`with_reference_prefix`](Self::with_reference_prefix) (say
/// `artifacts/turn_123`), or else the file's path.
#[derive(Debug, Clone)]
pub struct FolderArtifacts {
    dir: PathBuf,
    reference_prefix: Option<String>,
}

impl FolderArtifacts {
    /// A sink writing into `dir` (created on demand, with its parents).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            reference_prefix: None,
        }
    }

    /// References become `<prefix>/<file name>` instead of the file's path.
    pub fn with_reference_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.reference_prefix = Some(prefix.into());
        self
    }

    /// The folder the artifacts are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn reference(&self, name: &ArtifactName) -> String {
        match &self.reference_prefix {
            Some(prefix) if prefix.is_empty() => name.to_string(),
            Some(prefix) => format!("{}/{name}", prefix.trim_end_matches('/')),
            None => self.dir.join(name.as_str()).to_string_lossy().into_owned(),
        }
    }
}

#[async_trait]
impl Artifacts for FolderArtifacts {
    async fn store(&self, name: &ArtifactName, bytes: Vec<u8>) -> Result<String, ArtifactError> {
        let dir = self.dir.clone();
        let asked = name.clone();
        let written = tokio::task::spawn_blocking(move || write_new(&dir, &asked, &bytes)).await;
        match written {
            Ok(Ok(stored)) => Ok(self.reference(&stored)),
            Ok(Err(err)) => Err(err),
            Err(join) => Err(ArtifactError::Io {
                name: name.clone(),
                source: io::Error::other(join),
            }),
        }
    }
}

/// Writes `bytes` to a new file named `name`, or its first free numbered
/// variant, in `dir`; returns the name used.
fn write_new(dir: &Path, name: &ArtifactName, bytes: &[u8]) -> Result<ArtifactName, ArtifactError> {
    let io_error = |source: io::Error| ArtifactError::Io {
        name: name.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io_error)?;
    let folder = SafeFolder::open_refusing_link(dir).map_err(io_error)?;
    let variants = (1..=MAX_VARIANT).map(|n| {
        if n == 1 {
            name.clone()
        } else {
            name.numbered(n)
        }
    });
    match folder.create_new_as(variants, bytes).map_err(io_error)? {
        Some(used) => Ok(used),
        None => Err(ArtifactError::NoFreeName { name: name.clone() }),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn name(s: &str) -> ArtifactName {
        ArtifactName::new(s).unwrap()
    }

    #[tokio::test]
    async fn creates_the_folder_and_numbers_taken_names() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("artifacts/turn_1");
        let sink = FolderArtifacts::new(&folder).with_reference_prefix("artifacts/turn_1/");
        let first = sink.store(&name("out.log"), b"one".to_vec()).await.unwrap();
        let second = sink.store(&name("out.log"), b"two".to_vec()).await.unwrap();
        assert_eq!(first, "artifacts/turn_1/out.log");
        assert_eq!(second, "artifacts/turn_1/out-2.log");
        assert_eq!(std::fs::read(folder.join("out.log")).unwrap(), b"one");
        assert_eq!(std::fs::read(folder.join("out-2.log")).unwrap(), b"two");

        let plain = FolderArtifacts::new(&folder);
        let path = plain.store(&name("x.svg"), Vec::new()).await.unwrap();
        assert_eq!(Path::new(&path), folder.join("x.svg"));
    }

    #[tokio::test]
    async fn never_writes_through_a_planted_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("turn_1");
        std::fs::create_dir(&folder).unwrap();
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "precious").unwrap();
        // A link where the artifact goes, a dangling one where its first
        // variant goes (O_CREAT alone would create the target).
        symlink(&victim, folder.join("shell.log")).unwrap();
        symlink(dir.path().join("created.txt"), folder.join("shell-2.log")).unwrap();
        let sink = FolderArtifacts::new(&folder).with_reference_prefix("a");
        let reference = sink
            .store(&name("shell.log"), b"output".to_vec())
            .await
            .unwrap();
        assert_eq!(reference, "a/shell-3.log");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!dir.path().join("created.txt").exists());
        assert_eq!(
            std::fs::read(folder.join("shell-3.log")).unwrap(),
            b"output"
        );

        // The folder itself swapped for a link: refused, nothing written.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let linked = dir.path().join("turn_2");
        symlink(&elsewhere, &linked).unwrap();
        let err = FolderArtifacts::new(&linked)
            .store(&name("x.log"), b"x".to_vec())
            .await
            .unwrap_err();
        assert!(matches!(err, ArtifactError::Io { .. }), "{err}");
        assert!(err.to_string().contains("symlink"), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn a_name_with_every_variant_taken_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let n = name("x");
        std::fs::write(dir.path().join("x"), "").unwrap();
        for i in 2..=MAX_VARIANT {
            std::fs::write(dir.path().join(n.numbered(i).as_str()), "").unwrap();
        }
        let err = FolderArtifacts::new(dir.path())
            .store(&n, b"y".to_vec())
            .await
            .unwrap_err();
        assert!(matches!(err, ArtifactError::NoFreeName { .. }), "{err}");
    }
}
