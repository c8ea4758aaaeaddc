//! [`FileTable`]: a record table in one file of the sessions folder.
//!
//! The file is an append log: each change is one JSON line (`{"k":…,"v":…}`
//! sets a key, `{"k":…}` removes it), written with one `write` and no fsync,
//! so a change costs a few microseconds however many records the table
//! holds (rewriting one small file on every change would cost a copy of
//! the whole table, an fsync and a rename each time). Once the log holds
//! many more lines than live records, it is compacted: the live records
//! are written to a temporary file, fsynced and renamed over it.
//!
//! A change not yet fsynced may be lost with the machine (never with the
//! process: it is in the page cache). The table's user derives it from
//! data that is durable on its own (the session index from the threads)
//! and reconciles it after a restart; a log whose last line is torn, or
//! any line of which cannot be read, loads as no copy at all, and is
//! rebuilt.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::{RecordTable, Revised, TableError, Versioned};

/// The log grows to this many lines beyond twice the live records before it
/// is compacted.
const COMPACT_SLACK: usize = 256;

/// One line of the log.
#[derive(Serialize, Deserialize)]
struct Line<'a> {
    k: std::borrow::Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    v: Option<std::borrow::Cow<'a, str>>,
}

/// A record table kept in the file `path` (an append log, see the module
/// docs). One process writes it at a time: the thread store's folder lock
/// already makes the folder one process's. Revisions are counted in
/// memory from each start: only this process compares them.
#[derive(Debug)]
pub struct FileTable {
    path: PathBuf,
    log: Mutex<Log>,
}

#[derive(Debug, Default)]
struct Log {
    file: Option<File>,
    /// The live records, to compact from and to compare with.
    live: Revised,
    /// Lines in the file.
    lines: usize,
    /// Whether `live` holds the file's records (read by a load, or by the
    /// first read or write that needed them).
    loaded: bool,
}

/// What reading the file found.
enum Found {
    Missing,
    /// A line cannot be read (a torn last line included).
    Damaged,
    /// The live records and the number of lines.
    Records(BTreeMap<String, String>, usize),
}

impl FileTable {
    /// The table in the file `path` (created by the first change).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            log: Mutex::new(Log::default()),
        }
    }

    /// The table's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self) -> impl Fn(std::io::Error) -> TableError + '_ {
        |source| TableError::Io {
            path: self.path.clone(),
            source,
        }
    }

    async fn read(&self) -> Result<Found, TableError> {
        let path = self.path.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read(path))
            .await
            .map_err(|e| TableError::Backend(format!("reading the table failed: {e}")))?;
        let data = match read {
            Ok(data) => data,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Missing),
            Err(e) => return Err(self.io()(e)),
        };
        Ok(match parse(&data) {
            Some((live, lines)) => Found::Records(live, lines),
            None => {
                tracing::warn!(path = %self.path.display(), "unreadable record table");
                Found::Damaged
            }
        })
    }

    /// Reads the file into `log` unless it holds it already. A damaged
    /// file reads as no records, and the first change rewrites it whole.
    async fn loaded<'a>(&self, log: &'a mut Log) -> Result<&'a mut Log, TableError> {
        if !log.loaded {
            match self.read().await? {
                Found::Missing => {}
                Found::Damaged => log.lines = usize::MAX / 4,
                Found::Records(live, lines) => {
                    log.live.replace(live);
                    log.lines = lines;
                }
            }
            log.loaded = true;
        }
        Ok(log)
    }

    /// Appends one line (the record set, or removed when `value` is none),
    /// then compacts when the log has grown enough; the record's revision.
    async fn write(
        &self,
        log: &mut Log,
        key: &str,
        value: Option<String>,
    ) -> Result<u64, TableError> {
        let log = self.loaded(log).await?;
        let line = Line {
            k: key.into(),
            v: value.as_deref().map(Into::into),
        };
        let mut bytes = serde_json::to_vec(&line).map_err(|e| self.io()(e.into()))?;
        bytes.push(b'\n');
        let revision = match value {
            Some(value) => log.live.put(key, value),
            None => {
                log.live.remove(key);
                0
            }
        };
        if log.file.is_none() {
            log.file = Some(open_append(&self.path).map_err(self.io())?);
        }
        if let Some(file) = &mut log.file {
            // One small write to the page cache: not worth a blocking task.
            file.write_all(&bytes).map_err(self.io())?;
        }
        log.lines = log.lines.saturating_add(1);
        if log.lines > 2 * log.live.len() + COMPACT_SLACK {
            self.rewrite(log).await?;
        }
        Ok(revision)
    }

    /// Writes the live records as the whole file, durably.
    async fn rewrite(&self, log: &mut Log) -> Result<(), TableError> {
        let mut text = Vec::with_capacity(log.live.len() * 256);
        for (k, v) in log.live.iter() {
            let line = Line {
                k: k.into(),
                v: Some(v.into()),
            };
            serde_json::to_writer(&mut text, &line).map_err(|e| self.io()(e.into()))?;
            text.push(b'\n');
        }
        let path = self.path.clone();
        log.file = None;
        tokio::task::spawn_blocking(move || replace_durably(&path, &text))
            .await
            .map_err(|e| TableError::Backend(format!("rewriting the table failed: {e}")))?
            .map_err(self.io())?;
        log.lines = log.live.len();
        Ok(())
    }
}

#[async_trait]
impl RecordTable for FileTable {
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError> {
        let mut log = self.log.lock().await;
        log.file = None;
        log.loaded = true;
        match self.read().await? {
            Found::Missing | Found::Damaged => Ok(None),
            Found::Records(live, lines) => {
                log.live.replace(live);
                log.lines = lines;
                Ok(Some(log.live.pairs()))
            }
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>, TableError> {
        let mut log = self.log.lock().await;
        Ok(self.loaded(&mut log).await?.live.get(key).cloned())
    }

    async fn put(&self, key: &str, value: String) -> Result<(), TableError> {
        let mut log = self.log.lock().await;
        self.write(&mut log, key, Some(value)).await.map(drop)
    }

    async fn put_if(
        &self,
        key: &str,
        value: String,
        expected: Option<u64>,
    ) -> Result<Option<u64>, TableError> {
        let mut log = self.log.lock().await;
        if !self.loaded(&mut log).await?.live.is_at(key, expected) {
            return Ok(None);
        }
        self.write(&mut log, key, Some(value)).await.map(Some)
    }

    async fn remove(&self, key: &str) -> Result<(), TableError> {
        let mut log = self.log.lock().await;
        self.write(&mut log, key, None).await.map(drop)
    }

    async fn replace_all(&self, records: Vec<(String, String)>) -> Result<(), TableError> {
        let mut log = self.log.lock().await;
        log.live.replace(records);
        log.loaded = true;
        self.rewrite(&mut log).await
    }
}

/// The live records of a log and its line count; `None` when a line cannot
/// be read (a torn last line included).
fn parse(data: &[u8]) -> Option<(BTreeMap<String, String>, usize)> {
    if !data.is_empty() && !data.ends_with(b"\n") {
        return None;
    }
    let mut live = BTreeMap::new();
    let mut lines = 0;
    for raw in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let line: Line<'_> = serde_json::from_slice(raw).ok()?;
        match line.v {
            Some(v) => live.insert(line.k.into_owned(), v.into_owned()),
            None => live.remove(line.k.as_ref()),
        };
        lines += 1;
    }
    Some((live, lines))
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Writes `bytes` as `path`'s whole content: a temporary file beside it,
/// fsynced, renamed over it, and the rename made durable.
fn replace_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    let mut file = File::create(&part)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&part, path)?;
    if let Some(folder) = path.parent() {
        File::open(folder)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn changes_read_back_after_a_reopen_and_a_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".index");
        let table = FileTable::new(&path);
        assert_eq!(table.load().await.unwrap(), None);
        for round in 0..200 {
            for key in ["a", "b", "c"] {
                table.put(key, format!("{key}{round}")).await.unwrap();
            }
        }
        table.remove("b").await.unwrap();
        // Compacted on the way: the file holds far fewer lines than changes.
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines < 600, "{lines} lines");
        let again = FileTable::new(&path);
        assert_eq!(
            again.load().await.unwrap(),
            Some(vec![
                ("a".into(), "a199".into()),
                ("c".into(), "c199".into())
            ])
        );
    }

    #[tokio::test]
    async fn a_torn_or_damaged_log_loads_as_no_copy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".index");
        std::fs::write(&path, b"{\"k\":\"a\",\"v\":\"1\"}\n{\"k\":\"b\",\"v").unwrap();
        assert_eq!(FileTable::new(&path).load().await.unwrap(), None);
        std::fs::write(&path, b"not json\n{\"k\":\"a\",\"v\":\"1\"}\n").unwrap();
        assert_eq!(FileTable::new(&path).load().await.unwrap(), None);
        let table = FileTable::new(&path);
        table
            .replace_all(vec![("a".into(), "1".into())])
            .await
            .unwrap();
        assert_eq!(
            FileTable::new(&path).load().await.unwrap(),
            Some(vec![("a".into(), "1".into())])
        );
    }
}
