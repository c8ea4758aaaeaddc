//! [`NatsKvTable`]: a record table in a NATS JetStream KV bucket, shared by
//! every daemon over the same NATS (as the NATS thread store shares the
//! threads). Each daemon keeps what it loaded in memory and follows the
//! others' changes with a watch of the bucket.

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream::StorageType};
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};

use super::{RecordTable, TableChange, TableError};

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

    async fn keys(&self) -> Result<Vec<String>, TableError> {
        let listing = format!("listing bucket {}", self.bucket);
        self.store
            .keys()
            .await
            .map_err(|e| backend(&listing, e))?
            .try_collect()
            .await
            .map_err(|e| backend(&listing, e))
    }
}

#[async_trait]
impl RecordTable for NatsKvTable {
    async fn load(&self) -> Result<Option<Vec<(String, String)>>, TableError> {
        let reading = format!("reading bucket {}", self.bucket);
        let keys = self.keys().await?;
        if !keys.iter().any(|k| k == COMPLETE) {
            return Ok(None);
        }
        let mut records = Vec::with_capacity(keys.len());
        for key in keys.into_iter().filter(|k| k != COMPLETE) {
            let Some(value) = self
                .store
                .get(&key)
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

    async fn put(&self, key: &str, value: String) -> Result<(), TableError> {
        self.store
            .put(key, value.into())
            .await
            .map(drop)
            .map_err(|e| backend(&format!("writing bucket {}", self.bucket), e))
    }

    async fn remove(&self, key: &str) -> Result<(), TableError> {
        self.store
            .purge(key)
            .await
            .map_err(|e| backend(&format!("writing bucket {}", self.bucket), e))
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
            if entry.key == COMPLETE {
                return None;
            }
            Some(match entry.operation {
                kv::Operation::Put => {
                    TableChange::Put(entry.key, String::from_utf8(entry.value.to_vec()).ok()?)
                }
                kv::Operation::Delete | kv::Operation::Purge => TableChange::Removed(entry.key),
            })
        });
        Ok(Some(changes.boxed()))
    }
}
