//! Seed 003's output record on GetSession: once a session is at review or
//! completed, the document its pipeline names the output, that document's
//! word count and the figures its outputs record (`record` on an output
//! rule; `dialectic_core::output_record`).

use crate::convert;
use crate::error::GatewayError;
use crate::service::Gateway;
use dialectic_core::output_record::{figures, word_count};
use dialectic_core::recipe::OutputRule;
use dialectic_core::session::SessionStatus;
use dialectic_proto::v1::SessionOutput;
use dialectic_store::sessions::SessionRow;
use dialectic_store::{StoreError, inputs, pipelines, resources};
use serde_json::Value;

impl Gateway {
    /// The session's output record, None before review or when its
    /// pipeline records nothing.
    pub(crate) async fn output_record(
        &self,
        row: &SessionRow,
    ) -> Result<Option<SessionOutput>, GatewayError> {
        let status = row.state()?;
        let completed = *status.effective() == SessionStatus::Completed;
        if !completed && *status.effective() != SessionStatus::IterationCompletePendingReview {
            return Ok(None);
        }
        // Read at every GetSession of a finished session: cached like the
        // document lists (the planner drops a project's reads when it writes).
        let name = format!("output:{}:{}:{completed}", row.id, row.iteration_count);
        let record = self
            .read_through(row.project_id, &name, || {
                self.load_output_record(row, completed)
            })
            .await?;
        Ok(Some(record).filter(|r| *r != SessionOutput::default()))
    }

    /// The record from the store and the objects; the default message when
    /// the pipeline records nothing.
    async fn load_output_record(
        &self,
        row: &SessionRow,
        completed: bool,
    ) -> Result<SessionOutput, GatewayError> {
        let rules = pipelines::recorded_outputs(self.store.pool(), row.id).await?;
        if rules.is_empty() {
            return Ok(SessionOutput::default());
        }
        let mut output = SessionOutput {
            completed_at: completed.then(|| convert::timestamp(row.updated_at)),
            ..Default::default()
        };
        for (stage, rule) in &rules {
            let Some(data) = self.current_output(row, stage, rule).await? else {
                continue;
            };
            let record = rule.record.clone().unwrap_or_default();
            output.figures.extend(figures(&data, &record.fields));
            if record.document {
                let text = data.get("content").and_then(Value::as_str);
                output.word_count = text.map_or(0, word_count);
                output.document = self.output_document(row, stage, rule).await?;
            }
        }
        Ok(output)
    }

    /// The JSON of the first current document of `rule`'s output in the
    /// session's iteration (with several models, the first one's).
    async fn current_output(
        &self,
        row: &SessionRow,
        stage: &str,
        rule: &OutputRule,
    ) -> Result<Option<Value>, GatewayError> {
        let mut conn = self
            .store
            .pool()
            .acquire()
            .await
            .map_err(StoreError::from)?;
        let docs = inputs::stage_outputs(
            &mut conn,
            row.id,
            stage,
            row.iteration_count,
            &rule.document_key,
        )
        .await?;
        let Some(doc) = docs.first() else {
            return Ok(None);
        };
        let raw = self.blob.get_string(&doc.storage_key).await?;
        Ok(serde_json::from_str(&raw).ok())
    }

    /// The rendered document of `rule`'s output, as ListStageDocuments lists it.
    async fn output_document(
        &self,
        row: &SessionRow,
        stage: &str,
        rule: &OutputRule,
    ) -> Result<Option<dialectic_proto::v1::StageDocument>, GatewayError> {
        let documents = resources::session_documents(
            self.store.pool(),
            row.user_id,
            row.id,
            Some(stage),
            Some(row.iteration_count),
        )
        .await?;
        let Some(document) = documents
            .iter()
            .find(|d| d.document_key.as_deref() == Some(rule.document_key.as_str()))
        else {
            return Ok(None);
        };
        let names = self.model_names(document.model_id.as_slice()).await?;
        Ok(Some(convert::document(document, &names)))
    }
}
