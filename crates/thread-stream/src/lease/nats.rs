//! `NatsLeases`: leases in a NATS JetStream KV bucket, shared by every
//! process connected to the same server or cluster.

use std::time::Duration;

use async_nats::jetstream::kv::{self, Operation, UpdateErrorKind};
use async_nats::jetstream::{self, stream::StorageType};
use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::{Lease, LeaseError, Leases, by_expiry, check_holder, check_key, expiry, now_ms};
use crate::StoreError;

/// How many compare-and-set attempts an acquire makes while the key keeps
/// changing under it (each failed attempt means another process wrote it).
const ACQUIRE_TRIES: usize = 8;

/// How many stored leases [`Leases::expired`] reads at once.
const READS_IN_FLIGHT: usize = 16;

/// Settings of [`NatsLeases`].
#[derive(Debug, Clone)]
pub struct NatsLeaseOptions {
    /// The KV bucket (`A-Z a-z 0-9 _ -`). Default `ROUNDTABLE_LEASES`.
    pub bucket: String,
    /// Copies of the bucket in a cluster (1, 3 or 5; 1 on a single server).
    /// Only used when the bucket is created. Default 1.
    pub replicas: usize,
    /// How long one request waits for the server. Default 5 s.
    pub request_timeout: Duration,
}

impl Default for NatsLeaseOptions {
    fn default() -> Self {
        Self {
            bucket: "ROUNDTABLE_LEASES".into(),
            replicas: 1,
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// [`Leases`] in a NATS JetStream KV bucket: one key per lease, its value
/// the holder and expiry as JSON, its revision the KV revision (the stream
/// sequence of its last write).
///
/// Every write is a compare-and-set on the revision (`kv.update(key, value,
/// revision)`, revision 0 for a key that does not exist), so the server
/// settles races. Expiry is in the value, not the server's per-key TTL:
/// that needs servers newer than Debian's 2.9. A release removes the key's
/// messages up to the lease's revision (a stream purge filtered to the key),
/// which removes nothing a later holder wrote, and leaves no delete marker
/// behind: the bucket holds the leases held and nothing else, which bounds
/// the cost of [`Leases::expired`] (one stream info request listing the
/// keys, then one read per key).
#[derive(Debug, Clone)]
pub struct NatsLeases {
    kv: kv::Store,
    /// `$KV.<bucket>.`: the subject of a key is this followed by the key.
    prefix: String,
}

/// A lease as stored in the bucket.
#[derive(Serialize, Deserialize)]
struct Stored {
    holder: String,
    expires_at: u64,
}

fn backend(what: &str, bucket: &str, error: impl std::fmt::Display) -> LeaseError {
    LeaseError::Store(StoreError::Backend(format!(
        "NATS lease bucket {bucket}: {what}: {error}"
    )))
}

impl NatsLeases {
    /// Opens the bucket of `options` over `client` (the connection a host's
    /// `NatsStore` uses, say), creating it if it does not exist.
    pub async fn open(
        client: async_nats::Client,
        options: &NatsLeaseOptions,
    ) -> Result<Self, StoreError> {
        let bucket = options.bucket.as_str();
        let name_ok = !bucket.is_empty()
            && bucket
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(StoreError::InvalidOptions(format!(
                "lease bucket name {bucket:?}"
            )));
        }
        let js = jetstream::ContextBuilder::new()
            .timeout(options.request_timeout)
            .build(client);
        let opening = |e: &dyn std::fmt::Display| {
            StoreError::Backend(format!("cannot open NATS lease bucket {bucket}: {e}"))
        };
        let kv = match js.get_key_value(bucket).await {
            Ok(kv) => kv,
            Err(_) => {
                // The stream `create_key_value` would make, made directly:
                // that call first asks for the account's limits, which
                // servers before 2.10 answer in a shape the client cannot
                // read. Another process creating it meanwhile is fine.
                let config = jetstream::stream::Config {
                    name: format!("KV_{bucket}"),
                    subjects: vec![format!("$KV.{bucket}.>")],
                    max_messages_per_subject: 1,
                    storage: StorageType::File,
                    num_replicas: options.replicas.max(1),
                    allow_rollup: true,
                    deny_delete: true,
                    allow_direct: true,
                    discard: jetstream::stream::DiscardPolicy::New,
                    ..Default::default()
                };
                js.get_or_create_stream(config)
                    .await
                    .map_err(|e| opening(&e))?;
                js.get_key_value(bucket).await.map_err(|e| opening(&e))?
            }
        };
        Ok(Self {
            prefix: format!("$KV.{bucket}."),
            kv,
        })
    }

    fn bucket(&self) -> &str {
        &self.kv.name
    }

    fn encode(&self, holder: &str, expires_at: u64) -> Result<Bytes, LeaseError> {
        let stored = Stored {
            holder: holder.to_string(),
            expires_at,
        };
        serde_json::to_vec(&stored)
            .map(Bytes::from)
            .map_err(|e| backend("encoding a lease", self.bucket(), e))
    }

    /// The lease a bucket entry holds; None for a delete or purge marker
    /// (left by other tools: this type never writes one).
    fn decode(&self, entry: &kv::Entry) -> Result<Option<Lease>, LeaseError> {
        if entry.operation != Operation::Put {
            return Ok(None);
        }
        let stored: Stored = serde_json::from_slice(&entry.value).map_err(|e| {
            backend(
                &format!("the lease of key {} is unreadable", entry.key),
                self.bucket(),
                e,
            )
        })?;
        Ok(Some(Lease::new(
            entry.key.clone(),
            stored.holder,
            stored.expires_at,
            entry.revision,
        )))
    }

    /// Writes `holder`'s lease on `key` if the key's last revision is
    /// `expected` (0: the key holds nothing); its new revision, or None when
    /// another write came first.
    async fn write(
        &self,
        key: &str,
        holder: &str,
        expires_at: u64,
        expected: u64,
    ) -> Result<Option<u64>, LeaseError> {
        let value = self.encode(holder, expires_at)?;
        match self.kv.update(key, value, expected).await {
            Ok(revision) => Ok(Some(revision)),
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => Ok(None),
            Err(e) => Err(backend(
                &format!("writing the lease of key {key}"),
                self.bucket(),
                e,
            )),
        }
    }

    /// One acquire attempt: Ok(Err(())) when the key changed under it.
    async fn try_acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Result<Option<Lease>, ()>, LeaseError> {
        let current = self
            .kv
            .entry(key)
            .await
            .map_err(|e| backend(&format!("reading key {key}"), self.bucket(), e))?;
        let now = now_ms();
        let expected = match &current {
            None => 0,
            Some(entry) => match self.decode(entry)? {
                Some(lease) if now < lease.expires_at => return Ok(Ok(None)),
                _ => entry.revision,
            },
        };
        let expires_at = expiry(now, ttl);
        Ok(match self.write(key, holder, expires_at, expected).await? {
            Some(revision) => Ok(Some(Lease::new(
                key.to_string(),
                holder.to_string(),
                expires_at,
                revision,
            ))),
            None => Err(()),
        })
    }
}

#[async_trait]
impl Leases for NatsLeases {
    async fn acquire(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        check_key(key)?;
        check_holder(holder)?;
        for _ in 0..ACQUIRE_TRIES {
            if let Ok(acquired) = self.try_acquire(key, holder, ttl).await? {
                return Ok(acquired);
            }
        }
        // The key kept changing: other processes are taking it.
        Ok(None)
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        let expires_at = expiry(now_ms(), ttl);
        match self
            .write(&lease.key, &lease.holder, expires_at, lease.revision())
            .await?
        {
            Some(revision) => Ok(Lease::new(
                lease.key.clone(),
                lease.holder.clone(),
                expires_at,
                revision,
            )),
            None => Err(LeaseError::Lost {
                key: lease.key.clone(),
            }),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        // Everything on the key up to and including this lease's revision:
        // if another holder wrote since, its message is later and stays.
        self.kv
            .stream
            .purge()
            .filter(format!("{}{}", self.prefix, lease.key))
            .sequence(lease.revision().saturating_add(1))
            .await
            .map(drop)
            .map_err(|e| backend(&format!("releasing key {}", lease.key), self.bucket(), e))
    }

    async fn hand_over(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.write(&lease.key, &lease.holder, now_ms(), lease.revision())
            .await
            .map(drop)
    }

    async fn expired(&self) -> Result<Vec<Lease>, LeaseError> {
        let listing = |e: &dyn std::fmt::Display| backend("listing keys", self.bucket(), e);
        let subjects: Vec<(String, usize)> = self
            .kv
            .stream
            .info_with_subjects(format!("{}>", self.prefix))
            .await
            .map_err(|e| listing(&e))?
            .try_collect()
            .await
            .map_err(|e| listing(&e))?;
        let keys = subjects
            .into_iter()
            .filter_map(|(subject, _)| subject.strip_prefix(&self.prefix).map(str::to_string));
        let entries: Vec<Option<kv::Entry>> = futures::stream::iter(keys)
            .map(|key| async move {
                self.kv
                    .entry(key.as_str())
                    .await
                    .map_err(|e| backend(&format!("reading key {key}"), self.bucket(), e))
            })
            .buffer_unordered(READS_IN_FLIGHT)
            .try_collect()
            .await?;
        let now = now_ms();
        let mut lapsed = Vec::new();
        for entry in entries.iter().flatten() {
            if let Some(lease) = self.decode(entry)?.filter(|l| now >= l.expires_at) {
                lapsed.push(lease);
            }
        }
        Ok(by_expiry(lapsed))
    }
}
