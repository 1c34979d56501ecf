//! Export: a project's objects as one zip in the seed 001 folder structure.
//!
//! The listing gives every object's size, so the archive's exact size is
//! known, and refused past `gateway.max_export_bytes`, before any byte is
//! sent. Then each object is read from S3 a piece at a time and written into
//! the zip as it arrives, and the zip goes out a chunk at a time: to the
//! caller's stream (`ExportProject`) or into an S3 multipart upload
//! (`GetExportUrl`). An export holds a few chunks in memory, never the
//! archive, whatever its size.
//!
//! A user has at most `gateway.max_exports_per_user` exports in progress in
//! one gateway process. An upload that does not complete is aborted, whether
//! the export failed or its caller went away (the upload aborts itself as it
//! drops: see [`dialectic_blob::MultipartUpload`]).

use super::{export_key, project_prefix};
use crate::convert;
use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_blob::{BlobError, BlobStore, MAX_PARTS};
use dialectic_core::error::Reason;
use dialectic_core::ids::{ProjectId, UserId};
use dialectic_core::zip::{StreamingZip, ZipError, archive_size};
use dialectic_proto::v1::{ExportChunk, ExportUrl};
use dialectic_store::projects::{self, ProjectRow};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tracing::Instrument;

/// How long a presigned export URL works.
const EXPORT_URL_TTL: Duration = Duration::from_secs(3600);

/// Size of one streamed export message (well under gRPC's 4 MiB default limit).
const EXPORT_CHUNK_BYTES: usize = 1024 * 1024;

/// Messages waiting for a slow reader; with the chunk being filled, what one
/// streamed export holds.
const EXPORT_CHUNKS_IN_FLIGHT: usize = 4;

/// Part size of an export's upload, above S3's 5 MiB floor for all parts but
/// the last.
const UPLOAD_PART_BYTES: usize = 8 * 1024 * 1024;

/// One object of the export and its place in the archive.
struct Entry {
    key: String,
    path: String,
    /// As listed: the archive is planned with it, so the object must still
    /// be this long when it is read.
    size: u64,
}

/// What an export will write, known in full before any byte is sent.
struct ExportPlan {
    project: ProjectRow,
    /// In key order.
    entries: Vec<Entry>,
    /// The archive's exact size.
    size: u64,
}

/// Why an archive stopped before its end.
enum Halt {
    /// Whoever took the bytes is gone: a caller hung up, or an upload
    /// failed (and says why itself).
    ReaderGone,
    Failed(GatewayError),
}

impl From<GatewayError> for Halt {
    fn from(e: GatewayError) -> Self {
        Halt::Failed(e)
    }
}

impl From<BlobError> for Halt {
    fn from(e: BlobError) -> Self {
        Halt::Failed(e.into())
    }
}

/// The archive came out otherwise than planned: names and lengths are
/// checked before they reach the zip, so this is a bug.
fn archive_error(e: ZipError) -> Halt {
    Halt::Failed(GatewayError::Internal(format!("export archive: {e}")))
}

/// An object that is not what the listing said by the time it is read.
fn changed(entry: &Entry) -> Halt {
    Halt::Failed(GatewayError::unavailable(
        Reason::ConcurrentUpdate,
        format!(
            "{} changed while the project was exported; export again",
            entry.path
        ),
    ))
}

/// The refusal of an export past `gateway.max_export_bytes`.
fn too_large(size: u64, max: u64) -> GatewayError {
    GatewayError::Exhausted {
        reason: Reason::ExportTooLarge,
        message: format!(
            "the project's export would be {size} bytes, more than the {max} an export may be \
             (gateway.max_export_bytes); delete sessions it no longer needs, or ask the \
             operator for a higher limit"
        ),
        limit: i64::try_from(max).unwrap_or(i64::MAX),
        current: i64::try_from(size).unwrap_or(i64::MAX),
    }
}

/// Cuts the archive's bytes into chunks of `chunk_bytes`, and holds the last
/// bytes back until the whole archive is counted: whatever goes wrong, no
/// reader gets the archive's end unless it is exactly the planned size, and
/// no byte past that size ever leaves.
struct Chunker {
    chunk_bytes: usize,
    planned: u64,
    made: u64,
    buffer: Vec<u8>,
}

impl Chunker {
    fn new(chunk_bytes: usize, planned: u64) -> Self {
        Self {
            chunk_bytes,
            planned,
            made: 0,
            buffer: Vec::new(),
        }
    }

    /// The chunks `bytes` completes.
    fn push(&mut self, bytes: Vec<u8>) -> Result<Vec<Vec<u8>>, Halt> {
        self.made = self.made.saturating_add(bytes.len() as u64);
        if self.made > self.planned {
            return Err(archive_error(ZipError::Archive(format!(
                "the archive outgrew the {} bytes it was planned at",
                self.planned
            ))));
        }
        self.buffer.extend(bytes);
        let mut full = Vec::new();
        // Strictly more than a chunk: the final bytes always wait for `last`.
        while self.buffer.len() > self.chunk_bytes {
            let rest = self.buffer.split_off(self.chunk_bytes);
            full.push(std::mem::replace(&mut self.buffer, rest));
        }
        Ok(full)
    }

    /// The final chunk, once the archive is exactly its planned size.
    fn last(self) -> Result<Vec<u8>, Halt> {
        if self.made != self.planned {
            return Err(archive_error(ZipError::Archive(format!(
                "the archive came out at {} bytes, planned at {}",
                self.made, self.planned
            ))));
        }
        Ok(self.buffer)
    }
}

/// Writes `plan`'s archive to `out` in chunks of `chunk_bytes` (the last
/// one shorter or equal), each wrapped by `wrap`; reads one object at a
/// time, a piece at a time, and waits for `out` to take each chunk.
async fn write_archive<T>(
    blob: &BlobStore,
    plan: &ExportPlan,
    chunk_bytes: usize,
    out: &mpsc::Sender<T>,
    mut wrap: impl FnMut(Vec<u8>) -> T,
) -> Result<(), Halt> {
    let mut zip = StreamingZip::new();
    let mut chunker = Chunker::new(chunk_bytes, plan.size);
    for entry in &plan.entries {
        let mut reader = match blob.get_stream(&entry.key).await {
            Ok(reader) => reader,
            Err(BlobError::NotFound(_)) => return Err(changed(entry)),
            Err(e) => return Err(e.into()),
        };
        zip.start_entry(&entry.path, entry.size)
            .map_err(archive_error)?;
        let mut read = 0u64;
        while let Some(piece) = reader.next_chunk().await? {
            read = read.saturating_add(piece.len() as u64);
            if read > entry.size {
                return Err(changed(entry));
            }
            zip.write_data(&piece).map_err(archive_error)?;
            for chunk in chunker.push(zip.take_output())? {
                out.send(wrap(chunk)).await.map_err(|_| Halt::ReaderGone)?;
            }
        }
        if read != entry.size {
            return Err(changed(entry));
        }
    }
    let tail = zip.finish().map_err(archive_error)?;
    for chunk in chunker.push(tail)? {
        out.send(wrap(chunk)).await.map_err(|_| Halt::ReaderGone)?;
    }
    out.send(wrap(chunker.last()?))
        .await
        .map_err(|_| Halt::ReaderGone)
}

/// Exports in progress in this process, by user, against
/// `gateway.max_exports_per_user`.
pub(crate) struct ExportSlots {
    /// 0: no cap.
    max_per_user: u32,
    held: Arc<Mutex<HashMap<UserId, u32>>>,
}

/// One export's slot, given back as it drops: with the export's task or
/// handler, whether it finished, failed or was cancelled.
pub(crate) struct ExportSlot {
    held: Arc<Mutex<HashMap<UserId, u32>>>,
    user: UserId,
}

impl ExportSlots {
    pub(crate) fn new(max_per_user: u32) -> Self {
        Self {
            max_per_user,
            held: Arc::default(),
        }
    }

    /// A slot for one more export of `user`'s, or RESOURCE_EXHAUSTED
    /// `EXPORT_LIMIT_REACHED` at the cap.
    fn admit(&self, user: UserId) -> Result<ExportSlot, GatewayError> {
        // Only map updates happen under the lock: a poisoned one is consistent.
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(user).or_default();
        if self.max_per_user > 0 && *count >= self.max_per_user {
            return Err(GatewayError::Exhausted {
                reason: Reason::ExportLimitReached,
                message: format!(
                    "{count} of your exports are in progress, the most one user may run at once \
                     (gateway.max_exports_per_user = {}); export again once one ends",
                    self.max_per_user
                ),
                limit: i64::from(self.max_per_user),
                current: i64::from(*count),
            });
        }
        *count += 1;
        Ok(ExportSlot {
            held: self.held.clone(),
            user,
        })
    }
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.user);
            }
        }
    }
}

/// Parts of [`UPLOAD_PART_BYTES`], or larger for an archive that would
/// otherwise take more parts than S3 allows.
fn part_bytes(size: u64) -> usize {
    let fewest = usize::try_from(size.div_ceil(MAX_PARTS as u64)).unwrap_or(usize::MAX);
    UPLOAD_PART_BYTES.max(fewest)
}

impl Gateway {
    /// The project's export in the seed 001 folder structure: every object
    /// under the project's prefix, in key order, below a `{project_slug}/`
    /// folder; refused (RESOURCE_EXHAUSTED) past `gateway.max_export_bytes`.
    async fn plan_export(
        &self,
        user: UserId,
        project_id: &str,
    ) -> Result<ExportPlan, GatewayError> {
        let id = ProjectId::parse(project_id)?;
        let project = projects::project_for_user(self.store.pool(), user, id).await?;
        // A contract analysis goes out as data too, beside its documents.
        self.store_analysis_for_export(user, project.id).await?;
        let prefix = project_prefix(project.id);
        let mut objects = self.blob.list_with_sizes(&prefix).await?;
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        let entries: Vec<Entry> = objects
            .into_iter()
            .filter_map(|o| {
                let path = convert::export_path(&project.slug, &prefix, &o.key)?;
                Some(Entry {
                    key: o.key,
                    path,
                    size: o.size,
                })
            })
            .collect();
        let size = archive_size(entries.iter().map(|e| (e.path.as_str(), e.size)))
            .map_err(|e| GatewayError::refused(Reason::ExportUnwritable, e.to_string()))?;
        if size > self.max_export_bytes {
            return Err(too_large(size, self.max_export_bytes));
        }
        Ok(ExportPlan {
            project,
            entries,
            size,
        })
    }

    /// Streams the project's archive. The plan comes first, so a refusal is
    /// a status before any byte is sent; a failure after that ends the
    /// stream with a status in place of the archive's end.
    pub(crate) async fn export_stream(
        &self,
        user: UserId,
        project_id: &str,
    ) -> Result<ReceiverStream<Result<ExportChunk, Status>>, GatewayError> {
        let slot = self.export_slots.admit(user)?;
        let plan = self.plan_export(user, project_id).await?;
        let blob = self.blob.clone();
        let (tx, rx) = mpsc::channel(EXPORT_CHUNKS_IN_FLIGHT);
        tokio::spawn(
            async move {
                // Held while the archive is written, until the reader hangs up.
                let _slot = slot;
                let mut file_name = format!("{}.zip", plan.project.slug);
                let wrap = |data| {
                    Ok(ExportChunk {
                        file_name: std::mem::take(&mut file_name),
                        data,
                    })
                };
                match write_archive(&blob, &plan, EXPORT_CHUNK_BYTES, &tx, wrap).await {
                    Ok(()) => {}
                    Err(Halt::ReaderGone) => tracing::debug!("export reader hung up"),
                    Err(Halt::Failed(e)) => {
                        tracing::warn!(error = %e, "export stopped");
                        let _ = tx.send(Err(e.into())).await;
                    }
                }
            }
            .in_current_span(),
        );
        Ok(ReceiverStream::new(rx))
    }

    /// Writes the project's archive under `exports/` by multipart upload, as
    /// it is made, and presigns it. The key keeps the previous export until
    /// the new one is complete; a failed one leaves no parts behind, and
    /// neither does one whose caller goes away (tonic then drops this
    /// future, and with it the upload, which aborts itself).
    pub(crate) async fn export_url(
        &self,
        user: UserId,
        project_id: &str,
    ) -> Result<ExportUrl, GatewayError> {
        let _slot = self.export_slots.admit(user)?;
        let plan = self.plan_export(user, project_id).await?;
        let key = export_key(&plan.project);
        let mut upload = self.blob.start_upload(&key, "application/zip").await?;
        // One part waits while another is sent: two parts of memory.
        let (tx, rx) = mpsc::channel::<Vec<u8>>(1);
        let writing = async {
            let tx = tx;
            write_archive(&self.blob, &plan, part_bytes(plan.size), &tx, |part| part).await
        };
        let uploading = async {
            // Owned here, so a failed upload drops it and the writer stops.
            let mut rx = rx;
            while let Some(part) = rx.recv().await {
                upload.put_part(part).await?;
            }
            Ok::<(), BlobError>(())
        };
        let (written, uploaded) = tokio::join!(writing, uploading);
        let failure = match (written, uploaded) {
            (Ok(()), Ok(())) => None,
            // The upload's own error: the writer then only saw its reader go.
            (_, Err(e)) => Some(GatewayError::from(e)),
            (Err(Halt::Failed(e)), Ok(())) => Some(e),
            (Err(Halt::ReaderGone), Ok(())) => Some(GatewayError::Internal(
                "the export's upload stopped taking parts".into(),
            )),
        };
        if let Some(e) = failure {
            // Awaited here, so the parts are gone before the caller hears of
            // the failure; a failed abort is tried again as `upload` drops.
            if let Err(abort) = upload.abort().await {
                tracing::warn!(error = %abort, key, "could not abort the export's upload");
            }
            return Err(e);
        }
        upload.complete().await?;
        let url = self.blob.presign_get(&key, EXPORT_URL_TTL).await?;
        let expires = chrono::Utc::now()
            + chrono::Duration::from_std(EXPORT_URL_TTL)
                .unwrap_or_else(|_| chrono::Duration::hours(1));
        Ok(ExportUrl {
            url,
            storage_key: key,
            size_bytes: plan.size,
            expires_at: Some(convert::timestamp(expires)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_full_but_the_last_and_the_end_waits_for_the_count() {
        let mut chunker = Chunker::new(4, 10);
        assert_eq!(chunker.push(b"abc".to_vec()).ok(), Some(Vec::new()));
        assert_eq!(
            chunker.push(b"defgh".to_vec()).ok(),
            Some(vec![b"abcd".to_vec()])
        );
        // Exactly a chunk's worth waits: it may be the archive's end.
        assert_eq!(
            chunker.push(b"ij".to_vec()).ok(),
            Some(vec![b"efgh".to_vec()])
        );
        assert_eq!(chunker.last().ok(), Some(b"ij".to_vec()));

        let mut short = Chunker::new(4, 10);
        assert!(short.push(b"abcdefgh".to_vec()).is_ok());
        assert!(
            matches!(short.last(), Err(Halt::Failed(_))),
            "2 bytes short"
        );

        let mut long = Chunker::new(4, 3);
        assert!(matches!(long.push(b"abcd".to_vec()), Err(Halt::Failed(_))));
    }

    #[test]
    fn parts_grow_only_past_s3s_part_count() {
        assert_eq!(part_bytes(0), UPLOAD_PART_BYTES);
        assert_eq!(part_bytes(1 << 30), UPLOAD_PART_BYTES);
        let huge = 200 * 1024 * 1024 * 1024u64;
        assert!(part_bytes(huge) as u64 * MAX_PARTS as u64 >= huge);
    }

    #[test]
    fn a_user_holds_at_most_the_cap_of_exports_and_a_dropped_one_frees_its_slot() {
        let slots = ExportSlots::new(2);
        let (alice, bob) = (UserId::new(), UserId::new());
        let first = slots.admit(alice).expect("first");
        let _second = slots.admit(alice).expect("second");
        match slots.admit(alice) {
            Err(GatewayError::Exhausted {
                reason: Reason::ExportLimitReached,
                limit: 2,
                current: 2,
                message,
            }) => assert!(message.contains("max_exports_per_user"), "{message}"),
            Err(other) => panic!("third: {other}"),
            Ok(_) => panic!("third: admitted past the cap"),
        }
        let _bobs = slots.admit(bob).expect("another user's own slots");
        drop(first);
        let _third = slots.admit(alice).expect("a dropped export frees its slot");
        assert!(slots.admit(alice).is_err());

        let uncapped = ExportSlots::new(0);
        let held: Vec<_> = (0..50).map(|_| uncapped.admit(alice)).collect();
        assert!(held.iter().all(Result::is_ok), "0: no cap");
    }

    #[test]
    fn too_large_says_by_how_much() {
        let e = too_large(2_000, 1_000);
        assert!(e.to_string().contains("2000 bytes"), "{e}");
        assert!(matches!(
            e,
            GatewayError::Exhausted {
                reason: Reason::ExportTooLarge,
                limit: 1_000,
                current: 2_000,
                ..
            }
        ));
    }
}
