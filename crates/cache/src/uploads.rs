//! How far an upload has got, while its AddProjectDocument call runs: the
//! pages a conversion has read, then indexing, then stored or failed. Keyed
//! by the user, the project and the client_request_id the upload was sent
//! with (the id that already makes it safe to retry), so the same client can
//! ask while it waits. Losing it loses only the progress.

use crate::{Cache, CacheError};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

pub fn upload_progress_key(user_id: &str, project_id: &str, request_id: &str) -> String {
    format!("upload:{user_id}:{project_id}:{request_id}:progress")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadStage {
    Converting,
    Indexing,
    Stored,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadProgress {
    pub file_name: String,
    pub stage: UploadStage,
    pub pages_done: u32,
    pub pages_total: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failure: String,
}

/// Which upload a progress note is about.
#[derive(Debug, Clone, Copy)]
pub struct UploadKey<'a> {
    pub user_id: &'a str,
    pub project_id: &'a str,
    pub request_id: &'a str,
}

impl UploadKey<'_> {
    fn key(&self) -> String {
        upload_progress_key(self.user_id, self.project_id, self.request_id)
    }
}

impl Cache {
    /// Records `progress` as the upload's latest, kept for `ttl_secs`.
    pub async fn note_upload_progress(
        &self,
        upload: UploadKey<'_>,
        progress: &UploadProgress,
        ttl_secs: u64,
    ) -> Result<(), CacheError> {
        let value = serde_json::to_string(progress)?;
        let mut conn = self.conn.clone();
        let _: () = conn.set_ex(upload.key(), value, ttl_secs.max(1)).await?;
        Ok(())
    }

    /// The upload's latest progress, if one was noted lately.
    pub async fn upload_progress(
        &self,
        upload: UploadKey<'_>,
    ) -> Result<Option<UploadProgress>, CacheError> {
        let mut conn = self.conn.clone();
        let value: Option<String> = conn.get(upload.key()).await?;
        Ok(match value {
            Some(v) => Some(serde_json::from_str(&v)?),
            None => None,
        })
    }
}
