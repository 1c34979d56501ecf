//! S3 adapter. Keys come from `dialectic_core::paths`; this crate only moves bytes.

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_credential_types::provider::{ProvideCredentials, future};
use aws_sdk_s3::Client;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart};
use dialectic_core::error::{ErrorCode, ErrorContract, Reason};

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("object {0} not found")]
    NotFound(String),
    #[error("S3 {operation} on {key}: {message}")]
    S3 {
        operation: &'static str,
        key: String,
        message: String,
    },
}

impl ErrorContract for BlobError {
    fn code(&self) -> ErrorCode {
        match self {
            BlobError::NotFound(_) => ErrorCode::NotFound,
            // The S3 adapter cannot tell an outage from a misconfiguration;
            // UNAVAILABLE lets clients retry the common case, a store that is down.
            BlobError::S3 { .. } => ErrorCode::Unavailable,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            BlobError::NotFound(_) => Reason::ResourceNotFound,
            BlobError::S3 { .. } => Reason::ObjectStorageUnavailable,
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            BlobError::NotFound(key) => vec![
                ("resource_type", "object".to_string()),
                ("resource_name", key.clone()),
            ],
            BlobError::S3 { operation, .. } => vec![("operation", operation.to_string())],
        }
    }
}

#[derive(Debug, Clone)]
pub struct BlobSettings {
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub access_key: String,
    pub secret_key: String,
    pub force_path_style: bool,
}

#[derive(Clone, Debug)]
pub struct BlobStore {
    client: Client,
    bucket: String,
}

/// An object as a listing names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    /// Bytes, as the listing reported them.
    pub size: u64,
}

/// An object's body, read a piece at a time as it arrives, so a large
/// object never sits in memory whole.
#[derive(Debug)]
pub struct ObjectReader {
    key: String,
    body: ByteStream,
}

impl ObjectReader {
    /// The next piece of the body; None once it is all read.
    pub async fn next_chunk(&mut self) -> Result<Option<bytes::Bytes>, BlobError> {
        self.body
            .try_next()
            .await
            .map_err(s3_err("read", &self.key))
    }
}

/// An object written in parts (S3 multipart upload), so its writer holds one
/// part at a time; nothing is visible at the key until [`complete`], and
/// [`abort`] drops the parts sent so far.
///
/// An upload that is dropped before it is completed or aborted (its writer
/// failed, or the future that held it was cancelled, as tonic cancels a
/// handler whose client went away) aborts itself: the drop spawns the abort
/// on the tokio runtime, so no part is left behind to be stored and billed.
/// A failed [`complete`] is aborted the same way. Only a process that dies
/// outright leaves parts; the bucket's lifecycle rule removes those.
///
/// [`complete`]: MultipartUpload::complete
/// [`abort`]: MultipartUpload::abort
#[derive(Debug)]
pub struct MultipartUpload {
    client: Client,
    bucket: String,
    key: String,
    upload_id: String,
    parts: Vec<CompletedPart>,
    /// Completed or aborted: nothing is left for the drop to abort.
    settled: bool,
}

/// A multipart upload that was started and neither completed nor aborted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingUpload {
    pub key: String,
    pub upload_id: String,
}

/// S3 refuses a part under 5 MiB unless it is the last one.
pub const MIN_PART_BYTES: usize = 5 * 1024 * 1024;

/// S3 numbers an upload's parts from 1 to 10,000.
pub const MAX_PARTS: usize = 10_000;

impl MultipartUpload {
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn upload_id(&self) -> &str {
        &self.upload_id
    }

    /// Sends the next part: at least [`MIN_PART_BYTES`] unless it is the last.
    pub async fn put_part(&mut self, body: Vec<u8>) -> Result<(), BlobError> {
        let number = i32::try_from(self.parts.len() + 1)
            .ok()
            .filter(|n| *n as usize <= MAX_PARTS)
            .ok_or_else(|| BlobError::S3 {
                operation: "upload_part",
                key: self.key.clone(),
                message: format!("an upload has at most {MAX_PARTS} parts"),
            })?;
        let out = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .part_number(number)
            .checksum_algorithm(ChecksumAlgorithm::Crc32)
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(s3_err("upload_part", &self.key))?;
        // S3 checks each part's checksum again on completion: an upload
        // created with an algorithm is refused without them.
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_string))
                .set_checksum_crc32(out.checksum_crc32().map(str::to_string))
                .build(),
        );
        Ok(())
    }

    /// Makes the object of the parts sent, in order. If that fails, the
    /// upload is aborted as it drops.
    pub async fn complete(mut self) -> Result<(), BlobError> {
        let parts = std::mem::take(&mut self.parts);
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(s3_err("complete_upload", &self.key))?;
        self.settled = true;
        Ok(())
    }

    /// Drops the parts sent so far; what was at the key stays. If the abort
    /// fails, it is tried once more as the upload drops.
    pub async fn abort(mut self) -> Result<(), BlobError> {
        abort_upload(&self.client, &self.bucket, &self.key, &self.upload_id).await?;
        self.settled = true;
        Ok(())
    }
}

impl Drop for MultipartUpload {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(key = %self.key, upload_id = %self.upload_id,
                "an unfinished upload was dropped outside a runtime; its parts stay until \
                 the bucket's lifecycle rule removes them");
            return;
        };
        let client = self.client.clone();
        let bucket = std::mem::take(&mut self.bucket);
        let key = std::mem::take(&mut self.key);
        let upload_id = std::mem::take(&mut self.upload_id);
        runtime.spawn(async move {
            match abort_upload(&client, &bucket, &key, &upload_id).await {
                Ok(()) => tracing::debug!(%key, %upload_id, "aborted an unfinished upload"),
                Err(e) => tracing::warn!(error = %e, %upload_id,
                    "could not abort an unfinished upload; the bucket's lifecycle rule removes its parts"),
            }
        });
    }
}

/// Aborts an upload; one that is already gone (completed or aborted) counts
/// as aborted.
async fn abort_upload(
    client: &Client,
    bucket: &str,
    key: &str,
    upload_id: &str,
) -> Result<(), BlobError> {
    match client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_upload()) => Ok(()),
        Err(e) => Err(s3_err("abort_upload", key)(e)),
    }
}

/// A failed GetObject: NotFound when the key does not exist. (A function,
/// not `get` calling `get_stream`: one more await layer pushed the planner's
/// start-up future past rustc's query depth.)
fn get_error(
    e: &aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::get_object::GetObjectError>,
    key: &str,
) -> BlobError {
    if e.as_service_error().is_some_and(|s| s.is_no_such_key()) {
        BlobError::NotFound(key.to_string())
    } else {
        BlobError::S3 {
            operation: "get",
            key: key.to_string(),
            message: format!("{e:#}"),
        }
    }
}

fn s3_err<'a, E: std::fmt::Display>(
    operation: &'static str,
    key: &'a str,
) -> impl FnOnce(E) -> BlobError + 'a {
    move |e| BlobError::S3 {
        operation,
        key: key.to_string(),
        message: format!("{e:#}"),
    }
}

/// The AWS SDK's default credential chain (environment, web identity token as
/// IRSA mounts it, ECS, instance metadata), built on first use because
/// building it reads profile files asynchronously.
#[derive(Debug)]
struct DefaultChain {
    region: Region,
    chain: tokio::sync::OnceCell<DefaultCredentialsChain>,
}

impl ProvideCredentials for DefaultChain {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let chain = self
                .chain
                .get_or_init(|| {
                    DefaultCredentialsChain::builder()
                        .region(self.region.clone())
                        .build()
                })
                .await;
            chain.provide_credentials().await
        })
    }
}

/// Static keys when configured; otherwise the pod's or machine's identity.
fn credentials(settings: &BlobSettings, region: &Region) -> SharedCredentialsProvider {
    if settings.access_key.is_empty() {
        SharedCredentialsProvider::new(DefaultChain {
            region: region.clone(),
            chain: tokio::sync::OnceCell::new(),
        })
    } else {
        SharedCredentialsProvider::new(Credentials::new(
            &settings.access_key,
            &settings.secret_key,
            None,
            None,
            "dialectic-config",
        ))
    }
}

impl BlobStore {
    pub fn new(settings: &BlobSettings) -> Self {
        let region = Region::new(settings.region.clone());
        let mut builder = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .credentials_provider(credentials(settings, &region))
            .region(region)
            .force_path_style(settings.force_path_style);
        if !settings.endpoint.is_empty() {
            builder = builder.endpoint_url(&settings.endpoint);
        }
        Self {
            client: Client::from_conf(builder.build()),
            bucket: settings.bucket.clone(),
        }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Writes (or overwrites) an object.
    pub async fn put(&self, key: &str, body: Vec<u8>, content_type: &str) -> Result<(), BlobError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(s3_err("put", key))?;
        Ok(())
    }

    pub async fn get(&self, key: &str) -> Result<Vec<u8>, BlobError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| get_error(&e, key))?;
        let bytes = out.body.collect().await.map_err(s3_err("read", key))?;
        Ok(bytes.into_bytes().to_vec())
    }

    /// The object's body as a stream of pieces (see [`ObjectReader`]).
    pub async fn get_stream(&self, key: &str) -> Result<ObjectReader, BlobError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| get_error(&e, key))?;
        Ok(ObjectReader {
            key: key.to_string(),
            body: out.body,
        })
    }

    /// Starts writing `key` in parts (see [`MultipartUpload`]).
    pub async fn start_upload(
        &self,
        key: &str,
        content_type: &str,
    ) -> Result<MultipartUpload, BlobError> {
        let out = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .checksum_algorithm(ChecksumAlgorithm::Crc32)
            .send()
            .await
            .map_err(s3_err("create_upload", key))?;
        let upload_id =
            out.upload_id()
                .filter(|id| !id.is_empty())
                .ok_or_else(|| BlobError::S3 {
                    operation: "create_upload",
                    key: key.to_string(),
                    message: "the store answered without an upload id".into(),
                })?;
        Ok(MultipartUpload {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
            parts: Vec::new(),
            settled: false,
        })
    }

    /// A URL that lets anyone holding it GET the object until it expires.
    pub async fn presign_get(
        &self,
        key: &str,
        expires_in: std::time::Duration,
    ) -> Result<String, BlobError> {
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires_in)
            .map_err(s3_err("presign", key))?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(s3_err("presign", key))?;
        Ok(request.uri().to_string())
    }

    pub async fn get_string(&self, key: &str) -> Result<String, BlobError> {
        let bytes = self.get(key).await?;
        String::from_utf8(bytes).map_err(s3_err("decode", key))
    }

    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(s3_err("delete", key))?;
        Ok(())
    }

    /// Every key under `prefix` (follows continuation tokens).
    pub async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        Ok(self
            .list_with_sizes(prefix)
            .await?
            .into_iter()
            .map(|o| o.key)
            .collect())
    }

    /// Every object under `prefix` with its size, from the listing itself
    /// (no request per object).
    pub async fn list_with_sizes(&self, prefix: &str) -> Result<Vec<ObjectInfo>, BlobError> {
        let mut objects = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token)
                .send()
                .await
                .map_err(s3_err("list", prefix))?;
            for object in out.contents() {
                let Some(key) = object.key() else { continue };
                // Callers size exports by these figures: a listing without
                // one (S3 always sends it) is an error, never a guess.
                let size = object
                    .size()
                    .and_then(|s| u64::try_from(s).ok())
                    .ok_or_else(|| BlobError::S3 {
                        operation: "list",
                        key: key.to_string(),
                        message: "the listing gave no size for the object".into(),
                    })?;
                objects.push(ObjectInfo {
                    key: key.to_string(),
                    size,
                });
            }
            match out.next_continuation_token() {
                Some(next) if out.is_truncated() == Some(true) => token = Some(next.to_string()),
                _ => break,
            }
        }
        Ok(objects)
    }

    /// Every multipart upload under `prefix` that was started and neither
    /// completed nor aborted (follows the listing's markers).
    pub async fn pending_uploads(&self, prefix: &str) -> Result<Vec<PendingUpload>, BlobError> {
        let mut uploads = Vec::new();
        let mut markers: (Option<String>, Option<String>) = (None, None);
        loop {
            let out = self
                .client
                .list_multipart_uploads()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(markers.0.take())
                .set_upload_id_marker(markers.1.take())
                .send()
                .await
                .map_err(s3_err("list_uploads", prefix))?;
            uploads.extend(out.uploads().iter().filter_map(|u| {
                Some(PendingUpload {
                    key: u.key()?.to_string(),
                    upload_id: u.upload_id()?.to_string(),
                })
            }));
            match (out.next_key_marker(), out.next_upload_id_marker()) {
                (Some(key), upload) if out.is_truncated() == Some(true) => {
                    markers = (Some(key.to_string()), upload.map(str::to_string));
                }
                _ => break,
            }
        }
        Ok(uploads)
    }

    /// Aborts every upload [`pending_uploads`] lists under `prefix`; returns
    /// how many. An upload that finishes meanwhile is no error.
    ///
    /// [`pending_uploads`]: BlobStore::pending_uploads
    pub async fn abort_pending_uploads(&self, prefix: &str) -> Result<usize, BlobError> {
        let pending = self.pending_uploads(prefix).await?;
        for upload in &pending {
            abort_upload(&self.client, &self.bucket, &upload.key, &upload.upload_id).await?;
        }
        Ok(pending.len())
    }

    /// Readiness probe: the bucket answers.
    pub async fn check(&self) -> Result<(), BlobError> {
        self.client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(s3_err("head_bucket", &self.bucket))?;
        Ok(())
    }

    /// Creates the bucket if it does not exist (tests use a bucket of their own).
    pub async fn ensure_bucket(&self) -> Result<(), BlobError> {
        if self.check().await.is_ok() {
            return Ok(());
        }
        self.client
            .create_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(s3_err("create_bucket", &self.bucket))?;
        Ok(())
    }
}
