//! `--output json`: one JSON document per answer (one line per event when
//! watching) in the proto3 JSON mapping, as any gRPC tool prints the same
//! message: RFC 3339 timestamps, enum names, 64-bit integers as strings, every
//! field present (defaults too), keyed by the .proto field names
//! (`created_at`, as `grpcurl -format-error -emit-defaults` with proto names).
//! The mapping is derived from the descriptors the protos compile to, so a
//! field added to a message shows up without a change here.

use dialectic_proto::v1::ContractAnalysis;
use dialectic_proto::v1::{
    BlackboardEntry, DeleteProjectResponse, DocumentChunk, ExportUrl, InstallPipelineResponse,
    Model, Pipeline, Project, ProjectDocument, QueryHistoryEntry, QueryResponse, RecipeSummary,
    RegenerateDocumentResponse, RetryStageResponse, RevisitStageResponse, ServerInfo, Session,
    SessionEvent, SessionRevision, StageDocument, StageRecipe, Wallet,
};
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use serde_json::{Value, json};
use std::sync::OnceLock;

fn pool() -> Result<&'static DescriptorPool, String> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(dialectic_proto::FILE_DESCRIPTOR_SET).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// `message` (of the proto type `full_name`) in the proto3 JSON mapping.
fn mapped<M: prost::Message>(message: &M, full_name: &str) -> Result<Value, String> {
    let descriptor = pool()?
        .get_message_by_name(full_name)
        .ok_or_else(|| format!("{full_name} is not in the API's descriptors"))?;
    let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())
        .map_err(|e| e.to_string())?;
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(false);
    dynamic
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| e.to_string())
}

/// The mapping, or — should the descriptors not describe the message, a
/// build defect — an object that says so instead of a half-printed answer.
fn to_json<M: prost::Message>(message: &M, full_name: &str) -> Value {
    mapped(message, full_name).unwrap_or_else(|error| json!({ "error": error }))
}

macro_rules! json_of {
    ($($function:ident($message:ty) => $full_name:literal;)+) => {$(
        pub fn $function(message: &$message) -> Value {
            to_json(message, $full_name)
        }
    )+};
}

json_of! {
    project(Project) => "dialectic.v1.Project";
    session(Session) => "dialectic.v1.Session";
    document(StageDocument) => "dialectic.v1.StageDocument";
    event(SessionEvent) => "dialectic.v1.SessionEvent";
    wallet(Wallet) => "dialectic.v1.Wallet";
    project_document(ProjectDocument) => "dialectic.v1.ProjectDocument";
    board_entry(BlackboardEntry) => "dialectic.v1.BlackboardEntry";
    revision(SessionRevision) => "dialectic.v1.SessionRevision";
    pipeline(Pipeline) => "dialectic.v1.Pipeline";
    recipe_summary(RecipeSummary) => "dialectic.v1.RecipeSummary";
    recipe(StageRecipe) => "dialectic.v1.StageRecipe";
    export_url(ExportUrl) => "dialectic.v1.ExportUrl";
    answer(QueryResponse) => "dialectic.v1.QueryResponse";
    history_entry(QueryHistoryEntry) => "dialectic.v1.QueryHistoryEntry";
    contract_analysis(ContractAnalysis) => "dialectic.v1.ContractAnalysis";
    revisit(RevisitStageResponse) => "dialectic.v1.RevisitStageResponse";
    retry(RetryStageResponse) => "dialectic.v1.RetryStageResponse";
    chunk(DocumentChunk) => "dialectic.v1.DocumentChunk";
    model(Model) => "dialectic.v1.Model";
    regeneration(RegenerateDocumentResponse) => "dialectic.v1.RegenerateDocumentResponse";
    installed(InstallPipelineResponse) => "dialectic.v1.InstallPipelineResponse";
    deleted(DeleteProjectResponse) => "dialectic.v1.DeleteProjectResponse";
    server_info(ServerInfo) => "dialectic.v1.ServerInfo";
}

pub fn recipes(list: &[RecipeSummary]) -> Value {
    list.iter().map(recipe_summary).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialectic_proto::v1::{SessionEventKind, SessionState, TransactionKind, WalletTransaction};

    #[test]
    fn timestamps_are_rfc3339_and_enums_their_names() {
        let running = Session {
            id: "s".into(),
            state: SessionState::Running.into(),
            cost: 31_244,
            created_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            ..Default::default()
        };
        let json = session(&running);
        assert_eq!(json["created_at"], "2023-11-14T22:13:20Z");
        assert_eq!(json["state"], "SESSION_STATE_RUNNING");
        // int64 is a string in the mapping (JSON numbers lose precision past 2^53).
        assert_eq!(json["cost"], "31244");
        // Defaults are printed, so a script finds every field.
        assert_eq!(json["notice"], "");
        assert_eq!(json["iteration"], 0);
    }

    #[test]
    fn nested_messages_and_repeated_fields_map_too() {
        let spent = Wallet {
            history: vec![WalletTransaction {
                transaction_kind: TransactionKind::Capture.into(),
                amount: -5,
                ..Default::default()
            }],
            ..Default::default()
        };
        let json = wallet(&spent);
        assert_eq!(
            json["history"][0]["transaction_kind"],
            "TRANSACTION_KIND_CAPTURE"
        );
        assert_eq!(json["history"][0]["amount"], "-5");
        let started = event(&SessionEvent {
            event_kind: SessionEventKind::StageStarted.into(),
            stage_percent: 40,
            ..Default::default()
        });
        assert_eq!(started["event_kind"], "SESSION_EVENT_KIND_STAGE_STARTED");
        assert_eq!(started["stage_percent"], 40);
        assert_eq!(started["at"], Value::Null);
    }
}
