//! What a user's edit of a rendered document stores: the edited markdown as
//! the document's `content`, or, for a document that shows a JSON output
//! (the essay's outline), that output's JSON with the edit parsed back into
//! it (`dialectic_core::json_document`), refused naming the field that no
//! longer fits the output's rules.

use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::fact_check::record_override;
use dialectic_core::ids::{ResourceId, UserId};
use dialectic_core::json_document::parse_edit;
use dialectic_core::recipe::OutputRule;
use dialectic_core::shape::merge_chunks;
use dialectic_proto::v1::{OverrideClaimRequest, StageDocument};
use dialectic_store::contributions::{self, ContributionRow};
use dialectic_store::jobs;
use dialectic_store::resources::ResourceRow;
use serde_json::Value;

/// The longest rationale an override keeps.
const MAX_RATIONALE_CHARS: usize = 2_000;

/// A stage document being edited: its resource, its chain's first chunk
/// and the whole chain.
pub(crate) struct EditTarget {
    pub resource: ResourceRow,
    pub root: ContributionRow,
    pub chain: Vec<ContributionRow>,
}

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
        let rule = self.output_rule(root).await?;
        let current = self.current_data(chain).await?;
        parse_edit(&rule, &current, content)
            .map_err(|refused| GatewayError::bad("content", refused.to_string()))
    }

    /// The output rule of the step that wrote the document `root` begins.
    async fn output_rule(&self, root: &ContributionRow) -> Result<OutputRule, GatewayError> {
        let job_id = root.job_id.ok_or_else(|| {
            GatewayError::Internal(format!("document {} has no job that wrote it", root.id))
        })?;
        let step = jobs::get(self.store.pool(), job_id).await?.payload()?.step;
        step.as_ref()
            .and_then(|s| s.own_output())
            .cloned()
            .ok_or_else(|| {
                GatewayError::Internal(format!(
                    "the step that wrote {} has no output rule",
                    root.id
                ))
            })
    }

    /// Seed 003's user override: the writer's rationale kept on one claim
    /// of a fact-check document (an output with `verify_claims`), as a new
    /// edit version that is re-rendered; the checked verdict stays as the
    /// check left it.
    pub(crate) async fn override_claim(
        &self,
        user: UserId,
        req: OverrideClaimRequest,
    ) -> Result<StageDocument, GatewayError> {
        let id = ResourceId::parse(&req.resource_id)?;
        let rationale = req.rationale.trim();
        if rationale.is_empty() {
            return Err(GatewayError::bad("rationale", "say why the claim stands"));
        }
        if rationale.chars().count() > MAX_RATIONALE_CHARS {
            return Err(GatewayError::bad(
                "rationale",
                format!("a rationale may hold at most {MAX_RATIONALE_CHARS} characters"),
            ));
        }
        let target = self.editable_document(user, id).await?;
        let rule = self.output_rule(&target.root).await?;
        let items = rule.verify_claims.ok_or_else(|| {
            GatewayError::bad(
                "resource_id",
                format!(
                    "{} is not a fact-check: its step checks no claims",
                    target.root.document_key
                ),
            )
        })?;
        let mut data = self.current_data(&target.chain).await?;
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        record_override(&mut data, &items, req.claim as usize, rationale, &at)
            .map_err(|e| GatewayError::bad("claim", e.to_string()))?;
        let body =
            serde_json::to_vec_pretty(&data).map_err(|e| GatewayError::Internal(e.to_string()))?;
        self.store_user_edit(user, &target, body).await
    }

    /// The document's JSON now: its latest edit, else its chunks merged.
    pub(crate) async fn current_data(
        &self,
        chain: &[ContributionRow],
    ) -> Result<Value, GatewayError> {
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
