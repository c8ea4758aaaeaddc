//! [`NatsKvTable`]: a record table in a NATS JetStream KV bucket, shared by
//! every daemon over the same NATS (as the NATS thread store shares the
//! threads). Each daemon keeps what it loaded in memory and follows the
//! others' changes with a watch of the bucket.
//!
//! A KV key is a NATS subject token: a record key of other characters
//! than `A-Z a-z 0-9 - _` is stored as `=` and its bytes in hex, and read
//! back as itself.

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream::StorageType};
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};

use super::{RecordTable, TableChange, TableError, Versioned};

/// The key that marks a complete table: written last by a rebuild, so a
/// bucket whose rebuild was cut short loads as no copy and is rebuilt again.
const COMPLETE: &str = "_complete";

/// A record table in a JetStream KV bucket (created when missing, file
/// storage, one value per key).
#[derive(Debug)]
pub struct NatsKvTable {
    store: kv::Store,
    bucket: String,
}

fn backend(what: &str, error: impl std::fmt::Display) -> TableError {
    TableError::Backend(format!("{what}: {error}"))
}

/// The bucket key of record key `key`.
fn encode(key: &str) -> std::borrow::Cow<'_, str> {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if plain {
        key.into()
    } else {
        format!("={}", hex::encode(key)).into()
    }
}

/// The record key of bucket key `key`, or `None` for one no record key
/// makes.
fn decode(key: String) -> Option<String> {
    match key.strip_prefix('=') {
        Some(encoded) => String::from_utf8(hex::decode(encoded).ok()?).ok(),
        None => Some(key),
    }
}

impl NatsKvTable {
    /// Opens the bucket `bucket` over `client` (the connection a host's
    /// `NatsStore` uses, say), creating it if it does not exist.
    pub async fn open(
        client: async_nats::Client,
        bucket: &str,
        request_timeout: Duration,
    ) -> Result<Self, TableError> {
        let js = jetstream::ContextBuilder::new()
            .timeout(request_timeout)
            .build(client);
        let store = match js.get_key_value(bucket).await {
            Ok(store) => store,
            Err(_) => {
                // The bucket's stream as `create_key_value` makes it, made
                // directly: that call first asks for the account's limits,
                // which servers before 2.10 answer in a shape the client
                // cannot read.
                let config = jetstream::stream::Config {
                    name: format!("KV_{bucket}"),
                    subjects: vec![format!("$KV.{bucket}.>")],
                    max_messages_per_subject: 1,
                    storage: StorageType::File,
                    allow_rollup: true,
                    deny_delete: true,
                    allow_direct: true,
                    discard: jetstream::stream::DiscardPolicy::New,
                    ..Default::default()
                };
                let opening = format!("opening bucket {bucket}");
                // Another process may have created it meanwhile: that is fine.
                if let Err(create) = js.get_or_create_stream(config).await {
                    return Err(backend(&opening, create));
                }
                js.get_key_value(bucket)
                    .await
                    .map_err(|e| backend(&opening, e))?
            }
        };
        Ok(Self {
            store,
            bucket: bucket.to_string(),
        })
    }

    /// The record keys of the bucket (the completeness mark among them).
    async fn keys(&self) -> Result<Vec<String>, TableError> {
        let listing = format!("listing bucket {}", self.bucket);
        let keys: Vec<String> = self
            .store
            .keys()
            .await
            .map_err(|e| backend(&listing, e))?
            .try_collect()
            .await
            .map_err(|e| backend(&listing, e))?;
        Ok(keys.into_iter().filter_map(decode).collect())
    }

    /// The records of `keys`; `None` when a value is not text.
    async fn read(&self, keys: Vec<String>) -> Result<Option<Vec<(String, String)>>, TableError> {
        let reading = format!("reading bucket {}", self.bucket);
        let mut records = Vec::with_capacity(keys.len());
        for key in keys.into_iter().filter(|k| k != COMPLETE) {
            let Some(value) = self
                .store
                .get(encode(&key))
                .await
                .map_err(|e| backend(&reading, e))?
            else {
                continue;
            };
            match String::from_utf8(value.to_vec()) {
                Ok(value) => records.push((key, value)),
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(records))
    }

    fn writing(&self) -> String {
        format!("writing bucket {}", self.bucket)
    }
}

#[async_trait]
impl RecordTable for NatsKvTable {
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError> {
        let keys = self.keys().await?;
        if !keys.iter().any(|k| k == COMPLETE) {
            return Ok(None);
        }
        self.read(keys).await
    }

    async fn records(&self) -> Result<Vec<(String, String)>, TableError> {
        let keys = self.keys().await?;
        Ok(self.read(keys).await?.unwrap_or_default())
    }

    async fn get(&self, key: &str) -> Result<Option<Versioned>, TableError> {
        let reading = format!("reading bucket {}", self.bucket);
        let entry = self
            .store
            .entry(encode(key))
            .await
            .map_err(|e| backend(&reading, e))?;
        let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            return Ok(None);
        };
        let value = String::from_utf8(entry.value.to_vec())
            .map_err(|_| backend(&reading, "a value is not text"))?;
        Ok(Some(Versioned {
            value,
            revision: entry.revision,
        }))
    }

    async fn put(&self, key: &str, value: String) -> Result<(), TableError> {
        self.store
            .put(encode(key), value.into())
            .await
            .map(drop)
            .map_err(|e| backend(&self.writing(), e))
    }

    async fn put_if(
        &self,
        key: &str,
        value: String,
        expected: Option<u64>,
    ) -> Result<Option<u64>, TableError> {
        let key = encode(key);
        // A write that lost the race is told by the server, as the wrong
        // last revision (or, for a create, an existing key).
        let written = match expected {
            Some(revision) => self
                .store
                .update(&key, value.into(), revision)
                .await
                .map_err(|e| {
                    (
                        e.kind() == kv::UpdateErrorKind::WrongLastRevision,
                        e.to_string(),
                    )
                }),
            None => self.store.create(&key, value.into()).await.map_err(|e| {
                (
                    e.kind() == kv::CreateErrorKind::AlreadyExists,
                    e.to_string(),
                )
            }),
        };
        match written {
            Ok(revision) => Ok(Some(revision)),
            Err((true, _)) => Ok(None),
            Err((false, error)) => Err(backend(&self.writing(), error)),
        }
    }

    async fn remove(&self, key: &str) -> Result<(), TableError> {
        self.store
            .purge(encode(key))
            .await
            .map_err(|e| backend(&self.writing(), e))
    }

    async fn replace_all(&self, records: Vec<(String, String)>) -> Result<(), TableError> {
        let stale: Vec<String> = self
            .keys()
            .await?
            .into_iter()
            .filter(|k| k != COMPLETE && !records.iter().any(|(key, _)| key == k))
            .collect();
        for key in stale {
            self.remove(&key).await?;
        }
        for (key, value) in records {
            self.put(&key, value).await?;
        }
        self.put(COMPLETE, String::new()).await
    }

    async fn changes(
        &self,
    ) -> Result<Option<futures::stream::BoxStream<'static, TableChange>>, TableError> {
        let watch = self
            .store
            .watch_all()
            .await
            .map_err(|e| backend(&format!("watching bucket {}", self.bucket), e))?;
        let changes = watch.filter_map(|entry| async move {
            let entry = entry.ok()?;
            let key = decode(entry.key).filter(|k| k != COMPLETE)?;
            Some(match entry.operation {
                kv::Operation::Put => {
                    TableChange::Put(key, String::from_utf8(entry.value.to_vec()).ok()?)
                }
                kv::Operation::Delete | kv::Operation::Purge => TableChange::Removed(key),
            })
        });
        Ok(Some(changes.boxed()))
    }
}
