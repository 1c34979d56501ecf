//! What a user's edit of a rendered document stores: the edited markdown as
//! the document's `content`, or, for a document that shows a JSON output
//! (the essay's outline), that output's JSON with the edit parsed back into
//! it (`dialectic_core::json_document`), refused naming the field that no
//! longer fits the output's rules.

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::json_document::parse_edit;
use dialectic_core::shape::merge_chunks;
use dialectic_store::contributions::{self, ContributionRow};
use dialectic_store::jobs;
use dialectic_store::resources::ResourceRow;
use serde_json::Value;

impl Gateway {
    /// The stored body of an edit of `resource`, whose chain is `chain`
    /// (first chunk `root`).
    pub(crate) async fn edit_body(
        &self,
        resource: &ResourceRow,
        root: &ContributionRow,
        chain: &[ContributionRow],
        content: &str,
    ) -> Result<Vec<u8>, GatewayError> {
        // An assembled document (the essay's draft) is its step's replies in
        // order, kept under its own key: no one reply is the whole of it.
        if resource.document_key.as_deref() != Some(root.document_key.as_str()) {
            return Err(GatewayError::bad(
                "resource_id",
                format!(
                    "this document assembles every {} its step wrote, and is not edited as a whole",
                    root.document_key
                ),
            ));
        }
        let body = if resource.is_json_backed {
            self.parsed_edit(root, chain, content).await?
        } else {
            serde_json::json!({ "content": content })
        };
        serde_json::to_vec_pretty(&body).map_err(|e| GatewayError::Internal(e.to_string()))
    }

    /// The output's JSON as the edit leaves it, checked against the output
    /// rule of the step that wrote the document.
    async fn parsed_edit(
        &self,
        root: &ContributionRow,
        chain: &[ContributionRow],
        content: &str,
    ) -> Result<Value, GatewayError> {
        let job_id = root.job_id.ok_or_else(|| {
            GatewayError::Internal(format!("document {} has no job that wrote it", root.id))
        })?;
        let step = jobs::get(self.store.pool(), job_id).await?.payload()?.step;
        let rule = step.as_ref().and_then(|s| s.own_output()).ok_or_else(|| {
            GatewayError::Internal(format!(
                "the step that wrote {} has no output rule",
                root.id
            ))
        })?;
        let current = self.current_data(chain).await?;
        parse_edit(rule, &current, content)
            .map_err(|refused| GatewayError::bad("content", refused.to_string()))
    }

    /// The document's JSON now: its latest edit, else its chunks merged.
    async fn current_data(&self, chain: &[ContributionRow]) -> Result<Value, GatewayError> {
        let parts = contributions::current_parts(chain);
        let mut replies = Vec::with_capacity(parts.len());
        for part in parts {
            let raw = self
                .blob
                .get_string(&part.raw_response_storage_path)
                .await?;
            replies.extend(serde_json::from_str::<Value>(&raw).ok());
        }
        Ok(merge_chunks(replies.iter()))
    }
}
