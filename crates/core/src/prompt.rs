//! Prompt assembly (seed 001 Phase 2): raw ingredients in a
//! `PromptConstructionPayload`, one `ChatRequest` out, one model call per job.

use crate::shape::JsonKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// For assistant turns replayed in a continuation: the chunk they came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contribution_id: Option<String>,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
            contribution_id: None,
        }
    }
    pub fn assistant(content: impl Into<String>, contribution_id: Option<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            contribution_id,
        }
    }
}

/// A document handed to the model as context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceDocument {
    /// Contribution, resource or feedback id it was read from.
    pub id: String,
    /// document | header_context | feedback | seed_prompt
    pub kind: String,
    pub stage_slug: String,
    pub document_key: String,
    pub model: Option<String>,
    pub content: String,
    pub section_header: Option<String>,
    /// From the step's `inputs_relevance`, 0..=1; used to order compression.
    pub relevance: f64,
    /// The S3 object it was read from; None for the seed prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_key: Option<String>,
}

/// One input a request carries, as the request was sent (after compression):
/// what it is, where it came from and a digest of the text the model saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRef {
    /// Contribution, resource, feedback or session id it was read from.
    pub id: String,
    pub kind: String,
    pub stage_slug: String,
    pub document_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_key: Option<String>,
    /// [`content_digest`] of the text in the prompt.
    pub digest: String,
}

/// First 12 hex digits of the SHA-256 of a text: enough to tell inputs apart.
pub fn content_digest(text: &str) -> String {
    let mut hex = crate::digest::sha256_hex(text.as_bytes());
    hex.truncate(12);
    hex
}

impl InputRef {
    pub fn of(doc: &ResourceDocument) -> Self {
        InputRef {
            id: doc.id.clone(),
            kind: doc.kind.clone(),
            stage_slug: doc.stage_slug.clone(),
            document_key: doc.document_key.clone(),
            storage_key: doc.storage_key.clone(),
            digest: content_digest(&doc.content),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptConstructionPayload {
    pub system_instruction: Option<String>,
    pub conversation_history: Vec<Message>,
    pub resource_documents: Vec<ResourceDocument>,
    pub current_user_prompt: String,
}

/// Opens the note a retry adds when the model's last reply was refused.
pub const REJECTED_REPLY: &str = "Your previous reply was not accepted:";

/// What one model call receives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub system_instruction: Option<String>,
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    /// Output the step must produce (e.g. `business_case`), for providers that shape replies.
    pub output_type: String,
    /// For planning steps: the documents the plan must cover.
    #[serde(default)]
    pub output_hints: Vec<String>,
    /// Keys the reply's JSON object must have (the step's `required_keys`), for
    /// providers that can constrain structured output.
    #[serde(default)]
    pub required_keys: Vec<String>,
    /// The JSON type of the reply's keys (the output rule's `key_types`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub key_types: BTreeMap<String, JsonKind>,
    /// Blackboard entry types the step may publish (its output rule's
    /// `publishes`); providers never send it, the simulated model obeys it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publishes: Vec<String>,
    /// The step's sampling temperature, when its recipe sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// What the last user message holds, in order: provenance for logs and
    /// tests. Providers never send it; the simulated model echoes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRef>,
    /// The job that sent it: provenance, like `inputs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

/// Folds resource documents into the final user message (seed 000 steps 9–11):
/// history first, then the current prompt with its context sections.
pub fn assemble(
    payload: &PromptConstructionPayload,
    model: &str,
    max_tokens: u32,
    output_type: &str,
    output_hints: &[String],
) -> ChatRequest {
    let mut user = String::new();
    for doc in &payload.resource_documents {
        let header = doc.section_header.clone().unwrap_or_else(|| {
            format!(
                "--- {} ({} / {}) ---",
                doc.document_key, doc.stage_slug, doc.kind
            )
        });
        user.push_str(&header);
        user.push('\n');
        user.push_str(&doc.content);
        user.push_str("\n\n");
    }
    user.push_str(&payload.current_user_prompt);
    let mut messages = payload.conversation_history.clone();
    messages.push(Message::user(user));
    ChatRequest {
        model: model.to_string(),
        system_instruction: payload.system_instruction.clone(),
        messages,
        max_tokens,
        output_type: output_type.to_string(),
        output_hints: output_hints.to_vec(),
        required_keys: Vec::new(),
        key_types: BTreeMap::new(),
        publishes: Vec::new(),
        temperature: None,
        inputs: payload
            .resource_documents
            .iter()
            .map(InputRef::of)
            .collect(),
        job_id: None,
    }
}

/// Replaces `{{name}}` placeholders; unknown placeholders are left as they are.
pub fn fill_template(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in vars {
        out = out.replace(&format!("{{{{{name}}}}}"), value);
    }
    out
}

/// `business_case` → `Business Case`.
pub fn title_from_key(document_key: &str) -> String {
    document_key
        .split(['_', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembly_puts_resources_before_the_prompt_and_keeps_history() {
        let payload = PromptConstructionPayload {
            system_instruction: Some("sys".into()),
            conversation_history: vec![
                Message::user("first"),
                Message::assistant("chunk", Some("c1".into())),
            ],
            resource_documents: vec![ResourceDocument {
                id: "r".into(),
                kind: "header_context".into(),
                stage_slug: "thesis".into(),
                document_key: "header_context".into(),
                model: None,
                content: "{}".into(),
                section_header: None,
                relevance: 1.0,
                storage_key: None,
            }],
            current_user_prompt: "write it".into(),
        };
        let req = assemble(&payload, "m", 100, "business_case", &[]);
        assert_eq!(req.messages.len(), 3);
        let last = &req.messages[2].content;
        assert!(last.find("header_context").unwrap() < last.find("write it").unwrap());
        assert_eq!(req.messages[1].contribution_id.as_deref(), Some("c1"));
        assert_eq!(req.inputs.len(), 1);
        assert_eq!(req.inputs[0].digest, content_digest("{}"));
    }

    #[test]
    fn templates_and_titles() {
        assert_eq!(
            fill_template(
                "# {{title}}\n{{content}} {{x}}",
                &[("title", "T"), ("content", "C")]
            ),
            "# T\nC {{x}}"
        );
        assert_eq!(title_from_key("business_case"), "Business Case");
    }
}
