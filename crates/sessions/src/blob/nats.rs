//! [`NatsBlobStore`]: blobs in a NATS JetStream object store.

use std::fmt;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::header::NATS_ROLLUP;
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::object_store::{
    self, GetErrorKind, InfoErrorKind, ObjectInfo, ObjectOptions, ObjectStore,
};
use async_nats::jetstream::stream::{StorageType, Stream as JsStream};
use async_nats::jetstream::{self, Context};
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE;
use bytes::Bytes;
use futures::TryStreamExt;
use sha2::Digest;
use tokio::io::AsyncReadExt;

use super::{BlobError, BlobInfo, BlobPath, BlobStore};
use crate::ids::SessionId;

/// Metadata publishes a write tries: a deletion marker found in the way is
/// stepped over, a live object is not.
const CREATE_ATTEMPTS: usize = 3;

/// The operation a write's backend errors name.
const STORING: &str = "storing";

/// Why a new version's metadata was not published.
enum NotCreated {
    /// A live version holds the name (or deletion markers kept appearing).
    Taken,
    /// The publish failed or its answer was lost: it may have landed.
    Unanswered(PublishError),
}

/// Settings of a [`NatsBlobStore`].
#[derive(Debug, Clone)]
pub struct NatsBlobOptions {
    /// The object store bucket (ASCII letters, digits, `_` and `-`).
    /// Default `ROUNDTABLE_BLOBS`.
    pub bucket: String,
    /// Copies of every blob in a cluster (1 to 5). Only used when the store
    /// creates the bucket.
    pub replicas: usize,
    /// The size of the chunks a blob is published in; it must fit the
    /// server's `max_payload` (1 MiB by default). Default 128 KiB, as the
    /// object store's own put.
    pub chunk_size: usize,
    /// How long one request waits for the server. Default 5 s.
    pub request_timeout: Duration,
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
}

impl Default for NatsBlobOptions {
    fn default() -> Self {
        Self {
            bucket: "ROUNDTABLE_BLOBS".into(),
            replicas: 1,
            chunk_size: 128 * 1024,
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl NatsBlobOptions {
    fn check(&self) -> Result<(), BlobError> {
        let bad = |what: String| {
            Err(BlobError::Backend {
                operation: "opening the object store",
                message: format!("invalid options: {what}"),
            })
        };
        let name_ok = !self.bucket.is_empty()
            && self
                .bucket
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return bad(format!("bucket name {:?}", self.bucket));
        }
        if self.replicas == 0 || self.replicas > 5 {
            return bad(format!("{} replicas", self.replicas));
        }
        if self.chunk_size == 0 {
            return bad("a chunk size of 0".into());
        }
        Ok(())
    }
}

/// A [`BlobStore`] on a NATS JetStream object store, shared by every
/// process connected to the same server or cluster. Cloning gives another
/// handle on the same connection.
///
/// # Layout
///
/// One object store bucket (default `ROUNDTABLE_BLOBS`, created when
/// missing) holds the blobs of every session, each as the object
/// `<session>/<path>`. Objects are written in the object store's own
/// format, so any NATS client (the `nats` CLI, another language) reads
/// them: the bytes as chunks on `$O.<bucket>.C.<nuid>`, then one metadata
/// message on `$O.<bucket>.M.<base64 of the name>` that makes the object
/// visible.
///
/// # Write-once without a race
///
/// The object store's own put is last-writer-wins: it publishes the new
/// metadata over the old. A check before the put would leave a window in
/// which two servers both see the name free and the second silently
/// replaces the first's bytes. So this store publishes the metadata itself,
/// with `Nats-Expected-Last-Subject-Sequence: 0`: the server stores it only
/// if the name's metadata subject holds no message, so of two writers
/// exactly one lands and the other is refused as a whole
/// ([`BlobError::AlreadyExists`]), its chunks purged. A metadata publish
/// whose answer is lost (a timeout, a reconnect) is settled by reading the
/// name's metadata back: it is ours if it names our chunks. A name whose
/// object another client deleted (the object store's delete leaves a
/// marker) is free, and a write expects that marker instead.
///
/// Chunks whose metadata never landed (the process died in between) are
/// invisible, never read, and take space until the bucket is purged; the
/// object store's own put has the same window.
///
/// # Listing
///
/// Object names are base64 in subjects, so a session's objects cannot be
/// selected by subject: a listing reads the metadata of every object of the
/// bucket and keeps the session's. That is one small message per blob of
/// every session, fine for the attachments and artifacts of live sessions;
/// a deployment keeping very many should delete sessions' blobs when it
/// deletes the sessions ([`BlobStore::delete_session`]).
///
/// ```no_run
/// # async fn demo() -> Result<(), roundtable_sessions::blob::BlobError> {
/// use roundtable_sessions::blob::{NatsBlobOptions, NatsBlobStore};
///
/// let blobs = NatsBlobStore::connect("nats://127.0.0.1:4222", NatsBlobOptions::default()).await?;
/// # let _ = blobs;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct NatsBlobStore {
    js: Context,
    store: ObjectStore,
    stream: JsStream,
    bucket: String,
    chunk_size: usize,
}

impl fmt::Debug for NatsBlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsBlobStore")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

fn backend(operation: &'static str, err: impl fmt::Display) -> BlobError {
    BlobError::Backend {
        operation,
        message: err.to_string(),
    }
}

impl NatsBlobStore {
    /// Connects to `url` (several servers of a cluster may be given
    /// comma-separated) and opens the bucket, creating it if it does not
    /// exist.
    pub async fn connect(url: &str, options: NatsBlobOptions) -> Result<Self, BlobError> {
        options.check()?;
        let client = roundtable_thread_stream::connect_nats(
            url,
            options.connect_timeout,
            options.request_timeout,
        )
        .await
        .map_err(|message| backend("connecting", message))?;
        Self::with_client(client, options).await
    }

    /// Opens the bucket over an existing connection (the one a host's
    /// `NatsStore` uses, say), creating it if it does not exist.
    pub async fn with_client(
        client: async_nats::Client,
        options: NatsBlobOptions,
    ) -> Result<Self, BlobError> {
        options.check()?;
        let js = jetstream::ContextBuilder::new()
            .timeout(options.request_timeout)
            .build(client);
        let opening = "opening the object store";
        let store = match js.get_object_store(&options.bucket).await {
            Ok(store) => store,
            Err(_) => {
                let config = object_store::Config {
                    bucket: options.bucket.clone(),
                    storage: StorageType::File,
                    num_replicas: options.replicas,
                    ..Default::default()
                };
                match js.create_object_store(config).await {
                    Ok(store) => store,
                    // Another process may have created it meanwhile.
                    Err(create) => js.get_object_store(&options.bucket).await.map_err(|_| {
                        backend(opening, format!("bucket {}: {create}", options.bucket))
                    })?,
                }
            }
        };
        let stream = js
            .get_stream(format!("OBJ_{}", options.bucket))
            .await
            .map_err(|e| backend(opening, format!("bucket {}: {e}", options.bucket)))?;
        Ok(Self {
            js,
            store,
            stream,
            bucket: options.bucket,
            chunk_size: options.chunk_size,
        })
    }

    /// The object's name: `<session>/<path>`.
    fn object_name(session: &SessionId, path: &BlobPath) -> String {
        format!("{session}/{path}")
    }

    fn chunk_subject(&self, nuid: &str) -> String {
        format!("$O.{}.C.{nuid}", self.bucket)
    }

    fn meta_subject(&self, name: &str) -> String {
        format!("$O.{}.M.{}", self.bucket, URL_SAFE.encode(name))
    }

    /// Publishes `bytes` as the chunks of a new object version; returns
    /// their count.
    async fn publish_chunks(&self, subject: &str, bytes: &Bytes) -> Result<usize, String> {
        // All chunks in flight at once, then every acknowledgement.
        let mut acks = Vec::new();
        let mut offset = 0;
        while offset < bytes.len() {
            let end = (offset + self.chunk_size).min(bytes.len());
            let ack = self
                .js
                .publish(subject.to_owned(), bytes.slice(offset..end))
                .await
                .map_err(|e| e.to_string())?;
            acks.push(ack);
            offset = end;
        }
        let chunks = acks.len();
        for ack in acks {
            ack.await.map_err(|e| e.to_string())?;
        }
        Ok(chunks)
    }

    /// The stream sequence of the name's last metadata message when it is
    /// a deletion marker (the object store's delete leaves one).
    async fn deletion_marker(&self, meta_subject: &str) -> Option<u64> {
        let last = self
            .stream
            .get_last_raw_message_by_subject(meta_subject)
            .await
            .ok()?;
        let info: ObjectInfo = serde_json::from_slice(&last.payload).ok()?;
        info.deleted.then_some(last.sequence)
    }

    /// The metadata of version `nuid` of object `name`: `bytes` in
    /// `chunks` chunks, with their SHA-256.
    fn object_info(&self, name: &str, nuid: &str, bytes: &Bytes, chunks: usize) -> ObjectInfo {
        let digest = sha2::Sha256::digest(bytes);
        ObjectInfo {
            name: name.to_owned(),
            description: None,
            metadata: Default::default(),
            headers: None,
            options: Some(ObjectOptions {
                link: None,
                max_chunk_size: Some(self.chunk_size),
            }),
            bucket: self.bucket.clone(),
            nuid: nuid.to_owned(),
            size: bytes.len(),
            chunks,
            modified: Some(async_nats::datetime::now()),
            digest: Some(format!("SHA-256={}", URL_SAFE.encode(digest.as_slice()))),
            deleted: false,
        }
    }

    /// Publishes a new version's metadata on `subject`, creating, never
    /// replacing: no version of the name may exist, but for the deletion
    /// marker another client's delete leaves, which the object store reads
    /// as no object.
    async fn create_meta(&self, subject: &str, meta: &Bytes) -> Result<(), NotCreated> {
        let mut expected = 0;
        for _ in 0..CREATE_ATTEMPTS {
            let mut headers = HeaderMap::new();
            headers.insert(NATS_ROLLUP, "sub");
            let message = PublishMessage::build()
                .payload(meta.clone())
                .headers(headers)
                .expected_last_subject_sequence(expected);
            let published = match self.js.send_publish(subject.to_owned(), message).await {
                Ok(ack) => ack.await,
                Err(err) => Err(err),
            };
            match published {
                Ok(_) => return Ok(()),
                Err(err) if err.kind() == PublishErrorKind::WrongLastSequence => {
                    match self.deletion_marker(subject).await {
                        Some(marker) if marker != expected => expected = marker,
                        _ => break,
                    }
                }
                Err(err) => return Err(NotCreated::Unanswered(err)),
            }
        }
        Err(NotCreated::Taken)
    }

    /// Settles a write whose metadata publish got no answer (`err`) by
    /// whether the metadata landed: this version (`nuid`) is stored,
    /// another one holds the name, none does (its chunks are discarded
    /// either way), or that cannot be told.
    async fn settle_unanswered(
        &self,
        name: &str,
        nuid: &str,
        chunk_subject: &str,
        err: PublishError,
        taken: impl FnOnce() -> BlobError,
    ) -> Result<(), BlobError> {
        match self.store.info(name).await {
            Ok(stored) if stored.nuid == nuid => Ok(()),
            Ok(_) => {
                self.discard_chunks(chunk_subject).await;
                Err(taken())
            }
            Err(lookup) if lookup.kind() == InfoErrorKind::NotFound => {
                self.discard_chunks(chunk_subject).await;
                Err(backend(STORING, format!("{name}: {err}")))
            }
            Err(lookup) => Err(backend(
                STORING,
                format!("{name}: {err}; whether it was stored is unknown: {lookup}"),
            )),
        }
    }

    /// Removes the chunks of a version that did not land (best effort: they
    /// are invisible either way).
    async fn discard_chunks(&self, subject: &str) {
        let _ = self.stream.purge().filter(subject).await;
    }
}

#[async_trait]
impl BlobStore for NatsBlobStore {
    async fn put_new(
        &self,
        session: &SessionId,
        path: &BlobPath,
        bytes: Bytes,
    ) -> Result<(), BlobError> {
        path.check_names_a_blob()?;
        let name = Self::object_name(session, path);
        let nuid = uuid::Uuid::now_v7().simple().to_string();
        let chunk_subject = self.chunk_subject(&nuid);
        let chunks = match self.publish_chunks(&chunk_subject, &bytes).await {
            Ok(chunks) => chunks,
            Err(err) => {
                self.discard_chunks(&chunk_subject).await;
                return Err(backend(STORING, format!("{name}: {err}")));
            }
        };
        let info = self.object_info(&name, &nuid, &bytes, chunks);
        let meta = Bytes::from(serde_json::to_vec(&info).map_err(|e| backend(STORING, e))?);
        let taken = || BlobError::AlreadyExists {
            session: session.clone(),
            path: path.clone(),
        };
        match self.create_meta(&self.meta_subject(&name), &meta).await {
            Ok(()) => Ok(()),
            Err(NotCreated::Taken) => {
                self.discard_chunks(&chunk_subject).await;
                Err(taken())
            }
            Err(NotCreated::Unanswered(err)) => {
                self.settle_unanswered(&name, &nuid, &chunk_subject, err, taken)
                    .await
            }
        }
    }

    async fn get(&self, session: &SessionId, path: &BlobPath) -> Result<Vec<u8>, BlobError> {
        path.check_names_a_blob()?;
        let reading = "reading";
        let name = Self::object_name(session, path);
        let mut object = match self.store.get(&name).await {
            Ok(object) => object,
            Err(err) if err.kind() == GetErrorKind::NotFound => {
                return Err(BlobError::NotFound {
                    session: session.clone(),
                    path: path.clone(),
                });
            }
            Err(err) => return Err(backend(reading, format!("{name}: {err}"))),
        };
        let mut bytes = Vec::with_capacity(object.info().size);
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| backend(reading, format!("{name}: {e}")))?;
        Ok(bytes)
    }

    async fn list(
        &self,
        session: &SessionId,
        prefix: &BlobPath,
    ) -> Result<Vec<BlobInfo>, BlobError> {
        let listing = "listing";
        let mine = format!("{session}/");
        let objects: Vec<ObjectInfo> = self
            .store
            .list()
            .await
            .map_err(|e| backend(listing, e))?
            .try_collect()
            .await
            .map_err(|e| backend(listing, e))?;
        let mut found: Vec<BlobInfo> = objects
            .into_iter()
            .filter_map(|info| {
                let path = BlobPath::parse(info.name.strip_prefix(&mine)?).ok()?;
                let size = info.size as u64;
                path.starts_with(prefix).then_some(BlobInfo { path, size })
            })
            .collect();
        found.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(found)
    }

    async fn delete_session(&self, session: &SessionId) -> Result<(), BlobError> {
        let deleting = "deleting a session's blobs";
        let mine = format!("{session}/");
        let objects: Vec<ObjectInfo> = self
            .store
            .list()
            .await
            .map_err(|e| backend(deleting, e))?
            .try_collect()
            .await
            .map_err(|e| backend(deleting, e))?;
        for info in objects.iter().filter(|info| info.name.starts_with(&mine)) {
            // The metadata first: a blob is gone as soon as it is, and its
            // chunks are then unreachable whatever happens next.
            for subject in [
                self.meta_subject(&info.name),
                self.chunk_subject(&info.nuid),
            ] {
                self.stream
                    .purge()
                    .filter(subject)
                    .await
                    .map_err(|e| backend(deleting, format!("{}: {e}", info.name)))?;
            }
        }
        Ok(())
    }
}
