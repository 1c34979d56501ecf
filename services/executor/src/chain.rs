//! A continued document's chain: the chunks written so far, in order, read
//! back from S3 to become the next turn's history (seed 001 Phase 4).

use crate::attempt::Attempt;
use crate::{Executor, permanent, retryable};
use dialectic_core::ids::ContributionId;
use dialectic_core::paths::{DocumentName, FileKind, PathContext};
use dialectic_core::shape::merge_chunks;
use dialectic_runtime::worker::AttemptError;
use dialectic_store::contributions::{self, USER_EDIT};
use dialectic_store::jobs::JobRow;

/// One earlier chunk of a document chain, as the model wrote it.
pub(crate) struct Chunk {
    pub id: ContributionId,
    pub raw: String,
}

pub(crate) struct Chain {
    /// The document identity: the chain's root contribution.
    pub identity: ContributionId,
    pub root_name: DocumentName,
    pub chunks: Vec<Chunk>,
}

impl Chain {
    /// The whole document so far and `last` after it: the chunks' JSON merged
    /// (seed 001 Phase 4). A chunk that is not JSON adds nothing.
    pub(crate) fn whole_with(&self, last: &serde_json::Value) -> serde_json::Value {
        merge_chunks(self.parsed().iter().chain(std::iter::once(last)))
    }

    /// The whole document as its chunks so far wrote it.
    pub(crate) fn written(&self) -> serde_json::Value {
        merge_chunks(self.parsed().iter())
    }

    fn parsed(&self) -> Vec<serde_json::Value> {
        self.chunks
            .iter()
            .filter_map(|c| serde_json::from_str(&c.raw).ok())
            .collect()
    }

    /// Where the document being continued is read as an input (its whole raw
    /// JSON, its rendering). Its first turn could not read it, and the whole
    /// is not written until its last turn, so a continuation's inputs skip it.
    pub(crate) fn document_keys(&self, attempt: &Attempt<'_>) -> Result<Vec<String>, AttemptError> {
        Ok(vec![
            attempt.storage_key(FileKind::RawChunk {
                name: self.root_name.clone(),
                continuation: None,
            })?,
            attempt.storage_key(FileKind::RenderedDocument {
                name: self.root_name.clone(),
            })?,
        ])
    }
}

impl Executor {
    /// The chunks written so far for the document `target` belongs to, in order.
    pub(crate) async fn chain_of(
        &self,
        job: &JobRow,
        target: ContributionId,
    ) -> Result<Chain, AttemptError> {
        let pool = self.store.pool();
        let target_row = contributions::contribution(pool, target).await?;
        let identity = target_row
            .document_relationships
            .as_ref()
            .and_then(|r| r.0.get(&job.stage_slug))
            .and_then(|v| v.as_str())
            .and_then(|v| ContributionId::parse(v).ok())
            .unwrap_or(target);
        let rows = contributions::document_chain(pool, job.session_id, &job.stage_slug, identity)
            .await?
            .into_iter()
            .filter(|c| c.contribution_type != USER_EDIT)
            .collect::<Vec<_>>();
        let root = rows.first().ok_or_else(|| {
            permanent(
                "missing_chunks",
                format!("no chunks for document {identity}"),
            )
        })?;
        let root_name = match PathContext::deconstruct(&root.raw_response_storage_path)
            .map(|c| c.file)
            .map_err(|e| permanent("bad_path", e))?
        {
            FileKind::RawChunk { name, .. } => name,
            _ => {
                return Err(permanent(
                    "bad_path",
                    "the chain's first chunk is not a raw chunk",
                ));
            }
        };
        let mut chunks = Vec::with_capacity(rows.len());
        for row in &rows {
            let raw = self
                .blob
                .get_string(&row.raw_response_storage_path)
                .await
                .map_err(|e| retryable("storage", e))?;
            chunks.push(Chunk { id: row.id, raw });
        }
        Ok(Chain {
            identity,
            root_name,
            chunks,
        })
    }
}
